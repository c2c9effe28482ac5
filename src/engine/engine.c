/* The engine: loads everything a checkpoint directory holds and runs packed
 * batches through model and head. One replica, calls serialised by a mutex;
 * the server's batcher feeds it batches built by token budget. */
#include "engine/engine.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/arena.h"
#include "base/file.h"
#include "base/log.h"
#include "chat/chat_template.h"
#include "decisions/laya.h"
#include "decisions/clef.h"
#include "decisions/pplx.h"
#include "engine/max_length.h"
#include "engine/pair_format.h"
#include "engine/head_rows.h"
#include "engine/prefix_fold.h"
#include "heads/colbert.h"
#include "heads/pooling.h"
#include "heads/st_dense.h"
#include "heads/task_heads.h"
#include "models/audio_gemma4.h"
#include "models/lm_score_head.h"
#include "models/model.h"
#include "models/taps.h"
#include "models/pack_weights.h"
#include "models/vision.h"
#include "engine/audio_inputs.h"
#include "engine/image_inputs.h"
#include "models/quantize.h"
#include "ops/cpu/cpu_isa.h"
#include "ops/cpu/gemm_panel.h"
#include "ops/cpu/omp_policy.h"
#include "ops/cpu/int8_ops.h"

struct iv_engine {
    iv_model *model;
    iv_st_meta meta;
    iv_st_dense_stack dense;
    iv_tokenizer *tok;
    iv_chat_template *chat; /* NULL: the checkpoint has none */
    int pairs_as_messages;  /* an operator's chat template renders text pairs */
    iv_pair_format pair_format; /* text pairs in the checkpoint processor's format (engine/pair_format.h) */
    iv_colbert colbert;     /* multi-vector settings (layout NONE for other models) */
    iv_pool_mode pool;      /* pool_modes[0] */
    int n_pool_modes;       /* several: concatenated (heads/pooling.h) */
    iv_pool_mode pool_modes[IV_ST_MAX_POOL_MODES];
    unsigned caps;
    int embed_dim;
    int max_len;            /* the limit in force for inputs (engine/max_length.c) */
    const char *max_len_source;
    int model_cap;          /* the most tokens the model runs (iv_model_max_length) */
    char label_buf[IV_MAX_LABELS][16];
    const iv_ops *ops;      /* the device table this engine runs on (owned: iv_ops_close) */
    iv_arena arena;         /* host memory of a batch */
    iv_arena dev_arena;     /* device memory of a batch (unused on the CPU: arena serves both) */
    iv_fwd_mem mem;
    pthread_mutex_t lock;
    char device_label[64];  /* the device as asked for */
    int cpu_threads;        /* 0: every core */
    iv_laya *laya;          /* a Laya decision checkpoint (decisions/laya.h), or NULL */
    int letters;            /* option letters of the letters decision head, or 0 */
    int continuation;       /* the continuation contract's normalisation (1 sum, 2 mean), or 0 */
    int continuation_vocab; /* its LM head rows */
    iv_pplx *pplx;          /* a pplx-decider v1 checkpoint (decisions/pplx.h), or NULL */
    iv_clef *clef;          /* a Clef checkpoint (decisions/clef.h), or NULL */
    iv_image_proc images;   /* how the model takes images (model NULL: it takes none) */
    iv_audio_proc audio;    /* how the model takes audio (model NULL: it takes none) */
    int no_fold;            /* prefix folding turned off (engine/prefix_fold.h) */
    iv_prefix_cache *prefix_cache; /* NULL: none */
    iv_fold_pins pins;      /* cache entries the running batch holds */
    iv_fold_stats fold_stats;
    int no_head_rows;       /* the last layer runs every row (engine/head_rows.h) */
    uint64_t head_rows_batches; /* batches it did not (under lock) */
};

/* opts->rerank_tokens "POS,NEG": both resolved through the tokenizer's
 * vocabulary (transformers' convert_tokens_to_ids), then the score head. */
static int causal_lm_rerank(iv_engine *e, const char *spec, iv_err *err)
{
    const char *comma = strchr(spec, ',');
    if (!comma || comma == spec || !comma[1] || strchr(comma + 1, ','))
        return iv_errf(err, IV_E_INVALID, "rerank tokens \"%s\" must be two tokens separated by a comma, e.g. yes,no",
                       spec);
    if (iv_model_can_score_tokens(e->model, err)) return -1;
    if (!e->tok)
        return iv_errf(err, IV_E_INVALID,
                       "rerank tokens \"%s\" need the checkpoint's tokenizer.json to find their ids", spec);
    char pos[256];
    const size_t n = (size_t)(comma - spec);
    if (n >= sizeof pos) return iv_errf(err, IV_E_INVALID, "rerank token \"%.*s\" is too long", (int)n, spec);
    memcpy(pos, spec, n);
    pos[n] = 0;
    const char *names[2] = {pos, comma + 1};
    int32_t ids[2];
    for (int i = 0; i < 2; i++) {
        ids[i] = iv_tokenizer_token_to_id(e->tok, names[i]);
        if (ids[i] < 0)
            return iv_errf(err, IV_E_INVALID, "rerank token \"%s\" is not in the tokenizer's vocabulary", names[i]);
    }
    return iv_model_token_score_head(e->model, ids[0], ids[1], err);
}

/* sentence-transformers' LogitScore module names the tokens itself; an
 * operator's --causal-lm-rerank on top would be a second, conflicting say. */
static int logit_score_head(iv_engine *e, const iv_engine_opts *opts, iv_err *err)
{
    const iv_st_logit_score *ls = &e->meta.logit_score;
    if (!ls->present) return 0;
    if (opts && opts->rerank_tokens)
        return iv_errf(err, IV_E_INVALID,
                       "the checkpoint's LogitScore module already names its score tokens (ids %d / %d); drop the "
                       "rerank tokens \"%s\"",
                       ls->true_id, ls->false_id, opts->rerank_tokens);
    return iv_model_token_score_head(e->model, ls->true_id, ls->false_id, err);
}

