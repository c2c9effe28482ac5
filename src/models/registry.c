#include <string.h>

#include "models/family.h"

static const iv_family *const k_families[] = {
    &iv_family_bert,
    &iv_family_distilbert,
    &iv_family_mpnet,
    &iv_family_llama,
    &iv_family_mistral,
    &iv_family_qwen,
    &iv_family_gemma3,
    NULL,
};

const iv_family *iv_family_find(const char *model_type)
{
    for (int i = 0; k_families[i]; i++)
        for (const char *const *t = k_families[i]->model_types; *t; t++)
            if (!strcmp(*t, model_type)) return k_families[i];
    return NULL;
}

const char *iv_family_supported_list(void)
{
    static char buf[1024];
    if (buf[0]) return buf;
    size_t off = 0;
    for (int i = 0; k_families[i]; i++)
        for (const char *const *t = k_families[i]->model_types; *t; t++) {
            size_t n = strlen(*t);
            if (off + n + 3 >= sizeof buf) break;
            if (off) {
                memcpy(buf + off, ", ", 2);
                off += 2;
            }
            memcpy(buf + off, *t, n);
            off += n;
        }
    buf[off] = 0;
    return buf;
}
