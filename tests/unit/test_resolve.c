/* Model resolution without any network: hub id validation, local
 * directories, cache lookup and completeness, environment precedence and
 * the choice of files to download. Downloads are in
 * tests/integration/test_hub_download.c. */
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "engine/hub.h"
#include "engine/resolve.h"
#include "test.h"
#include "unit/test_resolve_util.h"

#define COMMIT "0123456789abcdef0123456789abcdef01234567"

TEST(resolve_hub_id_validation)
{
    const char *good[] = {"BAAI/bge-small-en-v1.5", "sentence-transformers/all-MiniLM-L6-v2",
                          "a/b", "org_x/name.v2", "Qwen/Qwen3-Embedding-0.6B", "x1/_y"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK_MSG(iv_hub_id_valid(good[i]), "'%s' rejected", good[i]);
    char long_name[120] = "org/";
    memset(long_name + 4, 'a', 97);
    long_name[101] = 0;
    const char *bad[] = {"",      "noslash", "a/b/c", "/a",   "a/",    "a//b", "a/b c",  "a--b/c",
                         "a/b..c", "-a/b",   "a/b-",  "a/.b", "a/b.",  "a/b\n", "\xc3\xbc/x",
                         "a/b?x", "a/b#c",  long_name};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_MSG(!iv_hub_id_valid(bad[i]), "'%s' accepted", bad[i]);
    CHECK(!iv_hub_id_valid(NULL));
}

TEST(resolve_rejects_invalid_ids_and_revisions)
{
    rt_env env;
    rt_env_save(&env);
    setenv("HF_HUB_OFFLINE", "1", 1);
    char out[PATH_MAX];
    iv_err err = {0};
    const char *ids[] = {"no-slash-model", "a/b/c", "org/na me", "org--x/y"};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        CHECK_EQ_INT(iv_resolve_model(ids[i], NULL, out, sizeof out, &err), -1);
        CHECK_EQ_INT(err.code, IV_E_INVALID);
        CHECK_CONTAINS(err.msg, "neither a local directory nor a Hugging Face hub id");
    }
    CHECK_EQ_INT(iv_resolve_model("", NULL, out, sizeof out, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_INVALID);
    const char *revs[] = {"../x", "/abs", "a b", "a//b", "x/"};
    for (size_t i = 0; i < sizeof revs / sizeof *revs; i++) {
        iv_resolve_opts o = {.revision = revs[i]};
        CHECK_EQ_INT(iv_resolve_model("org/name", &o, out, sizeof out, &err), -1);
        CHECK_EQ_INT(err.code, IV_E_INVALID);
        CHECK_CONTAINS(err.msg, "invalid revision");
    }
    rt_env_restore(&env);
}

TEST(resolve_local_directory_absolute_and_relative)
{
    char tmp[64], dir[PATH_MAX + 20], p[PATH_MAX + 40], out[PATH_MAX], cwd[PATH_MAX];
    REQUIRE(rt_tmpdir(tmp) == 0);
    snprintf(dir, sizeof dir, "%s/model", tmp);
    snprintf(p, sizeof p, "%s/config.json", dir);
    REQUIRE(rt_write_str(p, "{}") == 0);
    iv_err err = {0};
    CHECK_EQ_INT(iv_resolve_model(dir, NULL, out, sizeof out, &err), 0);
    CHECK_STR(out, dir);
    /* Relative to the working directory, even when it looks like org/name. */
    REQUIRE(getcwd(cwd, sizeof cwd) != NULL);
    REQUIRE(chdir("/tmp") == 0);
    char rel[128];
    snprintf(rel, sizeof rel, "%s/model", tmp + 5); /* "iv_resolve_XXXXXX/model" */
    int rc = iv_resolve_model(rel, NULL, out, sizeof out, &err);
    CHECK_EQ_INT(chdir(cwd), 0);
    CHECK_MSG(rc == 0, "relative: %s", err.msg);
    CHECK_STR(out, rel);
    /* Too small an output buffer is an error, not a truncated path. */
    char small[8];
    CHECK_EQ_INT(iv_resolve_model(dir, NULL, small, sizeof small, &err), -1);
    rt_rmtree(tmp);
}

TEST(resolve_local_directory_errors)
{
    char tmp[64], out[PATH_MAX];
    REQUIRE(rt_tmpdir(tmp) == 0);
    iv_err err = {0};
    CHECK_EQ_INT(iv_resolve_model(tmp, NULL, out, sizeof out, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_NOTFOUND);
    CHECK_CONTAINS(err.msg, "without config.json");
    char missing[PATH_MAX + 20];
    snprintf(missing, sizeof missing, "%s/absent", tmp);
    CHECK_EQ_INT(iv_resolve_model(missing, NULL, out, sizeof out, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_NOTFOUND);
    CHECK_CONTAINS(err.msg, "does not exist");
    CHECK_EQ_INT(iv_resolve_model("./no/such/dir", NULL, out, sizeof out, &err), -1);
    CHECK_CONTAINS(err.msg, "does not exist");
    char file[PATH_MAX + 20];
    snprintf(file, sizeof file, "%s/config.json", tmp);
    REQUIRE(rt_write_str(file, "{}") == 0);
    CHECK_EQ_INT(iv_resolve_model(file, NULL, out, sizeof out, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_INVALID);
    CHECK_CONTAINS(err.msg, "is a file");
    rt_rmtree(tmp);
}

/* A cached snapshot for org/name at COMMIT with the given files (blobs + symlinks). */
static void make_snapshot(const char *cache, const char *id, const char *const *files, int n,
                          const char *ref)
{
    iv_hub_repo r;
    iv_hub_repo_init(&r, cache, id);
    for (int i = 0; i < n; i++) {
        char blob[PATH_MAX + 100], name[64];
        snprintf(name, sizeof name, "blob-%s", files[i]); /* one blob per file name */
        for (char *c = name; *c; c++)
            if (*c == '/') *c = '_';
        snprintf(blob, sizeof blob, "%s/blobs/%s", r.dir, name);
        const char *content = strstr(files[i], "index.json")
                                  ? "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}"
                              : strstr(files[i], "modules.json")
                                  ? "[{\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
                                    "{\"path\":\"2_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]"
                                  : "{}";
        rt_write_str(blob, content);
        iv_err err;
        iv_hub_link_blob(&r, COMMIT, files[i], name, &err);
    }
    if (ref) iv_hub_write_ref(&r, ref, COMMIT, NULL);
}

TEST(resolve_complete_cache_needs_no_network)
{
    rt_env env;
    rt_env_save(&env);
    char tmp[64], cache[PATH_MAX + 10], out[PATH_MAX], want[PATH_MAX * 2];
    REQUIRE(rt_tmpdir(tmp) == 0);
    snprintf(cache, sizeof cache, "%s/c", tmp);
    setenv("HF_HUB_CACHE", cache, 1);
    setenv("HF_ENDPOINT", "http://127.0.0.1:1", 1); /* nothing listens: any request fails */
    const char *files[] = {"config.json", "tokenizer.json", "model.safetensors", "modules.json",
                           "1_Pooling/config.json"};
    make_snapshot(cache, "org/name", files, 5, "main");
    snprintf(want, sizeof want, "%s/models--org--name/snapshots/%s", cache, COMMIT);
    iv_err err = {0};
    int rc = iv_resolve_model("org/name", NULL, out, sizeof out, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    CHECK_STR(out, want);
    /* The commit itself works without refs; an unknown branch goes to the (dead) hub. */
    iv_resolve_opts o = {.revision = COMMIT};
    CHECK_EQ_INT(iv_resolve_model("org/name", &o, out, sizeof out, &err), 0);
    CHECK_STR(out, want);
    o.revision = "dev";
    CHECK_EQ_INT(iv_resolve_model("org/name", &o, out, sizeof out, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_IO);
    CHECK_CONTAINS(err.msg, "http://127.0.0.1:1");
    /* opts.cache_dir overrides the environment. */
    unsetenv("HF_HUB_CACHE");
    iv_resolve_opts oc = {.cache_dir = cache, .offline = 1};
    CHECK_EQ_INT(iv_resolve_model("org/name", &oc, out, sizeof out, &err), 0);
    CHECK_STR(out, want);
    /* The cache entry folder itself is accepted as a model path. */
    char entry[PATH_MAX + 40];
    snprintf(entry, sizeof entry, "%s/models--org--name", cache);
    CHECK_EQ_INT(iv_resolve_model(entry, NULL, out, sizeof out, &err), 0);
    CHECK_STR(out, want);
    rt_rmtree(tmp);
    rt_env_restore(&env);
}

TEST(resolve_snapshot_completeness)
{
    char tmp[64], snap[PATH_MAX + 100], missing[256];
    REQUIRE(rt_tmpdir(tmp) == 0);
    iv_hub_repo r;
    iv_hub_repo_init(&r, tmp, "o/n");
    iv_hub_snapshot_path(&r, COMMIT, NULL, snap, sizeof snap);

    const char *no_weights[] = {"config.json", "tokenizer.json"};
    make_snapshot(tmp, "o/n", no_weights, 2, NULL);
    CHECK(!iv_hub_snapshot_complete(snap, missing, sizeof missing));
    CHECK_STR(missing, "model.safetensors");

    /* Sharded: the index alone is not enough. */
    const char *index[] = {"model.safetensors.index.json", "s1.safetensors"};
    make_snapshot(tmp, "o/n", index, 2, NULL);
    CHECK(!iv_hub_snapshot_complete(snap, missing, sizeof missing));
    CHECK_STR(missing, "s2.safetensors");
    const char *shard2[] = {"s2.safetensors"};
    make_snapshot(tmp, "o/n", shard2, 1, NULL);
    CHECK(iv_hub_snapshot_complete(snap, missing, sizeof missing));

    /* A Pooling module without its config is incomplete; Normalize needs nothing. */
    const char *modules[] = {"modules.json"};
    make_snapshot(tmp, "o/n", modules, 1, NULL);
    CHECK(!iv_hub_snapshot_complete(snap, missing, sizeof missing));
    CHECK_STR(missing, "1_Pooling/config.json");
    const char *pool[] = {"1_Pooling/config.json"};
    make_snapshot(tmp, "o/n", pool, 1, NULL);
    CHECK(iv_hub_snapshot_complete(snap, missing, sizeof missing));

    /* A dangling symlink (blob deleted) counts as missing. */
    char blob[PATH_MAX + 100];
    snprintf(blob, sizeof blob, "%s/blobs/blob-s2.safetensors", r.dir);
    CHECK_EQ_INT(unlink(blob), 0);
    CHECK(!iv_hub_snapshot_complete(snap, missing, sizeof missing));
    CHECK_STR(missing, "s2.safetensors");
    rt_rmtree(tmp);
}

TEST(resolve_offline_uses_partial_snapshot_or_fails_clearly)
{
    rt_env env;
    rt_env_save(&env);
    char tmp[64], out[PATH_MAX];
    REQUIRE(rt_tmpdir(tmp) == 0);
    setenv("HF_HOME", tmp, 1);
    setenv("HF_HUB_OFFLINE", "1", 1);
    iv_err err = {0};
    CHECK_EQ_INT(iv_resolve_model("org/absent", NULL, out, sizeof out, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_NOTFOUND);
    CHECK_CONTAINS(err.msg, "HF_HUB_OFFLINE");
    CHECK_CONTAINS(err.msg, "org/absent");
    char cache[PATH_MAX + 10];
    snprintf(cache, sizeof cache, "%s/hub", tmp);
    CHECK_CONTAINS(err.msg, cache);
    /* Only config.json cached: returned (with a warning), the engine names what lacks. */
    const char *files[] = {"config.json"};
    make_snapshot(cache, "org/partial", files, 1, "main");
    iv_log_set_level(IV_LOG_ERROR);
    int rc = iv_resolve_model("org/partial", NULL, out, sizeof out, &err);
    iv_log_set_level(IV_LOG_INFO);
    CHECK_MSG(rc == 0, "%s", err.msg);
    CHECK_CONTAINS(out, "models--org--partial/snapshots/" COMMIT);
    rt_rmtree(tmp);
    rt_env_restore(&env);
}

TEST(resolve_environment_precedence)
{
    rt_env env;
    rt_env_save(&env);
    char buf[PATH_MAX];
    setenv("HOME", "/home/u", 1);
    iv_hub_cache_root(buf, sizeof buf);
    CHECK_STR(buf, "/home/u/.cache/huggingface/hub");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    iv_hub_cache_root(buf, sizeof buf);
    CHECK_STR(buf, "/xdg/huggingface/hub");
    setenv("HF_HOME", "~/hf", 1);
    iv_hub_cache_root(buf, sizeof buf);
    CHECK_STR(buf, "/home/u/hf/hub");
    setenv("HUGGINGFACE_HUB_CACHE", "/legacy", 1);
    iv_hub_cache_root(buf, sizeof buf);
    CHECK_STR(buf, "/legacy");
    setenv("HF_HUB_CACHE", "/new", 1);
    iv_hub_cache_root(buf, sizeof buf);
    CHECK_STR(buf, "/new");

    iv_hub_endpoint(buf, sizeof buf);
    CHECK_STR(buf, "https://huggingface.co");
    setenv("HF_ENDPOINT", "https://hf-mirror.com//", 1);
    iv_hub_endpoint(buf, sizeof buf);
    CHECK_STR(buf, "https://hf-mirror.com");

    /* Token: HF_TOKEN, then the legacy name, then the login file. */
    char tmp[64], p[PATH_MAX + 10];
    REQUIRE(rt_tmpdir(tmp) == 0);
    setenv("HF_HOME", tmp, 1);
    iv_hub_token(buf, sizeof buf);
    CHECK_STR(buf, "");
    snprintf(p, sizeof p, "%s/token", tmp);
    rt_write_str(p, "  hf_file\n");
    iv_hub_token(buf, sizeof buf);
    CHECK_STR(buf, "hf_file");
    setenv("HUGGING_FACE_HUB_TOKEN", "hf_legacy", 1);
    iv_hub_token(buf, sizeof buf);
    CHECK_STR(buf, "hf_legacy");
    setenv("HF_TOKEN", "hf_new", 1);
    iv_hub_token(buf, sizeof buf);
    CHECK_STR(buf, "hf_new");

    /* Offline switch: the first variable set decides, as in huggingface_hub. */
    CHECK(!iv_hub_offline_env());
    const char *on[] = {"1", "true", "TRUE", "yes", "On"}, *off[] = {"0", "false", "no"};
    for (size_t i = 0; i < 5; i++) {
        setenv("HF_HUB_OFFLINE", on[i], 1);
        CHECK_MSG(iv_hub_offline_env(), "HF_HUB_OFFLINE=%s", on[i]);
    }
    for (size_t i = 0; i < 3; i++) {
        setenv("HF_HUB_OFFLINE", off[i], 1);
        CHECK_MSG(!iv_hub_offline_env(), "HF_HUB_OFFLINE=%s", off[i]);
    }
    setenv("TRANSFORMERS_OFFLINE", "1", 1);
    CHECK(!iv_hub_offline_env());
    unsetenv("HF_HUB_OFFLINE");
    CHECK(iv_hub_offline_env());
    rt_rmtree(tmp);
    rt_env_restore(&env);
}

TEST(resolve_cache_layout_names)
{
    iv_hub_repo r;
    iv_hub_repo_init(&r, "/c", "BAAI/bge-m3");
    CHECK_STR(r.dir, "/c/models--BAAI--bge-m3");
    CHECK_STR(r.locks_dir, "/c/.locks/models--BAAI--bge-m3");
    CHECK(iv_hub_is_commit(COMMIT));
    CHECK(!iv_hub_is_commit("0123456789ABCDEF0123456789abcdef01234567"));
    CHECK(!iv_hub_is_commit("main"));
    CHECK(iv_hub_revision_valid("refs/pr/12"));
    CHECK(iv_hub_revision_valid("v1.0"));

    char tmp[64], link[PATH_MAX + 200], target[256];
    REQUIRE(rt_tmpdir(tmp) == 0);
    iv_hub_repo_init(&r, tmp, "o/n");
    iv_err err = {0};
    CHECK_EQ_INT(iv_hub_link_blob(&r, COMMIT, "a/b/c.json", "abc", &err), 0);
    iv_hub_snapshot_path(&r, COMMIT, "a/b/c.json", link, sizeof link);
    ssize_t n = readlink(link, target, sizeof target - 1);
    REQUIRE(n > 0);
    target[n] = 0;
    CHECK_STR(target, "../../../../blobs/abc");
    /* Relinking replaces the old pointer. */
    CHECK_EQ_INT(iv_hub_link_blob(&r, COMMIT, "a/b/c.json", "def", &err), 0);
    n = readlink(link, target, sizeof target - 1);
    REQUIRE(n > 0);
    target[n] = 0;
    CHECK_STR(target, "../../../../blobs/def");

    /* Refs: written atomically, read back, a branch with a slash nests. */
    char commit[41];
    CHECK_EQ_INT(iv_hub_cached_commit(&r, "refs/pr/1", commit), -1);
    CHECK_EQ_INT(iv_hub_write_ref(&r, "refs/pr/1", COMMIT, &err), 0);
    CHECK_EQ_INT(iv_hub_cached_commit(&r, "refs/pr/1", commit), 0);
    CHECK_STR(commit, COMMIT);
    rt_rmtree(tmp);
}

static void list_of(iv_strlist *l, const char *const *names, int n)
{
    for (int i = 0; i < n; i++) iv_strlist_add(l, names[i]);
}

TEST(resolve_file_selection)
{
    const char *repo[] = {"config.json",
                          "tokenizer.json",
                          "tokenizer_config.json",
                          "special_tokens_map.json",
                          "vocab.txt",
                          "modules.json",
                          "sentence_bert_config.json",
                          "config_sentence_transformers.json",
                          "model.safetensors",
                          "pytorch_model.bin",
                          "onnx/model.onnx",
                          "openvino/openvino_model.xml",
                          "README.md",
                          "1_Pooling/config.json",
                          "2_Dense/config.json",
                          "2_Dense/model.safetensors",
                          "2_Dense/pytorch_model.bin",
                          "3_Other/notes.md",
                          "chat_template.jinja",
                          "additional_chat_templates/tool_use.jinja",
                          "additional_chat_templates/nested/x.jinja",
                          "additional_chat_templates/notes.txt"};
    iv_strlist files = {0}, first = {0}, then = {0};
    list_of(&files, repo, (int)(sizeof repo / sizeof *repo));
    iv_err err = {0};
    REQUIRE(iv_hub_select_first(&files, "o/n", &first, &err) == 0);
    const char *want[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                          "special_tokens_map.json", "modules.json", "sentence_bert_config.json",
                          "config_sentence_transformers.json", "model.safetensors", "chat_template.jinja",
                          "additional_chat_templates/tool_use.jinja"};
    CHECK_EQ_INT(first.n, 10);
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK_MSG(iv_strlist_has(&first, want[i]), "%s not selected", want[i]);
    CHECK(!iv_strlist_has(&first, "vocab.txt"));

    /* The decision sidecars of a Clef or pplx-decider repository come with the weights. */
    {
        const char *dec[] = {"config.json", "tokenizer.json", "model.safetensors.index.json",
                             "model-00001-of-00002.safetensors", "joint_head_config.json", "joint_head.safetensors",
                             "joint_schema_model.py", "decision_config.json", "readout.safetensors"};
        iv_strlist df = {0}, dsel = {0};
        list_of(&df, dec, (int)(sizeof dec / sizeof *dec));
        REQUIRE(iv_hub_select_first(&df, "o/clef", &dsel, &err) == 0);
        CHECK(iv_strlist_has(&dsel, "joint_head_config.json") && iv_strlist_has(&dsel, "joint_head.safetensors"));
        CHECK(iv_strlist_has(&dsel, "decision_config.json") && iv_strlist_has(&dsel, "readout.safetensors"));
        CHECK(!iv_strlist_has(&dsel, "joint_schema_model.py"));
        iv_strlist_free(&df);
        iv_strlist_free(&dsel);
    }

    /* Module folders come from modules.json once it is in the snapshot. */
    char tmp[64], p[PATH_MAX + 20];
    REQUIRE(rt_tmpdir(tmp) == 0);
    snprintf(p, sizeof p, "%s/modules.json", tmp);
    rt_write_str(p, "[{\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
                    "{\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
                    "{\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"}]");
    REQUIRE(iv_hub_select_then(&files, tmp, &then, &err) == 0);
    CHECK_EQ_INT(then.n, 3);
    CHECK(iv_strlist_has(&then, "1_Pooling/config.json"));
    CHECK(iv_strlist_has(&then, "2_Dense/config.json"));
    CHECK(iv_strlist_has(&then, "2_Dense/model.safetensors"));
    iv_strlist_free(&then);

    /* An index naming a shard the repository lacks is an error. */
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", tmp);
    rt_write_str(p, "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\"}}");
    CHECK_EQ_INT(iv_hub_select_then(&files, tmp, &then, &err), -1);
    CHECK_CONTAINS(err.msg, "model-00001-of-00002.safetensors");
    iv_strlist_free(&then);

    /* Without tokenizer.json the WordPiece vocabulary is taken; the index
     * stands in for model.safetensors. */
    iv_strlist files2 = {0}, first2 = {0};
    const char *repo2[] = {"config.json", "vocab.txt", "model.safetensors.index.json",
                           "model-00001-of-00001.safetensors"};
    list_of(&files2, repo2, 4);
    REQUIRE(iv_hub_select_first(&files2, "o/n", &first2, &err) == 0);
    CHECK(iv_strlist_has(&first2, "vocab.txt"));
    CHECK(iv_strlist_has(&first2, "model.safetensors.index.json"));
    CHECK(!iv_strlist_has(&first2, "model-00001-of-00001.safetensors"));

    /* No config.json, or no safetensors: clear refusals. */
    iv_strlist files3 = {0}, out3 = {0};
    const char *repo3[] = {"config.json", "pytorch_model.bin"};
    list_of(&files3, repo3, 2);
    CHECK_EQ_INT(iv_hub_select_first(&files3, "o/n", &out3, &err), -1);
    CHECK_EQ_INT(err.code, IV_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "only pytorch_model.bin");
    iv_strlist files4 = {0}, out4 = {0};
    iv_strlist_add(&files4, "model.safetensors");
    CHECK_EQ_INT(iv_hub_select_first(&files4, "o/n", &out4, &err), -1);
    CHECK_CONTAINS(err.msg, "no config.json");

    iv_strlist_free(&files);
    iv_strlist_free(&first);
    iv_strlist_free(&files2);
    iv_strlist_free(&first2);
    iv_strlist_free(&files3);
    iv_strlist_free(&out3);
    iv_strlist_free(&files4);
    iv_strlist_free(&out4);
    rt_rmtree(tmp);
}

/* A Laya decision checkpoint (convaiinnovations/laya's layout): its root
 * files, encoder/ and tokenizer/ are selected (not the sibling checkpoints
 * in subfolders); a snapshot is complete with all four required files. */
TEST(resolve_hub_laya_layout)
{
    const char *repo[] = {"rl_agent_config.json", "model.safetensors", "encoder/config.json",
                          "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json", "README.md",
                          "multilingual/rl_agent_config.json", "multilingual/model.safetensors"};
    iv_strlist files = {0}, first = {0};
    list_of(&files, repo, (int)(sizeof repo / sizeof *repo));
    iv_err err = {0};
    REQUIRE(iv_hub_select_first(&files, "convaiinnovations/laya", &first, &err) == 0);
    CHECK_EQ_INT(first.n, 5);
    CHECK(iv_strlist_has(&first, "encoder/config.json") && iv_strlist_has(&first, "tokenizer/tokenizer_config.json"));
    CHECK(!iv_strlist_has(&first, "multilingual/model.safetensors"));
    iv_strlist bad = {0}, out = {0};
    const char *repo2[] = {"rl_agent_config.json", "model.safetensors"};
    list_of(&bad, repo2, 2);
    CHECK_EQ_INT(iv_hub_select_first(&bad, "o/n", &out, &err), -1);
    CHECK_CONTAINS(err.msg, "no encoder/config.json");

    char tmp[64], snap[PATH_MAX + 100], missing[256];
    REQUIRE(rt_tmpdir(tmp) == 0);
    iv_hub_repo r;
    iv_hub_repo_init(&r, tmp, "o/n");
    iv_hub_snapshot_path(&r, COMMIT, NULL, snap, sizeof snap);
    const char *part[] = {"rl_agent_config.json", "model.safetensors", "encoder/config.json"};
    make_snapshot(tmp, "o/n", part, 3, NULL);
    CHECK(!iv_hub_snapshot_complete(snap, missing, sizeof missing));
    CHECK_STR(missing, "tokenizer/tokenizer.json");
    const char *tok[] = {"tokenizer/tokenizer.json"};
    make_snapshot(tmp, "o/n", tok, 1, NULL);
    CHECK(iv_hub_snapshot_complete(snap, missing, sizeof missing));
    rt_rmtree(tmp);
    iv_strlist_free(&files), iv_strlist_free(&first), iv_strlist_free(&bad), iv_strlist_free(&out);
}
