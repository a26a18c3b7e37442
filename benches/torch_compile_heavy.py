"""The torch bench's compile-heavy workload (imported by torch_bench.py):
loops whose shapes change every iteration, so that each iteration needs new
programs, fused mode against strict mode in alternating fresh processes with
the disk cache off.

  shape_walk    a few elementwise ops and a matmul on x of shape (16, 33+i)
  varlen_train  a training step over a batch of sequences of a new length
                each step, the loss read every step

Each loop runs cold (every program compiled), then three warm passes over the
same shapes in the same process. `run_compile_heavy` returns a dict for
torch.json and prints a table per loop; nothing here stops on a missed target.
"""

import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import eagertpu
from torch_workloads import counters, print_ratios, ratio, since, table


def shape_walk(dev, n):
    """A few elementwise ops and a matmul on x of shape (16, 33 + i): every
    iteration has new shapes."""
    values = []
    for i in range(n):
        x = torch.linspace(-1.0, 1.0, 16 * (33 + i)).reshape(16, 33 + i).to(dev)
        y = (x * 1.5 + 0.25).tanh() * x - 0.125
        z = y @ y.T
        values.append((z.relu() * 0.5).sum().item())
    return values


def varlen_train(dev, n):
    """A training step (per-token MLP, mean over the sequence, a classifier;
    SGD with momentum) over a batch of sequences of a new length each step,
    the loss read every step: the losses."""
    torch.manual_seed(0)
    token = nn.Sequential(nn.Linear(12, 20), nn.GELU(), nn.Linear(20, 12))
    head = nn.Linear(12, 3)
    model = nn.ModuleDict({"token": token, "head": head}).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    losses = []
    for i in range(n):
        x = torch.randn(4, 17 + 3 * i, 12, generator=g).to(dev)
        y = torch.randint(0, 3, (4,), generator=g).to(dev)
        opt.zero_grad()
        loss = F.cross_entropy(model["head"](model["token"](x).mean(dim=1)), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


COMPILE_HEAVY = {"shape_walk": shape_walk, "varlen_train": varlen_train}


def compile_heavy_child(mode, n, loop="shape_walk"):
    """Runs in a fresh process with the disk cache off: every program is compiled."""
    run = COMPILE_HEAVY[loop]
    eagertpu.set_mode(mode)
    before = counters()
    seconds_before = eagertpu.metrics()["compile_seconds"]
    start = time.perf_counter()
    got = run("tpu", n)
    eagertpu.sync()
    cold = time.perf_counter() - start
    d = since(before)
    compile_s = eagertpu.metrics()["compile_seconds"] - seconds_before
    warms = []  # the median of three passes: one pass is ~10 ms on a noisy machine
    for _ in range(3):
        start = time.perf_counter()
        run("tpu", n)
        warms.append(time.perf_counter() - start)
    warm = statistics.median(warms)
    ref = run("cpu", n)
    worst = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(got, ref))
    return {"cold_s": cold, "warm_s": warm, "warm_s_passes": [round(w, 4) for w in warms], "compiles": d["compiles"],
            "compile_s": compile_s, "max_rel_diff_vs_cpu": worst}


def compile_heavy_modes(loop, n):
    """`loop` for `n` iterations in fresh processes: strict, fused, fused,
    strict, strict, fused (this machine's speed drifts within a run); each
    mode's figures are from its fastest cold run."""
    res = {}
    for mode in ("strict", "fused", "fused", "strict", "strict", "fused"):
        env = dict(os.environ, EAGERTPU_CACHE_DIR="off", EAGERTPU_LOG="error")
        cmd = [sys.executable, os.path.abspath(__file__), "compile_heavy", mode, str(n), loop]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            res.setdefault(mode, {"error": proc.stderr.strip().splitlines()[-1:]})
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        runs = res.get(mode, {}).get("cold_s_runs", []) + [round(r["cold_s"], 3)]
        if "cold_s" not in res.get(mode, {}) or r["cold_s"] < res[mode]["cold_s"]:
            res[mode] = r
        res[mode]["cold_s_runs"] = runs
    start = time.perf_counter()
    COMPILE_HEAVY[loop]("cpu", n)
    return res, time.perf_counter() - start


def run_compile_heavy(quick=False):
    loops = {
        "shape_walk": (6 if quick else 24, "x of shape (16, 33+i): (x*1.5+0.25).tanh()*x-0.125, y @ y.T, relu, "
                       "sum, .item() each iteration"),
        "varlen_train": (4 if quick else 12, "a training step (Linear-GELU-Linear per token, mean over the "
                         "sequence, Linear; SGD momentum) on a batch of 4 sequences of length 17+3i, loss read "
                         "every step"),
    }
    out = {
        "setup": "loops whose shapes change every iteration, i = 0..n-1; a fresh process per mode, disk cache off",
        "what": {
            "cold_s": "wall time of the loop, every program compiled (the fastest of three fresh processes, cold_s_runs)",
            "warm_s": "the same loop again in the same process (programs in memory), median of three passes "
            "(each pass: warm_s_passes)",
            "compiles": "programs compiled by the cold loop",
            "compile_s": "time the plugin spent compiling them",
        },
        "ratios": {},
        "checks": {},
    }
    modes = ["strict", "fused"]
    for loop, (n, setup) in loops.items():
        res, cpu_s = compile_heavy_modes(loop, n)
        ok = all("cold_s" in res.get(m, {}) for m in modes)
        out[loop] = {"setup": f"{setup}, n = {n}", **{m: res.get(m) for m in modes}, "cpu_s": round(cpu_s, 4)}
        # The shape walk's ratios keep their names of before the second loop.
        prefix = "" if loop == "shape_walk" else f"{loop}_"
        for when in ("cold", "warm"):
            out["ratios"][f"{prefix}fused_over_strict_{when}"] = (
                ratio(res["fused"][f"{when}_s"], res["strict"][f"{when}_s"]) if ok else None
            )
        # A training loop's losses: float32 accumulation order differs.
        tolerance = 1e-4 if loop == "shape_walk" else 1e-3
        for m in res:
            out["checks"][f"{prefix}{m}_values_match_cpu"] = (
                "cold_s" in res[m] and res[m]["max_rel_diff_vs_cpu"] < tolerance
            )
        rows = [
            (k, [round(res[m][k], 4) if isinstance(res.get(m, {}).get(k), float) else res.get(m, {}).get(k)
                 for m in modes], u)
            for k, u in (("cold_s", "s"), ("warm_s", "s"), ("compiles", ""), ("compile_s", "s"))
        ]
        table(f"compile_heavy {loop}: {out[loop]['setup']}; a fresh process per mode, disk cache off", modes, rows,
              note=f"PyTorch CPU eager: {cpu_s:.4f} s")
    print_ratios(out["ratios"], out["checks"])
    return out


RUNS = {"compile_heavy": run_compile_heavy}

if __name__ == "__main__" and sys.argv[1:2] == ["compile_heavy"]:
    print(json.dumps(compile_heavy_child(sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])))
