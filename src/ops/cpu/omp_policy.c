/* Idle OpenMP workers spin for about 50 us, then sleep, for every
 * subcommand (and bench_engine, so the benchmark runs what users run); and
 * the team has one thread per physical core (cpu_topology.h), no more than
 * a cgroup CPU quota allows (cpu_quota.h).
 *
 * A forward pass is dozens of short parallel regions (each linear, norm and
 * attention op is one); OpenBLAS (OpenMP build) shares the same workers.
 * Between two regions of one pass the main thread is busy for microseconds
 * only, so a worker that spins a little catches the next region without a
 * futex wake; after the pass it soon goes to sleep and leaves the cores to
 * HTTP, tokenizer and other processes.
 *
 * The two extremes both lose. libgomp's default spins ~300k iterations
 * (3-20 ms, depending on the CPU's pause instruction): on the shared 2-core
 * EPYC, 2 threads, a server with 16 clients of short requests made 14 req/s
 * spinning against 171 sleeping, and `embed` of 1,000 sentences at load ~6
 * took 14-17 s against 3.5-6 s. OMP_WAIT_POLICY=passive (no spin) pays a
 * futex wake and a scheduler wake-up per region. MiniLM-L6, one 8-token
 * request, bench_engine p50, 2-core Xeon (AVX-512), quiet machine: passive
 * 2.49 ms, spin of 10 us 1.73 ms, 30 us 1.36 ms, 100 us 1.32 ms, unbounded
 * 1.08 ms; with two busy processes alongside: passive 2.67 ms, 30 us 1.40 ms.
 *
 * GOMP_SPINCOUNT counts iterations of a loop around the pause instruction,
 * whose cost differs several-fold between CPUs (about 10 ns on that Xeon,
 * more on Zen 2), so the count is calibrated here by timing that loop. */
#include "ops/cpu/omp_policy.h"

#include "ops/cpu/cpu_quota.h"
#include "ops/cpu/cpu_topology.h"

#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#else
    __asm__ volatile("" ::: "memory");
#endif
}

long iv_omp_spincount_for(double spin_us)
{
    /* libgomp's loop: a relaxed load, a compare and a pause per iteration. */
    volatile int flag = 0;
    const int n = 20000;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        const double t0 = now_ns();
        for (int i = 0; i < n && !flag; i++) cpu_relax();
        const double dt = (now_ns() - t0) / n;
        if (dt < best) best = dt;
    }
    if (best < 0.3) best = 0.3;
    long count = (long)(spin_us * 1000.0 / best);
    if (count < 100) count = 100;
    if (count > 1000000) count = 1000000;
    return count;
}

/* The CPUs of all of libgomp's places (the set it built them from, when
 * binding was asked for with OMP_PROC_BIND or OMP_PLACES), or NULL where
 * there are no places. *size gets the set's size for the CPU_*_S macros. */
static cpu_set_t *places_cpus(size_t *size)
{
    const int places = omp_get_num_places();
    const long cpus = sysconf(_SC_NPROCESSORS_CONF);
    if (places <= 0 || cpus <= 0) return NULL;
    cpu_set_t *set = CPU_ALLOC(cpus);
    if (!set) return NULL;
    *size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(*size, set);
    for (int p = 0; p < places; p++) {
        const int n = omp_get_place_num_procs(p);
        int ids[n > 0 ? n : 1];
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] < cpus) CPU_SET_S(ids[i], *size, set);
    }
    if (CPU_COUNT_S(*size, set)) return set;
    CPU_FREE(set);
    return NULL;
}

/* The CPUs this process may run on, before any quota: the places' (libgomp
 * has pinned the initial thread to the first one by now), else the
 * affinity mask's; NULL when neither is known. *size as places_cpus. */
static cpu_set_t *cpus_to_run_on(size_t *size)
{
    cpu_set_t *set = places_cpus(size);
    if (set) return set;
    const long cpus = sysconf(_SC_NPROCESSORS_CONF);
    if (cpus <= 0) return NULL;
    set = CPU_ALLOC(cpus > CPU_SETSIZE ? cpus : CPU_SETSIZE);
    if (!set) return NULL;
    *size = CPU_ALLOC_SIZE(cpus > CPU_SETSIZE ? cpus : CPU_SETSIZE);
    if (!sched_getaffinity(0, *size, set) && CPU_COUNT_S(*size, set) > 0) return set;
    CPU_FREE(set);
    return NULL;
}

