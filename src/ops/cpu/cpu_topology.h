/* Physical cores, from the kernel's CPU topology in sysfs. Simultaneous
 * multithreading (Intel's Hyper-Threading, AMD's SMT) shows each core as
 * two or more CPUs that share its FMA units, L1 and L2. The linear kernels
 * keep the FMA units busy and block for one thread's share of L1 and L2
 * (gemm_panel.c), so a second thread on the same core adds no arithmetic
 * and halves each thread's cache. onnxruntime sizes its default pool by
 * physical cores too; libgomp sizes its team by CPUs. */
#ifndef IV_OPS_CPU_CPU_TOPOLOGY_H
#define IV_OPS_CPU_CPU_TOPOLOGY_H

#include <sched.h>
#include <stddef.h>

/* How many distinct cores the CPUs of set (setsize bytes, for the CPU_*_S
 * macros) belong to, from <sysfs_cpu>/cpuN/topology/thread_siblings_list
 * (sysfs_cpu is normally /sys/devices/system/cpu): CPUs listed as siblings
 * share a core. 0 when a CPU of the set has no readable list (no sysfs in
 * a container, an unusual kernel): callers then count CPUs instead. */
int iv_cpu_physical_cores(const char *sysfs_cpu, const cpu_set_t *set, size_t setsize);

/* The OpenMP team for `cpus` CPUs to run on, spread over `cores` physical
 * cores (0: unknown), under a cgroup quota of `quota` whole CPUs (0: none):
 * one thread per core, no more than the quota allows, at least 1. */
int iv_cpu_team_size(int cpus, int cores, int quota);

#endif
