# infinity_v3 build. Every .c under src/ goes into libiv.a (src/cli/main.c
# is the binary's entry point); every .c under tests/unit, tests/golden and
# tests/integration is linked into one test runner. New files need no edits here.
CC      ?= cc
PKGS    := openblas libcjson libmicrohttpd libutf8proc libpcre2-8 libcurl \
	libjpeg libpng libwebp libwebpdemux sndfile soxr
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

BUILD   ?= build/release
# The CPU kernels use AVX2/FMA; ARCH picks the target (native by default).
ARCH    ?= -march=native
OPT     ?= -O3 -DNDEBUG
SAN     ?=
CFLAGS_BASE := -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter \
	-Wshadow -Wstrict-prototypes -Wpointer-arith -Wno-format-truncation -fopenmp -pthread -g $(ARCH) -Isrc -Itests $(PKG_CFLAGS)
CFLAGS  = $(CFLAGS_BASE) $(OPT) $(SAN)
# giflib ships no pkg-config file.
LDLIBS  = $(PKG_LIBS) -lgif -fopenmp -pthread -lm $(SAN)

LIB_SRC  := $(shell find src -name '*.c' ! -path 'src/cli/main.c' ! -path 'src/ops/cuda/*' | sort)
TEST_SRC := $(shell find tests/unit tests/golden tests/integration -name '*.c' 2>/dev/null | sort) tests/runner.c
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

.PHONY: image-fixtures all test test-unit fuzz-replay test-clients test-typesafe-sdk test-openapi test-docs test-fleet test-deploy test-cuda-build test-asan deps models fixtures run clean bench bench-avx2 fuzz fuzz-bins bench-ops bench-int8 test-bench
all: $(BUILD)/infinity_v3 $(BUILD)/run_tests

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# .incbin data (the OpenAPI document and the /docs page) is invisible to -MMD.
$(BUILD)/src/server/routes_openapi.o: src/server/openapi.json src/server/docs.html

$(BUILD)/libiv.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/infinity_v3: $(BUILD)/src/cli/main.o $(BUILD)/libiv.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/run_tests: $(TEST_OBJ) $(BUILD)/libiv.a
	$(CC) $(CFLAGS) $(TEST_OBJ) -Wl,--whole-archive $(BUILD)/libiv.a -Wl,--no-whole-archive -o $@ $(LDLIBS)

# The one command that runs every test on a fresh machine: installs what it
# needs, builds twice (optimised, then ASan+UBSan) and runs the whole suite in both.
test: deps models
	$(MAKE) test-unit BUILD=build/release
	$(MAKE) test-unit BUILD=build/asan OPT="-O1 -fno-omit-frame-pointer" \
		SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
	$(MAKE) test-cuda-build

# Wherever nvcc is on the PATH, the CUDA build (sm_80 and sm_90) must compile
# and link, and its binary runs the op tests of every table (a machine with no
# GPU skips the CUDA ones: iv_ops_open reports no device). GPU checks proper:
# scripts/gpu-check.
test-cuda-build:
	@if command -v $(NVCC) >/dev/null 2>&1; then \
		$(MAKE) cuda && build/cuda/run_tests devices_ && $(MAKE) test-gpu-emu; \
	else echo "nvcc not found: the CUDA build is not checked here"; fi

