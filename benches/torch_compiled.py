"""torch.compile(backend="tpu") next to fused eager on tpu and PyTorch CPU
eager, side by side in one run (part of torch_bench.py):

  chain     the 200-op elementwise chain of the classic workloads as a
            compiled function (its .item() outside the graph)      -> ops/s
  mlp       784-512-512-10, batch 64, AdamW: the whole training step
            compiled (dynamo breaks at zero_grad and backward; forward,
            backward and the optimizer step are graphs)           -> ms/step
  tiny_call a compiled x + 1 on a [4] tensor, called without a read:
            the call overhead of a graph                          -> us/call
            (and, in a child process with EAGERTPU_OP_TIMING=1, the
            part of a call spent inside the runtime's C ABI: the direct
            call of the graph's program, next to which the rest is
            dynamo's guards, aot_autograd's wrapper and the C++ binding;
            and torch.compile's own floor: the same function compiled with
            backend="aot_eager" on a CPU tensor, its graph's one op a CPU
            kernel, timed in bursts alternating with the tpu call's)
  dropout   64-256-256-10 with dropout 0.1 after each hidden layer,
            batch 32, AdamW: the step compiled whole (its graphs draw
            new keys at each direct call)                          -> ms/step

and, as their own workloads, "cpu_heap": the mlp step (cpu, fused and
compiled) in fresh processes, one model each as in a user's script, with the
host heap keeping freed memory for reuse (EAGERTPU_CPU_HEAP=cache, the
default on the XLA CPU plugin) and with glibc's defaults (=system), the two
alternating -> ms/step; and "llm", a small Hugging Face causal LM (Llama,
random weights, built from a config):
  train     forward with labels, backward and AdamW, batch 4 x 32 tokens;
            the step compiled whole                               -> ms/step
  generate  greedy generate() with a static cache, 16 new tokens;
            compiled: Hugging Face compiles the decode step with
            CompileConfig(backend="tpu"); the others disable_compile -> ms/token

Rounds of short bursts of every configuration, as the classic workloads;
figures are medians over rounds, ratios medians of each round's own ratio.
"""

import copy
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_workloads import (
    chain_ops,
    child_json,
    enter,
    make_llama,
    median_ratio,
    print_ratios,
    settle,
    table,
)

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


class TrainStep:
    """A training step (zero_grad, the subclass's loss, backward, the
    optimizer's step), compiled whole in the compiled configuration; each
    step's loss read and kept."""

    def __init__(self, config):
        self.step = torch.compile(self.step_fn, backend="tpu") if config == "compiled" else self.step_fn
        self.losses = []

    def step_fn(self):
        self.opt.zero_grad()
        loss = self.loss()
        loss.backward()
        self.opt.step()
        return loss

    def __call__(self):
        self.losses.append(self.step().item())


class Step(TrainStep):
    def __init__(self, config, width=512, batch=64):
        super().__init__(config)
        torch.manual_seed(0)
        dev = device_of(config)
        self.model = nn.Sequential(
            nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
        ).to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(batch, 784, generator=g).to(dev)
        self.y = torch.randint(0, 10, (batch,), generator=g).to(dev)

    def loss(self):
        return F.cross_entropy(self.model(self.x), self.y)


class DropoutStep(TrainStep):
    def __init__(self, config, width=256, batch=32, p=0.1):
        super().__init__(config)
        torch.manual_seed(0)
        dev = device_of(config)
        self.model = nn.Sequential(
            nn.Linear(64, width), nn.ReLU(), nn.Dropout(p), nn.Linear(width, width), nn.ReLU(), nn.Dropout(p),
            nn.Linear(width, 10),
        ).to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(batch, 64, generator=g).to(dev)
        self.y = torch.randint(0, 10, (batch,), generator=g).to(dev)

    def loss(self):
        return F.cross_entropy(self.model(self.x), self.y)


class TinyCall:
    def __init__(self, config, backend="tpu", device=None):
        self.x = torch.ones(4, device=device or device_of(config))
        self.fn = torch.compile(self.add, backend=backend) if config == "compiled" else self.add

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


