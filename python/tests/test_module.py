"""The device as PyTorch code meets it: torch.tpu, generated methods,
state_dict round trips, tied weights, activation checkpointing."""

import copy
import io

import pytest
import torch
import torch.nn as nn
import torch.utils.checkpoint as checkpoint
from helpers import assert_same, rand

import eagertpu


def test_device_module_and_generated_methods():
    assert torch.tpu.is_available() and torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    t = rand(3).tpu()
    assert t.is_tpu and t.device == torch.device("tpu", 0) and not rand(3).is_tpu
    torch.tpu.synchronize()
    m = nn.Linear(2, 2).tpu()
    assert m.weight.is_tpu
    info = eagertpu.memory_info("tpu:0")
    assert info["allocated_bytes"] >= t.numel() * 4 and info["allocations"] >= 1
    assert torch.tpu.memory_allocated() == info["allocated_bytes"]


def test_memory_is_released():
    before = eagertpu.memory_info()["allocated_bytes"]
    x = torch.empty(1 << 20, device="tpu")
    assert eagertpu.memory_info()["allocated_bytes"] == before + (1 << 22)
    del x
    assert eagertpu.memory_info()["allocated_bytes"] == before


def test_state_dict_round_trip_through_cpu(mode):
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2)).to("tpu")
    buf = io.BytesIO()
    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    fresh = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2)).to("tpu")
    fresh.load_state_dict(loaded)
    x = rand(3, 4)
    assert_same(fresh(x.tpu()), model(x.tpu()).detach().cpu().requires_grad_(False))


def test_torch_save_of_tpu_tensors_loads_on_tpu_and_cpu(mode):
    model = nn.Linear(3, 3).to("tpu")
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert_same(model.weight.detach(), on_cpu["weight"])
    buf.seek(0)
    on_tpu = torch.load(buf)
    assert on_tpu["weight"].is_tpu
    assert_same(on_tpu["weight"], on_cpu["weight"])


def tied_model():
    e = nn.Embedding(7, 4)
    h = nn.Linear(4, 7, bias=False)
    return nn.ModuleDict({"embed": e, "head": h})


def test_weights_tied_before_to_stay_tied(mode):
    m = tied_model()
    m["head"].weight = m["embed"].weight
    m.to("tpu")
    assert m["head"].weight is m["embed"].weight and m["head"].weight.is_tpu
    assert len(list(m.parameters())) == 1
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    idx = torch.tensor([1, 2], device="tpu")
    m["head"](m["embed"](idx)).sum().backward()
    opt.step()
    assert_same(m["head"].weight.detach(), m["embed"].weight.detach().cpu())


def test_weights_tied_after_to_stay_tied(mode):
    m = tied_model().to("tpu")
    m["head"].weight = m["embed"].weight
    assert m["head"].weight is m["embed"].weight
    m.to("cpu")
    assert m["head"].weight is m["embed"].weight and not m["head"].weight.is_tpu


@pytest.mark.usefixtures("no_fallbacks")
def test_activation_checkpointing_is_unchanged(mode):
    block = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.Linear(12, 6))
    x = rand(4, 6)

    def run(device, use_checkpoint):
        b = copy.deepcopy(block).to(device)
        inp = x.detach().clone().to(device).requires_grad_(True)
        out = checkpoint.checkpoint(b, inp, use_reentrant=False) if use_checkpoint else b(inp)
        out.pow(2).sum().backward()
        return out.detach(), inp.grad, b[0].weight.grad

    expected = run("cpu", False)
    assert_same(run("tpu", True), expected, rtol=1e-5, atol=1e-5)
    assert_same(run("tpu", False), expected, rtol=1e-5, atol=1e-5)
