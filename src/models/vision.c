/* The engine's one entry for batches with images (see vision.h): the
 * checkpoint's tower decides which mixed forward runs. */
#include "models/vision.h"

#include "base/json.h"
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
