#include "server/codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/json.h"
#include "base/utf8.h"

/* ---- UTF-8 ---- */

int iv_utf8_valid(const char *str, size_t n, size_t *bad)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if (c >= 0xE1 && c <= 0xEC) len = 3;
        else if (c == 0xED) len = 3, hi = 0x9F; /* no UTF-16 surrogates */
        else if (c >= 0xEE && c <= 0xEF) len = 3;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F; /* <= U+10FFFF */
        else goto invalid;
        if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) goto invalid;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) goto invalid;
        i += len;
    }
    return 1;
invalid:
    if (bad) *bad = i;
    return 0;
}

size_t iv_utf8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* ---- error helpers ---- */

/* serde's description of an unexpected value ("integer `5`", "sequence", ...). */
static void describe(const cJSON *v, char *buf, size_t cap)
{
    if (!v) snprintf(buf, cap, "nothing");
    else if (cJSON_IsNull(v)) snprintf(buf, cap, "null");
    else if (cJSON_IsBool(v)) snprintf(buf, cap, "boolean `%s`", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 9.2e18) snprintf(buf, cap, "integer `%lld`", (long long)d);
        else snprintf(buf, cap, "floating point `%g`", d);
    } else if (cJSON_IsString(v)) {
        /* At most 40 bytes of the string, cut on a code point boundary. */
        size_t n = strlen(v->valuestring), keep = iv_utf8_cut(v->valuestring, n, 40);
        snprintf(buf, cap, "string \"%.*s%s\"", (int)keep, v->valuestring, keep < n ? "..." : "");
    } else if (cJSON_IsArray(v)) snprintf(buf, cap, "sequence");
    else snprintf(buf, cap, "map");
}

static void loc_field(char *buf, size_t cap, const char *key) { snprintf(buf, cap, "\"body\",\"%s\"", key); }
static void loc_index(char *buf, size_t cap, const char *key, int i)
{
    snprintf(buf, cap, "\"body\",\"%s\",%d", key, i);
}

/* A wrong-typed value: serde's "path: invalid type: X, expected Y" plus the pydantic view. */
static int type_error(iv_api_error *err, const char *path, const cJSON *got, const char *expected, const char *loc,
                      const char *pyd_type, const char *pyd_msg)
{
    char d[96];
    describe(got, d, sizeof d);
    iv_api_errorf(err, IV_API_JSON_DATA, "%s: invalid type: %s, expected %s", path, d, expected);
    iv_api_error_shape(err, loc, pyd_type, "%s", pyd_msg);
    return -1;
}

static int missing_error(iv_api_error *err, const char *key)
{
    char loc[96];
    loc_field(loc, sizeof loc, key);
    iv_api_errorf(err, IV_API_JSON_DATA, "missing field `%s`", key);
    iv_api_error_shape(err, loc, "missing", "Field required");
    return -1;
}

/* ---- body ---- */

/* cJSON decodes "\u0000" into the string but reports it NUL-terminated, so
 * "hello\u0000world" would read as "hello"; it also accepts raw control
 * bytes inside strings, which RFC 8259 forbids. One pass over the body
 * before cJSON finds both: it rejects a raw control byte, and records the
 * decoded length of every string that holds a NUL (by its ordinal among the
 * document's strings, keys included), which mark_lengths then stores in
 * the item (iv_codec_str_len reads it). */
typedef struct nul_strings {
    size_t *ordinal, *len;
    size_t n, cap;
} nul_strings;

