#include "heads/laya_head.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heads/head_math.h"
#include "ops/ops.h"

typedef struct lin {
    const iv_tensor *w, *b; /* w [out, in] row-major F32 */
    int in, out;
} lin;

typedef iv_head_ln ln;

typedef struct layer {
    ln norm1, norm2;
    lin qkv, o, ff1, ff2;
} layer;

struct iv_laya_head {
    iv_weights *w;
    int d, n_layers, n_heads, n_act;
    const float *type_emb; /* [3, d] */
    layer *layers;
    ln s_norm;
    lin s1, s2, a1, a2;
};

static int get(iv_weights *w, const char *name, int64_t d0, int64_t d1, const float **out, iv_err *err)
{
    const int64_t shape[2] = {d0, d1};
    const iv_tensor *t;
    if (iv_weights_f32(w, name, d1 < 0 ? 1 : 2, shape, &t, err)) return -1;
    *out = (const float *)t->data;
    return 0;
}

static int get_t(iv_weights *w, const char *name, int64_t d0, int64_t d1, const iv_tensor **out, iv_err *err)
{
    const int64_t shape[2] = {d0, d1};
    return iv_weights_f32(w, name, d1 < 0 ? 1 : 2, shape, out, err);
}

static int get_lin(iv_weights *w, const char *base, int in, int out, lin *l, iv_err *err)
{
    char n[256];
    l->in = in, l->out = out;
    snprintf(n, sizeof n, "%s.weight", base);
    if (get_t(w, n, out, in, &l->w, err)) return -1;
    snprintf(n, sizeof n, "%s.bias", base);
    return get_t(w, n, out, -1, &l->b, err);
}

static int get_ln(iv_weights *w, const char *base, int d, ln *l, iv_err *err)
{
    char n[256];
    snprintf(n, sizeof n, "%s.weight", base);
    if (get(w, n, d, -1, &l->w, err)) return -1;
    snprintf(n, sizeof n, "%s.bias", base);
    return get(w, n, d, -1, &l->b, err);
}

int iv_laya_head_load(iv_laya_head **out, iv_weights *w, int d, int n_layers, int n_act, iv_err *err)
{
    *out = NULL;
    iv_laya_head *h = calloc(1, sizeof *h);
    if (!h) return iv_errf(err, IV_E_NOMEM, "out of memory");
    h->w = w;
    h->d = d, h->n_layers = n_layers, h->n_act = n_act;
    h->n_heads = d / 64 > 1 ? d / 64 : 1;
    if (d % h->n_heads) {
        const int nh = h->n_heads;
        iv_laya_head_free(h);
        return iv_errf(err, IV_E_FORMAT, "Laya head: hidden size %d is not a multiple of %d heads", d, nh);
    }
    h->layers = calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof *h->layers);
    if (!h->layers) {
        iv_laya_head_free(h);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    char n[256];
    int rc = get(w, "type_emb.weight", 3, d, &h->type_emb, err);
    for (int i = 0; i < n_layers && !rc; i++) {
        layer *L = &h->layers[i];
        char p[128];
        snprintf(p, sizeof p, "head.layers.%d", i);
        /* nn.MultiheadAttention's packed projection: in_proj_weight, in_proj_bias. */
        L->qkv.in = d, L->qkv.out = 3 * d;
        snprintf(n, sizeof n, "%s.self_attn.in_proj_weight", p);
        rc = get_t(w, n, 3 * d, d, &L->qkv.w, err);
        snprintf(n, sizeof n, "%s.self_attn.in_proj_bias", p);
        if (!rc) rc = get_t(w, n, 3 * d, -1, &L->qkv.b, err);
        snprintf(n, sizeof n, "%s.self_attn.out_proj", p);
        if (!rc) rc = get_lin(w, n, d, d, &L->o, err);
        snprintf(n, sizeof n, "%s.linear1", p);
        if (!rc) rc = get_lin(w, n, d, 4 * d, &L->ff1, err);
        snprintf(n, sizeof n, "%s.linear2", p);
        if (!rc) rc = get_lin(w, n, 4 * d, d, &L->ff2, err);
        snprintf(n, sizeof n, "%s.norm1", p);
        if (!rc) rc = get_ln(w, n, d, &L->norm1, err);
        snprintf(n, sizeof n, "%s.norm2", p);
        if (!rc) rc = get_ln(w, n, d, &L->norm2, err);
    }
    snprintf(n, sizeof n, "head.layers.%d.linear1.weight", n_layers);
    if (!rc && iv_weights_find(w, n))
        rc = iv_errf(err, IV_E_FORMAT, "Laya head: the checkpoint has more than head_layers = %d layers", n_layers);
    if (!rc) rc = get_ln(w, "scorer.0", d, &h->s_norm, err);
    if (!rc) rc = get_lin(w, "scorer.1", d, d, &h->s1, err);
    if (!rc) rc = get_lin(w, "scorer.3", d, 1, &h->s2, err);
    if (!rc) rc = get_lin(w, "act_head.0", d + 4, 256, &h->a1, err);
    if (!rc) rc = get_lin(w, "act_head.2", 256, n_act, &h->a2, err);
    if (rc) {
        iv_err_prefix(err, "Laya head: ");
        iv_laya_head_free(h);
        return -1;
    }
    *out = h;
    return 0;
}