# The CUDA kernels' logic without a GPU: the host emulation of the CUDA
# execution model (tests/gpu/emu) runs the memory-bound kernels against their
# scalar forms, the attention kernels against a reference, and the DeltaNet,
# audio, rope-axes and embed_bag kernels against the CPU table's ops. Needs
# only the CUDA headers (found next to nvcc) and g++.
GPU_EMU := build/gpu_emu
GPU_EMU_CXX = g++ -std=c++17 -O2 -ffp-contract=off -Isrc -Itests/gpu/emu -I$(GPU_EMU) -I$(CUDA_HOME)/include -w
.PHONY: test-gpu-emu
test-gpu-emu: build/release/libiv.a
	@mkdir -p $(GPU_EMU)
	python3 tests/gpu/emu/gen_kernels_emu.py src/ops/cuda $(GPU_EMU)/kernels_emu.cpp
	python3 tests/gpu/emu/gen_ops_emu.py src/ops/cuda $(GPU_EMU)/ops_emu.cpp
	python3 tests/gpu/emu/gen_attention_emu.py src/ops/cuda/cuda_attention.cu $(GPU_EMU)/attention_emu.cpp
	$(GPU_EMU_CXX) tests/gpu/emu/kernels_emu_check.cpp tests/gpu/emu/emu_rt.cpp -x c src/tensor/tensor.c \
		-o $(GPU_EMU)/kernels_emu_check
	$(GPU_EMU_CXX) tests/gpu/emu/ops_emu_check.cpp tests/gpu/emu/emu_rt.cpp build/release/libiv.a $(LDLIBS) \
		-o $(GPU_EMU)/ops_emu_check
	$(GPU_EMU_CXX) $(GPU_EMU)/attention_emu.cpp tests/gpu/emu/emu_rt.cpp tests/gpu/emu/attention_emu_check.cpp \
		-o $(GPU_EMU)/attention_emu_check
	@for c in kernels_emu_check ops_emu_check attention_emu_check; do \
		OMP_NUM_THREADS=1 $(GPU_EMU)/$$c > $(GPU_EMU)/$$c.log 2>&1 || { tail -30 $(GPU_EMU)/$$c.log; \
			echo "FAIL $$c (log $(GPU_EMU)/$$c.log)"; exit 1; }; \
		echo "$$c: $$(tail -1 $(GPU_EMU)/$$c.log)"; done

test-unit: $(BUILD)/run_tests $(BUILD)/infinity_v3 $(BUILD)/libcpuid_avx2.so fuzz-replay
	IV_BIN=$(BUILD)/infinity_v3 ASAN_OPTIONS=detect_leaks=1 $(BUILD)/run_tests