static int hex4(const char *p, const char *end, unsigned *out)
{
    if (end - p < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* 0, or -1 with *ctl the offset of a raw control byte inside a string. */
static int scan_strings(const char *body, size_t len, nul_strings *ns, size_t *ctl)
{
    const char *p = body, *end = body + len;
    size_t ordinal = 0;
    while (p < end) {
        if (*p++ != '"') continue;
        size_t dec = 0;
        int has_nul = 0;
        while (p < end && *p != '"') {
            unsigned char c = (unsigned char)*p;
            if (c < 0x20) {
                *ctl = (size_t)(p - body);
                return -1;
            }
            if (c != '\\') {
                p++, dec++;
                continue;
            }
            if (++p >= end) break;
            unsigned cp;
            if (*p != 'u' || hex4(p + 1, end, &cp)) {
                p++, dec++; /* \" \\ \/ \b \f \n \r \t (cJSON rejects others) */
                continue;
            }
            p += 5;
            unsigned lo;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u' && !hex4(p + 2, end, &lo) &&
                lo >= 0xDC00 && lo <= 0xDFFF) {
                p += 6;
                dec += 4;
                continue;
            }
            has_nul |= cp == 0;
            dec += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
        }
        p++; /* the closing quote */
        if (has_nul) {
            if (ns->n == ns->cap) {
                size_t cap = ns->cap ? 2 * ns->cap : 8;
                size_t *o = realloc(ns->ordinal, cap * sizeof *o), *l = o ? realloc(ns->len, cap * sizeof *l) : NULL;
                if (o) ns->ordinal = o;
                if (!l) return 0; /* out of memory: the strings read as NUL-terminated */
                ns->len = l;
                ns->cap = cap;
            }
            ns->ordinal[ns->n] = ordinal;
            ns->len[ns->n++] = dec;
        }
        ordinal++;
    }
    return 0;
}

/* Walks the tree in document order (an object's key, then its value),
 * counting strings as scan_strings did. */
static void mark_lengths(cJSON *item, int in_object, const nul_strings *ns, size_t *ordinal, size_t *next)
{
    for (cJSON *c = item->child; c && *next < ns->n; c = c->next) {
        if (in_object) ++*ordinal;                                      /* the key */
        while (*next < ns->n && ns->ordinal[*next] < *ordinal) ++*next; /* a key held the NUL */
        if (cJSON_IsString(c)) {
            if (*next < ns->n && ns->ordinal[*next] == *ordinal) c->valueint = (int)ns->len[(*next)++];
            ++*ordinal;
        } else if (cJSON_IsArray(c) || cJSON_IsObject(c)) {
            mark_lengths(c, cJSON_IsObject(c), ns, ordinal, next);
        }
    }
}

size_t iv_codec_str_len(const cJSON *v)
{
    if (!cJSON_IsString(v) || !v->valuestring) return 0;
    return v->valueint > 0 ? (size_t)v->valueint : strlen(v->valuestring);
}

static void line_col(const char *body, size_t pos, int *line, int *col)
{
    *line = 1, *col = 1;
    for (size_t i = 0; i < pos; i++) {
        if (body[i] == '\n') ++*line, *col = 1;
        else ++*col;
    }
}

int iv_codec_parse_json(const char *body, size_t len, cJSON **out, iv_api_error *err)
{
    *out = NULL;
    size_t bad;
    if (!iv_utf8_valid(body, len, &bad)) {
        iv_api_errorf(err, IV_API_VALIDATION, "Input validation error: the request body is not valid UTF-8 (byte %zu)",
                      bad);
        return -1;
    }
    nul_strings ns = {0};
    size_t ctl;
    if (scan_strings(body, len, &ns, &ctl)) {
        free(ns.ordinal);
        free(ns.len);
        int line, col;
        line_col(body, ctl, &line, &col);
        /* serde_json's wording (TEI); FastAPI reports a JSON decode error. */
        iv_api_errorf(err, IV_API_JSON_SYNTAX,
                      "control character (\\u0000-\\u001F) found while parsing a string at line %d column %d", line,
                      col);
        char loc[64];
        snprintf(loc, sizeof loc, "\"body\",%zu", ctl);
        iv_api_error_shape(err, loc, "json_invalid", "JSON decode error");
        return -1;
    }
    const char *end = NULL;
    cJSON *root = len ? cJSON_ParseWithLengthOpts(body, len, &end, 0) : NULL;
    iv_json_mark_floats(root, body, len); /* chat messages print 1.0 as Python does */
    if (!root) {
        free(ns.ordinal);
        free(ns.len);
        size_t pos = end && end >= body ? (size_t)(end - body) : 0;
        int line = 1, col = 1;
        for (size_t i = 0; i < pos && i < len; i++) {
            if (body[i] == '\n') line++, col = 1;
            else col++;
        }
        if (!len) iv_api_errorf(err, IV_API_JSON_SYNTAX, "EOF while parsing a value at line 1 column 0");
        else iv_api_errorf(err, IV_API_JSON_SYNTAX, "syntax error at line %d column %d", line, col);
        char loc[64];
        snprintf(loc, sizeof loc, "\"body\",%zu", pos);
        iv_api_error_shape(err, loc, "json_invalid", "JSON decode error");
        return -1;
    }
    /* Trailing non-whitespace after the value is a syntax error too. */
    if (end) {
        size_t pos = (size_t)(end - body);
        while (pos < len && (body[pos] == ' ' || body[pos] == '\n' || body[pos] == '\r' || body[pos] == '\t')) pos++;
        if (pos < len) {
            free(ns.ordinal);
            free(ns.len);
            cJSON_Delete(root);
            iv_api_errorf(err, IV_API_JSON_SYNTAX, "trailing characters at byte %zu", pos);
            char loc[64];
            snprintf(loc, sizeof loc, "\"body\",%zu", pos);
            iv_api_error_shape(err, loc, "json_invalid", "JSON decode error");
            return -1;
        }
    }
    size_t ordinal = 0, next = 0;
    if (ns.n && cJSON_IsString(root)) root->valueint = (int)ns.len[0]; /* the document is that one string */
    else if (ns.n) mark_lengths(root, cJSON_IsObject(root), &ns, &ordinal, &next);
    free(ns.ordinal);
    free(ns.len);
    *out = root;
    return 0;
}

int iv_codec_parse_body(const char *body, size_t len, cJSON **out, iv_api_error *err)
{
    cJSON *root;
    if (iv_codec_parse_json(body, len, &root, err)) return -1;
    *out = NULL;
    if (!cJSON_IsObject(root)) {
        char d[96];
        describe(root, d, sizeof d);
        iv_api_errorf(err, IV_API_JSON_DATA, "invalid type: %s, expected a JSON object", d);
        iv_api_error_shape(err, "\"body\"", "model_attributes_type",
                           "Input should be a valid dictionary or object to extract fields from");
        cJSON_Delete(root);
        return -1;
    }
    *out = root;
    return 0;
}

/* ---- fields ---- */

static const cJSON *field(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key); }