/* sentence-transformers 6.3 (InputFormatter._infer_format) for format
 * "auto": a few model types are flat by name; otherwise a template that
 * looks inside content parts wants them structured; no template:
 * structured. */
static iv_st_message_format infer_message_format(const iv_engine *e)
{
    static const char *const k_flat_types[] = {"apertus", "deepseek_v3", "gpt_oss", "minicpm3", "seed_oss"};
    static const char *const k_structured_marks[] = {"content[0]", ".type", "'type'", "\"type\"", "item.type",
                                                     "message.content["};
    for (size_t i = 0; i < sizeof k_flat_types / sizeof *k_flat_types; i++)
        if (!strcmp(e->model->cfg.model_type, k_flat_types[i])) return IV_ST_MESSAGES_FLAT;
    const char *t = e->chat ? iv_chat_template_text(e->chat) : NULL;
    if (!t || !*t) return IV_ST_MESSAGES_STRUCTURED;
    for (size_t i = 0; i < sizeof k_structured_marks / sizeof *k_structured_marks; i++)
        if (strstr(t, k_structured_marks[i])) return IV_ST_MESSAGES_STRUCTURED;
    return IV_ST_MESSAGES_FLAT;
}

static int load_chat_template(iv_engine *e, const char *model_dir, const iv_engine_opts *opts, iv_err *err)
{
    const char *file = opts ? opts->chat_template : NULL;
    if (file ? iv_chat_template_load_file(&e->chat, model_dir, file, err)
             : iv_chat_template_load(&e->chat, model_dir, err))
        return iv_err_prefix(err, "chat template: ");
    iv_st_messages *mm = &e->meta.messages;
    /* vLLM's score template: content as plain strings. */
    e->pairs_as_messages = file != NULL;
    if (file && !mm->enabled) mm->format = IV_ST_MESSAGES_FLAT;
    if (mm->enabled && !e->chat)
        return iv_errf(err, IV_E_FORMAT,
                       "sentence_bert_config.json declares message inputs (modality_config \"message\"), but the "
                       "checkpoint has no chat template to render them");
    if (mm->enabled && mm->format == IV_ST_MESSAGES_AUTO) mm->format = infer_message_format(e);
    return 0;
}

static int quantize_if_int8(iv_model *m, iv_err *err)
{
    if (m->ops != iv_cpu_int8_ops()) return 0;
    iv_quant_stats st;
    if (iv_model_quantize_int8(m, &st, err)) return -1;
    IV_INFO("int8: quantized %d weight tensors to %d-bit (%.1f MiB -> %.1f MiB, kernel %s)%s", st.tensors,
            st.qmax == IV_INT8_QMAX ? 8 : 7, (double)st.f32_bytes / 1048576.0, (double)st.int8_bytes / 1048576.0,
            iv_int8_kernel_name(st.qmax == IV_INT8_QMAX && iv_int8_kernel_active() == IV_INT8_KERNEL_AVX2_UBSW
                                    ? IV_INT8_KERNEL_AVX2
                                    : iv_int8_kernel_active()),
            st.kept_f32 ? "; some too wide, kept float32" : "");
    return 0;
}

static unsigned derive_capabilities(const iv_engine *e)
{
    const iv_model *m = e->model;
    unsigned caps = IV_CAN(IV_TASK_EMBED_ALL);
    if (m->seq_head.n_steps) caps |= IV_CAN(IV_TASK_CLASSIFY);
    if (m->token_head.n_steps) caps |= IV_CAN(IV_TASK_TOKEN_CLASSIFY);
    if (m->mlm_head.n_steps) caps |= IV_CAN(IV_TASK_SPARSE);
    /* Multi-vector models give token matrices, never one sentence vector. */
    if (e->colbert.layout != IV_COLBERT_NONE) return caps | IV_CAN(IV_TASK_MULTIVECTOR);
    /* Sentence embeddings need a pooling rule: the checkpoint's Pooling
     * module, or one chosen by the operator. Classifier checkpoints have none. */
    if (e->pool != IV_POOL_NONE) caps |= IV_CAN(IV_TASK_EMBED);
    return caps;
}

const iv_laya *iv_engine_laya(const iv_engine *e) { return e->laya; }
int iv_engine_decision_letters(const iv_engine *e) { return e->letters; }
int iv_engine_decision_continuation(const iv_engine *e, int *vocab)
{
    if (vocab) *vocab = e->continuation_vocab;
    return e->continuation;
}
const iv_pplx *iv_engine_pplx(const iv_engine *e) { return e->pplx; }

const iv_clef *iv_engine_clef(const iv_engine *e) { return e->clef; }

const char *iv_engine_decision_family(const iv_engine *e)
{
    return e->laya ? "laya" : e->pplx ? "pplx-decider" : e->clef ? "clef" : e->letters         ? "letters"
           : e->continuation  ? "continuation"
                              : NULL;
}

/* A Clef checkpoint (decisions/clef.h): the joint head beside a Qwen3.5
 * backbone, reading the backbone's LM head rows. The head runs on the host. */
static int clef_head(iv_engine *e, const char *model_dir, const iv_engine_opts *opts, iv_err *err)
{
    if (opts && (opts->rerank_tokens || opts->decision_letters || opts->decision_continuation))
        return iv_errf(err, IV_E_INVALID, "a Clef checkpoint reads its own joint head: drop the reranker tokens and "
                                          "--decision-letters / --decision-continuation");
    if (!e->ops->host_visible)
        return iv_errf(err, IV_E_UNSUPPORTED, "Clef checkpoints run on the CPU only for now (--device cpu)");
    if (strcmp(e->model->cfg.architecture, "Qwen3_5ForConditionalGeneration"))
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "a Clef checkpoint (joint_head_config.json) with a \"%s\" backbone: the published head reads "
                       "a Qwen3_5ForConditionalGeneration",
                       e->model->cfg.architecture[0] ? e->model->cfg.architecture : e->model->cfg.model_type);
    if (!e->tok) return iv_errf(err, IV_E_FORMAT, "a Clef checkpoint needs its tokenizer.json");
    const iv_tensor *w;
    if (iv_model_output_embeddings(e->model, &w, err)) return iv_err_prefix(err, "Clef: ");
    return iv_clef_load(&e->clef, model_dir, e->model->block.hidden, iv_f32(w), w->shape[0], err);
}

