#include "models/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int load_named(iv_model *m, const char *full, int64_t d0, int64_t d1, int optional,
                      const iv_tensor **out, iv_err *err)
{
    *out = NULL;
    if (!iv_weights_find(m->weights, full)) {
        if (optional) return 0;
        return iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s\"", full);
    }
    int64_t shape[2] = {d0, d1};
    return iv_weights_f32(m->weights, full, d1 < 0 ? 1 : 2, shape, out, err);
}

static int load_rel(iv_model *m, const char *name, int64_t d0, int64_t d1, int optional,
                    const iv_tensor **out, iv_err *err)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", m->prefix, name);
    return load_named(m, full, d0, d1, optional, out, err);
}

int iv_ld(iv_model *m, const char *name, int64_t d0, int64_t d1, const iv_tensor **out, iv_err *err)
{
    return load_rel(m, name, d0, d1, 0, out, err);
}

int iv_ld_opt(iv_model *m, const char *name, int64_t d0, int64_t d1, const iv_tensor **out, iv_err *err)
{
    return load_rel(m, name, d0, d1, 1, out, err);
}

int iv_ld_top(iv_model *m, const char *name, int64_t d0, int64_t d1, const iv_tensor **out, iv_err *err)
{
    return load_named(m, name, d0, d1, 0, out, err);
}

int iv_ld_top_opt(iv_model *m, const char *name, int64_t d0, int64_t d1, const iv_tensor **out,
                  iv_err *err)
{
    return load_named(m, name, d0, d1, 1, out, err);
}

int iv_ld_table(iv_model *m, const char *name, int64_t cols, int required, const iv_tensor **out, iv_err *err)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", m->prefix, name);
    const iv_tensor *raw = iv_weights_find(m->weights, full);
    *out = NULL;
    if (!raw) return required ? iv_errf(err, IV_E_NOTFOUND, "checkpoint is missing tensor \"%s\"", full) : 0;
    if (raw->ndim != 2 || raw->shape[0] <= 0)
        return iv_errf(err, IV_E_FORMAT, "tensor \"%s\" must be a non-empty 2-D table", full);
    return load_named(m, full, raw->shape[0], cols, 0, out, err);
}

int iv_ld_layer_norm(iv_model *m, const char *base, int64_t dim, int top, iv_norm *out, iv_err *err)
{
    char w[512], b[512], full_w[600];
    const char *pre = top ? "" : m->prefix;
    out->present = 1;
    snprintf(w, sizeof w, "%s.weight", base);
    snprintf(full_w, sizeof full_w, "%s%s", pre, w);
    const int legacy = !iv_weights_find(m->weights, full_w);
    snprintf(w, sizeof w, "%s.%s", base, legacy ? "gamma" : "weight");
    snprintf(b, sizeof b, "%s.%s", base, legacy ? "beta" : "bias");
    if (top) {
        if (iv_ld_top(m, w, dim, -1, &out->w, err)) return -1;
        return iv_ld_top_opt(m, b, dim, -1, &out->b, err);
    }
    if (iv_ld(m, w, dim, -1, &out->w, err)) return -1;
    return iv_ld_opt(m, b, dim, -1, &out->b, err);
}

/* Makes room for two more owned pointers (a tensor and its data). */
static int reserve_owned(iv_model *m)
{
    if (m->n_owned + 2 > m->cap_owned) {
        int cap = m->cap_owned ? m->cap_owned * 2 : 64;
        void **n = realloc(m->owned, (size_t)cap * sizeof *n);
        if (!n) return -1;
        m->owned = n;
        m->cap_owned = cap;
    }
    return 0;
}

iv_tensor *iv_model_new_tensor(iv_model *m, int64_t d0, int64_t d1)
{
    iv_tensor *t = calloc(1, sizeof *t);
    int64_t n = d0 * (d1 < 0 ? 1 : d1);
    size_t bytes = ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    float *data = aligned_alloc(64, bytes ? bytes : 64);
    if (!t || !data || reserve_owned(m)) {
        free(t);
        free(data);
        return NULL;
    }
    m->owned[m->n_owned++] = t;
    m->owned[m->n_owned++] = data;
    t->dtype = IV_F32;
    t->device = IV_CPU;
    t->ndim = d1 < 0 ? 1 : 2;
    t->shape[0] = d0;
    t->shape[1] = d1 < 0 ? 0 : d1;
    t->data = data;
    return t;
}

void iv_model_release_data(iv_model *m, const iv_tensor *w)
{
    for (int i = 0; i + 1 < m->n_owned; i++)
        if (m->owned[i] == w && m->owned[i + 1] == w->data) {
            free(m->owned[i + 1]);
            m->owned[i + 1] = NULL;
            return;
        }
    iv_weights_release(m->weights, w);
}

void *iv_model_alloc(iv_model *m, size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p || reserve_owned(m)) {
        free(p);
        return NULL;
    }
    m->owned[m->n_owned++] = p;
    return p;
}

/* Rows [r0, r1) of an FP32 weight (or bias) as a new model-owned tensor. */
static const iv_tensor *copy_rows(iv_model *m, const iv_tensor *t, int64_t r0, int64_t r1)
{
    const int64_t cols = t->ndim > 1 ? t->shape[1] : 1;
    iv_tensor *out = iv_model_new_tensor(m, r1 - r0, t->ndim > 1 ? cols : -1);
    if (out) memcpy(out->data, (const float *)t->data + r0 * cols, (size_t)((r1 - r0) * cols) * sizeof(float));
    return out;
}