int iv_codec_bool(const cJSON *obj, const char *key, int def, int *out, iv_api_error *err)
{
    const cJSON *v = field(obj, key);
    *out = def;
    if (!v) return 0;
    if (!cJSON_IsBool(v)) {
        char loc[96];
        loc_field(loc, sizeof loc, key);
        return type_error(err, key, v, "a boolean", loc, "bool_type", "Input should be a valid boolean");
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

int iv_codec_opt_bool(const cJSON *obj, const char *key, int *out, iv_api_error *err)
{
    const cJSON *v = field(obj, key);
    *out = -1;
    if (!v || cJSON_IsNull(v)) return 0;
    return iv_codec_bool(obj, key, -1, out, err);
}

int iv_codec_opt_uint(const cJSON *obj, const char *key, int64_t max, int64_t *out, iv_api_error *err)
{
    const cJSON *v = field(obj, key);
    *out = -1;
    if (!v || cJSON_IsNull(v)) return 0;
    char loc[96];
    loc_field(loc, sizeof loc, key);
    if (!iv_json_is_integer(v))
        return type_error(err, key, v, "usize", loc, "int_type", "Input should be a valid integer");
    if (v->valuedouble < 0 || v->valuedouble > (double)max) {
        char d[96];
        describe(v, d, sizeof d);
        iv_api_errorf(err, IV_API_JSON_DATA, "%s: invalid value: %s, expected usize", key, d);
        iv_api_error_shape(err, loc, "int_type", "Input should be a valid integer");
        return -1;
    }
    *out = (int64_t)v->valuedouble;
    return 0;
}

int iv_codec_opt_int(const cJSON *obj, const char *key, int64_t *out, int *present, iv_api_error *err)
{
    const cJSON *v = field(obj, key);
    *present = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!iv_json_is_integer(v) || fabs(v->valuedouble) > 2147483647.0) {
        char loc[96];
        loc_field(loc, sizeof loc, key);
        return type_error(err, key, v, "an integer", loc, "int_type", "Input should be a valid integer");
    }
    *out = (int64_t)v->valuedouble;
    *present = 1;
    return 0;
}

int iv_codec_opt_string(const cJSON *obj, const char *key, const char **out, iv_api_error *err)
{
    const cJSON *v = field(obj, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v)) {
        char loc[96];
        loc_field(loc, sizeof loc, key);
        return type_error(err, key, v, "a string", loc, "string_type", "Input should be a valid string");
    }
    *out = v->valuestring;
    return 0;
}

