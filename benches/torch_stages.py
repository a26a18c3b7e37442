"""The torch bench's workloads that split the runtime's own time by stage
(imported by torch_bench.py; helpers from torch_workloads.py).

  per_op   where one small op's time goes: PyTorch, the C ABI, views,
           recording, cuts (EAGERTPU_OP_TIMING=1 in a child process)
  replay   the tiny MLP's step and stages with trace-guarded replay on and off
           (child processes alternating EAGERTPU_REPLAY=1 and 0)
  step_phases  the tiny MLP's step split by phase (zero_grad, forward,
           backward, optimizer, the loss's read), PyTorch CPU eager next to
           tpu in fused mode, interleaved in one process

Each `run_*` returns a dict for torch.json and prints a table, as in
torch_workloads.py.
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
from torch_workloads import child_json, device_of, enter, print_ratios, ratio, settle, table


# ----------------------------------------------------------------- per_op ----


def per_op_time(config, n, repeats):
    """Best of `repeats` loops of n calls on 4x4 float32, results dropped: the
    loop's time per call, the sync after it per call, and runtime ops recorded
    / chunks executed per call. Configurations: cpu and cpu_out (PyTorch CPU,
    torch.add and torch.add(out=)), fused and strict (torch.add on tpu),
    fused_out (torch.add(out=) on tpu: ATen's structured meta function, no
    allocation), cpu_empty and tpu_empty (torch.empty: the allocation alone)."""
    dev = "cpu" if config.startswith("cpu") else "tpu"
    enter(config if config in ("strict", "fused") else "cpu" if dev == "cpu" else "fused")
    a, b = torch.randn(4, 4).to(dev), torch.randn(4, 4).to(dev)
    c = torch.empty(4, 4, device=dev)

    def loop(k):
        start = time.perf_counter()
        if config.endswith("_out"):
            for _ in range(k):
                torch.add(a, b, out=c)
        elif config.endswith("_empty"):
            for _ in range(k):
                torch.empty((4, 4), device=dev)
        else:
            for _ in range(k):
                torch.add(a, b)
        return time.perf_counter() - start

    loop(n)  # warm-up: the chunks' programs compiled
    eagertpu.sync()
    best = (float("inf"), 0.0, 0, 0)
    for _ in range(repeats):
        m0 = eagertpu.metrics()
        t = loop(n)
        start = time.perf_counter()
        eagertpu.sync()
        s = time.perf_counter() - start
        m1 = eagertpu.metrics()
        if t < best[0]:
            best = (t, s, m1["ops_recorded"] - m0["ops_recorded"], m1["executions"] - m0["executions"])
    t, s, ops, execs = best
    return {"loop_us": t / n * 1e6, "sync_us": s / n * 1e6, "ops_per_add": ops / n, "executions_per_add": execs / n}


def per_op_stages_child(n):
    """In a process with EAGERTPU_OP_TIMING=1: the fused torch.add loop, and
    the runtime's time per add in each stage (runtime/src/timing.rs)."""
    a, b = torch.randn(4, 4).to("tpu"), torch.randn(4, 4).to("tpu")
    for _ in range(n):
        torch.add(a, b)
    eagertpu.sync()
    best = None
    for _ in range(3):
        t0 = eagertpu.metrics()["op_timing"]
        start = time.perf_counter()
        for _ in range(n):
            torch.add(a, b)
        loop = time.perf_counter() - start
        t1 = eagertpu.metrics()["op_timing"]
        if best is None or loop < best[0]:
            best = (loop, {k: (t1[k]["nanos"] - t0[k]["nanos"]) / n / 1e3 for k in t1})
    loop, stages = best
    return {"loop_us": loop / n * 1e6, **stages}


