#include "heads/clef_head.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heads/head_math.h"
#include "ops/ops.h"

typedef struct lin {
    iv_tensor w, b; /* w [out, in] row-major F32; b.data NULL: no bias */
    int in, out;
} lin;

typedef iv_head_ln ln;

/* nn.MultiheadAttention's packed in_proj split into the query rows and the
 * key/value rows, so a cross-attention projects each side once. */
typedef struct mha {
    lin q, kv, o;
} mha;

typedef struct route_layer {
    ln q_norm, m_norm, ff_norm;
    mha att;
    lin ff1, ff2;
} route_layer;

typedef struct dec_layer {
    ln norm1, norm2, norm3;
    mha self, cross;
    lin ff1, ff2;
} dec_layer;

struct iv_clef_head {
    iv_weights *w;
    iv_clef_head_config c;
    ln hidden_norm, summary_norm, field_norm, option_norm;
    lin mem_p, q_p, oq_p, g_p, oc_p, ol_p;
    const float *type_emb; /* [3, width] */
    route_layer *route;
    dec_layer *dec;
    lin rs1, rs2;
    float prior_scale, joint_scale, gate; /* raw parameters */
    int n_expected;                       /* tensors the file must hold */
};

static int get(iv_weights *w, const char *name, int64_t d0, int64_t d1, const iv_tensor **out, iv_err *err)
{
    const int64_t shape[2] = {d0, d1};
    return iv_weights_f32(w, name, d1 < 0 ? 1 : 2, shape, out, err);
}

static int get_lin(iv_weights *w, const char *base, int in, int out, int bias, lin *l, int *count, iv_err *err)
{
    char n[256];
    const iv_tensor *t;
    l->in = in, l->out = out;
    snprintf(n, sizeof n, "%s.weight", base);
    if (get(w, n, out, in, &t, err)) return -1;
    l->w = iv_tensor_2d(t->data, out, in);
    ++*count;
    memset(&l->b, 0, sizeof l->b);
    if (!bias) return 0;
    snprintf(n, sizeof n, "%s.bias", base);
    if (get(w, n, out, -1, &t, err)) return -1;
    l->b = iv_tensor_1d(t->data, out);
    ++*count;
    return 0;
}

static int get_ln(iv_weights *w, const char *base, int d, ln *l, int *count, iv_err *err)
{
    char n[256];
    const iv_tensor *t;
    snprintf(n, sizeof n, "%s.weight", base);
    if (get(w, n, d, -1, &t, err)) return -1;
    l->w = t->data;
    snprintf(n, sizeof n, "%s.bias", base);
    if (get(w, n, d, -1, &t, err)) return -1;
    l->b = t->data;
    *count += 2;
    return 0;
}

static int get_mha(iv_weights *w, const char *base, int d, mha *m, int *count, iv_err *err)
{
    char n[256];
    const iv_tensor *tw, *tb;
    snprintf(n, sizeof n, "%s.in_proj_weight", base);
    if (get(w, n, 3 * d, d, &tw, err)) return -1;
    snprintf(n, sizeof n, "%s.in_proj_bias", base);
    if (get(w, n, 3 * d, -1, &tb, err)) return -1;
    *count += 2;
    float *pw = tw->data, *pb = tb->data;
    m->q = (lin){.w = iv_tensor_2d(pw, d, d), .b = iv_tensor_1d(pb, d), .in = d, .out = d};
    m->kv = (lin){.w = iv_tensor_2d(pw + (size_t)d * d, 2 * d, d), .b = iv_tensor_1d(pb + d, 2 * d), .in = d, .out = 2 * d};
    snprintf(n, sizeof n, "%s.out_proj", base);
    return get_lin(w, n, d, d, 1, &m->o, count, err);
}

static int get_scalar(iv_weights *w, const char *name, float *out, int *count, iv_err *err)
{
    const iv_tensor *t;
    if (iv_weights_f32(w, name, 0, NULL, &t, err)) return -1;
    if (iv_tensor_numel(t) != 1 || t->ndim > 1)
        return iv_errf(err, IV_E_FORMAT, "%s must be a scalar", name);
    *out = *(const float *)t->data;
    ++*count;
    return 0;
}

