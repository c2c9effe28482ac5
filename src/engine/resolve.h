/* Model resolution for --model-id, as TEI and Infinity users expect:
 *
 *   1. an existing directory holding config.json            -> itself
 *      (a cache entry folder models--org--name also works: its snapshot for
 *      the revision is used)
 *   2. a hub id "org/name" already complete in the Hugging Face cache
 *      (HF_HUB_CACHE, else HF_HOME/hub, else $XDG_CACHE_HOME or
 *      ~/.cache/huggingface/hub)                             -> its snapshot
 *   3. otherwise, unless offline (HF_HUB_OFFLINE=1), the files the engine
 *      needs are downloaded from HF_ENDPOINT (default https://huggingface.co)
 *      into that cache with the layout huggingface_hub uses (blobs/,
 *      snapshots/<commit>/ symlinks, refs/<revision>), so Python tools and
 *      this program share one cache.
 *
 * Downloads take only safetensors weights, configs and tokenizer files
 * (never pytorch_model.bin, ONNX, TF), resume partial blobs/<etag>.incomplete
 * files with HTTP Range, verify LFS files against their sha256 etag, and draw
 * a progress bar when stderr is a terminal. HF_TOKEN (or
 * HUGGING_FACE_HUB_TOKEN, or the token file `huggingface-cli login` wrote)
 * authenticates gated and private models. */
#ifndef IV_ENGINE_RESOLVE_H
#define IV_ENGINE_RESOLVE_H

#include <stddef.h>
#include "base/err.h"

/* Every field is optional: zero / NULL means "from the environment". */
typedef struct iv_resolve_opts {
    const char *revision;  /* branch, tag or full commit hash; NULL: "main" */
    const char *cache_dir; /* hub cache root; NULL: HF_HUB_CACHE / HF_HOME/hub / default */
    int offline;           /* nonzero: never use the network (as HF_HUB_OFFLINE=1) */
} iv_resolve_opts;

/* Resolves model_id to a local directory containing config.json, written to
 * out_dir (cap bytes). opts may be NULL. Errors: IV_E_INVALID for a malformed
 * id or revision, IV_E_NOTFOUND for a missing directory, a model or revision
 * the hub does not know, or a model absent from the cache when offline,
 * IV_E_UNSUPPORTED for a repo without safetensors weights, IV_E_IO for
 * network, authentication, checksum and file-system failures. */
int iv_resolve_model(const char *model_id, const iv_resolve_opts *opts, char *out_dir, size_t cap,
                     iv_err *err);

/* True when id is a well-formed hub id "org/name": two parts of
 * [A-Za-z0-9._-], no "--" or "..", not starting or ending with '-' or '.',
 * at most 96 characters per part. */
int iv_hub_id_valid(const char *id);

#endif
