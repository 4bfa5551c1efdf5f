/* test_results.c — the JSON writer and the results rows: escaping, null for non-finite
 * numbers, --papi counters attached to timed rows, every emitted row valid against
 * results/schema.json (checked by scripts/validate, an independent reader), and the
 * training layer's error column printed in significant digits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "scalelab.h"
#include "sl_train.h"

static const sl_program prog = {.name = "results_test", .summary = "results under test"};

static int validate(const char *kind, const char *path, const char *extra)
{
    char cmd[1024];
    const char *top = getenv("top");
    snprintf(cmd, sizeof cmd, "%s/scripts/validate %s %s %s >&2", top ? top : ".",
             kind, path, extra ? extra : "");
    return system(cmd);
}

/* The table line emit prints for a row whose weight_rel_err is v, under the training layer's
 * check columns (error, check). */
static void error_cell(double v, char *out, size_t len)
{
    static const sl_column cols[] = {SL_TRAIN_COLUMNS_CHECK};
    sl_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.prog = &prog;
    ctx.nranks = 1;
    ctx.cols = cols;
    ctx.ncols = (int)(sizeof cols / sizeof cols[0]);
    sl_result r;
    sl_result_init(&ctx, &r, "v");
    sl_result_metric(&r, "weight_rel_err", v, "ratio");
    sl_result_check(&r, SL_CHECK_PASS, v, NULL);
    fflush(stdout);
    FILE *tmp = tmpfile();
    int saved = dup(STDOUT_FILENO);
    dup2(fileno(tmp), STDOUT_FILENO);
    sl_result_emit(&ctx, &r);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    rewind(tmp);
    char line[256] = "", *word;
    if (!fgets(line, sizeof line, tmp)) line[0] = 0;
    fclose(tmp);
    word = strtok(line, " \n");
    snprintf(out, len, "%s", word ? word : "");
}

