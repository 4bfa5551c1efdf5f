/* test_error.c — a fatal or usage error reaches stderr as one whole line in one write(), so that
 * two ranks' lines cannot cut into each other. stderr is a SOCK_SEQPACKET socket here: each
 * write() arrives as one packet, so the first packet read must be the whole line. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "sl_error.h"

enum { FATAL, USAGE, LONG_FATAL };

/* Runs the error in a child whose stderr is one end of a packet socket; returns the child's exit
 * status and the first packet it wrote (NUL-terminated) in buf. */
static int first_write(int which, char *buf, size_t cap)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        dup2(sv[1], STDERR_FILENO);
        sl_set_program_name("prog");
        if (which == FATAL) sl_fatal(SL_EXIT_RUNTIME, "file.c", 7, "cannot %s: %d", "go", 42);
        if (which == USAGE) sl_usage_error("--size: expected %s", "a count");
        char big[6000];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        sl_fatal(SL_EXIT_RUNTIME, "file.c", 8, "%s", big);
    }
    close(sv[1]);
    ssize_t n = recv(sv[0], buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(sv[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(void)
{
    char buf[8192];
    unsetenv("OMPI_COMM_WORLD_RANK"); /* the usage error prints on rank 0 only */
    unsetenv("PMIX_RANK");
    unsetenv("PMI_RANK");
    unsetenv("SLURM_PROCID");

    is_int(first_write(FATAL, buf, sizeof buf), SL_EXIT_RUNTIME, "sl_fatal exits 3");
    ok(strcmp(buf, "prog: [rank 0] file.c:7: cannot go: 42\n") == 0,
       "sl_fatal's line is one write: '%.*s'", (int)strcspn(buf, "\n"), buf);

    is_int(first_write(USAGE, buf, sizeof buf), SL_EXIT_USAGE, "sl_usage_error exits 2");
    ok(strcmp(buf, "prog: --size: expected a count (see --help)\n") == 0,
       "sl_usage_error's line is one write: '%.*s'", (int)strcspn(buf, "\n"), buf);

    is_int(first_write(LONG_FATAL, buf, sizeof buf), SL_EXIT_RUNTIME, "a long message: exit 3");
    size_t len = strlen(buf);
    ok(len > 4000 && len <= 4096 && strncmp(buf, "prog: [rank 0] file.c:8: xxx", 28) == 0 &&
           strcmp(buf + len - 4, "...\n") == 0,
       "a message longer than a pipe's atomic write is cut to one write of %zu bytes, ending '...'",
       len);
    done_testing();
    return exit_status();
}
