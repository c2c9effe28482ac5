/* The cgroup CPU quota of this process (a container's `--cpus`, a
 * Kubernetes CPU limit), which caps how many CPUs it may keep busy
 * (iv_cpu_usable_cores, omp_policy.h). libgomp sizes its team from the
 * affinity mask alone, so in a container limited to 2 CPUs of a 64-core
 * host it would start 64 threads, and every barrier of a forward pass
 * would wait for threads the quota has put to sleep until the next
 * period. */
#ifndef IV_OPS_CPU_CPU_QUOTA_H
#define IV_OPS_CPU_CPU_QUOTA_H

/* The whole CPUs a cgroup quota allows (quota / period, rounded down, at
 * least 1), the smallest along the process' cgroup and its ancestors; 0
 * when no quota applies. proc_cgroup is a /proc/<pid>/cgroup file and
 * cgroup_root where the cgroup file systems are mounted (/sys/fs/cgroup):
 * both cgroup v2 (cpu.max) and v1 (cpu.cfs_quota_us, cpu.cfs_period_us).
 * A path the file names that does not exist under the root (a container
 * with its own cgroup namespace sees its cgroup as the root) is read from
 * the root itself. */
int iv_cpu_quota_cores(const char *proc_cgroup, const char *cgroup_root);

/* The same for this process: iv_cpu_quota_cores("/proc/self/cgroup", "/sys/fs/cgroup"). */
int iv_cpu_quota_cores_self(void);

#endif
