/* Which instruction sets the CPU kernels may use: what this CPU has, capped
 * by the environment variable IV_CPU_ISA ("avx512", "avx2" or "baseline"),
 * read once. The cap lets one machine run, test and benchmark exactly the
 * kernels an older CPU would pick: IV_CPU_ISA=avx2 on an AVX-512 Xeon runs
 * the AVX2 panel, int8 and few-row kernels of a Zen 2 (with a binary built
 * for that target, `make ARCH=-march=haswell`, so that the vector math and
 * attention compiled for the build are AVX2 too). Every runtime kernel
 * choice asks here. */
#ifndef IV_OPS_CPU_CPU_ISA_H
#define IV_OPS_CPU_CPU_ISA_H

typedef enum iv_cpu_isa { IV_ISA_BASELINE = 0, IV_ISA_AVX2 = 1, IV_ISA_AVX512 = 2 } iv_cpu_isa;

/* Nonzero when kernels of this level may run (the CPU's own features are
 * still checked by each kernel's availability test). */
int iv_cpu_isa_allows(iv_cpu_isa level);
/* The cap in force, as IV_CPU_ISA spells it ("avx512" when unset). */
const char *iv_cpu_isa_cap_name(void);
/* The instruction set the kernels actually use: the highest level this CPU
 * has (AVX-512F + FMA, AVX2 + FMA, else baseline) that the cap allows. */
iv_cpu_isa iv_cpu_isa_used(void);
const char *iv_cpu_isa_used_name(void);

#endif