/* A pplx-decider v1 checkpoint (decisions/pplx.h): decision_config.json
 * checked against the tokenizer, and readout.safetensors' first n_codes
 * rows as the last-token sequence head. */
static int pplx_head(iv_engine *e, const char *model_dir, const iv_engine_opts *opts, iv_err *err)
{
    if (opts && (opts->rerank_tokens || opts->decision_letters || opts->decision_continuation))
        return iv_errf(err, IV_E_INVALID, "a pplx-decider checkpoint reads its own readout: drop the reranker tokens "
                                          "and --decision-letters / --decision-continuation");
    if (!e->tok || !e->chat)
        return iv_errf(err, IV_E_FORMAT, "a pplx-decider checkpoint needs its tokenizer.json and chat template");
    if (iv_pplx_load(&e->pplx, model_dir, e->tok, err)) return -1;
    char path[4200];
    iv_path_join(path, sizeof path, model_dir, "readout.safetensors");
    iv_weights *w = NULL;
    if (iv_weights_open_file(&w, path, err)) return iv_err_prefix(err, "pplx-decider readout: ");
    const iv_tensor *t = NULL;
    int rc = 0;
    if (iv_weights_count(w) != 1 || !iv_weights_find(w, "weight"))
        rc = iv_errf(err, IV_E_FORMAT, "readout.safetensors must hold one tensor, \"weight\" [255, hidden]");
    if (!rc) rc = iv_weights_f32(w, "weight", 0, NULL, &t, err);
    if (!rc) rc = iv_model_last_token_readout(e->model, t, e->pplx->n_codes, err);
    iv_weights_close(w);
    return rc ? iv_err_prefix(err, "pplx-decider readout: ") : 0;
}

/* opts->decision_letters: the seq head becomes the LM rows of the letters
 * A..Z, a..z (decisions/letters.h), read at the last token. */
static int letters_head(iv_engine *e, const iv_engine_opts *opts, iv_err *err)
{
    if (opts->rerank_tokens || e->meta.logit_score.present)
        return iv_errf(err, IV_E_INVALID, "the letters decision readout and a reranker score head exclude each other");
    if (!e->tok || !e->chat)
        return iv_errf(err, IV_E_INVALID, "the letters decision readout needs the checkpoint's tokenizer and chat template");
    int32_t ids[52];
    for (int i = 0; i < 52; i++) {
        const char name[2] = {(char)(i < 26 ? 'A' + i : 'a' + i - 26), 0};
        ids[i] = iv_tokenizer_token_to_id(e->tok, name);
        if (ids[i] < 0)
            return iv_errf(err, IV_E_INVALID, "the letter \"%s\" is not one token of this vocabulary", name);
    }
    if (iv_model_token_rows_head(e->model, ids, 52, err)) return -1;
    e->letters = 52;
    return 0;
}

/* opts->decision_continuation: the seq head becomes the whole LM head
 * (every row, in vocabulary order), read at the last token: the classify
 * output is the next-token logits the continuation contract needs
 * (decisions/continuation.h). The rows are copied (iv_model_token_rows_head
 * owns its weight), so a tied checkpoint holds its embedding table twice. */
static int continuation_head(iv_engine *e, const iv_engine_opts *opts, iv_err *err)
{
    if (opts->decision_letters)
        return iv_errf(err, IV_E_INVALID, "--decision-letters and --decision-continuation exclude each other");
    if (opts->decision_continuation != 1 && opts->decision_continuation != 2)
        return iv_errf(err, IV_E_INVALID, "decision_continuation must be 1 (sum) or 2 (mean)");
    if (opts->rerank_tokens || e->meta.logit_score.present)
        return iv_errf(err, IV_E_INVALID, "the continuation decision readout and a reranker score head exclude each other");
    if (!e->tok || !e->chat)
        return iv_errf(err, IV_E_INVALID,
                       "the continuation decision readout needs the checkpoint's tokenizer and chat template");
    if (iv_model_can_score_tokens(e->model, err)) return -1;
    const iv_tensor *w;
    if (iv_model_output_embeddings(e->model, &w, err)) return -1;
    const int64_t V = w->shape[0];
    if (V < 2 || V > (1 << 24)) return iv_errf(err, IV_E_FORMAT, "an LM head of %lld rows", (long long)V);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)V);
    if (!ids) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < V; i++) ids[i] = (int32_t)i;
    const int rc = iv_model_token_rows_head(e->model, ids, (int)V, err);
    free(ids);
    if (rc) return -1;
    e->continuation = opts->decision_continuation;
    e->continuation_vocab = (int)V;
    return 0;
}

