#!/usr/bin/env bash
# Installs the Debian packages the build and tests need; a no-op when present.
set -euo pipefail
pkgs=(build-essential pkg-config libopenblas-openmp-dev libcjson-dev libmicrohttpd-dev
      libutf8proc-dev libpcre2-dev libcurl4-openssl-dev python3 unzip curl
      libjpeg62-turbo-dev libpng-dev libwebp-dev libgif-dev
      libsndfile1-dev libsoxr-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# The official OpenAI Python client, used by the integration test that talks
# to the server the way OpenAI users do (tests/integration: srv_openai_python_client).
if ! python3 -c "import openai" 2>/dev/null; then
  python3 -m pip install -q openai 2>/dev/null ||
    python3 -m pip install -q --break-system-packages openai ||
    echo "warning: could not install the openai package; its client test will be skipped" >&2
fi
