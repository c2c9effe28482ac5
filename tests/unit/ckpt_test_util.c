#include "unit/ckpt_test_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "test.h"

int ckpt_write(const char *dir, const char *name, const void *data, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? 0 : -1;
}

/* The fixture's config.json, edited, written to dir. */
static int write_config(const char *dir, const char *fixture, ckpt_edit_fn edit)
{
    char src[4096];
    snprintf(src, sizeof src, "%s/models/%s/config.json", iv_test_fixtures_dir(), fixture);
    cJSON *cfg;
    iv_err err = {0};
    if (iv_json_load_file(src, 1 << 20, &cfg, &err)) {
        iv_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    if (edit) edit(cfg);
    char *txt = cJSON_Print(cfg);
    int rc = txt ? ckpt_write(dir, "config.json", txt, strlen(txt)) : -1;
    free(txt);
    cJSON_Delete(cfg);
    if (rc) iv_test_fail(__FILE__, __LINE__, "cannot write %s/config.json", dir);
    return rc;
}

/* A link, not a copy: the weights are only read, and some fixtures are large. */
int ckpt_link(const char *dir, const char *fixture, const char *name)
{
    char src[4096], abs[4096], dst[4096];
    snprintf(src, sizeof src, "%s/models/%s/%s", iv_test_fixtures_dir(), fixture, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    if (!realpath(src, abs) || symlink(abs, dst)) {
        iv_test_fail(__FILE__, __LINE__, "cannot link %s into %s", src, dir);
        return -1;
    }
    return 0;
}

static int link_weights_of(const char *dir, const char *fixture)
{
    return ckpt_link(dir, fixture, "model.safetensors");
}

static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    long len = -1;
    if (!fseek(f, 0, SEEK_END) && (len = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET)) buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static int dropped(const char *name, const char *const *drop)
{
    for (int i = 0; drop && drop[i]; i++)
        if (!strncmp(name, drop[i], strlen(drop[i]))) return 1;
    return 0;
}

/* safetensors: u64 header length, JSON header {name: {dtype, shape,
 * data_offsets [begin, end)}}, then the data; offsets are rebuilt here. */
static int write_weights(const char *dir, const char *fixture, const char *const *drop, const char *extra_name,
                         const long long *extra_shape, int extra_ndim, float extra_fill)
{
    char src[4096];
    snprintf(src, sizeof src, "%s/models/%s/model.safetensors", iv_test_fixtures_dir(), fixture);
    size_t n = 0;
    unsigned char *in = read_all(src, &n);
    if (!in || n < 8) return free(in), -1;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | in[i];
    if (hlen > n - 8) return free(in), -1;
    cJSON *hdr = cJSON_ParseWithLength((const char *)in + 8, (size_t)hlen);
    cJSON *out = cJSON_CreateObject();
    const unsigned char *data = in + 8 + hlen;
    size_t cap = n + 4096, used = 0;
    long long extra_elems = 1;
    for (int i = 0; extra_name && i < extra_ndim; i++) extra_elems *= extra_shape[i];
    if (extra_name) cap += (size_t)extra_elems * 4;
    unsigned char *body = calloc(1, cap);
    int rc = hdr && out && body ? 0 : -1;
    for (cJSON *t = hdr ? hdr->child : NULL; t && !rc; t = t->next) {
        if (!strcmp(t->string, "__metadata__") || dropped(t->string, drop)) continue;
        cJSON *offs = cJSON_GetObjectItem(t, "data_offsets");
        const size_t b = (size_t)cJSON_GetArrayItem(offs, 0)->valuedouble, e = (size_t)cJSON_GetArrayItem(offs, 1)->valuedouble;
        memcpy(body + used, data + b, e - b);
        cJSON *copy = cJSON_Duplicate(t, 1);
        cJSON_ReplaceItemInObject(copy, "data_offsets",
                                  cJSON_CreateDoubleArray((const double[]){(double)used, (double)(used + e - b)}, 2));
        cJSON_AddItemToObject(out, t->string, copy);
        used += e - b;
    }
    if (!rc && extra_name) {
        cJSON *t = cJSON_AddObjectToObject(out, extra_name);
        cJSON_AddStringToObject(t, "dtype", "F32");
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (int i = 0; i < extra_ndim; i++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)extra_shape[i]));
        cJSON_AddItemToObject(t, "data_offsets", cJSON_CreateDoubleArray(
                                                     (const double[]){(double)used, (double)(used + extra_elems * 4)}, 2));
        for (long long i = 0; i < extra_elems; i++) memcpy(body + used + 4 * (size_t)i, &extra_fill, 4);
        used += (size_t)extra_elems * 4;
    }
    char *txt = rc ? NULL : cJSON_PrintUnformatted(out);
    if (txt) {
        const uint64_t len = strlen(txt);
        unsigned char *file = malloc(8 + len + used);
        for (int i = 0; i < 8; i++) file[i] = (unsigned char)(len >> (8 * i));
        memcpy(file + 8, txt, len);
        memcpy(file + 8 + len, body, used);
        rc = ckpt_write(dir, "model.safetensors", file, 8 + len + used);
        free(file);
    } else {
        rc = -1;
    }
    free(txt);
    free(body);
    cJSON_Delete(out);
    cJSON_Delete(hdr);
    free(in);
    return rc;
}

