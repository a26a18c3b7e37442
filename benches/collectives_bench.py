"""Collectives through torch.distributed, side by side in one run.

  all_reduce  float32 SUM from 4 B to 64 MiB on 4 ranks (threads, one CPU
              device each): the eagertpu backend on tpu tensors next to gloo
              on CPU tensors of the same size, in the same process group
              ("cpu:gloo,tpu:eagertpu"), interleaved round by round
              -> microseconds per all_reduce, algorithm bandwidth (bytes/s)
  ddp_step    DistributedDataParallel training step of a 784-256-256-10 MLP,
              batch 32 per rank, SGD, on 1, 2 and 4 ranks    -> ms per step

Figures are medians over rounds, measured on rank 0 after a barrier; each
ratio is the median of the rounds' own ratios. Writes
target/bench/collectives.json.

    .venv/bin/python benches/collectives_bench.py [--rounds N]
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("EAGERTPU_DEVICE_COUNT", "4")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from eagertpu.distributed import spawn_threads  # noqa: E402

RANKS = 4
SIZES = [4, 4 << 10, 256 << 10, 4 << 20, 64 << 20]


def reps_for(nbytes):
    return max(3, min(100, (32 << 20) // nbytes))


def timed_all_reduces(x, reps, sync):
    dist.barrier()
    start = time.perf_counter()
    for _ in range(reps):
        dist.all_reduce(x)
    sync()
    return (time.perf_counter() - start) / reps


def all_reduce_rank(rank, rounds):
    device = torch.device("tpu", rank)
    out = {}
    for nbytes in SIZES:
        n = nbytes // 4
        on_tpu, on_cpu = torch.zeros(n, device=device), torch.zeros(n)
        reps = reps_for(nbytes)
        timed_all_reduces(on_tpu, 2, torch.tpu.synchronize)  # compile, warm
        timed_all_reduces(on_cpu, 2, lambda: None)
        tpu_s, cpu_s = [], []
        for _ in range(rounds):
            tpu_s.append(timed_all_reduces(on_tpu, reps, torch.tpu.synchronize))
            cpu_s.append(timed_all_reduces(on_cpu, reps, lambda: None))
        out[nbytes] = (tpu_s, cpu_s)
    return out


def ddp_rank(rank, steps):
    device = torch.device("tpu", rank)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(32, 784, generator=g).to(device), torch.randint(0, 10, (32,), generator=g).to(device)
    times = []
    for step in range(steps + 3):
        start = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        if step >= 3:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = spawn_threads(all_reduce_rank, RANKS, args=(args.rounds,))
    rows = []
    print(f"all_reduce, {RANKS} ranks: eagertpu (tpu) vs gloo (cpu)")
    print(f"{'bytes':>10} {'tpu us':>10} {'gloo us':>10} {'tpu GB/s':>9} {'gloo GB/s':>9} {'tpu/gloo time':>14}")
    for nbytes in SIZES:
        tpu_s, cpu_s = results[0][nbytes]
        tpu, cpu = statistics.median(tpu_s), statistics.median(cpu_s)
        ratio = statistics.median(t / c for t, c in zip(tpu_s, cpu_s))
        rows.append({
            "bytes": nbytes, "tpu_us": tpu * 1e6, "gloo_us": cpu * 1e6,
            "tpu_algbw_gbps": nbytes / tpu / 1e9, "gloo_algbw_gbps": nbytes / cpu / 1e9, "tpu_over_gloo_time": ratio,
        })
        print(f"{nbytes:>10} {tpu * 1e6:>10.1f} {cpu * 1e6:>10.1f} {nbytes / tpu / 1e9:>9.3f} "
              f"{nbytes / cpu / 1e9:>9.3f} {ratio:>14.2f}")
    ddp = {}
    for ranks in (1, 2, 4):
        ddp[ranks] = spawn_threads(ddp_rank, ranks, args=(10,))[0] * 1e3
        print(f"ddp step, {ranks} rank(s): {ddp[ranks]:.2f} ms")
    os.makedirs("target/bench", exist_ok=True)
    with open("target/bench/collectives.json", "w") as f:
        json.dump({"ranks": RANKS, "all_reduce": rows, "ddp_step_ms": ddp}, f, indent=2)
    print("wrote target/bench/collectives.json")


if __name__ == "__main__":
    main()