int iv_model_split_last_qkv(iv_model *m, iv_err *err)
{
    if (m->no_head_rows_reason || m->block.logn_base > 1) return 0; /* logn scales by the batch's lengths */
    iv_layer *L = &m->layers[m->n_layers - 1];
    const int64_t q_rows = (int64_t)m->block.n_heads * (L->head_dim ? L->head_dim : m->block.head_dim);
    if (!L->qkv_w || L->qkv_w->dtype != IV_F32 || L->qkv_w->ndim != 2 || L->qkv_w->shape[0] < q_rows ||
        (L->qkv_b && L->qkv_b->dtype != IV_F32))
        return 0;
    const int64_t rows = L->qkv_w->shape[0];
    if (rows == q_rows) { /* queries only (a kv_reuse layer) */
        L->q_w = L->qkv_w;
        L->q_b = L->qkv_b;
    } else {
        L->q_w = copy_rows(m, L->qkv_w, 0, q_rows);
        L->kv_w = copy_rows(m, L->qkv_w, q_rows, rows);
        L->q_b = L->qkv_b ? copy_rows(m, L->qkv_b, 0, q_rows) : NULL;
        L->kv_b = L->qkv_b ? copy_rows(m, L->qkv_b, q_rows, rows) : NULL;
        if (!L->q_w || !L->kv_w || (L->qkv_b && (!L->q_b || !L->kv_b)))
            return iv_errf(err, IV_E_NOMEM, "out of memory splitting the last layer's QKV");
        /* Only the two parts are read from now on: the fused weight is not
         * kept resident beside them (its bias is a few floats). */
        iv_model_release_data(m, L->qkv_w);
    }
    L->qkv_w = L->qkv_b = NULL;
    return 0;
}

int iv_fuse_qkv(iv_model *m, const iv_tensor *q_w, const iv_tensor *k_w, const iv_tensor *v_w,
                const iv_tensor *q_b, const iv_tensor *k_b, const iv_tensor *v_b, const iv_tensor **qkv_w,
                const iv_tensor **qkv_b, iv_err *err)
{
    const int64_t in = q_w->shape[1];
    const int64_t rows = q_w->shape[0] + k_w->shape[0] + v_w->shape[0];
    if (k_w->shape[1] != in || v_w->shape[1] != in)
        return iv_errf(err, IV_E_FORMAT, "query/key/value projections disagree on input width");
    iv_tensor *w = iv_model_new_tensor(m, rows, in);
    if (!w) return iv_errf(err, IV_E_NOMEM, "out of memory fusing QKV");
    float *dst = w->data;
    const iv_tensor *parts[3] = {q_w, k_w, v_w};
    for (int i = 0; i < 3; i++) {
        size_t n = (size_t)(parts[i]->shape[0] * in);
        memcpy(dst, parts[i]->data, n * sizeof(float));
        dst += n;
        iv_weights_release(m->weights, parts[i]); /* only the fused copy is read from now on */
    }
    *qkv_w = w;
    *qkv_b = NULL;
    if (q_b || k_b || v_b) {
        iv_tensor *b = iv_model_new_tensor(m, rows, -1);
        if (!b) return iv_errf(err, IV_E_NOMEM, "out of memory fusing QKV bias");
        float *bd = b->data;
        const iv_tensor *bp[3] = {q_b, k_b, v_b};
        for (int i = 0; i < 3; i++) {
            size_t n = (size_t)parts[i]->shape[0];
            if (bp[i]) memcpy(bd, bp[i]->data, n * sizeof(float));
            else memset(bd, 0, n * sizeof(float));
            if (bp[i]) iv_weights_release(m->weights, bp[i]);
            bd += n;
        }
        *qkv_b = b;
    }
    return 0;
}

int iv_concat_rows(iv_model *m, const iv_tensor *const *parts, int n, const iv_tensor **out, iv_err *err)
{
    const int nd = parts[0]->ndim;
    const int64_t cols = nd == 2 ? parts[0]->shape[1] : 1;
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i]->ndim != nd || (nd == 2 && parts[i]->shape[1] != cols))
            return iv_errf(err, IV_E_FORMAT, "tensors to concatenate disagree on shape");
        rows += parts[i]->shape[0];
    }
    iv_tensor *t = iv_model_new_tensor(m, rows, nd == 2 ? cols : -1);
    if (!t) return iv_errf(err, IV_E_NOMEM, "out of memory concatenating weights");
    float *dst = t->data;
    for (int i = 0; i < n; i++) {
        size_t k = (size_t)(parts[i]->shape[0] * cols);
        memcpy(dst, parts[i]->data, k * sizeof(float));
        dst += k;
        iv_weights_release(m->weights, parts[i]); /* only the concatenation is read from now on */
    }
    *out = t;
    return 0;
}

int iv_detect_prefix(iv_model *m, const char *const *candidates, const char *probe, iv_err *err)
{
    for (const char *const *c = candidates; *c; c++) {
        char full[512];
        snprintf(full, sizeof full, "%s%s", *c, probe);
        if (iv_weights_find(m->weights, full)) {
            snprintf(m->prefix, sizeof m->prefix, "%s", *c);
            return 0;
        }
    }
    return iv_errf(err, IV_E_NOTFOUND, "checkpoint has no \"%s\" under any known prefix (tried \"%s\"...)",
                   probe, candidates[0]);
}

int iv_require_architecture(const iv_model *m, const char *const *allowed, iv_err *err)
{
    for (const char *const *a = allowed; *a; a++)
        if (!strcmp(*a, m->cfg.architecture)) return 0;
    char list[1024];
    size_t off = 0;
    list[0] = 0;
    for (const char *const *a = allowed; *a && off < sizeof list - 64; a++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", off ? ", " : "", *a);
    return iv_errf(err, IV_E_UNSUPPORTED, "unsupported architecture \"%s\" for model_type \"%s\" (supported: %s)",
                   m->cfg.architecture[0] ? m->cfg.architecture : "(none)", m->cfg.model_type, list);
}
