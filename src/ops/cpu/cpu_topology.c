/* Physical cores from sysfs (see cpu_topology.h). */
#include "ops/cpu/cpu_topology.h"

#include <stdio.h>
#include <stdlib.h>

/* The lowest CPU of cpuN's sibling list ("0,64", "0-1", "3"): lists are in
 * ascending order, so it is the first number, and every CPU of the core
 * names the same one. -1 when the list is unreadable. */
static long core_of(const char *sysfs_cpu, int cpu)
{
    char path[4096], buf[256];
    if (snprintf(path, sizeof path, "%s/cpu%d/topology/thread_siblings_list", sysfs_cpu, cpu) >= (int)sizeof path)
        return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *end;
    const long first = strtol(buf, &end, 10);
    return end == buf || first < 0 ? -1 : first;
}

int iv_cpu_physical_cores(const char *sysfs_cpu, const cpu_set_t *set, size_t setsize)
{
    const int ncpu = (int)(setsize * 8);
    cpu_set_t *seen = CPU_ALLOC(ncpu);
    if (!seen) return 0;
    CPU_ZERO_S(setsize, seen);
    int cores = 0;
    for (int cpu = 0; cpu < ncpu; cpu++) {
        if (!CPU_ISSET_S(cpu, setsize, set)) continue;
        const long core = core_of(sysfs_cpu, cpu);
        if (core < 0 || core >= ncpu) {
            cores = 0;
            break;
        }
        if (!CPU_ISSET_S((int)core, setsize, seen)) {
            CPU_SET_S((int)core, setsize, seen);
            cores++;
        }
    }
    CPU_FREE(seen);
    return cores;
}

int iv_cpu_team_size(int cpus, int cores, int quota)
{
    int team = cores > 0 && cores < cpus ? cores : cpus;
    if (quota > 0 && quota < team) team = quota;
    return team > 0 ? team : 1;
}
