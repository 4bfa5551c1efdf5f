/* options.c — strict parsing of the shared command line and of each program's own options.
 *
 * Every mistake is reported as one line that names the option and what it accepts; nothing
 * is silently defaulted. Values may be given as "--opt v", "--opt=v", "-x v" or "-xv".
 */
#include <ctype.h>
#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_error.h"
#include "sl_options.h"

/* The shared options, described in the same table form as a program's own. Special kinds
 * (dtype, backend, collective lists) are handled by name below. */
enum { K_PLAIN, K_DTYPE, K_BACKEND, K_COLL, K_HELP, K_VERSION };

typedef struct shared_opt {
    sl_opt o;
    int kind;
    unsigned uses; /* 0: every program; else the SL_USES_* bit that must be set */
} shared_opt;

static int popcount_u(unsigned x)
{
    int n = 0;
    for (; x; x &= x - 1) n++;
    return n;
}
int sl_popcount(unsigned x) { return popcount_u(x); }

int sl_parse_size(const char *s, size_t *out)
{
    if (!s || !isdigit((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    unsigned long long mult = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': mult = 1ull << 10; break;
        case 'M': mult = 1ull << 20; break;
        case 'G': mult = 1ull << 30; break;
        case 'T': mult = 1ull << 40; break;
        default: return -1;
        }
        end++;
        if (*end == 'B' || *end == 'b') end++; /* "4MB" and "4M" mean the same */
        if (*end) return -1;
    }
    if (v > SIZE_MAX / mult) return -1;
    *out = (size_t)(v * mult);
    return 0;
}

static int parse_ll(const char *s, long long *out)
{
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static void errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

/* "--iters (-n)" for messages. */
static const char *opt_label(const sl_opt *o, char *buf, size_t len)
{
    if (o->short_name)
        snprintf(buf, len, "--%s (-%c)", o->name, o->short_name);
    else
        snprintf(buf, len, "--%s", o->name);
    return buf;
}

static int choice_index(const char *choices, const char *v)
{
    size_t vl = strlen(v);
    int idx = 0;
    for (const char *p = choices; *p; idx++) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == vl && strncmp(p, v, l) == 0) return idx;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

/* Splits a comma-separated list into buf's tokens (in place). Returns the count, or -1 when an
 * item is empty ("1,,2", "a,", ",a") or there are more than max. */
static int split_list(char *buf, char **tok, int max)
{
    int n = 0;
    for (char *p = buf;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        if (!*p || n == max) return -1;
        tok[n++] = p;
        if (!comma) return n;
        p = comma + 1;
    }
}

/* "a|b|c" of the names whose bit is set in mask. */
static void mask_names(unsigned mask, int n, const char *(*name)(int), char *buf, size_t len)
{
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        if (!(mask & (1u << i))) continue;
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s", l ? "|" : "", name(i));
    }
}
static const char *dtype_name_i(int i) { return sl_dtype_name((sl_dtype)i); }
static const char *coll_name_i(int i) { return sl_coll_name((sl_coll)i); }

/* Every list option follows one rule: each value once. A value given twice in a list would
 * be measured twice (or silently once), so it is refused here for every list of every
 * program; "all" (or an int list's word) counts as naming every value. The parsers below
 * return LIST_BAD for a malformed list and LIST_DUP with the repeated item in dup. */
enum { LIST_OK = 0, LIST_BAD = -1, LIST_DUP = -2 };

static int list_dup(char *dup, size_t duplen, const char *item)
{
    snprintf(dup, duplen, "%s", item);
    return LIST_DUP;
}

/* A comma list of names into a bit mask: lookup gives a name's bit index (-1 when it is not
 * accepted); "all" selects all_mask and stands alone. Empty items and unknown names are
 * errors. */
static int parse_mask_list(const char *v, int (*lookup)(const void *ctx, const char *name),
                           const void *ctx, unsigned all_mask, unsigned *out, char *dup,
                           size_t duplen)
{
    unsigned mask = 0;
    char buf[256], *toks[64];
    if (strlen(v) >= sizeof buf || !*v) return LIST_BAD;
    strcpy(buf, v);
    int ntok = split_list(buf, toks, 64);
    if (ntok < 0) return LIST_BAD;
    for (int k = 0; k < ntok; k++) {
        int i = strcmp(toks[k], "all") == 0 ? -2 : lookup(ctx, toks[k]);
        if (i == -1 || i >= 32) return LIST_BAD;
        if (i == -2 && ntok > 1) return list_dup(dup, duplen, "all");
        if (i >= 0 && (mask & (1u << i))) return list_dup(dup, duplen, toks[k]);
        mask |= i == -2 ? all_mask : 1u << i;
    }
    if (!mask) return LIST_BAD;
    *out = mask;
    return LIST_OK;
}

/* Lookups for parse_mask_list: a dtype or collective the program accepts, or a choice. */
typedef struct named_table {
    int (*from_name)(const char *);
    unsigned accepted;
} named_table;
static int lookup_named(const void *ctx, const char *name)
{
    const named_table *t = ctx;
    int i = t->from_name(name);
    return i >= 0 && (t->accepted & (1u << i)) ? i : -1;
}
static int lookup_choice(const void *choices, const char *name) { return choice_index(choices, name); }

static int parse_name_list(const char *v, unsigned accepted, int (*from_name)(const char *),
                           unsigned *out, char *dup, size_t duplen)
{
    named_table t = {from_name, accepted};
    return parse_mask_list(v, lookup_named, &t, accepted, out, dup, duplen);
}

static int parse_choice_list(const char *v, const char *choices, unsigned *out, char *dup,
                             size_t duplen)
{
    int n = 1;
    for (const char *p = choices; *p; p++) n += *p == '|';
    return parse_mask_list(v, lookup_choice, choices, n >= 32 ? ~0u : (1u << n) - 1, out, dup,
                           duplen);
}

/* The word an int list accepts besides integers: "max", or the option's own (choices). */
static const char *int_list_word(const sl_opt *o) { return o->choices ? o->choices : "max"; }

static int parse_int_list(const char *v, const sl_opt *o, sl_int_list *out, char *dup,
                          size_t duplen)
{
    sl_int_list l = {0};
    char buf[512], *toks[SL_MAX_LIST + 1];
    if (strlen(v) >= sizeof buf || !*v) return LIST_BAD;
    strcpy(buf, v);
    int ntok = split_list(buf, toks, SL_MAX_LIST + 1);
    if (ntok < 0) return LIST_BAD;
    for (int k = 0; k < ntok; k++) {
        const char *tok = toks[k];
        if (o->allow_max && strcmp(tok, int_list_word(o)) == 0) {
            if (l.is_max) return list_dup(dup, duplen, tok);
            l.is_max = 1;
            continue;
        }
        long long x;
        if (parse_ll(tok, &x) || x < o->min || x > o->max || l.n == SL_MAX_LIST) return LIST_BAD;
        for (int i = 0; i < l.n; i++)
            if (l.v[i] == x) return list_dup(dup, duplen, tok);
        l.v[l.n++] = x;
    }
    if (!l.n && !l.is_max) return LIST_BAD;
    *out = l;
    return LIST_OK;
}

/* A list of free names (--papi's events): well formed, each name once. */
static int check_string_list(const char *v, char *dup, size_t duplen)
{
    char buf[512], *toks[64];
    if (strlen(v) >= sizeof buf || !*v) return LIST_BAD;
    strcpy(buf, v);
    int ntok = split_list(buf, toks, 64);
    if (ntok < 0) return LIST_BAD;
    for (int k = 0; k < ntok; k++)
        for (int i = 0; i < k; i++)
            if (strcmp(toks[i], toks[k]) == 0) return list_dup(dup, duplen, toks[k]);
    return LIST_OK;
}

/* The one message for a value given twice in a list. */
static int dup_error(char *err, size_t errlen, const char *label, const char *item)
{
    if (strcmp(item, "all") == 0)
        errf(err, errlen, "%s: 'all' already names every value; give it alone", label);
    else
        errf(err, errlen, "%s: '%s' is given twice; list each value once", label, item);
    return SL_EXIT_USAGE;
}

/* What an option accepts, for its error message. */
static void describe(const sl_opt *o, char *buf, size_t len)
{
    switch (o->type) {
    case SL_OPT_INT:
        snprintf(buf, len, "an integer in [%lld, %lld]", o->min, o->max);
        break;
    case SL_OPT_SIZE:
        snprintf(buf, len, "a size in bytes in [%lld, %lld] (K/M/G suffixes allowed)", o->min, o->max);
        break;
    case SL_OPT_DOUBLE: snprintf(buf, len, "a finite number"); break;
    case SL_OPT_STRING: snprintf(buf, len, "a value"); break;
    case SL_OPT_CHOICE: snprintf(buf, len, "one of %s", o->choices); break;
    case SL_OPT_FLAG: snprintf(buf, len, "no value"); break;
    case SL_OPT_CHOICE_LIST:
        snprintf(buf, len, "a comma-separated list of %s, or all", o->choices);
        break;
    case SL_OPT_INT_LIST:
        snprintf(buf, len, "a comma-separated list of integers in [%lld, %lld]%s%s%s", o->min,
                 o->max, o->allow_max ? " or '" : "", o->allow_max ? int_list_word(o) : "",
                 o->allow_max ? "'" : "");
        break;
    }
}

static int apply_plain(const sl_opt *o, const char *v, char *err, size_t errlen)
{
    char label[64], what[1024], dup[256];
    int bad = 0;
    switch (o->type) {
    case SL_OPT_INT: {
        long long x;
        bad = parse_ll(v, &x) || x < o->min || x > o->max;
        if (!bad) *(long long *)o->dest = x;
        break;
    }
    case SL_OPT_SIZE: {
        size_t x;
        bad = sl_parse_size(v, &x) || (long long)x < o->min || (o->max && (long long)x > o->max);
        if (!bad) *(size_t *)o->dest = x;
        break;
    }
    case SL_OPT_DOUBLE: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (*v && !*end && errno == ERANGE) { /* 1e-400, 1e400: a number, but not a double */
            errf(err, errlen, "%s: '%s' is out of the range of a double (it %s); expected a "
                 "finite number", opt_label(o, label, sizeof label), v,
                 fabs(x) <= 1 ? "underflows to 0" : "overflows");
            return SL_EXIT_USAGE;
        }
        bad = !*v || *end || errno || !isfinite(x);
        if (!bad) *(double *)o->dest = x;
        break;
    }
    case SL_OPT_STRING:
        bad = !*v;
        if (!bad) *(const char **)o->dest = v;
        break;
    case SL_OPT_CHOICE: {
        int i = choice_index(o->choices, v);
        bad = i < 0;
        if (!bad) *(int *)o->dest = i;
        break;
    }
    case SL_OPT_FLAG: *(int *)o->dest = 1; break;
    case SL_OPT_INT_LIST: bad = parse_int_list(v, o, (sl_int_list *)o->dest, dup, sizeof dup); break;
    case SL_OPT_CHOICE_LIST:
        bad = parse_choice_list(v, o->choices, (unsigned *)o->dest, dup, sizeof dup);
        break;
    }
    if (bad == LIST_DUP) return dup_error(err, errlen, opt_label(o, label, sizeof label), dup);
    if (bad) {
        describe(o, what, sizeof what);
        errf(err, errlen, "%s: expected %s, got '%s'", opt_label(o, label, sizeof label), what, v);
        return SL_EXIT_USAGE;
    }
    return 0;
}

