/* Where the hub settings come from: the same environment variables, in the
 * same order, as huggingface_hub, so one cache and one login serve both. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/hub.h"

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* "~/x" -> "$HOME/x", as os.path.expanduser does for these variables. */
static void expand_home(char *out, size_t cap, const char *path)
{
    const char *home = env("HOME");
    if (path[0] == '~' && (path[1] == '/' || !path[1]) && home)
        snprintf(out, cap, "%s%s", home, path + 1);
    else
        snprintf(out, cap, "%s", path);
}

static void hf_home(char *out, size_t cap)
{
    const char *v = env("HF_HOME");
    if (v) {
        expand_home(out, cap, v);
        return;
    }
    char base[PATH_MAX];
    const char *xdg = env("XDG_CACHE_HOME");
    if (xdg) expand_home(base, sizeof base, xdg);
    else expand_home(base, sizeof base, "~/.cache");
    iv_pathf(out, cap, "%s/huggingface", base);
}

void iv_hub_cache_root(char *out, size_t cap)
{
    const char *v = env("HF_HUB_CACHE");
    if (!v) v = env("HUGGINGFACE_HUB_CACHE"); /* the older name, still honoured upstream */
    if (v) {
        expand_home(out, cap, v);
        return;
    }
    char home[PATH_MAX];
    hf_home(home, sizeof home);
    snprintf(out, cap, "%s/hub", home);
}

void iv_hub_endpoint(char *out, size_t cap)
{
    const char *v = env("HF_ENDPOINT");
    snprintf(out, cap, "%s", v ? v : "https://huggingface.co");
    size_t n = strlen(out);
    while (n && out[n - 1] == '/') out[--n] = 0;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    size_t i = 0;
    while (s[i] && isspace((unsigned char)s[i])) i++;
    memmove(s, s + i, strlen(s + i) + 1);
}

void iv_hub_token(char *out, size_t cap)
{
    out[0] = 0;
    const char *v = env("HF_TOKEN");
    if (!v) v = env("HUGGING_FACE_HUB_TOKEN");
    if (v) {
        snprintf(out, cap, "%s", v);
        trim(out);
        return;
    }
    /* The file `huggingface-cli login` writes. */
    char path[PATH_MAX];
    const char *p = env("HF_TOKEN_PATH");
    if (p) {
        expand_home(path, sizeof path, p);
    } else {
        char home[PATH_MAX];
        hf_home(home, sizeof home);
        iv_pathf(path, sizeof path, "%s/token", home);
    }
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (!fgets(out, (int)cap, f)) out[0] = 0;
    fclose(f);
    trim(out);
}

int iv_hub_offline_env(void)
{
    const char *names[] = {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"};
    for (int i = 0; i < 2; i++) {
        const char *v = env(names[i]);
        if (!v) continue;
        /* Like huggingface_hub, the first variable that is set decides. */
        return !strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
               !strcasecmp(v, "on");
    }
    return 0;
}