void iv_laya_head_free(iv_laya_head *h)
{
    if (!h) return;
    free(h->layers);
    free(h);
}

int iv_laya_head_n_act(const iv_laya_head *h) { return h->n_act; }

/* y[r] = W x[r] + b for rows r of x [n, in] (y [n, out]): the CPU op
 * table's linear (OpenBLAS sgemm for these row-major weights). */
static void linear(const lin *l, const float *x, int n, float *y)
{
    const iv_ops *ops = iv_cpu_ops();
    ops->linear(ops, iv_view_make(y, IV_F32, n, l->out, l->out), iv_view_make((void *)x, IV_F32, n, l->in, l->in), l->w,
                l->b, IV_ACT_NONE, NULL);
}

/* One pre-norm encoder layer on x [len, d]; the queries (and the residual
 * stream written back) are only the rows in rows[n_rows] (all rows when
 * rows is NULL); x_out [n_rows, d]. */
static int run_layer(const iv_laya_head *h, const layer *L, const float *x, int len, const int *rows, int n_rows,
                     float *x_out)
{
    const int d = h->d, H = h->n_heads, hd = d / H;
    float *a = malloc(sizeof(float) * (size_t)len * d), *qkv = malloc(sizeof(float) * (size_t)len * 3 * d);
    float *ctx = malloc(sizeof(float) * (size_t)n_rows * d), *tmp = malloc(sizeof(float) * (size_t)n_rows * 4 * d);
    float *xr = malloc(sizeof(float) * (size_t)n_rows * d);
    if (!a || !qkv || !ctx || !tmp || !xr) {
        free(a), free(qkv), free(ctx), free(tmp), free(xr);
        return -1;
    }
    iv_head_layer_norm(&L->norm1, x, len, d, a);
    linear(&L->qkv, a, len, qkv);
    const float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for collapse(2) if ((long)n_rows * len * d > 1L << 18)
    for (int r = 0; r < n_rows; r++)
        for (int hh = 0; hh < H; hh++) {
            const int qr = rows ? rows[r] : r;
            const float *q = qkv + (size_t)qr * 3 * d + hh * hd;
            float *s = malloc(sizeof(float) * (size_t)len);
            if (!s) continue;
            float mx = -INFINITY;
            for (int j = 0; j < len; j++) {
                const float *k = qkv + (size_t)j * 3 * d + d + hh * hd;
                float dot = 0;
                for (int i = 0; i < hd; i++) dot += q[i] * k[i];
                s[j] = dot * scale;
                if (s[j] > mx) mx = s[j];
            }
            double sum = 0;
            for (int j = 0; j < len; j++) sum += s[j] = expf(s[j] - mx);
            float *c = ctx + (size_t)r * d + hh * hd;
            for (int i = 0; i < hd; i++) c[i] = 0;
            for (int j = 0; j < len; j++) {
                const float *v = qkv + (size_t)j * 3 * d + 2 * d + hh * hd;
                const float pj = (float)(s[j] / sum);
                for (int i = 0; i < hd; i++) c[i] += pj * v[i];
            }
            free(s);
        }
    linear(&L->o, ctx, n_rows, tmp);
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < d; i++)
            xr[(size_t)r * d + i] = x[(size_t)(rows ? rows[r] : r) * d + i] + tmp[(size_t)r * d + i];
    iv_head_layer_norm(&L->norm2, xr, n_rows, d, ctx);
    linear(&L->ff1, ctx, n_rows, tmp);
    for (size_t i = 0; i < (size_t)n_rows * 4 * d; i++) tmp[i] = tmp[i] > 0 ? tmp[i] : 0;
    linear(&L->ff2, tmp, n_rows, x_out);
    for (size_t i = 0; i < (size_t)n_rows * d; i++) x_out[i] += xr[i];
    free(a), free(qkv), free(ctx), free(tmp), free(xr);
    return 0;
}

