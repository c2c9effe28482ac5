#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

typedef struct {
    const char *name, *file;
    iv_test_fn fn;
} test_case;

static test_case *g_tests;
static int g_count, g_cap;
static int g_current_failed, g_current_skipped;
/* The first message of the running test's first failure, repeated in the
 * summary at the end so a log's tail (all CI shows) names what failed. */
static char g_first_failure[512];

/* Per-test time limit (IV_TEST_TIMEOUT seconds, 300 by default; 0 = none).
 * A test that hangs (a server that never answers, a lost wakeup) would
 * otherwise stall the whole suite with no name in the log: SIGALRM prints
 * the running test as failed, with the summary line, runs the cleanup hook
 * (the server harness kills the servers it started) and exits 1. Messages
 * are formatted before the test starts: the handler only writes. */
static char g_timeout_msg[1024];
static size_t g_timeout_len;
static void (*g_timeout_hook)(void);

void iv_test_on_timeout(void (*fn)(void)) { g_timeout_hook = fn; }

static void on_alarm(int sig)
{
    (void)sig;
    if (write(1, g_timeout_msg, g_timeout_len) < 0) { /* nothing left to report to */ }
    if (g_timeout_hook) g_timeout_hook();
    _exit(1);
}

static unsigned test_timeout_s(void)
{
    const char *v = getenv("IV_TEST_TIMEOUT");
    if (!v || !*v) return 300;
    long x = strtol(v, NULL, 10);
    return x < 0 ? 0 : (unsigned)x;
}

void iv_test_register(const char *name, const char *file, iv_test_fn fn)
{
    if (g_count == g_cap) {
        g_cap = g_cap ? g_cap * 2 : 64;
        g_tests = realloc(g_tests, (size_t)g_cap * sizeof *g_tests);
        if (!g_tests) abort();
    }
    g_tests[g_count++] = (test_case){name, file, fn};
}

int iv_test_fail(const char *file, int line, const char *fmt, ...)
{
    g_current_failed++;
    if (g_current_failed > 20) return 0; /* keep logs readable */
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stdout, "    %s:%d: %s\n", file, line, msg);
    if (g_current_failed == 1) snprintf(g_first_failure, sizeof g_first_failure, "%s:%d: %s", file, line, msg);
    return 0;
}

void iv_test_skip(const char *why)
{
    g_current_skipped = 1;
    fprintf(stdout, "    skipped: %s\n", why);
}

int iv_test_failed(void) { return g_current_failed; }

double iv_test_cosine(const float *a, const float *b, int64_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    if (aa == 0 && bb == 0) return 1.0;
    if (aa == 0 || bb == 0) return 0.0;
    return ab / sqrt(aa * bb);
}

double iv_test_max_abs_diff(const float *a, const float *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

const char *iv_test_fixtures_dir(void)
{
    const char *d = getenv("IV_FIXTURES");
    return d ? d : "tests/fixtures";
}

const char *iv_test_models_dir(void)
{
    const char *d = getenv("IV_MODELS");
    return d ? d : ".cache/models";
}

const char *iv_test_binary(void)
{
    const char *d = getenv("IV_BIN");
    return d ? d : "build/release/infinity_v3";
}

static int cmp_case(const void *a, const void *b)
{
    const test_case *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    qsort(g_tests, (size_t)g_count, sizeof *g_tests, cmp_case);
    int passed = 0, failed = 0, skipped = 0;
    const unsigned limit = test_timeout_s();
    signal(SIGALRM, on_alarm);
    char **failures = calloc((size_t)g_count + 1, sizeof *failures);
    if (!failures) abort();
    for (int i = 0; i < g_count; i++) {
        test_case *t = &g_tests[i];
        if (filter && !strstr(t->name, filter) && !strstr(t->file, filter)) continue;
        g_current_failed = 0;
        g_current_skipped = 0;
        g_first_failure[0] = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        fprintf(stdout, "[ RUN  ] %s\n", t->name);
        fflush(stdout);
        int n = snprintf(g_timeout_msg, sizeof g_timeout_msg,
                         "    timed out after %u s (IV_TEST_TIMEOUT)\n[ FAIL ] %s (timed out)\n"
                         "[ FAILED ] %s -- timed out after %u s\n%d passed, %d failed\n",
                         limit, t->name, t->name, limit, passed, failed + 1);
        g_timeout_len = n < 0 ? 0 : (size_t)n < sizeof g_timeout_msg ? (size_t)n : sizeof g_timeout_msg - 1;
        alarm(limit);
        t->fn();
        alarm(0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (g_current_failed) {
            fprintf(stdout, "[ FAIL ] %s (%.1f ms)\n", t->name, ms);
            size_t len = strlen(t->name) + strlen(g_first_failure) + 8;
            failures[failed] = malloc(len);
            if (failures[failed]) snprintf(failures[failed], len, "%s -- %s", t->name, g_first_failure);
            failed++;
        } else if (g_current_skipped) {
            skipped++;
            fprintf(stdout, "[ SKIP ] %s\n", t->name);
        } else {
            passed++;
            fprintf(stdout, "[  OK  ] %s (%.1f ms)\n", t->name, ms);
        }
        fflush(stdout);
    }
    for (int i = 0; i < failed; i++) {
        fprintf(stdout, "[ FAILED ] %s\n", failures[i] ? failures[i] : "(out of memory)");
        free(failures[i]);
    }
    free(failures);
    if (skipped) fprintf(stdout, "%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else fprintf(stdout, "%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
