"""PyTorch on tpu in each mode, side by side with PyTorch CPU eager, in one run.

Workloads (as the Rust modes bench), "classic":
  chain     200 elementwise ops on a [256] tensor, then .item()   -> ops/s
  mlp       784-512-512-10, batch 64, AdamW, loss.item() each step -> ms/step
  tiny_mlp  784-32-32-10, batch 8, same loop                       -> ms/step
  tiny_mlp_fused_adamw  the same with AdamW(fused=True) on every device (one
            optimizer kernel a step; Hugging Face's adamw_torch_fused)  -> ms/step

Configurations are interleaved in short bursts, round by round (this machine
is noisy); each figure is the median over rounds and each ratio the median of
the rounds' own ratios. Then the model-sized workloads of
torch_workloads.py: generate, gpt_train, two_threads; torch_compile_heavy.py:
compile_heavy; torch_stages.py: per_op, replay, step_phases; torch_compiled.py: compiled,
cpu_heap and llm (torch.compile with backend="tpu" next to fused eager and
CPU eager).
Writes target/bench/torch.json; numerical checks are reported in it
("checks") and printed, and a failed one makes the exit status 1 once every
workload has run.

    .venv/bin/python benches/torch_bench.py [--rounds N] [--quick] [--only classic,generate,...]
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import eagertpu
from torch_compile_heavy import RUNS as COMPILE_HEAVY_RUNS
from torch_compiled import RUNS as COMPILED_RUNS
from torch_stages import RUNS as STAGE_RUNS
from torch_workloads import RUNS as MODEL_RUNS
from torch_workloads import chain_ops, device_of, enter, median_ratio, settle

RUNS = {**MODEL_RUNS, **COMPILE_HEAVY_RUNS, **STAGE_RUNS, **COMPILED_RUNS}

CONFIGS = ["cpu", "debug", "strict", "fused"]


# ------------------------------------------------------------------ chain ----


def chain_once(x):
    return chain_ops(x).item()


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

    def __init__(self, config, width, batch, fused_optimizer=False):
        torch.manual_seed(0)
        dev = device_of(config)
        self.model = nn.Sequential(
            nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
        ).to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, fused=True if fused_optimizer else None)
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


def run_classic(args):
    # Per round, one short burst of each configuration (the order rotating
    # from round to round); the ratios are medians of the rounds' own ratios.
    # This machine drifts between fast and slow spells of a second or two
    # (the same tiny MLP loop alone: 1.3 to 2.7 ms/step within one process),
    # so long bursts compared configurations measured in different spells
    # (two full runs of one build gave the tiny MLP 0.67x and 1.18x CPU).
    burst = {
        "chain": 2 if args.quick else 10,
        "mlp": 2 if args.quick else 3,
        "tiny_mlp": 3 if args.quick else 20,
        "tiny_mlp_fused_adamw": 3 if args.quick else 20,
    }
    rounds = 2 if args.quick else args.rounds
    # width, batch, AdamW(fused=True)
    training = {"mlp": (512, 64, False), "tiny_mlp": (32, 8, False), "tiny_mlp_fused_adamw": (32, 8, True)}

    results = {w: {c: [] for c in CONFIGS} for w in burst}
    loops = {}
    for config in CONFIGS:  # warm-up: every loop settled, outside the timed rounds
        enter(config)
        settle(lambda: chain_round(config, 1), config)
        for name, (width, batch, fused_optimizer) in training.items():
            loops[name, config] = Loop(config, width, batch, fused_optimizer)
            settle(loops[name, config].step, config)
    for workload in burst:
        for r in range(rounds):
            for config in CONFIGS[r % len(CONFIGS) :] + CONFIGS[: r % len(CONFIGS)]:
                enter(config)
                if workload == "chain":
                    results[workload][config].append(chain_round(config, burst[workload]))
                else:
                    results[workload][config].append(loop_round(loops[workload, config], burst[workload]))
        print(f"{workload}: {rounds} rounds done", flush=True)
    eagertpu.set_mode("fused")

    def paired(workload, num, den):
        return median_ratio(results[workload][num], results[workload][den])

    out = {w: {c: round(statistics.median(v), 3) for c, v in by.items()} for w, by in results.items()}
    out["units"] = {"chain": "ops/s (higher is better)", **{name: "ms/step" for name in training}}
    out["method"] = (
        f"{rounds} rounds per workload; a round runs a short burst of every configuration (order rotating: "
        f"{burst}); figures are medians over rounds, ratios medians of each round's own ratio"
    )
    out["ratios"] = {
        "chain_fused_over_cpu": paired("chain", "fused", "cpu"),
        "chain_fused_over_strict": paired("chain", "fused", "strict"),
        "mlp_cpu_over_fused": paired("mlp", "cpu", "fused"),
        "tiny_mlp_cpu_over_fused": paired("tiny_mlp", "cpu", "fused"),
        "tiny_mlp_strict_over_fused": paired("tiny_mlp", "strict", "fused"),
        "tiny_mlp_fused_adamw_cpu_over_fused": paired("tiny_mlp_fused_adamw", "cpu", "fused"),
    }
    # The same loop on every configuration computes the same losses. The mlp
    # memorizes its one batch: its loss falls to ~2e-7, where float32 rounding
    # alone differs by percents, so losses under 1e-4 are compared absolutely.
    out["checks"], out["max_rel_loss_diff_vs_cpu"] = {}, {}
    for name in training:
        ref = loops[name, "cpu"].losses
        for config in CONFIGS[1:]:
            got = loops[name, config].losses
            worst = max(abs(a - b) / max(abs(b), 1e-4) for a, b in zip(got, ref))
            out["checks"][f"{name}_{config}_losses_match_cpu"] = worst < 1e-2
            out["max_rel_loss_diff_vs_cpu"][f"{name}_{config}"] = round(worst, 6)

    print(f"{'':20}" + "".join(f"{c:>12}" for c in CONFIGS))
    for w in burst:
        print(f"{w:20}" + "".join(f"{out[w][c]:>12.3f}" for c in CONFIGS) + f"   {out['units'][w]}")
    for k, v in out["ratios"].items():
        print(f"  {k:38} {v}")
    for k, worst in out["max_rel_loss_diff_vs_cpu"].items():
        print(f"  check {k + '_losses_match_cpu':48} {out['checks'][k + '_losses_match_cpu']} (max relative diff {worst})")
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="few repetitions (a smoke run)")
    parser.add_argument("--only", default="", help="comma-separated: classic," + ",".join(RUNS))
    args = parser.parse_args()
    only = [w for w in args.only.split(",") if w] or ["classic", *RUNS]
    unknown = set(only) - {"classic", *RUNS}
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}")

    out = {}
    started = time.perf_counter()
    if "classic" in only:
        out.update(run_classic(args))
    seconds = {}
    for name, run in RUNS.items():
        if name in only:
            start = time.perf_counter()
            out[name] = run(quick=args.quick)
            seconds[name] = round(time.perf_counter() - start, 1)
            out.setdefault("ratios", {}).update({f"{name}_{k}": v for k, v in out[name]["ratios"].items()})
    out["metrics"] = {k: eagertpu.metrics()[k] for k in ("compiles", "cache_hits", "host_syncs")}
    out["fallbacks"] = eagertpu.fallbacks()
    out["seconds"] = {**seconds, "total": round(time.perf_counter() - started, 1)}
    print(f"\nseconds per workload: {out['seconds']}")

    failed = [k for k, v in out.get("checks", {}).items() if v is False]
    failed += [f"{name}.{k}" for name in RUNS if name in out for k, v in out[name]["checks"].items() if v is False]
    os.makedirs("target/bench", exist_ok=True)
    with open("target/bench/torch.json", "w") as f:
        json.dump(out, f, indent=2)
    print("wrote target/bench/torch.json")
    if failed:
        print(f"FAILED CHECKS: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
