// Host emulation of the CUDA execution model for one kernel file: a CTA's
// threads are fibers on one OS thread; __syncthreads, shuffles, ldmatrix and
// mma.sync are collectives implemented from the PTX ISA's fragment layouts;
// cp.async copies happen at issue or at the issuing thread's wait (random).
// The scheduler runs random warps for random numbers of rounds, so warps
// drift apart between block barriers.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <algorithm>
#include <vector>
using std::max;
using std::min;

#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
#ifndef __grid_constant__
#define __grid_constant__
#endif

extern "C" void emu_switch(void **from_sp, void *to_sp);

struct EmuDim {
    unsigned x, y, z;
};

struct EmuCopy {
    uint32_t dst;
    unsigned char data[16];
};

struct EmuFiber {
    void *sp;
    unsigned char *stack;
    int tid;
    bool done;
    std::vector<EmuCopy> pending;
};

struct EmuWarp {
    int arrived = 0;
    unsigned gen = 0;
    int kind = -1;
    uint32_t in[32][12];
    uint32_t out[32][4];
};

struct EmuState {
    int nthreads = 0;
    EmuDim block, grid;
    unsigned char *smem = nullptr;
    size_t smem_bytes = 0;
    std::vector<EmuFiber> fibers;
    EmuWarp warps[32];
    int bar_arrived = 0;
    unsigned bar_gen = 0;
    void *sched_sp = nullptr;
    int cur = -1;
    uint64_t progress = 0;
    uint64_t rng = 88172645463325252ull;
    int defer_pct = 50; // cp.async copies deferred to the wait, in percent
    void (*body)(void *) = nullptr;
    void *body_arg = nullptr;
    uint64_t collectives = 0;
};
extern EmuState emu;

static inline uint64_t emu_rand()
{
    emu.rng ^= emu.rng << 13;
    emu.rng ^= emu.rng >> 7;
    emu.rng ^= emu.rng << 17;
    return emu.rng;
}

static inline EmuDim emu_tidx() { return EmuDim{(unsigned)emu.fibers[emu.cur].tid, 0, 0}; }
#define threadIdx emu_tidx()
#define blockIdx emu.block
#define gridDim emu.grid

[[noreturn]] static inline void emu_fail(const char *what)
{
    fprintf(stderr, "EMU FAILURE: %s (thread %d, block %u %u %u)\n", what, emu.cur, emu.block.x, emu.block.y,
            emu.block.z);
    abort();
}

static inline void emu_yield() { emu_switch(&emu.fibers[emu.cur].sp, emu.sched_sp); }

static inline void emu_syncthreads()
{
    const unsigned g = emu.bar_gen;
    emu.progress++;
    if (++emu.bar_arrived == emu.nthreads) {
        emu.bar_arrived = 0;
        emu.bar_gen++;
        return;
    }
    while (emu.bar_gen == g) emu_yield();
}
#define __syncthreads() emu_syncthreads()

/* A warp collective: deposits in[], waits for the 32 lanes, the last one
 * computes every lane's out[] with fn. */
static inline void emu_collective(int kind, const uint32_t *in, int n_in, uint32_t *out, int n_out,
                                  void (*fn)(EmuWarp &))
{
    const int tid = emu.fibers[emu.cur].tid, w = tid / 32, lane = tid % 32;
    EmuWarp &W = emu.warps[w];
    if (W.arrived == 0) W.kind = kind;
    else if (W.kind != kind) emu_fail("divergent warp collective");
    memcpy(W.in[lane], in, n_in * 4);
    const unsigned g = W.gen;
    emu.progress++;
    emu.collectives++;
    if (++W.arrived == 32) {
        fn(W);
        W.arrived = 0;
        W.gen++;
    } else {
        while (W.gen == g) emu_yield();
    }
    memcpy(out, W.out[lane], n_out * 4);
}

static void emu_shfl_fn(EmuWarp &W)
{
    for (int l = 0; l < 32; l++) W.out[l][0] = W.in[l ^ W.in[l][1]][0];
}
static inline float emu_shfl_xor(unsigned mask, float v, int lm)
{
    if (mask != 0xffffffffu) emu_fail("shfl mask");
    uint32_t in[2], out[1];
    memcpy(&in[0], &v, 4);
    in[1] = (uint32_t)lm;
    emu_collective(1, in, 2, out, 1, emu_shfl_fn);
    float r;
    memcpy(&r, out, 4);
    return r;
}
#define __shfl_xor_sync(m, v, l) emu_shfl_xor((m), (v), (l))
#define __ldg(p) (*(p))

/* ldmatrix .x4 (.trans): lanes 8i..8i+7 give the row addresses of matrix i. */
static void emu_ldsm_fn(EmuWarp &W, bool trans)
{
    uint16_t M[4][8][8];
    for (int i = 0; i < 4; i++)
        for (int r = 0; r < 8; r++) {
            uint32_t addr = W.in[8 * i + r][0];
            if (addr % 16 != 0 || addr + 16 > emu.smem_bytes) emu_fail("ldmatrix address");
            memcpy(M[i][r], emu.smem + addr, 16);
        }
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            uint16_t lo, hi;
            if (!trans) {
                lo = M[i][l / 4][2 * (l % 4)];
                hi = M[i][l / 4][2 * (l % 4) + 1];
            } else {
                lo = M[i][2 * (l % 4)][l / 4];
                hi = M[i][2 * (l % 4) + 1][l / 4];
            }
            W.out[l][i] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
}
static void emu_ldsm_fn_n(EmuWarp &W) { emu_ldsm_fn(W, false); }
static void emu_ldsm_fn_t(EmuWarp &W) { emu_ldsm_fn(W, true); }
static inline void emu_ldsm(uint32_t addr, bool trans, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    uint32_t in[1] = {addr}, out[4];
    emu_collective(trans ? 3 : 2, in, 1, out, 4, trans ? emu_ldsm_fn_t : emu_ldsm_fn_n);
    r0 = out[0];
    r1 = out[1];
    r2 = out[2];
    r3 = out[3];
}