/* Every technique option of p, groups first, then the program's own. Returns the count, or -1
 * when there are more than SL_MAX_TECH_OPTS. */
#define SL_MAX_TECH_OPTS 128
static int technique_options(const sl_program *p, const sl_opt **out)
{
    const sl_opt *tables[SL_MAX_OPT_GROUPS + 1];
    int ntables = 0, n = 0;
    for (int g = 0; g < SL_MAX_OPT_GROUPS && p->groups[g]; g++) tables[ntables++] = p->groups[g]->opts;
    tables[ntables++] = p->extra;
    for (int k = 0; k < ntables; k++)
        for (const sl_opt *e = tables[k]; e && e->name; e++) {
            if (n == SL_MAX_TECH_OPTS) return -1;
            out[n++] = e;
        }
    return n;
}

int sl_options_parse(const sl_program *p, int argc, char **argv, sl_options *o, char *err,
                     size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->minbytes = p->default_minbytes ? p->default_minbytes : 8;
    o->maxbytes = p->default_maxbytes ? p->default_maxbytes : (size_t)64 << 20;
    o->stepfactor = 2;
    o->iters = p->default_iters > 0 ? p->default_iters : 20;
    o->warmup = p->default_warmup >= 0 ? p->default_warmup : 5;
    o->dtypes = 1u << p->default_dtype;
    o->check = 1;
    o->backend = SL_BACKEND_AUTO;
    o->colls = p->default_colls ? p->default_colls : 1u << p->default_coll;
    o->mpi_thread = -1;

    const long long big = (long long)1 << 62;
    const shared_opt shared[] = {
        {{"minbytes", 'b', SL_OPT_SIZE, &o->minbytes, 0, big, 0, 0, "smallest message size"}, K_PLAIN, SL_USES_SIZES},
        {{"maxbytes", 'e', SL_OPT_SIZE, &o->maxbytes, 0, big, 0, 0, "largest message size"}, K_PLAIN, SL_USES_SIZES},
        {{"stepfactor", 'f', SL_OPT_INT, &o->stepfactor, 2, 1 << 20, 0, 0, "multiply the size by N each step"}, K_PLAIN, SL_USES_SIZES},
        {{"iters", 'n', SL_OPT_INT, &o->iters, 1, 1 << 30, 0, 0, "timed iterations"}, K_PLAIN, 0},
        /* at most 2^30 - 1, so that warmup + iters (at most 2^30) fits in an int */
        {{"warmup", 'w', SL_OPT_INT, &o->warmup, 0, (1 << 30) - 1, 0, 0, "untimed warm-up iterations"}, K_PLAIN, 0},
        {{"dtype", 'd', SL_OPT_STRING, NULL, 0, 0, 0, 0, "element type(s), comma-separated"}, K_DTYPE, SL_USES_DTYPE},
        {{"check", 'c', SL_OPT_INT, &o->check, 0, 1, 0, 0, "validate against the reference (default 1)"}, K_PLAIN, 0},
        {{"backend", 'B', SL_OPT_STRING, NULL, 0, 0, 0, 0, SL_BACKEND_CHOICES}, K_BACKEND, SL_USES_BACKEND},
        {{"coll", 'C', SL_OPT_STRING, NULL, 0, 0, 0, 0, "collective implementation(s), comma-separated"}, K_COLL, SL_USES_COLL},
        {{"torus", 0, SL_OPT_STRING, &o->torus, 0, 0, 0, 0, "torus grid RxC"}, K_PLAIN, SL_USES_COLL},
        {{"torus-bidir", 0, SL_OPT_FLAG, &o->torus_bidir, 0, 0, 0, 0, "torus: bidirectional rings"}, K_PLAIN, SL_USES_COLL},
        {{"max-inflight", 0, SL_OPT_INT, &o->max_inflight, 1, 1 << 20, 0, 0, "direct: exchanges in flight"}, K_PLAIN, SL_USES_COLL},
        {{"out", 'o', SL_OPT_STRING, &o->out, 0, 0, 0, 0, "results directory (default $SL_RESULTS or results/<run-id>)"}, K_PLAIN, 0},
        {{"trace", 0, SL_OPT_FLAG, &o->trace, 0, 0, 0, 0, "write a Chrome trace of every rank's events"}, K_PLAIN, 0},
        {{"papi", 0, SL_OPT_STRING, &o->papi_events, 0, 0, 0, 0, "PAPI events to read around the timed region"}, K_PLAIN, 0},
        {{"mpi-thread", 0, SL_OPT_CHOICE, &o->mpi_thread, 0, 0, SL_ENUM_CHOICES(SL_MPI_THREAD_LIST), 0, "MPI thread level to ask for"}, K_PLAIN, 0},
        {{"quiet", 'q', SL_OPT_FLAG, &o->quiet, 0, 0, 0, 0, "print only notes and the verdict"}, K_PLAIN, 0},
        {{"help", 'h', SL_OPT_FLAG, &o->help, 0, 0, 0, 0, "this text"}, K_HELP, 0},
        {{"version", 'V', SL_OPT_FLAG, &o->version, 0, 0, 0, 0, "print the version"}, K_VERSION, 0},
    };
    const int nshared = (int)(sizeof shared / sizeof shared[0]);
    char label[64], names[512];

    /* A technique option may not reuse a shared option's name, nor another technique
     * option's: it would never be reached. */
    const sl_opt *tech[SL_MAX_TECH_OPTS];
    int ntech = technique_options(p, tech);
    if (ntech < 0) {
        errf(err, errlen, "%s has more than %d technique options", p->name, SL_MAX_TECH_OPTS);
        return SL_EXIT_RUNTIME;
    }
    for (int t = 0; t < ntech; t++) {
        const sl_opt *e = tech[t];
        for (int k = 0; k < nshared; k++)
            if (strcmp(e->name, shared[k].o.name) == 0 ||
                (e->short_name && e->short_name == shared[k].o.short_name)) {
                errf(err, errlen, "%s's option --%s clashes with the shared option --%s (-%c)",
                     p->name, e->name, shared[k].o.name, shared[k].o.short_name ? shared[k].o.short_name : '-');
                return SL_EXIT_RUNTIME;
            }
        for (int u = 0; u < t; u++)
            if (strcmp(e->name, tech[u]->name) == 0 || (e->short_name && e->short_name == tech[u]->short_name)) {
                errf(err, errlen, "%s's option --%s clashes with its option --%s", p->name, e->name,
                     tech[u]->name);
                return SL_EXIT_RUNTIME;
            }
    }

    /* An option given twice is an error rather than a silent "the last one wins" (a list
     * option takes its values as one comma-separated list). o->given records each option
     * given, by its long name (names are unique: checked above). */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *inline_val = NULL;
        const sl_opt *found = NULL;
        const shared_opt *sfound = NULL;
        char name[64];

        if (arg[0] == '-' && arg[1] == '-' && arg[2]) {
            const char *eq = strchr(arg + 2, '=');
            size_t l = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
            if (l >= sizeof name) l = sizeof name - 1;
            memcpy(name, arg + 2, l);
            name[l] = 0;
            if (eq) inline_val = eq + 1;
            for (int k = 0; k < nshared && !found; k++)
                if (strcmp(shared[k].o.name, name) == 0) found = &shared[k].o, sfound = &shared[k];
            for (int t = 0; t < ntech && !found; t++)
                if (strcmp(tech[t]->name, name) == 0) found = tech[t];
            if (!found) {
                errf(err, errlen, "unknown option '--%s'", name);
                return SL_EXIT_USAGE;
            }
        } else if (arg[0] == '-' && arg[1] && arg[1] != '-') {
            for (int k = 0; k < nshared && !found; k++)
                if (shared[k].o.short_name == arg[1]) found = &shared[k].o, sfound = &shared[k];
            for (int t = 0; t < ntech && !found; t++)
                if (tech[t]->short_name == arg[1]) found = tech[t];
            if (!found) {
                errf(err, errlen, "unknown option '-%c'", arg[1]);
                return SL_EXIT_USAGE;
            }
            if (arg[2]) inline_val = arg + 2;
        } else {
            errf(err, errlen, "unexpected argument '%s' (options start with --)", arg);
            return SL_EXIT_USAGE;
        }

        opt_label(found, label, sizeof label);
        if (sl_option_given(o, found->name)) {
            errf(err, errlen, "%s is given more than once; give each option once (a list as "
                 "one comma-separated value)", label);
            return SL_EXIT_USAGE;
        }
        /* the name is a string literal, so it outlives shared[] */
        if (o->ngiven < SL_MAX_GIVEN) o->given[o->ngiven++] = found->name;
        if (sfound && sfound->uses && !(p->uses & sfound->uses)) {
            errf(err, errlen, "%s does not apply to %s", label, p->name);
            return SL_EXIT_USAGE;
        }
        const char *v = inline_val;
        if (found->type == SL_OPT_FLAG) {
            if (v) {
                errf(err, errlen, "%s takes no value, got '%s'", label, v);
                return SL_EXIT_USAGE;
            }
        } else if (!v) {
            if (i + 1 >= argc) {
                char what[1024];
                describe(found, what, sizeof what);
                errf(err, errlen, "%s: missing value (expected %s)", label,
                     sfound && sfound->kind != K_PLAIN ? found->help : what);
                return SL_EXIT_USAGE;
            }
            v = argv[++i];
        }

        int kind = sfound ? sfound->kind : K_PLAIN;
        if (kind == K_DTYPE || kind == K_COLL) {
            const int dt = kind == K_DTYPE;
            const unsigned accepted = dt ? p->dtypes : p->colls;
            char dup[256];
            int bad = parse_name_list(v, accepted, dt ? sl_dtype_from_name : sl_coll_from_name,
                                      dt ? &o->dtypes : &o->colls, dup, sizeof dup);
            if (bad == LIST_DUP) return dup_error(err, errlen, label, dup);
            if (!dt && !bad && strcmp(v, "all") != 0) o->colls_named = o->colls;
            if (bad) {
                mask_names(accepted, dt ? SL_NDTYPES : SL_NCOLLS, dt ? dtype_name_i : coll_name_i,
                           names, sizeof names);
                errf(err, errlen, "%s: %s accepts %s|all, got '%s'", label, p->name, names, v);
                return SL_EXIT_USAGE;
            }
        } else if (kind == K_BACKEND) {
            int b = sl_backend_from_name(v);
            if (b < 0) {
                errf(err, errlen, "%s: expected %s, got '%s'", label, SL_BACKEND_CHOICES, v);
                return SL_EXIT_USAGE;
            }
            o->backend = (sl_backend)b;
        } else if (apply_plain(found, v, err, errlen)) {
            return SL_EXIT_USAGE;
        }
    }

    if (o->papi_events) {
        char dup[256];
        int bad = check_string_list(o->papi_events, dup, sizeof dup);
        if (bad == LIST_DUP) return dup_error(err, errlen, "--papi", dup);
        if (bad) {
            errf(err, errlen, "--papi: expected a comma-separated list of PAPI event names, got '%s'",
                 o->papi_events);
            return SL_EXIT_USAGE;
        }
    }
    if (o->torus) { /* RxC: two whole numbers of at least 1, an x between them */
        const char *x = strchr(o->torus, 'x');
        size_t l = strlen(o->torus), digits = strspn(o->torus, "0123456789");
        long long rows = -1, cols = -1;
        if (x && digits == (size_t)(x - o->torus) && digits > 0 && digits < 8 &&
            strspn(x + 1, "0123456789") == l - digits - 1 && l - digits - 1 > 0 && l - digits - 1 < 8) {
            rows = atoll(o->torus);
            cols = atoll(x + 1);
        }
        if (rows < 1 || cols < 1 || rows * cols > (1 << 20)) {
            errf(err, errlen, "--torus: expected a grid RxC of whole numbers of ranks (e.g. 2x4), "
                 "got '%s'", o->torus);
            return SL_EXIT_USAGE;
        }
        o->torus_rows = (int)rows;
        o->torus_cols = (int)cols;
    }
    if ((p->uses & SL_USES_SIZES) && o->minbytes > o->maxbytes) {
        errf(err, errlen, "--minbytes (-b) %zu is larger than --maxbytes (-e) %zu", o->minbytes,
             o->maxbytes);
        return SL_EXIT_USAGE;
    }
    return 0;
}

