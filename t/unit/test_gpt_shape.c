/* test_gpt_shape.c — the GPT shape's analytic figures (benchmarks/train/gpt_shape.h) on cases
 * computed by hand: GPT-2 small's parameter count, and a tiny shape's parameters, training
 * FLOPs, activation bytes per block and ZeRO's model states; the shape's checks and how the
 * options given change the default or the preset. */
#include <math.h>
#include <string.h>

#include "gpt_shape.h"
#include "../tap.h"

static void check_gpt2_small(void)
{
    /* 12·12·768² + 13·12·768 + 50257·768 + 1024·768 + 2·768
     * = 84934656 + 119808 + 38597376 + 786432 + 1536 */
    is_double(sl_gpt_params(&sl_gpt2_small), 124439808, 0, "gpt2-small: 124,439,808 parameters (tied embeddings)");
    char err[256] = "";
    ok(sl_gpt_check(&sl_gpt2_small, err, sizeof err) == 0, "gpt2-small is a valid shape");
    ok(sl_gpt_check(&sl_gpt_default, err, sizeof err) == 0, "the default shape is valid");
}

static void check_tiny(void)
{
    /* L 2, h 8, a 2, s 4 (table 4), V 10, b 3 */
    const sl_gpt_shape g = {.layers = 2, .d_model = 8, .heads = 2, .seq = 4, .max_seq = 4, .vocab = 10, .batch = 3};
    /* 12·2·64 + 13·2·8 + 10·8 + 4·8 + 2·8 = 1536 + 208 + 80 + 32 + 16 */
    is_double(sl_gpt_params(&g), 1872, 0, "tiny: parameters");
    /* 72·3·4·2·64 · (1 + 4/48 + 10/192) = 110592 · 109/96 */
    is_double(sl_gpt_flops_step(&g, 3), 125568, 1e-6, "tiny: training FLOPs per step");
    /* s·b·h = 96; store all 96·(34 + 5·2·4/8) = 96·39 */
    is_double(sl_gpt_activ_block(&g, 3, SL_GPT_STORE_ALL), 3744, 1e-9, "tiny: activation bytes per block, store all");
    is_double(sl_gpt_activ_block(&g, 3, SL_GPT_SELECTIVE), 3264, 1e-9, "tiny: selective recomputation 34sbh");
    is_double(sl_gpt_activ_block(&g, 3, SL_GPT_FULL_RECOMPUTE), 192, 1e-9, "tiny: full recomputation 2sbh");
    /* a larger table adds its rows' h each: 6 more rows of 8 */
    sl_gpt_shape t = g;
    t.max_seq = 10;
    is_double(sl_gpt_params(&t), 1872 + 48, 0, "the position table's rows are parameters");
}

static void check_zero(void)
{
    static const double pgo[3] = {2, 2, 12};
    /* Psi 1000, Nd 4: 16Psi, 4Psi + 12Psi/Nd, 2Psi + 14Psi/Nd, 16Psi/Nd */
    is_double(sl_zero_states(0, 1000, 4, pgo), 16000, 0, "ZeRO-0: 16Psi");
    is_double(sl_zero_states(1, 1000, 4, pgo), 7000, 0, "ZeRO-1: 4Psi + 12Psi/Nd");
    is_double(sl_zero_states(2, 1000, 4, pgo), 5500, 0, "ZeRO-2: 2Psi + 14Psi/Nd");
    is_double(sl_zero_states(3, 1000, 4, pgo), 4000, 0, "ZeRO-3: 16Psi/Nd");
}

static int fails_naming(sl_gpt_shape g, const char *opt)
{
    char err[256] = "";
    return sl_gpt_check(&g, err, sizeof err) == -1 && strstr(err, opt) == err && !strchr(err, '\n');
}

static void check_bad_shapes(void)
{
    sl_gpt_shape g = sl_gpt_default;
    g.heads = 3; /* 128 % 3 */
    ok(fails_naming(g, "--heads"), "heads not dividing d-model: --heads");
    g = sl_gpt_default;
    g.seq = g.max_seq + 1;
    ok(fails_naming(g, "--seq"), "seq beyond the position table: --seq");
    g = sl_gpt_default;
    g.vocab = 1;
    ok(fails_naming(g, "--vocab"), "a vocabulary of 1: --vocab");
    g = sl_gpt_default;
    g.dropout = 1;
    ok(fails_naming(g, "--dropout"), "dropout 1: --dropout");
    g.dropout = -0.5;
    ok(fails_naming(g, "--dropout"), "dropout < 0: --dropout");
    g.dropout = NAN;
    ok(fails_naming(g, "--dropout"), "dropout NaN: --dropout");
}

static void check_resolve(void)
{
    sl_gpt_options o = {.preset = -1, .dropout = NAN};
    sl_gpt_shape g = sl_gpt_resolve(&o);
    ok(!memcmp(&g, &sl_gpt_default, sizeof g), "no option: the default shape");
    o.seq = 100;
    g = sl_gpt_resolve(&o);
    ok(g.seq == 100 && g.max_seq == 100, "without a preset the position table holds --seq rows");
    o.preset = 0;
    o.seq = 2048;
    o.layers = 2;
    g = sl_gpt_resolve(&o);
    ok(g.seq == 2048 && g.max_seq == 1024 && g.layers == 2 && g.d_model == 768,
       "the preset's table stays 1024 rows; options given change the preset");
    o.max_seq = 4096;
    g = sl_gpt_resolve(&o);
    ok(g.max_seq == 4096, "--max-seq sizes the table");
}

int main(void)
{
    check_gpt2_small();
    check_tiny();
    check_zero();
    check_bad_shapes();
    check_resolve();
    done_testing();
    return exit_status();
}