int iv_engine_load(iv_engine **out, const char *model_dir, const iv_engine_opts *opts, iv_err *err)
{
    *out = NULL;
    /* The device table (ops/ops.h): CPU float32 or int8 (large linear
     * weights quantized at load, models/quantize.h), the emulated device or
     * CUDA in bfloat16 or float16. */
    const iv_ops *ops = iv_ops_open(opts ? opts->device : NULL, opts ? opts->dtype : NULL, err);
    if (!ops) return -1;
    iv_engine *e = calloc(1, sizeof *e);
    if (!e) {
        iv_ops_close(ops);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    e->ops = ops;
    snprintf(e->device_label, sizeof e->device_label, "%s", opts && opts->device ? opts->device : "cpu");
    e->cpu_threads = opts && opts->cpu_threads > 0 ? opts->cpu_threads : 0;
    pthread_mutex_init(&e->lock, NULL);
    iv_arena_init(&e->arena);
    iv_ops_arena_init(&e->dev_arena, ops);
    e->mem = (iv_fwd_mem){&e->arena, ops->host_visible ? &e->arena : &e->dev_arena};
    /* Loaded through a CPU table (load-time transforms run on the host),
     * then moved to the device once nothing reads weights as rows. */
    /* A Laya decision checkpoint: the encoder's config in encoder/, its
     * tokenizer in tokenizer/, encoder and head weights in model.safetensors. */
    const int laya = iv_laya_is_checkpoint(model_dir);
    char enc_dir[4096], tok_dir[4096];
    iv_path_join(enc_dir, sizeof enc_dir, model_dir, "encoder");
    iv_path_join(tok_dir, sizeof tok_dir, model_dir, "tokenizer");
    if (laya && !ops->host_visible) {
        iv_errf(err, IV_E_UNSUPPORTED, "Laya decision checkpoints run on the CPU only for now (--device cpu)");
        goto fail;
    }
    if (iv_model_load_split(&e->model, laya ? enc_dir : model_dir, model_dir,
                            ops->host_visible ? ops : iv_cpu_ops(), err))
        goto fail;
    if (quantize_if_int8(e->model, err)) goto fail;
    if (iv_st_meta_load(&e->meta, laya ? tok_dir : model_dir, err)) goto fail;
    /* A CrossEncoder scores with the model's classification head, or with
     * LogitScore's rows of the LM head (built once the tokenizer is read). */
    if (e->meta.cross_encoder && !e->model->seq_head.n_steps && !e->meta.logit_score.present) {
        iv_errf(err, IV_E_UNSUPPORTED,
                "a sentence-transformers CrossEncoder whose model file has no classification head: scoring "
                "through its modules alone is not supported");
        goto fail;
    }
    /* The operator's pooling mode replaces the checkpoint's (all of them). */
    if (opts && opts->pooling_override) {
        e->pool_modes[0] = (iv_pool_mode)opts->pooling_override;
        e->n_pool_modes = 1;
    } else if (e->meta.n_pool_modes > 0) {
        memcpy(e->pool_modes, e->meta.pool_modes, sizeof e->pool_modes);
        e->n_pool_modes = e->meta.n_pool_modes;
    } else {
        e->pool_modes[0] = e->meta.pool;
        e->n_pool_modes = 1;
    }
    e->pool = e->pool_modes[0];
    const int H = iv_model_out_width(e->model), pooled_width = e->n_pool_modes * H;
    /* PyLate's Dense modules project tokens: the multi-vector head owns them. */
    if (!e->meta.pylate.present && iv_st_dense_load(&e->dense, &e->meta, pooled_width, err)) goto fail;
    e->embed_dim = e->dense.n ? e->dense.out_dim : pooled_width;
    char tok_path[4096];
    iv_path_join(tok_path, sizeof tok_path, laya ? tok_dir : model_dir, "tokenizer.json");
    if (iv_file_exists(tok_path) && iv_tokenizer_load(&e->tok, laya ? tok_dir : model_dir, err)) {
        iv_err_prefix(err, "tokenizer: ");
        goto fail;
    }
    if (laya) {
        if (!e->tok) {
            iv_errf(err, IV_E_FORMAT, "a Laya checkpoint needs tokenizer/tokenizer.json");
            goto fail;
        }
        if (strcmp(e->model->cfg.model_type, "modernbert")) {
            iv_errf(err, IV_E_UNSUPPORTED, "a Laya checkpoint with a \"%s\" encoder: only ModernBERT encoders are supported",
                    e->model->cfg.model_type);
            goto fail;
        }
        if (iv_laya_load(&e->laya, model_dir, e->tok, iv_model_out_width(e->model), err)) goto fail;
    }
    if (e->tok && e->meta.do_lower_case && iv_tokenizer_prepend_lowercase(e->tok, err)) goto fail;
    if (load_chat_template(e, model_dir, opts, err) || logit_score_head(e, opts, err)) goto fail;
    if (iv_pair_format_load(&e->pair_format, model_dir, err)) goto fail;
    if (opts && opts->rerank_tokens && causal_lm_rerank(e, opts->rerank_tokens, err)) goto fail;
    if (!laya && iv_pplx_is_checkpoint(model_dir)) {
        if (pplx_head(e, model_dir, opts, err)) goto fail;
    } else if (!laya && iv_clef_is_checkpoint(model_dir)) {
        if (clef_head(e, model_dir, opts, err)) goto fail;
    } else if (opts && opts->decision_letters && !opts->decision_continuation && letters_head(e, opts, err))
        goto fail;
    else if (opts && opts->decision_continuation && continuation_head(e, opts, err))
        goto fail;
    if (iv_colbert_load(&e->colbert, model_dir, e->model, &e->meta, e->tok, err)) goto fail;
    if (e->model->pixtral && e->tok) { /* the markers of Pixtral's image runs, by name (image/pixtral.h) */
        e->model->image_break_id = iv_tokenizer_token_to_id(e->tok, "[IMG_BREAK]");
        e->model->image_end_id = iv_tokenizer_token_to_id(e->tok, "[IMG_END]");
    }
    if (iv_image_proc_load(&e->images, model_dir, e->model, opts ? opts->max_image_pixels : 0, err)) goto fail;
    if (iv_audio_proc_load(&e->audio, model_dir, e->model, opts ? opts->max_audio_bytes : 0,
                           opts ? opts->max_audio_seconds : 0, err))
        goto fail;
    /* Last, once nothing reads weights as rows any more (the causal-LM score
     * head, ColBERT's projection check): every linear weight into the CPU
     * kernel's panels. */
    if (ops->device == IV_CPU) {
        if (iv_model_pack_cpu_weights(e->model, NULL, err) || iv_st_dense_pack_cpu(&e->dense, err) ||
            iv_st_dense_pack_cpu(&e->colbert.dense, err))
            goto fail;
        /* What runs, not what the cap would allow (an AVX2-only CPU under
         * the default cap runs avx2). */
        char threads[96];
        iv_omp_describe(threads, sizeof threads);
        IV_INFO("CPU linear kernel %s, instruction set %s (IV_CPU_ISA cap %s), %s", iv_cpu_panel_kernel_name(),
                iv_cpu_isa_used_name(), iv_cpu_isa_cap_name(), threads);
    } else {
        if (iv_model_to_device(e->model, ops, err) || iv_st_dense_to_device(&e->dense, ops, err) ||
            iv_st_dense_to_device(&e->colbert.dense, ops, err))
            goto fail;
        IV_INFO("device %s, %s", ops->name, ops->act_dtype == IV_BF16 ? "bfloat16" : "float16");
    }
    /* Serving never reads the checkpoint files: what is still read in place
     * becomes this process' memory, so a file truncated or rewritten under
     * a running server changes nothing (no SIGBUS, no other answers). */
    if (iv_weights_own_mapped(e->model->weights, err) || iv_st_dense_own_mapped(&e->dense, err) ||
        iv_st_dense_own_mapped(&e->colbert.dense, err))
        goto fail;
    e->model_cap = iv_model_max_length(e->model);
    if (e->colbert.layout != IV_COLBERT_NONE) {
        if (opts && opts->pooling_override) {
            iv_errf(err, IV_E_UNSUPPORTED,
                    "this is a multi-vector (ColBERT) model: it returns token vectors, so a pooling mode does not apply");
            goto fail;
        }
        e->embed_dim = e->colbert.info.dim;
    }
    const iv_max_length lim =
        iv_max_length_resolve(&e->meta, e->tok, e->model->cfg.max_position_embeddings, e->model_cap);
    e->max_len = lim.tokens;
    e->max_len_source = lim.source;
    e->caps = derive_capabilities(e);
    e->no_fold = opts && opts->no_prefix_fold;
    const char *head_rows_env = getenv("IV_HEAD_ROWS");
    e->no_head_rows = (opts && opts->no_head_rows) || (head_rows_env && !strcmp(head_rows_env, "0"));
    if (e->model->no_head_rows_reason)
        IV_DEBUG("head rows: the last layer runs every row (%s)", e->model->no_head_rows_reason);
    if (opts && opts->prefix_cache_bytes > 0 && !e->no_fold && !e->model->no_fold_reason) {
        e->prefix_cache = iv_prefix_cache_new(ops, opts->prefix_cache_bytes, e->model->n_layers,
                                              (int64_t)e->model->block.n_kv_heads * e->model->block.head_dim,
                                              iv_model_out_width(e->model));
        if (!e->prefix_cache) {
            iv_errf(err, IV_E_NOMEM, "out of memory");
            goto fail;
        }
    }
    if (e->model->no_fold_reason) IV_DEBUG("prefix folding: off for this model (%s)", e->model->no_fold_reason);
    *out = e;
    return 0;
fail:
    iv_engine_free(e);
    return -1;
}

void iv_engine_free(iv_engine *e)
{
    if (!e) return;
    iv_prefix_cache_free(e->prefix_cache);
    iv_model_free(e->model);
    iv_st_dense_free(&e->dense);
    iv_audio_proc_free(&e->audio);
    iv_colbert_free(&e->colbert);
    iv_st_meta_free(&e->meta);
    if (e->tok) iv_tokenizer_free(e->tok);
    iv_laya_free(e->laya);
    iv_pplx_free(e->pplx);
    iv_clef_free(e->clef);
    iv_chat_template_free(e->chat);
    iv_arena_free(&e->arena);
    iv_arena_free(&e->dev_arena);
    iv_ops_close(e->ops);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void iv_outputs_free(iv_outputs *o)
{
    free(o->data);
    free(o->offsets);
    free(o->rows);
    memset(o, 0, sizeof *o);
}

static const char *task_name(iv_task t)
{
    static const char *names[] = {"embeddings", "per-token embeddings", "sparse embeddings",
                                  "sequence classification", "token classification", "multi-vector embeddings"};
    return (unsigned)t < IV_TASK_COUNT ? names[t] : "?";
}

/* Packs sequences into one batch (arena memory). */
static int pack(iv_engine *e, const iv_seq_input *seqs, int n, iv_batch *b, int **skip, iv_err *err)
{
    int64_t total = 0;
    int any_types = 0, any_mask = 0;
    for (int i = 0; i < n; i++) {
        if (seqs[i].len <= 0) return iv_errf(err, IV_E_INVALID, "input %d is empty", i);
        /* The limit in force (e->max_len) is applied where inputs are
         * prepared (engine/inputs.c); sequences given as such run up to
         * what the model can take, as transformers runs them. */
        if (seqs[i].len > e->model_cap)
            return iv_errf(err, IV_E_INVALID, "input %d has %d tokens; the maximum is %d", i, seqs[i].len,
                           e->model_cap);
        total += seqs[i].len;
        any_types |= seqs[i].type_ids != NULL;
        any_mask |= seqs[i].key_mask != NULL;
    }
    int32_t *ids = iv_arena_alloc(&e->arena, (size_t)total * sizeof(int32_t));
    int32_t *types = any_types ? iv_arena_alloc(&e->arena, (size_t)total * sizeof(int32_t)) : NULL;
    uint8_t *mask = any_mask ? iv_arena_alloc(&e->arena, (size_t)total) : NULL;
    int32_t *cu = iv_arena_alloc(&e->arena, (size_t)(n + 1) * sizeof(int32_t));
    *skip = iv_arena_alloc(&e->arena, (size_t)n * sizeof(int));
    if (!ids || !cu || !*skip || (any_types && !types) || (any_mask && !mask))
        return iv_errf(err, IV_E_NOMEM, "out of memory packing %lld tokens", (long long)total);
    int64_t off = 0;
    cu[0] = 0;
    for (int i = 0; i < n; i++) {
        const iv_seq_input *s = &seqs[i];
        memcpy(ids + off, s->ids, (size_t)s->len * sizeof(int32_t));
        if (types) {
            if (s->type_ids) memcpy(types + off, s->type_ids, (size_t)s->len * sizeof(int32_t));
            else memset(types + off, 0, (size_t)s->len * sizeof(int32_t));
        }
        if (mask) {
            if (s->key_mask) memcpy(mask + off, s->key_mask, (size_t)s->len);
            else memset(mask + off, 1, (size_t)s->len);
        }
        (*skip)[i] = e->meta.pool_include_prompt ? 0 : s->prompt_len;
        off += s->len;
        cu[i + 1] = (int32_t)off;
    }
    *b = (iv_batch){.n_seqs = n, .n_tokens = total, .ids = ids, .type_ids = types, .cu_seqlens = cu,
                    .key_mask = mask};
    return iv_model_check_batch(e->model, b, err);
}

static int alloc_outputs(iv_outputs *o, const iv_batch *b, int cols, int per_token)
{
    o->n_seqs = b->n_seqs;
    o->cols = cols;
    o->offsets = malloc((size_t)(b->n_seqs + 1) * sizeof(int64_t));
    o->rows = malloc((size_t)b->n_seqs * sizeof(int));
    int64_t total_rows = per_token ? b->n_tokens : b->n_seqs;
    o->data = malloc((size_t)(total_rows * cols) * sizeof(float) + 1);
    if (!o->offsets || !o->rows || !o->data) return -1;
    int64_t off = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        o->offsets[s] = off;
        o->rows[s] = per_token ? iv_batch_seqlen(b, s) : 1;
        off += (int64_t)o->rows[s] * cols;
    }
    o->offsets[b->n_seqs] = off;
    return 0;
}

/* Multi-vector models: queries whose [MASK] expansion must not be attended
 * get the key mask the reference gives them, unless the caller sent one. */
static const iv_seq_input *with_key_masks(iv_engine *e, const iv_seq_input *seqs, int n)
{
    if (e->colbert.layout == IV_COLBERT_NONE) return seqs;
    iv_seq_input *copy = iv_arena_alloc(&e->arena, (size_t)n * sizeof *copy);
    if (!copy) return NULL;
    for (int i = 0; i < n; i++) {
        copy[i] = seqs[i];
        if (seqs[i].key_mask || seqs[i].len <= 0 || seqs[i].len > e->model_cap) continue;
        uint8_t *mask = iv_arena_alloc(&e->arena, (size_t)seqs[i].len);
        if (!mask) return NULL;
        if (iv_colbert_key_mask(&e->colbert, seqs[i].ids, seqs[i].len, mask)) copy[i].key_mask = mask;
    }
    return copy;
}

static int run_multivector(iv_engine *e, const iv_batch *b, iv_view hidden, iv_outputs *o)
{
    const int dim = e->colbert.info.dim;
    o->n_seqs = b->n_seqs;
    o->cols = dim;
    o->offsets = malloc((size_t)(b->n_seqs + 1) * sizeof(int64_t));
    o->rows = malloc((size_t)b->n_seqs * sizeof(int));
    o->data = malloc((size_t)(b->n_tokens * dim) * sizeof(float) + 1);
    if (!o->offsets || !o->rows || !o->data ||
        iv_colbert_apply(&e->colbert, e->model->ops, b, hidden, o->data, o->rows, &e->mem))
        return -1;
    o->offsets[0] = 0;
    for (int s = 0; s < b->n_seqs; s++) o->offsets[s + 1] = o->offsets[s] + (int64_t)o->rows[s] * dim;
    return 0;
}

/* The backbone over the packed batch: the multimodal forward when some
 * sequence brings images or audio, else the text one. With head_rows (text
 * batches that do not fold), *hidden holds only those rows and *compact is
 * set. */
static int forward(iv_engine *e, const iv_seq_input *seqs, int n, const iv_batch *b, const int32_t *head_rows,
                   iv_view *hidden, int *compact, iv_err *err)
{
    *compact = 0;
    int any = 0, any_audio = 0;
    for (int i = 0; i < n; i++) any |= seqs[i].n_images > 0, any_audio |= seqs[i].n_audios > 0;
    if (any_audio) {
        iv_seq_audios *sa = iv_arena_alloc(&e->arena, (size_t)n * sizeof *sa);
        iv_seq_images *si = iv_arena_alloc(&e->arena, (size_t)n * sizeof *si);
        if (!sa || !si) return iv_errf(err, IV_E_NOMEM, "out of memory");
        for (int i = 0; i < n; i++) {
            sa[i] = (iv_seq_audios){seqs[i].n_audios > 0 ? seqs[i].n_audios : 0, seqs[i].audios};
            si[i] = (iv_seq_images){seqs[i].n_images > 0 ? seqs[i].n_images : 0, seqs[i].images};
        }
        return iv_model_forward_media(e->model, b, si, sa, &e->mem, hidden, err);
    }
    if (!any) { /* text only: media never fold */
        if (!e->no_fold) {
            const int folded = iv_fold_forward(e->model, e->prefix_cache, seqs, b, &e->mem, &e->pins, &e->fold_stats,
                                               hidden, err);
            if (folded) return folded < 0 ? -1 : 0;
        }
        if (head_rows) {
            *compact = 1;
            return iv_model_forward_head_rows(e->model, b, head_rows, &e->mem, hidden, err);
        }
        return iv_model_forward(e->model, b, &e->mem, hidden, err);
    }
    iv_seq_images *si = iv_arena_alloc(&e->arena, (size_t)n * sizeof *si);
    if (!si) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) si[i] = (iv_seq_images){seqs[i].n_images > 0 ? seqs[i].n_images : 0, seqs[i].images};
    return iv_model_forward_images(e->model, b, si, &e->mem, hidden, err);
}

