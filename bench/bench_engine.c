/* In-process timing of the infinity_v3 engine for bench/run_cpu.py.
 *
 *   bench_engine --model-id DIR --workloads FILE.json [--dtype float32|int8]
 *
 * FILE holds {"workloads": [{"name", "seqs": [[ids...], ...], "warmup",
 * "min_runs", "max_runs", "max_seconds"}, ...]}. One run of a workload is one
 * iv_engine_run(IV_TASK_EMBED) over all its sequences packed together, the way
 * the server's batcher hands a batch to the engine. Runs repeat until
 * max_runs or, after min_runs, until max_seconds have passed. Prints one JSON
 * object with every run's wall time, so the harness computes the same
 * statistics for every engine; load time and peak RSS (VmHWM) come with it.
 * Thread count: OMP_NUM_THREADS (OpenBLAS is the OpenMP build).
 *
 *   bench_engine --model-id DIR --workloads FILE.json --serve
 *
 * keeps the model loaded and takes orders on stdin, so that the harness can
 * interleave engines run by run (bench/run_cpu.py): after loading it prints
 * {"ready", "load_s", "rss_after_load_kb", ...}; then each line naming a
 * workload runs it (its warmup only the first time) and prints that
 * workload's record as one line; "quit" or end of input prints
 * {"peak_rss_kb", "peak_activation_bytes"} and exits. */
#include <cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "engine/engine.h"
#include "ops/cpu/omp_policy.h"

#define MAX_WORKLOAD_FILE (64u << 20)

typedef struct workload {
    const char *name;
    int n;
    iv_seq_input *seqs;
    int32_t *ids; /* all sequences' ids, back to back */
    long long tokens;
    int warmup, min_runs, max_runs;
    double max_seconds;
} workload;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* VmHWM of this process in KiB, or -1. */
static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

static int parse_workload(const cJSON *j, workload *w, iv_err *err)
{
    memset(w, 0, sizeof *w);
    w->name = iv_json_str(j, "name", NULL);
    const cJSON *seqs = cJSON_GetObjectItemCaseSensitive(j, "seqs");
    if (!w->name || !cJSON_IsArray(seqs) || cJSON_GetArraySize(seqs) == 0)
        return iv_errf(err, IV_E_INVALID, "a workload needs a \"name\" and a non-empty \"seqs\" array");
    w->n = cJSON_GetArraySize(seqs);
    const cJSON *s;
    cJSON_ArrayForEach(s, seqs) {
        if (!cJSON_IsArray(s) || cJSON_GetArraySize(s) == 0)
            return iv_errf(err, IV_E_INVALID, "workload %s: each sequence is a non-empty array of ids", w->name);
        w->tokens += cJSON_GetArraySize(s);
    }
    w->seqs = calloc((size_t)w->n, sizeof *w->seqs);
    w->ids = malloc((size_t)w->tokens * sizeof(int32_t));
    if (!w->seqs || !w->ids) return iv_errf(err, IV_E_NOMEM, "out of memory reading workload %s", w->name);
    int32_t *p = w->ids;
    int i = 0;
    cJSON_ArrayForEach(s, seqs) {
        const cJSON *id;
        w->seqs[i].ids = p;
        w->seqs[i].len = cJSON_GetArraySize(s);
        cJSON_ArrayForEach(id, s) {
            if (!iv_json_is_integer(id))
                return iv_errf(err, IV_E_INVALID, "workload %s: token ids must be integers", w->name);
            *p++ = (int32_t)id->valuedouble;
        }
        i++;
    }
    w->warmup = (int)iv_json_int(j, "warmup", 1);
    w->min_runs = (int)iv_json_int(j, "min_runs", 3);
    w->max_runs = (int)iv_json_int(j, "max_runs", 10);
    w->max_seconds = iv_json_num(j, "max_seconds", 10.0);
    if (w->min_runs < 1) w->min_runs = 1;
    if (w->max_runs < w->min_runs) w->max_runs = w->min_runs;
    return 0;
}

/* Runs one workload (its warmup runs first when `warmup`) into the record
 * `rec`. */
static int run_workload(iv_engine *e, const workload *w, int warmup, cJSON *rec, iv_err *err)
{
    iv_outputs o;
    for (int i = 0; warmup && i < w->warmup; i++) {
        if (iv_engine_run(e, IV_TASK_EMBED, w->seqs, w->n, &o, err)) return -1;
        iv_outputs_free(&o);
    }
    cJSON *times = cJSON_AddArrayToObject(rec, "times_s");
    cJSON_AddNumberToObject(rec, "tokens", (double)w->tokens);
    cJSON_AddNumberToObject(rec, "sequences", w->n);
    double start = now_s();
    for (int r = 0; r < w->max_runs; r++) {
        if (r >= w->min_runs && now_s() - start >= w->max_seconds) break;
        double t0 = now_s();
        if (iv_engine_run(e, IV_TASK_EMBED, w->seqs, w->n, &o, err)) return -1;
        double t1 = now_s();
        cJSON_AddItemToArray(times, cJSON_CreateNumber(t1 - t0));
        if (r == 0) {
            /* The first sequence's embedding, so the harness can check that
             * every engine computed the same thing. */
            cJSON *first = cJSON_AddArrayToObject(rec, "first_embedding");
            for (int c = 0; c < o.cols; c++)
                cJSON_AddItemToArray(first, cJSON_CreateNumber(o.data[o.offsets[0] + c]));
        }
        iv_outputs_free(&o);
    }
    return 0;
}