template <typename T> static inline float emu_to_float(uint16_t x);
template <> inline float emu_to_float<__nv_bfloat16>(uint16_t x) { return __bfloat162float(__ushort_as_bfloat16(x)); }
template <> inline float emu_to_float<__half>(uint16_t x) { return __half2float(__ushort_as_half(x)); }

/* mma.m16n8k16 row.col, FP32 accumulate. in: a0..a3, b0, b1, c0..c3 (floats as bits). */
template <typename T> static void emu_mma_fn(EmuWarp &W)
{
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        const uint32_t *in = W.in[l];
        auto lo = [](uint32_t v) { return emu_to_float<T>((uint16_t)(v & 0xffff)); };
        auto hi = [](uint32_t v) { return emu_to_float<T>((uint16_t)(v >> 16)); };
        A[g][2 * t] = lo(in[0]);
        A[g][2 * t + 1] = hi(in[0]);
        A[g + 8][2 * t] = lo(in[1]);
        A[g + 8][2 * t + 1] = hi(in[1]);
        A[g][2 * t + 8] = lo(in[2]);
        A[g][2 * t + 9] = hi(in[2]);
        A[g + 8][2 * t + 8] = lo(in[3]);
        A[g + 8][2 * t + 9] = hi(in[3]);
        B[2 * t][g] = lo(in[4]);
        B[2 * t + 1][g] = hi(in[4]);
        B[2 * t + 8][g] = lo(in[5]);
        B[2 * t + 9][g] = hi(in[5]);
        float c[4];
        memcpy(c, in + 6, 16);
        C[g][2 * t] = c[0];
        C[g][2 * t + 1] = c[1];
        C[g + 8][2 * t] = c[2];
        C[g + 8][2 * t + 1] = c[3];
    }
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            float acc = C[m][n];
            for (int k = 0; k < 16; k++) acc += A[m][k] * B[k][n];
            C[m][n] = acc;
        }
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        float d[4] = {C[g][2 * t], C[g][2 * t + 1], C[g + 8][2 * t], C[g + 8][2 * t + 1]};
        memcpy(W.out[l], d, 16);
    }
}
template <typename T> static inline void emu_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    uint32_t in[10];
    memcpy(in, a, 16);
    in[4] = b0;
    in[5] = b1;
    memcpy(in + 6, c, 16);
    uint32_t out[4];
    emu_collective(std::is_same<T, __nv_bfloat16>::value ? 4 : 5, in, 10, out, 4, emu_mma_fn<T>);
    memcpy(c, out, 16);
}

static inline void emu_cp_do(uint32_t dst, const unsigned char *data)
{
    if (dst % 16 != 0 || dst + 16 > emu.smem_bytes) emu_fail("cp.async destination");
    memcpy(emu.smem + dst, data, 16);
}
static inline void emu_cp_async(uint32_t dst, const void *src, bool valid)
{
    EmuCopy c;
    c.dst = dst;
    if (valid) {
        if ((uintptr_t)src % 16 != 0) emu_fail("cp.async source alignment");
        memcpy(c.data, src, 16); /* the read happens now (global data is constant) */
    } else {
        memset(c.data, 0, 16);
    }
    if ((int)(emu_rand() % 100) < emu.defer_pct) emu.fibers[emu.cur].pending.push_back(c);
    else emu_cp_do(dst, c.data);
}
static inline void emu_cp_wait()
{
    auto &p = emu.fibers[emu.cur].pending;
    for (auto &c : p) emu_cp_do(c.dst, c.data);
    p.clear();
}

void emu_run_block(void (*body)(void *), void *arg);

template <typename P> struct EmuLaunch {
    void (*kernel)(P);
    const P *p;
};
template <typename P> static void emu_kernel_tramp(void *a)
{
    EmuLaunch<P> *l = (EmuLaunch<P> *)a;
    l->kernel(*l->p);
}

/* Runs kernel over the grid, one block at a time, smem filled with NaN. */
template <typename P> static void emu_launch(void (*kernel)(P), dim3 grid, int threads, size_t smem, const P &p)
{
    emu.nthreads = threads;
    emu.grid = EmuDim{grid.x, grid.y, grid.z};
    std::vector<unsigned char> buf(smem + 16);
    emu.smem_bytes = smem;
    EmuLaunch<P> l = {kernel, &p};
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                emu.block = EmuDim{x, y, z};
                for (size_t i = 0; i + 1 < smem; i += 2) {
                    buf[i] = 0xc0;
                    buf[i + 1] = 0x7f; /* bf16 NaN; f16 reads it as NaN too */
                }
                emu.smem = buf.data();
                emu_run_block(emu_kernel_tramp<P>, &l);
            }
}
