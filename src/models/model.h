/* A loaded model: embeddings, the block stack, a final norm and the task
 * heads its architecture carries, all as data filled in by a family file
 * (models/family_*.c) and run by the shared code in model.c and block.c. */
#ifndef IV_MODELS_MODEL_H
#define IV_MODELS_MODEL_H

#include "base/arena.h"
#include "models/batch.h"
#include "models/block.h"
#include "models/config.h"
#include "tensor/safetensors.h"

/* How token positions are derived. */
typedef enum iv_pos_mode {
    IV_POS_INDEX = 0,    /* 0, 1, 2, ... within each sequence */
    IV_POS_PADDING_IDX,  /* RoBERTa: padding_idx + 1 + count of non-pad tokens so far; pad -> padding_idx */
} iv_pos_mode;

typedef struct iv_embed_spec {
    const iv_tensor *word;      /* [V, H] */
    const iv_tensor *position;  /* [P, H] learned absolute positions, or NULL */
    const iv_tensor *token_type; /* [types, H], or NULL */
    iv_pos_mode pos_mode;
    int padding_idx;
    float scale;                /* multiplies word embeddings (Gemma sqrt(H)); 0 = 1 */
    iv_norm norm;               /* embedding LayerNorm (present=0 when none) */
    /* [hidden, E] projection (no bias) from embedding width E = word->shape[1]
     * to hidden, applied to the summed embeddings before the norm (DeBERTa-v2
     * embed_proj); NULL when E == hidden. */
    const iv_tensor *proj;
    /* Ids embedded (word and per-layer tables) as as_pad_id's: Gemma4Model
     * gives its image / video / audio placeholder ids the pad embedding when
     * no media replaces them. n_as_pad 0: none. */
    int32_t as_pad[4];
    int n_as_pad;
    int32_t as_pad_id;
} iv_embed_spec;

/* T5/MPNet bidirectional relative-position buckets, added to every layer's scores. */
typedef struct iv_rel_bias_spec {
    const iv_tensor *table; /* [num_buckets, n_heads], or NULL */
    int num_buckets, max_distance;
} iv_rel_bias_spec;

/* A convolution over each sequence's tokens, mixed into the output of the
 * first layer (DeBERTa-v2 ConvLayer): with e the embedding output and x the
 * first layer's output, x = LN(x + act(conv1d(e))), the convolution zero
 * padded (kernel - 1) / 2 tokens at both ends of each sequence. */
typedef struct iv_token_conv {
    const iv_tensor *w;  /* [H, kernel * H]: w[o][k * H + c] weighs input channel c at offset k - pad
                            (grouped convolutions expanded at load); NULL when the model has none */
    const iv_tensor *b;  /* [H] or NULL */
    int kernel;
    iv_act act;
    iv_norm norm;
} iv_token_conv;

/* A small head: up to IV_HEAD_MAX_STEPS of linear -> activation -> optional
 * LayerNorm, applied row-wise (BERT pooler + classifier, RoBERTa
 * classifier.dense + out_proj, MLM transform + decoder, ...). */
#define IV_HEAD_MAX_STEPS 4
typedef struct iv_head_step {
    const iv_tensor *w, *b;
    iv_act act;
    const iv_tensor *ln_w, *ln_b; /* LayerNorm after the activation, when ln_w */
    float ln_eps;
} iv_head_step;

typedef struct iv_head {
    int n_steps;
    iv_head_step steps[IV_HEAD_MAX_STEPS];
    int out_dim;
    /* > 0: the outputs become softcap * tanh(y / softcap) after the last
     * step (config.json final_logit_softcapping on LM-head readouts, as
     * Gemma2/3/4ForCausalLM cap their logits). */
    float softcap;
} iv_head;

/* Which token feeds a sequence-level head. */
/* Which token(s) the sequence head reads. LAST_NON_PAD: the rightmost token
 * whose id is not config.json pad_token_id (the first token when all are),
 * as transformers' *ForSequenceClassification on decoders finds it; with
 * pad == the EOS a tokenizer appends, that is the token before the EOS. */
typedef enum iv_seq_pool {
    IV_SEQ_POOL_FIRST = 0,
    IV_SEQ_POOL_MEAN,
    IV_SEQ_POOL_LAST,
    IV_SEQ_POOL_LAST_NON_PAD
} iv_seq_pool;