/* Prints j as one line on stdout, flushed (the --serve protocol). */
static int print_line(const cJSON *j)
{
    char *text = cJSON_PrintUnformatted(j);
    if (!text) return -1;
    puts(text);
    free(text);
    return fflush(stdout);
}

static void add_final_stats(cJSON *out, const iv_engine *e)
{
    cJSON_AddNumberToObject(out, "peak_rss_kb", (double)peak_rss_kb());
    cJSON_AddNumberToObject(out, "peak_activation_bytes", (double)iv_engine_peak_activation_bytes(e));
}

/* --serve: one workload per input line, as the header says. */
static int serve(iv_engine *e, workload *wls, int n_wl, cJSON *ready, iv_err *err)
{
    cJSON_AddBoolToObject(ready, "ready", 1);
    if (print_line(ready)) return -1;
    char *warmed = calloc((size_t)(n_wl ? n_wl : 1), 1);
    if (!warmed) return iv_errf(err, IV_E_NOMEM, "out of memory");
    char line[512];
    int rc = 0;
    while (!rc && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!strcmp(line, "quit")) break;
        int i = 0;
        while (i < n_wl && strcmp(wls[i].name, line)) i++;
        cJSON *rec = cJSON_CreateObject();
        if (!rec) rc = iv_errf(err, IV_E_NOMEM, "out of memory");
        else if (i == n_wl) rc = iv_errf(err, IV_E_INVALID, "no workload named \"%s\"", line);
        else if (!cJSON_AddStringToObject(rec, "name", line) || run_workload(e, &wls[i], !warmed[i], rec, err) ||
                 print_line(rec))
            rc = -1;
        else
            warmed[i] = 1;
        cJSON_Delete(rec);
    }
    free(warmed);
    if (rc) return rc;
    cJSON *fin = cJSON_CreateObject();
    if (!fin) return iv_errf(err, IV_E_NOMEM, "out of memory");
    add_final_stats(fin, e);
    rc = print_line(fin);
    cJSON_Delete(fin);
    return rc;
}

int main(int argc, char **argv)
{
    /* The wait policy the CLI and server run with, unless the harness set one. */
    iv_omp_prefer_short_spin();
    const char *model = NULL, *wl_path = NULL;
    iv_engine_opts opts = {0};
    int serving = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--serve")) serving = 1;
        else if (i + 1 == argc) break;
        else if (!strcmp(argv[i], "--model-id")) model = argv[++i];
        else if (!strcmp(argv[i], "--workloads")) wl_path = argv[++i];
        else if (!strcmp(argv[i], "--dtype")) opts.dtype = argv[++i];
        else if (!strcmp(argv[i], "--device")) opts.device = argv[++i];
    }
    if (!model || !wl_path) {
        fprintf(stderr, "usage: bench_engine --model-id DIR --workloads FILE.json [--device cpu|cuda|emulated]\n"
                        "       [--dtype float32|int8|bfloat16|float16] [--serve]\n");
        return 2;
    }
    iv_err err = {0};
    cJSON *spec = NULL;
    if (iv_json_load_file(wl_path, MAX_WORKLOAD_FILE, &spec, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        return 1;
    }
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(spec, "workloads");
    int n_wl = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    workload *wls = calloc((size_t)(n_wl ? n_wl : 1), sizeof *wls);
    int rc = 1;
    iv_engine *e = NULL;
    cJSON *out = cJSON_CreateObject();
    if (!wls || !out) {
        fprintf(stderr, "bench_engine: out of memory\n");
        goto done;
    }
    int k = 0;
    const cJSON *j;
    cJSON_ArrayForEach(j, list) {
        if (parse_workload(j, &wls[k++], &err)) {
            fprintf(stderr, "bench_engine: %s: %s\n", wl_path, err.msg);
            goto done;
        }
    }

    double t0 = now_s();
    if (iv_engine_load(&e, model, &opts, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        goto done;
    }
    cJSON_AddStringToObject(out, "engine", "infinity_v3");
    cJSON_AddNumberToObject(out, "threads", omp_get_max_threads());
    cJSON_AddNumberToObject(out, "load_s", now_s() - t0);
    cJSON_AddNumberToObject(out, "rss_after_load_kb", (double)peak_rss_kb());
    if (serving) {
        rc = serve(e, wls, n_wl, out, &err) ? 1 : 0;
        if (rc) fprintf(stderr, "bench_engine: %s\n", err.msg[0] ? err.msg : "cannot write to stdout");
        goto done;
    }
    cJSON *res = cJSON_AddObjectToObject(out, "workloads");
    for (int i = 0; i < n_wl; i++) {
        cJSON *rec = cJSON_AddObjectToObject(res, wls[i].name);
        if (!rec || run_workload(e, &wls[i], 1, rec, &err)) {
            fprintf(stderr, "bench_engine: workload %s: %s\n", wls[i].name, rec ? err.msg : "out of memory");
            goto done;
        }
    }
    add_final_stats(out, e);
    rc = print_line(out) ? 1 : 0;
done:
    iv_engine_free(e);
    for (int i = 0; wls && i < n_wl; i++) {
        free(wls[i].seqs);
        free(wls[i].ids);
    }
    free(wls);
    cJSON_Delete(out);
    cJSON_Delete(spec);
    return rc;
}