static int run_locked(iv_engine *e, iv_task task, const iv_seq_input *seqs, int n, iv_outputs *out, iv_err *err)
{
    const iv_model *m = e->model;
    iv_batch b;
    int *skip = NULL;
    seqs = with_key_masks(e, seqs, n);
    if (!seqs) return iv_errf(err, IV_E_NOMEM, "out of memory");
    if (pack(e, seqs, n, &b, &skip, err)) return -1;
    if (iv_model_upload_batch(m, &b, e->mem.dev, err)) return -1;
    iv_view hidden;
    int compact;
    const iv_head_reads reads = {.task = task, .pool_modes = e->pool_modes, .n_pool_modes = e->n_pool_modes,
                                 .seq_pool = m->seq_head_pool, .pad_id = m->cfg.pad_token_id};
    const int32_t *head_rows = e->no_head_rows || iv_taps_active() ? NULL : iv_head_rows_pick(&reads, &b, skip, &e->arena);
    if (forward(e, seqs, n, &b, head_rows, &hidden, &compact, err)) return -1;
    if (compact) {
        /* The head reads one row per sequence: the rows it was given. */
        if (iv_model_head_rows_apply(m, &b)) e->head_rows_batches++;
        if (iv_head_rows_batch(m->ops, &b, head_rows, &e->mem, &b)) goto oom;
        skip = NULL;
    }
    int rc = 0;
    switch (task) {
    case IV_TASK_EMBED: {
        if (alloc_outputs(out, &b, e->embed_dim, 0)) goto oom;
        iv_view pooled, vec;
        if (iv_pool_concat(m->ops, &b, hidden, e->pool_modes, e->n_pool_modes, skip, &e->mem, &pooled) ||
            iv_st_dense_apply(m->ops, &e->dense, pooled, e->mem.dev, &vec))
            goto oom;
        iv_ops_download_f32(m->ops, vec, out->data);
        break;
    }
    case IV_TASK_EMBED_ALL:
        if (alloc_outputs(out, &b, (int)hidden.cols, 1)) goto oom;
        iv_ops_download_f32(m->ops, hidden, out->data);
        break;
    case IV_TASK_CLASSIFY:
        if (alloc_outputs(out, &b, m->seq_head.out_dim, 0)) goto oom;
        rc = iv_head_classify(m, &b, hidden, out->data, &e->mem);
        break;
    case IV_TASK_TOKEN_CLASSIFY:
        if (alloc_outputs(out, &b, m->token_head.out_dim, 1)) goto oom;
        rc = iv_head_token_classify(m, &b, hidden, out->data, &e->mem);
        break;
    case IV_TASK_SPARSE:
        if (alloc_outputs(out, &b, m->mlm_head.out_dim, 0)) goto oom;
        rc = iv_head_splade(m, &b, hidden, out->data, &e->mem);
        break;
    case IV_TASK_MULTIVECTOR:
        rc = run_multivector(e, &b, hidden, out);
        break;
    default:
        return iv_errf(err, IV_E_INTERNAL, "unknown task");
    }
    if (rc) goto oom;
    /* Errors the device reported while running the batch (out of memory, a fault). */
    return m->ops->sync(m->ops, err);
oom:
    return iv_errf(err, IV_E_NOMEM, "out of memory running a batch of %lld tokens", (long long)b.n_tokens);
}

