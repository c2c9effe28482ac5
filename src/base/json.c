#include "base/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"

static const iv_json_recorder *g_recorder;

void iv_json_set_recorder(const iv_json_recorder *r)
{
    g_recorder = r;
}

cJSON *iv_json_get(const cJSON *obj, const char *key)
{
    if (!obj) return NULL;
    if (g_recorder && g_recorder->on_get) g_recorder->on_get(g_recorder->ctx, obj, key);
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

int iv_json_parse(const char *buf, size_t len, const char *what, cJSON **out, iv_err *err)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (!j) {
        size_t off = end ? (size_t)(end - buf) : 0;
        return iv_errf(err, IV_E_FORMAT, "%s: malformed JSON near byte %zu", what, off);
    }
    iv_json_mark_floats(j, buf, len);
    if (g_recorder && g_recorder->on_parse) g_recorder->on_parse(g_recorder->ctx, j, what);
    *out = j;
    return 0;
}

int iv_json_load_file(const char *path, size_t max_size, cJSON **out, iv_err *err)
{
    char *buf;
    size_t len;
    if (iv_file_read_all(path, max_size, &buf, &len, err)) return -1;
    int rc = iv_json_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}

static const cJSON *item(const cJSON *obj, const char *key)
{
    if (!obj || !cJSON_IsObject(obj)) return NULL;
    const cJSON *v = iv_json_get(obj, key);
    if (!v || cJSON_IsNull(v)) return NULL;
    return v;
}

int iv_json_is_integer(const cJSON *v)
{
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    return isfinite(d) && d == floor(d) && fabs(d) <= 9007199254740992.0;
}

int64_t iv_json_int(const cJSON *obj, const char *key, int64_t def)
{
    const cJSON *v = item(obj, key);
    return v && iv_json_is_integer(v) ? (int64_t)v->valuedouble : def;
}

double iv_json_num(const cJSON *obj, const char *key, double def)
{
    const cJSON *v = item(obj, key);
    return v && cJSON_IsNumber(v) ? v->valuedouble : def;
}

int iv_json_bool(const cJSON *obj, const char *key, int def)
{
    const cJSON *v = item(obj, key);
    return v && cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

const char *iv_json_str(const cJSON *obj, const char *key, const char *def)
{
    const cJSON *v = item(obj, key);
    return v && cJSON_IsString(v) ? v->valuestring : def;
}

int iv_json_int_chk(const cJSON *obj, const char *key, int64_t def, int64_t *out, const char *what,
                    iv_err *err)
{
    const cJSON *v = item(obj, key);
    if (!v) { *out = def; return 0; }
    if (!iv_json_is_integer(v))
        return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be an integer", what, key);
    *out = (int64_t)v->valuedouble;
    return 0;
}

int iv_json_num_chk(const cJSON *obj, const char *key, double def, double *out, const char *what,
                    iv_err *err)
{
    const cJSON *v = item(obj, key);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsNumber(v))
        return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be a number", what, key);
    *out = v->valuedouble;
    return 0;
}

int iv_json_bool_chk(const cJSON *obj, const char *key, int def, int *out, const char *what,
                     iv_err *err)
{
    const cJSON *v = item(obj, key);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsBool(v))
        return iv_errf(err, IV_E_FORMAT, "%s: \"%s\" must be true or false", what, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int hex4(const char *p, unsigned *v)
{
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') x |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') x |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *v = x;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int iv_json_decode_string(const char *p, size_t len, char **out, size_t *out_len, size_t *consumed,
                          iv_err *err)
{
    size_t i = 0;
    *out = NULL;
    while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
    if (i >= len || p[i] != '"') return iv_errf(err, IV_E_INVALID, "expected a JSON string");
    i++;
    /* Escapes never expand: the output fits in the remaining input. */
    char *o = malloc(len - i + 1);
    if (!o) return iv_errf(err, IV_E_NOMEM, "out of memory decoding a JSON string");
    size_t n = 0;
    for (;;) {
        if (i >= len) {
            free(o);
            return iv_errf(err, IV_E_INVALID, "unterminated JSON string");
        }
        unsigned char c = (unsigned char)p[i];
        if (c == '"') {
            i++;
            break;
        }
        if (c < 0x20) {
            free(o);
            return iv_errf(err, IV_E_INVALID, "control character 0x%02X inside a JSON string", c);
        }
        if (c != '\\') {
            o[n++] = (char)c;
            i++;
            continue;
        }
        if (i + 1 >= len) {
            free(o);
            return iv_errf(err, IV_E_INVALID, "unterminated escape in a JSON string");
        }
        char e = p[i + 1];
        i += 2;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (i + 4 > len || hex4(p + i, &cp)) {
                free(o);
                return iv_errf(err, IV_E_INVALID, "bad \\u escape in a JSON string");
            }
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (i + 6 <= len && p[i] == '\\' && p[i + 1] == 'u' && !hex4(p + i + 2, &lo) &&
                    lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                } else {
                    cp = 0xFFFD;
                }
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                cp = 0xFFFD;
            }
            n += put_utf8(o + n, cp);
            break;
        }
        default:
            free(o);
            return iv_errf(err, IV_E_INVALID, "bad escape \\%c in a JSON string", e);
        }
    }
    o[n] = 0;
    *out = o;
    if (out_len) *out_len = n;
    if (consumed) *consumed = i;
    return 0;
}

/* The next number token of the JSON text at or after *pos (strings skipped);
 * 1 when it was written with a fraction or an exponent, 0 when not, -1 when
 * the text holds no further number. */
static int next_number_is_float(const char *buf, size_t len, size_t *pos)
{
    size_t i = *pos;
    while (i < len) {
        char c = buf[i];
        if (c == '"') {
            for (i++; i < len && buf[i] != '"'; i++)
                if (buf[i] == '\\') i++;
            i++;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            int fl = 0;
            for (; i < len && strchr("0123456789+-eE.", buf[i]) && buf[i]; i++)
                if (buf[i] == '.' || buf[i] == 'e' || buf[i] == 'E') fl = 1;
            *pos = i;
            return fl;
        }
        i++;
    }
    *pos = len;
    return -1;
}

/* Depth first, children in order: the order cJSON met the numbers in. */
static int mark_floats(cJSON *j, const char *buf, size_t len, size_t *pos)
{
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            int fl = next_number_is_float(buf, len, pos);
            if (fl < 0) return -1;
            if (fl) j->type |= IV_JSON_FLOAT;
        } else if (j->child && mark_floats(j->child, buf, len, pos)) {
            return -1;
        }
    }
    return 0;
}

void iv_json_mark_floats(cJSON *root, const char *buf, size_t len)
{
    size_t pos = 0;
    if (!root) return;
    if (cJSON_IsNumber(root) || !root->child) {
        /* a lone number (root->next is never set on a parsed root) */
        if (cJSON_IsNumber(root) && next_number_is_float(buf, len, &pos) == 1) root->type |= IV_JSON_FLOAT;
        return;
    }
    mark_floats(root->child, buf, len, &pos);
}

int iv_json_is_float(const cJSON *v) { return cJSON_IsNumber(v) && (v->type & IV_JSON_FLOAT); }
