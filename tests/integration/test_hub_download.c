/* Hub downloads against a fake hub on 127.0.0.1 (tests/integration/fake_hub.c):
 * the cache layout huggingface_hub expects, cache reuse without network,
 * resume, retries, checksums, errors, offline mode and revisions. */
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sha256.h"
#include "engine/resolve.h"
#include "fake_hub.h"
#include "test.h"
#include "unit/test_resolve_util.h"

#define TINY_ID "acme/tiny-embed"
#define TINY_COMMIT "1111111111111111111111111111111111111111"
#define SHARDED_ID "acme/sharded-embed"
#define SHARDED_COMMIT "2222222222222222222222222222222222222222"
#define WEIGHTS_LEN 300000

/* Pseudo-random bytes standing in for weights (content is never parsed). */
static unsigned char *weights(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (unsigned char)(x >> 24);
    }
    return p;
}

static void add_text(fake_repo *r, const char *name, const char *text)
{
    fake_repo_add(r, name, text, strlen(text), 0);
}

static fake_hub *make_hub(void)
{
    fake_hub *h = fake_hub_new();
    unsigned char *w = weights(WEIGHTS_LEN, 1), *junk = weights(5000, 2);

    fake_repo *r = fake_hub_add_repo(h, TINY_ID, TINY_COMMIT);
    add_text(r, "config.json", "{\"architectures\":[\"BertModel\"],\"model_type\":\"bert\"}");
    add_text(r, "tokenizer.json", "{\"version\":\"1.0\"}");
    add_text(r, "tokenizer_config.json", "{}");
    add_text(r, "special_tokens_map.json", "{}");
    add_text(r, "vocab.txt", "[PAD]\n[UNK]\n"); /* not needed: tokenizer.json exists */
    add_text(r, "modules.json",
             "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models."
             "Transformer\"},{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":"
             "\"sentence_transformers.models.Pooling\"},{\"idx\":2,\"name\":\"2\",\"path\":"
             "\"2_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]");
    add_text(r, "sentence_bert_config.json", "{\"max_seq_length\":128}");
    add_text(r, "config_sentence_transformers.json", "{}");
    add_text(r, "1_Pooling/config.json", "{\"pooling_mode_mean_tokens\":true}");
    fake_repo_add(r, "model.safetensors", w, WEIGHTS_LEN, 1);
    fake_repo_add(r, "pytorch_model.bin", junk, 5000, 1);
    fake_repo_add(r, "onnx/model.onnx", junk, 4000, 1);
    fake_repo_add(r, "tf_model.h5", junk, 3000, 1);
    add_text(r, "README.md", "# tiny\n");
    add_text(r, ".gitattributes", "*.safetensors filter=lfs\n");

    r = fake_hub_add_repo(h, SHARDED_ID, SHARDED_COMMIT);
    add_text(r, "config.json", "{\"architectures\":[\"BertModel\"],\"model_type\":\"bert\"}");
    add_text(r, "vocab.txt", "[PAD]\n[UNK]\n"); /* needed: no tokenizer.json */
    add_text(r, "tokenizer_config.json", "{}");
    add_text(r, "modules.json",
             "[{\"idx\":0,\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
             "{\"idx\":1,\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
             "{\"idx\":2,\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"}]");
    add_text(r, "model.safetensors.index.json",
             "{\"metadata\":{},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
             "\"b\":\"model-00002-of-00002.safetensors\",\"c\":\"model-00001-of-00002.safetensors\"}}");
    fake_repo_add(r, "model-00001-of-00002.safetensors", w, 70000, 1);
    fake_repo_add(r, "model-00002-of-00002.safetensors", w + 70000, 50000, 1);
    add_text(r, "1_Pooling/config.json", "{\"pooling_mode_cls_token\":true}");
    add_text(r, "2_Dense/config.json", "{\"in_features\":8,\"out_features\":4}");
    fake_repo_add(r, "2_Dense/model.safetensors", w + 120000, 900, 1);
    fake_repo_add(r, "2_Dense/pytorch_model.bin", junk, 900, 1);
    fake_repo_add(r, "pytorch_model.bin", junk, 5000, 1);

    r = fake_hub_add_repo(h, "acme/bin-only", "3333333333333333333333333333333333333333");
    add_text(r, "config.json", "{}");
    add_text(r, "tokenizer.json", "{}");
    fake_repo_add(r, "pytorch_model.bin", junk, 5000, 1);

    free(w);
    free(junk);
    return h;
}

/* One test's world: a fake hub, a temporary HF_HOME, the environment saved. */
typedef struct hub_world {
    fake_hub *hub;
    rt_env env;
    char home[128], cache[256], repo[512];
    char out[PATH_MAX];
    iv_err err;
} hub_world;

