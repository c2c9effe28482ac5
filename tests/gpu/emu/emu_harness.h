// What every host-emulation check of the CUDA table (tests/gpu/emu/*_check.cpp)
// needs around the kernels it includes: the table's instance and its error
// recording (the first error wins, as in cuda_table.cu), buffers that end at
// a PROT_NONE page (a read or write past a view faults), and a seeded
// splitmix64 random stream, and the 16-bit storage of the dtype under test.
#pragma once
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <utility>
#include <vector>

#include "ops/cuda/cuda_internal.h"

static cuda_ctx g_ctx;
static int g_err = 0;
static char g_msg[512];
cuda_ctx *iv_cuda_ctx(const iv_ops *ops) { return &g_ctx; }
void iv_cuda_note_error(const iv_ops *ops, cudaError_t e, const char *where)
{
    if (e == cudaSuccess || g_err) return;
    g_err = 1;
    snprintf(g_msg, sizeof g_msg, "%s: error %d", where, (int)e);
}
void iv_cuda_note_invalid(const iv_ops *ops, const char *fmt, ...)
{
    if (g_err) return;
    g_err = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
}
/* Launch errors: none on the emulator (bad geometry aborts in emu_launchv). */
extern "C" cudaError_t cudaGetLastError(void) { return cudaSuccess; }

/* bytes (rounded up to align) ending at a PROT_NONE page, with one before too. */
static std::vector<std::pair<void *, size_t>> g_maps;
static void *guarded(size_t bytes, size_t align = 16)
{
    const size_t pg = 4096;
    size_t b = (bytes + align - 1) / align * align;
    if (b == 0) b = align;
    size_t span = (b + pg - 1) / pg * pg + 2 * pg;
    unsigned char *m = (unsigned char *)mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) abort();
    mprotect(m, pg, PROT_NONE);
    mprotect(m + span - pg, pg, PROT_NONE);
    g_maps.push_back({m, span});
    return m + span - pg - b;
}
static void free_all()
{
    for (auto &p : g_maps) munmap(p.first, p.second);
    g_maps.clear();
}

static uint64_t rs;
static uint64_t rnext()
{
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rint_(int n) { return (int)(rnext() % (uint64_t)n); }
static float runi(float lo, float hi) { return lo + (hi - lo) * (float)((rnext() >> 40) * (1.0 / 16777216.0)); }

/* The dtype under test (set by the check) and its 16-bit storage, rounded to nearest even. */
static iv_dtype g_dt;
static uint16_t to16(float x)
{
    if (g_dt == IV_BF16) return __bfloat16_as_ushort(__float2bfloat16_rn(x));
    return __half_as_ushort(__float2half_rn(x));
}
static float from16(uint16_t x)
{
    if (g_dt == IV_BF16) return __bfloat162float(__ushort_as_bfloat16(x));
    return __half2float(__ushort_as_half(x));
}