void iv_clef_head_free(iv_clef_head *h)
{
    if (!h) return;
    free(h->route);
    free(h->dec);
    free(h);
}

int iv_clef_head_load(iv_clef_head **out, iv_weights *w, const iv_clef_head_config *cfg, iv_err *err)
{
    *out = NULL;
    const int H = cfg->hidden_size, d = cfg->width, ff = cfg->feedforward;
    iv_clef_head *h = calloc(1, sizeof *h);
    if (!h) return iv_errf(err, IV_E_NOMEM, "out of memory");
    h->w = w;
    h->c = *cfg;
    h->route = calloc((size_t)(cfg->routing_layers > 0 ? cfg->routing_layers : 1), sizeof *h->route);
    h->dec = calloc((size_t)(cfg->layers > 0 ? cfg->layers : 1), sizeof *h->dec);
    if (!h->route || !h->dec) {
        iv_clef_head_free(h);
        return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    int n = 0, rc = 0;
    const iv_tensor *te;
    rc = get_ln(w, "hidden_norm", H, &h->hidden_norm, &n, err);
    if (!rc) rc = get_lin(w, "memory_projection", H, d, 0, &h->mem_p, &n, err);
    if (!rc) rc = get_lin(w, "question_projection", H, d, 0, &h->q_p, &n, err);
    if (!rc) rc = get_lin(w, "option_question_projection", H, d, 0, &h->oq_p, &n, err);
    if (!rc) rc = get_lin(w, "global_projection", H, d, 0, &h->g_p, &n, err);
    if (!rc) rc = get_lin(w, "option_context_projection", H, d, 0, &h->oc_p, &n, err);
    if (!rc) rc = get_lin(w, "option_lexical_projection", H, d, 0, &h->ol_p, &n, err);
    if (!rc && !(rc = get(w, "type_embedding.weight", 3, d, &te, err))) h->type_emb = te->data, n++;
    char p[128], q[192];
    for (int i = 0; i < cfg->routing_layers && !rc; i++) {
        route_layer *L = &h->route[i];
        snprintf(p, sizeof p, "evidence_layers.%d", i);
#define SUB(s) (snprintf(q, sizeof q, "%s.%s", p, s), q)
        rc = get_ln(w, SUB("query_norm"), d, &L->q_norm, &n, err);
        if (!rc) rc = get_ln(w, SUB("memory_norm"), d, &L->m_norm, &n, err);
        if (!rc) rc = get_ln(w, SUB("feedforward_norm"), d, &L->ff_norm, &n, err);
        if (!rc) rc = get_mha(w, SUB("attention"), d, &L->att, &n, err);
        if (!rc) rc = get_lin(w, SUB("feedforward.0"), d, ff, 1, &L->ff1, &n, err);
        if (!rc) rc = get_lin(w, SUB("feedforward.3"), ff, d, 1, &L->ff2, &n, err);
    }
    if (!rc) rc = get_ln(w, "option_summary_norm", d, &h->summary_norm, &n, err);
    for (int i = 0; i < cfg->layers && !rc; i++) {
        dec_layer *L = &h->dec[i];
        snprintf(p, sizeof p, "layers.%d", i);
        rc = get_ln(w, SUB("norm1"), d, &L->norm1, &n, err);
        if (!rc) rc = get_ln(w, SUB("norm2"), d, &L->norm2, &n, err);
        if (!rc) rc = get_ln(w, SUB("norm3"), d, &L->norm3, &n, err);
        if (!rc) rc = get_mha(w, SUB("self_attn"), d, &L->self, &n, err);
        if (!rc) rc = get_mha(w, SUB("multihead_attn"), d, &L->cross, &n, err);
        if (!rc) rc = get_lin(w, SUB("linear1"), d, ff, 1, &L->ff1, &n, err);
        if (!rc) rc = get_lin(w, SUB("linear2"), ff, d, 1, &L->ff2, &n, err);
#undef SUB
    }
    if (!rc) rc = get_ln(w, "field_norm", d, &h->field_norm, &n, err);
    if (!rc) rc = get_ln(w, "option_norm", d, &h->option_norm, &n, err);
    if (!rc) rc = get_lin(w, "residual_scorer.0", 4 * d, d, 1, &h->rs1, &n, err);
    if (!rc) rc = get_lin(w, "residual_scorer.3", d, 1, 1, &h->rs2, &n, err);
    if (!rc) rc = get_scalar(w, "prior_logit_scale", &h->prior_scale, &n, err);
    if (!rc) rc = get_scalar(w, "joint_logit_scale", &h->joint_scale, &n, err);
    if (!rc) rc = get_scalar(w, "residual_gate", &h->gate, &n, err);
    /* load_state_dict(strict=True): nothing more in the file than the modules read. */
    if (!rc && iv_weights_count(w) != n) {
        const char *extra = "?";
        for (int i = 0; i < iv_weights_count(w); i++) {
            const char *name = iv_weights_name(w, i);
            int known = !strncmp(name, "evidence_layers.", 16) || !strncmp(name, "layers.", 7);
            if (known) {
                const int layer = atoi(name + (name[0] == 'e' ? 16 : 7));
                known = layer < (name[0] == 'e' ? cfg->routing_layers : cfg->layers);
            }
            if (!known) {
                char probe[300];
                snprintf(probe, sizeof probe, "%s", name);
                /* top-level names read above */
                static const char *const top[] = {"hidden_norm.", "memory_projection.", "question_projection.",
                                                  "option_question_projection.", "global_projection.",
                                                  "option_context_projection.", "option_lexical_projection.",
                                                  "type_embedding.", "option_summary_norm.", "field_norm.",
                                                  "option_norm.", "residual_scorer.", "prior_logit_scale",
                                                  "joint_logit_scale", "residual_gate", NULL};
                for (int k = 0; top[k] && !known; k++) known = !strncmp(probe, top[k], strlen(top[k]));
            }
            if (!known) {
                extra = name;
                break;
            }
        }
        rc = iv_errf(err, IV_E_UNSUPPORTED,
                     "joint_head.safetensors holds %d tensors, the head of joint_head_config.json has %d (e.g. \"%.80s\" "
                     "is not one of them)",
                     iv_weights_count(w), n, extra);
    }
    if (rc) {
        iv_err_prefix(err, "Clef head: ");
        iv_clef_head_free(h);
        return -1;
    }
    h->n_expected = n;
    *out = h;
    return 0;
}

/* y [n, out] = x [n, in] W^T + b through the CPU op table. */
static void linear(const lin *l, const float *x, int n, float *y)
{
    const iv_ops *ops = iv_cpu_ops();
    ops->linear(ops, iv_view_make(y, IV_F32, n, l->out, l->out), iv_view_make((void *)x, IV_F32, n, l->in, l->in), &l->w,
                l->b.data ? &l->b : NULL, IV_ACT_NONE, NULL);
}

/* out [nq, d] = MHA(q_in [nq, d], kv_in [nk, d]) with no mask. */
static int attention(const mha *m, int heads, const float *q_in, int nq, const float *kv_in, int nk, int d, float *out)
{
    const int hd = d / heads;
    float *q = malloc(sizeof(float) * (size_t)nq * d), *kv = malloc(sizeof(float) * (size_t)nk * 2 * d);
    float *ctx = malloc(sizeof(float) * (size_t)nq * d), *s = malloc(sizeof(float) * (size_t)nk);
    if (!q || !kv || !ctx || !s) {
        free(q), free(kv), free(ctx), free(s);
        return -1;
    }
    linear(&m->q, q_in, nq, q);
    linear(&m->kv, kv_in, nk, kv);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int r = 0; r < nq; r++)
        for (int hh = 0; hh < heads; hh++) {
            const float *qr = q + (size_t)r * d + hh * hd;
            float mx = -INFINITY;
            for (int j = 0; j < nk; j++) {
                const float *k = kv + (size_t)j * 2 * d + hh * hd;
                float dot = 0;
                for (int i = 0; i < hd; i++) dot += qr[i] * k[i];
                s[j] = dot * scale;
                mx = s[j] > mx ? s[j] : mx;
            }
            double sum = 0;
            for (int j = 0; j < nk; j++) sum += s[j] = expf(s[j] - mx);
            float *c = ctx + (size_t)r * d + hh * hd;
            for (int i = 0; i < hd; i++) c[i] = 0;
            for (int j = 0; j < nk; j++) {
                const float *v = kv + (size_t)j * 2 * d + d + hh * hd;
                const float pj = (float)(s[j] / sum);
                for (int i = 0; i < hd; i++) c[i] += pj * v[i];
            }
        }
    linear(&m->o, ctx, nq, out);
    free(q), free(kv), free(ctx), free(s);
    return 0;
}

