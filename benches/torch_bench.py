"""PyTorch on tpu in each mode, side by side with PyTorch CPU eager, in one run.

Workloads (as the Rust modes bench):
  chain     200 elementwise ops on a [256] tensor, then .item()   -> ops/s
  mlp       784-512-512-10, batch 64, AdamW, loss.item() each step -> ms/step
  tiny_mlp  784-32-32-10, batch 8, same loop                       -> ms/step

Configurations are interleaved round by round (this machine is noisy) and
each figure is the median over rounds. Writes target/bench/torch.json.

    .venv/bin/python benches/torch_bench.py [--rounds N] [--quick]
"""

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import eagertpu

CONFIGS = ["cpu", "debug", "strict", "fused"]


def device_of(config):
    return torch.device("cpu") if config == "cpu" else torch.device("tpu")


def enter(config):
    # Work still queued by the previous configuration must not run on this
    # one's clock (the machine has two cores).
    eagertpu.sync()
    if config != "cpu":
        eagertpu.set_mode(config)


# ------------------------------------------------------------------ chain ----


def chain_once(x):
    y = x
    for _ in range(50):
        y = y * 1.0001
        y = y + 0.5
        y = y.tanh()
        y = y - x
    return y.sum().item()


def chain_round(config, reps):
    x = torch.randn(256, generator=torch.Generator().manual_seed(0)).to(device_of(config))
    chain_once(x)
    start = time.perf_counter()
    for _ in range(reps):
        chain_once(x)
    return 200 * reps / (time.perf_counter() - start)


# -------------------------------------------------------------------- mlp ----


class Loop:
    """One training loop, kept across rounds (its warm-up compiles once)."""

    def __init__(self, config, width, batch):
        torch.manual_seed(0)
        dev = device_of(config)
        self.model = nn.Sequential(
            nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
        ).to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(batch, 784, generator=g).to(dev)
        self.y = torch.randint(0, 10, (batch,), generator=g).to(dev)
        self.losses = []

    def step(self):
        self.opt.zero_grad()
        loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        self.losses.append(loss.item())


def loop_round(loop, reps):
    start = time.perf_counter()
    for _ in range(reps):
        loop.step()
    return (time.perf_counter() - start) / reps * 1e3


# ------------------------------------------------------------------- main ----


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="few repetitions (a smoke run)")
    args = parser.parse_args()
    reps = {"chain": 3 if args.quick else 40, "mlp": 3 if args.quick else 15, "tiny_mlp": 5 if args.quick else 60}

    results = {w: {c: [] for c in CONFIGS} for w in reps}
    loops = {}
    for config in CONFIGS:  # warm-up: compile everything once, outside the timed rounds
        enter(config)
        chain_round(config, 1)
        for name, (width, batch) in {"mlp": (512, 64), "tiny_mlp": (32, 8)}.items():
            loops[name, config] = Loop(config, width, batch)
            for _ in range(3):
                loops[name, config].step()
    for r in range(args.rounds):
        for config in CONFIGS:
            enter(config)
            results["chain"][config].append(chain_round(config, reps["chain"]))
            eagertpu.sync()
            results["mlp"][config].append(loop_round(loops["mlp", config], reps["mlp"]))
            eagertpu.sync()
            results["tiny_mlp"][config].append(loop_round(loops["tiny_mlp", config], reps["tiny_mlp"]))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    eagertpu.set_mode("fused")

    out = {w: {c: round(statistics.median(v), 3) for c, v in by.items()} for w, by in results.items()}
    out["units"] = {"chain": "ops/s (higher is better)", "mlp": "ms/step", "tiny_mlp": "ms/step"}
    out["ratios"] = {
        "chain_fused_over_cpu": round(out["chain"]["fused"] / out["chain"]["cpu"], 3),
        "chain_fused_over_strict": round(out["chain"]["fused"] / out["chain"]["strict"], 3),
        "mlp_cpu_over_fused": round(out["mlp"]["cpu"] / out["mlp"]["fused"], 3),
        "tiny_mlp_cpu_over_fused": round(out["tiny_mlp"]["cpu"] / out["tiny_mlp"]["fused"], 3),
        "tiny_mlp_strict_over_fused": round(out["tiny_mlp"]["strict"] / out["tiny_mlp"]["fused"], 3),
    }
    # The same loop on every configuration computes the same losses.
    for name in ("mlp", "tiny_mlp"):
        ref = loops[name, "cpu"].losses
        for config in CONFIGS[1:]:
            got = loops[name, config].losses
            worst = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(got, ref))
            assert worst < 1e-2, f"{name} on {config} diverged from the CPU (relative {worst:.3g})"
    out["metrics"] = {k: eagertpu.metrics()[k] for k in ("compiles", "cache_hits", "host_syncs")}
    out["fallbacks"] = eagertpu.fallbacks()

    print(f"{'':10}" + "".join(f"{c:>12}" for c in CONFIGS))
    for w in reps:
        print(f"{w:10}" + "".join(f"{out[w][c]:>12.3f}" for c in CONFIGS) + f"   {out['units'][w]}")
    for k, v in out["ratios"].items():
        print(f"  {k:30} {v}")
    os.makedirs("target/bench", exist_ok=True)
    with open("target/bench/torch.json", "w") as f:
        json.dump(out, f, indent=2)
    print("wrote target/bench/torch.json")


if __name__ == "__main__":
    main()
