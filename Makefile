# Loom's front door: `make run` runs the main job, `make test` runs every test.
# The real build is CMake; this file installs what the build needs and drives it.

BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
JOBS       ?= $(shell nproc)
# The shared model files: ../shared/models beside this checkout, else beside the checkout this
# one was cloned from (a clone made elsewhere from a local path), else MODELS=... on the command line.
ORIGIN_DIR := $(shell git config --get remote.origin.url 2>/dev/null)
MODELS     ?= $(firstword $(wildcard $(abspath ../shared/models)) $(if $(ORIGIN_DIR),$(wildcard $(abspath $(ORIGIN_DIR)/../shared/models))) $(abspath ../shared/models))
CMAKE_FLAGS ?=
# CI sets CI=true: warnings become errors there.
ifeq ($(CI),true)
CMAKE_FLAGS += -DLOOM_WERROR=ON
endif

.PHONY: all deps install-packages build run test test-setup test-asan fuzz bench clean print-models

all: build

# Debian packages the build and tests need (pkg-config and binutils for the install test; the fuzzer
# also needs clang's libFuzzer runtime);
# installed only when missing. CUDA (nvcc) is used when present and skipped otherwise.
DEPS := cmake make gcc pkg-config binutils libpcre2-dev libmicrohttpd-dev libcjson-dev curl nodejs
FUZZ_DEPS := clang libclang-rt-14-dev
deps:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(DEPS)"

install-packages:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DLOOM_SHARED_MODELS=$(MODELS) $(CMAKE_FLAGS) >&2

# Build chatter goes to stderr, so that `make run` prints only the generated text on stdout.
build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS) >&2

# The main job: convert the shared stories260K checkpoint (once) and let it write a story.
STORIES := $(BUILD)/stories260K.gguf
$(STORIES): | build
	@$(BUILD)/loom convert-llama2c --model $(MODELS)/stories260K.bin --tokenizer $(MODELS)/tok512.bin -o $@

# the shared models folder found (the README's examples call it $MODELS)
print-models:
	@echo $(MODELS)

run: build $(STORIES)
	@echo '$(BUILD)/loom run -m $(STORIES) -p "Once upon a time" -n 252 --temp 0' >&2
	@$(BUILD)/loom run -m $(STORIES) -p "Once upon a time" -n 252 --temp 0

test: build test-setup
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# What only the `loom serve` tests need: the official openai npm client, into the build folder, and
# Chromium (headless, for the chat page); where they cannot be fetched (offline), those tests are
# skipped (status 77), not failed.
OPENAI_NPM := openai@4
TEST_DEPS := chromium
test-setup:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(TEST_DEPS)" || echo "could not install $(TEST_DEPS): the serve-page test will be skipped" >&2
	@[ -f $(BUILD)/npm/node_modules/openai/package.json ] || { mkdir -p $(BUILD)/npm && \
	  npm install --prefix $(BUILD)/npm --no-audit --no-fund --loglevel=error $(OPENAI_NPM) >&2 || \
	  echo "npm could not fetch $(OPENAI_NPM): the serve-openai test will be skipped" >&2; }

test-asan: deps
	@$(MAKE) --no-print-directory test-setup BUILD=$(BUILD_ASAN)
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DLOOM_SANITIZE=ON -DLOOM_CUDA=OFF -DLOOM_SHARED_MODELS=$(MODELS) $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# libFuzzer targets (clang); run them with e.g. build-fuzz/fuzz-gguf -max_total_time=600 corpus/
fuzz: deps
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(FUZZ_DEPS)"
	CC=clang cmake -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_FUZZ=ON -DLOOM_CUDA=OFF
	cmake --build $(BUILD_FUZZ) -j $(JOBS)

bench: build
	bash bench/run-cpu.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
