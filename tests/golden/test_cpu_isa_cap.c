/* IV_CPU_ISA caps the kernels a run may pick (ops/cpu/cpu_isa.h), so one
 * machine runs what an AVX2-only or a baseline x86-64 CPU runs. The panel
 * kernel sums every output in one order whatever its vector width, and the
 * int8 kernels produce the same integers on the same weights, so the real
 * all-MiniLM-L6-v2 must give byte-identical output under every cap, for
 * float32 and for int8 with its weights' bit width pinned. Unpinned, an AVX2
 * cap quantizes weights to 7 bits (the vpmaddubsw kernel's range), and must
 * give what 7-bit weights give under no cap.
 * Runs the CLI (IV_BIN) as a child process: the cap is read once per process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "ops/cpu/cpu_isa.h"
#include "test.h"

/* `embed --all` of the input file under cap (NULL: unset) with int8
 * weights of `bits` bits (0: unpinned); the output text, or NULL. */
static char *embed_all(const char *model, const char *in, const char *cap, const char *dtype, int bits, const char *out)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s%s %s%s '%s' embed --all --dtype %s --model-id '%s' < '%s' > '%s' 2>/dev/null",
             cap ? "IV_CPU_ISA=" : "env -u IV_CPU_ISA", cap ? cap : "",
             bits ? "IV_INT8_WEIGHT_BITS=" : "env -u IV_INT8_WEIGHT_BITS", bits == 7 ? "7" : bits ? "8" : "",
             iv_test_binary(), dtype, model, in, out);
    int st = system(cmd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        iv_test_fail(__FILE__, __LINE__, "embed under IV_CPU_ISA=%s --dtype %s failed", cap ? cap : "(unset)", dtype);
        return NULL;
    }
    char *text = NULL;
    size_t len = 0;
    iv_err err = {0};
    if (iv_file_read_all(out, 64u << 20, &text, &len, &err)) iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return text;
}

TEST(cpu_isa_cap_same_bits)
{
    if (access(iv_test_binary(), X_OK) != 0) {
        iv_test_skip("infinity_v3 binary not built");
        return;
    }
    char model[4096];
    iv_path_join(model, sizeof model, iv_test_models_dir(), "all-MiniLM-L6-v2");
    if (!iv_dir_exists(model)) {
        iv_test_fail(__FILE__, __LINE__, "%s missing: run scripts/fetch-models.sh", model);
        return;
    }
    char dir[] = "/tmp/iv_isa_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char in[600], out[600];
    snprintf(in, sizeof in, "%s/in.txt", dir);
    snprintf(out, sizeof out, "%s/out.jsonl", dir);
    FILE *f = fopen(in, "w");
    REQUIRE(f);
    /* Lengths on both sides of the 12- and 6-row tile heights. */
    fputs("A man is playing a guitar on the stage tonight.\nHello\n"
          "The quick brown fox jumps over the lazy dog while the farmer sleeps in the barn.\n",
          f);
    fclose(f);
    static const char *caps[] = {NULL, "avx512", "avx2", "baseline"};
    static const char *dtypes[] = {"float32", "int8"};
    for (int d = 0; d < 2; d++) {
        const int bits = d ? 8 : 0;
        char *want = embed_all(model, in, NULL, dtypes[d], bits, out);
        if (!want) break;
        CHECK_MSG(strlen(want) > 1000, "--dtype %s: output too short", dtypes[d]);
        for (int c = 1; c < 4; c++) {
            char *got = embed_all(model, in, caps[c], dtypes[d], bits, out);
            if (!got) continue;
            CHECK_MSG(!strcmp(got, want), "--dtype %s: IV_CPU_ISA=%s output differs from the default's",
                      dtypes[d], caps[c]);
            free(got);
        }
        free(want);
    }
    /* int8 unpinned under the AVX2 cap: 7-bit weights, the same bits as 7-bit
     * weights on this CPU's best kernel; and not the 8-bit result. */
    char *w7 = embed_all(model, in, NULL, "int8", 7, out), *avx2 = embed_all(model, in, "avx2", "int8", 0, out);
    char *w8 = embed_all(model, in, "avx2", "int8", 8, out);
    if (w7 && avx2 && w8) {
        CHECK_MSG(!strcmp(avx2, w7), "int8 under IV_CPU_ISA=avx2 differs from 7-bit weights under no cap");
        CHECK_MSG(strcmp(avx2, w8) != 0, "int8 under IV_CPU_ISA=avx2 gave the 8-bit weights' result");
    }
    free(w7);
    free(avx2);
    free(w8);
    unlink(in);
    unlink(out);
    rmdir(dir);
}

/* The start-up log names the instruction set that runs: on an AVX2-only CPU
 * "avx2" under the default cap (it said "up to avx512" before), and the cap
 * when IV_CPU_ISA lowers it. */
TEST(cpu_isa_used_name)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    const int fma = __builtin_cpu_supports("fma");
    const char *want = fma && __builtin_cpu_supports("avx512f") ? "avx512"
                       : fma && __builtin_cpu_supports("avx2") ? "avx2"
                                                                : "baseline";
    if (!getenv("IV_CPU_ISA")) CHECK_STR(iv_cpu_isa_used_name(), want);
#endif
    if (access(iv_test_binary(), X_OK) != 0) return;
    char model[4096];
    snprintf(model, sizeof model, "%s/all-MiniLM-L6-v2", iv_test_models_dir());
    if (access(model, R_OK) != 0) return;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "echo hi | IV_CPU_ISA=baseline '%s' embed --model-id '%s' 2>&1 >/dev/null", iv_test_binary(),
             model);
    FILE *p = popen(cmd, "r");
    REQUIRE(p);
    char buf[8192] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    pclose(p);
    CHECK_CONTAINS(buf, "instruction set baseline (IV_CPU_ISA cap baseline)");
}