# Every fuzz target replays its seeds and its committed corpus
# (tests/fuzz/seeds/NAME, tests/fuzz/corpus/NAME) with the normal compiler:
# inputs a fuzzing run found stay tests, in the release and ASan builds.
REPLAY_BIN := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/replay/fuzz_%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz-replay: $(REPLAY_BIN)
	@set -e; for b in $(REPLAY_BIN); do n=$${b##*/fuzz_}; \
		ASAN_OPTIONS=detect_leaks=1 $$b tests/fuzz/seeds/$$n tests/fuzz/corpus/$$n; done

$(BUILD)/replay/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c $(BUILD)/libiv.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< tests/fuzz/replay_main.c $(BUILD)/libiv.a -o $@ $(LDLIBS)

deps:
	scripts/install-deps.sh

# The client libraries (openai, huggingface_hub, langchain, llama-index,
# infinity_client, cohere) against the real server on all-MiniLM-L6-v2 and
# the reranker/classifier fixtures; pip-installs them into .cache/clients-venv
# when missing. Not part of `make test` (it needs PyPI the first time).
CLIENTS_VENV := .cache/clients-venv
CLIENT_PKGS := openai cohere huggingface_hub langchain-openai langchain-community \
	llama-index-embeddings-openai-like llama-index-embeddings-text-embeddings-inference infinity_client numpy
test-clients: models
	$(MAKE) build/release/infinity_v3 BUILD=build/release
	@test -x $(CLIENTS_VENV)/bin/python || python3 -m venv $(CLIENTS_VENV)
	@$(CLIENTS_VENV)/bin/python -c "import openai, cohere, huggingface_hub, langchain_openai, langchain_community, \
		llama_index.embeddings.openai_like, llama_index.embeddings.text_embeddings_inference, infinity_client, numpy" \
		2>/dev/null || $(CLIENTS_VENV)/bin/pip install -q $(CLIENT_PKGS)
	$(CLIENTS_VENV)/bin/python tests/clients/test_clients.py --binary build/release/infinity_v3

# The OpenAPI document against a live server (tests/openapi/check_openapi.py):
# openapi-spec-validator, then schemathesis (no 5xx, every answer's status,
# media type and body as documented). pip-installs both into
# .cache/openapi-venv when missing. Not part of `make test` (PyPI).
OPENAPI_VENV := .cache/openapi-venv
test-openapi:
	$(MAKE) build/release/infinity_v3 BUILD=build/release
	@test -x $(OPENAPI_VENV)/bin/python || python3 -m venv $(OPENAPI_VENV)
	@$(OPENAPI_VENV)/bin/python -c "import schemathesis, openapi_spec_validator" 2>/dev/null || \
		$(OPENAPI_VENV)/bin/pip install -q schemathesis openapi-spec-validator
	$(OPENAPI_VENV)/bin/python tests/openapi/check_openapi.py --binary build/release/infinity_v3

# /docs in Debian's headless chromium (apt-get install chromium); the
# screenshot lands in build/artefacts/docs/docs.png.
# The official TypeSafe SDK (PyPI typesafe-sdk) against the binary on the
# laya_tiny decision fixture (tests/clients/test_typesafe_sdk.py).
test-typesafe-sdk:
	$(MAKE) build/release/infinity_v3 BUILD=build/release
	@test -x .cache/dvenv/bin/python || (python3 -m venv --system-site-packages .cache/dvenv && \
		.cache/dvenv/bin/pip install -q typesafe-sdk==0.7.5 laya==0.4.15)
	.cache/dvenv/bin/python tests/clients/test_typesafe_sdk.py --binary build/release/infinity_v3

test-docs:
	$(MAKE) build/release/infinity_v3 BUILD=build/release
	python3 tests/openapi/check_docs.py --binary build/release/infinity_v3

# Three replicas behind Debian's nginx (deploy/nginx/infinity_v3.conf),
# 2,000 mixed requests from 32 clients while one replica is killed and
# restarted: nothing lost, every answer equal to the one computed alone
# (tests/fleet/run_fleet.py; apt-get install nginx-light when absent).
test-fleet:
	$(MAKE) build/release/infinity_v3 BUILD=build/release
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || \
		(echo "nginx not found: apt-get install nginx-light"; exit 1)
	PATH="$$PATH:/usr/sbin" python3 tests/fleet/run_fleet.py --binary build/release/infinity_v3 $(FLEET_ARGS)

# The Kubernetes manifests (kubernetes-validate, strict, plus the checks a
# schema cannot make) and the container images, built offline and run
# (tests/deploy/check_deploy.py; docs/deployment.md).
DEPLOY_VENV := .cache/deploy-venv
test-deploy:
	$(MAKE) build/release/infinity_v3 BUILD=build/release
	@test -x $(DEPLOY_VENV)/bin/python || python3 -m venv $(DEPLOY_VENV)
	@test -x $(DEPLOY_VENV)/bin/kubernetes-validate || $(DEPLOY_VENV)/bin/pip install -q kubernetes-validate
	$(DEPLOY_VENV)/bin/python tests/deploy/check_deploy.py --binary build/release/infinity_v3

models:
	scripts/fetch-models.sh

# Regenerate committed fixtures (needs torch/transformers; not part of `make test`).
fixtures:
	python3 tools/gen_fixtures.py
	python3 tools/gen_chat_fixtures.py

# Image fixtures (tests/fixtures/images): PIL's and transformers' outputs on
# scikit-image's sample pictures and images made with Pillow. Pinned: another
# Pillow may resize differently (docs/images.md). Not part of `make test`.
IMAGE_VENV := .cache/image-venv
image-fixtures:
	@test -x $(IMAGE_VENV)/bin/python || python3 -m venv --system-site-packages $(IMAGE_VENV)
	@$(IMAGE_VENV)/bin/python -c "import PIL, skimage" 2>/dev/null || \
		$(IMAGE_VENV)/bin/pip install -q pillow==13.0.0 scikit-image==0.26.0
	$(IMAGE_VENV)/bin/python tools/gen_image_fixtures.py

# The README's first command: install, build, fetch the default model and serve it.
run: deps
	$(MAKE) $(BUILD)/infinity_v3
	scripts/serve-default.sh $(BUILD)/infinity_v3

# libFuzzer targets: every tests/fuzz/fuzz_*.c becomes build/fuzz/fuzz_*, linked
# against a clang-built, coverage-instrumented libiv.a (ASan + UBSan). Not part
# of `make test`; needs clang with libFuzzer and OpenMP (Debian: apt-get install
# clang libclang-rt-14-dev libomp-14-dev). Run one for a minute with, e.g.:
#   mkdir -p build/fuzz/corpus_safetensors && build/fuzz/fuzz_safetensors -max_total_time=60 \
#     -dict=tests/fuzz/safetensors.dict build/fuzz/corpus_safetensors tests/fuzz/seeds/safetensors
FUZZ_CC   ?= clang
FUZZ_BIN  := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz:
	$(MAKE) fuzz-bins BUILD=build/fuzz CC=$(FUZZ_CC) OPT="-O1 -fno-omit-frame-pointer -Wno-unknown-warning-option -Wno-pass-failed" \
		SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"

fuzz-bins: $(FUZZ_BIN)

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(BUILD)/libiv.a
	$(CC) $(CFLAGS) -fsanitize=fuzzer $< $(BUILD)/libiv.a -o $@ $(LDLIBS)

# Op micro-benchmark: GFLOP/s of sgemm, linear and attention (bench/bench_ops.c).
bench-ops: $(BUILD)/bench_ops
	$(BUILD)/bench_ops

$(BUILD)/bench_ops: $(BUILD)/bench/bench_ops.o $(BUILD)/libiv.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The gated delta rule, chunked vs token by token, ns/token from 1 to 4096 tokens (bench/bench_deltanet.c).
bench-deltanet: $(BUILD)/bench_deltanet
	$(BUILD)/bench_deltanet

$(BUILD)/bench_deltanet: $(BUILD)/bench/bench_deltanet.o $(BUILD)/libiv.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# CPU int8 vs FP32: the linear op per kernel and MiniLM end to end (bench/bench_int8.c).
bench-int8: $(BUILD)/bench_int8
	$(BUILD)/bench_int8

$(BUILD)/bench_int8: $(BUILD)/bench/bench_int8.o $(BUILD)/libiv.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# CPU benchmark against the peers (bench/README.md); BENCH_ARGS=--quick for the short run.
bench: $(BUILD)/infinity_v3 $(BUILD)/bench_engine $(BUILD)/sgemm_peak $(BUILD)/membw $(BUILD)/fma_peak
	python3 bench/run_cpu.py --build $(BUILD) $(BENCH_ARGS)

# The harness's own arithmetic (machine record, weight-streaming floor): Python unit tests, no engine runs.
test-bench:
	python3 -m unittest discover -s tests/bench -v

# The same against peers held to AVX2/FMA, as on the Zen 2 machines issue 5
# targets: an AVX2 build (its own folder) run with IV_CPU_ISA=avx2.
bench-avx2:
	$(MAKE) BUILD=build/avx2 ARCH="-march=haswell" build/avx2/infinity_v3 build/avx2/bench_engine build/avx2/sgemm_peak \
		build/avx2/membw build/avx2/fma_peak build/avx2/libcpuid_avx2.so
	python3 bench/run_cpu.py --build build/avx2 --isa avx2 --out bench/results/cpu_avx2.json \
		--plot bench/results/cpu_avx2_ratios.png $(BENCH_ARGS)

$(BUILD)/bench_engine $(BUILD)/bench_prefix $(BUILD)/bench_head_rows $(BUILD)/sgemm_peak: $(BUILD)/%: $(BUILD)/bench/%.o $(BUILD)/libiv.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# LD_PRELOAD library that hides AVX-512 from CPUID (bench/cpuid_avx2.c), for
# peers with no ISA switch of their own. Never sanitized: it is preloaded into
# Python processes.
$(BUILD)/libcpuid_avx2.so: bench/cpuid_avx2.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -fPIC -shared $< -o $@

# Memory read bandwidth (bench/membw.c) and the FMA ceiling (bench/fma_peak.c): OpenMP only, no libiv.
$(BUILD)/membw $(BUILD)/fma_peak: $(BUILD)/%: $(BUILD)/bench/%.o
	$(CC) $(CFLAGS) $^ -o $@ -fopenmp $(SAN)

# The closed-loop HTTP client of the serving benchmarks (bench/serve_gpu.py).
$(BUILD)/serve_load: $(BUILD)/bench/serve_load.o
	$(CC) $(CFLAGS) $^ -o $@ -pthread

# ---- CUDA build (nvcc): build/cuda, the CPU objects plus src/ops/cuda/*.cu ----
# `make cuda` builds build/cuda/infinity_v3 and build/cuda/run_tests with the
# CUDA op table: every C object rebuilt with -DIV_WITH_CUDA (ops/cuda_absent.c
# then compiles to nothing) and src/ops/cuda/*.cu compiled by nvcc into that
# build's libiv.a. GPU code for sm_80 and sm_90, plus compute_90 PTX that newer
# GPUs compile at load. Without nvcc the other builds are unaffected and
# `make cuda` says what is missing.
NVCC      ?= nvcc
NVCC_BIN  := $(shell command -v $(NVCC) 2>/dev/null)
ifneq ($(NVCC_BIN),)
CUDA_HOME ?= $(shell dirname "$$(dirname "$(NVCC_BIN)")")
# Toolkits put the libraries in lib64 (lib64 -> lib in some packages).
CUDA_LIBDIR ?= $(firstword $(patsubst %/,%,$(dir $(wildcard $(CUDA_HOME)/lib64/libcudart.so $(CUDA_HOME)/lib/libcudart.so))) $(CUDA_HOME)/lib64)
endif
NVCC_ARCH  ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
NVCC_FLAGS  = -std=c++17 -O3 -g -lineinfo -Isrc $(NVCC_ARCH) -DIV_WITH_CUDA \
	-Xcompiler -fPIC,-fopenmp,-Wall,-Wextra,-Wno-unused-parameter

.PHONY: cuda
cuda:
ifeq ($(NVCC_BIN),)
	@echo "make cuda: $(NVCC) is not on the PATH (install the CUDA toolkit, or pass NVCC=/path/to/nvcc)"; exit 1
else
	$(MAKE) BUILD=build/cuda IV_CUDA_BUILD=1 build/cuda/infinity_v3 build/cuda/run_tests build/cuda/bench_engine \
		build/cuda/attention_check build/cuda/serve_load
endif

# Only in the sub-make above (BUILD=build/cuda).
ifeq ($(IV_CUDA_BUILD),1)
CUDA_SRC := $(sort $(wildcard src/ops/cuda/*.cu))
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/%.cu.o)
CFLAGS   += -DIV_WITH_CUDA
LDLIBS   += -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublasLt -lcudart -lstdc++
# The libiv.a rule archives all its prerequisites ($^): these join them.
$(BUILD)/libiv.a: $(CUDA_OBJ)

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	@echo "NVCC $<"
	@$(NVCC) $(NVCC_FLAGS) -MMD -MP -c $< -o $@

# The attention kernel's GPU harness (tests/gpu/attention_check.cu), run by scripts/gpu-check.
$(BUILD)/attention_check: $(BUILD)/tests/gpu/attention_check.cu.o $(BUILD)/libiv.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
endif
# ---- end of the CUDA build ----

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
