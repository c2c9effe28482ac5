#include "engine/inputs.h"

#include <stdlib.h>
#include <string.h>

#include "engine/conversation.h"
#include "engine/pair_format.h"

iv_input_opts iv_input_opts_default(void)
{
    iv_input_opts o = {.prompt = NULL, .truncate = 1, .truncate_left = 0, .add_special_tokens = 1, .max_length = 0};
    return o;
}

static int effective_max(const iv_engine *e, const iv_input_opts *o)
{
    int max = iv_engine_max_input_length(e);
    return o->max_length > 0 && o->max_length < max ? o->max_length : max;
}

/* Images of pre-expanded ids (iv_input.id_images): each run must lie
 * within the ids as given, which are then never cut. */
static int attach_id_images(const iv_engine *e, const iv_input *in, int n, int start, iv_prepared *out, iv_err *err)
{
    const iv_image_proc *ip = iv_engine_image_proc(e);
    if (!ip) return iv_errf(err, IV_E_INVALID, "model `%s` takes no images", iv_engine_model_type(e));
    if (n != in->n_ids || start)
        return iv_errf(err, IV_E_INVALID, "input has %d tokens with images, more than the model's maximum of %d",
                       in->n_ids, n);
    for (int k = 0; k < in->n_id_images; k++) {
        int64_t first;
        const int64_t len = ip->model->image_token_run(ip->model, &in->id_images[k], NULL, &first);
        const int64_t at = (int64_t)in->id_images[k].token_offset - first;
        if (at < 0 || at + len > n)
            return iv_errf(err, IV_E_INVALID, "image %d's tokens lie outside the input's %d tokens", k, n);
    }
    out->seq.images = in->id_images;
    out->seq.n_images = in->n_id_images;
    return 0;
}

static int prepare_ids(const iv_engine *e, const iv_input *in, const iv_input_opts *o, iv_prepared *out,
                       iv_err *err)
{
    const int max = effective_max(e, o), vocab = iv_engine_vocab_size(e);
    if (in->n_ids <= 0) return iv_errf(err, IV_E_INVALID, "input is empty");
    int n = in->n_ids, start = 0;
    if (n > max) {
        if (!o->truncate)
            return iv_errf(err, IV_E_INVALID, "input has %d tokens, more than the model's maximum of %d", n, max);
        start = o->truncate_left ? n - max : 0;
        n = max;
    }
    out->own_ids = malloc((size_t)n * sizeof(int32_t));
    if (!out->own_ids) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        int32_t id = in->ids[start + i];
        if (id < 0 || id >= vocab)
            return iv_errf(err, IV_E_INVALID, "token id %d is outside the vocabulary (size %d)", id, vocab);
        out->own_ids[i] = id;
    }
    out->seq.ids = out->own_ids;
    out->seq.len = n;
    return in->n_id_images ? attach_id_images(e, in, n, start, out, err) : 0;
}

