/* sentence-transformers metadata of a checkpoint directory: modules.json and
 * the modules it lists (Pooling, Dense, Normalize, and PyLate's Dense),
 * sentence_bert_config.json (max_seq_length) and
 * config_sentence_transformers.json (prompts; PyLate ColBERT settings).
 * Absent files give the defaults; unknown module types are rejected by name. */
#ifndef IV_HEADS_ST_META_H
#define IV_HEADS_ST_META_H

#include <stdint.h>

#include "base/err.h"
#include "ops/ops.h"

/* iv_pool_mode: ops/ops.h (the pool op runs it on every device). */

#define IV_ST_MAX_DENSE 4
#define IV_ST_MAX_PROMPTS 32
#define IV_ST_MAX_POOL_MODES 8

/* The modules run in this order: backbone, token-level Dense modules, Pooling,
 * sentence-level Dense modules, Normalize. Any other order in modules.json is
 * rejected as unsupported, so dense[] read front to back is the pipeline. */
typedef struct iv_st_dense {
    char dir[4096];      /* module directory (holds model.safetensors) */
    int in_features, out_features;
    int bias;
    iv_act act;          /* activation_function, e.g. torch.nn.modules.activation.Tanh */
    int token_level;     /* module_input_name "token_embeddings": projects every token, before pooling */
    int scores;          /* module_output_name "scores": a CrossEncoder's score head (dropped, see cross_encoder) */
} iv_st_dense;

/* A PyLate ColBERT checkpoint (multi-vector): modules.json lists
 * pylate.models.Dense modules, or config_sentence_transformers.json says
 * model_type "ColBERT". PyLate projects every token through its Dense chain
 * (all of iv_st_meta.dense[] are then token_level). Keys absent from
 * config_sentence_transformers.json keep PyLate's defaults, shown here. */
typedef struct iv_st_pylate {
    int present;
    char *query_prefix;             /* "[Q] "; "" = none */
    char *document_prefix;          /* "[D] "; "" = none */
    int query_length;               /* 32: queries padded to this with [MASK] (expansion) */
    int document_length;            /* 180 */
    int do_query_expansion;         /* 1 */
    int attend_to_expansion_tokens; /* 0; forced to 0 without query expansion, as PyLate does */
    int n_skiplist;                 /* -1: absent (PyLate uses string.punctuation) */
    char **skiplist_words;          /* [n_skiplist] token strings left out of document vectors */
} iv_st_pylate;

/* sentence-transformers 6.3's LogitScore (cross_encoder.modules.logit_score):
 * a causal LM reranker's score is logit[true] - logit[false] at the last
 * token, or logit[true] alone when false_token_id is null. */
typedef struct iv_st_logit_score {
    int present;
    int32_t true_id, false_id; /* false_id -1: none */
} iv_st_logit_score;

/* How message (conversation) inputs reach the chat template, from
 * sentence_bert_config.json: modality_config "message" (its "format") and
 * processing_kwargs "chat_template" (apply_chat_template kwargs, less
 * sentence-transformers' own "restore_suffix"). */
typedef enum iv_st_message_format {
    IV_ST_MESSAGES_AUTO = 0,   /* decided from the template text (engine/conversation.c) */
    IV_ST_MESSAGES_FLAT,       /* content is the text itself */
    IV_ST_MESSAGES_STRUCTURED, /* content is [{"type": "text", "text": ...}] */
} iv_st_message_format;

typedef struct iv_st_messages {
    int enabled;         /* modality_config has "message": every input is rendered as a conversation */
    iv_st_message_format format;
    int restore_suffix;  /* truncation writes the template's tail back (default on) */
    struct cJSON *template_kwargs; /* owned; NULL: none */
} iv_st_messages;

typedef struct iv_st_prompt {
    char *name, *text;
} iv_st_prompt;

typedef struct iv_st_meta {
    int present;                 /* modules.json found */
    char backbone_dir[4096];     /* the Transformer module's directory: model_dir unless
                                    modules.json gives it a subfolder (old 0_Transformer/ saves) */
    iv_pool_mode pool;           /* pool_modes[0] */
    int n_pool_modes;            /* more than one: their vectors concatenated in this order */
    iv_pool_mode pool_modes[IV_ST_MAX_POOL_MODES];
    int pool_include_prompt;     /* Pooling include_prompt (default true) */
    int n_dense;
    iv_st_dense dense[IV_ST_MAX_DENSE];
    int normalize;               /* a Normalize module is listed */
    int max_seq_length;          /* 0 when absent; processor_kwargs model_max_length wins */
    int do_lower_case;
    int n_prompts;
    iv_st_prompt prompts[IV_ST_MAX_PROMPTS];
    char *default_prompt_name;   /* NULL when absent */
    char *similarity_fn;         /* "cosine", "dot", ... or NULL */
    iv_st_pylate pylate;
    iv_st_logit_score logit_score;
    iv_st_messages messages;
    int cross_encoder;           /* config_sentence_transformers.json model_type "CrossEncoder": its modules
                                    score with the model's own classification head; no pooling or Dense
                                    kept, and the model must have that head (engine) */
} iv_st_meta;

int iv_st_meta_load(iv_st_meta *out, const char *model_dir, iv_err *err);
void iv_st_meta_free(iv_st_meta *m);
/* The prompt text for name, or NULL. */
const char *iv_st_meta_prompt(const iv_st_meta *m, const char *name);
const char *iv_pool_mode_name(iv_pool_mode m);
/* Maps a Dense activation_function class path ("torch.nn.modules.activation.Tanh",
 * "torch.nn.modules.linear.Identity", or the short "torch.nn.Tanh") to an
 * iv_act; -1 when unknown. */
int iv_act_from_torch_name(const char *name);

#endif