def side_by_side(makers, burst, rounds):
    """Makes each workload's job in each configuration (`makers[w](config)`)
    and settles it, then times rounds of bursts, the configurations' order
    rotating: the jobs, and {workload: {config: [seconds per call]}}."""
    jobs, results = {}, {w: {c: [] for c in CONFIGS} for w in makers}
    for config in CONFIGS:
        enter("fused" if config == "compiled" else config)
        for w, make in makers.items():
            jobs[w, config] = make(config)
            settle(jobs[w, config], config)
    for w in makers:
        for r in range(rounds):
            for config in CONFIGS[r % 3 :] + CONFIGS[: r % 3]:
                enter("fused" if config == "compiled" else config)
                results[w][config].append(timed(jobs[w, config], burst[w]))
    eagertpu.set_mode("fused")
    return jobs, results


def run_compiled(quick=False):
    rounds = 2 if quick else 9
    burst = {"chain": 2 if quick else 10, "mlp": 2 if quick else 3, "tiny_call": 20 if quick else 400,
             "dropout": 3 if quick else 20}
    jobs, results = side_by_side(
        {"chain": Chain, "mlp": Step, "tiny_call": TinyCall, "dropout": DropoutStep}, burst, rounds
    )

    def rate(c):  # chain ops per second
        return [200 / s for s in results["chain"][c]]

    out = {
        "chain_ops_per_s": {c: round(statistics.median(rate(c))) for c in CONFIGS},
        "mlp_ms_per_step": {c: round(statistics.median(results["mlp"][c]) * 1e3, 3) for c in CONFIGS},
        "tiny_call_us": {c: round(statistics.median(results["tiny_call"][c]) * 1e6, 2) for c in CONFIGS},
        "dropout_ms_per_step": {c: round(statistics.median(results["dropout"][c]) * 1e3, 3) for c in CONFIGS},
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
        "dropout_compiled_over_fused_time": median_ratio(results["dropout"]["compiled"], results["dropout"]["fused"]),
        "dropout_compiled_over_cpu_time": median_ratio(results["dropout"]["compiled"], results["dropout"]["cpu"]),
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
    # Every graph of the compiled dropout step runs directly (3 a step).
    before = eagertpu.metrics()["direct_graph_calls"]
    for _ in range(3):
        jobs["dropout", "compiled"]()
    out["checks"]["dropout_compiled_graphs_all_direct"] = eagertpu.metrics()["direct_graph_calls"] - before == 9
    rows = [
        ("chain", [out["chain_ops_per_s"][c] for c in CONFIGS], "ops/s"),
        ("mlp step", [out["mlp_ms_per_step"][c] for c in CONFIGS], "ms"),
        ("tiny call (x + 1, no read)", [out["tiny_call_us"][c] for c in CONFIGS], "us"),
        ("dropout mlp step", [out["dropout_ms_per_step"][c] for c in CONFIGS], "ms"),
    ]
    out["tiny_call_floor_us"] = tiny_call_floor(jobs["tiny_call", "compiled"], rounds, burst["tiny_call"])
    out["ratios"]["tiny_call_compiled_over_cpu_aot_eager_time"] = out["tiny_call_floor_us"]["compiled_over_floor"]
    out["tiny_call_inside_c_abi_us"] = child_json(
        __file__, ["tiny_call_abi", 200 if quick else 20000], EAGERTPU_OP_TIMING="1", EAGERTPU_LOG="error"
    )
    table("compiled: torch.compile(backend='tpu') vs fused eager vs PyTorch CPU eager", CONFIGS, rows,
          note=f"tiny call inside the runtime's C ABI (a process timing its stages): "
          f"{out['tiny_call_inside_c_abi_us']['abi_us']} of {out['tiny_call_inside_c_abi_us']['call_us']} us; "
          "raw PJRT execute + await: debug.json; torch.compile's own floor (backend='aot_eager' on a CPU "
          f"tensor): {out['tiny_call_floor_us']['cpu_aot_eager']} us against "
          f"{out['tiny_call_floor_us']['compiled']} us here")
    print_ratios(out["ratios"], out["checks"])
    return out


def tiny_call_floor(compiled, rounds, burst):
    """The compiled tiny call on tpu next to torch.compile's own floor: the
    same function compiled with backend="aot_eager" on a CPU tensor (dynamo's
    guards, aot_autograd's wrapper, and the graph's one op as a CPU kernel),
    bursts alternating; medians, and the median of the rounds' ratios."""
    floor = TinyCall("compiled", backend="aot_eager", device="cpu")
    for _ in range(100):
        floor()
    runs = {"compiled": [], "cpu_aot_eager": []}
    for r in range(rounds):
        pair = [("compiled", compiled), ("cpu_aot_eager", floor)]
        for name, job in pair[r % 2 :] + pair[: r % 2]:
            runs[name].append(timed(job, burst))
    out = {name: round(statistics.median(t) * 1e6, 2) for name, t in runs.items()}
    out["compiled_over_floor"] = median_ratio(runs["compiled"], runs["cpu_aot_eager"])
    return out


def tiny_call_abi_child(n):
    """With EAGERTPU_OP_TIMING=1: the compiled tiny call, n times; us per call
    in all, and inside the runtime's C ABI (op_timing's `abi` stage)."""
    job = TinyCall("compiled")
    for _ in range(100):
        job()
    eagertpu.sync()
    t0 = eagertpu.metrics()["op_timing"]["abi"]["nanos"]
    start = time.perf_counter()
    for _ in range(n):
        job()
    call = (time.perf_counter() - start) / n * 1e6
    abi = (eagertpu.metrics()["op_timing"]["abi"]["nanos"] - t0) / n / 1e3
    eagertpu.sync()
    return {"call_us": round(call, 2), "abi_us": round(abi, 2)}


class LlmStep(TrainStep):
    """One training step of the causal LM on a fixed batch."""

    def __init__(self, config, base, batch):
        super().__init__(config)
        self.model = copy.deepcopy(base).train().to(device_of(config))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.batch = batch.to(device_of(config))

    def loss(self):
        return self.model(input_ids=self.batch, labels=self.batch).loss


class LlmGenerate:
    """Greedy generate() with a static cache; each call's tokens kept."""

    def __init__(self, config, base, prompt, new_tokens):
        from transformers import CompileConfig

        self.model = copy.deepcopy(base).eval().to(device_of(config))
        self.prompt = prompt.to(device_of(config))
        self.new_tokens = new_tokens
        compile_args = (
            {"compile_config": CompileConfig(backend="tpu", fullgraph=False)}
            if config == "compiled"
            else {"disable_compile": True}
        )
        self.kwargs = dict(
            attention_mask=torch.ones_like(self.prompt),
            max_new_tokens=new_tokens,
            do_sample=False,
            cache_implementation="static",
            **compile_args,
        )
        self.tokens = []

    def __call__(self):
        with torch.no_grad():
            out = self.model.generate(self.prompt, **self.kwargs)
        self.tokens.append(out[:, self.prompt.shape[1] :].cpu())


def run_llm(quick=False):
    rounds = 2 if quick else 5
    new_tokens = 8 if quick else 16
    base, prompt = make_llama(hidden=128, layers=2, vocab=256, prompt_len=8)
    batch = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(3))
    makers = {
        "train": lambda config: LlmStep(config, base, batch),
        "generate": lambda config: LlmGenerate(config, base, prompt, new_tokens),
    }
    jobs, results = side_by_side(makers, {"train": 2 if quick else 3, "generate": 1}, rounds)
    per_token = {c: [s / new_tokens for s in results["generate"][c]] for c in CONFIGS}
    out = {
        "train_ms_per_step": {c: round(statistics.median(results["train"][c]) * 1e3, 3) for c in CONFIGS},
        "generate_ms_per_token": {c: round(statistics.median(per_token[c]) * 1e3, 3) for c in CONFIGS},
        "setup": f"LlamaForCausalLM hidden 128, 2 layers, 4 heads (2 kv), vocab 256, random weights; train: "
        f"batch 4 x 32 tokens, labels = inputs, AdamW; generate: batch 1, prompt 8, {new_tokens} new tokens, "
        "greedy, static cache",
        "method": f"{rounds} rounds of bursts (train 3 steps, generate 1 call), order rotating; medians; ratios "
        "are medians of per-round ratios",
    }
    out["ratios"] = {
        "train_compiled_over_fused_time": median_ratio(results["train"]["compiled"], results["train"]["fused"]),
        "train_compiled_over_cpu_time": median_ratio(results["train"]["compiled"], results["train"]["cpu"]),
        "generate_compiled_over_fused_time": median_ratio(per_token["compiled"], per_token["fused"]),
        "generate_compiled_over_cpu_time": median_ratio(per_token["compiled"], per_token["cpu"]),
    }
    ref_tokens, ref_loss = jobs["generate", "cpu"].tokens[0], jobs["train", "cpu"].losses[0]
    out["checks"] = {}
    for config in ("fused", "compiled"):
        first = jobs["train", config].losses[0]
        out["checks"][f"llm_train_{config}_first_loss_matches_cpu"] = abs(first - ref_loss) <= 1e-4 * abs(ref_loss)
        out["checks"][f"llm_generate_{config}_tokens_match_cpu"] = all(
            torch.equal(t, ref_tokens) for t in jobs["generate", config].tokens
        )
    rows = [
        ("train step", [out["train_ms_per_step"][c] for c in CONFIGS], "ms"),
        ("generate", [out["generate_ms_per_token"][c] for c in CONFIGS], "ms/token"),
    ]
    table(f"llm: {out['setup']}", CONFIGS, rows)
    print_ratios(out["ratios"], out["checks"])
    return out