int iv_codec_required_string(const cJSON *obj, const char *key, const char **out, iv_api_error *err)
{
    if (!field(obj, key)) return missing_error(err, key);
    if (iv_codec_opt_string(obj, key, out, err)) return -1;
    if (!*out) {
        char loc[96];
        loc_field(loc, sizeof loc, key);
        return type_error(err, key, field(obj, key), "a string", loc, "string_type", "Input should be a valid string");
    }
    return 0;
}

int iv_codec_truncation_left(const cJSON *obj, int *left, iv_api_error *err)
{
    const cJSON *v = field(obj, "truncation_direction");
    *left = 0;
    if (!v) return 0;
    char loc[96];
    loc_field(loc, sizeof loc, "truncation_direction");
    if (!cJSON_IsString(v))
        return type_error(err, "truncation_direction", v, "variant identifier", loc, "enum",
                          "Input should be 'Left' or 'Right'");
    const char *s = v->valuestring;
    if (!strcmp(s, "left") || !strcmp(s, "Left")) *left = 1;
    else if (strcmp(s, "right") && strcmp(s, "Right")) {
        iv_api_errorf(err, IV_API_JSON_DATA,
                      "truncation_direction: unknown variant `%.*s`, expected one of `Left`, `left`, `Right`, `right`",
                      IV_UTF8_ECHO(64, s));
        iv_api_error_shape(err, loc, "enum", "Input should be 'Left' or 'Right'");
        return -1;
    }
    return 0;
}

int iv_codec_encoding_format(const cJSON *obj, int *format, iv_api_error *err)
{
    const cJSON *v = field(obj, "encoding_format");
    *format = IV_ENCODING_FLOAT;
    if (!v) return 0;
    char loc[96];
    loc_field(loc, sizeof loc, "encoding_format");
    if (!cJSON_IsString(v))
        return type_error(err, "encoding_format", v, "`float` or `base64`", loc, "enum",
                          "Input should be 'float' or 'base64'");
    if (!strcmp(v->valuestring, "base64")) *format = IV_ENCODING_BASE64;
    else if (!strcmp(v->valuestring, "tensor")) *format = IV_ENCODING_TENSOR;
    else if (strcmp(v->valuestring, "float")) {
        iv_api_errorf(err, IV_API_JSON_DATA, "encoding_format: unknown variant `%.*s`, expected `float` or `base64`",
                      IV_UTF8_ECHO(64, v->valuestring));
        iv_api_error_shape(err, loc, "enum", "Input should be 'float' or 'base64'");
        return -1;
    }
    return 0;
}

/* ---- inputs ---- */

void iv_inputs_free(iv_inputs *in)
{
    for (int i = 0; i < in->n; i++) free((void *)in->items[i].ids);
    free(in->items);
    memset(in, 0, sizeof *in);
}

static int alloc_items(iv_inputs *out, int n, iv_api_error *err)
{
    out->items = calloc((size_t)(n > 0 ? n : 1), sizeof *out->items);
    if (!out->items) {
        iv_api_errorf(err, IV_API_INTERNAL, "out of memory");
        return -1;
    }
    return 0;
}

