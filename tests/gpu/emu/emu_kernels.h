// Additions to emu_rt.h for the host emulation of src/ops/cuda/cuda_kernels.cu
// and the linear epilogue (gen_kernels_emu.py): blockDim, launches of kernels
// with any parameter list (the <<<>>> syntax the generator rewrites), the
// rounding intrinsics (plain FP32 on the host: build with -ffp-contract=off,
// so the host contracts nothing), and 16-byte accesses that fail unless aligned.
#pragma once
#include <tuple>
#include <utility>

#include "emu_rt.h"

static inline EmuDim emu_bdim() { return EmuDim{(unsigned)emu.nthreads, 1, 1}; }
#define blockDim emu_bdim()

static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }

/* Multiprocessors the launchers see (iv_cuda_sm_count): small, so grid-stride loops go round. */
extern int emu_sms;
/* The vector kernels' largest grid (IV_VEC_MAX_BLOCKS), and the resident
 * blocks per multiprocessor the launchers see (iv_cuda_occupancy). */
extern int emu_max_blocks, emu_occ;
/* Blocks run by emu_launchv (all launches so far), and the last kernel it ran. */
extern uint64_t emu_blocks_run;
extern const void *emu_last_kernel;

static inline uint4 emu_ld16(const void *p)
{
    if ((uintptr_t)p % 16 != 0) emu_fail("16-byte load not aligned");
    uint4 v;
    memcpy(&v, p, 16);
    return v;
}
static inline void emu_st16(void *p, uint4 v)
{
    if ((uintptr_t)p % 16 != 0) emu_fail("16-byte store not aligned");
    memcpy(p, &v, 16);
}

template <typename... P> struct EmuLaunchV {
    void (*kernel)(P...);
    std::tuple<P...> args;
};
template <typename... P> static void emu_kernel_trampv(void *a)
{
    EmuLaunchV<P...> *l = (EmuLaunchV<P...> *)a;
    std::apply(l->kernel, l->args);
}

/* kernel<<<grid, block, smem>>>(args...): blocks one at a time (1-D blocks
 * only), dynamic shared memory filled with NaN. */
template <typename... P, typename... A>
static void emu_launchv(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A &&...args)
{
    if (block.y != 1 || block.z != 1) emu_fail("emu_launchv: 1-D blocks only");
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.x > 1024 || grid.y > 65535 ||
        grid.z > 65535)
    {
        fprintf(stderr, "grid %u %u %u block %u\n", grid.x, grid.y, grid.z, block.x);
        emu_fail("emu_launchv: bad launch geometry");
    }
    if (smem > 227 * 1024) emu_fail("emu_launchv: too much shared memory");
    EmuLaunchV<P...> l{kernel, std::tuple<P...>((P)args...)};
    emu_last_kernel = (const void *)kernel;
    emu.nthreads = (int)block.x;
    emu.grid = EmuDim{grid.x, grid.y, grid.z};
    std::vector<unsigned char> buf(smem + 16);
    emu.smem_bytes = smem;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                emu.block = EmuDim{x, y, z};
                for (size_t i = 0; i + 1 < smem; i += 2) {
                    buf[i] = 0xc0;
                    buf[i + 1] = 0x7f;
                }
                emu.smem = buf.data();
                emu_run_block(emu_kernel_trampv<P...>, &l);
                emu_blocks_run++;
            }
}
