#include "server/quantize_embeddings.h"

#include <stdlib.h>
#include <string.h>
#include "server/codec.h"

static const char *const names[IV_QUANT_COUNT] = {"float", "int8", "uint8", "binary", "ubinary", "base64"};

int iv_quant_parse(const char *name)
{
    for (int q = 0; q < IV_QUANT_COUNT; q++)
        if (!strcmp(name, names[q])) return q;
    return -1;
}

const char *iv_quant_name(iv_quant q) { return q >= 0 && q < IV_QUANT_COUNT ? names[q] : "?"; }

size_t iv_quant_size(iv_quant q, int n)
{
    switch (q) {
    case IV_QUANT_INT8:
    case IV_QUANT_UINT8: return (size_t)n;
    case IV_QUANT_BINARY:
    case IV_QUANT_UBINARY: return ((size_t)n + 7) / 8;
    default: return (size_t)n * 4;
    }
}

/* sentence-transformers: starts = ranges[0]; steps = (ranges[1] - ranges[0]) / 255;
 * (embeddings - starts) / steps, in float64 as numpy promotes float32 - float64. */
static double scaled(float x)
{
    const double lo = -1.0, hi = 1.0, step = (hi - lo) / 255.0;
    return ((double)x - lo) / step;
}

/* numpy's astype truncates toward zero; values outside the type wrap in
 * numpy, here they saturate (only a non-normalised component could get there). */
static long trunc_clamp(double v, long lo, long hi)
{
    if (!(v == v)) return 0;
    if (v < (double)lo) return lo;
    if (v > (double)hi) return hi;
    return (long)v;
}

void iv_quantize(iv_quant q, const float *v, int n, unsigned char *out)
{
    switch (q) {
    case IV_QUANT_INT8:
        for (int i = 0; i < n; i++) out[i] = (unsigned char)(signed char)trunc_clamp(scaled(v[i]) - 128.0, -128, 127);
        return;
    case IV_QUANT_UINT8:
        for (int i = 0; i < n; i++) out[i] = (unsigned char)trunc_clamp(scaled(v[i]), 0, 255);
        return;
    case IV_QUANT_BINARY:
    case IV_QUANT_UBINARY: {
        const size_t nb = ((size_t)n + 7) / 8;
        memset(out, 0, nb);
        for (int i = 0; i < n; i++)
            if (v[i] > 0) out[i / 8] |= (unsigned char)(0x80u >> (i % 8));
        if (q == IV_QUANT_BINARY)
            for (size_t k = 0; k < nb; k++) out[k] = (unsigned char)(signed char)((int)out[k] - 128);
        return;
    }
    default:
        for (int i = 0; i < n; i++) {
            unsigned u;
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++) out[4 * i + k] = (unsigned char)(u >> (8 * k));
        }
        return;
    }
}

void iv_quant_json(iv_strbuf *b, iv_quant q, const float *v, int n)
{
    if (q == IV_QUANT_FLOAT) {
        iv_sb_float_array(b, v, (size_t)n);
        return;
    }
    const size_t size = iv_quant_size(q, n);
    unsigned char stack[1024], *p = size <= sizeof stack ? stack : malloc(size);
    if (!p) {
        b->oom = 1;
        return;
    }
    iv_quantize(q, v, n, p);
    if (q == IV_QUANT_BASE64) {
        iv_sb_putc(b, '"');
        iv_codec_base64(b, p, size);
        iv_sb_putc(b, '"');
    } else {
        const int is_signed = q == IV_QUANT_INT8 || q == IV_QUANT_BINARY;
        iv_sb_putc(b, '[');
        for (size_t i = 0; i < size; i++) {
            if (i) iv_sb_putc(b, ',');
            iv_sb_int(b, is_signed ? (long long)(signed char)p[i] : (long long)p[i]);
        }
        iv_sb_putc(b, ']');
    }
    if (p != stack) free(p);
}
