#!/usr/bin/env python3
"""Makes a host-emulation copy of src/ops/cuda/cuda_attention.cu for
tests/gpu/emu: the kernel body stays as written; only the PTX wrappers
(cp.async, ldmatrix, mma.sync, ex2), the dynamic shared memory and the
launch are swapped for emu_rt.h's versions. Fails loudly when a pattern it
replaces has changed. Usage: gen_attention_emu.py SRC.cu OUT.cpp [MAX_GRID_Z]
(a small MAX_GRID_Z exercises the launch loop over grid z chunks)."""
import re, sys
s = open(sys.argv[1]).read()
def rep(old, new, count=1):
    global s
    assert s.count(old) >= 1, old
    s = s.replace(old, new, count)
# runtime prelude after the includes
rep('#include "ops/cuda/cuda_internal.h"', '#include "ops/cuda/cuda_internal.h"\n#include "emu_rt.h"')
# PTX wrappers -> emulation
a = s.index('__device__ __forceinline__ uint32_t smem_u32')
b = s.index('template <typename T> struct Elem;')
s = s[:a] + '''static inline uint32_t smem_u32(const void *p) { return (uint32_t)((const unsigned char *)p - emu.smem); }
static inline void cp_async16(uint32_t dst, const void *src, bool valid) { emu_cp_async(dst, src, valid); }
static inline void cp_async_commit() {}
static inline void cp_async_wait_all() { emu_cp_wait(); }
static inline void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) { emu_ldsm(addr, false, r0, r1, r2, r3); }
static inline void ldsm_x4_trans(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) { emu_ldsm(addr, true, r0, r1, r2, r3); }
''' + s[b:]
m = list(re.finditer(r'asm\("mma\.sync.*?\);', s, re.S))
assert len(m) == 2
s = s[:m[1].start()] + 'emu_mma<__half>(c, a, b0, b1);' + s[m[1].end():]
s = s[:m[0].start()] + 'emu_mma<__nv_bfloat16>(c, a, b0, b1);' + s[m[0].end():]
rep('asm("ex2.approx.ftz.f32 %0, %1;\\n" : "=f"(y) : "f"(x));', 'y = exp2f(x); if (y < 1.17549435e-38f) y = 0.0f;')
rep('extern __shared__ __align__(16) unsigned char attn_smem[];', 'unsigned char *attn_smem = emu.smem;')
rep('kernel<<<grid, ATT_THREADS, smem, stream>>>(p);', 'emu_launch(kernel, grid, ATT_THREADS, smem, p); (void)stream;')
rep('const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);', 'const cudaError_t e = cudaSuccess;')
rep('const cudaError_t e = cudaGetLastError();', 'const cudaError_t e = cudaSuccess;')
if len(sys.argv) > 3:
    rep('constexpr int ATT_MAX_GRID_Z = 65535;', 'constexpr int ATT_MAX_GRID_Z = %d;' % int(sys.argv[3]))
open(sys.argv[2], 'w').write(s)