int main(void)
{
    sl_json j;
    sl_json_init(&j);
    sl_json_obj_begin(&j, NULL);
    sl_json_str(&j, "s", "quote \" backslash \\ newline \n tab \t bell \a");
    sl_json_num(&j, "nan", NAN);
    sl_json_num(&j, "inf", INFINITY);
    sl_json_num(&j, "x", 0.1);
    sl_json_int(&j, "i", -42);
    sl_json_bool(&j, "t", 1);
    sl_json_str(&j, "null", NULL);
    sl_json_arr_begin(&j, "a");
    sl_json_int(&j, NULL, 1);
    sl_json_obj_begin(&j, NULL);
    sl_json_obj_end(&j);
    sl_json_arr_end(&j);
    sl_json_obj_end(&j);
    const char *want = "{\"s\":\"quote \\\" backslash \\\\ newline \\n tab \\t bell \\u0007\","
                       "\"nan\":null,\"inf\":null,\"x\":0.10000000000000001,\"i\":-42,\"t\":true,"
                       "\"null\":null,\"a\":[1,{}]}";
    ok(strcmp(j.buf, want) == 0, "JSON writer: escapes, null for NaN/inf, commas, nesting");
    if (strcmp(j.buf, want) != 0) diag("got  %s\nwant %s", j.buf, want);
    sl_json_free(&j);

    /* Rows through the real emit path into a file. */
    char dir[] = "/tmp/scalelab-results-XXXXXX";
    ok(mkdtemp(dir) != NULL, "temporary directory");
    char path[256];
    snprintf(path, sizeof path, "%s/results_test.jsonl", dir);

    sl_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.prog = &prog;
    ctx.nranks = 3;
    ctx.opt.iters = 4;
    ctx.opt.check = 1;
    ctx.opt.quiet = 1;
    snprintf(ctx.run_id, sizeof ctx.run_id, "test-run");
    ctx.jsonl = fopen(path, "w");
    ok(ctx.jsonl != NULL, "open the jsonl file");

    sl_result r;
    sl_result_init(&ctx, &r, "ring");
    r.backend = "cpu";
    r.collective = "ring";
    r.dtype = "f32";
    sl_result_param_num(&r, "bytes", 1048576);
    sl_result_param_str(&r, "op", "sum \"quoted\"");
    double t[] = {0.003, 0.001, 0.002, 0.004};
    sl_stats st;
    sl_stats_compute(t, 4, &st);
    sl_result_set_time(&r, &st);
    sl_result_metric(&r, "busbw", 12.5, "GB/s");
    sl_result_metric(&r, "busbw_one_rank", NAN, "GB/s");
    snprintf(r.headline, sizeof r.headline, "busbw");
    sl_result_gate(&r, "busbw_one_rank");
    ok(r.gate[0] == 0, "a gate metric without a value (NaN) leaves the gate null");
    sl_result_gate(&r, "no_such_metric");
    ok(r.gate[0] == 0, "an absent gate metric leaves the gate null");
    sl_result_gate(&r, "busbw");
    sl_result_check(&r, SL_CHECK_PASS, 0, NULL);
    sl_result_emit(&ctx, &r);
    is_int(ctx.status, 0, "a passing row leaves the status at 0");

    /* file must already hold the row: emit flushes */
    FILE *peek = fopen(path, "r");
    char line[4096] = "";
    ok(peek && fgets(line, sizeof line, peek) && strstr(line, "\"variant\":\"ring\""),
       "the row is on disk as soon as it is emitted (flushed)");
    if (peek) fclose(peek);
    ok(strstr(line, "\"busbw_one_rank\":{\"value\":null,\"unit\":\"GB/s\"}") != NULL,
       "a not-applicable metric is null, not 0");
    ok(strstr(line, "\"median\":0.0025") != NULL, "median time in seconds");
    ok(strstr(line, "\"samples\":[0.0030000000000000001,0.001,0.002,0.0040000000000000001],"
                    "\"samples_kind\":\"all\"") != NULL,
       "time.samples: the four samples in iteration order, full precision, kind all");
    ok(strstr(line, "\"gate\":\"busbw\"") != NULL, "the gate names its metric");

    sl_result_init(&ctx, &r, "probe");
    sl_result_metric(&r, "read_bw", 20, "GB/s");
    sl_result_emit(&ctx, &r); /* untimed: time is null */

    sl_result_init(&ctx, &r, "tree");
    sl_result_check(&r, SL_CHECK_FAIL, 3, "element %d differs", 7);
    sl_result_emit(&ctx, &r);
    is_int(ctx.status, SL_EXIT_CHECK, "a failed check sets the exit status to 1");
    is_int(ctx.nfailed, 1, "one failed row counted");
    is_int(ctx.nrows, 3, "three rows counted");

    /* --papi: a row whose time came from a timed loop carries that loop's counters (as
     * sl_time_loop leaves them in the stats), named after the run's events, without the
     * program asking; an untimed row carries none. No real counters are needed for this. */
    ctx.papi.active = 1;
    ctx.papi.nevents = 2;
    snprintf(ctx.papi.names[0], sizeof ctx.papi.names[0], "PAPI_TOT_CYC");
    snprintf(ctx.papi.names[1], sizeof ctx.papi.names[1], "PAPI_L3_TCM");
    sl_stats cst = st;
    cst.ncounters = 2, cst.counters[0] = 123456789, cst.counters[1] = 42;
    sl_result_init(&ctx, &r, "counted");
    sl_result_set_time(&r, &cst);
    sl_result_emit(&ctx, &r);
    is_int(r.ncounters, 0, "emit leaves the caller's row as it was");
    sl_result_init(&ctx, &r, "uncounted");
    sl_result_metric(&r, "model", 1, "");
    sl_result_emit(&ctx, &r);
    fflush(ctx.jsonl);
    peek = fopen(path, "r");
    char counted[4096] = "", uncounted[4096] = "";
    while (peek && fgets(line, sizeof line, peek)) {
        if (strstr(line, "\"variant\":\"counted\"")) snprintf(counted, sizeof counted, "%s", line);
        if (strstr(line, "\"variant\":\"uncounted\"")) snprintf(uncounted, sizeof uncounted, "%s", line);
    }
    if (peek) fclose(peek);
    ok(strstr(counted, "\"counters\":{\"PAPI_TOT_CYC\":123456789,\"PAPI_L3_TCM\":42}") != NULL,
       "a timed row carries the counters of its timed loop");
    if (!strstr(counted, "PAPI_TOT_CYC")) diag("got %s", counted);
    ok(strstr(uncounted, "\"counters\":{}") != NULL, "an untimed row carries none");
    ctx.papi.active = 0;
    fclose(ctx.jsonl);

    is_int(validate("rows", path, "--min-rows 3"), 0, "every row is valid JSON with the schema's fields");
    ok(isnan(sl_result_get(&r, "nothing")), "an absent metric reads as NaN");

    /* A deliberately broken file must be rejected by the validator (so the check above means
     * something). */
    char broken[256];
    snprintf(broken, sizeof broken, "%s/broken.jsonl", dir);
    FILE *b = fopen(broken, "w");
    fputs("{\"schema_version\":1,\"run_id\":\"x\"}\n", b);
    fclose(b);
    ok(validate("rows", broken, NULL) != 0, "the validator rejects a row without required fields");

    /* Relative errors span decades: 1.7e-4 (a tolerance's order) must not print as 0.00. */
    const struct { double v; const char *want; } cells[] = {
        {1.71234e-4, "0.000171"}, {5.7346e-8, "5.73e-08"}, {0.0169, "0.0169"}, {0, "0"}};
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
        char got[64];
        error_cell(cells[i].v, got, sizeof got);
        ok(strcmp(got, cells[i].want) == 0, "the training layer's error column prints %g as %s", cells[i].v,
           cells[i].want);
        if (strcmp(got, cells[i].want) != 0) diag("got '%s'", got);
    }

    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ok(system(cmd) == 0, "clean up");
    done_testing();
    return exit_status();
}