/* x [n, d] += W2 gelu(W1 LN(x)) + b. */
static int feedforward(const ln *norm, const lin *ff1, const lin *ff2, float *x, int n, int d)
{
    float *a = malloc(sizeof(float) * (size_t)n * d), *t = malloc(sizeof(float) * (size_t)n * ff1->out);
    float *y = malloc(sizeof(float) * (size_t)n * d);
    if (!a || !t || !y) {
        free(a), free(t), free(y);
        return -1;
    }
    iv_head_layer_norm(norm, x, n, d, a);
    linear(ff1, a, n, t);
    for (size_t i = 0; i < (size_t)n * ff1->out; i++) t[i] = iv_head_gelu(t[i]);
    linear(ff2, t, n, y);
    for (size_t i = 0; i < (size_t)n * d; i++) x[i] += y[i];
    free(a), free(t), free(y);
    return 0;
}

static double dot(const float *a, const float *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* Mean of rows [a, b) of x [*, n] into y. */
static void span_mean(const float *x, int a, int b, int n, float *y)
{
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int r = a; r < b; r++) s += x[(size_t)r * n + i];
        y[i] = (float)(s / (b - a));
    }
}

int iv_clef_head_run(const iv_clef_head *h, const float *hidden, const int32_t *ids, int len, const float *out_emb,
                     int64_t n_vocab, const iv_clef_question *qs, int n_questions, float *logits, iv_err *err)
{
    const int H = h->c.hidden_size, d = h->c.width, heads = h->c.heads;
    int n_opt = 0;
    for (int i = 0; i < n_questions; i++) {
        const iv_clef_question *q = &qs[i];
        if (q->q0 < 0 || q->q0 >= q->q1 || q->q1 > len || q->n_options < 1)
            return iv_errf(err, IV_E_INVALID, "Clef head: question %d has an invalid span", i);
        for (int o = 0; o < q->n_options; o++)
            if (q->o0[o] < 0 || q->o0[o] >= q->o1[o] || q->o1[o] > len)
                return iv_errf(err, IV_E_INVALID, "Clef head: option %d of question %d has an invalid span", o, i);
        n_opt += q->n_options;
    }
    for (int t = 0; t < len; t++)
        if (ids[t] < 0 || ids[t] >= n_vocab) return iv_errf(err, IV_E_INVALID, "Clef head: token id out of range");
    const size_t LH = (size_t)len * H, Ld = (size_t)len * d;
    float *seq = malloc(sizeof(float) * LH), *mem = malloc(sizeof(float) * Ld), *mem_n = malloc(sizeof(float) * Ld);
    float *qv = malloc(sizeof(float) * (size_t)n_questions * H), *ctx = malloc(sizeof(float) * (size_t)n_opt * H);
    float *lex = malloc(sizeof(float) * (size_t)n_opt * H), *r = malloc(sizeof(float) * (size_t)n_opt * d);
    float *t1 = malloc(sizeof(float) * (size_t)(n_opt > n_questions ? n_opt : n_questions) * 4 * d);
    float *t2 = malloc(sizeof(float) * (size_t)(n_opt > n_questions ? n_opt : n_questions) * 4 * d);
    float *base = malloc(sizeof(float) * (size_t)n_questions * d), *f = malloc(sizeof(float) * (size_t)n_questions * d);
    float *gp = malloc(sizeof(float) * (size_t)d), *anchor = malloc(sizeof(float) * (size_t)H);
    int *owner = malloc(sizeof(int) * (size_t)n_opt);
    int rc = -1;
    if (!seq || !mem || !mem_n || !qv || !ctx || !lex || !r || !t1 || !t2 || !base || !f || !gp || !anchor || !owner)
        goto done;
    iv_head_layer_norm(&h->hidden_norm, hidden, len, H, seq);
    linear(&h->mem_p, seq, len, mem);
    const float *glob = seq + (size_t)(len - 1) * H;
    /* Spans: the question vectors, each option's context and lexical vectors. */
    int k = 0;
    for (int i = 0; i < n_questions; i++) {
        const iv_clef_question *q = &qs[i];
        span_mean(seq, q->q0, q->q1, H, qv + (size_t)i * H);
        for (int o = 0; o < q->n_options; o++, k++) {
            owner[k] = i;
            span_mean(seq, q->o0[o], q->o1[o], H, ctx + (size_t)k * H);
            float *lx = lex + (size_t)k * H;
            for (int c = 0; c < H; c++) {
                double s = 0;
                for (int t = q->o0[o]; t < q->o1[o]; t++) s += out_emb[(size_t)ids[t] * H + c];
                lx[c] = (float)(s / (q->o1[o] - q->o0[o]));
            }
        }
    }
    /* Option queries: W_oc ctx + W_ol lex + W_oq q_owner. */
    linear(&h->oc_p, ctx, n_opt, r);
    linear(&h->ol_p, lex, n_opt, t1);
    linear(&h->oq_p, qv, n_questions, t2);
    for (int o = 0; o < n_opt; o++)
        for (int c = 0; c < d; c++) r[(size_t)o * d + c] += t1[(size_t)o * d + c] + t2[(size_t)owner[o] * d + c];
    for (int l = 0; l < h->c.routing_layers; l++) {
        const route_layer *L = &h->route[l];
        iv_head_layer_norm(&L->m_norm, mem, len, d, mem_n);
        iv_head_layer_norm(&L->q_norm, r, n_opt, d, t1);
        if (attention(&L->att, heads, t1, n_opt, mem_n, len, d, t2)) goto done;
        for (size_t i = 0; i < (size_t)n_opt * d; i++) r[i] += t2[i];
        if (feedforward(&L->ff_norm, &L->ff1, &L->ff2, r, n_opt, d)) goto done;
    }
    /* Fields: base + LN(routing summary of the options) + W_g global + type. */
    linear(&h->q_p, qv, n_questions, base);
    linear(&h->g_p, glob, 1, gp);
    k = 0;
    for (int i = 0; i < n_questions; i++) {
        const int no = qs[i].n_options;
        const float *bi = base + (size_t)i * d, *ri = r + (size_t)k * d;
        double mx = -INFINITY, sum = 0;
        double *w = malloc(sizeof(double) * (size_t)no);
        if (!w) goto done;
        for (int o = 0; o < no; o++) {
            w[o] = (float)(dot(ri + (size_t)o * d, bi, d) / sqrt((double)d));
            mx = w[o] > mx ? w[o] : mx;
        }
        for (int o = 0; o < no; o++) sum += w[o] = exp(w[o] - mx);
        float *s = t1 + (size_t)i * d;
        for (int c = 0; c < d; c++) {
            double acc = 0;
            for (int o = 0; o < no; o++) acc += w[o] / sum * ri[(size_t)o * d + c];
            s[c] = (float)acc;
        }
        free(w);
        k += no;
    }
    iv_head_layer_norm(&h->summary_norm, t1, n_questions, d, t2);
    for (int i = 0; i < n_questions; i++) {
        const int type = qs[i].type >= 0 && qs[i].type < 3 ? qs[i].type : 0;
        for (int c = 0; c < d; c++)
            f[(size_t)i * d + c] =
                base[(size_t)i * d + c] + t2[(size_t)i * d + c] + gp[c] + h->type_emb[(size_t)type * d + c];
    }
    /* nn.TransformerDecoderLayer, norm_first: self-attention over the fields,
     * cross-attention to the (unnormalised) memory, GELU feedforward. */
    for (int l = 0; l < h->c.layers; l++) {
        const dec_layer *L = &h->dec[l];
        iv_head_layer_norm(&L->norm1, f, n_questions, d, t1);
        if (attention(&L->self, heads, t1, n_questions, t1, n_questions, d, t2)) goto done;
        for (size_t i = 0; i < (size_t)n_questions * d; i++) f[i] += t2[i];
        iv_head_layer_norm(&L->norm2, f, n_questions, d, t1);
        if (attention(&L->cross, heads, t1, n_questions, mem, len, d, t2)) goto done;
        for (size_t i = 0; i < (size_t)n_questions * d; i++) f[i] += t2[i];
        if (feedforward(&L->norm3, &L->ff1, &L->ff2, f, n_questions, d)) goto done;
    }
    iv_head_layer_norm(&h->field_norm, f, n_questions, d, t1);
    memcpy(f, t1, sizeof(float) * (size_t)n_questions * d);
    /* Logits. */
    iv_head_layer_norm(&h->option_norm, r, n_opt, d, t2); /* t2: normalised options */
    const double cap = log(100.0);
    const double prior_scale = exp(h->prior_scale < cap ? h->prior_scale : cap);
    const double joint_scale = exp(h->joint_scale < cap ? h->joint_scale : cap);
    const double gate = 1.0 / (1.0 + exp(-(double)h->gate));
    float *feat = malloc(sizeof(float) * (size_t)4 * d), *hid = malloc(sizeof(float) * (size_t)d);
    if (!feat || !hid) {
        free(feat), free(hid);
        goto done;
    }
    k = 0;
    for (int i = 0; i < n_questions; i++) {
        const float *fi = f + (size_t)i * d;
        for (int c = 0; c < H; c++) anchor[c] = qv[(size_t)i * H + c] + glob[c];
        const double an = sqrt(dot(anchor, anchor, H)), fn = sqrt(dot(fi, fi, d));
        for (int o = 0; o < qs[i].n_options; o++, k++) {
            const float *lx = lex + (size_t)k * H, *on = t2 + (size_t)k * d;
            const double ln_ = sqrt(dot(lx, lx, H)), onn = sqrt(dot(on, on, d));
            /* F.normalize: x / max(|x|, 1e-12); cosine_similarity: eps 1e-8. */
            const double prior = prior_scale * dot(lx, anchor, H) / ((ln_ > 1e-12 ? ln_ : 1e-12) * (an > 1e-12 ? an : 1e-12));
            const double cosv = dot(fi, on, d) / ((fn > 1e-8 ? fn : 1e-8) * (onn > 1e-8 ? onn : 1e-8));
            for (int c = 0; c < d; c++) {
                feat[c] = fi[c];
                feat[d + c] = on[c];
                feat[2 * d + c] = fi[c] * on[c];
                feat[3 * d + c] = fabsf(fi[c] - on[c]);
            }
            float res;
            linear(&h->rs1, feat, 1, hid);
            for (int c = 0; c < d; c++) hid[c] = iv_head_gelu(hid[c]);
            linear(&h->rs2, hid, 1, &res);
            logits[k] = (float)(prior + gate * (joint_scale * cosv + res));
        }
    }
    free(feat), free(hid);
    rc = 0;
done:
    if (rc) iv_errf(err, IV_E_NOMEM, "Clef head: out of memory");
    free(seq), free(mem), free(mem_n), free(qv), free(ctx), free(lex), free(r), free(t1), free(t2), free(base), free(f);
    free(gp), free(anchor), free(owner);
    return rc;
}
