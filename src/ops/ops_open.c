/* Choosing an op table by device and dtype names, as the command line and
 * the server give them, and the device arenas every table shares. */
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/int8_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/emu/emu_ops.h"
#include "ops/ops.h"

static int parse_dtype(const char *name, iv_dtype *dt)
{
    if (!strcmp(name, "bfloat16") || !strcmp(name, "bf16")) *dt = IV_BF16;
    else if (!strcmp(name, "float16") || !strcmp(name, "fp16") || !strcmp(name, "half")) *dt = IV_F16;
    else if (!strcmp(name, "float32") || !strcmp(name, "fp32") || !strcmp(name, "float")) *dt = IV_F32;
    else return -1;
    return 0;
}

const iv_ops *iv_ops_open(const char *device, const char *dtype, iv_err *err)
{
    if (!device || !device[0]) device = "cpu";
    if (!strcmp(device, "cpu")) {
        if (!dtype || !strcmp(dtype, "float32") || !strcmp(dtype, "fp32")) return iv_cpu_ops();
        if (!strcmp(dtype, "int8")) return iv_cpu_int8_ops();
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "dtype \"%s\" is not supported on cpu (use float32 or int8); float16 and bfloat16 run on "
                       "cuda or the emulated device",
                       dtype),
               NULL;
    }
    const int is_emu = !strcmp(device, "emulated") || !strcmp(device, "emu");
    int index = 0;
    if (!is_emu) {
        if (strncmp(device, "cuda", 4) != 0 || (device[4] && device[4] != ':'))
            return iv_errf(err, IV_E_UNSUPPORTED, "unknown device \"%s\" (use cpu, cuda, cuda:N or emulated)", device),
                   NULL;
        if (device[4] == ':') {
            char *end;
            long v = strtol(device + 5, &end, 10);
            if (end == device + 5 || *end || v < 0 || v > 1024)
                return iv_errf(err, IV_E_INVALID, "device \"%s\": expected cuda:N with N a GPU index", device), NULL;
            index = (int)v;
        }
    }
    iv_dtype dt = IV_BF16; /* the GPU default, as the coverage spec says */
    if (dtype && parse_dtype(dtype, &dt))
        return iv_errf(err, IV_E_UNSUPPORTED, "dtype \"%s\" is not supported on %s (use bfloat16 or float16)", dtype,
                       device),
               NULL;
    if (dt == IV_F32)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "dtype float32 is not supported on %s: GPUs run float16 or bfloat16 (float32 runs on cpu)",
                       device),
               NULL;
    return is_emu ? iv_emu_ops_open(dt, err) : iv_cuda_ops_open(index, dt, err);
}

void iv_ops_close(const iv_ops *ops)
{
    if (!ops || ops->device == IV_CPU) return;
    if (ops->device == IV_EMULATED) iv_emu_ops_close(ops);
    else iv_cuda_ops_close(ops);
}

static void *arena_dev_alloc(void *ctx, size_t bytes)
{
    const iv_ops *ops = ctx;
    return ops->dev_alloc(ops, bytes);
}

static void arena_dev_free(void *ctx, void *p)
{
    const iv_ops *ops = ctx;
    ops->dev_free(ops, p);
}

void iv_ops_arena_init(iv_arena *a, const iv_ops *ops)
{
    iv_arena_init_with(a, arena_dev_alloc, arena_dev_free, (void *)ops);
}

void *iv_dev_arena_alloc(iv_arena *dev, size_t bytes) { return iv_arena_alloc(dev, bytes); }

iv_view iv_act_alloc(const iv_ops *ops, iv_arena *dev, int64_t rows, int64_t cols, int64_t ld)
{
    const size_t es = iv_dtype_size(ops->act_dtype);
    return iv_view_make(iv_arena_alloc(dev, (size_t)(rows * ld) * es), ops->act_dtype, rows, cols, ld);
}

void *iv_dev_upload_new(const iv_ops *ops, iv_arena *dev, const void *host, size_t bytes)
{
    void *p = iv_arena_alloc(dev, bytes);
    if (p && bytes) ops->upload(ops, p, host, bytes);
    return p;
}

void iv_ops_download_f32(const iv_ops *ops, iv_view v, float *host)
{
    if (v.rows <= 0 || v.cols <= 0) return;
    const size_t es = iv_dtype_size(v.dtype);
    if (v.dtype == IV_F32 && v.ld == v.cols) {
        ops->download(ops, host, v.data, (size_t)(v.rows * v.cols) * es);
        return;
    }
    /* One transfer of the span from the first row to the end of the last. */
    const size_t span = (size_t)((v.rows - 1) * v.ld + v.cols) * es;
    unsigned char *raw = malloc(span);
    if (!raw) abort(); /* as the CPU scratch does: ops have no error channel */
    ops->download(ops, raw, v.data, span);
    for (int64_t r = 0; r < v.rows; r++)
        iv_convert_to_f32(host + r * v.cols, raw + (size_t)(r * v.ld) * es, v.dtype, v.cols);
    free(raw);
}

int iv_ops_upload_f32(const iv_ops *ops, iv_view y, const float *host, iv_arena *arena)
{
    if (y.rows <= 0 || y.cols <= 0) return 0;
    const size_t es = iv_dtype_size(y.dtype);
    const size_t bytes = (size_t)((y.rows - 1) * y.ld + y.cols) * es;
    char *buf = iv_arena_alloc(arena, bytes);
    if (!buf) return -1;
    memset(buf, 0, bytes);
    for (int64_t r = 0; r < y.rows; r++) {
        const float *src = host + r * y.cols;
        char *dst = buf + (size_t)(r * y.ld) * es;
        if (y.dtype == IV_F32) memcpy(dst, src, (size_t)y.cols * sizeof(float));
        else if (y.dtype == IV_BF16)
            for (int64_t c = 0; c < y.cols; c++) ((uint16_t *)dst)[c] = iv_f32_to_bf16(src[c]);
        else if (y.dtype == IV_F16)
            for (int64_t c = 0; c < y.cols; c++) ((uint16_t *)dst)[c] = iv_f32_to_f16(src[c]);
        else return -1;
    }
    ops->upload(ops, y.data, buf, bytes);
    return 0;
}

const float *iv_ops_read_f32(const iv_ops *ops, iv_view v, float *scratch, int64_t *ld)
{
    if (ops->host_visible && v.dtype == IV_F32) {
        *ld = v.ld;
        return v.data;
    }
    iv_ops_download_f32(ops, v, scratch);
    *ld = v.cols;
    return scratch;
}
