/* The engine: one loaded checkpoint (config, weights, family, heads,
 * sentence-transformers metadata, tokenizer) and the one call the CLI and
 * the server use to run packed batches through it. */
#ifndef IV_ENGINE_ENGINE_H
#define IV_ENGINE_ENGINE_H

#include <stdint.h>
#include "base/err.h"
#include "heads/colbert.h"
#include "heads/st_meta.h"
#include "tokenizer/tokenizer.h"

/* What a request asks for. */
typedef enum iv_task {
    IV_TASK_EMBED = 0,      /* pooled sentence vector (after ST Dense layers; not normalised) */
    IV_TASK_EMBED_ALL,      /* last hidden state per token */
    IV_TASK_SPARSE,         /* SPLADE vocabulary-sized vector per sequence */
    IV_TASK_CLASSIFY,       /* sequence classification logits (rerank = 1 label) */
    IV_TASK_TOKEN_CLASSIFY, /* per-token logits */
    IV_TASK_MULTIVECTOR,    /* ColBERT: [kept tokens, dim] L2-normalised token vectors per input */
    IV_TASK_COUNT
} iv_task;

/* Capability bits, one per task. */
#define IV_CAN(task) (1u << (task))

typedef struct iv_engine_opts {
    const char *device;   /* see iv_ops_open: cpu (default), cuda, cuda:N, emulated */
    const char *dtype;    /* cpu: "float32" (default) or "int8" (models/quantize.h);
                             cuda, emulated: "bfloat16" (default) or "float16" */
    int max_batch_tokens; /* 0: engine default */
    int pooling_override; /* iv_pool_mode or 0 */
    /* "yes,no": score a *ForCausalLM checkpoint as a 1-label reranker,
     * logit(yes) - logit(no) at the last token (models/lm_score_head.h); the
     * two vocabulary tokens as tokenizer.json spells them. NULL: off. */
    const char *rerank_tokens;
    /* A Jinja file used instead of the checkpoint's chat template (vLLM's
     * --chat-template); text pairs are then rendered through it as
     * [{"role": "query"}, {"role": "document"}] messages. NULL: off. */
    const char *chat_template;
    /* CPU: OpenMP threads of the thread that calls iv_engine_bind_thread
     * (replicas on one CPU split its cores); 0: every core. */
    int cpu_threads;
    /* 1: a *ForCausalLM checkpoint with a chat template answers typed
     * decisions by the option-token (letters) contract: the LM logits of
     * the letters A..Z, a..z at the next position after the rendered prompt
     * (decisions/letters.h). 0: off. */
    int decision_letters;
    /* 1 ("sum") or 2 ("mean"): a *ForCausalLM checkpoint with a chat
     * template answers typed decisions by the generic continuation
     * log-prob contract (decisions/continuation.h): the LM head over the
     * whole vocabulary becomes the last-token sequence head. 0: off. */
    int decision_continuation;
    /* Images in requests: the most pixels a decoded image may have (checked
     * in its header, before decoding); 0: IV_IMAGE_DEFAULT_MAX_PIXELS. */
    int64_t max_image_pixels;
    /* Audio in requests: the most encoded bytes and decoded seconds a clip
     * may have; 0: IV_AUDIO_DEFAULT_MAX_BYTES / _SECONDS (docs/audio.md). */
    size_t max_audio_bytes;
    double max_audio_seconds;
    /* Prefix folding (models/fold.h, docs/prefix-folding.md): on by default
     * for models that support it; 1 turns it off. */
    int no_prefix_fold;
    /* Bytes of device memory for the prefix cache (engine/prefix_cache.h);
     * 0: no cache. */
    size_t prefix_cache_bytes;
    /* 1: every row runs through the last layer even when the head reads one
     * per sequence (engine/head_rows.c; also IV_HEAD_ROWS=0 in the
     * environment). For comparisons: the default computes only those rows. */
    int no_head_rows;
} iv_engine_opts;

typedef struct iv_engine iv_engine;

/* Loads a checkpoint directory. Unknown architectures, missing tensors, wrong
 * shapes and non-safetensors checkpoints are rejected with a clear error. */
int iv_engine_load(iv_engine **out, const char *model_dir, const iv_engine_opts *opts, iv_err *err);
void iv_engine_free(iv_engine *e);

