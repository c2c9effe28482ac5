/* How idle OpenMP workers wait between parallel regions (see omp_policy.c). */
#ifndef IV_OPS_CPU_OMP_POLICY_H
#define IV_OPS_CPU_OMP_POLICY_H

#include <stddef.h>

/* Spin iterations (GOMP_SPINCOUNT) that last about spin_us microseconds on
 * this CPU, measured. */
long iv_omp_spincount_for(double spin_us);

/* Unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, re-executes the
 * running binary with GOMP_SPINCOUNT set for a short spin (IV_OMP_SPIN_US);
 * returns only when it did not (already set, or the re-exec failed: then
 * libgomp's default stays). Call first thing in main, before any thread
 * exists: libgomp reads the variables once, when it is loaded. */
void iv_omp_prefer_short_spin(void);

/* "N OpenMP threads", with " bound to P places" where binding was asked
 * for (OMP_PROC_BIND, OMP_PLACES), for the startup log. */
void iv_omp_describe(char *buf, size_t size);

/* Microseconds an idle worker spins before it sleeps. */
#define IV_OMP_SPIN_US 50.0

#endif