/* How many CPUs, and, unless cores is NULL, on how many physical cores
 * (0: unknown; read from sysfs, one file per CPU). */
static int count_cpus(int *cores)
{
    size_t size;
    cpu_set_t *set = cpus_to_run_on(&size);
    if (!set) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        if (cores) *cores = 0;
        return n > 0 ? (int)n : 1;
    }
    const int n = CPU_COUNT_S(size, set);
    if (cores) *cores = iv_cpu_physical_cores("/sys/devices/system/cpu", set, size);
    CPU_FREE(set);
    return n;
}

int iv_omp_team_size(void) { return omp_get_max_threads(); }

int iv_cpu_usable_cores(void)
{
    const int n = count_cpus(NULL), quota = iv_cpu_quota_cores_self();
    return quota > 0 && quota < n ? quota : n;
}

/* With binding asked for, libgomp pins the initial thread to the first
 * place while it loads, before main, and an exec keeps that mask: the new
 * process would see one CPU, build every place on it and run all its
 * threads there (OMP_PROC_BIND=true, 2 CPUs: both threads on CPU 0,
 * MiniLM-L6 one 64-token request p50 15-17 ms against 10). So the exec
 * starts from the CPUs of all the places again. */
static void unpin_for_exec(void)
{
    size_t size;
    cpu_set_t *set = places_cpus(&size);
    if (!set) return;
    sched_setaffinity(0, size, set);
    CPU_FREE(set);
}

void iv_omp_prefer_short_spin(void)
{
    const int want_spin = !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT");
    /* A team smaller than the CPUs libgomp would size it by: one thread
     * per physical core (cpu_topology.h), within the cgroup quota. */
    int cores = 0, team = 0;
    if (!getenv("OMP_NUM_THREADS")) {
        const int cpus = count_cpus(&cores);
        team = iv_cpu_team_size(cpus, cores, iv_cpu_quota_cores_self());
        if (team >= cpus) team = 0;
    }
    const int want_threads = team > 0;
    if (!want_spin && !want_threads) return;
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
    char count[32] = "", threads[32];
    /* The calibration times a pause loop (about a millisecond): only when its answer is used. */
    if (want_spin) snprintf(count, sizeof count, "%ld", iv_omp_spincount_for(IV_OMP_SPIN_US));
    snprintf(threads, sizeof threads, "%d", team);
    /* A variable that did not take would make the new process exec again, and again. */
    if ((want_spin && setenv("GOMP_SPINCOUNT", count, 1)) || (want_threads && setenv("OMP_NUM_THREADS", threads, 1))) {
        if (want_spin) unsetenv("GOMP_SPINCOUNT");
        return;
    }
    cpu_set_t pinned;
    const int have_pinned = !sched_getaffinity(0, sizeof pinned, &pinned);
    unpin_for_exec();
    execv("/proc/self/exe", args);
    /* Could not re-execute: carry on as libgomp set up this process (its
     * pinning, its default policy and team size), and do not leave
     * variables behind that claim otherwise for child processes. */
    if (have_pinned) sched_setaffinity(0, sizeof pinned, &pinned);
    if (want_spin) unsetenv("GOMP_SPINCOUNT");
    if (want_threads) unsetenv("OMP_NUM_THREADS");
}

void iv_omp_describe(char *buf, size_t size)
{
    const int places = omp_get_num_places(), quota = iv_cpu_quota_cores_self();
    int cores;
    const int cpus = count_cpus(&cores);
    char bound[48] = "", smt[64] = "", limit[48] = "";
    if (places > 0) snprintf(bound, sizeof bound, " bound to %d place%s", places, places == 1 ? "" : "s");
    if (cores > 0 && cores < cpus) snprintf(smt, sizeof smt, " (%d CPUs on %d physical cores)", cpus, cores);
    if (quota > 0) snprintf(limit, sizeof limit, " (cgroup CPU quota %d)", quota);
    snprintf(buf, size, "%d OpenMP threads%s%s%s", omp_get_max_threads(), bound, smt, limit);
}