static int world_open(hub_world *w)
{
    memset(w, 0, sizeof *w);
    rt_env_save(&w->env);
    iv_log_set_level(IV_LOG_WARN); /* keep the per-file download lines out of test output */
    if (rt_tmpdir(w->home)) return -1;
    snprintf(w->cache, sizeof w->cache, "%s/hub", w->home);
    snprintf(w->repo, sizeof w->repo, "%s/models--acme--tiny-embed", w->cache);
    setenv("HF_HOME", w->home, 1);
    w->hub = make_hub();
    if (!w->hub || fake_hub_start(w->hub)) return -1;
    setenv("HF_ENDPOINT", w->hub->endpoint, 1);
    return 0;
}

static void world_close(hub_world *w)
{
    if (w->hub) fake_hub_free(w->hub);
    rt_rmtree(w->home);
    rt_env_restore(&w->env);
    iv_log_set_level(IV_LOG_INFO);
}

static int resolve(hub_world *w, const char *id, const char *revision)
{
    iv_resolve_opts o = {.revision = revision};
    memset(&w->err, 0, sizeof w->err);
    return iv_resolve_model(id, &o, w->out, sizeof w->out, &w->err);
}

static int path_exists(const char *fmt_dir, const char *name)
{
    char p[PATH_MAX + 200];
    snprintf(p, sizeof p, "%s/%s", fmt_dir, name);
    struct stat st;
    return lstat(p, &st) == 0;
}

/* Checks that the snapshot file is a relative symlink to the blob and holds the content. */
static void check_pointer(const hub_world *w, const char *snapshot, const fake_file *f,
                          const char *expect_target)
{
    char p[PATH_MAX + 200], target[512];
    snprintf(p, sizeof p, "%s/%s", snapshot, f->name);
    ssize_t n = readlink(p, target, sizeof target - 1);
    CHECK_MSG(n > 0, "%s is not a symlink", p);
    if (n <= 0) return;
    target[n] = 0;
    CHECK_STR(target, expect_target);
    size_t len;
    char *got = rt_read(p, &len);
    CHECK_MSG(got && len == f->len && !memcmp(got, f->data, len), "content of %s differs", f->name);
    free(got);
}

static const fake_file *file_of(fake_hub *h, int repo, const char *name)
{
    for (int i = 0; i < h->repos[repo].n_files; i++)
        if (!strcmp(h->repos[repo].files[i].name, name)) return &h->repos[repo].files[i];
    return NULL;
}

TEST(hub_download_fills_cache_in_huggingface_layout)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "resolve failed: %s", w.err.msg);
    char snapshot[PATH_MAX + 100];
    snprintf(snapshot, sizeof snapshot, "%s/snapshots/%s", w.repo, TINY_COMMIT);
    CHECK_STR(w.out, snapshot);

    /* Plain files link to their git etag, LFS files to their sha256. */
    const fake_file *cfg = file_of(w.hub, 0, "config.json");
    char target[200];
    snprintf(target, sizeof target, "../../blobs/%s", cfg->etag);
    check_pointer(&w, snapshot, cfg, target);
    const fake_file *pool = file_of(w.hub, 0, "1_Pooling/config.json");
    snprintf(target, sizeof target, "../../../blobs/%s", pool->etag);
    check_pointer(&w, snapshot, pool, target);
    const fake_file *st = file_of(w.hub, 0, "model.safetensors");
    snprintf(target, sizeof target, "../../blobs/%s", st->sha256);
    check_pointer(&w, snapshot, st, target);
    const char *wanted[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                            "modules.json", "sentence_bert_config.json",
                            "config_sentence_transformers.json"};
    for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++)
        CHECK_MSG(path_exists(snapshot, wanted[i]), "%s not downloaded", wanted[i]);

    /* Nothing the engine cannot use was fetched. */
    const char *unwanted[] = {"vocab.txt", "pytorch_model.bin", "model.onnx", "tf_model.h5",
                              "README.md", ".gitattributes"};
    for (size_t i = 0; i < sizeof unwanted / sizeof *unwanted; i++) {
        CHECK_MSG(!path_exists(snapshot, unwanted[i]), "%s downloaded", unwanted[i]);
        CHECK_MSG(fake_hub_count(w.hub, unwanted[i]) == 0, "%s requested", unwanted[i]);
    }

    /* refs/main holds the commit; no partial files remain. */
    char ref[PATH_MAX + 20];
    snprintf(ref, sizeof ref, "%s/refs/main", w.repo);
    char *commit = rt_read(ref, NULL);
    CHECK_STR(commit, TINY_COMMIT);
    free(commit);
    char partial[PATH_MAX + 200];
    snprintf(partial, sizeof partial, "%s/blobs/%s.incomplete", w.repo, st->sha256);
    CHECK(access(partial, F_OK) != 0);
    world_close(&w);
}

