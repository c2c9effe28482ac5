/* --model-id resolution: local directory, cache entry, or hub download.
 * The cache comes first, so a model that is complete in it needs no network
 * at all (a server restarts offline); only a missing or incomplete snapshot
 * sends us to the hub. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"
#include "engine/hub.h"
#include "engine/resolve.h"

static int id_part_valid(const char *p, size_t n)
{
    if (n == 0 || n > 96) return 0;
    if (p[0] == '-' || p[0] == '.' || p[n - 1] == '-' || p[n - 1] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
        /* The cache folder joins parts with "--"; the hub forbids both. */
        if (i + 1 < n && ((c == '-' && p[i + 1] == '-') || (c == '.' && p[i + 1] == '.')))
            return 0;
    }
    return 1;
}

int iv_hub_id_valid(const char *id)
{
    if (!id) return 0;
    const char *slash = strchr(id, '/');
    if (!slash || strchr(slash + 1, '/')) return 0;
    return id_part_valid(id, (size_t)(slash - id)) && id_part_valid(slash + 1, strlen(slash + 1));
}

static int copy_out(char *out, size_t cap, const char *path, iv_err *err)
{
    if (strlen(path) >= cap)
        return iv_errf(err, IV_E_INVALID, "model path too long (%zu bytes): %s", strlen(path), path);
    strcpy(out, path);
    return 0;
}

/* The snapshot of a repository folder for revision, when it has config.json. */
static int cached_snapshot(const iv_hub_repo *r, const char *revision, char *snapshot, size_t cap,
                           char commit[41])
{
    if (iv_hub_cached_commit(r, revision, commit)) return -1;
    iv_hub_snapshot_path(r, commit, NULL, snapshot, cap);
    char config[PATH_MAX + 16];
    iv_pathf(config, sizeof config, "%s/config.json", snapshot);
    if (iv_file_exists(config)) return 0;
    iv_pathf(config, sizeof config, "%s/rl_agent_config.json", snapshot); /* a Laya checkpoint */
    return iv_file_exists(config) ? 0 : -1;
}

/* A directory given on the command line: a checkpoint, or a cache entry
 * folder (models--org--name) whose snapshot for the revision is used. */
static int resolve_dir(const char *dir, const char *revision, char *out, size_t cap, iv_err *err)
{
    char path[PATH_MAX];
    if (iv_file_exists(iv_path_join(path, sizeof path, dir, "config.json")))
        return copy_out(out, cap, dir, err);
    /* A Laya decision checkpoint keeps its encoder's config in encoder/. */
    if (iv_file_exists(iv_path_join(path, sizeof path, dir, "rl_agent_config.json")))
        return copy_out(out, cap, dir, err);
    if (iv_dir_exists(iv_path_join(path, sizeof path, dir, "snapshots"))) {
        iv_hub_repo r = {0};
        iv_pathf(r.dir, sizeof r.dir, "%s", dir);
        char commit[41];
        if (cached_snapshot(&r, revision, path, sizeof path, commit) == 0)
            return copy_out(out, cap, path, err);
        return iv_errf(err, IV_E_NOTFOUND,
                       "%s is a Hugging Face cache entry without a snapshot for revision '%s' "
                       "that holds config.json",
                       dir, revision);
    }
    return iv_errf(err, IV_E_NOTFOUND,
                   "%s is a directory without config.json; pass the checkpoint directory (the "
                   "one holding config.json and model.safetensors)",
                   dir);
}

/* Looks like a file-system path rather than a hub id. */
static int looks_like_path(const char *s)
{
    return s[0] == '/' || s[0] == '.' || s[0] == '~' || strchr(s, '\\') != NULL;
}

int iv_resolve_model(const char *model_id, const iv_resolve_opts *opts, char *out_dir, size_t cap,
                     iv_err *err)
{
    static const iv_resolve_opts defaults = {0};
    if (!opts) opts = &defaults;
    const char *revision = opts->revision && *opts->revision ? opts->revision : "main";
    if (!model_id || !*model_id)
        return iv_errf(err, IV_E_INVALID, "no model given: pass --model-id DIR or org/name");
    if (!iv_hub_revision_valid(revision))
        return iv_errf(err, IV_E_INVALID,
                       "invalid revision '%s': expected a branch, tag or commit hash", revision);

    char expanded[PATH_MAX];
    const char *home = getenv("HOME");
    if (model_id[0] == '~' && (model_id[1] == '/' || !model_id[1]) && home)
        snprintf(expanded, sizeof expanded, "%s%s", home, model_id + 1);
    else
        snprintf(expanded, sizeof expanded, "%s", model_id);
    if (iv_dir_exists(expanded)) return resolve_dir(expanded, revision, out_dir, cap, err);
    if (iv_file_exists(expanded))
        return iv_errf(err, IV_E_INVALID,
                       "%s is a file; --model-id takes the directory holding config.json",
                       expanded);
    if (looks_like_path(model_id))
        return iv_errf(err, IV_E_NOTFOUND, "model directory %s does not exist", expanded);
    if (!iv_hub_id_valid(model_id))
        return iv_errf(err, IV_E_INVALID,
                       "'%s' is neither a local directory nor a Hugging Face hub id (org/name "
                       "with letters, digits, '.', '_' and '-')",
                       model_id);

    char root[PATH_MAX];
    if (opts->cache_dir && *opts->cache_dir) snprintf(root, sizeof root, "%s", opts->cache_dir);
    else iv_hub_cache_root(root, sizeof root);
    iv_hub_repo repo;
    iv_hub_repo_init(&repo, root, model_id);

    char snapshot[PATH_MAX], commit[41], missing[PATH_MAX];
    int cached = cached_snapshot(&repo, revision, snapshot, sizeof snapshot, commit) == 0;
    if (cached && iv_hub_snapshot_complete(snapshot, missing, sizeof missing))
        return copy_out(out_dir, cap, snapshot, err);

    if (opts->offline || iv_hub_offline_env()) {
        if (cached) {
            /* What is there may still load (huggingface_hub's local_files_only
             * returns partial snapshots too); the engine names what it lacks. */
            IV_WARN("offline: using the incomplete cached snapshot %s (no %s)", snapshot, missing);
            return copy_out(out_dir, cap, snapshot, err);
        }
        return iv_errf(err, IV_E_NOTFOUND,
                       "%s (revision '%s') is not in the Hugging Face cache at %s and "
                       "HF_HUB_OFFLINE is set: download it while online, or pass a local "
                       "directory",
                       model_id, revision, root);
    }

    char endpoint[2048], token[4096];
    iv_hub_endpoint(endpoint, sizeof endpoint);
    iv_hub_token(token, sizeof token);
    if (iv_hub_download(&repo, endpoint, token, revision, commit, err)) return -1;
    iv_hub_snapshot_path(&repo, commit, NULL, snapshot, sizeof snapshot);
    return copy_out(out_dir, cap, snapshot, err);
}