/* A text with its full length: it may hold U+0000 (iv_codec_str_len). */
static void set_text(iv_inputs *out, iv_input *it, const cJSON *s)
{
    it->text = s->valuestring;
    it->text_len = iv_codec_str_len(s);
    out->n_chars += iv_utf8_count(it->text, it->text_len);
}

/* A conversation: a non-empty list of objects (OpenAI messages). */
static int is_conversation(const cJSON *a)
{
    const cJSON *x;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0) return 0;
    cJSON_ArrayForEach(x, a) if (!cJSON_IsObject(x)) return 0;
    return 1;
}

/* A multimodal embedding input item that is an image, not a message (no
 * "role"): {"type": "image_url", "image_url": {"url": URL}} (or the URL as
 * the string), or {"image": URL}. Returns the URL string, else NULL. */
static const cJSON *image_item(const cJSON *x)
{
    if (!cJSON_IsObject(x) || cJSON_GetObjectItemCaseSensitive(x, "role")) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "image_url");
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "url");
    if (!v) v = cJSON_GetObjectItemCaseSensitive(x, "image");
    return cJSON_IsString(v) ? v : NULL;
}

/* The audio twin of image_item: {"type": "input_audio", "input_audio":
 * {"data": BASE64, "format": ...}}, {"type": "audio_url", "audio_url":
 * {"url": URL}} (or the URL as the string), or {"audio": SOURCE}. Returns
 * the source string, else NULL. input_audio's format is checked where the
 * clip is decoded (engine/conversation.c): such an item becomes a
 * one-part conversation so the check is one code path. */
static const cJSON *audio_item(const cJSON *x)
{
    if (!cJSON_IsObject(x) || cJSON_GetObjectItemCaseSensitive(x, "role")) return NULL;
    if (cJSON_GetObjectItemCaseSensitive(x, "input_audio")) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "audio_url");
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "url");
    if (!v) v = cJSON_GetObjectItemCaseSensitive(x, "audio");
    return cJSON_IsString(v) ? v : NULL;
}

static int is_media_item(const cJSON *x)
{
    return image_item(x) || audio_item(x) ||
           (cJSON_IsObject(x) && !cJSON_GetObjectItemCaseSensitive(x, "role") &&
            cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(x, "input_audio")));
}

static int all_media_items(const cJSON *a)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, a) if (!is_media_item(x)) return 0;
    return cJSON_GetArraySize(a) > 0;
}

static void set_image(iv_input *it, const cJSON *url)
{
    it->image = url->valuestring;
    it->image_len = iv_codec_str_len(url);
}

/* One media item as one input: an image, an audio source, or an
 * input_audio part kept as is (x itself, read as a one-part user message by
 * iv_input.media_part). */
static void set_media(iv_input *it, const cJSON *x)
{
    const cJSON *v;
    if ((v = image_item(x))) set_image(it, v);
    else if ((v = audio_item(x))) it->audio = v->valuestring, it->audio_len = iv_codec_str_len(v);
    else it->media_part = x;
}

/* The messages are checked where they are rendered (engine/conversation.c);
 * here only their text counts toward the characters of the request. */
static void set_conversation(iv_inputs *out, iv_input *it, const cJSON *a)
{
    it->messages = a;
    const cJSON *m, *part;
    cJSON_ArrayForEach(m, a)
    {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsString(c)) out->n_chars += iv_utf8_count(c->valuestring, iv_codec_str_len(c));
        else if (cJSON_IsArray(c))
            cJSON_ArrayForEach(part, c)
            {
                const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (cJSON_IsString(t)) out->n_chars += iv_utf8_count(t->valuestring, iv_codec_str_len(t));
            }
    }
}

static int one_conversation(iv_inputs *out, const cJSON *a, iv_api_error *err)
{
    if (alloc_items(out, 1, err)) return -1;
    out->n = 1;
    out->single = 1;
    set_conversation(out, &out->items[0], a);
    return 0;
}

