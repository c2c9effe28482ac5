/* Idle OpenMP threads sleep rather than spin, for every subcommand.
 *
 * libgomp's default keeps a worker spinning for ~300k iterations after each
 * parallel region; OpenBLAS (OpenMP build) shares those workers. A forward
 * pass is many short regions, so on a machine with other work, or in the
 * server where HTTP and tokenizer threads need the cores, a spinning worker
 * that gets descheduled stalls the next barrier for a scheduler slice.
 * Measured on the shared 2-core EPYC, 2 threads, bench_engine p50:
 *   - server, 16 clients of short requests: 14 req/s spinning, 171 passive;
 *   - `embed` of 1,000 sentences at load ~6: 14-17 s spinning, 3.5-6 s passive;
 *   - MiniLM 8 tokens with two busy processes alongside: 22 ms default,
 *     8-9 ms passive (GOMP_SPINCOUNT 200-10000: 9-45 ms, erratic);
 *   - the same, machine otherwise quiet: 2.7 ms default, 4.1 ms passive
 *     (BERT-base: 19 ms vs 23 ms).
 * Passive costs a futex wake per region (~1 ms per MiniLM call) and is never
 * far off, while spinning loses several-fold whenever the cores are shared,
 * so passive is the default; a dedicated machine can export
 * OMP_WAIT_POLICY=active (or a GOMP_SPINCOUNT) to get spinning back.
 *
 * libgomp reads the variable once, when it is loaded, so setting it from
 * inside the process is too late: set it and execute the binary again. */
#include "cli/omp_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void iv_prefer_passive_openmp(void)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    static char buf[65536];
    char *args[512];
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    /* Empty, or too long to rebuild faithfully: keep the default. */
    if (n == 0 || n == sizeof buf - 1) return;
    buf[n] = 0;
    int argc = 0;
    for (size_t off = 0; off < n; off += strlen(buf + off) + 1) {
        if (argc == 511) return;
        args[argc++] = buf + off;
    }
    args[argc] = NULL;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", args);
    /* Could not re-execute: carry on with the default policy, and do not
     * leave a variable behind that claims otherwise for child processes. */
    unsetenv("OMP_WAIT_POLICY");
}
