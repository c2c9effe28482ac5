/* The token-classification pipeline of transformers, step for step:
 * postprocess -> gather_pre_entities -> aggregate (aggregate_words /
 * aggregate_word) -> group_entities (group_sub_entities, get_tag) -> the
 * ignore_labels filter. Names below follow the Python ones so the two read
 * side by side. One chunk per text (the pipeline's `stride` is not offered). */
#include "engine/token_entities.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const agg_names[] = {"none", "simple", "first", "average", "max"};

int iv_aggregation_parse(const char *name, iv_aggregation *out)
{
    for (int i = 0; i < 5; i++)
        if (!strcasecmp(name, agg_names[i])) {
            *out = (iv_aggregation)i;
            return 0;
        }
    return -1;
}

const char *iv_aggregation_name(iv_aggregation a)
{
    return (unsigned)a < 5 ? agg_names[a] : "?";
}

/* One token (pre_entity) or one word/entity on its way through the steps. */
typedef struct ent {
    const float *scores; /* [n_labels] (pre-entities and words of average: owned copy in `own`) */
    float *own;
    int label;           /* argmax, after aggregate */
    float score;
    int index;
    char *word;
    int start, end;
    int is_subword;
} ent;

typedef struct ctx {
    const iv_engine *e;
    const iv_tokenizer *tok;
    int n_labels;
    iv_err *err;
} ctx;

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* Code points of a UTF-8 string (the text is valid UTF-8: it was encoded). */
static int cp_count(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static void free_ents(ent *v, int n)
{
    for (int i = 0; v && i < n; i++) {
        free(v[i].word);
        free(v[i].own);
    }
    free(v);
}

/* convert_tokens_to_string over the words of v[0..n). */
static char *join_words(ctx *c, const ent *v, int n)
{
    const char **w = malloc((size_t)(n ? n : 1) * sizeof *w);
    if (!w) return NULL;
    for (int i = 0; i < n; i++) w[i] = v[i].word;
    char *out = NULL;
    if (iv_tokenizer_decode_tokens(c->tok, w, NULL, n, &out, NULL, c->err)) out = NULL;
    free(w);
    return out;
}

/* aggregate_word: the tokens v[0..n) of one word. */
static int aggregate_word(ctx *c, const ent *v, int n, iv_aggregation agg, ent *out)
{
    memset(out, 0, sizeof *out);
    out->index = -1;
    out->word = join_words(c, v, n);
    if (!out->word) return -1;
    const float *s = v[0].scores;
    if (agg == IV_AGG_MAX) {
        /* max(entities, key=lambda e: e["scores"].max()): the first of the highest. */
        float best = s[argmax(s, c->n_labels)];
        for (int i = 1; i < n; i++) {
            float m = v[i].scores[argmax(v[i].scores, c->n_labels)];
            if (m > best) {
                best = m;
                s = v[i].scores;
            }
        }
    } else if (agg == IV_AGG_AVERAGE) {
        out->own = malloc((size_t)c->n_labels * sizeof(float));
        if (!out->own) return iv_errf(c->err, IV_E_NOMEM, "out of memory");
        for (int l = 0; l < c->n_labels; l++) {
            double sum = 0;
            int k = 0;
            for (int i = 0; i < n; i++)
                if (!isnan(v[i].scores[l])) {
                    sum += v[i].scores[l];
                    k++;
                }
            out->own[l] = k ? (float)(sum / k) : NAN;
        }
        s = out->own;
    }
    out->scores = s;
    out->label = argmax(s, c->n_labels);
    out->score = s[out->label];
    out->start = v[0].start;
    out->end = v[n - 1].end;
    return 0;
}

/* get_tag: (B|I, tag) of a label name. */
static void get_tag(const char *name, char *bi, const char **tag)
{
    if (!strncmp(name, "B-", 2) || !strncmp(name, "I-", 2)) {
        *bi = name[0];
        *tag = name + 2;
    } else {
        *bi = 'I';
        *tag = name;
    }
}

static int push_entity(iv_token_entities *t, int *cap, const char *label, float score, int index, char *word,
                       int start, int end)
{
    if (t->n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        iv_token_entity *ni = realloc(t->items, (size_t)nc * sizeof *ni);
        if (!ni) {
            free(word);
            return -1;
        }
        t->items = ni;
        *cap = nc;
    }
    char *l = strdup(label);
    if (!l) {
        free(word);
        return -1;
    }
    t->items[t->n++] = (iv_token_entity){l, score, index, word, start, end};
    return 0;
}

static int ignored(const iv_tokcls_opts *o, const char *label)
{
    if (!o->ignore_labels) return !strcmp(label, "O");
    for (int i = 0; i < o->n_ignore; i++)
        if (!strcmp(label, o->ignore_labels[i])) return 1;
    return 0;
}

/* group_sub_entities over words w[0..n), then the ignore filter. */
static int emit_group(ctx *c, const ent *w, int n, const iv_tokcls_opts *o, iv_token_entities *t, int *cap)
{
    const char *first = iv_engine_label(c->e, w[0].label);
    const char *dash = strchr(first, '-'); /* entity.split("-", 1)[-1] */
    const char *group = dash ? dash + 1 : first;
    if (ignored(o, group)) return 0;
    double sum = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(w[i].score)) {
            sum += w[i].score;
            k++;
        }
    char *word = join_words(c, w, n);
    if (!word) return -1;
    return push_entity(t, cap, group, k ? (float)(sum / k) : NAN, -1, word, w[0].start, w[n - 1].end);
}

