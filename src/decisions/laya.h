/* A loaded Laya decision checkpoint beside its encoder: the sidecar, the
 * sequence tokens and the head (the engine runs the encoder). */
#ifndef IV_DECISIONS_LAYA_H
#define IV_DECISIONS_LAYA_H

#include "decisions/laya_config.h"
#include "decisions/laya_layout.h"
#include "heads/laya_head.h"

typedef struct iv_laya {
    iv_laya_config cfg;
    iv_laya_specials sp;
    iv_weights *w;
    iv_laya_head *head;
} iv_laya;

/* 1 when dir holds rl_agent_config.json (the Laya layout: encoder/config.json,
 * tokenizer/, model.safetensors with encoder.* and the head). */
int iv_laya_is_checkpoint(const char *dir);
/* Loads the sidecar, the specials from dir/tokenizer and the head (hidden size d). */
int iv_laya_load(iv_laya **out, const char *dir, const iv_tokenizer *tok, int d, iv_err *err);
void iv_laya_free(iv_laya *l);

#endif
