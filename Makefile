# EagerTPU: `make demo` and `make test` are the two entry points (see README.md).
# Both create .venv once and reuse it; pinned Python packages are listed in
# python/requirements*.txt.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
CARGO ?= cargo
PIP := $(VPY) -m pip install --disable-pip-version-check -q

.PHONY: all setup setup-test build backend demo demo-rust test test-hazards test-rust test-python bench lint fmt info clean

all: demo

# The XLA CPU PJRT plugin: the default device on machines without a TPU.
$(VENV)/.runtime-deps: python/requirements.txt
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -r python/requirements.txt
	@touch $@

# libtpu: only the tests need it (plugin loading, API 0.117, the no-TPU error).
$(VENV)/.test-deps: $(VENV)/.runtime-deps python/requirements-test.txt
	$(PIP) -r python/requirements-test.txt
	@touch $@

# PyTorch, pinned (the backend is compiled against it), and pytest. The wheel
# pulls ~3 GB of CUDA libraries: installed once, reused by every make.
$(VENV)/.torch-deps: $(VENV)/.runtime-deps python/requirements-torch.txt
	$(PIP) -r python/requirements-torch.txt
	@touch $@

# The eagertpu package, installed editable (its torch.backends entry point
# makes `import torch` load the tpu device).
$(VENV)/.eagertpu-installed: $(VENV)/.torch-deps python/pyproject.toml
	$(PIP) --no-deps --no-build-isolation -e python
	@touch $@

setup: $(VENV)/.eagertpu-installed
setup-test: setup $(VENV)/.test-deps

# The C ABI library PyTorch loads is built with the `ffi` profile (release
# with whole-program LTO, Cargo.toml); the tests link the release build.
build: setup
	$(CARGO) build --release --workspace --lib --bins --examples
	$(CARGO) build --profile ffi -p eagertpu-ffi
	$(VPY) python/build_backend.py

# The main job: an unchanged PyTorch training script on torch.device("tpu")
# in fused mode; the last line is JSON.
demo: build
	$(VPY) examples/train.py

# The same in Rust, through the eagertpu crate's API.
demo-rust: build
	$(CARGO) run --release --example mlp

# Every test: unit, integration (ops vs host references, errors, plugins,
# leaks), the header layout check and doc tests; then the whole suite once
# more with the buffer-hazard checker on (EAGERTPU_CHECK_HAZARDS=1), except
# PyTorch's op_db sweep: it is a coverage check (run in the first pass), and
# under the checker each of its thousands of programs compiles a second,
# uncached copy, a quarter of an hour on this machine; the buffer reuse the
# checker watches is the runtime's, which the rest of the suite exercises.
# Tests get a fresh on-disk compile cache of their own.
TEST_CACHE := $(CURDIR)/target/test-cache
test: setup-test build
	rm -rf $(TEST_CACHE)
	EAGERTPU_CACHE_DIR=$(TEST_CACHE) $(CARGO) test --release --workspace
	EAGERTPU_CACHE_DIR=$(TEST_CACHE) $(VPY) -m pytest -q python/tests
	$(MAKE) --no-print-directory test-hazards

test-hazards: setup-test build
	EAGERTPU_CHECK_HAZARDS=1 EAGERTPU_CACHE_DIR=$(TEST_CACHE) $(CARGO) test --release --workspace
	EAGERTPU_CHECK_HAZARDS=1 EAGERTPU_CACHE_DIR=$(TEST_CACHE) $(VPY) -m pytest -q python/tests \
		--ignore=python/tests/test_op_db.py

test-rust: setup-test
	EAGERTPU_CACHE_DIR=$(TEST_CACHE) $(CARGO) test --release --workspace

test-python: build
	EAGERTPU_CACHE_DIR=$(TEST_CACHE) $(VPY) -m pytest -q python/tests

# Debug-mode latency next to raw PJRT, every workload in every mode, and the
# same workloads through PyTorch next to PyTorch CPU eager
# (target/bench/debug.json, modes.json, torch.json); collectives next to gloo
# and DDP steps on 1, 2 and 4 ranks (target/bench/collectives.json).
bench: build
	$(CARGO) bench --bench debug_latency
	$(CARGO) bench --bench modes
	$(VPY) benches/torch_bench.py
	$(VPY) benches/collectives_bench.py

# Which plugin is found and what it reports.
info: build
	$(CARGO) run --release --bin eagertpu-info -- --probe

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