TEST(hub_download_second_resolve_uses_cache_without_network)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    REQUIRE(resolve(&w, TINY_ID, NULL) == 0);
    char first[PATH_MAX];
    strcpy(first, w.out);
    fake_hub_stop(w.hub); /* any request now fails */
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "cached resolve failed: %s", w.err.msg);
    CHECK_STR(w.out, first);
    setenv("HF_HUB_OFFLINE", "1", 1);
    rc = resolve(&w, TINY_ID, "main");
    CHECK_MSG(rc == 0, "offline cached resolve failed: %s", w.err.msg);
    CHECK_STR(w.out, first);
    world_close(&w);
}

/* Writes the first `keep` bytes of the weights as a leftover .incomplete blob. */
static void leave_partial(hub_world *w, size_t keep)
{
    const fake_file *st = file_of(w->hub, 0, "model.safetensors");
    char p[PATH_MAX + 200];
    snprintf(p, sizeof p, "%s/blobs/%s.incomplete", w->repo, st->sha256);
    rt_write(p, st->data, keep);
}

static void check_weights(hub_world *w)
{
    const fake_file *st = file_of(w->hub, 0, "model.safetensors");
    char p[PATH_MAX + 100];
    snprintf(p, sizeof p, "%s/model.safetensors", w->out);
    size_t len;
    char *got = rt_read(p, &len);
    CHECK_MSG(got && len == st->len && !memcmp(got, st->data, len), "weights differ (%zu bytes)",
              len);
    free(got);
}

TEST(hub_download_resumes_partial_incomplete_with_range)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    leave_partial(&w, 100000);
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "resolve failed: %s", w.err.msg);
    CHECK_EQ_INT(fake_hub_count(w.hub, "range=bytes=100000-"), 1);
    CHECK_EQ_INT(w.hub->cdn_bytes, WEIGHTS_LEN - 100000);
    check_weights(&w);
    world_close(&w);
}

TEST(hub_download_verifies_finished_incomplete_without_fetching)
{
    /* A previous run got every byte but stopped before the rename. */
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    leave_partial(&w, WEIGHTS_LEN);
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "resolve failed: %s", w.err.msg);
    CHECK_EQ_INT(fake_hub_count(w.hub, "GET /cdn/"), 0);
    check_weights(&w);
    world_close(&w);
}

TEST(hub_download_restarts_when_server_ignores_range)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    w.hub->ignore_range = 1;
    leave_partial(&w, 100000);
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "resolve failed: %s", w.err.msg);
    CHECK_EQ_INT(w.hub->cdn_bytes, WEIGHTS_LEN);
    check_weights(&w);
    world_close(&w);
}

TEST(hub_download_resumes_after_dropped_connection)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    w.hub->drop_after = 120000;
    w.hub->drops_left = 1;
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "resolve failed: %s", w.err.msg);
    CHECK_EQ_INT(fake_hub_count(w.hub, "GET /cdn/"), 2);
    CHECK_EQ_INT(fake_hub_count(w.hub, "range=bytes=120000-"), 1);
    check_weights(&w);
    world_close(&w);
}

TEST(hub_download_rejects_checksum_mismatch)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    w.hub->corrupt_lfs = 1;
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_EQ_INT(rc, -1);
    CHECK_CONTAINS(w.err.msg, "checksum mismatch");
    CHECK_CONTAINS(w.err.msg, "model.safetensors");
    const fake_file *st = file_of(w.hub, 0, "model.safetensors");
    char blobs[PATH_MAX + 10];
    snprintf(blobs, sizeof blobs, "%s/blobs", w.repo);
    char name[100];
    snprintf(name, sizeof name, "%s.incomplete", st->sha256);
    CHECK(!path_exists(blobs, st->sha256));
    CHECK(!path_exists(blobs, name));
    char snapshot[PATH_MAX + 100];
    snprintf(snapshot, sizeof snapshot, "%s/snapshots/%s", w.repo, TINY_COMMIT);
    CHECK(!path_exists(snapshot, "model.safetensors"));
    /* Served intact again, the next run completes. */
    w.hub->corrupt_lfs = 0;
    rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "retry failed: %s", w.err.msg);
    check_weights(&w);
    world_close(&w);
}

