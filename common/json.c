/* json.c — the JSON writer behind manifest.json and the jsonl rows. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_error.h"
#include "sl_json.h"

void sl_json_init(sl_json *j) { memset(j, 0, sizeof *j); }

void sl_json_free(sl_json *j)
{
    free(j->buf);
    memset(j, 0, sizeof *j);
}

static void reserve(sl_json *j, size_t extra)
{
    if (j->len + extra + 1 <= j->cap) return;
    size_t cap = j->cap ? j->cap : 512;
    while (cap < j->len + extra + 1) cap *= 2;
    char *b = realloc(j->buf, cap);
    if (!b) SL_FATAL("out of memory growing a JSON buffer to %zu bytes", cap);
    j->buf = b;
    j->cap = cap;
}

static void put(sl_json *j, const char *s, size_t n)
{
    reserve(j, n);
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = 0;
}

static void putf(sl_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(sl_json *j, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(j, tmp, (size_t)n);
}

static void put_string(sl_json *j, const char *s)
{
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': put(j, "\\\"", 2); break;
        case '\\': put(j, "\\\\", 2); break;
        case '\n': put(j, "\\n", 2); break;
        case '\r': put(j, "\\r", 2); break;
        case '\t': put(j, "\\t", 2); break;
        default:
            if (*p < 0x20)
                putf(j, "\\u%04x", *p);
            else
                put(j, (const char *)p, 1);
        }
    }
    put(j, "\"", 1);
}

/* The comma and the key before a member. */
static void member(sl_json *j, const char *key)
{
    if (j->depth > 0 && j->count[j->depth]++ > 0) put(j, ",", 1);
    if (key && j->depth > 0) {
        put_string(j, key);
        put(j, ":", 1);
    }
}

static void open_(sl_json *j, const char *key, char c)
{
    member(j, key);
    put(j, &c, 1);
    if (j->depth + 1 >= SL_JSON_MAX_DEPTH) SL_FATAL("JSON nested deeper than %d", SL_JSON_MAX_DEPTH);
    j->count[++j->depth] = 0;
}

static void close_(sl_json *j, char c)
{
    put(j, &c, 1);
    j->depth--;
}

void sl_json_obj_begin(sl_json *j, const char *key) { open_(j, key, '{'); }
void sl_json_obj_end(sl_json *j) { close_(j, '}'); }
void sl_json_arr_begin(sl_json *j, const char *key) { open_(j, key, '['); }
void sl_json_arr_end(sl_json *j) { close_(j, ']'); }

void sl_json_str(sl_json *j, const char *key, const char *value)
{
    member(j, key);
    if (value)
        put_string(j, value);
    else
        put(j, "null", 4);
}

void sl_json_num(sl_json *j, const char *key, double value)
{
    member(j, key);
    if (!isfinite(value))
        put(j, "null", 4);
    else
        putf(j, "%.17g", value);
}

void sl_json_int(sl_json *j, const char *key, long long value)
{
    member(j, key);
    putf(j, "%lld", value);
}

void sl_json_bool(sl_json *j, const char *key, int value)
{
    member(j, key);
    put(j, value ? "true" : "false", value ? 4 : 5);
}

void sl_json_null(sl_json *j, const char *key)
{
    member(j, key);
    put(j, "null", 4);
}

void sl_json_raw(sl_json *j, const char *key, const char *json)
{
    member(j, key);
    put(j, json, strlen(json));
}
