"""Fixtures: every test that takes `mode` runs in debug, strict and fused
mode; `no_fallbacks` fails a test whose ops ran on the CPU."""

import os
import sys

import pytest
import torch

import eagertpu

sys.path.insert(0, os.path.dirname(__file__))

MODES = ["debug", "strict", "fused"]


@pytest.fixture(params=MODES)
def mode(request):
    with eagertpu.mode(request.param):
        yield request.param
        eagertpu.sync()


@pytest.fixture
def no_fallbacks():
    before = eagertpu.fallbacks()
    yield
    after = eagertpu.fallbacks()
    new = {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}
    assert not new, f"ops ran on the CPU: {new}"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
