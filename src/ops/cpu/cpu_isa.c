/* The instruction-set cap (see cpu_isa.h). */
#include "ops/cpu/cpu_isa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"baseline", "avx2", "avx512"};

/* -1 until read; threads may race to fill it in, they all store the same. */
static int cap = -1;

static int read_cap(void)
{
    const char *v = getenv("IV_CPU_ISA");
    if (!v || !*v) return IV_ISA_AVX512;
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i])) return i;
    fprintf(stderr, "IV_CPU_ISA=%s is not one of baseline, avx2, avx512; ignored\n", v);
    return IV_ISA_AVX512;
}

static int current_cap(void)
{
    int c = __atomic_load_n(&cap, __ATOMIC_RELAXED);
    if (c < 0) {
        c = read_cap();
        __atomic_store_n(&cap, c, __ATOMIC_RELAXED);
    }
    return c;
}

int iv_cpu_isa_allows(iv_cpu_isa level) { return (int)level <= current_cap(); }

const char *iv_cpu_isa_cap_name(void) { return names[current_cap()]; }

iv_cpu_isa iv_cpu_isa_used(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const int fma = __builtin_cpu_supports("fma");
    if (fma && __builtin_cpu_supports("avx512f") && iv_cpu_isa_allows(IV_ISA_AVX512)) return IV_ISA_AVX512;
    if (fma && __builtin_cpu_supports("avx2") && iv_cpu_isa_allows(IV_ISA_AVX2)) return IV_ISA_AVX2;
#endif
    return IV_ISA_BASELINE;
}

const char *iv_cpu_isa_used_name(void) { return names[iv_cpu_isa_used()]; }
