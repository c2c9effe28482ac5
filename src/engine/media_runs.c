#include "engine/media_runs.h"

#include <stdlib.h>
#include <string.h>

static int n_of(const iv_image_set *is) { return is ? is->n : 0; }
static int na_of(const iv_audio_set *as) { return as ? as->n : 0; }

static int64_t runs_total(const iv_image_set *is, const iv_audio_set *as)
{
    int64_t t = is ? iv_image_set_tokens(is) : 0;
    for (int i = 0; i < na_of(as); i++) t += as->run_len[i];
    return t;
}

static int count_check(const char *what, int32_t ph, int found, int n, iv_err *err)
{
    if (found == n) return 0;
    return iv_errf(err, IV_E_INVALID,
                   "the rendered input holds %d %s placeholder token(s) (id %d) for %d %s(s): the chat template must "
                   "write one per %s, and text must not contain the placeholder itself",
                   found, what, (int)ph, n, what, what);
}

int iv_media_expand(const iv_image_proc *ip, iv_image_set *is, const iv_audio_proc *ap, iv_audio_set *as,
                    const int32_t *ids, int len, int32_t **out, int *out_len, iv_err *err)
{
    *out = NULL;
    *out_len = 0;
    /* A kind with no items and no processor has no placeholder to look for. */
    const int has_img = ip && ip->model, has_aud = ap && ap->model;
    const int32_t iph = has_img ? ip->model->image_placeholder_id : -1, aph = has_aud ? ap->audio_id : -1;
    int found_i = 0, found_a = 0;
    for (int t = 0; t < len; t++) found_i += has_img && ids[t] == iph, found_a += has_aud && ids[t] == aph;
    if ((has_img || n_of(is)) && count_check("image", iph, found_i, n_of(is), err)) return -1;
    if ((has_aud || na_of(as)) && count_check("audio", aph, found_a, na_of(as), err)) return -1;
    const int64_t total = (int64_t)len - n_of(is) - na_of(as) + runs_total(is, as);
    if (total > (int64_t)1 << 30) return iv_errf(err, IV_E_TOO_LARGE, "input has too many media tokens");
    int32_t *o = malloc((size_t)(total > 0 ? total : 1) * sizeof *o);
    if (!o) return iv_errf(err, IV_E_NOMEM, "out of memory");
    int64_t w = 0;
    int ki = 0, ka = 0;
    for (int t = 0; t < len; t++) {
        int64_t start, n;
        if (has_img && ids[t] == iph) {
            n = ip->model->image_token_run(ip->model, &is->in[ki], o + w, &start);
            is->run_start[ki] = w;
            is->run_len[ki] = n;
            is->in[ki].token_offset = (int)(w + start);
            ki++;
        } else if (has_aud && ids[t] == aph) {
            n = iv_audio_token_run(ap, &as->in[ka], o + w, &start);
            as->run_start[ka] = w;
            as->run_len[ka] = n;
            as->in[ka].token_offset = (int)(w + start);
            ka++;
        } else {
            o[w] = ids[t];
            n = 1;
        }
        w += n;
    }
    *out = o;
    *out_len = (int)w;
    return 0;
}

static int in_run(const int64_t *start, const int64_t *len, int n, int64_t t)
{
    for (int i = 0; i < n; i++)
        if (t >= start[i] && t < start[i] + len[i]) return 1;
    return 0;
}

int iv_media_truncate(iv_image_set *is, iv_audio_set *as, int32_t *ids, int *len, int max, int truncate, int left,
                      iv_err *err)
{
    const int ni = n_of(is), na = na_of(as);
    const int64_t media = runs_total(is, as);
    if (*len <= max) return 0;
    const char *what = ni && na ? "media input(s)" : na ? "audio clip(s)" : "image(s)";
    if (media > max)
        return iv_errf(err, IV_E_INVALID,
                       "the %d %s of this input alone take %lld tokens, more than the limit of %d tokens "
                       "(send smaller or shorter ones, or fewer)",
                       ni + na, what, (long long)media, max);
    if (!truncate)
        return iv_errf(err, IV_E_INVALID, "input has %d tokens (%lld of them for %d %s), more than the limit of %d",
                       *len, (long long)media, ni + na, what, max);
    /* Mark the text tokens to drop, from the end (or the start), skipping runs. */
    int drop = *len - max;
    uint8_t *gone = calloc((size_t)*len, 1);
    if (!gone) return iv_errf(err, IV_E_NOMEM, "out of memory");
    for (int i = 0; i < *len && drop > 0; i++) {
        const int t = left ? i : *len - 1 - i;
        if (!(ni && in_run(is->run_start, is->run_len, ni, t)) && !(na && in_run(as->run_start, as->run_len, na, t)))
            gone[t] = 1, drop--;
    }
    int w = 0, ki = 0, ka = 0;
    for (int t = 0; t < *len; t++) {
        if (gone[t]) continue;
        if (ki < ni && t == is->run_start[ki]) {
            is->in[ki].token_offset += w - t;
            is->run_start[ki++] = w;
        }
        if (ka < na && t == as->run_start[ka]) {
            as->in[ka].token_offset += w - t;
            as->run_start[ka++] = w;
        }
        ids[w++] = ids[t];
    }
    free(gone);
    *len = w;
    return 0;
}
