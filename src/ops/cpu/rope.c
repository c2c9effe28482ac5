/* Rotary position embedding, in place on the heads of q or k.
 *
 * Angles follow transformers exactly: freqs = float(pos) * inv_freq in
 * float32, then cos/sin of that float angle (also float32), multiplied by
 * attn_factor. Computing the angle in double instead would differ by up to
 * half an ulp of pos * inv_freq, i.e. ~5e-4 rad at position 8192. cos and
 * sin are computed once per token and shared by all heads. With
 * freq_section (mRoPE, 2-D vision rotary) each frequency reads its own
 * axis's position; the angle is still float(pos) * inv_freq in float32. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "ops/cpu/cpu_ops.h"

void iv_cpu_rope(const iv_ops *ops, const iv_rope_args *a)
{
    iv_view x = a->x;
    int half = a->rot_dim / 2, hd = a->head_dim, nh = a->n_heads;
    assert(a->rot_dim % 2 == 0 && a->rot_dim <= hd && x.cols >= (int64_t)nh * hd);
    if (half == 0 || x.rows == 0) return;
    float factor = a->attn_factor == 0.0f ? 1.0f : a->attn_factor;

#pragma omp parallel if (x.rows * nh * a->rot_dim >= IV_CPU_PAR_MIN)
    {
        float *cs = iv_cpu_scratch(2 * (size_t)half * sizeof(float));
        float *sn = cs + half;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < x.rows; t++) {
            for (int i = 0; i < half; i++) {
                const int64_t ax = a->freq_section ? a->freq_section[i] : 0;
                float p = (float)a->pos[ax * a->pos_axis_stride + t];
                float angle = p * a->inv_freq[i];
                cs[i] = cosf(angle) * factor;
                sn[i] = sinf(angle) * factor;
            }
            for (int h = 0; h < nh; h++) {
                float *v = ((float *)x.data) + t * x.ld + (int64_t)h * hd;
                if (a->interleaved) {
                    for (int i = 0; i < half; i++) {
                        float x1 = v[2 * i], x2 = v[2 * i + 1];
                        v[2 * i] = x1 * cs[i] - x2 * sn[i];
                        v[2 * i + 1] = x2 * cs[i] + x1 * sn[i];
                    }
                } else {
#pragma omp simd
                    for (int i = 0; i < half; i++) {
                        float x1 = v[i], x2 = v[i + half];
                        v[i] = x1 * cs[i] - x2 * sn[i];
                        v[i + half] = x2 * cs[i] + x1 * sn[i];
                    }
                }
            }
        }
        free(cs);
    }
}
