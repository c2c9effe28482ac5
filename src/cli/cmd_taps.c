/* `infinity_v3 taps`: the same inputs, as one packed batch, through the CPU
 * (FP32, the reference) and through a device table, comparing every
 * activation tap (models/taps.h) and naming the first one where the device
 * falls below a cosine: the tool that makes a short GPU window enough to
 * find where a kernel goes wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_input.h"
#include "cli/commands.h"
#include "models/taps.h"

#define MAX_TAPS 1024

typedef struct tap_rec {
    char name[48];
    int layer;
    int64_t rows, cols;
    float *data;
} tap_rec;

typedef struct tap_log {
    tap_rec taps[MAX_TAPS];
    int n;
} tap_log;

static void record(void *ctx, const iv_ops *ops, const char *name, int layer, iv_view v)
{
    tap_log *log = ctx;
    if (log->n == MAX_TAPS) return;
    tap_rec *r = &log->taps[log->n];
    if (!(r->data = malloc((size_t)(v.rows * v.cols) * sizeof(float) + 1))) return;
    iv_ops_download_f32(ops, v, r->data);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->layer = layer;
    r->rows = v.rows;
    r->cols = v.cols;
    log->n++;
}

static void log_free(tap_log *log)
{
    for (int i = 0; i < log->n; i++) free(log->taps[i].data);
    log->n = 0;
}

/* Runs every input line through engine e as one batch, recording taps. */
static int run_batch(iv_engine *e, iv_cli_item *items, int n, tap_log *log)
{
    iv_prepared *prep = calloc((size_t)n, sizeof *prep);
    iv_seq_input *seqs = calloc((size_t)n, sizeof *seqs);
    int rc = prep && seqs ? 0 : -1;
    iv_err err = {0};
    const iv_input_opts io = {.truncate = 1};
    for (int i = 0; i < n && !rc; i++) {
        if (items[i].error || iv_prepare_input(e, &items[i].in, &io, &prep[i], &err)) {
            fprintf(stderr, "infinity_v3: input %d: %s\n", i + 1, items[i].error ? items[i].error : err.msg);
            rc = -1;
        } else {
            seqs[i] = prep[i].seq;
        }
    }
    iv_outputs out = {0};
    iv_taps_set(record, log);
    if (!rc && iv_engine_run(e, IV_TASK_EMBED_ALL, seqs, n, &out, &err)) {
        fprintf(stderr, "infinity_v3: %s\n", err.msg);
        rc = -1;
    }
    iv_taps_set(NULL, NULL);
    iv_outputs_free(&out);
    for (int i = 0; i < n && prep; i++) iv_prepared_free(&prep[i]);
    free(prep);
    free(seqs);
    return rc;
}

static double row_min_cosine(const tap_rec *a, const tap_rec *b, double *max_abs)
{
    double worst = 1.0;
    *max_abs = 0;
    for (int64_t r = 0; r < a->rows; r++) {
        const float *x = a->data + r * a->cols, *y = b->data + r * a->cols;
        double xy = 0, xx = 0, yy = 0;
        for (int64_t c = 0; c < a->cols; c++) {
            xy += (double)x[c] * y[c];
            xx += (double)x[c] * x[c];
            yy += (double)y[c] * y[c];
            const double d = x[c] > y[c] ? x[c] - y[c] : y[c] - x[c];
            if (d > *max_abs || d != d) *max_abs = d != d ? 1e30 : d;
        }
        const double cs = xx == 0 && yy == 0 ? 1.0 : xx == 0 || yy == 0 ? 0.0 : xy / __builtin_sqrt(xx * yy);
        if (cs < worst || cs != cs) worst = cs != cs ? -1.0 : cs;
    }
    return worst;
}

static void usage(void)
{
    fprintf(stderr, "usage: infinity_v3 taps --model-id DIR --device emulated|cuda[:N] [--dtype bfloat16|float16]\n"
                    "         [--min-cosine X] < inputs\n"
                    "Runs the inputs (one per line, as for embed) on the CPU in float32 and on the device, and\n"
                    "prints the worst per-row cosine of every activation tap; exits 1 when one falls below\n"
                    "--min-cosine (default 0.999), naming the first.\n");
}

int iv_cmd_taps(int argc, char **argv)
{
    iv_cli_common c;
    iv_cli_common_init(&c);
    double min_cos = 0.999;
    for (int i = 1; i < argc;) {
        int r = iv_cli_common_arg(&c, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) continue;
        if (!strcmp(argv[i], "--min-cosine") && i + 1 < argc) {
            min_cos = atof(argv[i + 1]);
            i += 2;
            continue;
        }
        usage();
        return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
    }
    if (!c.engine.device || !strcmp(c.engine.device, "cpu")) {
        fprintf(stderr, "infinity_v3 taps: --device must name a device to compare with the cpu\n");
        return 2;
    }
    int n = 0, cap = 0, rc = 1;
    iv_cli_item *items = NULL;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, stdin)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (len == 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            iv_cli_item *grown = realloc(items, (size_t)cap * sizeof *items);
            if (!grown) break;
            items = grown;
        }
        iv_cli_parse_line(line, (size_t)len, &items[n++]);
    }
    free(line);
    tap_log *ref = calloc(1, sizeof *ref), *dev = calloc(1, sizeof *dev);
    iv_engine *e_ref = NULL, *e_dev = NULL;
    iv_cli_common cpu = c;
    cpu.engine.device = "cpu";
    cpu.engine.dtype = "float32";
    iv_input_opts io;
    if (!n || !ref || !dev) fprintf(stderr, "infinity_v3 taps: no inputs on stdin\n");
    else if (!iv_cli_open(&cpu, &e_ref, &io) && !iv_cli_open(&c, &e_dev, &io) &&
             !run_batch(e_ref, items, n, ref) && !run_batch(e_dev, items, n, dev)) {
        rc = 0;
        int first_bad = -1;
        for (int i = 0; i < ref->n && i < dev->n; i++) {
            const tap_rec *a = &ref->taps[i], *b = &dev->taps[i];
            if (strcmp(a->name, b->name) || a->layer != b->layer || a->rows != b->rows || a->cols != b->cols) {
                fprintf(stderr, "infinity_v3 taps: tap %d differs in name or shape between devices\n", i);
                rc = 1;
                break;
            }
            double max_abs;
            const double cs = row_min_cosine(a, b, &max_abs);
            const int bad = cs < min_cos;
            if (bad && first_bad < 0) first_bad = i;
            printf("%-10s layer %3d  [%lld x %lld]  min cosine %.6f  max abs %.3e%s\n", a->name, a->layer,
                   (long long)a->rows, (long long)a->cols, cs, max_abs, bad ? "  <" : "");
        }
        if (first_bad >= 0) {
            printf("first tap below %.4f: %s of layer %d\n", min_cos, ref->taps[first_bad].name,
                   ref->taps[first_bad].layer);
            rc = 1;
        }
    }
    if (e_ref) iv_engine_free(e_ref);
    if (e_dev) iv_engine_free(e_dev);
    if (ref) log_free(ref);
    if (dev) log_free(dev);
    free(ref);
    free(dev);
    for (int i = 0; i < n; i++) iv_cli_item_free(&items[i]);
    free(items);
    return rc;
}