struct iv_image_input;
typedef struct iv_model {
    iv_hf_config cfg;
    const struct iv_family *family;
    iv_weights *weights;
    const iv_ops *ops;
    char prefix[64];           /* backbone prefix found in the checkpoint ("bert.", "" ...) */
    int biases_required;       /* the reference's heads have every bias: absent is an error (BERT, DistilBERT, MPNet) */

    iv_embed_spec embed;
    iv_block_spec block;
    int n_layers;
    iv_layer *layers;
    iv_norm final_norm;         /* after the last layer (pre-norm families), present=0 when none */
    iv_rel_bias_spec rel_bias;
    const float *alibi_slopes;  /* [n_heads] symmetric ALiBi (model-owned), or NULL */
    iv_token_conv conv;         /* after layer 0, when conv.w */

    iv_head seq_head;           /* sequence classification (n_steps 0 when absent) */
    iv_seq_pool seq_head_pool;
    iv_head token_head;         /* token classification */
    iv_head mlm_head;           /* masked-LM logits (SPLADE) */
    iv_head token_proj;         /* per-token projection of multi-vector models (ColBERT's linear) */
    /* Why the head config.json declares is empty (its tensors are not in the
     * checkpoint: only the base model was saved); "" when nothing is missing. */
    char missing_head[384];
    const iv_head *absent_head; /* the empty head missing_head is about, or NULL */

    /* Per-layer inputs (EmbeddingGemma 2's projection-only PLE), from the
     * scaled embeddings e: ple = N(reshape(e W^T * ple_scale, [T, layers,
     * block.ple_dim])), N an RMSNorm of width ple_dim with weight ple_norm_w.
     * NULL ple_w: none. Gemma4's full form adds a token table:
     * ple = (N(...) + ple_tok[id] * ple_tok_scale) * ple_mix_scale, ple_tok
     * [vocab, layers * ple_dim] (NULL: projection only). */
    const iv_tensor *ple_w, *ple_norm_w;
    float ple_scale;
    const iv_tensor *ple_tok;
    float ple_tok_scale, ple_mix_scale;
    /* [E, H] projection of the final hidden states, token by token
     * (EmbeddingGemma 2's embedding_projection), or NULL; the forward pass
     * then returns E-wide states (iv_model_out_width). */
    const iv_tensor *out_proj;

    /* Longest accepted input; 0 = the position table's size, else
     * max_position_embeddings (iv_model_max_length); IV_MODEL_NO_LENGTH_CAP
     * where nothing in the model limits it (dynamic NTK RoPE). */
    int max_len;
    /* Rotary scaling whose frequencies depend on the sequence length (dynamic,
     * longrope), shared by every rotary layer; NULL otherwise. */
    const struct iv_rope_params *seq_rope;

    /* Why prefix folding (models/fold.h) can never apply to this model, or
     * NULL when it can: set at load from the data above. */
    const char *no_fold_reason;
    /* Why the last layer can never compute only the rows a head reads
     * (iv_model_forward_head_rows), or NULL when it can: set at load. */
    const char *no_head_rows_reason;

    /* Qwen3-VL's vision tower (models/vision_qwen3vl.h), or NULL; its
     * memory is the model's. image_token_id: config.json's image pad token. */
    struct iv_qwen3vl_vision *vision;
    int image_token_id;
    /* The family's processor expansion of one image (docs/vision.md, "The
     * image placeholder hook"): the chat template writes one placeholder
     * token (image_placeholder_id) per image; the processor replaces it by
     * the run this returns. It writes the run into out (NULL: count only),
     * sets *feature_start to where, within the run, the tower's feature rows
     * begin (they then fill the image's tokens of the run in order), and
     * returns the run's length. NULL: the model takes no images. */
    int64_t (*image_token_run)(const struct iv_model *m, const struct iv_image_input *img, int32_t *out,
                               int64_t *feature_start);
    int image_placeholder_id;
    /* Mistral3's Pixtral tower and projector (models/vision_pixtral.h), or
     * NULL; image_token_id is then config.json's image_token_index ([IMG]). */
    struct iv_pixtral_vision *pixtral;
    /* Pixtral's row and end markers in an image's run ([IMG_BREAK],
     * [IMG_END]): tokenizer ids the engine sets once the tokenizer is
     * loaded (the model's files do not name them); -1 until then. */
    int image_break_id, image_end_id;
    /* EmbeddingGemma2's Gemma4 audio tower and embedder
     * (models/audio_gemma4.h), or NULL. */
    struct iv_gemma4_audio *audio;
    /* Gemma4's vision tower and embedder (models/vision_gemma4.h), or NULL;
     * image_token_id is then config.json's image_token_id. */
    struct iv_gemma4_vision *gemma4_vision;

    /* Buffers the loader created (fused QKV weights, tied copies): freed with the model. */
    void **owned;
    int n_owned, cap_owned;
} iv_model;

