/* Environment variables as flags (see env_flags.h). */
#include "cli/env_flags.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int iv_env_flag_name(const char *flag, char *out, unsigned n)
{
    while (*flag == '-') flag++;
    unsigned k = 0;
    for (; flag[k]; k++) {
        if (k + 1 >= n) return -1;
        out[k] = flag[k] == '-' ? '_' : (char)toupper((unsigned char)flag[k]);
    }
    if (k >= n) return -1;
    out[k] = 0;
    return 0;
}

static int given(int argc, char **argv, const char *flag)
{
    const size_t n = strlen(flag);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], flag, n) && (argv[i][n] == 0 || argv[i][n] == '=')) return 1;
    return 0;
}

static int count(const char *const *names)
{
    int n = 0;
    while (names && names[n]) n++;
    return n;
}

int iv_env_flags_merge(int argc, char **argv, const char *const *flags, const char *const *switches,
                       const char *(*getenv_fn)(const char *name), int *out_argc, char ***out_argv)
{
    const int most = argc + count(flags) + count(switches) + 1;
    char **merged = calloc((size_t)most, sizeof *merged);
    if (!merged) return -1;
    int n = 0;
    merged[n++] = argv[0];
    for (int pass = 0; pass < 2; pass++) {
        const char *const *names = pass ? switches : flags;
        for (int i = 0; names && names[i]; i++) {
            char var[64];
            const char *v;
            if (iv_env_flag_name(names[i], var, sizeof var) || !(v = getenv_fn(var)) || !*v ||
                given(argc, argv, names[i]))
                continue;
            if (pass && strcmp(v, "true") && strcmp(v, "1")) continue;
            const size_t len = strlen(names[i]) + (pass ? 0 : 1 + strlen(v)) + 1;
            char *arg = malloc(len);
            if (!arg) {
                iv_env_flags_free(argc, argv, merged);
                return -1;
            }
            if (pass) snprintf(arg, len, "%s", names[i]);
            else snprintf(arg, len, "%s=%s", names[i], v);
            merged[n++] = arg;
        }
    }
    for (int i = 1; i < argc; i++) merged[n++] = argv[i];
    merged[n] = NULL;
    *out_argc = n;
    *out_argv = merged;
    return 0;
}

void iv_env_flags_free(int argc, char **argv, char **merged)
{
    if (!merged) return;
    /* The inserted entries sit between argv[0] and the first original one. */
    for (int i = 1; merged[i] && (argc < 2 || merged[i] != argv[1]); i++) free(merged[i]);
    free(merged);
}