# --------------------------------------------------------------- cpu_heap ----


def cpu_heap_child(config, steps):
    """In a fresh process: the mlp step in `config`, settled, then timed over
    `steps` steps; ms per step and the first step's loss."""
    enter("fused" if config == "compiled" else config)
    job = Step(config)
    settle(job, config)
    ms = timed(job, steps) * 1e3
    return {"ms_per_step": ms, "first_loss": job.losses[0]}


def run_cpu_heap(quick=False):
    rounds = 1 if quick else 2
    steps = 20 if quick else 150
    heaps = ("system", "cache")
    runs = {(h, c): [] for h in heaps for c in CONFIGS}
    losses = {}
    for r in range(rounds):
        for config in CONFIGS:
            for heap in heaps if r % 2 == 0 else heaps[::-1]:
                got = child_json(
                    __file__, ["cpu_heap", config, steps], EAGERTPU_CPU_HEAP=heap, EAGERTPU_LOG="error"
                )
                runs[heap, config].append(got["ms_per_step"] / 1e3)
                losses[heap, config] = got["first_loss"]
    out = {
        "setup": "784-512-512-10 MLP, batch 64, AdamW (the compiled workload's mlp step), one model per fresh "
        f"process; {rounds} rounds, each config's two heaps run back to back, order alternating",
        "ms_per_step": {h: {c: round(statistics.median(runs[h, c]) * 1e3, 3) for c in CONFIGS} for h in heaps},
    }
    out["ratios"] = {
        f"{c}_cache_over_system_time": median_ratio(runs["cache", c], runs["system", c]) for c in CONFIGS
    }
    ref = losses["system", "cpu"]
    out["checks"] = {
        f"{c}_{h}_first_loss_matches_cpu": abs(losses[h, c] - ref) <= 1e-4 * abs(ref) for h in heaps for c in CONFIGS
    }
    rows = [(f"heap {h}", [out["ms_per_step"][h][c] for c in CONFIGS], "ms/step") for h in heaps]
    table(f"cpu_heap: {out['setup']}", CONFIGS, rows)
    print_ratios(out["ratios"], out["checks"])
    return out


RUNS = {"compiled": run_compiled, "cpu_heap": run_cpu_heap, "llm": run_llm}

if __name__ == "__main__" and sys.argv[1:2] == ["tiny_call_abi"]:
    print(json.dumps(tiny_call_abi_child(int(sys.argv[2]))))
if __name__ == "__main__" and sys.argv[1:2] == ["cpu_heap"]:
    print(json.dumps(cpu_heap_child(sys.argv[2], int(sys.argv[3]))))