int iv_model_load(iv_model **out, const char *model_dir, const iv_ops *ops, iv_err *err);
/* The same with config.json read from config_dir (a Laya checkpoint keeps
 * its encoder's config in encoder/ beside the weights). */
int iv_model_load_split(iv_model **out, const char *config_dir, const char *model_dir, const iv_ops *ops, iv_err *err);
/* Moves a model loaded with a CPU table onto ops (a no-op for host-visible
 * tables): its weights become the table's prepared copies. */
int iv_model_to_device(iv_model *m, const iv_ops *ops, iv_err *err);
void iv_model_free(iv_model *m);

/* Copies the batch's ids, type ids, cu_seqlens and key mask into the
 * device's memory (the *_dev fields) and sets max_seqlen: once per batch,
 * before iv_model_forward and the heads. */
int iv_model_upload_batch(const iv_model *m, iv_batch *b, iv_arena *dev, iv_err *err);
/* Runs the backbone over a packed, uploaded batch; *hidden receives [T,
 * width] final states in device memory (mem->dev), width =
 * iv_model_out_width. Token ids and lengths must already be validated
 * (iv_model_check_batch). */
int iv_model_forward(const iv_model *m, const iv_batch *b, const iv_fwd_mem *mem, iv_view *hidden, iv_err *err);
/* What a multimodal forward changes in the text model's pass (built by
 * models/vision_qwen3vl.c and vision_pixtral.c): the embeddings of some token rows are replaced
 * by feature rows, positions come on several axes, and DeepStack features
 * are added to those rows after the first layers. */
typedef struct iv_visual_inject {
    int n_spans;
    /* host: span i puts feature rows [feat_row[i], + len[i]) at token rows [token_row[i], + len[i]) */
    const int64_t *token_row, *feat_row, *len;
    iv_view embeds;             /* [F, hidden] replacing the token embeddings */
    int n_deepstack;
    const iv_view *deepstack;   /* [n_deepstack] of [F, hidden]: k added after layer k */
    /* Rotary positions, axis a of token t at [a * pos_axis_stride + t] (host, dev). */
    const int32_t *positions, *positions_dev;
    int64_t pos_axis_stride;
    /* A mask variant for batches with images (Gemma4's "vision"
     * bidirectionality): the spec and layers to run instead of the model's,
     * NULL: the model's; and an additive attention bias per sequence
     * (iv_attn_args.bias, bias_offsets host and dev), NULL: none. */
    const struct iv_block_spec *spec;
    const struct iv_layer *layers;
    const float *bias;
    const int64_t *bias_offsets, *bias_offsets_dev;
} iv_visual_inject;
/* iv_model_forward with visual rows (vi NULL: iv_model_forward). */
int iv_model_forward_visual(const iv_model *m, const iv_batch *b, const iv_visual_inject *vi, const iv_fwd_mem *mem,
                            iv_view *hidden, iv_err *err);
/* The final states of one row per sequence, rows[s] (host [n_seqs], a row
 * of sequence s), as *hidden [n_seqs, width]: what a head that reads one
 * token per sequence (CLS or last-token pooling, a classifier on one
 * token) needs. Where iv_model_head_rows_apply says so, the last layer
 * computes keys and values for every row and the rest for these rows only;
 * else the full pass runs and the rows are gathered. Text batches only. */
int iv_model_forward_head_rows(const iv_model *m, const iv_batch *b, const int32_t *rows, const iv_fwd_mem *mem,
                               iv_view *hidden, iv_err *err);
/* Why a model's last layer cannot compute only the head's rows, or NULL. */
const char *iv_model_head_rows_blocker(const iv_model *m);
/* 1 when iv_model_forward_head_rows computes the head's rows alone for
 * batch b (the model allows it, the batch has no key mask, the op table's
 * attention_rows takes the last layer's heads); 0: it gathers them from
 * the full pass. */
int iv_model_head_rows_apply(const iv_model *m, const iv_batch *b);
/* Validates ids against the vocabulary and lengths against positions. */
int iv_model_check_batch(const iv_model *m, const iv_batch *b, iv_err *err);
/* Width of the hidden states iv_model_forward returns: the block's hidden
 * size, or the output projection's width. */
int iv_model_out_width(const iv_model *m);
/* Longest sequence the model accepts (position table, or a large bound for rotary models). */
#define IV_MODEL_NO_LENGTH_CAP (1 << 30)
int iv_model_max_length(const iv_model *m);

/* Applies a head row-wise to in [rows, in_cols]: *out [rows, head->out_dim]
 * on the device. When out->data is set the last step writes there, else
 * into new dev memory. */
int iv_head_apply(const iv_ops *ops, const iv_head *h, iv_view in, iv_arena *dev, iv_view *out);

#endif
