"""A training loop whose shapes change at every step (sequences of a new
length each batch, no padding or bucketing): the losses match the CPU in
every mode, and fused mode compiles no more programs than strict mode (its
chunks, new at every step, run as the calls strict mode runs: one compile
serves both), then none when the same lengths come back."""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import eagertpu

STEPS = 12


class Pooled(nn.Module):
    """Per-token layers, then the mean over the sequence and a classifier."""

    def __init__(self):
        super().__init__()
        self.token = nn.Sequential(nn.Linear(12, 20), nn.GELU(), nn.Linear(20, 12))
        self.head = nn.Linear(12, 3)

    def forward(self, x):
        return self.head(self.token(x).mean(dim=1))


def batches(first_length):
    g = torch.Generator().manual_seed(first_length)
    return [
        (torch.randn(4, first_length + 2 * step, 12, generator=g), torch.randint(0, 3, (4,), generator=g))
        for step in range(STEPS)
    ]


def train(model, data, device):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    before = eagertpu.metrics()
    for x, y in data:
        opt.zero_grad()
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    after = eagertpu.metrics()
    # Compiled here or loaded from the disk cache (a warm test cache).
    return losses, sum(after[k] - before[k] for k in ("compiles", "disk_hits"))


def test_a_loop_over_new_lengths_compiles_no_more_in_fused_mode_than_in_strict():
    torch.manual_seed(0)
    model = Pooled()
    programs = {}
    # Lengths no other test uses, and other ones per mode: each mode's
    # programs are new to this process.
    for mode, first_length in (("fused", 41), ("strict", 91), ("debug", 141)):
        data = batches(first_length)
        cpu, _ = train(model, data, "cpu")
        with eagertpu.mode(mode):
            got, programs[mode] = train(model, data, "tpu")
            # The same lengths again: every program is in memory.
            again, programs[mode + " again"] = train(model, data, "tpu")
            eagertpu.sync()
        torch.testing.assert_close(torch.tensor(got), torch.tensor(cpu), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(torch.tensor(again), torch.tensor(cpu), rtol=1e-4, atol=1e-5)
    # Strict compiles a program for every call whose sizes changed.
    assert programs["strict"] >= 10 * STEPS, programs
    # Fused runs each new chunk as those calls (plus the runs of unchanged
    # calls between them as chunks of their own, each compiled once: 5% more
    # programs here).
    assert programs["fused"] <= programs["strict"] * 1.15, programs
    # The same lengths again compile nothing in strict or debug mode, and
    # in fused mode no more than its chunks that recur (hot: compiled once).
    assert programs["strict again"] == programs["debug again"] == 0, programs
    assert programs["fused again"] <= STEPS, programs
