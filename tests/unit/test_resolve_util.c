#include "unit/test_resolve_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/hub.h"
#include "unit/tmp_test_util.h"

static const char *const k_vars[RT_ENV_COUNT] = {
    "HF_HOME",        "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE",  "XDG_CACHE_HOME",
    "HF_ENDPOINT",    "HF_TOKEN",     "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH",
    "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HOME",
};

void rt_env_save(rt_env *e)
{
    for (int i = 0; i < RT_ENV_COUNT; i++) {
        const char *v = getenv(k_vars[i]);
        e->old[i] = v ? strdup(v) : NULL;
        /* HOME stays: tests that need another one set it themselves. */
        if (strcmp(k_vars[i], "HOME") != 0) unsetenv(k_vars[i]);
    }
}

void rt_env_restore(rt_env *e)
{
    for (int i = 0; i < RT_ENV_COUNT; i++) {
        if (e->old[i]) setenv(k_vars[i], e->old[i], 1);
        else unsetenv(k_vars[i]);
        free(e->old[i]);
        e->old[i] = NULL;
    }
}

int rt_tmpdir(char *out) { return tmp_dir(out, 4096, "resolve"); }

void rt_rmtree(const char *dir) { tmp_rmtree(dir); }

int rt_write(const char *path, const void *data, size_t len)
{
    if (iv_mkdirs(path, 0, NULL)) return -1;
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, len, f) == len;
    ok &= fclose(f) == 0;
    return ok ? 0 : -1;
}

int rt_write_str(const char *path, const char *text) { return rt_write(path, text, strlen(text)); }

char *rt_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len) *len = buf ? (size_t)n : 0;
    return buf;
}