static int prepare_text(const iv_engine *e, const iv_input *in, const iv_input_opts *o, iv_prepared *out,
                        iv_err *err)
{
    const iv_tokenizer *tok = iv_engine_tokenizer(e);
    if (!tok) return iv_errf(err, IV_E_UNSUPPORTED, "this model has no tokenizer.json; send token ids instead");
    /* An empty string is a valid input (it encodes to the special tokens),
     * as in sentence-transformers; the APIs reject empty batches, not texts. */
    const int max = effective_max(e, o);
    iv_encode_opts eo = iv_encode_opts_default();
    eo.add_special_tokens = o->add_special_tokens;
    /* Encode untruncated first when truncation is off, so the error can say how long the input is. */
    eo.max_length = o->truncate ? max : 0;
    eo.truncate_left = o->truncate_left;

    const char *text = in->text;
    size_t len = in->text_len;
    char *joined = NULL;
    if (o->prompt && *o->prompt) {
        size_t pl = strlen(o->prompt);
        joined = malloc(pl + len + 1);
        if (!joined) return iv_errf(err, IV_E_NOMEM, "out of memory");
        memcpy(joined, o->prompt, pl);
        memcpy(joined + pl, in->text, len);
        joined[pl + len] = 0;
        text = joined;
        len += pl;
        /* sentence-transformers 6.3 (Transformer._get_prompt_length): the
         * prompt tokenized alone, specials included, less its last token
         * only when that is a special token (the SEP/EOS a template
         * appends). Versions up to 5 always took one off; a template that
         * appends nothing (Qwen, Llama without add_eos) counts every prompt
         * token under 6.3. */
        iv_encoding penc;
        iv_encode_opts po = iv_encode_opts_default();
        if (iv_tokenizer_encode(tok, o->prompt, pl, NULL, 0, &po, &penc, err)) {
            free(joined);
            return -1;
        }
        const int trailing_special = penc.len > 0 && iv_tokenizer_is_special_id(tok, penc.ids[penc.len - 1]);
        out->seq.prompt_len = penc.len - trailing_special;
        iv_encoding_free(&penc);
    }
    int rc = iv_tokenizer_encode(tok, text, len, in->pair, in->pair_len, &eo, &out->enc, err);
    free(joined);
    if (rc) return -1;
    if (out->enc.len > max)
        return iv_errf(err, IV_E_INVALID, "input has %d tokens, more than the model's maximum of %d", out->enc.len,
                       max);
    if (out->enc.len == 0) return iv_errf(err, IV_E_INVALID, "input produced no tokens");
    out->seq.ids = out->enc.ids;
    out->seq.type_ids = out->enc.type_ids;
    out->seq.len = out->enc.len;
    return 0;
}

/* A text pair in the checkpoint processor's format: one text, the
 * tokenizer's special tokens, cut to the processor's limit when it has one. */
static int prepare_formatted_pair(const iv_engine *e, const iv_pair_format *pf, const iv_input *in,
                                  const iv_input_opts *o, iv_prepared *out, iv_err *err)
{
    if (o->prompt && *o->prompt)
        return iv_errf(err, IV_E_INVALID,
                       "a prompt cannot be applied to a text pair: this model's processor formats pairs itself "
                       "(processor_config.json)");
    char *text = NULL;
    size_t len = 0;
    if (iv_pair_format_render(pf, in->text, in->text_len, in->pair, in->pair_len, &text, &len, err)) return -1;
    const iv_input one = {.text = text, .text_len = len};
    iv_input_opts oo = *o;
    if (pf->max_length > 0 && (oo.max_length <= 0 || pf->max_length < oo.max_length)) oo.max_length = pf->max_length;
    const int rc = prepare_text(e, &one, &oo, out, err);
    free(text);
    return rc;
}

int iv_prepare_input(const iv_engine *e, const iv_input *in, const iv_input_opts *opts, iv_prepared *out,
                     iv_err *err)
{
    memset(out, 0, sizeof *out);
    iv_input_opts def = iv_input_opts_default();
    const iv_input_opts *o = opts ? opts : &def;
    /* The processor's own pair format comes before the message path: for
     * these checkpoints a pair is what the processor makes of it, not a
     * query/document conversation. */
    const iv_pair_format *pf = iv_engine_pair_format(e);
    int rc = pf && in->pair && !in->ids && !in->messages && !in->image && !in->audio ? prepare_formatted_pair(e, pf, in, o, out, err)
             : iv_conversation_wanted(e, in) && !in->ids ? iv_conversation_prepare(e, in, o, effective_max(e, o), out, err)
             : in->ids                                   ? prepare_ids(e, in, o, out, err)
                                                         : prepare_text(e, in, o, out, err);
    if (rc) iv_prepared_free(out);
    else out->seq.no_fold = o->no_fold;
    return rc;
}

void iv_prepared_free(iv_prepared *p)
{
    iv_encoding_free(&p->enc);
    free(p->own_ids);
    iv_image_set_free(&p->images);
    iv_audio_set_free(&p->audios);
    memset(p, 0, sizeof *p);
}
