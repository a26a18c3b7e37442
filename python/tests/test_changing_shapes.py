"""A training loop whose shapes change at every step (sequences of a new
length each batch, no padding or bucketing): the losses match the CPU in
every mode, and fused mode compiles one program a step where strict mode
compiles one per op, since each step's chunk is the last one's with new
sizes (`metrics()["resized_chunks_compiled"]`)."""

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
    losses, programs = [], []
    for x, y in data:
        before = eagertpu.metrics()
        opt.zero_grad()
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
        after = eagertpu.metrics()
        # Compiled here or loaded from the disk cache (a warm test cache).
        programs.append(sum(after[k] - before[k] for k in ("compiles", "disk_hits")))
    return losses, programs


def test_a_loop_over_new_lengths_compiles_a_program_a_step_in_fused_mode():
    torch.manual_seed(0)
    model = Pooled()
    runs = {}
    # Lengths no other test uses, and other ones per mode: each mode's
    # programs are new to this process.
    for mode, first_length in (("fused", 41), ("strict", 91), ("debug", 131)):
        data = batches(first_length)
        cpu, _ = train(model, data, "cpu")
        resized = eagertpu.metrics()["resized_chunks_compiled"]
        with eagertpu.mode(mode):
            got, programs = train(model, data, "tpu")
            eagertpu.sync()
        torch.testing.assert_close(torch.tensor(got), torch.tensor(cpu), rtol=1e-4, atol=1e-5)
        runs[mode] = (programs, eagertpu.metrics()["resized_chunks_compiled"] - resized)
    fused, resized = runs["fused"]
    strict, _ = runs["strict"]
    # Fused: a step's chunks are new at first (run op by op, as strict mode
    # runs them) and while the period detector finds the loop; from then on
    # each step is the one before with new sizes, and its chunk compiles as
    # one program (or two: the loss read cuts the step).
    settled = fused[-4:]
    assert all(n <= 2 for n in settled), fused
    assert resized >= 4, (resized, fused)
    # Strict compiles a program for every op whose sizes changed.
    assert all(n >= 10 for n in strict[-4:]), strict
    assert sum(settled) * 5 <= sum(strict[-4:]), (fused, strict)
    assert runs["debug"][1] == 0, "debug mode runs op by op"
