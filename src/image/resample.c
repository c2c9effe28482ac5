/* PIL's resampling (Resample.c) for 8-bit RGB, rewritten: same filter
 * functions, same coefficient windows, same fixed-point rounding and the
 * same pass order, so the bytes match PIL's (checked against Pillow 13). */
#include "image/resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PREC 22 /* PIL's PRECISION_BITS: 32 - 8 (result) - 2 (overshoot) */

static double filter_bicubic(double x)
{
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double filter_bilinear(double x)
{
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Per output pixel: the first input index, the tap count, and ksize
 * fixed-point weights. */
typedef struct taps {
    int ksize;
    int *first, *count;
    int32_t *k;
} taps;

static void taps_free(taps *t)
{
    free(t->first);
    free(t->count);
    free(t->k);
}

static int taps_init(taps *t, int in_size, int out_size, enum iv_resample_filter f)
{
    double (*fn)(double) = f == IV_RESAMPLE_BICUBIC ? filter_bicubic : filter_bilinear;
    double fsupport = f == IV_RESAMPLE_BICUBIC ? 2.0 : 1.0;
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = fsupport * filterscale;
    t->ksize = (int)ceil(support) * 2 + 1;
    t->first = malloc(sizeof(int) * (size_t)out_size);
    t->count = malloc(sizeof(int) * (size_t)out_size);
    t->k = calloc((size_t)out_size * (size_t)t->ksize, sizeof(int32_t));
    double *w = malloc(sizeof(double) * (size_t)t->ksize);
    if (!t->first || !t->count || !t->k || !w) {
        free(w);
        taps_free(t);
        return -1;
    }
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ss = 1.0 / filterscale, ww = 0.0;
        int xmin = (int)(center - support + 0.5), xmax;
        if (xmin < 0) xmin = 0;
        xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        for (int x = 0; x < xmax; x++) {
            w[x] = fn((x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        int32_t *k = t->k + (size_t)xx * (size_t)t->ksize;
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? w[x] / ww : w[x];
            k[x] = v < 0 ? (int32_t)(-0.5 + v * (1 << PREC)) : (int32_t)(0.5 + v * (1 << PREC));
        }
        t->first[xx] = xmin;
        t->count[xx] = xmax;
    }
    free(w);
    return 0;
}

/* PIL's clip8: the sum (with its rounding half already added) shifted
 * down and clamped. */
static inline uint8_t clip8(int32_t ss)
{
    int v = ss >> PREC;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One horizontal pass over `rows` rows of src (width sw) into dst (width dw). */
static void pass_h(const uint8_t *src, int sw, int rows, const taps *t, uint8_t *dst, int dw)
{
    for (int y = 0; y < rows; y++) {
        const uint8_t *in = src + (size_t)y * (size_t)sw * 3;
        uint8_t *o = dst + (size_t)y * (size_t)dw * 3;
        for (int xx = 0; xx < dw; xx++) {
            const int32_t *k = t->k + (size_t)xx * (size_t)t->ksize;
            const uint8_t *p = in + (size_t)t->first[xx] * 3;
            int32_t s0 = 1 << (PREC - 1), s1 = s0, s2 = s0;
            for (int x = 0; x < t->count[xx]; x++, p += 3) {
                s0 += p[0] * k[x];
                s1 += p[1] * k[x];
                s2 += p[2] * k[x];
            }
            o[xx * 3 + 0] = clip8(s0);
            o[xx * 3 + 1] = clip8(s1);
            o[xx * 3 + 2] = clip8(s2);
        }
    }
}

/* One vertical pass into dst (dh rows of width w); src's row 0 is input
 * row y0 (the taps' indices are absolute). */
static void pass_v(const uint8_t *src, int w, int y0, const taps *t, uint8_t *dst, int dh)
{
    size_t stride = (size_t)w * 3;
    for (int yy = 0; yy < dh; yy++) {
        const int32_t *k = t->k + (size_t)yy * (size_t)t->ksize;
        const uint8_t *base = src + (size_t)(t->first[yy] - y0) * stride;
        uint8_t *o = dst + (size_t)yy * stride;
        for (size_t c = 0; c < stride; c++) {
            int32_t s = 1 << (PREC - 1);
            const uint8_t *p = base + c;
            for (int y = 0; y < t->count[yy]; y++, p += stride) s += *p * k[y];
            o[c] = clip8(s);
        }
    }
}

int iv_resample_rgb(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh,
                    enum iv_resample_filter filter, iv_err *err)
{
    if (sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0) return iv_errf(err, IV_E_INVALID, "resize to or from an empty image");
    if (dw == sw && dh == sh) {
        memcpy(dst, src, (size_t)sw * (size_t)sh * 3);
        return 0;
    }
    taps tv = {0}, th = {0};
    if (taps_init(&tv, sh, dh, filter)) return iv_errf(err, IV_E_NOMEM, "out of memory resizing an image");
    if (dw != sw && taps_init(&th, sw, dw, filter)) {
        taps_free(&tv);
        return iv_errf(err, IV_E_NOMEM, "out of memory resizing an image");
    }
    int rc = 0;
    if (dw == sw) {
        pass_v(src, sw, 0, &tv, dst, dh);
    } else if (dh == sh) {
        pass_h(src, sw, sh, &th, dst, dw);
    } else if (dh < sh && (sh - dh) > 2 * (sw - dw)) {
        /* Pillow 13 (python-pillow/Pillow#9549) resizes vertically first
         * when the height shrinks by more than twice the width's pixels;
         * the 8-bit rounding between the passes makes the order visible. */
        uint8_t *tmp = malloc((size_t)sw * (size_t)dh * 3);
        if (!tmp) rc = -1;
        else {
            pass_v(src, sw, 0, &tv, tmp, dh);
            pass_h(tmp, sw, dh, &th, dst, dw);
            free(tmp);
        }
    } else {
        /* Horizontal first, over only the input rows the vertical pass reads. */
        int y_first = tv.first[0], y_last = tv.first[dh - 1] + tv.count[dh - 1];
        uint8_t *tmp = malloc((size_t)dw * (size_t)(y_last - y_first) * 3);
        if (!tmp) rc = -1;
        else {
            pass_h(src + (size_t)y_first * (size_t)sw * 3, sw, y_last - y_first, &th, tmp, dw);
            pass_v(tmp, dw, y_first, &tv, dst, dh);
            free(tmp);
        }
    }
    taps_free(&tv);
    taps_free(&th);
    return rc ? iv_errf(err, IV_E_NOMEM, "out of memory resizing an image") : 0;
}