int iv_token_entities_build(const iv_engine *e, const char *text, size_t text_len, const iv_encoding *enc,
                            const float *logits, const iv_tokcls_opts *opts, iv_token_entities *out, iv_err *err)
{
    memset(out, 0, sizeof *out);
    out->grouped = opts->aggregation != IV_AGG_NONE;
    ctx c = {e, iv_engine_tokenizer(e), iv_engine_num_labels(e), err};
    if (!c.tok) return iv_errf(err, IV_E_UNSUPPORTED, "token classification needs the model's tokenizer");
    if (c.n_labels <= 0) return iv_errf(err, IV_E_UNSUPPORTED, "the model has no token classification labels");
    const int n = enc->len, L = c.n_labels;

    /* The text's code points: char index -> byte offset (cp_byte[n_chars] = text_len). */
    int n_chars = cp_count(text, text_len);
    int *cp_byte = malloc((size_t)(n_chars + 1) * sizeof *cp_byte);
    int32_t *off = malloc((size_t)(n ? n : 1) * 2 * sizeof *off);
    float *scores = malloc((size_t)(n ? n : 1) * (size_t)L * sizeof *scores);
    ent *pre = calloc((size_t)(n ? n : 1), sizeof *pre);
    ent *words = NULL;
    int n_pre = 0, n_words = 0, rc = -1, cap = 0;
    if (!cp_byte || !off || !scores || !pre) {
        iv_errf(err, IV_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0, k = 0; i < text_len; i++)
        if (((unsigned char)text[i] & 0xC0) != 0x80) cp_byte[k++] = (int)i;
    cp_byte[n_chars] = (int)text_len;
    memcpy(off, enc->offsets, (size_t)n * 2 * sizeof *off);
    if (iv_tokenizer_char_offsets(text, text_len, off, n)) {
        iv_errf(err, IV_E_NOMEM, "out of memory");
        goto done;
    }

    /* postprocess: softmax (unless raw_scores), in float32 as numpy does. */
    for (int i = 0; i < n; i++) {
        const float *x = logits + (size_t)i * L;
        float *s = scores + (size_t)i * L;
        if (opts->raw_scores) {
            memcpy(s, x, (size_t)L * sizeof *s);
            continue;
        }
        float mx = x[0], sum = 0;
        for (int l = 1; l < L; l++) mx = x[l] > mx ? x[l] : mx;
        for (int l = 0; l < L; l++) sum += (s[l] = expf(x[l] - mx));
        for (int l = 0; l < L; l++) s[l] /= sum;
    }

    /* gather_pre_entities */
    const int word_aware = iv_tokenizer_has_subword_prefix(c.tok);
    const int32_t unk = iv_tokenizer_unk_id(c.tok);
    for (int i = 0; i < n; i++) {
        if (enc->special_mask && enc->special_mask[i]) continue;
        ent *p = &pre[n_pre];
        const char *tokstr = iv_tokenizer_id_to_token(c.tok, enc->ids[i]);
        if (!tokstr) tokstr = "";
        const int start = off[2 * i], end = off[2 * i + 1];
        /* sentence[start:end] with Python's clamping */
        const int s0 = start < n_chars ? start : n_chars, s1 = end < n_chars ? end : n_chars;
        const int ref_chars = s1 > s0 ? s1 - s0 : 0;
        const char *ref = text + cp_byte[s0];
        const size_t ref_len = ref_chars ? (size_t)(cp_byte[s1] - cp_byte[s0]) : 0;
        if (word_aware) {
            p->is_subword = cp_count(tokstr, strlen(tokstr)) != ref_chars;
        } else {
            /* start > 0 and " " not in sentence[start - 1 : start + 1] */
            int space = 0;
            for (int k = start - 1; start > 0 && k < start + 1 && k < n_chars; k++)
                if (k >= 0 && text[cp_byte[k]] == ' ') space = 1;
            p->is_subword = start > 0 && !space;
        }
        if (enc->ids[i] == unk) {
            p->word = dup_n(ref, ref_len);
            p->is_subword = 0;
        } else {
            p->word = strdup(tokstr);
        }
        if (!p->word) {
            iv_errf(err, IV_E_NOMEM, "out of memory");
            goto done;
        }
        p->scores = scores + (size_t)i * L;
        p->index = i;
        p->start = start;
        p->end = end;
        n_pre++;
    }

    /* aggregate */
    if (opts->aggregation == IV_AGG_NONE || opts->aggregation == IV_AGG_SIMPLE) {
        for (int i = 0; i < n_pre; i++) {
            pre[i].label = argmax(pre[i].scores, L);
            pre[i].score = pre[i].scores[pre[i].label];
        }
        words = pre;
        n_words = n_pre;
        pre = NULL;
        n_pre = 0;
    } else {
        /* aggregate_words: a word is a token and the subwords after it. */
        words = calloc((size_t)(n_pre ? n_pre : 1), sizeof *words);
        if (!words) {
            iv_errf(err, IV_E_NOMEM, "out of memory");
            goto done;
        }
        for (int i = 0; i < n_pre;) {
            int j = i + 1;
            while (j < n_pre && pre[j].is_subword) j++;
            if (aggregate_word(&c, pre + i, j - i, opts->aggregation, &words[n_words++])) {
                if (!err->code) iv_errf(err, IV_E_NOMEM, "out of memory");
                goto done;
            }
            i = j;
        }
    }

    if (opts->aggregation == IV_AGG_NONE) {
        for (int i = 0; i < n_words; i++) {
            const char *label = iv_engine_label(e, words[i].label);
            if (ignored(opts, label)) continue;
            if (push_entity(out, &cap, label, words[i].score, words[i].index, words[i].word, words[i].start,
                            words[i].end)) {
                words[i].word = NULL;
                iv_errf(err, IV_E_NOMEM, "out of memory");
                goto done;
            }
            words[i].word = NULL; /* taken */
        }
        rc = 0;
        goto done;
    }

    /* group_entities: a B- tag, or another tag, starts a new group. */
    for (int i = 0; i < n_words;) {
        int j = i + 1;
        for (; j < n_words; j++) {
            char bi, last_bi;
            const char *tag, *last_tag;
            get_tag(iv_engine_label(e, words[j].label), &bi, &tag);
            get_tag(iv_engine_label(e, words[j - 1].label), &last_bi, &last_tag);
            if (!(strcmp(tag, last_tag) == 0 && bi != 'B')) break;
        }
        if (emit_group(&c, words + i, j - i, opts, out, &cap)) {
            if (!err->code) iv_errf(err, IV_E_NOMEM, "out of memory");
            goto done;
        }
        i = j;
    }
    rc = 0;
done:
    if (rc) iv_token_entities_free(out);
    free_ents(words, n_words);
    free_ents(pre, n_pre);
    free(cp_byte);
    free(off);
    free(scores);
    return rc;
}

void iv_token_entities_free(iv_token_entities *t)
{
    for (int i = 0; t->items && i < t->n; i++) {
        free(t->items[i].label);
        free(t->items[i].word);
    }
    free(t->items);
    memset(t, 0, sizeof *t);
}

void iv_token_entities_json(iv_strbuf *b, const iv_token_entities *t)
{
    iv_sb_putc(b, '[');
    for (int i = 0; i < t->n; i++) {
        const iv_token_entity *x = &t->items[i];
        iv_sb_puts(b, i ? (t->grouped ? ",{\"entity_group\":" : ",{\"entity\":")
                        : (t->grouped ? "{\"entity_group\":" : "{\"entity\":"));
        iv_sb_json_string(b, x->label, strlen(x->label));
        iv_sb_puts(b, ",\"score\":");
        iv_sb_float(b, x->score);
        if (!t->grouped) {
            iv_sb_puts(b, ",\"index\":");
            iv_sb_int(b, x->index);
        }
        iv_sb_puts(b, ",\"word\":");
        iv_sb_json_string(b, x->word, strlen(x->word));
        iv_sb_puts(b, ",\"start\":");
        iv_sb_int(b, x->start);
        iv_sb_puts(b, ",\"end\":");
        iv_sb_int(b, x->end);
        iv_sb_putc(b, '}');
    }
    iv_sb_putc(b, ']');
}
