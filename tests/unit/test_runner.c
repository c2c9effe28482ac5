/* The runner itself: a test that hangs is reported by name and the run
 * ends, instead of stalling the suite. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "test.h"

/* Hangs when asked to (only in the child run below). */
TEST(runner_timeout_victim)
{
    if (!getenv("IV_TEST_TIMEOUT_VICTIM")) return;
    for (;;) pause();
}

TEST(runner_times_out_hung_test)
{
    int out[2];
    REQUIRE(pipe(out) == 0);
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        setenv("IV_TEST_TIMEOUT", "1", 1);
        setenv("IV_TEST_TIMEOUT_VICTIM", "1", 1);
        execl("/proc/self/exe", "run_tests", "runner_timeout_victim", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    iv_strbuf b;
    iv_sb_init(&b);
    char chunk[1024];
    ssize_t n;
    while ((n = read(out[0], chunk, sizeof chunk)) > 0) iv_sb_append(&b, chunk, (size_t)n);
    close(out[0]);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CHECK_CONTAINS(b.data, "[ FAILED ] runner_timeout_victim -- timed out after 1 s");
    CHECK_CONTAINS(b.data, "0 passed, 1 failed");
    iv_sb_free(&b);
}
