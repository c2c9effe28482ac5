#include "decisions/state_images.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "decisions/pyjson.h"

/* The image of a part, or NULL when v is no image part; *bad when it is one
 * without its image as a string. */
static const char *image_of(const cJSON *v, int *bad)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "type");
    if (!cJSON_IsObject(v) || !cJSON_IsString(t) ||
        (strcmp(t->valuestring, "image_url") && strcmp(t->valuestring, "input_image")))
        return NULL;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(v, "image_url");
    if (cJSON_IsObject(u)) u = cJSON_GetObjectItemCaseSensitive(u, "url");
    if (cJSON_IsString(u)) return u->valuestring;
    *bad = 1;
    return "";
}

typedef struct cut_ctx {
    int n, cap, bad;
    const char **src;
    size_t *at;
} cut_ctx;

/* pyjson hole: an image part is left out of the text, its place recorded. */
static int cut_image(const cJSON *v, size_t at, void *p)
{
    cut_ctx *c = p;
    const char *src = image_of(v, &c->bad);
    if (!src) return 0;
    if (c->n == c->cap) {
        const int cap = c->cap ? 2 * c->cap : 8;
        const char **s = realloc(c->src, sizeof *s * (size_t)cap);
        if (s) c->src = s;
        size_t *a = realloc(c->at, sizeof *a * (size_t)cap);
        if (a) c->at = a;
        if (!s || !a) {
            c->bad = -1;
            return 1;
        }
        c->cap = cap;
    }
    c->src[c->n] = src;
    c->at[c->n++] = at;
    return 1;
}

static const char *const LOC_STATE[] = {"body", "state", NULL};

void iv_dq_state_images(const cJSON *state, const iv_dq_limits *lim, iv_dq_request *r, iv_dq_errors *e)
{
    if (!cJSON_IsArray(state) && !cJSON_IsObject(state)) return;
    cut_ctx c = {0};
    iv_strbuf b;
    iv_sb_init(&b);
    iv_pyjson_dumps_holes(&b, state, cut_image, &c);
    if (c.bad < 0 || b.oom) {
        iv_dq_error(e, 422, "value_error", "out of memory", LOC_STATE);
    } else if (c.bad) {
        iv_dq_error(e, 422, "value_error",
                    "an image part needs its image as a string: a data URL in image_url.url (image_url) or "
                    "image_url (input_image)",
                    LOC_STATE);
    } else if (c.n > lim->max_images) {
        char msg[160];
        snprintf(msg, sizeof msg, "at most %d images per state; this one has %d", lim->max_images, c.n);
        iv_dq_error(e, 413, "too_long", msg, LOC_STATE);
    } else if (c.n > 0) {
        r->state_pieces = calloc((size_t)c.n + 1, sizeof *r->state_pieces);
        for (int k = 0; r->state_pieces && k <= c.n; k++) {
            const size_t from = k ? c.at[k - 1] : 0, to = k < c.n ? c.at[k] : b.len;
            char *s = malloc(to - from + 1);
            if (!s) break;
            /* b.data is NULL when the state is nothing but an image part. */
            if (to > from) memcpy(s, b.data + from, to - from);
            s[to - from] = 0;
            r->state_pieces[k] = s;
        }
        if (!r->state_pieces || !r->state_pieces[c.n]) {
            iv_dq_error(e, 422, "value_error", "out of memory", LOC_STATE);
        } else {
            r->image_src = c.src;
            c.src = NULL;
            r->n_images = c.n;
            r->has_image = 1;
        }
    }
    free(c.src);
    free(c.at);
    iv_sb_free(&b);
}

void iv_dq_state_images_free(iv_dq_request *r)
{
    for (int k = 0; r->state_pieces && k <= r->n_images; k++) free(r->state_pieces[k]);
    free(r->state_pieces);
    free(r->image_src);
    r->state_pieces = NULL;
    r->image_src = NULL;
    r->n_images = 0;
}

static int add_text(cJSON *parts, const char *a, const char *b, const char *c)
{
    iv_strbuf t;
    iv_sb_init(&t);
    iv_sb_puts(&t, a);
    iv_sb_puts(&t, b);
    iv_sb_puts(&t, c);
    cJSON *p = cJSON_CreateObject();
    const int ok = !t.oom && p && cJSON_AddStringToObject(p, "type", "text") &&
                   cJSON_AddStringToObject(p, "text", t.data ? t.data : "");
    iv_sb_free(&t);
    if (!ok) {
        cJSON_Delete(p);
        return -1;
    }
    cJSON_AddItemToArray(parts, p);
    return 0;
}

cJSON *iv_dq_state_content(const iv_dq_request *r, const char *before, const char *after)
{
    if (!r->n_images) {
        iv_strbuf t;
        iv_sb_init(&t);
        iv_sb_puts(&t, before);
        iv_sb_puts(&t, r->state_text ? r->state_text : "");
        iv_sb_puts(&t, after);
        cJSON *s = t.oom ? NULL : cJSON_CreateString(t.data ? t.data : "");
        iv_sb_free(&t);
        return s;
    }
    cJSON *parts = cJSON_CreateArray();
    for (int k = 0; parts && k <= r->n_images; k++) {
        cJSON *img = k ? cJSON_CreateObject() : NULL;
        if (k && (!img || !cJSON_AddStringToObject(img, "type", "image"))) {
            cJSON_Delete(img);
            cJSON_Delete(parts);
            return NULL;
        }
        if (img) cJSON_AddItemToArray(parts, img);
        if (add_text(parts, k ? "" : before, r->state_pieces[k], k == r->n_images ? after : "")) {
            cJSON_Delete(parts);
            return NULL;
        }
    }
    return parts;
}

cJSON *iv_dq_messages(const iv_dq_request *r, const char *system, const char *after)
{
    cJSON *msgs = cJSON_CreateArray(), *sys = cJSON_CreateObject(), *user = cJSON_CreateObject();
    cJSON *content = iv_dq_state_content(r, "State:\n", after);
    if (msgs && sys && user && content && cJSON_AddStringToObject(sys, "role", "system") &&
        cJSON_AddStringToObject(sys, "content", system) && cJSON_AddStringToObject(user, "role", "user")) {
        cJSON_AddItemToObject(user, "content", content);
        cJSON_AddItemToArray(msgs, sys);
        cJSON_AddItemToArray(msgs, user);
        return msgs;
    }
    cJSON_Delete(msgs);
    cJSON_Delete(sys);
    cJSON_Delete(user);
    cJSON_Delete(content);
    return NULL;
}
