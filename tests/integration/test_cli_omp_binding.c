/* OpenMP thread binding survives the start-up re-exec (ops/cpu/omp_policy.c):
 * with OMP_PROC_BIND=true libgomp pins the initial thread to one CPU before
 * main, and the re-exec that sets the spin count used to inherit that mask,
 * so every thread ran on that one CPU. `infinity_v3 embed` logs its threads
 * and places at load; with binding there must be one place per CPU this test
 * may run on (libgomp's default places are the CPUs of the mask), and
 * without it no binding at all. Runs IV_BIN. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/file.h"
#include "test.h"
#include "unit/tmp_test_util.h"

/* Runs `embed` on one input with the environment assignments env, the spin
 * variables unset (so the re-exec happens); *log gets its standard error. */
static int run_embed(const char *tmp, const char *env, char **log)
{
    char in_path[512], err_path[512], cmd[8192];
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", tmp);
    snprintf(err_path, sizeof err_path, "%s/err.txt", tmp);
    FILE *f = fopen(in_path, "wb");
    if (!f) return -1;
    fputs("\"hello\"\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_PLACES -u OMP_PROC_BIND -u GOMP_CPU_AFFINITY "
             "OMP_NUM_THREADS=2 %s '%s' embed --model-id '%s/models/bert' < '%s' > /dev/null 2> '%s'",
             env, iv_test_binary(), iv_test_fixtures_dir(), in_path, err_path);
    const int st = system(cmd);
    size_t len;
    iv_err err;
    *log = NULL;
    if (iv_file_read_all(err_path, 1 << 20, log, &len, &err)) *log = strdup("");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(cli_bound_threads_keep_every_cpu)
{
    cpu_set_t mine;
    REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
    const int cpus = CPU_COUNT(&mine);
    if (cpus < 2) {
        iv_test_skip("this process may run on one CPU only");
        return;
    }
    char tmp[256];
    REQUIRE(tmp_dir(tmp, sizeof tmp, "omp_binding") == 0);
    char *log = NULL;
    CHECK_EQ_INT(run_embed(tmp, "OMP_PROC_BIND=true", &log), 0);
    const char *at = log ? strstr(log, "OpenMP threads bound to ") : NULL;
    CHECK(at != NULL);
    if (at) {
        const int places = atoi(at + strlen("OpenMP threads bound to "));
        if (places != cpus)
            iv_test_fail(__FILE__, __LINE__, "bound to %d places, want one per CPU of the mask (%d): %s", places,
                         cpus, log);
    }
    free(log);

    CHECK_EQ_INT(run_embed(tmp, "", &log), 0);
    CHECK(log && strstr(log, "2 OpenMP threads") && !strstr(log, "bound to"));
    free(log);
    tmp_rmtree(tmp);
}
