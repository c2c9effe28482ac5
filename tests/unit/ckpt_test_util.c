#include "unit/ckpt_test_util.h"

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
static int link_weights_of(const char *dir, const char *fixture)
{
    char src[4096], abs[4096], dst[4096];
    snprintf(src, sizeof src, "%s/models/%s/model.safetensors", iv_test_fixtures_dir(), fixture);
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    if (!realpath(src, abs) || symlink(abs, dst)) {
        iv_test_fail(__FILE__, __LINE__, "cannot link %s into %s", src, dir);
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
