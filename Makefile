# EagerTPU: `make demo` and `make test` are the two entry points (see README.md).
# Both create .venv once and reuse it; pinned Python packages are listed in
# python/requirements*.txt.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
CARGO ?= cargo
PIP := $(VPY) -m pip install --disable-pip-version-check -q

.PHONY: all setup setup-test build demo test bench lint fmt info clean

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

setup: $(VENV)/.runtime-deps
setup-test: $(VENV)/.test-deps

build: setup
	$(CARGO) build --release --workspace --bins --examples

# The main job: train a 2-layer MLP on the default device; the last line is JSON.
demo: build
	$(CARGO) run --release --example mlp

# Every test: unit, integration (ops vs host references, errors, plugins,
# leaks), the header layout check and doc tests.
# Tests get a fresh on-disk compile cache of their own.
TEST_CACHE := $(CURDIR)/target/test-cache
test: setup-test
	rm -rf $(TEST_CACHE)
	EAGERTPU_CACHE_DIR=$(TEST_CACHE) $(CARGO) test --release --workspace

# Debug-mode latency next to raw PJRT, then every workload in every mode
# (target/bench/debug.json, target/bench/modes.json).
bench: setup
	$(CARGO) bench --bench debug_latency
	$(CARGO) bench --bench modes

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