/* One sequence of a batch, already tokenized. */
typedef struct iv_seq_input {
    const int32_t *ids;
    const int32_t *type_ids; /* NULL: all 0 */
    int len;
    const uint8_t *key_mask; /* NULL: every token is a key */
    int prompt_len;          /* leading prompt tokens, left out of pooling when the
                                Pooling module has include_prompt=false */
    /* Images of this sequence, for checkpoints with a vision tower (Qwen3-VL,
     * models/vision_qwen3vl.h): each one's processed pixel values, grid and
     * where its run of image pad tokens starts in ids (the run must hold
     * exactly its tokens). NULL / 0: text only. docs/vision.md. */
    const struct iv_image_input *images;
    int n_images;
    /* 1: never share this sequence's states with others (prefix folding and
     * the prefix cache). The Laya and Clef decision routes set it (their
     * backbones cannot fold anyway); the server's own folding is exact, so
     * causal decision contracts leave it off (docs/prefix-folding.md). */
    int no_fold;
    /* Audio clips of this sequence, for checkpoints with an audio tower
     * (EmbeddingGemma2's Gemma4 tower, models/audio_gemma4.h): each one's
     * valid log-mel frames and where its run of audio tokens starts in ids
     * (the run must hold exactly its soft tokens). NULL / 0: none.
     * docs/audio.md. A sequence may hold images and audio together. */
    const struct iv_audio_input *audios;
    int n_audios;
} iv_seq_input;

/* Results of one forward: for sequence s, rows[s] rows of `cols` floats at
 * data + offsets[s] (rows = 1 for pooled/classify/sparse, len for per-token,
 * the kept tokens for multi-vector, possibly 0). */
typedef struct iv_outputs {
    int n_seqs;
    int cols;
    float *data;
    int64_t *offsets; /* [n_seqs + 1] */
    int *rows;        /* [n_seqs] */
} iv_outputs;
void iv_outputs_free(iv_outputs *o);

/* Runs n sequences as one packed batch. Thread-safe: calls are serialised
 * per engine (one replica). Ids out of the vocabulary and sequences longer
 * than the model can run are IV_E_INVALID; the limit in force
 * (iv_engine_max_input_length) is applied by iv_prepare_input. */
/* Prefix folding and cache counters (docs/prefix-folding.md): the cache's
 * (zero without one), batches folded, their tokens and the tokens
 * actually computed. Returns 1 when the engine has a prefix cache. */
struct iv_prefix_stats;
int iv_engine_prefix_stats(iv_engine *e, struct iv_prefix_stats *cache, uint64_t *folded_batches,
                           uint64_t *tokens_in, uint64_t *tokens_computed);
/* Why this engine never folds, or NULL when it does. */
const char *iv_engine_no_fold_reason(const iv_engine *e);
/* Batches whose last layer computed only the rows their head reads
 * (engine/head_rows.c), since load. */
uint64_t iv_engine_head_rows_batches(const iv_engine *e);
/* Why this engine's last layer always runs every row, or NULL when it
 * computes only the head's rows where the task allows. */
const char *iv_engine_no_head_rows_reason(const iv_engine *e);
int iv_engine_run(iv_engine *e, iv_task task, const iv_seq_input *seqs, int n, iv_outputs *out,
                  iv_err *err);

/* Description of the loaded model. */
/* The table the engine runs on ("cpu", "cpu-int8", "emulated", "cuda") and
 * its compute dtype name as the command line spells it. */
const char *iv_engine_device_name(const iv_engine *e);
/* The device as it was asked for ("cuda:1", "cpu", "emulated"). */
const char *iv_engine_device_label(const iv_engine *e);
/* Called once by the thread that will run this engine's batches: applies
 * opts.cpu_threads to that thread's OpenMP teams. */
void iv_engine_bind_thread(const iv_engine *e);
/* 1 when the engine computes on this host's cores, all of them (CPU or
 * emulated device, no opts.cpu_threads share). */
int iv_engine_uses_all_cores(const iv_engine *e);
const char *iv_engine_dtype_name(const iv_engine *e);
unsigned iv_engine_capabilities(const iv_engine *e);  /* IV_CAN bits */
/* Why a head config.json declares was not loaded (the checkpoint holds only
 * the base model), naming the task it would serve; "" when none is missing. */
const char *iv_engine_missing_head(const iv_engine *e);
int iv_engine_hidden_size(const iv_engine *e);
int iv_engine_embedding_dim(const iv_engine *e);      /* pooled output width */
int iv_engine_max_input_length(const iv_engine *e);   /* tokens, specials included */
/* Where that limit comes from: "sentence_bert_config.json",
 * "tokenizer_config.json" or "config.json" (engine/max_length.h). */