def run_per_op(quick=False):
    n = 2000 if quick else 20000
    configs = ("cpu", "cpu_out", "cpu_empty", "fused", "fused_out", "tpu_empty", "strict")
    counts = {"strict": n // 4}  # the slow one: fewer ops
    res = {c: per_op_time(c, counts.get(c, n), 3) for c in configs}
    eagertpu.set_mode("fused")
    env = dict(os.environ, EAGERTPU_OP_TIMING="1", EAGERTPU_MODE="fused", EAGERTPU_LOG="error")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "per_op_stages", str(n)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
    st = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    us = {c: res[c]["loop_us"] for c in configs}
    out = {
        "setup": f"torch.add(a, b), a and b 4x4 float32, results dropped, best of 3 loops of {n} "
        f"({counts['strict']} in strict mode)",
        "us_per_op": {
            "cpu": round(us["cpu"], 3),
            "cpu_out": round(us["cpu_out"], 3),
            "tpu_fused_record": round(us["fused"], 3),
            "tpu_fused_out": round(us["fused_out"], 3),
            "cpu_empty": round(us["cpu_empty"], 3),
            "tpu_empty": round(us["tpu_empty"], 3),
            "tpu_fused_flush": round(res["fused"]["sync_us"], 3),
            "tpu_strict_enqueue": round(us["strict"], 3),
            "tpu_strict_drain": round(res["strict"]["sync_us"], 3),
        },
        "breakdown_us": {
            "cpu_allocation": round(us["cpu"] - us["cpu_out"], 3),
            "backend_over_cpu": round(us["fused"] - us["cpu"], 3),
            "tpu_allocation_over_cpu": round(us["tpu_empty"] - us["cpu_empty"], 3),
            "strict_launch_over_fused_record": round(us["strict"] - us["fused"], 3),
        },
        "runtime_ops_per_add": {m: res[m]["ops_per_add"] for m in ("fused", "strict")},
        "executions_per_add": {m: res[m]["executions_per_add"] for m in ("fused", "strict")},
        "what": {
            "cpu": "PyTorch CPU eager: Python call, ATen dispatch, structured meta function, output allocation, "
            "CPU kernel",
            "cpu_out": "the same with out= (no allocation)",
            "tpu_fused_record": "tpu, fused mode, nothing read: the loop's time per op (window cuts inside the loop "
            "included, see executions_per_add)",
            "tpu_fused_out": "torch.add(out=) on tpu: ATen's structured meta function and the backend's kernel, no "
            "allocation (the functional form skips the meta function for contiguous operands)",
            "cpu_empty": "torch.empty((4, 4)) on the CPU: Python argument parsing, dispatch, allocation",
            "tpu_empty": "the same on tpu: registering and freeing the storage instead of malloc and free",
            "tpu_fused_flush": "the eagertpu.sync() after the fused loop, per op of the loop",
            "tpu_strict_enqueue": "tpu, strict mode: the loop's time per op (each op launched, not awaited)",
            "tpu_strict_drain": "the eagertpu.sync() after the strict loop, per op",
            "cpu_allocation": "= cpu - cpu_out",
            "backend_over_cpu": "= tpu_fused_record - cpu: what the tpu path costs beyond PyTorch's own CPU op",
            "tpu_allocation_over_cpu": "= tpu_empty - cpu_empty",
            "strict_launch_over_fused_record": "= tpu_strict_enqueue - tpu_fused_record: launching each op",
            "runtime_ops_per_add": "ops the runtime recorded per torch.add",
            "executions_per_add": "programs launched per torch.add (fused: results nobody holds are never run)",
        },
    }
    if st is not None:
        # Stages nest: abi > views, record > cut (runtime/src/timing.rs).
        out["stages_us"] = {
            "loop_timed": round(st["loop_us"], 3),
            "pytorch_and_backend": round(st["loop_us"] - st["abi"], 3),
            "abi_entry": round(st["abi"] - st["views"] - st["record"], 3),
            "views": round(st["views"], 3),
            "record": round(st["record"] - st["cut"], 3),
            "cut": round(st["cut"], 3),
        }
        out["what"].update({
            "loop_timed": "tpu_fused_record again, in a process timing the runtime's stages (EAGERTPU_OP_TIMING=1: "
            "each clock read adds to it)",
            "pytorch_and_backend": "outside the C ABI: Python call, ATen dispatch, autograd and ADInplaceOrView "
            "layers, the backend's C++ kernel (result dtype and shape, allocation, the caller's file:line)",
            "abi_entry": "inside C ABI calls, outside views and recording: argument decoding, the origin, "
            "registering and freeing storages",
            "views": "reading the inputs' storages and writing the output's (the storage table)",
            "record": "recording the op: checks, type inference, the trace node, the window's signature and policy",
            "cut": "cuts inside the loop: building, looking up and launching chunks (or dropping dead ones)",
        })
    out["ratios"] = {
        "fused_record_over_cpu": ratio(us["fused"], us["cpu"]),
        "strict_over_fused_record": ratio(us["strict"], us["fused"]),
    }
    out["checks"] = {}
    rows = [(k, [v], out["what"][k].split(":")[0][:60]) for k, v in out["us_per_op"].items()]
    rows += [(k, [v], out["what"][k]) for k, v in out["breakdown_us"].items()]
    rows += [(k, [v], out["what"][k][:70]) for k, v in out.get("stages_us", {}).items()]
    table(
        f"per_op: {out['setup']}",
        ["us/op"],
        rows,
        note=f"runtime ops per add {out['runtime_ops_per_add']}, executions per add {out['executions_per_add']}",
    )
    print_ratios(out["ratios"], out["checks"])
    return out


# ----------------------------------------------------------------- replay ----


def tiny_mlp(dev):
    """The tiny MLP (784-32-32-10) with AdamW and its batch of 8 on `dev`, the
    same on every device for a seed: (model, optimizer, x, y)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    return model, opt, torch.randn(8, 784, generator=g).to(dev), torch.randint(0, 10, (8,), generator=g).to(dev)


def replay_child(steps):
    """In a process with EAGERTPU_OP_TIMING=1 and EAGERTPU_REPLAY as given:
    the tiny MLP (784-32-32-10, batch 8, AdamW) trained with the loss read
    every step; its time per step, the runtime's stages per step, the replay
    counters and the losses."""
    model, opt, x, y = tiny_mlp("tpu")
    losses = []

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())

    for _ in range(20):
        step()
    eagertpu.wait_for_compiles()
    for _ in range(10):
        step()
    m0 = eagertpu.metrics()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    ms = (time.perf_counter() - start) / steps * 1e3
    m1 = eagertpu.metrics()
    t0, t1 = m0["op_timing"], m1["op_timing"]
    stages = {k: (t1[k]["nanos"] - t0[k]["nanos"]) / steps / 1e3 for k in t1}
    counts = {k: (m1[k] - m0[k]) / steps for k in ("replayed_chunks", "replayed_ops", "replay_misses", "executions")}
    return {"ms_per_step": ms, "stages_us": stages, "per_step": counts, "losses": losses}


def run_replay(quick=False):
    steps, rounds = (50, 1) if quick else (300, 3)
    runs = {"on": [], "off": []}
    for _ in range(rounds):  # alternating, so that the machine's drift hits both
        for name, flag in (("on", "1"), ("off", "0")):
            # Deterministic: the losses are compared bit for bit, and the first
            # child may find a cold disk cache where the others find it warm.
            runs[name].append(child_json(
                __file__, ["replay", steps], EAGERTPU_OP_TIMING="1", EAGERTPU_REPLAY=flag, EAGERTPU_MODE="fused",
                EAGERTPU_LOG="error", EAGERTPU_DETERMINISTIC="1",
            ))

    def median(name, get):
        return statistics.median(get(r) for r in runs[name])

    out = {
        "setup": f"tiny MLP 784-32-32-10, batch 8, AdamW, loss read every step: {steps} steps after warm-up, "
        f"{rounds} child processes each with EAGERTPU_REPLAY=1 and =0, alternating (EAGERTPU_OP_TIMING=1 in all)",
        "ms_per_step": {n: round(median(n, lambda r: r["ms_per_step"]), 4) for n in runs},
        "stages_us_per_step": {
            n: {k: round(median(n, lambda r, k=k: r["stages_us"][k]), 2) for k in runs[n][0]["stages_us"]}
            for n in runs
        },
        "per_step": {n: runs[n][0]["per_step"] for n in runs},
    }
    on, off = out["stages_us_per_step"]["on"], out["stages_us_per_step"]["off"]
    out["ratios"] = {
        "step_off_over_on": ratio(out["ms_per_step"]["off"], out["ms_per_step"]["on"]),
        "record_off_over_on": ratio(off["record"], on["record"]),
        "cut_off_over_on": ratio(off["cut"], on["cut"]),
    }
    out["checks"] = {
        "losses_identical_with_and_without_replay": all(r["losses"] == runs["off"][0]["losses"]
                                                         for r in runs["on"] + runs["off"]),
        "every_chunk_replayed": all(r["per_step"]["replayed_chunks"] == r["per_step"]["executions"]
                                    for r in runs["on"]),
        "nothing_replayed_when_off": all(r["per_step"]["replayed_chunks"] == 0 for r in runs["off"]),
    }
    rows = [("ms/step", [out["ms_per_step"]["on"], out["ms_per_step"]["off"]], "")]
    rows += [(f"{k} us/step", [on[k], off[k]], "") for k in on]
    rows += [(f"{k}/step", [out["per_step"]["on"][k], out["per_step"]["off"][k]], "") for k in out["per_step"]["on"]]
    table(f"replay: {out['setup']}", ["replay on", "replay off"], rows)
    print_ratios(out["ratios"], out["checks"])
    return out


# ------------------------------------------------------------ step_phases ----

PHASES = ("zero_grad", "forward", "backward", "optimizer", "read")


class PhasedLoop:
    """The tiny MLP's training loop (784-32-32-10, batch 8, AdamW, the loss
    read every step) on one device, timing each phase of each step; every
    step's loss kept."""

    def __init__(self, dev):
        self.model, self.opt, self.x, self.y = tiny_mlp(dev)
        self.losses = []

    def steps(self, n):
        """Runs n steps; the seconds each phase took, summed over them."""
        spent = dict.fromkeys(PHASES, 0.0)
        clock = time.perf_counter
        for _ in range(n):
            t0 = clock()
            self.opt.zero_grad()
            t1 = clock()
            loss = F.cross_entropy(self.model(self.x), self.y)
            t2 = clock()
            loss.backward()
            t3 = clock()
            self.opt.step()
            t4 = clock()
            self.losses.append(loss.item())
            t5 = clock()
            for phase, (a, b) in zip(PHASES, ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5))):
                spent[phase] += b - a
        return spent