int iv_codec_messages(const cJSON *obj, const char *key, iv_inputs *out, iv_api_error *err)
{
    memset(out, 0, sizeof *out);
    const cJSON *v = field(obj, key);
    if (!v) return missing_error(err, key);
    if (!is_conversation(v)) {
        char loc[96];
        loc_field(loc, sizeof loc, key);
        return type_error(err, key, v, "a non-empty list of messages", loc, "list_type",
                          "Input should be a non-empty list of message objects");
    }
    return one_conversation(out, v, err);
}

static int is_id_array(const cJSON *a)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, a) if (!cJSON_IsNumber(x)) return 0;
    return 1;
}

/* Token ids: u32 values that fit the engine's int32 ids. */
static int take_ids(iv_inputs *out, iv_input *it, const cJSON *a, const char *key, int index, iv_api_error *err)
{
    int n = cJSON_GetArraySize(a);
    int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (!ids) {
        iv_api_errorf(err, IV_API_INTERNAL, "out of memory");
        return -1;
    }
    it->ids = ids;
    it->n_ids = n;
    int k = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        if (!iv_json_is_integer(x) || x->valuedouble < 0 || x->valuedouble > 4294967295.0) {
            char d[96], loc[128], path[96];
            describe(x, d, sizeof d);
            if (index >= 0) snprintf(loc, sizeof loc, "\"body\",\"%s\",%d,%d", key, index, k);
            else snprintf(loc, sizeof loc, "\"body\",\"%s\",%d", key, k);
            snprintf(path, sizeof path, "%s", key);
            iv_api_errorf(err, IV_API_JSON_DATA, "%s: invalid value: %s, expected u32", path, d);
            iv_api_error_shape(err, loc, "int_type", "Input should be a valid integer");
            return -1;
        }
        if (x->valuedouble > 2147483647.0) {
            iv_api_errorf(err, IV_API_VALIDATION, "Input validation error: token id %.0f is outside the vocabulary",
                          x->valuedouble);
            return -1;
        }
        ids[k++] = (int32_t)x->valuedouble;
    }
    out->n_chars += (size_t)n;
    return 0;
}

int iv_codec_inputs(const cJSON *obj, const char *key, iv_inputs *out, iv_api_error *err)
{
    memset(out, 0, sizeof *out);
    const cJSON *v = field(obj, key);
    if (!v) return missing_error(err, key);
    char loc[96];
    loc_field(loc, sizeof loc, key);
    if (cJSON_IsString(v)) {
        if (alloc_items(out, 1, err)) return -1;
        out->n = 1;
        out->single = 1;
        set_text(out, &out->items[0], v);
        return 0;
    }
    if (!cJSON_IsArray(v)) {
        iv_api_errorf(err, IV_API_JSON_DATA, "%s: data did not match any variant of untagged enum Input", key);
        iv_api_error_shape(err, loc, cJSON_IsNull(v) ? "missing" : "string_type",
                           "Input should be a valid string, a list of strings or a list of token ids");
        return -1;
    }
    int n = cJSON_GetArraySize(v);
    if (all_media_items(v)) {
        /* A list of image / audio items: one input each (models with the tower). */
        if (alloc_items(out, n, err)) return -1;
        out->n = n;
        int i = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, v) set_media(&out->items[i++], x);
        return 0;
    }
    if (is_conversation(v)) return one_conversation(out, v, err);
    if (n == 0 || is_id_array(v)) {
        /* One pre-tokenized input (an empty list is one empty input, as TEI reads it). */
        if (alloc_items(out, 1, err)) return -1;
        out->n = 1;
        out->single = 1;
        return take_ids(out, &out->items[0], v, key, -1, err);
    }
    if (alloc_items(out, n, err)) return -1;
    out->n = n;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        iv_input *it = &out->items[i];
        if (cJSON_IsString(x)) {
            set_text(out, it, x);
        } else if (cJSON_IsArray(x) && is_id_array(x)) {
            if (take_ids(out, it, x, key, i, err)) return -1;
        } else if (is_conversation(x)) {
            set_conversation(out, it, x);
        } else if (is_media_item(x)) {
            set_media(it, x);
        } else {
            char d[96], iloc[128];
            describe(x, d, sizeof d);
            loc_index(iloc, sizeof iloc, key, i);
            iv_api_errorf(err, IV_API_JSON_DATA, "%s[%d]: data did not match any variant of untagged enum InputType",
                          key, i);
            iv_api_error_shape(err, iloc, "string_type", "Input should be a valid string");
            return -1;
        }
        i++;
    }
    return 0;
}

