/* The engine's one entry for batches with images (see vision.h): the
 * checkpoint's tower decides which mixed forward runs. */
#include "models/vision.h"

#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "models/audio_gemma4.h"
#include "models/loader.h"
#include "models/rope.h"
#include "models/vision_gemma4.h"
#include "models/vision_pixtral.h"
#include "models/vision_qwen3vl.h"

int iv_model_forward_images(const iv_model *m, const iv_batch *b, const iv_seq_images *images,
                            const iv_fwd_mem *mem, iv_view *hidden, iv_err *err)
{
    if (m->gemma4_vision) return iv_gemma4_forward(m, b, images, mem, hidden, err);
    if (m->pixtral) return iv_mistral3_forward(m, b, images, mem, hidden, err);
    return iv_qwen3vl_forward(m, b, images, mem, hidden, err); /* refuses images without a tower */
}

/* Images and audio in one batch (EmbeddingGemma2, both towers Gemma4's):
 * each tower runs over its own inputs, then one injection replaces the rows
 * of both, as EmbeddingGemma2Model.forward scatters image and audio soft
 * tokens into the same inputs_embeds; the image masks (Gemma4's "vision"
 * bidirectionality) cover the image runs only, as its mm_token_type_ids do. */
int iv_model_forward_media(const iv_model *m, const iv_batch *b, const iv_seq_images *images,
                           const iv_seq_audios *audios, const iv_fwd_mem *mem, iv_view *hidden, iv_err *err)
{
    int n_img = 0, n_aud = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        n_img += images && images[s].n > 0 ? images[s].n : 0;
        n_aud += audios && audios[s].n > 0 ? audios[s].n : 0;
    }
    if (!n_aud) return iv_model_forward_images(m, b, images, mem, hidden, err);
    if (!n_img) return iv_model_forward_audio(m, b, audios, mem, hidden, err);
    if (!m->gemma4_vision || !m->audio)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "model_type \"%s\" cannot take images and audio together (it needs both a Gemma4 vision and "
                       "a Gemma4 audio tower)",
                       m->cfg.model_type);
    iv_visual_inject vi, va;
    if (iv_gemma4_image_inject(m, b, images, mem, &vi, err) || iv_gemma4_audio_inject(m, b, audios, mem, &va, err))
        return -1;
    const int n = vi.n_spans + va.n_spans;
    int64_t *spans = iv_arena_alloc(mem->host, (size_t)n * 3 * sizeof(int64_t));
    if (!spans) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int64_t *tok = spans, *feat_row = spans + n, *len = spans + 2 * n;
    const int64_t f_img = vi.embeds.rows;
    memcpy(tok, vi.token_row, (size_t)vi.n_spans * sizeof *tok);
    memcpy(tok + vi.n_spans, va.token_row, (size_t)va.n_spans * sizeof *tok);
    memcpy(len, vi.len, (size_t)vi.n_spans * sizeof *len);
    memcpy(len + vi.n_spans, va.len, (size_t)va.n_spans * sizeof *len);
    memcpy(feat_row, vi.feat_row, (size_t)vi.n_spans * sizeof *feat_row);
    for (int i = 0; i < va.n_spans; i++) feat_row[vi.n_spans + i] = f_img + va.feat_row[i];
    /* One [F_img + F_aud, hidden] block: the images' rows, then the clips'. */
    iv_view all = iv_act_alloc(m->ops, mem->dev, f_img + va.embeds.rows, vi.embeds.cols, vi.embeds.cols);
    if (!all.data) return iv_errf(err, IV_E_NOMEM, "out of device memory for the media rows");
    m->ops->scale(m->ops, iv_view_rows(all, 0, f_img), vi.embeds, 1.0f);
    m->ops->scale(m->ops, iv_view_rows(all, f_img, all.rows), va.embeds, 1.0f);
    iv_visual_inject merged = vi;
    merged.n_spans = n;
    merged.token_row = tok;
    merged.feat_row = feat_row;
    merged.len = len;
    merged.embeds = all;
    return iv_model_forward_visual(m, b, &merged, mem, hidden, err);
}

int iv_vision_config_int(const cJSON *vc, const char *key, int64_t def, int64_t max, int *out, iv_err *err)
{
    const cJSON *it = iv_json_get(vc, key);
    if (it && !iv_json_is_integer(it))
        return iv_errf(err, IV_E_UNSUPPORTED, "config.json: vision_config.%s must be a positive integer", key);
    const int64_t x = iv_json_int(vc, key, def);
    if (x <= 0 || x > max)
        return iv_errf(err, IV_E_FORMAT, "config.json: vision_config.%s must be an integer in [1, %lld]", key,
                       (long long)max);
    *out = (int)x;
    return 0;
}

int iv_vision_axial_rope(iv_model *m, const cJSON *vc, int head_dim, double default_theta, int even_odd,
                         float **inv_freq, uint8_t **freq_section, iv_err *err)
{
    const int hd = head_dim, half = hd / 2, quarter = hd / 4;
    if (hd % 4 || half > IV_ROPE_MAX_HALF)
        return iv_errf(err, IV_E_UNSUPPORTED, "vision head_dim %d (a multiple of 4 up to %d is supported)", hd,
                       2 * IV_ROPE_MAX_HALF);
    const cJSON *rp = iv_json_get(vc, "rope_parameters");
    const char *type = iv_json_str(rp, "rope_type", "axial");
    if (strcmp(type, "axial"))
        return iv_errf(err, IV_E_UNSUPPORTED, "vision_config rope_parameters.rope_type \"%s\" (only \"axial\" is "
                                              "implemented)",
                       type);
    iv_rope_params p;
    memset(&p, 0, sizeof p);
    snprintf(p.type, sizeof p.type, "default");
    p.theta = iv_json_num(rp, "rope_theta", default_theta);
    p.rot_dim = even_odd ? hd : half;
    p.factor = 1.0;
    if (!(p.theta > 0)) return iv_errf(err, IV_E_FORMAT, "vision_config rope_theta must be positive");
    float f[IV_ROPE_MAX_HALF], attn_factor;
    if (iv_rope_inv_freq(&p, f, &attn_factor, err)) return -1;
    float *inv = iv_model_alloc(m, (size_t)half * sizeof(float));
    uint8_t *sec = iv_model_alloc(m, (size_t)half);
    if (!inv || !sec) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int i = 0; i < quarter; i++) {
        inv[i] = even_odd ? f[2 * i] : f[i];
        inv[quarter + i] = even_odd ? f[2 * i + 1] : f[i];
        sec[i] = 0;
        sec[quarter + i] = 1;
    }
    *inv_freq = inv;
    *freq_section = sec;
    return 0;
}