int ckpt_write_weights(const char *dir, const char *fixture, const char *const *drop, const char *extra_name,
                       const long long *extra_shape, int extra_ndim)
{
    return ckpt_write_weights_filled(dir, fixture, drop, extra_name, extra_shape, extra_ndim, 0.0f);
}

int ckpt_write_weights_filled(const char *dir, const char *fixture, const char *const *drop, const char *extra_name,
                              const long long *extra_shape, int extra_ndim, float extra_fill)
{
    if (write_weights(dir, fixture, drop, extra_name, extra_shape, extra_ndim, extra_fill)) {
        iv_test_fail(__FILE__, __LINE__, "cannot write %s/model.safetensors from %s", dir, fixture);
        return -1;
    }
    return 0;
}

int ckpt_make(char *dir, size_t cap, const char *fixture, ckpt_edit_fn edit, int link_weights)
{
    if (tmp_dir(dir, cap, "ckpt")) {
        iv_test_fail(__FILE__, __LINE__, "cannot make a temp dir for a checkpoint from %s", fixture);
        return -1;
    }
    if (write_config(dir, fixture, edit) || (link_weights && link_weights_of(dir, fixture))) {
        tmp_rmtree(dir);
        return -1;
    }
    return 0;
}

void ckpt_set(cJSON *cfg, const char *key, cJSON *v)
{
    if (cJSON_GetObjectItemCaseSensitive(cfg, key)) cJSON_ReplaceItemInObjectCaseSensitive(cfg, key, v);
    else cJSON_AddItemToObject(cfg, key, v);
}

void ckpt_expect_load_error_at(const char *file, int line, const char *dir, const char *what, const char *needle,
                               int code)
{
    iv_engine *e = NULL;
    iv_err err = {0};
    int rc = iv_engine_load(&e, dir, NULL, &err);
    if (rc != -1) iv_test_fail(file, line, "%s: loaded although it should say \"%s\"", what, needle);
    if (e) {
        iv_test_fail(file, line, "%s: the failed load returned an engine", what);
        iv_engine_free(e);
    }
    if (!strstr(err.msg, needle))
        iv_test_fail(file, line, "%s: error \"%s\" does not mention \"%s\"", what, err.msg, needle);
    if (err.code != code) iv_test_fail(file, line, "%s: error code %d, want %d (%s)", what, err.code, code, err.msg);
}

void ckpt_expect_reject_at(const char *file, int line, const char *fixture, ckpt_edit_fn edit, const char *needle,
                           int code)
{
    char dir[256];
    if (ckpt_make(dir, sizeof dir, fixture, edit, 1)) {
        iv_test_fail(file, line, "cannot build a checkpoint from %s", fixture);
        return;
    }
    ckpt_expect_load_error_at(file, line, dir, fixture, needle, code);
    tmp_rmtree(dir);
}