/* TEI's wording, byte for byte (clients match on it); conversations are
 * accepted where a sequence may stand but not named here. */
static const char *predict_expected = "a string, a pair of strings [string, string] or a batch of mixed strings "
                                      "and pairs [[string], [string, string], ...]";

static int predict_error(iv_api_error *err, const char *key, const char *what, const char *loc)
{
    iv_api_errorf(err, IV_API_JSON_DATA, "%s: %s, expected %s", key, what, predict_expected);
    iv_api_error_shape(err, loc, "value_error", "Input should be a string, a pair of strings or a batch of them");
    return -1;
}

/* One sequence from a list of 1 or 2 strings. */
static int predict_sequence(iv_inputs *out, iv_input *it, const cJSON *a, const char *key, int index,
                            iv_api_error *err)
{
    char loc[128], what[128];
    if (index >= 0) loc_index(loc, sizeof loc, key, index);
    else loc_field(loc, sizeof loc, key);
    int n = cJSON_GetArraySize(a);
    if (n < 1 || n > 2) {
        snprintf(what, sizeof what, "invalid length %d", n);
        return predict_error(err, key, what, loc);
    }
    const cJSON *s0 = cJSON_GetArrayItem(a, 0), *s1 = cJSON_GetArrayItem(a, 1);
    if (!cJSON_IsString(s0) || (s1 && !cJSON_IsString(s1))) {
        char d[96];
        describe(cJSON_IsString(s0) ? s1 : s0, d, sizeof d);
        snprintf(what, sizeof what, "invalid type: %s", d);
        return predict_error(err, key, what, loc);
    }
    set_text(out, it, s0);
    if (s1) {
        it->pair = s1->valuestring;
        it->pair_len = iv_codec_str_len(s1);
        out->n_chars += iv_utf8_count(it->pair, it->pair_len);
    }
    return 0;
}

int iv_codec_predict_inputs(const cJSON *obj, const char *key, iv_inputs *out, iv_api_error *err)
{
    memset(out, 0, sizeof *out);
    const cJSON *v = field(obj, key);
    if (!v) return missing_error(err, key);
    char loc[96], what[128];
    loc_field(loc, sizeof loc, key);
    if (cJSON_IsString(v)) {
        if (alloc_items(out, 1, err)) return -1;
        out->n = 1;
        out->single = 1;
        set_text(out, &out->items[0], v);
        return 0;
    }
    if (!cJSON_IsArray(v)) {
        char d[96];
        describe(v, d, sizeof d);
        snprintf(what, sizeof what, "invalid type: %s", d);
        return predict_error(err, key, what, loc);
    }
    const cJSON *first = cJSON_GetArrayItem(v, 0);
    if (!first) return predict_error(err, key, "invalid length 0", loc);
    if (is_conversation(v)) return one_conversation(out, v, err);
    if (cJSON_IsString(first)) {
        /* ["text"] or ["text", "pair"]: one sequence. */
        if (alloc_items(out, 1, err)) return -1;
        out->n = 1;
        out->single = 1;
        return predict_sequence(out, &out->items[0], v, key, -1, err);
    }
    int n = cJSON_GetArraySize(v);
    if (alloc_items(out, n, err)) return -1;
    out->n = n;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        if (!cJSON_IsArray(x)) {
            char d[96], iloc[128];
            describe(x, d, sizeof d);
            loc_index(iloc, sizeof iloc, key, i);
            snprintf(what, sizeof what, "invalid type: %s", d);
            return predict_error(err, key, what, iloc);
        }
        if (is_conversation(x)) set_conversation(out, &out->items[i], x);
        else if (predict_sequence(out, &out->items[i], x, key, i, err)) return -1;
        i++;
    }
    return 0;
}