int iv_engine_run(iv_engine *e, iv_task task, const iv_seq_input *seqs, int n, iv_outputs *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    if ((unsigned)task >= IV_TASK_COUNT || !(e->caps & IV_CAN(task))) {
        const iv_model *m = e->model;
        const iv_head *need = task == IV_TASK_CLASSIFY         ? &m->seq_head
                              : task == IV_TASK_TOKEN_CLASSIFY ? &m->token_head
                              : task == IV_TASK_SPARSE         ? &m->mlm_head
                                                               : NULL;
        const int absent = need && need == m->absent_head;
        return iv_errf(err, IV_E_UNSUPPORTED, "this model (%s) does not support %s%s%s",
                       m->cfg.architecture[0] ? m->cfg.architecture : m->cfg.model_type, task_name(task),
                       absent ? ": " : "", absent ? m->missing_head : "");
    }
    if (n <= 0) return iv_errf(err, IV_E_INVALID, "no inputs");
    pthread_mutex_lock(&e->lock);
    int rc = run_locked(e, task, seqs, n, out, err);
    if (rc) {
        /* A batch that failed part-way (a device allocation refused, say)
         * leaves queued work and maybe a recorded device error: drain both,
         * so the next batch starts clean. */
        iv_err drained = {0};
        e->ops->sync(e->ops, &drained);
    }
    /* The device is done with the batch: cache entries it read or filled
     * may be evicted now (a failed batch's new entries are dropped). */
    iv_fold_pins_release(e->prefix_cache, &e->pins, rc == 0);
    iv_arena_reset(&e->arena);
    if (!e->ops->host_visible) iv_arena_reset(&e->dev_arena);
    pthread_mutex_unlock(&e->lock);
    if (rc) iv_outputs_free(out);
    return rc;
}

