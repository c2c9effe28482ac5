/* The OpenMP wait policy every subcommand runs with (see omp_policy.c). */
#ifndef IV_CLI_OMP_POLICY_H
#define IV_CLI_OMP_POLICY_H

/* Unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, re-executes the
 * running binary with OMP_WAIT_POLICY=passive; returns only when it did not
 * (already set, or the re-exec failed: then the default policy stays). Call
 * first thing in main, before any thread exists. */
void iv_prefer_passive_openmp(void);

#endif
