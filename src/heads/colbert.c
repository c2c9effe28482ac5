#include <float.h>
/* Multi-vector (ColBERT) settings and output; see colbert.h. The rules
 * follow colbert-ai (colbert/modeling/colbert.py and tokenization/) and PyLate
 * (pylate/models/colbert.py), read from their public code:
 * - colbert-ai's skiplist is the first token id of each string.punctuation
 *   symbol encoded without special tokens, and documents also drop the pad
 *   id; PyLate's is convert_tokens_to_ids(word) of skiplist_words (unknown
 *   words give the unknown token's id), and only padding is dropped.
 * - Both insert the query marker at position 1 and pad queries with the mask
 *   token, attention_mask 0 on that padding unless attend_to_mask_tokens /
 *   attend_to_expansion_tokens. */
#include "heads/colbert.h"

#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/json.h"

/* Python's string.punctuation, the default skiplist of both libraries. */
static const char k_punctuation[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/* The tokens the rules need, resolved once. */
typedef struct special_ids {
    int32_t unk, pad, mask, eos;
} special_ids;

/* A special token named in tokenizer_config.json (a string, or an object
 * with "content"), else the first fallback the vocabulary has; -1 if none. */
static int32_t special_id(const cJSON *tcfg, const char *key, const char *const *fallbacks, const iv_tokenizer *tok)
{
    const cJSON *v = tcfg ? iv_json_get(tcfg, key) : NULL;
    const char *name = cJSON_IsString(v) ? v->valuestring : cJSON_IsObject(v) ? iv_json_str(v, "content", NULL) : NULL;
    if (name) return iv_tokenizer_token_to_id(tok, name);
    for (; *fallbacks; fallbacks++) {
        int32_t id = iv_tokenizer_token_to_id(tok, *fallbacks);
        if (id >= 0) return id;
    }
    return -1;
}

static int load_special_ids(special_ids *s, const char *model_dir, const iv_model *m, const iv_tokenizer *tok,
                            iv_err *err)
{
    char path[4096];
    cJSON *tcfg = NULL;
    iv_path_join(path, sizeof path, model_dir, "tokenizer_config.json");
    if (iv_file_exists(path) && iv_json_load_file(path, 16u << 20, &tcfg, err)) return -1;
    static const char *const unk[] = {"[UNK]", "<unk>", NULL}, *const pad[] = {"[PAD]", "<pad>", NULL},
                             *const mask[] = {"[MASK]", "<mask>", NULL}, *const eos[] = {"</s>", NULL};
    s->unk = special_id(tcfg, "unk_token", unk, tok);
    s->pad = special_id(tcfg, "pad_token", pad, tok);
    if (s->pad < 0) s->pad = m->cfg.pad_token_id;
    s->mask = special_id(tcfg, "mask_token", mask, tok);
    s->eos = special_id(tcfg, "eos_token", eos, tok);
    cJSON_Delete(tcfg);
    return 0;
}

/* transformers' convert_tokens_to_ids: unknown tokens map to the unknown token. */
static int32_t token_or_unk(const iv_tokenizer *tok, const special_ids *s, const char *token)
{
    int32_t id = iv_tokenizer_token_to_id(tok, token);
    return id >= 0 ? id : s->unk;
}

static int add_skip(iv_colbert *c, int32_t id, int *cap)
{
    if (id < 0) return 0;
    if (c->n_skip == *cap) {
        int n = *cap ? *cap * 2 : 64;
        int32_t *p = realloc(c->skip, (size_t)n * sizeof *p);
        if (!p) return -1;
        c->skip = p;
        *cap = n;
    }
    c->skip[c->n_skip++] = id;
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void sort_skiplist(iv_colbert *c)
{
    if (!c->n_skip) return; /* skip may be NULL: qsort wants a real array */
    qsort(c->skip, (size_t)c->n_skip, sizeof *c->skip, cmp_i32);
    int n = 0;
    for (int i = 0; i < c->n_skip; i++)
        if (!n || c->skip[n - 1] != c->skip[i]) c->skip[n++] = c->skip[i];
    c->n_skip = n;
}

static int set_markers(iv_colbert *c, int32_t q, int32_t d, const char *q_name, iv_err *err)
{
    if (q >= 0 && q == d)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "the query and document markers are the same token (id %d): queries cannot be told from "
                       "documents",
                       q);
    if (q_name && q < 0)
        return iv_errf(err, IV_E_FORMAT, "the query marker \"%s\" is not in the vocabulary and there is no unknown token",
                       q_name);
    c->info.query_marker = q;
    c->info.doc_marker = d;
    return 0;
}

/* colbert-ai: artifact.metadata when present, its ColBERTConfig defaults otherwise. */
static int load_stanford(iv_colbert *c, const char *model_dir, const iv_model *m, const iv_tokenizer *tok,
                         const special_ids *s, iv_err *err)
{
    int64_t dim = 0, qlen = 32, dlen = 220;
    int mask_punct = 1, attend = 0;
    const char *q_name = "[unused0]", *d_name = "[unused1]";
    char path[4096];
    cJSON *meta = NULL;
    iv_path_join(path, sizeof path, model_dir, "artifact.metadata");
    if (iv_file_exists(path)) {
        if (iv_json_load_file(path, 16u << 20, &meta, err)) return -1;
        if (!cJSON_IsObject(meta)) {
            cJSON_Delete(meta);
            return iv_errf(err, IV_E_FORMAT, "%s: must be a JSON object", path);
        }
        if (iv_json_int_chk(meta, "dim", 0, &dim, path, err) ||
            iv_json_int_chk(meta, "query_maxlen", qlen, &qlen, path, err) ||
            iv_json_int_chk(meta, "doc_maxlen", dlen, &dlen, path, err) ||
            iv_json_bool_chk(meta, "mask_punctuation", mask_punct, &mask_punct, path, err) ||
            iv_json_bool_chk(meta, "attend_to_mask_tokens", attend, &attend, path, err)) {
            cJSON_Delete(meta);
            return -1;
        }
        q_name = iv_json_str(meta, "query_token_id", q_name);
        d_name = iv_json_str(meta, "doc_token_id", d_name);
    }
    const iv_head *proj = &m->token_proj;
    int rc = 0;
    if (dim && dim != proj->out_dim)
        rc = iv_errf(err, IV_E_FORMAT, "%s: dim %lld but linear.weight projects to %d", path, (long long)dim,
                     proj->out_dim);
    else if (qlen <= 0 || qlen > INT_MAX || dlen <= 0 || dlen > INT_MAX)
        rc = iv_errf(err, IV_E_FORMAT, "%s: query_maxlen and doc_maxlen must be positive", path);
    if (!rc) rc = set_markers(c, token_or_unk(tok, s, q_name), token_or_unk(tok, s, d_name), q_name, err);
    cJSON_Delete(meta);
    if (rc) return -1;

    c->layout = IV_COLBERT_STANFORD;
    c->proj = proj;
    c->info.dim = proj->out_dim;
    c->info.query_maxlen = (int)qlen;
    c->info.doc_maxlen = (int)dlen;
    c->info.query_expansion = 1;
    c->info.attend_to_mask = attend;
    c->pad_id = s->pad;
    int cap = 0;
    for (const char *p = k_punctuation; mask_punct && *p; p++) {
        iv_encoding enc;
        iv_encode_opts eo = iv_encode_opts_default();
        eo.add_special_tokens = 0;
        if (iv_tokenizer_encode(tok, p, 1, NULL, 0, &eo, &enc, err)) return iv_err_prefix(err, "skiplist: ");
        rc = enc.len > 0 ? add_skip(c, enc.ids[0], &cap) : 0;
        iv_encoding_free(&enc);
        if (rc) return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    return 0;
}

static int load_pylate(iv_colbert *c, const iv_st_meta *meta, int H, const iv_tokenizer *tok, const special_ids *s,
                       iv_err *err)
{
    const iv_st_pylate *p = &meta->pylate;
    if (iv_st_dense_load_token_level(&c->dense, meta, H, err)) return -1;
    if (!c->dense.n)
        return iv_errf(err, IV_E_UNSUPPORTED, "PyLate ColBERT checkpoint without a Dense module: no projection to apply");
    int32_t q = p->query_prefix[0] ? token_or_unk(tok, s, p->query_prefix) : -1;
    int32_t d = p->document_prefix[0] ? token_or_unk(tok, s, p->document_prefix) : -1;
    if (set_markers(c, q, d, p->query_prefix[0] ? p->query_prefix : NULL, err)) return -1;
    c->layout = IV_COLBERT_PYLATE;
    c->info.dim = c->dense.out_dim;
    c->info.query_maxlen = p->query_length;
    c->info.doc_maxlen = p->document_length;
    c->info.query_expansion = p->do_query_expansion;
    c->info.attend_to_mask = p->attend_to_expansion_tokens;
    c->pad_id = -1; /* PyLate drops only padding, which packed batches do not have */
    int cap = 0;
    char one[2] = {0, 0};
    const int n = p->n_skiplist >= 0 ? p->n_skiplist : (int)strlen(k_punctuation);
    for (int i = 0; i < n; i++) {
        const char *w = p->n_skiplist >= 0 ? p->skiplist_words[i] : (one[0] = k_punctuation[i], one);
        if (add_skip(c, token_or_unk(tok, s, w), &cap)) return iv_errf(err, IV_E_NOMEM, "out of memory");
    }
    return 0;
}

/* Checkpoints made for both libraries (config HF_ColBERT plus PyLate
 * modules) must hold one projection: the same single bias-free Dense. */
static int check_same_projection(const iv_colbert *c, const iv_st_meta *meta, int H, iv_err *err)
{
    iv_st_dense_stack d;
    if (iv_st_dense_load_token_level(&d, meta, H, err)) {
        iv_st_dense_free(&d);
        return -1;
    }
    const iv_tensor *lin = c->proj->steps[0].w;
    int same = d.n == 1 && !d.b[0] && d.act[0] == IV_ACT_NONE && !c->proj->steps[0].b &&
               d.w[0]->shape[0] == lin->shape[0] && d.w[0]->shape[1] == lin->shape[1] &&
               !memcmp(d.w[0]->data, lin->data, (size_t)iv_tensor_numel(lin) * sizeof(float));
    iv_st_dense_free(&d);
    if (!same)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "checkpoint has both HF_ColBERT's linear.weight and PyLate Dense modules, and they differ: "
                       "ambiguous projection");
    return 0;
}

static int pylate_or_dense(const iv_st_meta *meta)
{
    return meta->pylate.present || meta->n_dense > 0;
}

int iv_colbert_load(iv_colbert *c, const char *model_dir, const iv_model *m, const iv_st_meta *meta,
                    const iv_tokenizer *tok, iv_err *err)
{
    memset(c, 0, sizeof *c);
    c->info.query_marker = c->info.doc_marker = c->info.mask_id = c->pad_id = -1;
    c->norm_eps = 1e-12f; /* F.normalize */
    const char *type = m->cfg.model_type;
    if (!strcmp(type, "colqwen3") || !strcmp(type, "qwen3_vl_nemotron_embed")) {
        if (pylate_or_dense(meta))
            return iv_errf(err, IV_E_UNSUPPORTED,
                           "%s checkpoint with sentence-transformers Dense / PyLate modules: ambiguous projection", type);
        c->layout = IV_COLBERT_VLM;
        c->proj = m->token_proj.n_steps ? &m->token_proj : NULL;
        c->info.dim = c->proj ? c->proj->out_dim : iv_model_out_width(m);
        /* ColQwen3 divides by norm.clamp_min(finfo(float32).eps). */
        if (c->proj) c->norm_eps = FLT_EPSILON;
        return 0;
    }
    const int stanford = m->token_proj.n_steps > 0, pylate = meta->pylate.present;
    if (!stanford && !pylate) return 0;
    if (!tok)
        return iv_errf(err, IV_E_UNSUPPORTED,
                       "multi-vector (ColBERT) model without tokenizer.json: its punctuation skiplist and query "
                       "marker are tokens");
    special_ids s;
    if (load_special_ids(&s, model_dir, m, tok, err)) return -1;
    const int H = iv_model_out_width(m);
    int rc;
    if (stanford) {
        c->proj = &m->token_proj;
        rc = (pylate && check_same_projection(c, meta, H, err)) || load_stanford(c, model_dir, m, tok, &s, err);
    } else {
        rc = load_pylate(c, meta, H, tok, &s, err);
    }
    if (rc) {
        iv_colbert_free(c);
        return -1;
    }
    /* PyLate pads queries with [MASK], or EOS for models without one. */
    c->info.mask_id = s.mask >= 0 ? s.mask : c->layout == IV_COLBERT_PYLATE ? s.eos : -1;
    sort_skiplist(c);
    return 0;
}

void iv_colbert_free(iv_colbert *c)
{
    iv_st_dense_free(&c->dense);
    free(c->skip);
    memset(c, 0, sizeof *c);
}

int iv_colbert_is_query(const iv_colbert *c, const int32_t *ids, int len)
{
    return c->info.query_marker >= 0 && len > 1 && ids[1] == c->info.query_marker;
}

int iv_colbert_key_mask(const iv_colbert *c, const int32_t *ids, int len, uint8_t *mask)
{
    if (c->info.attend_to_mask || c->info.mask_id < 0 || !iv_colbert_is_query(c, ids, len)) return 0;
    int start = len;
    while (start > 2 && ids[start - 1] == c->info.mask_id) start--;
    if (start == len) return 0;
    memset(mask, 1, (size_t)start);
    memset(mask + start, 0, (size_t)(len - start));
    return 1;
}

static int skipped(const iv_colbert *c, int32_t id)
{
    if (id == c->pad_id) return 1;
    return c->n_skip && bsearch(&id, c->skip, (size_t)c->n_skip, sizeof *c->skip, cmp_i32) != NULL;
}

int iv_colbert_apply(const iv_colbert *c, const iv_ops *ops, const iv_batch *b, iv_view hidden, float *out,
                     int *rows, const iv_fwd_mem *mem)
{
    const int dim = c->info.dim;
    const int64_t T = b->n_tokens;
    /* The projection runs on the device; skipping and normalising run on
     * the host over the one download of the projected tokens. */
    iv_view pv = {0};
    int rc = c->proj                        ? iv_head_apply(ops, c->proj, hidden, mem->dev, &pv)
             : c->layout == IV_COLBERT_VLM ? (pv = hidden, 0)
                                            : iv_st_dense_apply(ops, &c->dense, hidden, mem->dev, &pv);
    float *proj = iv_arena_alloc(mem->host, (size_t)(T * dim) * sizeof(float));
    if (rc || !proj) return -1;
    iv_ops_download_f32(ops, pv, proj);
    float *dst = out;
    for (int s = 0; s < b->n_seqs; s++) {
        const int32_t start = b->cu_seqlens[s], len = iv_batch_seqlen(b, s);
        const int query = iv_colbert_is_query(c, b->ids + start, len);
        rows[s] = 0;
        for (int32_t t = start; t < start + len; t++) {
            if (!query && skipped(c, b->ids[t])) continue;
            const float *v = proj + (int64_t)t * dim;
            double ss = 0;
            for (int i = 0; i < dim; i++) ss += (double)v[i] * v[i];
            /* F.normalize: x / max(||x||, 1e-12) */
            float norm = (float)sqrt(ss);
            if (norm < c->norm_eps) norm = c->norm_eps;
            for (int i = 0; i < dim; i++) dst[i] = v[i] / norm;
            dst += dim;
            rows[s]++;
        }
    }
    return 0;
}
