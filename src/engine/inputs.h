/* Turning one request input (text, text pair, conversation, or token ids) into a sequence
 * the engine runs: prompt prepending, tokenization, truncation and the
 * length check. Shared by the CLI and every HTTP route. */
#ifndef IV_ENGINE_INPUTS_H
#define IV_ENGINE_INPUTS_H

#include "engine/engine.h"
#include "engine/audio_inputs.h"
#include "engine/image_inputs.h"

typedef struct iv_input {
    const char *text;      /* UTF-8, or NULL when ids are given */
    size_t text_len;
    const char *pair;      /* second text (rerank/predict pairs), or NULL */
    size_t pair_len;
    const int32_t *ids;    /* pre-tokenized input (used as is), or NULL */
    int n_ids;
    /* A conversation (a JSON array of messages, owned by the caller) rendered
     * by the chat template instead of text (engine/conversation.h), or NULL. */
    const struct cJSON *messages;
    /* A bare image (a data URL or base64, owned by the caller) for models
     * with a vision tower: it becomes one user message holding the image
     * (and the model's image_doc_text), rendered by the chat template. */
    const char *image;
    size_t image_len;
    /* A bare audio clip (a data URL or base64, owned by the caller) for
     * models with an audio tower: one user message holding the clip (and
     * the input's text after it, when given). */
    const char *audio;
    size_t audio_len;
    /* A bare media content part (an OpenAI {"type": "input_audio", ...}
     * item, owned by the caller): one user message holding that part. */
    const struct cJSON *media_part;
    /* With messages: the images of their image parts, in order, decoded
     * and preprocessed once by the caller (a typed decision's state images,
     * shared by its questions' conversations; borrowed), so the parts need
     * no source ({"type": "image"}). */
    const iv_image_set *decoded_images;
    /* With ids: the images of those already expanded ids (token_offset set,
     * pixel values borrowed from the caller until the job is done). */
    const iv_image_input *id_images;
    int n_id_images;
} iv_input;

/* add_generation_prompt for a conversation. */
typedef enum iv_gen_prompt {
    IV_GEN_PROMPT_DEFAULT = 0, /* as the template variables say (else off) */
    IV_GEN_PROMPT_OFF,
    IV_GEN_PROMPT_ON,
} iv_gen_prompt;

typedef struct iv_input_opts {
    const char *prompt;    /* prepended to text (sentence-transformers prompts), or NULL */
    int truncate;          /* cut to the model's limit instead of failing */
    int truncate_left;
    int add_special_tokens; /* default 1 */
    int max_length;        /* token limit below the model's (server --max-batch-tokens); 0: the model's */
    /* Conversations: template variables over the checkpoint's (a JSON
     * object owned by the caller, or NULL), and add_generation_prompt. */
    const struct cJSON *chat_kwargs;
    iv_gen_prompt generation_prompt;
    int no_fold;           /* iv_seq_input.no_fold (typed decisions) */
} iv_input_opts;

iv_input_opts iv_input_opts_default(void);

typedef struct iv_prepared {
    iv_seq_input seq;      /* points into the owned buffers below */
    iv_encoding enc;       /* when tokenized */
    int32_t *own_ids;      /* when ids were given, or the ids with image runs expanded */
    iv_image_set images;   /* the images of a conversation (seq.images points here) */
    iv_audio_set audios;   /* its audio clips (seq.audios points here) */
} iv_prepared;

/* Errors: IV_E_INVALID for empty inputs, invalid UTF-8, ids out of range,
 * or too long with truncate off (message names the limit); IV_E_UNSUPPORTED
 * when text is given but the model has no tokenizer. */
int iv_prepare_input(const iv_engine *e, const iv_input *in, const iv_input_opts *opts, iv_prepared *out,
                     iv_err *err);
void iv_prepared_free(iv_prepared *p);

#endif
