/* sl_expected.h — what a row's figure should be on the hardware it ran on: datasheet and
 * published figures per device or link (the JSON files in results/expected/, each figure with
 * its source, compiled into expected_table.c by scripts/expected-table), or, on a CPU, the
 * suite's own memory probe of the same run. sl_result_emit adds to each row that has a
 * comparable metric
 *   metrics  expected     (the metric's unit)   the figure, in the measured metric's unit
 *            of_expected  (fraction)            measured / expected
 *   params   expected_of                        the metric compared (busbw, gflops, tflops, ...)
 *            expected_source                    the file and figure, "measured: ..." for a
 *                                               probe, or "no expected value: WHY" (no guess)
 * (results/schema.md, "Expected values"). The rules, which metric of which program is compared
 * with which figure, are in expected.c. */
#ifndef SL_EXPECTED_H
#define SL_EXPECTED_H

#include "sl_results.h"

typedef struct sl_expected_figure {
    const char *key;    /* what identifies the hardware: a GPU's name as CUDA reports it,
                           net:<Mb/s>, pcie:<speed>:<width> */
    const char *figure; /* f32_tflops, bf16_tflops, hbm_bw, nvlink_bw, net_bw, pcie_bw, ... */
    double value;
    const char *unit;
    const char *source; /* datasheet or publication, with the figure as it gives it */
    const char *file;   /* results/expected/<file> */
    const char *device;
} sl_expected_figure;

extern const sl_expected_figure sl_expected_table[];
extern const int sl_expected_ntable;

/* The table's entry for (key, figure), or NULL. */
const sl_expected_figure *sl_expected_find(const char *key, const char *figure);

/* The hardware the rows are judged against: rank 0's first GPU and its host's fastest link. */
typedef struct sl_expected_hw {
    char gpu[128];      /* the name CUDA reports; "" with no device or no CUDA */
    char net[32];       /* net:<Mb/s>, "" where no link speed was found */
    char net_from[96];  /* where the speed came from ("eth0"), or why there is none */
    int simulated;      /* SimGrid: the hardware is the platform file's, not this machine's */
} sl_expected_hw;

/* Fills hw from this machine (CUDA's device names, sysfs: /sys/class/net/<if>/speed of the
 * interfaces that are up and have a device, /sys/class/infiniband/<dev>/ports/<n>/rate of the
 * active ports; $SL_EXPECTED_SYSFS stands for /sys, a testing aid). */
void sl_expected_capture(sl_expected_hw *hw);

/* This machine's, captured once (sl_expected_capture; simulated under SimGrid). */
const sl_expected_hw *sl_expected_here(void);

/* Adds expected, of_expected, expected_of and expected_source to r where a rule applies to
 * its program, variant, backend and metric (nothing otherwise). multi_host: the ranks span
 * more than one node. */
void sl_expected_apply(const sl_expected_hw *hw, const char *benchmark, int multi_host, int nranks,
                       sl_result *r);

/* The header line: which table entries this run's hardware matches (rank 0). */
void sl_expected_describe(const sl_expected_hw *hw, char *buf, size_t len);

#endif