unsigned iv_engine_capabilities(const iv_engine *e) { return e->caps; }
const char *iv_engine_missing_head(const iv_engine *e) { return e->model->missing_head; }
const char *iv_engine_device_name(const iv_engine *e) { return e->ops->name; }
const char *iv_engine_device_label(const iv_engine *e) { return e->device_label; }
void iv_engine_bind_thread(const iv_engine *e)
{
    if (e->ops->device == IV_CPU && e->cpu_threads > 0) omp_set_num_threads(e->cpu_threads);
}
int iv_engine_uses_all_cores(const iv_engine *e) { return e->ops->device != IV_CUDA && e->cpu_threads == 0; }
const char *iv_engine_dtype_name(const iv_engine *e)
{
    if (e->ops == iv_cpu_int8_ops()) return "int8";
    switch (e->ops->act_dtype) {
    case IV_BF16: return "bfloat16";
    case IV_F16: return "float16";
    default: return "float32";
    }
}
int iv_engine_hidden_size(const iv_engine *e) { return iv_model_out_width(e->model); }
int iv_engine_embedding_dim(const iv_engine *e) { return e->embed_dim; }
int iv_engine_max_input_length(const iv_engine *e) { return e->max_len; }
const char *iv_engine_max_input_length_source(const iv_engine *e) { return e->max_len_source; }
int iv_engine_num_labels(const iv_engine *e)
{
    if (e->model->seq_head.n_steps) return e->model->seq_head.out_dim;
    if (e->model->token_head.n_steps) return e->model->token_head.out_dim;
    return 0;
}
const char *iv_engine_label(const iv_engine *e, int i)
{
    if (i < 0 || i >= IV_MAX_LABELS) return "";
    if (e->model->cfg.labels[i]) return e->model->cfg.labels[i];
    snprintf(((iv_engine *)e)->label_buf[i], sizeof e->label_buf[i], "LABEL_%d", i);
    return e->label_buf[i];
}
int iv_engine_vocab_size(const iv_engine *e) { return (int)e->model->embed.word->shape[0]; }
const char *iv_engine_architecture(const iv_engine *e) { return e->model->cfg.architecture; }
const char *iv_engine_model_type(const iv_engine *e) { return e->model->cfg.model_type; }
const iv_st_meta *iv_engine_st_meta(const iv_engine *e) { return &e->meta; }
const iv_image_proc *iv_engine_image_proc(const iv_engine *e)
{
    return e->images.model ? &e->images : NULL;
}
const iv_audio_proc *iv_engine_audio_proc(const iv_engine *e)
{
    return e->audio.model ? &e->audio : NULL;
}