TEST(hub_download_unknown_model_is_not_found)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    /* Anonymous: the hub's 401 may hide a private repository, so both are named. */
    CHECK_EQ_INT(resolve(&w, "acme/no-such-model", NULL), -1);
    CHECK_EQ_INT(w.err.code, IV_E_NOTFOUND);
    CHECK_CONTAINS(w.err.msg, "model acme/no-such-model not found on the hub");
    CHECK_CONTAINS(w.err.msg, "set HF_TOKEN");
    /* With a token, a plain 404. */
    setenv("HF_TOKEN", "hf_any", 1);
    CHECK_EQ_INT(resolve(&w, "acme/no-such-model", NULL), -1);
    CHECK_EQ_INT(w.err.code, IV_E_NOTFOUND);
    CHECK_CONTAINS(w.err.msg, "model acme/no-such-model not found on the hub");
    CHECK(strstr(w.err.msg, "HF_TOKEN") == NULL);
    unsetenv("HF_TOKEN");
    CHECK_EQ_INT(resolve(&w, TINY_ID, "no-such-branch"), -1);
    CHECK_EQ_INT(w.err.code, IV_E_NOTFOUND);
    CHECK_CONTAINS(w.err.msg, "revision 'no-such-branch'");
    world_close(&w);
}

TEST(hub_download_gated_model_needs_token)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    w.hub->require_token = "hf_secret";
    CHECK_EQ_INT(resolve(&w, TINY_ID, NULL), -1);
    CHECK_CONTAINS(w.err.msg, "gated or private");
    CHECK_CONTAINS(w.err.msg, "set HF_TOKEN");
    setenv("HF_TOKEN", "hf_wrong", 1);
    CHECK_EQ_INT(resolve(&w, TINY_ID, NULL), -1);
    CHECK_CONTAINS(w.err.msg, "has no access");
    /* The legacy variable works too; HF_TOKEN wins when both are set. */
    unsetenv("HF_TOKEN");
    setenv("HUGGING_FACE_HUB_TOKEN", "hf_secret", 1);
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "with token: %s", w.err.msg);
    check_weights(&w);
    /* The token went to the hub but not to the storage host it redirected to. */
    CHECK(fake_hub_count(w.hub, "GET /cdn/") >= 1);
    CHECK_EQ_INT(w.hub->cdn_auth, 0);
    world_close(&w);
}

TEST(hub_download_token_file_is_used)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    w.hub->require_token = "hf_from_file";
    char p[PATH_MAX + 10];
    snprintf(p, sizeof p, "%s/token", w.home); /* where `huggingface-cli login` writes it */
    rt_write_str(p, "hf_from_file\n");
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "with token file: %s", w.err.msg);
    world_close(&w);
}

TEST(hub_download_offline_without_cache_is_not_found)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    setenv("HF_HUB_OFFLINE", "true", 1);
    CHECK_EQ_INT(resolve(&w, TINY_ID, NULL), -1);
    CHECK_EQ_INT(w.err.code, IV_E_NOTFOUND);
    CHECK_CONTAINS(w.err.msg, "HF_HUB_OFFLINE");
    CHECK_CONTAINS(w.err.msg, w.cache);
    CHECK_EQ_INT(w.hub->n_requests, 0);
    /* The option does the same without the variable. */
    unsetenv("HF_HUB_OFFLINE");
    iv_resolve_opts o = {.offline = 1};
    CHECK_EQ_INT(iv_resolve_model(TINY_ID, &o, w.out, sizeof w.out, &w.err), -1);
    CHECK_EQ_INT(w.err.code, IV_E_NOTFOUND);
    CHECK_EQ_INT(w.hub->n_requests, 0);
    world_close(&w);
}

TEST(hub_download_revision_as_commit_or_tag)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    int rc = resolve(&w, TINY_ID, TINY_COMMIT);
    CHECK_MSG(rc == 0, "commit revision: %s", w.err.msg);
    char snapshot[PATH_MAX + 100];
    snprintf(snapshot, sizeof snapshot, "%s/snapshots/%s", w.repo, TINY_COMMIT);
    CHECK_STR(w.out, snapshot);
    /* A commit needs no ref; huggingface_hub writes none either. */
    char refs[PATH_MAX + 10];
    snprintf(refs, sizeof refs, "%s/refs", w.repo);
    CHECK(!path_exists(refs, TINY_COMMIT));
    CHECK(!path_exists(refs, "main"));
    CHECK_EQ_INT(fake_hub_count(w.hub, "/revision/" TINY_COMMIT), 1);
    /* A tag gets its ref and reuses the downloaded files. */
    fake_hub_reset_log(w.hub);
    rc = resolve(&w, TINY_ID, "v1");
    CHECK_MSG(rc == 0, "tag revision: %s", w.err.msg);
    CHECK_STR(w.out, snapshot);
    CHECK(path_exists(refs, "v1"));
    CHECK_EQ_INT(fake_hub_count(w.hub, "/cdn/"), 0);
    /* Offline, the commit resolves from snapshots/ alone. */
    fake_hub_stop(w.hub);
    setenv("HF_HUB_OFFLINE", "1", 1);
    rc = resolve(&w, TINY_ID, TINY_COMMIT);
    CHECK_MSG(rc == 0, "offline commit: %s", w.err.msg);
    world_close(&w);
}