int iv_codec_string_list(const cJSON *obj, const char *key, iv_inputs *out, iv_api_error *err)
{
    memset(out, 0, sizeof *out);
    const cJSON *v = field(obj, key);
    if (!v) return missing_error(err, key);
    char loc[96];
    loc_field(loc, sizeof loc, key);
    if (!cJSON_IsArray(v))
        return type_error(err, key, v, "a sequence", loc, "list_type", "Input should be a valid list");
    int n = cJSON_GetArraySize(v);
    if (alloc_items(out, n, err)) return -1;
    out->n = n;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        if (!cJSON_IsString(x)) {
            char iloc[128], path[96];
            loc_index(iloc, sizeof iloc, key, i);
            snprintf(path, sizeof path, "%s[%d]", key, i);
            iv_inputs_free(out); /* /similarity's sentences live outside the request (found by schemathesis) */
            return type_error(err, path, x, "a string", iloc, "string_type", "Input should be a valid string");
        }
        set_text(out, &out->items[i], x);
        i++;
    }
    return 0;
}

/* ---- encoding ---- */

void iv_codec_base64(iv_strbuf *b, const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char chunk[256];
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n) v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        chunk[k++] = tab[(v >> 18) & 63];
        chunk[k++] = tab[(v >> 12) & 63];
        chunk[k++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        chunk[k++] = i + 2 < n ? tab[v & 63] : '=';
        if (k + 4 > sizeof chunk) {
            iv_sb_append(b, chunk, k);
            k = 0;
        }
    }
    iv_sb_append(b, chunk, k);
}

/* Base64 of n floats as little-endian float32 bytes, whatever the host order. */
static void put_le_f32_base64(iv_strbuf *b, const float *v, size_t n)
{
    unsigned char *bytes = malloc(n * 4 + 1);
    if (!bytes) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        bytes[4 * i] = (unsigned char)u;
        bytes[4 * i + 1] = (unsigned char)(u >> 8);
        bytes[4 * i + 2] = (unsigned char)(u >> 16);
        bytes[4 * i + 3] = (unsigned char)(u >> 24);
    }
    iv_sb_putc(b, '"');
    iv_codec_base64(b, bytes, n * 4);
    iv_sb_putc(b, '"');
    free(bytes);
}

void iv_codec_embedding(iv_strbuf *b, const float *v, int n, int base64)
{
    if (base64) put_le_f32_base64(b, v, (size_t)n);
    else iv_sb_float_array(b, v, (size_t)n);
}

void iv_codec_matrix(iv_strbuf *b, const float *v, int rows, int cols, int format)
{
    if (format == IV_ENCODING_TENSOR) {
        iv_sb_printf(b, "{\"shape\":[%d,%d],\"dtype\":\"float32\",\"data\":", rows, cols);
        put_le_f32_base64(b, v, (size_t)rows * (size_t)cols);
        iv_sb_putc(b, '}');
        return;
    }
    iv_sb_putc(b, '[');
    for (int t = 0; t < rows; t++) {
        if (t) iv_sb_putc(b, ',');
        iv_codec_embedding(b, v + (size_t)t * (size_t)cols, cols, format == IV_ENCODING_BASE64);
    }
    iv_sb_putc(b, ']');
}

void iv_codec_sparse(iv_strbuf *b, const float *v, int n)
{
    iv_sb_putc(b, '[');
    int first = 1;
    for (int k = 0; k < n; k++) {
        if (v[k] == 0.0f) continue;
        iv_sb_puts(b, first ? "{\"index\":" : ",{\"index\":");
        iv_sb_int(b, k);
        iv_sb_puts(b, ",\"value\":");
        iv_sb_float(b, v[k]);
        iv_sb_putc(b, '}');
        first = 0;
    }
    iv_sb_putc(b, ']');
}
