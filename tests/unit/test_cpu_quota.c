/* The cgroup CPU quota (ops/cpu/cpu_quota.c) read from made-up cgroup
 * trees: cgroup v2 (cpu.max) with a limit on the process' own cgroup or on
 * an ancestor, none, a path a container's namespace hides, and cgroup v1
 * (cpu.cfs_quota_us / cpu.cfs_period_us) under a controller list beside
 * v2 (hybrid). */
#include <stdio.h>
#include <sys/stat.h>

#include "ops/cpu/cpu_quota.h"
#include "test.h"
#include "unit/tmp_test_util.h"

/* The quota a fresh tree gives: files is NULL-terminated (path, text) pairs
 * under the tree's sys/fs/cgroup; proc is the /proc/self/cgroup text. */
static int quota_of(const char *proc, const char *const *files)
{
    char tmp[256], root[512], proc_path[512];
    if (tmp_dir(tmp, sizeof tmp, "cpu_quota")) return -100;
    snprintf(root, sizeof root, "%s/cgroup", tmp);
    snprintf(proc_path, sizeof proc_path, "%s/proc_cgroup", tmp);
    int ok = mkdir(root, 0755) == 0 && tmp_put(tmp, "proc_cgroup", proc) == 0;
    for (int i = 0; ok && files[i]; i += 2) ok = tmp_put(root, files[i], files[i + 1]) == 0;
    const int q = ok ? iv_cpu_quota_cores(proc_path, root) : -100;
    tmp_rmtree(tmp);
    return q;
}

TEST(cpu_quota_cgroup_v2)
{
    /* The pod's limit holds for the container below it; 1.5 CPUs is 1. */
    const char *ancestor[] = {"cgroup.controllers", "cpu memory\n", "kube/cpu.max", "300000 100000\n",
                              "kube/pod1/cpu.max", "max 100000\n", NULL};
    CHECK_EQ_INT(quota_of("0::/kube/pod1\n", ancestor), 3);
    const char *leaf[] = {"cgroup.controllers", "cpu\n", "kube/cpu.max", "300000 100000\n", "kube/pod1/cpu.max",
                          "150000 100000\n", NULL};
    CHECK_EQ_INT(quota_of("0::/kube/pod1\n", leaf), 1);
    const char *tiny[] = {"cgroup.controllers", "cpu\n", "a/cpu.max", "20000 100000\n", NULL};
    CHECK_EQ_INT(quota_of("0::/a\n", tiny), 1);
    const char *none[] = {"cgroup.controllers", "cpu\n", "cpu.max", "max 100000\n", "a/cpu.max", "max 100000\n", NULL};
    CHECK_EQ_INT(quota_of("0::/a\n", none), 0);
    /* A container in its own namespace: /proc names a path its root does not hold. */
    const char *hidden[] = {"cgroup.controllers", "cpu\n", "cpu.max", "400000 100000\n", NULL};
    CHECK_EQ_INT(quota_of("0::/system.slice/docker-1.scope\n", hidden), 4);
    const char *garbage[] = {"cgroup.controllers", "cpu\n", "a/cpu.max", "lots\n", NULL};
    CHECK_EQ_INT(quota_of("0::/a\n", garbage), 0);
}

TEST(cpu_quota_cgroup_v1)
{
    /* Hybrid: v1 controllers at the root, v2 (no cpu.max) at root/unified. */
    const char *v1[] = {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n",
                        "cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n",
                        "cpu,cpuacct/cpu.cfs_quota_us", "-1\n",
                        "cpu,cpuacct/cpu.cfs_period_us", "100000\n",
                        "unified/cgroup.procs", "",
                        NULL};
    CHECK_EQ_INT(quota_of("5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n", v1), 2);
    const char *unlimited[] = {"cpu/x/cpu.cfs_quota_us", "-1\n", "cpu/x/cpu.cfs_period_us", "100000\n", NULL};
    CHECK_EQ_INT(quota_of("1:cpu:/x\n", unlimited), 0);
    /* cpuacct is not the cpu controller. */
    const char *acct[] = {"cpuacct/x/cpu.cfs_quota_us", "100000\n", "cpuacct/x/cpu.cfs_period_us", "100000\n", NULL};
    CHECK_EQ_INT(quota_of("2:cpuacct:/x\n", acct), 0);
    /* No /proc file: no quota. */
    CHECK_EQ_INT(iv_cpu_quota_cores("/nonexistent/cgroup", "/nonexistent"), 0);
}