/* " (default V)" from the option's destination before parsing, for help texts that do not
 * state their default (a group shared by programs whose defaults differ). */
static void current_value(const sl_opt *o, char *buf, size_t len)
{
    char v[80] = "";
    switch (o->type) {
    case SL_OPT_INT: snprintf(v, sizeof v, "%lld", *(const long long *)o->dest); break;
    case SL_OPT_SIZE: snprintf(v, sizeof v, "%zu", *(const size_t *)o->dest); break;
    case SL_OPT_DOUBLE: snprintf(v, sizeof v, "%g", *(const double *)o->dest); break;
    case SL_OPT_CHOICE: {
        int idx = *(const int *)o->dest;
        const char *p = o->choices;
        for (int i = 0; i < idx && p; i++) {
            p = strchr(p, '|');
            if (p) p++;
        }
        if (p) snprintf(v, sizeof v, "%.*s", (int)strcspn(p, "|"), p);
        break;
    }
    default: break;
    }
    if (v[0]) snprintf(buf, len, " (default %s)", v);
}

static void print_opt_table(const char *title, const sl_opt *opts)
{
    if (!opts || !opts->name) return;
    printf("\n%s options:\n", title);
    for (const sl_opt *e = opts; e->name; e++) {
        char lhs[64];
        if (e->short_name)
            snprintf(lhs, sizeof lhs, "-%c, --%s", e->short_name, e->name);
        else
            snprintf(lhs, sizeof lhs, "    --%s", e->name);
        char def[96] = "";
        if (!e->help || !strstr(e->help, "default")) current_value(e, def, sizeof def);
        printf("  %-22s %s%s\n", lhs, e->help ? e->help : "", def);
    }
}

