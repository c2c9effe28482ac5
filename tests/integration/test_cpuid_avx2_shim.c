/* bench/cpuid_avx2.c, the LD_PRELOAD library `make bench-avx2` holds
 * onnxruntime to AVX2 with, hides AVX-512 from every CPUID a process runs.
 * infinity_v3 picks its kernels from CPUID too, so under the library its
 * start-up log must name the AVX2 kernel on an AVX-512 CPU, and its output
 * must be bit for bit the one `IV_CPU_ISA=avx2` gives (the same kernels).
 * Needs a CPU with AVX-512 and CPUID faulting (/proc/cpuinfo flags
 * avx512f and cpuid_fault); the library is built next to IV_BIN. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "test.h"
#include "unit/tmp_test_util.h"

/* Whether /proc/cpuinfo's flags line lists flag. */
static int cpu_has_flag(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        for (char *tok = strtok(strchr(line, ':') ? strchr(line, ':') + 1 : line, " \n"); tok && !found;
             tok = strtok(NULL, " \n"))
            found = strcmp(tok, flag) == 0;
        break;
    }
    fclose(f);
    return found;
}

/* Runs `embed` on two inputs with the environment assignments env; the
 * embeddings go to out_name in tmp, standard error to *log. */
static int run_embed(const char *tmp, const char *env, const char *out_name, char **log)
{
    char in_path[512], err_path[512], out_path[512], cmd[8192];
    snprintf(in_path, sizeof in_path, "%s/in.jsonl", tmp);
    snprintf(err_path, sizeof err_path, "%s/err.txt", tmp);
    snprintf(out_path, sizeof out_path, "%s/%s", tmp, out_name);
    FILE *f = fopen(in_path, "wb");
    if (!f) return -1;
    fputs("\"hello world\"\n\"a somewhat longer second sentence, to fill more than one row block\"\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "env -u IV_CPU_ISA %s '%s' embed --model-id '%s/models/bert' < '%s' > '%s' 2> '%s'", env,
             iv_test_binary(), iv_test_fixtures_dir(), in_path, out_path, err_path);
    const int st = system(cmd);
    size_t len;
    iv_err err;
    *log = NULL;
    if (iv_file_read_all(err_path, 1 << 20, log, &len, &err)) *log = strdup("");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *read_text(const char *tmp, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    char *s = NULL;
    size_t len;
    iv_err err;
    return iv_file_read_all(path, 1 << 24, &s, &len, &err) ? NULL : s;
}

TEST(cpuid_avx2_shim_hides_avx512)
{
    if (!cpu_has_flag("avx512f") || !cpu_has_flag("cpuid_fault")) {
        iv_test_skip("needs a CPU with AVX-512 and CPUID faulting");
        return;
    }
    char bin[1024], shim[1200];
    snprintf(bin, sizeof bin, "%s", iv_test_binary());
    snprintf(shim, sizeof shim, "%s/libcpuid_avx2.so", dirname(bin));
    if (access(shim, R_OK) != 0) {
        iv_test_fail(__FILE__, __LINE__, "%s is missing (make builds it with the test runner's binary)", shim);
        return;
    }
    char tmp[256];
    REQUIRE(tmp_dir(tmp, sizeof tmp, "cpuid_avx2") == 0);
    char env[2048];
    /* An ASan binary wants its runtime first among the preloads. */
    snprintf(env, sizeof env, "LD_PRELOAD='%s' ASAN_OPTIONS=\"verify_asan_link_order=0:${ASAN_OPTIONS:-}\"", shim);
    char *log = NULL;
    CHECK_EQ_INT(run_embed(tmp, env, "shim.jsonl", &log), 0);
    if (!log || !strstr(log, "instruction set avx2"))
        iv_test_fail(__FILE__, __LINE__, "under the library the log should name AVX2: %s", log ? log : "");
    free(log);

    CHECK_EQ_INT(run_embed(tmp, "", "native.jsonl", &log), 0);
    CHECK(log && strstr(log, "instruction set avx512"));
    free(log);

    CHECK_EQ_INT(run_embed(tmp, "IV_CPU_ISA=avx2", "capped.jsonl", &log), 0);
    free(log);
    char *shim_out = read_text(tmp, "shim.jsonl"), *capped_out = read_text(tmp, "capped.jsonl");
    CHECK(shim_out && capped_out && strlen(shim_out) > 100 && strcmp(shim_out, capped_out) == 0);
    free(shim_out);
    free(capped_out);
    tmp_rmtree(tmp);
}
