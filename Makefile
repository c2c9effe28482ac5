# infinity_v3 build. Every .c under src/ goes into libiv.a (src/cli/main.c
# is the binary's entry point); every .c under tests/unit, tests/golden and
# tests/integration is linked into one test runner. New files need no edits here.
CC      ?= cc
PKGS    := openblas libcjson libmicrohttpd libutf8proc libpcre2-8 libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

BUILD   ?= build/release
# The CPU kernels use AVX2/FMA; ARCH picks the target (native by default).
ARCH    ?= -march=native
OPT     ?= -O3 -DNDEBUG
SAN     ?=
CFLAGS_BASE := -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter \
	-Wshadow -Wstrict-prototypes -Wno-format-truncation -fopenmp -pthread -g $(ARCH) -Isrc -Itests $(PKG_CFLAGS)
CFLAGS  = $(CFLAGS_BASE) $(OPT) $(SAN)
LDLIBS  = $(PKG_LIBS) -fopenmp -pthread -lm $(SAN)

LIB_SRC  := $(shell find src -name '*.c' ! -path 'src/cli/main.c' ! -path 'src/ops/cuda/*' | sort)
TEST_SRC := $(shell find tests/unit tests/golden tests/integration -name '*.c' 2>/dev/null | sort) tests/runner.c
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

.PHONY: all test test-unit test-asan deps models fixtures run clean bench bench-avx2 fuzz fuzz-bins bench-ops bench-int8
all: $(BUILD)/infinity_v3 $(BUILD)/run_tests

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

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

test-unit: $(BUILD)/run_tests $(BUILD)/infinity_v3
	IV_BIN=$(BUILD)/infinity_v3 ASAN_OPTIONS=detect_leaks=1 $(BUILD)/run_tests

deps:
	scripts/install-deps.sh

models:
	scripts/fetch-models.sh

# Regenerate committed fixtures (needs torch/transformers; not part of `make test`).
fixtures:
	python3 tools/gen_fixtures.py

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

# CPU int8 vs FP32: the linear op per kernel and MiniLM end to end (bench/bench_int8.c).
bench-int8: $(BUILD)/bench_int8
	$(BUILD)/bench_int8

$(BUILD)/bench_int8: $(BUILD)/bench/bench_int8.o $(BUILD)/libiv.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# CPU benchmark against the peers (bench/README.md); BENCH_ARGS=--quick for the short run.
bench: $(BUILD)/infinity_v3 $(BUILD)/bench_engine $(BUILD)/sgemm_peak
	python3 bench/run_cpu.py --build $(BUILD) $(BENCH_ARGS)

# The same against peers held to AVX2/FMA, as on the Zen 2 machines issue 5
# targets: an AVX2 build (its own folder) run with IV_CPU_ISA=avx2.
bench-avx2:
	$(MAKE) BUILD=build/avx2 ARCH="-march=haswell" build/avx2/infinity_v3 build/avx2/bench_engine build/avx2/sgemm_peak
	python3 bench/run_cpu.py --build build/avx2 --isa avx2 --out bench/results/cpu_avx2.json \
		--plot bench/results/cpu_avx2_ratios.png $(BENCH_ARGS)

$(BUILD)/bench_engine $(BUILD)/sgemm_peak: $(BUILD)/%: $(BUILD)/bench/%.o $(BUILD)/libiv.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