const iv_multivector_info *iv_engine_multivector(const iv_engine *e)
{
    return e->colbert.layout != IV_COLBERT_NONE ? &e->colbert.info : NULL;
}
const iv_tokenizer *iv_engine_tokenizer(const iv_engine *e) { return e->tok; }
const iv_chat_template *iv_engine_chat_template(const iv_engine *e) { return e->chat; }
int iv_engine_pairs_as_messages(const iv_engine *e) { return e->pairs_as_messages; }
const iv_pair_format *iv_engine_pair_format(const iv_engine *e)
{
    return e->pair_format.enabled ? &e->pair_format : NULL;
}
size_t iv_engine_peak_activation_bytes(const iv_engine *e) { return e->arena.peak + e->dev_arena.peak; }

int iv_engine_device_memory(const iv_engine *e, size_t *free_bytes, size_t *total_bytes)
{
    if (!e->ops->mem_info) return -1;
    return e->ops->mem_info(e->ops, free_bytes, total_bytes);
}

static iv_task main_task(unsigned caps)
{
    static const iv_task order[] = {IV_TASK_EMBED, IV_TASK_MULTIVECTOR, IV_TASK_CLASSIFY, IV_TASK_SPARSE,
                                    IV_TASK_TOKEN_CLASSIFY};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (caps & IV_CAN(order[i])) return order[i];
    return IV_TASK_EMBED_ALL;
}

int iv_engine_probe_bytes_per_token(iv_engine *e, int tokens, double *bytes_per_token, iv_err *err)
{
    const int len = e->max_len < tokens ? e->max_len : tokens;
    const int n = tokens / len > 0 ? tokens / len : 1;
    const int vocab = iv_engine_vocab_size(e);
    int32_t *ids = malloc((size_t)len * sizeof *ids);
    iv_seq_input *seqs = malloc((size_t)n * sizeof *seqs);
    if (!ids || !seqs) {
        free(ids);
        free(seqs);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < len; i++) ids[i] = (int32_t)(1 + (i * 7919) % (vocab > 1 ? vocab - 1 : 1));
    for (int s = 0; s < n; s++) seqs[s] = (iv_seq_input){.ids = ids, .len = len};
    /* This batch's own high-water mark: the arena's peak spans resets. */
    iv_arena *a = e->ops->host_visible ? &e->arena : &e->dev_arena;
    const size_t before = a->peak;
    a->peak = 0;
    iv_outputs out;
    const int rc = iv_engine_run(e, main_task(e->caps), seqs, n, &out, err);
    free(ids);
    free(seqs);
    const size_t peak = a->peak;
    if (before > a->peak) a->peak = before;
    if (rc) return -1;
    iv_outputs_free(&out);
    *bytes_per_token = (double)peak / ((double)len * n);
    return 0;
}

int iv_embedding_finish(float *vec, int dim, int dimensions, int normalize)
{
    if (dimensions > 0 && dimensions < dim) dim = dimensions;
    if (normalize) {
        double ss = 0;
        for (int i = 0; i < dim; i++) ss += (double)vec[i] * vec[i];
        /* F.normalize: x / max(||x||, 1e-12) */
        float norm = (float)sqrt(ss);
        if (norm < 1e-12f) norm = 1e-12f;
        for (int i = 0; i < dim; i++) vec[i] /= norm;
    }
    return dim;
}

int iv_engine_prefix_stats(iv_engine *e, iv_prefix_stats *cache, uint64_t *folded_batches, uint64_t *tokens_in,
                           uint64_t *tokens_computed)
{
    memset(cache, 0, sizeof *cache);
    if (e->prefix_cache) iv_prefix_cache_stats(e->prefix_cache, cache);
    *folded_batches = atomic_load(&e->fold_stats.batches);
    *tokens_in = atomic_load(&e->fold_stats.tokens_in);
    *tokens_computed = atomic_load(&e->fold_stats.tokens_computed);
    return e->prefix_cache != NULL;
}

uint64_t iv_engine_head_rows_batches(const iv_engine *e) { return e->head_rows_batches; }
const char *iv_engine_no_head_rows_reason(const iv_engine *e)
{
    return e->no_head_rows ? "turned off (IV_HEAD_ROWS=0)" : e->model->no_head_rows_reason;
}

const char *iv_engine_no_fold_reason(const iv_engine *e)
{
    return e->no_fold ? "turned off (--prefix-fold false)" : e->model->no_fold_reason;
}