int iv_laya_head_run(const iv_laya_head *h, const float *hidden, int len, int qtype, const int *markers, int k,
                     float *logits, float *act_probs, iv_err *err)
{
    const int d = h->d;
    for (int i = 0; i < k; i++)
        if (markers[i] < 0 || markers[i] >= len) return iv_errf(err, IV_E_INVALID, "Laya head: marker out of range");
    /* Rows read after the last layer: [CLS] (the act head) then the markers. */
    const int n_rows = k + 1;
    int *rows = malloc(sizeof(int) * (size_t)n_rows);
    float *x = malloc(sizeof(float) * (size_t)len * d), *y = malloc(sizeof(float) * (size_t)len * d);
    int rc = -1;
    if (!rows || !x || !y) goto done;
    rows[0] = 0;
    memcpy(rows + 1, markers, sizeof(int) * (size_t)k);
    for (int r = 0; r < len; r++)
        for (int i = 0; i < d; i++) x[(size_t)r * d + i] = hidden[(size_t)r * d + i] + h->type_emb[qtype * d + i];
    if (h->n_layers == 0) {
        for (int r = 0; r < n_rows; r++) memcpy(y + (size_t)r * d, x + (size_t)rows[r] * d, sizeof(float) * d);
    }
    for (int l = 0; l < h->n_layers; l++) {
        const int last = l == h->n_layers - 1;
        if (run_layer(h, &h->layers[l], x, len, last ? rows : NULL, last ? n_rows : len, y)) goto done;
        if (!last) {
            float *t = x;
            x = y, y = t;
        }
    }
    /* y: [n_rows, d] final rows. Scorer on the markers. */
    float *a = x; /* reuse: at least n_rows * 2d floats fit (len >= n_rows... checked below) */
    float *t1 = malloc(sizeof(float) * (size_t)n_rows * d);
    if (!t1) goto done;
    iv_head_layer_norm(&h->s_norm, y, n_rows, d, a);
    linear(&h->s1, a, n_rows, t1);
    for (size_t i = 0; i < (size_t)n_rows * d; i++) t1[i] = iv_head_gelu(t1[i]);
    float *sc = malloc(sizeof(float) * (size_t)n_rows);
    if (!sc) {
        free(t1);
        goto done;
    }
    linear(&h->s2, t1, n_rows, sc);
    for (int i = 0; i < k; i++) logits[i] = sc[i + 1];
    free(sc);
    free(t1);
    if (act_probs) {
        /* Features from the raw (untempered) softmax, as the reference. */
        double mx = -INFINITY, sum = 0, top1 = 0, top2 = 0, ent = 0;
        for (int i = 0; i < k; i++) mx = logits[i] > mx ? logits[i] : mx;
        double *p = malloc(sizeof(double) * (size_t)k);
        if (!p) goto done;
        for (int i = 0; i < k; i++) sum += p[i] = exp((double)logits[i] - mx);
        for (int i = 0; i < k; i++) {
            p[i] /= sum;
            if (p[i] > top1) top2 = top1, top1 = p[i];
            else if (p[i] > top2) top2 = p[i];
            ent -= p[i] * log(p[i] > 1e-9 ? p[i] : 1e-9);
        }
        free(p);
        float feat[4] = {(float)top1, (float)(top1 - top2), (float)(ent / log(k > 2 ? k : 2)), k / 255.0f};
        float *in = malloc(sizeof(float) * (size_t)(d + 4)), *hid = malloc(sizeof(float) * 256);
        float *act = malloc(sizeof(float) * (size_t)h->n_act);
        if (!in || !hid || !act) {
            free(in), free(hid), free(act);
            goto done;
        }
        memcpy(in, y, sizeof(float) * d);
        memcpy(in + d, feat, sizeof feat);
        linear(&h->a1, in, 1, hid);
        for (int i = 0; i < 256; i++) hid[i] = iv_head_gelu(hid[i]);
        linear(&h->a2, hid, 1, act);
        double amx = -INFINITY, asum = 0;
        for (int i = 0; i < h->n_act; i++) amx = act[i] > amx ? act[i] : amx;
        for (int i = 0; i < h->n_act; i++) asum += exp((double)act[i] - amx);
        for (int i = 0; i < h->n_act; i++) act_probs[i] = (float)(exp((double)act[i] - amx) / asum);
        free(in), free(hid), free(act);
    }
    rc = 0;
done:
    if (rc) iv_errf(err, IV_E_NOMEM, "out of memory");
    free(rows);
    free(x);
    free(y);
    return rc;
}
