/* Physical cores (ops/cpu/cpu_topology.c) counted from made-up sysfs CPU
 * trees: 2-way SMT with siblings numbered apart ("0,2") or side by side
 * ("0-1"), a CPU set holding one sibling of a core or both, no SMT, a CPU
 * without a topology file; and the team size that follows, with and
 * without a cgroup quota. */
#include <stdio.h>

#include "ops/cpu/cpu_topology.h"
#include "test.h"
#include "unit/tmp_test_util.h"

/* Cores among the CPUs listed in `cpus` (-1 ends it) of a fresh tree whose
 * cpuN/topology/thread_siblings_list is siblings[N] (NULL: no file). */
static int cores_of(const char *const *siblings, int n, const int *cpus)
{
    char tmp[256], rel[64];
    if (tmp_dir(tmp, sizeof tmp, "cpu_topology")) return -100;
    int ok = 1;
    for (int c = 0; ok && c < n; c++) {
        snprintf(rel, sizeof rel, "cpu%d/topology/thread_siblings_list", c);
        if (siblings[c]) ok = tmp_put(tmp, rel, siblings[c]) == 0;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; cpus[i] >= 0; i++) CPU_SET(cpus[i], &set);
    const int cores = ok ? iv_cpu_physical_cores(tmp, &set, sizeof set) : -100;
    tmp_rmtree(tmp);
    return cores;
}

TEST(cpu_topology_counts_cores)
{
    /* 4 cores x 2 threads, Linux's usual numbering: CPU c and c + 4 share a core. */
    const char *apart[] = {"0,4\n", "1,5\n", "2,6\n", "3,7\n", "0,4\n", "1,5\n", "2,6\n", "3,7\n"};
    CHECK_EQ_INT(cores_of(apart, 8, (const int[]){0, 1, 2, 3, 4, 5, 6, 7, -1}), 4);
    CHECK_EQ_INT(cores_of(apart, 8, (const int[]){0, 4, -1}), 1);
    CHECK_EQ_INT(cores_of(apart, 8, (const int[]){4, 5, -1}), 2);  /* second siblings only */
    CHECK_EQ_INT(cores_of(apart, 8, (const int[]){1, 2, 6, -1}), 2);
    /* Siblings side by side, as a range. */
    const char *ranges[] = {"0-1\n", "0-1\n", "2-3\n", "2-3\n"};
    CHECK_EQ_INT(cores_of(ranges, 4, (const int[]){0, 1, 2, 3, -1}), 2);
    CHECK_EQ_INT(cores_of(ranges, 4, (const int[]){1, 3, -1}), 2);
    /* No SMT: each CPU its own core (this project's 2-CPU CI and bench VMs). */
    const char *single[] = {"0\n", "1\n"};
    CHECK_EQ_INT(cores_of(single, 2, (const int[]){0, 1, -1}), 2);
    /* A CPU of the set without a readable list, or a list that is not one:
     * unknown, so the caller counts CPUs. */
    const char *missing[] = {"0\n", NULL};
    CHECK_EQ_INT(cores_of(missing, 2, (const int[]){0, 1, -1}), 0);
    CHECK_EQ_INT(cores_of(missing, 2, (const int[]){0, -1}), 1);
    const char *garbage[] = {"x\n", "1\n"};
    CHECK_EQ_INT(cores_of(garbage, 2, (const int[]){0, 1, -1}), 0);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    CHECK_EQ_INT(iv_cpu_physical_cores("/nonexistent", &one, sizeof one), 0);
}

TEST(cpu_topology_team_size)
{
    CHECK_EQ_INT(iv_cpu_team_size(8, 4, 0), 4); /* one thread per core */
    CHECK_EQ_INT(iv_cpu_team_size(8, 0, 0), 8); /* cores unknown: CPUs */
    CHECK_EQ_INT(iv_cpu_team_size(2, 2, 0), 2);
    CHECK_EQ_INT(iv_cpu_team_size(8, 4, 3), 3); /* the quota is lower */
    CHECK_EQ_INT(iv_cpu_team_size(8, 4, 6), 4); /* the cores are */
    CHECK_EQ_INT(iv_cpu_team_size(64, 0, 2), 2);
    CHECK_EQ_INT(iv_cpu_team_size(1, 1, 0), 1);
    CHECK_EQ_INT(iv_cpu_team_size(0, 0, 0), 1);
}
