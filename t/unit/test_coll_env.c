/* test_coll_env.c — the communication layer's SL_COLL_STAGE switch, without MPI or a device:
 * what it accepts (unset, empty, 0, 1) and refuses (anything else: sl_init turns -1 into a
 * usage error), and that 1 keeps device buffers away from MPI whatever the library says. */
#include <stdlib.h>

#include "../tap.h"
#include "sl_coll.h"

/* sl_coll_env_stage with SL_COLL_STAGE set to v (NULL: unset); *on as it left it */
static int stage_of(const char *v, int *on)
{
    if (v)
        setenv("SL_COLL_STAGE", v, 1);
    else
        unsetenv("SL_COLL_STAGE");
    *on = -7;
    return sl_coll_env_stage(on);
}

int main(void)
{
    const struct {
        const char *v;
        int rc, on;
    } cases[] = {
        {NULL, 0, 0}, {"", 0, 0},   {"0", 0, 0},    {"1", 0, 1},  {"2", -1, 0},
        {"yes", -1, 0}, {" 1", -1, 0}, {"1 ", -1, 0}, {"01", -1, 0}, {"-1", -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int on, rc = stage_of(cases[i].v, &on);
        ok(rc == cases[i].rc && on == cases[i].on, "SL_COLL_STAGE %s%s%s: rc %d, on %d",
           cases[i].v ? "'" : "unset", cases[i].v ? cases[i].v : "", cases[i].v ? "'" : "", rc, on);
    }
    /* answered before MPI is asked: this test never starts MPI */
    setenv("SL_COLL_STAGE", "1", 1);
    ok(sl_coll_mpi_takes_device() == 0, "SL_COLL_STAGE=1: device buffers are staged, never handed to MPI");
    done_testing();
    return exit_status();
}