const char *iv_engine_max_input_length_source(const iv_engine *e);
int iv_engine_num_labels(const iv_engine *e);          /* 0 when not a classifier */
const char *iv_engine_label(const iv_engine *e, int i); /* id2label, or "LABEL_i" */
int iv_engine_vocab_size(const iv_engine *e);
const char *iv_engine_architecture(const iv_engine *e); /* e.g. "BertModel" */
const char *iv_engine_model_type(const iv_engine *e);   /* e.g. "bert" */
const iv_st_meta *iv_engine_st_meta(const iv_engine *e);

/* How the model takes images (engine/image_inputs.h), or NULL when it has
 * no vision tower. */
struct iv_image_proc;
const struct iv_image_proc *iv_engine_image_proc(const iv_engine *e);
/* How the model takes audio (engine/audio_inputs.h), or NULL when it has
 * no audio tower. */
struct iv_audio_proc;
const struct iv_audio_proc *iv_engine_audio_proc(const iv_engine *e);
/* NULL for models that are not multi-vector. */
const iv_multivector_info *iv_engine_multivector(const iv_engine *e);
/* The checkpoint's tokenizer, or NULL when it has no tokenizer.json. */
const iv_tokenizer *iv_engine_tokenizer(const iv_engine *e);
/* Whether text pairs are rendered as query/document conversations because
 * the operator gave a chat template (iv_engine_opts.chat_template). */
int iv_engine_pairs_as_messages(const iv_engine *e);
/* How the checkpoint's processor formats a text pair (engine/pair_format.h),
 * or NULL when the tokenizer's pair encoding (or a chat template) applies. */
struct iv_pair_format;
const struct iv_pair_format *iv_engine_pair_format(const iv_engine *e);
/* The checkpoint's chat template(s) (src/chat/chat_template.h), or NULL. */
struct iv_chat_template;
const struct iv_chat_template *iv_engine_chat_template(const iv_engine *e);
/* The Laya decision head and sidecar when the checkpoint is one
 * (decisions/laya.h), else NULL. Such an engine serves IV_TASK_EMBED_ALL
 * (the encoder's last hidden state) for the decision route to read. */
struct iv_laya;
const struct iv_laya *iv_engine_laya(const iv_engine *e);
/* How many option letters the letters decision head reads (52), or 0 when
 * the engine was not loaded with decision_letters. */
int iv_engine_decision_letters(const iv_engine *e);
/* The continuation contract's normalisation (1 sum, 2 mean) and the LM
 * head's rows (*vocab, the classify output's width), or 0 when the engine
 * was not loaded with decision_continuation. */
int iv_engine_decision_continuation(const iv_engine *e, int *vocab);
/* The pplx-decider v1 sidecar (decisions/pplx.h) when the checkpoint has
 * decision_config.json, else NULL. Such an engine serves IV_TASK_CLASSIFY:
 * the readout's option logits at the last token of a rendered chat. */
struct iv_pplx;
const struct iv_pplx *iv_engine_pplx(const iv_engine *e);
/* The Clef sidecars and joint head (decisions/clef.h) when the checkpoint
 * has joint_head_config.json, else NULL. Such an engine serves
 * IV_TASK_EMBED_ALL: the backbone's final-norm states of the joint sequence. */
struct iv_clef;
const struct iv_clef *iv_engine_clef(const iv_engine *e);
/* The typed-decision family this engine answers ("laya", "pplx-decider",
 * "clef", "letters", "continuation"), or NULL when it answers none. */
const char *iv_engine_decision_family(const iv_engine *e);
/* Peak activation bytes of one batch so far. */
size_t iv_engine_peak_activation_bytes(const iv_engine *e);
/* Device memory (ops->mem_info): 0, or -1 when the device cannot tell (the
 * CPU, the emulated device). */
int iv_engine_device_memory(const iv_engine *e, size_t *free_bytes, size_t *total_bytes);
/* Runs one batch of about `tokens` tokens (sequences of the model's input
 * limit, ids of the vocabulary) through the model's main task and reports
 * the device memory its activations took per token: what a token budget
 * costs. Activations grow linearly with tokens (attention never holds a
 * [L, L] matrix), so one probe sizes every budget. */
int iv_engine_probe_bytes_per_token(iv_engine *e, int tokens, double *bytes_per_token, iv_err *err);

/* Post-processing of one pooled embedding in place: Matryoshka truncation to
 * `dimensions` (0 = keep) then optional L2 normalisation. Returns the new length. */
int iv_embedding_finish(float *vec, int dim, int dimensions, int normalize);

#endif
