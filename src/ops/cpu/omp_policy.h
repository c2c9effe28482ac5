/* How many OpenMP threads run and how idle ones wait between parallel
 * regions (see omp_policy.c). */
#ifndef IV_OPS_CPU_OMP_POLICY_H
#define IV_OPS_CPU_OMP_POLICY_H

#include <stddef.h>

/* Spin iterations (GOMP_SPINCOUNT) that last about spin_us microseconds on
 * this CPU, measured. */
long iv_omp_spincount_for(double spin_us);

/* Re-executes the running binary with GOMP_SPINCOUNT set for a short spin
 * (IV_OMP_SPIN_US) unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT,
 * and with OMP_NUM_THREADS set to one thread per physical core
 * (cpu_topology.h), capped by the cgroup CPU quota (cpu_quota.h), where
 * that is below the CPUs the process may run on and the user did not set
 * it; returns only when it did not (nothing to set, or the re-exec failed:
 * then libgomp's defaults stay). Call first thing in main, before any
 * thread exists: libgomp reads the variables once, when it is loaded. */
void iv_omp_prefer_short_spin(void);

/* The OpenMP team this process started with: one thread per physical core
 * within the quota (iv_omp_prefer_short_spin), or OMP_NUM_THREADS. CPU
 * replicas of a model share it out. */
int iv_omp_team_size(void);

/* CPUs this process may keep busy: the CPUs of its OpenMP places or
 * affinity mask, capped by the cgroup CPU quota; at least 1. */
int iv_cpu_usable_cores(void);

/* "N OpenMP threads", with " bound to P places" where binding was asked
 * for (OMP_PROC_BIND, OMP_PLACES), " (C CPUs on K physical cores)" where
 * cores run several CPUs (SMT) and " (cgroup CPU quota Q)" where one
 * applies, for the startup log. */
void iv_omp_describe(char *buf, size_t size);

/* Microseconds an idle worker spins before it sleeps. */
#define IV_OMP_SPIN_US 50.0

#endif
