#include "tensor/tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} k_dtypes[IV_DTYPE_COUNT] = {
    [IV_F32] = {"F32", 4}, [IV_F16] = {"F16", 2}, [IV_BF16] = {"BF16", 2}, [IV_F64] = {"F64", 8},
    [IV_I64] = {"I64", 8}, [IV_I32] = {"I32", 4}, [IV_I16] = {"I16", 2},   [IV_I8] = {"I8", 1},
    [IV_U8] = {"U8", 1},   [IV_BOOL] = {"BOOL", 1},
};

size_t iv_dtype_size(iv_dtype dt) { return (unsigned)dt < IV_DTYPE_COUNT ? k_dtypes[dt].size : 0; }
const char *iv_dtype_name(iv_dtype dt) { return (unsigned)dt < IV_DTYPE_COUNT ? k_dtypes[dt].name : "?"; }

int iv_dtype_from_safetensors(const char *name)
{
    for (int i = 0; i < IV_DTYPE_COUNT; i++)
        if (strcmp(name, k_dtypes[i].name) == 0) return i;
    return -1;
}

int64_t iv_tensor_numel(const iv_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t iv_tensor_nbytes(const iv_tensor *t) { return (size_t)iv_tensor_numel(t) * iv_dtype_size(t->dtype); }

int64_t iv_tensor_cols(const iv_tensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }
int64_t iv_tensor_rows(const iv_tensor *t)
{
    int64_t c = iv_tensor_cols(t);
    return c ? iv_tensor_numel(t) / c : 0;
}

iv_tensor iv_tensor_2d(float *data, int64_t rows, int64_t cols)
{
    iv_tensor t = {.dtype = IV_F32, .device = IV_CPU, .ndim = 2, .shape = {rows, cols}, .data = data};
    return t;
}

iv_tensor iv_tensor_1d(float *data, int64_t n)
{
    iv_tensor t = {.dtype = IV_F32, .device = IV_CPU, .ndim = 1, .shape = {n}, .data = data};
    return t;
}

const char *iv_shape_str(const iv_tensor *t, char *buf, size_t cap)
{
    size_t off = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->ndim && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (off < cap) snprintf(buf + off, cap - off, "]");
    return buf;
}

float iv_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t iv_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow */
    if (absx < 0x38800000u) { /* subnormal or zero in f16 */
        float a;
        memcpy(&a, &absx, 4);
        /* 2^-24 is the f16 subnormal step; rint rounds to nearest even. */
        return (uint16_t)(sign | (uint32_t)rintf(a * 16777216.0f));
    }
    uint32_t mant_odd = (absx >> 13) & 1;
    absx += 0xc8000fffu + mant_odd; /* rebias exponent and round to nearest even */
    return (uint16_t)(sign | (absx >> 13));
}

float iv_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t iv_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

void iv_convert_to_f32(float *dst, const void *src, iv_dtype src_dt, int64_t n)
{
    const unsigned char *s = src;
    switch (src_dt) {
    case IV_F32:
        memcpy(dst, src, (size_t)n * 4);
        break;
    case IV_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = iv_f16_to_f32(h);
        }
        break;
    case IV_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = iv_bf16_to_f32(h);
        }
        break;
    case IV_F64:
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, s + 8 * i, 8);
            dst[i] = (float)d;
        }
        break;
    default:
        memset(dst, 0, (size_t)n * 4);
        break;
    }
}
