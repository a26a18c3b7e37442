"""torch.compile(backend="tpu") next to fused eager on tpu and PyTorch CPU
eager, side by side in one run (part of torch_bench.py):

  chain     the 200-op elementwise chain of the classic workloads as a
            compiled function (its .item() outside the graph)      -> ops/s
  mlp       784-512-512-10, batch 64, AdamW: the whole training step
            compiled (dynamo breaks at zero_grad and backward; forward,
            backward and the optimizer step are graphs)           -> ms/step
  tiny_call a compiled x + 1 on a [4] tensor, called without a read:
            the call overhead of a graph                          -> us/call

Rounds of short bursts of every configuration, as the classic workloads;
figures are medians over rounds, ratios medians of each round's own ratio.
"""

import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_workloads import chain_ops, enter, median_ratio, print_ratios, settle, table

import eagertpu

CONFIGS = ["cpu", "fused", "compiled"]


def device_of(config):
    return torch.device("cpu") if config == "cpu" else torch.device("tpu")


class Chain:
    def __init__(self, config):
        self.x = torch.randn(256, generator=torch.Generator().manual_seed(0)).to(device_of(config))
        self.fn = torch.compile(chain_ops, backend="tpu") if config == "compiled" else chain_ops
        self.results = []

    def __call__(self):
        self.results.append(self.fn(self.x).item())


class Step:
    def __init__(self, config, width=512, batch=64):
        torch.manual_seed(0)
        dev = device_of(config)
        self.model = nn.Sequential(
            nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
        ).to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(batch, 784, generator=g).to(dev)
        self.y = torch.randint(0, 10, (batch,), generator=g).to(dev)
        self.step = torch.compile(self.step_fn, backend="tpu") if config == "compiled" else self.step_fn
        self.losses = []

    def step_fn(self):
        self.opt.zero_grad()
        loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return loss

    def __call__(self):
        self.losses.append(self.step().item())


class TinyCall:
    def __init__(self, config):
        self.x = torch.ones(4, device=device_of(config))
        self.fn = torch.compile(self.add, backend="tpu") if config == "compiled" else self.add

    @staticmethod
    def add(x):
        return x + 1

    def __call__(self):
        self.fn(self.x)


def timed(job, reps):
    start = time.perf_counter()
    for _ in range(reps):
        job()
    if isinstance(job, TinyCall) and job.x.device.type == "tpu":
        eagertpu.sync()
    return (time.perf_counter() - start) / reps


def run_compiled(quick=False):
    rounds = 2 if quick else 9
    burst = {"chain": 2 if quick else 10, "mlp": 2 if quick else 3, "tiny_call": 20 if quick else 400}
    makers = {"chain": Chain, "mlp": Step, "tiny_call": TinyCall}
    jobs, results = {}, {w: {c: [] for c in CONFIGS} for w in burst}
    for config in CONFIGS:
        enter("fused" if config == "compiled" else config)
        for w, make in makers.items():
            jobs[w, config] = make(config)
            settle(jobs[w, config], config)
    for w in burst:
        for r in range(rounds):
            for config in CONFIGS[r % 3 :] + CONFIGS[: r % 3]:
                enter("fused" if config == "compiled" else config)
                results[w][config].append(timed(jobs[w, config], burst[w]))
    eagertpu.set_mode("fused")

    def rate(c):  # chain ops per second
        return [200 / s for s in results["chain"][c]]

    out = {
        "chain_ops_per_s": {c: round(statistics.median(rate(c))) for c in CONFIGS},
        "mlp_ms_per_step": {c: round(statistics.median(results["mlp"][c]) * 1e3, 3) for c in CONFIGS},
        "tiny_call_us": {c: round(statistics.median(results["tiny_call"][c]) * 1e6, 2) for c in CONFIGS},
        "method": f"{rounds} rounds of bursts {burst}, order rotating; medians; ratios are medians of per-round ratios",
    }
    out["ratios"] = {
        "chain_compiled_over_fused_rate": median_ratio(rate("compiled"), rate("fused")),
        "chain_compiled_over_cpu_rate": median_ratio(rate("compiled"), rate("cpu")),
        "mlp_compiled_over_fused_time": median_ratio(results["mlp"]["compiled"], results["mlp"]["fused"]),
        "mlp_compiled_over_cpu_time": median_ratio(results["mlp"]["compiled"], results["mlp"]["cpu"]),
        "tiny_call_compiled_over_fused_op_time": median_ratio(
            results["tiny_call"]["compiled"], results["tiny_call"]["fused"]
        ),
    }
    ref_losses, ref_chain = jobs["mlp", "cpu"].losses, jobs["chain", "cpu"].results
    out["checks"] = {}
    for config in ("fused", "compiled"):
        # The first step of each (later ones differ in count: warm-up runs
        # until nothing compiles).
        first, ref_first = jobs["mlp", config].losses[0], ref_losses[0]
        out["checks"][f"mlp_{config}_first_loss_matches_cpu"] = abs(first - ref_first) <= 1e-4 * abs(ref_first)
        chain = jobs["chain", config].results
        out["checks"][f"chain_{config}_matches_cpu"] = all(abs(a - b) <= 1e-3 * max(1, abs(b)) for a, b in zip(chain, ref_chain))
    rows = [
        ("chain", [out["chain_ops_per_s"][c] for c in CONFIGS], "ops/s"),
        ("mlp step", [out["mlp_ms_per_step"][c] for c in CONFIGS], "ms"),
        ("tiny call (x + 1, no read)", [out["tiny_call_us"][c] for c in CONFIGS], "us"),
    ]
    table("compiled: torch.compile(backend='tpu') vs fused eager vs PyTorch CPU eager", CONFIGS, rows)
    print_ratios(out["ratios"], out["checks"])
    return out


RUNS = {"compiled": run_compiled}