void sl_options_print_help(const sl_program *p)
{
    printf("%s — %s\n\nusage: %s [options]   (under MPI: scripts/sl-launch -np N %s ...)\n\n",
           p->name, p->summary, p->name, p->name);
    char names[128];
    printf("shared options:\n");
    if (p->uses & SL_USES_SIZES)
        printf("  -b, --minbytes SIZE   -e, --maxbytes SIZE   -f, --stepfactor N   (K/M/G suffixes)\n");
    printf("  -n, --iters N          timed iterations (default %d; at most 2^30)\n",
           p->default_iters > 0 ? p->default_iters : 20);
    printf("  -w, --warmup N         untimed iterations (default %d; at most 2^30 - 1, so that\n"
           "                         warmup + iters fits in 31 bits)\n",
           p->default_warmup >= 0 ? p->default_warmup : 5);
    if (p->uses & SL_USES_DTYPE) {
        mask_names(p->dtypes, SL_NDTYPES, dtype_name_i, names, sizeof names);
        printf("  -d, --dtype LIST       %s|all (default %s)\n", names, sl_dtype_name(p->default_dtype));
    }
    printf("  -c, --check 0|1        validate against the reference (default 1); wrong results exit 1\n");
    if (p->uses & SL_USES_BACKEND)
        printf("  -B, --backend %s   compute backend (default auto)\n", SL_BACKEND_CHOICES);
    if (p->uses & SL_USES_COLL) {
        mask_names(p->colls, SL_NCOLLS, coll_name_i, names, sizeof names);
        char defaults[128];
        if (p->default_colls)
            mask_names(p->default_colls, SL_NCOLLS, coll_name_i, defaults, sizeof defaults);
        else
            snprintf(defaults, sizeof defaults, "%s", sl_coll_name(p->default_coll));
        printf("  -C, --coll LIST        %s|all (default %s)\n", names,
               p->default_colls == p->colls ? "all" : defaults);
        printf("      --torus RxC        -C torus: the grid, R x C = the rank count (default the most\n"
               "                         square; a prime rank count needs 1xN, which is the ring)\n");
        printf("      --torus-bidir      -C torus: each ring sends half of every chunk each way at once\n"
               "                         (blocking collectives; non-blocking ones run it at the call)\n");
        printf("      --max-inflight K   -C direct: exchanges in flight at once, 1..ranks-1 (default\n"
               "                         ranks-1: all of them)\n");
    }
    printf("  -o, --out DIR          results directory (default $SL_RESULTS or results/<run-id>)\n");
    printf("      --trace            write a Chrome trace (<benchmark>.trace.json)\n");
    printf("      --papi EVENTS      read PAPI counters, e.g. PAPI_TOT_CYC,PAPI_L3_TCM\n");
    printf("      --mpi-thread L     MPI thread level to ask for: %s (default %s, the\n"
           "                         lowest this program needs)\n",
           SL_ENUM_CHOICES(SL_MPI_THREAD_LIST), sl_mpi_thread_name(p->mpi_thread));
    printf("  -q, --quiet            print only notes and the verdict\n");
    printf("  -h, --help  -V, --version\n");
    for (int g = 0; g < SL_MAX_OPT_GROUPS && p->groups[g]; g++)
        print_opt_table(p->groups[g]->title, p->groups[g]->opts);
    print_opt_table(p->name, p->extra);
    if (p->help_notes) printf("\n%s", p->help_notes);
    printf("\neach option is given once (twice is a usage error); a list is one comma-separated value,\n"
           "each value once ('all' alone)\n");
    printf("exit status: 0 ok, 1 a check failed, 2 usage error, 3 runtime error\n");
}

int sl_option_given(const sl_options *o, const char *name)
{
    for (int i = 0; i < o->ngiven; i++)
        if (strcmp(o->given[i], name) == 0) return 1;
    return 0;
}

const char *sl_mpi_thread_name(int level)
{
    static const char *const names[] = SL_ENUM_NAMES(SL_MPI_THREAD_LIST);
    return level >= 0 && level < SL_NMPI_THREADS ? names[level] : "?";
}

long long sl_opt_seed = 42;
static const sl_opt data_opts[] = {
    {"seed", 0, SL_OPT_INT, &sl_opt_seed, 0, 1LL << 62, NULL, 0, "seed of the generated data (default 42)"},
    {0},
};
const sl_opt_group sl_data_opts = {"data", data_opts};
