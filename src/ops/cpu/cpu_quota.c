/* The cgroup CPU quota (see cpu_quota.h). */
#include "ops/cpu/cpu_quota.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PATH_CAP 4096

/* The first bytes of a small file, NUL-terminated; -1 when unreadable. */
static int read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return (int)n;
}

/* Whole CPUs of quota / period, at least 1; 0 for no quota. Rounded down:
 * a thread more than the quota would be put to sleep in every period, and
 * the others would wait for it at each barrier. */
static int whole_cpus(long long quota, long long period)
{
    if (quota <= 0 || period <= 0) return 0;
    const long long c = quota / period;
    return c < 1 ? 1 : c > (1 << 20) ? (1 << 20) : (int)c;
}

/* cgroup v2: cpu.max holds "max PERIOD" (no quota) or "QUOTA PERIOD". */
static int v2_cpus(const char *dir)
{
    char path[PATH_CAP + 16], buf[128];
    long long quota, period;
    snprintf(path, sizeof path, "%s/cpu.max", dir);
    if (read_small(path, buf, sizeof buf) <= 0 || sscanf(buf, "%lld %lld", &quota, &period) != 2) return 0;
    return whole_cpus(quota, period);
}

/* cgroup v1: cpu.cfs_quota_us (-1: no quota) over cpu.cfs_period_us. */
static int v1_cpus(const char *dir)
{
    char path[PATH_CAP + 32], buf[64];
    long long quota, period;
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    if (read_small(path, buf, sizeof buf) <= 0 || sscanf(buf, "%lld", &quota) != 1) return 0;
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
    if (read_small(path, buf, sizeof buf) <= 0 || sscanf(buf, "%lld", &period) != 1) return 0;
    return whole_cpus(quota, period);
}

static int smaller_quota(int a, int b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* The smallest quota of mount + rel and of its ancestors up to mount (a
 * limit set on a parent holds for its children); mount alone when
 * mount + rel does not exist. */
static int walk_up(const char *mount, const char *rel, int (*cpus_at)(const char *dir))
{
    char dir[PATH_CAP];
    const size_t root_len = strlen(mount);
    if (snprintf(dir, sizeof dir, "%s%s", mount, rel) >= (int)sizeof dir) return cpus_at(mount);
    while (strlen(dir) > root_len && dir[strlen(dir) - 1] == '/') dir[strlen(dir) - 1] = 0;
    if (access(dir, F_OK)) return cpus_at(mount);
    int best = 0;
    for (;;) {
        best = smaller_quota(best, cpus_at(dir));
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= root_len || !slash || (size_t)(slash - dir) < root_len) break;
        *slash = 0;
    }
    return best;
}

/* 1 when the comma-separated list holds `name`. */
static int lists(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

int iv_cpu_quota_cores(const char *proc_cgroup, const char *cgroup_root)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f) return 0;
    char line[PATH_CAP], mount[PATH_CAP], probe[PATH_CAP + 32];
    int best = 0;
    /* Lines "ID:CONTROLLERS:PATH"; cgroup v2's is "0::PATH". */
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *controllers = c1 + 1, *rel = c2 + 1;
        if (!strcmp(line, "0") && !*controllers) {
            /* v2 at the root (unified), or beside v1 at root/unified (hybrid). */
            snprintf(probe, sizeof probe, "%s/cgroup.controllers", cgroup_root);
            snprintf(mount, sizeof mount, access(probe, F_OK) ? "%s/unified" : "%s", cgroup_root);
            best = smaller_quota(best, walk_up(mount, rel, v2_cpus));
        } else if (lists(controllers, "cpu")) {
            /* Mounted under its controller list ("cpu,cpuacct"), usually
             * with a "cpu" link to it. */
            snprintf(mount, sizeof mount, "%s/%s", cgroup_root, controllers);
            if (access(mount, F_OK)) snprintf(mount, sizeof mount, "%s/cpu", cgroup_root);
            best = smaller_quota(best, walk_up(mount, rel, v1_cpus));
        }
    }
    fclose(f);
    return best;
}

int iv_cpu_quota_cores_self(void) { return iv_cpu_quota_cores("/proc/self/cgroup", "/sys/fs/cgroup"); }
