#include "models/taps.h"

#include <stdio.h>
#include <stdlib.h>

static iv_tap_fn tap_fn;
static void *tap_ctx;

void iv_taps_set(iv_tap_fn fn, void *ctx)
{
    tap_fn = fn;
    tap_ctx = ctx;
}

/* The IV_TAP_DIR writer. */
static void write_tap(const char *dir, const iv_ops *ops, const char *name, int layer, iv_view v)
{
    float *host = malloc((size_t)(v.rows * v.cols) * sizeof(float) + 1);
    if (!host) return;
    iv_ops_download_f32(ops, v, host);
    char file[64], path[4096];
    if (layer < 0) snprintf(file, sizeof file, "%s.f32", name);
    else snprintf(file, sizeof file, "L%02d_%s.f32", layer, name);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(host, sizeof(float), (size_t)(v.rows * v.cols), f);
        fclose(f);
        snprintf(path, sizeof path, "%s/index.txt", dir);
        if ((f = fopen(path, "a"))) {
            fprintf(f, "%s %lld %lld\n", file, (long long)v.rows, (long long)v.cols);
            fclose(f);
        }
    }
    free(host);
}

static const char *tap_dir(void)
{
    static const char *dir;
    static int looked;
    if (!looked) {
        dir = getenv("IV_TAP_DIR");
        looked = 1;
    }
    return dir && *dir ? dir : NULL;
}

void iv_tap(const iv_ops *ops, const char *name, int layer, iv_view v)
{
    if (tap_fn) {
        tap_fn(tap_ctx, ops, name, layer, v);
        return;
    }
    const char *dir = tap_dir();
    if (dir) write_tap(dir, ops, name, layer, v);
}

int iv_taps_active(void) { return tap_fn || tap_dir(); }