def run_step_phases(quick=False):
    """Where the tiny MLP's step spends its time on tpu (fused mode) against
    PyTorch CPU eager: each phase's median over rounds of interleaved bursts.
    In fused mode a phase's time is the host's (recording, and cuts where
    the window makes them: the period's cut falls where the loss is
    computed, in the forward pass), not the device's, except in the read."""
    steps, rounds = (20, 3) if quick else (200, 11)
    loops = {}
    for config in ("cpu", "fused"):
        enter(config)
        loops[config] = PhasedLoop(device_of(config))
        settle(lambda loop=loops[config]: loop.steps(1), config)
    per_round = {config: [] for config in loops}
    for _ in range(rounds):
        for config, loop in loops.items():
            enter(config)
            spent = loop.steps(steps)
            per_round[config].append({k: v / steps * 1e6 for k, v in spent.items()})
    us = {config: {k: round(statistics.median(r[k] for r in rs), 2) for k in PHASES}
          for config, rs in per_round.items()}
    for config in us:
        us[config]["step"] = round(statistics.median(sum(r.values()) for r in per_round[config]), 2)
    out = {
        "setup": f"tiny MLP 784-32-32-10, batch 8, AdamW, loss read every step; {rounds} rounds of {steps} "
        "steps per device, interleaved; us per step, medians over rounds",
        "us_per_step": us,
        "fused_minus_cpu_us": {k: round(us["fused"][k] - us["cpu"][k], 2) for k in (*PHASES, "step")},
        "ratios": {"step_cpu_over_fused": ratio(us["cpu"]["step"], us["fused"]["step"])},
    }
    # The same steps on both devices: the first ones (warm-up ran more on tpu).
    first = min(len(loop.losses) for loop in loops.values())
    out["checks"] = {
        "losses_match_cpu": all(abs(a - b) <= 1e-3 * max(1.0, abs(b))
                                for a, b in zip(loops["fused"].losses[:first], loops["cpu"].losses[:first])),
    }
    rows = [(k, [us["cpu"][k], us["fused"][k], out["fused_minus_cpu_us"][k]], "us/step") for k in (*PHASES, "step")]
    table(f"step_phases: {out['setup']}", ["cpu", "fused", "fused - cpu"], rows)
    print_ratios(out["ratios"], out["checks"])
    return out


RUNS = {
    "per_op": run_per_op,
    "replay": run_replay,
    "step_phases": run_step_phases,
}

if __name__ == "__main__" and sys.argv[1:2] == ["replay"]:
    print(json.dumps(replay_child(int(sys.argv[2]))))
if __name__ == "__main__" and sys.argv[1:2] == ["per_op_stages"]:
    print(json.dumps(per_op_stages_child(int(sys.argv[2]))))
