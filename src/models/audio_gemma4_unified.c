/* Gemma4 unified's audio path (transformers 5.25 modular_gemma4_unified.py:
 * Gemma4UnifiedModel.get_audio_features, embed_audio =
 * Gemma4UnifiedMultimodalEmbedder(audio_config)): no audio tower. Each
 * soft token is one frame of audio_embed_dim raw samples
 * (audio/gemma4_unified_frames.h) through a weightless RMSNorm (audio
 * rms_norm_eps) and embedding_projection [text hidden, audio_embed_dim],
 * no bias. The runs (<boa>, one audio token per frame, <eoa>) and their
 * injection are Gemma4's (audio_gemma4.c). */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "models/audio_gemma4.h"
#include "models/loader.h"
#include "tensor/safetensors.h"

/* Gemma4UnifiedForConditionalGeneration saves under model., Gemma4UnifiedModel without. */
static const char *const k_prefixes[] = {"model.", "", NULL};

int iv_gemma4_unified_audio_load(iv_model *m, const cJSON *ac, iv_gemma4_audio **out, iv_err *err)
{
    *out = NULL;
    const char *mt = iv_json_str(ac, "model_type", "gemma4_unified_audio");
    if (strcmp(mt, "gemma4_unified_audio"))
        return iv_errf(err, IV_E_UNSUPPORTED, "audio_config.model_type \"%s\" (gemma4_unified takes "
                                              "\"gemma4_unified_audio\")",
                       mt);
    const cJSON *dim = iv_json_get(ac, "audio_embed_dim");
    if (dim && (!iv_json_is_integer(dim) || dim->valuedouble <= 0 || dim->valuedouble > (1 << 20)))
        return iv_errf(err, IV_E_FORMAT, "config.json: audio_config.audio_embed_dim must be a positive integer");
    char name[256];
    const char *pre = NULL;
    for (const char *const *p = k_prefixes; *p && !pre; p++) {
        snprintf(name, sizeof name, "%sembed_audio.embedding_projection.weight", *p);
        if (iv_weights_find(m->weights, name)) pre = *p;
    }
    if (!pre) return 0; /* a text-only export: audio is refused as for a model without audio */
    iv_gemma4_audio *a = iv_model_alloc(m, sizeof *a);
    if (!a) return iv_errf(err, IV_E_NOMEM, "out of memory");
    a->raw_frame = dim ? (int)dim->valuedouble : 640;
    a->n_mels = a->out_dims = a->raw_frame;
    a->text_hidden = m->cfg.hidden_size;
    a->embed_eps = (float)iv_json_num(ac, "rms_norm_eps", 1e-6);
    if (!(a->embed_eps > 0))
        return iv_errf(err, IV_E_FORMAT, "config.json: audio_config.rms_norm_eps must be positive");
    const int64_t tok = iv_json_int(m->cfg.root, "audio_token_id", 258881);
    if (tok < 0 || tok > INT32_MAX) return iv_errf(err, IV_E_FORMAT, "config.json: audio_token_id out of range");
    a->audio_token_id = (int)tok;
    if (iv_ld_top(m, name, a->text_hidden, a->raw_frame, &a->embed_w, err)) return -1;
    *out = a;
    return 0;
}

int iv_gemma4_unified_audio_forward(const iv_model *m, const iv_gemma4_audio *a, const iv_audio_input *clips, int n,
                                    const iv_fwd_mem *mem, iv_view *tokens, iv_err *err)
{
    const iv_ops *ops = m->ops;
    if (n <= 0) return iv_errf(err, IV_E_INVALID, "no audio clips");
    int64_t N = 0;
    for (int i = 0; i < n; i++) {
        if (!clips[i].features || clips[i].n_frames <= 0 || clips[i].n_mels != a->raw_frame)
            return iv_errf(err, IV_E_INVALID, "audio clip %d: %d frames of %d samples (the embedder takes frames of "
                                              "%d, at least one)",
                           i, clips[i].n_frames, clips[i].n_mels, a->raw_frame);
        if (clips[i].n_frames > (1 << 24) - N) return iv_errf(err, IV_E_TOO_LARGE, "too many audio frames");
        N += clips[i].n_frames;
    }
    const int64_t D = a->raw_frame;
    float *host = iv_arena_alloc(mem->host, (size_t)(N * D) * sizeof(float));
    if (!host) return iv_errf(err, IV_E_NOMEM, "out of memory for %lld audio frames", (long long)N);
    for (int i = 0, r = 0; i < n; r += clips[i].n_frames, i++)
        memcpy(host + (int64_t)r * D, clips[i].features, (size_t)((int64_t)clips[i].n_frames * D) * sizeof(float));
    const iv_view x = iv_act_alloc(ops, mem->dev, N, D, iv_ops_act_stride(ops, D));
    *tokens = iv_act_alloc(ops, mem->dev, N, a->text_hidden, a->text_hidden);
    if (!x.data || !tokens->data || iv_ops_upload_f32(ops, x, host, mem->host))
        return iv_errf(err, IV_E_NOMEM, "out of device memory for %lld audio frames", (long long)N);
    ops->rms_norm(ops, x, x, NULL, NULL, a->embed_eps, 0.0f);
    ops->linear(ops, *tokens, x, a->embed_w, NULL, IV_ACT_NONE, NULL);
    return 0;
}
