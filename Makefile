# EagerTPU: `make demo` and `make test` are the two entry points (see README.md).
# Both create .venv once and reuse it; the pinned Python packages live in python/requirements*.txt.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
CARGO ?= cargo

.PHONY: all setup setup-test demo test bench lint fmt clean

all: demo

# The XLA CPU PJRT plugin: the embedded default device on machines without a TPU.
$(VENV)/.runtime-deps: python/requirements.txt
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --disable-pip-version-check -q -r python/requirements.txt
	@touch $@

# libtpu: only needed by the tests that check plugin loading and the no-TPU error.
$(VENV)/.test-deps: $(VENV)/.runtime-deps python/requirements-test.txt
	$(VPY) -m pip install --disable-pip-version-check -q -r python/requirements-test.txt
	@touch $@

setup: $(VENV)/.runtime-deps
setup-test: $(VENV)/.test-deps

demo: setup
	$(CARGO) build --release --workspace --all-targets
	$(CARGO) run --release --example mlp

test: setup-test
	$(CARGO) test --release --workspace --all-targets

bench: setup
	$(CARGO) bench --bench debug_latency

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
