/* sl_json.h — a small JSON writer into a growing buffer, for manifest.json and jsonl rows.
 *
 *   sl_json j; sl_json_init(&j);
 *   sl_json_obj_begin(&j, NULL);
 *   sl_json_str(&j, "benchmark", "mae_threads");
 *   sl_json_num(&j, "median", 1.5e-3);      NaN and infinities are written as null
 *   sl_json_obj_end(&j);
 *   fputs(j.buf, f); sl_json_free(&j);
 *
 * Keys are ignored inside arrays (pass NULL). Strings are escaped per RFC 8259.
 */
#ifndef SL_JSON_H
#define SL_JSON_H

#include <stddef.h>

#define SL_JSON_MAX_DEPTH 16

typedef struct sl_json {
    char *buf;
    size_t len, cap;
    int depth;
    int count[SL_JSON_MAX_DEPTH]; /* members written so far at each depth, for commas */
} sl_json;

void sl_json_init(sl_json *j);
void sl_json_free(sl_json *j);
void sl_json_obj_begin(sl_json *j, const char *key);
void sl_json_obj_end(sl_json *j);
void sl_json_arr_begin(sl_json *j, const char *key);
void sl_json_arr_end(sl_json *j);
void sl_json_str(sl_json *j, const char *key, const char *value); /* NULL -> null */
void sl_json_num(sl_json *j, const char *key, double value);
void sl_json_int(sl_json *j, const char *key, long long value);
void sl_json_bool(sl_json *j, const char *key, int value);
void sl_json_null(sl_json *j, const char *key);
/* Appends already-formatted JSON (e.g. a nested object) as a member. */
void sl_json_raw(sl_json *j, const char *key, const char *json);

#endif
