#include "decisions/laya.h"

#include <stdlib.h>
#include "base/file.h"

int iv_laya_is_checkpoint(const char *dir)
{
    char path[4096];
    iv_path_join(path, sizeof path, dir, "rl_agent_config.json");
    return iv_file_exists(path);
}

int iv_laya_load(iv_laya **out, const char *dir, const iv_tokenizer *tok, int d, iv_err *err)
{
    *out = NULL;
    iv_laya *l = calloc(1, sizeof *l);
    if (!l) return iv_errf(err, IV_E_NOMEM, "out of memory");
    char path[4096];
    if (iv_laya_config_load(&l->cfg, dir, err)) goto fail;
    iv_path_join(path, sizeof path, dir, "tokenizer");
    if (iv_laya_specials_load(&l->sp, tok, path, err)) goto fail;
    iv_path_join(path, sizeof path, dir, "model.safetensors");
    if (iv_weights_open_file(&l->w, path, err)) goto fail;
    if (iv_laya_head_load(&l->head, l->w, d, l->cfg.head_layers, l->cfg.n_act, err)) goto fail;
    *out = l;
    return 0;
fail:
    iv_laya_free(l);
    return -1;
}

void iv_laya_free(iv_laya *l)
{
    if (!l) return;
    iv_laya_head_free(l->head);
    if (l->w) iv_weights_close(l->w);
    free(l);
}
