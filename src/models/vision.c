/* The engine's one entry for batches with images (see vision.h): the
 * checkpoint's tower decides which mixed forward runs. */
#include "models/vision.h"

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