TEST(hub_download_sharded_weights_and_dense_module)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    int rc = resolve(&w, SHARDED_ID, NULL);
    CHECK_MSG(rc == 0, "resolve failed: %s", w.err.msg);
    const char *wanted[] = {"config.json", "vocab.txt", "modules.json",
                            "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                            "model-00002-of-00002.safetensors", "1_Pooling/config.json",
                            "2_Dense/config.json", "2_Dense/model.safetensors"};
    for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++) {
        CHECK_MSG(path_exists(w.out, wanted[i]), "%s not downloaded", wanted[i]);
        const fake_file *f = file_of(w.hub, 1, wanted[i]);
        char p[PATH_MAX + 100];
        snprintf(p, sizeof p, "%s/%s", w.out, wanted[i]);
        size_t len;
        char *got = rt_read(p, &len);
        CHECK_MSG(got && f && len == f->len && !memcmp(got, f->data, len), "%s differs", wanted[i]);
        free(got);
    }
    CHECK_EQ_INT(fake_hub_count(w.hub, "pytorch_model.bin"), 0);
    /* Each shard once, though the index names the first twice. */
    CHECK_EQ_INT(fake_hub_count(w.hub, "HEAD /acme/sharded-embed/resolve/" SHARDED_COMMIT
                                       "/model-00001-of-00002.safetensors"), 1);
    /* Complete now: a second resolve asks nothing. */
    fake_hub_reset_log(w.hub);
    CHECK_EQ_INT(resolve(&w, SHARDED_ID, NULL), 0);
    CHECK_EQ_INT(w.hub->n_requests, 0);
    world_close(&w);
}

TEST(hub_download_refuses_repo_without_safetensors)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    CHECK_EQ_INT(resolve(&w, "acme/bin-only", NULL), -1);
    CHECK_EQ_INT(w.err.code, IV_E_UNSUPPORTED);
    CHECK_CONTAINS(w.err.msg, "pytorch_model.bin");
    CHECK_CONTAINS(w.err.msg, "safetensors");
    CHECK_EQ_INT(fake_hub_count(w.hub, "resolve/"), 0);
    world_close(&w);
}

TEST(hub_download_unreachable_endpoint_names_it)
{
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    char endpoint[64];
    strcpy(endpoint, w.hub->endpoint);
    fake_hub_stop(w.hub); /* nothing listens on that port now */
    CHECK_EQ_INT(resolve(&w, TINY_ID, NULL), -1);
    CHECK_EQ_INT(w.err.code, IV_E_IO);
    CHECK_CONTAINS(w.err.msg, endpoint);
    CHECK_CONTAINS(w.err.msg, "HF_HUB_OFFLINE");
    CHECK_CONTAINS(w.err.msg, "local model directory");
    world_close(&w);
}

TEST(hub_download_completes_partial_cache_from_python_tools)
{
    /* A snapshot holding only config.json (say, from AutoConfig): online,
     * the rest is fetched into the same snapshot and the file is kept. */
    hub_world w;
    REQUIRE(world_open(&w) == 0);
    char p[PATH_MAX + 200];
    snprintf(p, sizeof p, "%s/refs/main", w.repo);
    rt_write_str(p, TINY_COMMIT);
    snprintf(p, sizeof p, "%s/snapshots/%s/config.json", w.repo, TINY_COMMIT);
    const fake_file *cfg = file_of(w.hub, 0, "config.json");
    rt_write(p, cfg->data, cfg->len);
    int rc = resolve(&w, TINY_ID, NULL);
    CHECK_MSG(rc == 0, "resolve failed: %s", w.err.msg);
    CHECK_EQ_INT(fake_hub_count(w.hub, TINY_COMMIT "/config.json"), 0);
    CHECK_EQ_INT(fake_hub_count(w.hub, TINY_COMMIT "/1_Pooling/config.json"), 2); /* HEAD, GET */
    check_weights(&w);
    world_close(&w);
}
