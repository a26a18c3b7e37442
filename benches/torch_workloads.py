"""The torch bench's model-sized workloads (imported by torch_bench.py).

  generate       tiny random Llama, greedy generate with a static KV cache
  gpt_train      small GPT trained with AdamW, loss read every step or every 50
  two_threads    two threads each training an MLP at once, vs each alone (and
                 the same with PyTorch CPU eager, and with two processes)

Loops whose shapes change every iteration (compile_heavy) are in
torch_compile_heavy.py, where the runtime's own time goes (per_op, replay) in
torch_stages.py.

Each `run_*` returns a dict for torch.json (numbers, what they mean, ratios,
and `checks`: numerical sanity, reported, never asserted) and prints a table.
Nothing here stops on a missed target: every workload runs to the end.
"""

import copy
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import eagertpu


def device_of(config):
    return torch.device("cpu") if config == "cpu" else torch.device("tpu")


def enter(config):
    # Work still queued by the previous configuration must not run on this
    # one's clock (the machine has two cores).
    eagertpu.sync()
    if config != "cpu":
        eagertpu.set_mode(config)


def counters():
    """Compiles and disk-cache loads so far: a program the process had not
    loaded yet is one or the other (the disk cache outlives the process)."""
    m = eagertpu.metrics()
    return {"compiles": m["compiles"], "disk_hits": m["disk_hits"], "ops": m["ops_recorded"]}


def since(before):
    now = counters()
    return {k: now[k] - before[k] for k in before}


def settle(iteration, config):
    """Warms a loop up until its chunks have settled, as a user's loop does:
    rounds of five iterations, each followed by waiting for the compiles it
    queued in the background, until a round loads no new program (at most
    ten rounds). A fixed warm-up timed loops still running op by op on a
    cold cache."""
    if config == "cpu":
        iteration()
        return
    for _ in range(10):
        before = counters()
        for _ in range(5):
            iteration()
        eagertpu.wait_for_compiles()
        d = since(before)
        if d["compiles"] == 0 and d["disk_hits"] == 0:
            return


def chain_ops(x):
    """The 200 elementwise ops of the chain workload and their sum (unread)."""
    y = x
    for _ in range(50):
        y = y * 1.0001
        y = y + 0.5
        y = y.tanh()
        y = y - x
    return y.sum()


def ratio(a, b):
    return round(a / b, 3) if b else None


def child_json(script, args, **env):
    """Runs bench file `script` in a fresh process with `args` (after its
    path) and the environment plus `env`; its last line of output, as JSON.
    A failed child is an error carrying the tail of its stderr."""
    cmd = [sys.executable, os.path.abspath(script), *map(str, args)]
    proc = subprocess.run(cmd, env=dict(os.environ, **env), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child {' '.join(map(str, args))} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_ratio(nums, dens):
    """The median of the ratios of runs made side by side (num[i] / den[i]):
    this machine drifts between fast and slow spells of a second or two, and
    a ratio of two runs made seconds apart is steadier than one of medians."""
    return round(statistics.median(a / b for a, b in zip(nums, dens)), 3)


def table(title, columns, rows, note=None):
    print(f"\n{title}")
    print(f"  {'':30}" + "".join(f"{c:>14}" for c in columns))
    for name, values, unit in rows:
        cells = "".join(f"{'-' if v is None else (f'{v:.3f}' if isinstance(v, float) else v):>14}" for v in values)
        print(f"  {name:30}{cells}   {unit}")
    if note:
        print(f"  {note}")


def print_ratios(ratios, checks):
    for k, v in ratios.items():
        print(f"  {k:40} {v}")
    for k, v in checks.items():
        print(f"  check {k:34} {v}")


# --------------------------------------------------------------- generate ----


def make_llama(hidden, layers, vocab, prompt_len, batch=1):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        initializer_range=0.1,  # top logits well apart: greedy tokens comparable across devices
        bos_token_id=None,
        eos_token_id=None,  # every run makes exactly max_new_tokens
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).eval()
    prompt = torch.randint(3, vocab, (batch, prompt_len), generator=torch.Generator().manual_seed(1))
    return model, prompt


class ForwardClock:
    """A forward pre-hook noting the time and counters at each forward call:
    call k (1 is the prefill) makes new token k and starts once token k-1 was
    read back (generate reads a stop flag every token). With `settled`, the
    compiles the first `settled` tokens queued on the background pool finish
    before call `settled` + 1 notes its counters, so that they count for
    those tokens (as in test_generate.py)."""

    def __init__(self, model, on_tpu, settled=None):
        self.on_tpu = on_tpu
        self.settled = settled
        self.calls = []
        self.handle = model.register_forward_pre_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs):
        if self.on_tpu and len(self.calls) == self.settled:
            eagertpu.wait_for_compiles()
        self.calls.append((time.perf_counter(), counters() if self.on_tpu else None))


def generate_once(model, prompt, new_tokens, on_tpu, settled=None):
    dev = next(model.parameters()).device
    clock = ForwardClock(model, on_tpu, settled)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            prompt.to(dev),
            attention_mask=torch.ones_like(prompt).to(dev),
            max_new_tokens=new_tokens,
            do_sample=False,
            cache_implementation="static",
            disable_compile=True,
        )
    tokens = out[:, prompt.shape[1]:].cpu()
    eagertpu.sync()
    end = time.perf_counter()
    clock.handle.remove()
    return tokens, start, end, clock.calls


def run_generate(quick=False, settled=4):
    new_tokens = 8 if quick else 32
    warm_rounds = 1 if quick else 2
    model, prompt = make_llama(hidden=128, layers=2, vocab=256, prompt_len=8)
    configs = ["cpu", "strict", "fused"]
    res = {c: {} for c in configs}
    models, ref = {}, None
    for config in configs:  # first run: what a fresh process pays (compiles, or loads from the disk cache)
        enter(config)
        on_tpu = config != "cpu"
        models[config] = copy.deepcopy(model).to(device_of(config))
        before = counters() if on_tpu else None
        tokens, start, end, calls = generate_once(models[config], prompt, new_tokens, on_tpu, settled)
        ref = tokens if ref is None else ref
        r = res[config]
        r["first_run_ms_per_token"] = round((end - start) / new_tokens * 1e3, 3)
        r["tokens_match_cpu"] = bool(torch.equal(tokens, ref))
        if on_tpu:
            after = counters()
            mark = calls[settled][1] if len(calls) > settled else after  # start of call settled+1
            r["first_run_compiles"] = after["compiles"] - before["compiles"]
            r["first_run_disk_hits"] = after["disk_hits"] - before["disk_hits"]
            r["compiles_after_first_4_tokens"] = after["compiles"] - mark["compiles"]
            r["disk_hits_after_first_4_tokens"] = after["disk_hits"] - mark["disk_hits"]
            r["new_programs_after_first_4_tokens"] = r["compiles_after_first_4_tokens"] + r["disk_hits_after_first_4_tokens"]
            r["ops_per_token"] = round((after["ops"] - before["ops"]) / new_tokens, 1)
    times = {c: [] for c in configs}
    decode = {c: [] for c in configs}
    prefill = {c: [] for c in configs}
    for _ in range(warm_rounds):  # every program loaded: the steady state
        for config in configs:
            enter(config)
            tokens, start, end, calls = generate_once(models[config], prompt, new_tokens, False)
            times[config].append((end - start) / new_tokens * 1e3)
            if len(calls) > 1:
                prefill[config].append((calls[1][0] - start) * 1e3)
            if len(calls) > settled:
                decode[config].append((end - calls[settled][0]) / (new_tokens - settled) * 1e3)
            res[config]["tokens_match_cpu"] &= bool(torch.equal(tokens, ref))
    eagertpu.set_mode("fused")
    for config in configs:
        res[config]["ms_per_token"] = round(statistics.median(times[config]), 3)
        if decode[config]:
            res[config]["decode_ms_per_token"] = round(statistics.median(decode[config]), 3)
        if prefill[config]:
            res[config]["prefill_ms"] = round(statistics.median(prefill[config]), 3)
    out = dict(res)
    out["setup"] = (
        f"LlamaForCausalLM hidden 128, 2 layers, 4 heads (2 kv), vocab 256, random weights; batch 1, "
        f"prompt 8, greedy generate(max_new_tokens={new_tokens}, cache_implementation='static', "
        f"disable_compile=True)"
    )
    out["what"] = {
        "first_run_ms_per_token": "first generate() on this device in the process, wall time / new tokens "
        "(includes compiling or loading from the disk cache)",
        "ms_per_token": "later generate() calls, every program loaded: wall time / new tokens, prefill included",
        "decode_ms_per_token": f"same runs, tokens {settled + 1}..{new_tokens} only",
        "prefill_ms": "same runs, from the call to generate() to the start of the second forward (token 1 read)",
        "new_programs_after_first_4_tokens": f"programs the first run needed from the start of the forward making "
        f"token {settled + 1} to the end: compiled or loaded from the on-disk cache (0 when decoding reuses its "
        "programs; a warm disk cache turns compiles into disk hits, so count both)",
        "compiles_after_first_4_tokens": "of those, compiled (a compile the first tokens queued on the background "
        "pool counts for them: the run waits for it once, at the forward making token 5)",
        "disk_hits_after_first_4_tokens": "of those, loaded from the on-disk cache",
    }
    out["ratios"] = {
        "fused_over_strict_ms_per_token": ratio(res["fused"]["ms_per_token"], res["strict"]["ms_per_token"]),
        "fused_over_cpu_ms_per_token": ratio(res["fused"]["ms_per_token"], res["cpu"]["ms_per_token"]),
        "fused_over_strict_first_run": ratio(
            res["fused"]["first_run_ms_per_token"], res["strict"]["first_run_ms_per_token"]
        ),
    }
    out["checks"] = {f"{c}_tokens_match_cpu": res[c]["tokens_match_cpu"] for c in ("strict", "fused")}
    keys = [
        ("first_run_ms_per_token", "ms/token"),
        ("ms_per_token", "ms/token"),
        ("prefill_ms", "ms"),
        ("decode_ms_per_token", "ms/token"),
        ("new_programs_after_first_4_tokens", "programs (compiled + from disk)"),
        ("compiles_after_first_4_tokens", "programs"),
        ("disk_hits_after_first_4_tokens", "programs"),
        ("ops_per_token", "ops"),
    ]
    rows = [(k.replace("_after_first_4_tokens", " after 4 tok"), [res[c].get(k) for c in configs], u) for k, u in keys]
    table(f"generate: {out['setup']}", configs, rows)
    print_ratios(out["ratios"], out["checks"])
    return out


# -------------------------------------------------------------- gpt_train ----


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=256, width=64, heads=4, layers=2, seq=32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def gpt_run(base, batches, config, every, steps, warmup, budget_s):
    """Trains a copy of `base`; reads the loss every `every` steps and at the
    end. Returns ms/step over the timed steps, counters over them, losses read."""
    dev = device_of(config)
    model = copy.deepcopy(base).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    data = [(x.to(dev), y.to(dev)) for x, y in batches]

    def step(i):
        x, y = data[i % len(data)]
        opt.zero_grad()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        return loss

    for i in range(warmup):  # the warm-up reads as the timed steps do
        loss = step(i)
        if (i + 1) % every == 0 and i + 1 < warmup:
            loss.item()
    losses = {warmup: loss.item()}  # a natural sync point: the timed steps start with nothing queued
    eagertpu.sync()
    if config != "cpu":  # the chunks the warm-up saw compiled in the background (the timed steps use them)
        eagertpu.wait_for_compiles()
    before = counters() if config != "cpu" else None
    start = time.perf_counter()
    done = 0
    for i in range(warmup, warmup + steps):
        loss = step(i)
        done += 1
        if done % every == 0:
            losses[i + 1] = loss.item()
        if time.perf_counter() - start > budget_s:
            break
    losses[warmup + done] = loss.item()
    eagertpu.sync()
    elapsed = time.perf_counter() - start
    r = {"ms_per_step": round(elapsed / done * 1e3, 3), "steps": done, "losses": losses}
    if config != "cpu":
        d = since(before)
        r.update(
            new_programs_after_warmup=d["compiles"] + d["disk_hits"],
            compiles_after_warmup=d["compiles"],
            disk_hits_after_warmup=d["disk_hits"],
            ops_per_step=round(d["ops"] / done),
        )
    return r


def run_gpt_train(quick=False):
    steps, warmup = (10, 2) if quick else (50, 5)
    budget_s = 4 if quick else 8  # per run: a slow configuration is cut short, not waited for
    torch.manual_seed(0)
    base = GPT()
    g = torch.Generator().manual_seed(3)
    batches = []
    for _ in range(4):
        t = torch.randint(0, 256, (8, 33), generator=g)
        batches.append((t[:, :-1], t[:, 1:]))
    configs = ["cpu", "strict", "fused"]
    variants = {"read_every_step": 1, f"read_every_{steps}": steps}
    # Rounds; in each, every configuration runs both variants back to back
    # (their order alternating from round to round). Each figure is the
    # median over rounds, each ratio the median of the rounds' own ratios;
    # counters and losses are the first round's (later rounds find every
    # program in memory).
    rounds = 2 if quick else 3
    res = {}
    for r in range(rounds):
        for config in configs:
            pairs = list(variants.items())
            for name, every in pairs if r % 2 == 0 else pairs[::-1]:
                enter(config)
                run = gpt_run(base, batches, config, every, steps, warmup, budget_s)
                first = res.setdefault((config, name), dict(run, ms_per_step_runs=[]))
                first["ms_per_step_runs"].append(run["ms_per_step"])
    for run in res.values():
        run["ms_per_step"] = round(statistics.median(run["ms_per_step_runs"]), 3)
    eagertpu.set_mode("fused")
    vnames = list(variants)
    out = {name: {c: res[c, name]["ms_per_step"] for c in configs} for name in vnames}
    out["detail"] = {f"{c}/{name}": res[c, name] for c in configs for name in vnames}
    out["setup"] = (
        f"GPT vocab 256, width 64, 4 heads, 2 blocks (LayerNorm, causal SDPA, GELU MLP), tied head, "
        f"batch 8 x 32 tokens, AdamW; {warmup} warm-up steps then {steps} timed"
    )
    out["what"] = {
        "read_every_step / read_every_N": "ms per training step (timed steps only, final read and sync included), "
        f"the median of {rounds} rounds (ms_per_step_runs); ratios are medians of each round's own ratio",
        "new_programs_after_warmup": f"programs the timed steps (after the first {warmup}) needed: compiled or "
        "loaded from the on-disk cache",
        "compiles_after_warmup": "of those, compiled",
        "disk_hits_after_warmup": "of those, loaded from the on-disk cache",
        "ops_per_step": "ops recorded by the runtime per step",
        "steps": "timed steps run (fewer than asked when a run hit its time budget)",
    }
    every, rare = vnames

    def runs(config, name):
        return res[config, name]["ms_per_step_runs"]

    out["ratios"] = {
        f"{rare}_over_every_step_fused": median_ratio(runs("fused", rare), runs("fused", every)),
        f"{rare}_over_every_step_strict": median_ratio(runs("strict", rare), runs("strict", every)),
        f"{rare}_over_every_step_cpu": median_ratio(runs("cpu", rare), runs("cpu", every)),
        "fused_over_cpu_every_step": median_ratio(runs("fused", every), runs("cpu", every)),
        f"fused_over_cpu_{rare}": median_ratio(runs("fused", rare), runs("cpu", rare)),
        "fused_over_strict_every_step": median_ratio(runs("fused", every), runs("strict", every)),
        f"fused_over_strict_{rare}": median_ratio(runs("fused", rare), runs("strict", rare)),
    }
    checks = {}
    for c in configs:
        for name in vnames:
            losses = res[c, name]["losses"]
            ok = all(math.isfinite(v) for v in losses.values())
            if c != "cpu":
                ref = res["cpu", name]["losses"]
                common = [k for k in losses if k in ref]
                worst = max(abs(losses[k] - ref[k]) / max(abs(ref[k]), 1e-6) for k in common)
                res[c, name]["max_rel_loss_diff_vs_cpu"] = round(worst, 6)
                ok = ok and worst < 2e-2
            checks[f"{c}_{name}_losses_ok"] = ok
    out["checks"] = checks
    rows = [(f"{name} ms/step", [res[c, name]["ms_per_step"] for c in configs], "ms") for name in vnames]
    for key in ("new_programs_after_warmup", "compiles_after_warmup", "disk_hits_after_warmup", "steps", "max_rel_loss_diff_vs_cpu"):
        for name in vnames:
            short = key.replace("_after_warmup", "").replace("max_rel_loss_diff_vs_cpu", "loss rel diff")
            rows.append((f"{short} ({name[5:]})", [res[c, name].get(key) for c in configs], ""))
    rows.append(("ops/step", [res[c, every].get("ops_per_step") for c in configs], "ops"))
    table(f"gpt_train: {out['setup']}", configs, rows)
    print_ratios(out["ratios"], out["checks"])
    return out


# ------------------------------------------------------------ two_threads ----


def mlp_job(seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    g = torch.Generator().manual_seed(100 + seed)
    x = torch.randn(32, 64, generator=g)
    y = (x @ torch.randn(64, 10, generator=g)).argmax(1)
    return model, x, y


def mlp_train(job, steps, budget_s, result, barrier=None, device="tpu"):
    """Trains a copy of the job's model on `device` from its initial weights,
    up to `steps` steps or `budget_s` seconds; loss read every step."""
    base, x, y = job
    model = copy.deepcopy(base).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = x.to(device), y.to(device)
    losses = []
    if barrier is not None:
        barrier.wait()
    start = time.perf_counter()
    while len(losses) < steps and time.perf_counter() - start < budget_s:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    result["ms_per_step"] = (time.perf_counter() - start) / len(losses) * 1e3
    result["losses"] = losses


def tiny_cpu_ops(iterations, result, barrier=None):
    """Three PyTorch CPU ops on 4-element tensors per iteration, no EagerTPU:
    each call releases and retakes Python's interpreter lock, as every op
    call does, and runs about a microsecond without it."""
    a, b = torch.ones(4), torch.ones(4)
    if barrier is not None:
        barrier.wait()
    start = time.perf_counter()
    for _ in range(iterations):
        torch.add(a, b)
        a.mul(b)
        a.relu()
    result["us_per_iteration"] = (time.perf_counter() - start) / iterations * 1e6


def tiny_cpu_ops_threaded(n_threads, iterations):
    results = [{} for _ in range(n_threads)]
    barrier = threading.Barrier(n_threads)
    threads = [threading.Thread(target=tiny_cpu_ops, args=(iterations, r, barrier)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r["us_per_iteration"] for r in results]


def threaded(jobs, steps, budget_s, device="tpu"):
    results = [{} for _ in jobs]
    barrier = threading.Barrier(len(jobs))
    threads = [
        threading.Thread(target=mlp_train, args=(j, steps, budget_s, r, barrier, device))
        for j, r in zip(jobs, results)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    eagertpu.sync()
    return results


def two_processes_child(seed, steps, ready_dir, peers):
    """In a child process: job `seed` warmed up alone on tpu, then, once
    `peers` children are ready (a file each in `ready_dir`), trained for
    `steps` steps; its ms/step."""
    job = mlp_job(seed)
    for _ in range(3):
        mlp_train(job, 150, 6, {})
    open(os.path.join(ready_dir, str(seed)), "w").close()
    waited = time.perf_counter()
    while len(os.listdir(ready_dir)) < peers:
        if time.perf_counter() - waited > 300:
            raise RuntimeError(f"two_processes: {peers - len(os.listdir(ready_dir))} peer(s) never got ready")
        time.sleep(0.001)
    result = {}
    mlp_train(job, steps, 30, result)
    return {"ms_per_step": result["ms_per_step"]}


def two_processes(seeds, steps):
    """Children training jobs `seeds` on tpu at once (in step from a common
    start); each one's ms/step."""
    with tempfile.TemporaryDirectory() as ready_dir:
        env = dict(os.environ, EAGERTPU_MODE="fused", EAGERTPU_LOG="error")
        procs = [
            subprocess.Popen([sys.executable, os.path.abspath(__file__), "two_processes", str(seed), str(steps),
                              ready_dir, str(len(seeds))], env=env, stdout=subprocess.PIPE, text=True)
            for seed in seeds
        ]
        outs = [p.communicate()[0] for p in procs]
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError("a two_processes child failed")
    return [json.loads(o.strip().splitlines()[-1])["ms_per_step"] for o in outs]


def run_two_threads(quick=False):
    steps, budget_s = (20, 3) if quick else (150, 6)
    enter("fused")
    jobs = [mlp_job(0), mlp_job(1)]
    # Warm-up: alone runs until one loads no new program (fused mode's period
    # detection remembers what it saw, so the second run may cut differently).
    for _ in range(4):
        before = counters()
        for job in jobs:
            threaded([job], steps, budget_s)
        if since(before)["compiles"] + since(before)["disk_hits"] == 0:
            break
    # Rounds of three runs (each thread alone, both at once; the order
    # rotating): each figure is the median over rounds, each ratio the median
    # of the rounds' own ratios. Losses and counters are the first round's.
    # The same three runs on PyTorch CPU eager, in the same rounds: how much
    # two Python threads overlap on this machine with no runtime at all (the
    # GIL, and two cores for both threads and their kernels).
    rounds = 2 if quick else 5
    alone_runs, together_runs = [[], []], [[], []]
    cpu_alone_runs, cpu_together_runs = [[], []], [[], []]
    d_alone, d = ({"compiles": 0, "disk_hits": 0} for _ in range(2))
    for r in range(rounds):
        kinds = ["alone0", "alone1", "together", "cpu_alone0", "cpu_alone1", "cpu_together"]
        for kind in kinds[r % 6 :] + kinds[: r % 6]:
            if kind == "cpu_together":
                for runs, got in zip(cpu_together_runs, threaded(jobs, steps, budget_s, "cpu")):
                    runs.append(got)
                continue
            if kind.startswith("cpu_alone"):
                i = int(kind[-1])
                cpu_alone_runs[i].append(threaded([jobs[i]], steps, budget_s, "cpu")[0])
                continue
            before = counters()
            if kind == "together":
                for runs, got in zip(together_runs, threaded(jobs, steps, budget_s)):
                    runs.append(got)
            else:
                i = int(kind[-1])
                alone_runs[i].append(threaded([jobs[i]], steps, budget_s)[0])
            if r == 0:  # programs the first round loaded
                totals, new = (d if kind == "together" else d_alone), since(before)
                for k in totals:
                    totals[k] += new[k]
    def summary(runs):  # the first round's run, with the median ms/step
        return dict(runs[0], ms_per_step=statistics.median(x["ms_per_step"] for x in runs))

    alone = [summary(runs) for runs in alone_runs]
    together = [summary(runs) for runs in together_runs]
    out = {
        "setup": f"two MLPs 64-128-10, batch 32, SGD, loss.item() every step, {steps} steps (or {budget_s} s), "
        f"fused mode, each thread from the same initial weights alone and together; {rounds} rounds, medians",
        "alone_ms_per_step": [round(r["ms_per_step"], 3) for r in alone],
        "threaded_ms_per_step": [round(r["ms_per_step"], 3) for r in together],
        "steps": {"alone": [len(r["losses"]) for r in alone], "threaded": [len(r["losses"]) for r in together]},
        "alone_new_programs": d_alone["compiles"] + d_alone["disk_hits"],
        "threaded_new_programs": d["compiles"] + d["disk_hits"],
        "threaded_compiles": d["compiles"],
        "what": {
            "alone_ms_per_step": "each thread's ms/step when it trains alone [thread 0, thread 1]",
            "threaded_ms_per_step": "each thread's ms/step while both train at once",
            "steps": "steps each thread ran (fewer than asked when it hit the time budget)",
            "alone_new_programs": "programs compiled or loaded from disk by the alone runs (after a warm-up)",
            "threaded_new_programs": "same during the threaded run (the alone runs loaded every program one "
            "thread's loop needs: more here means the two threads' ops met in the same fused chunks)",
            "threaded_compiles": "of those, compiled",
        },
    }
    per_thread = [
        median_ratio([x["ms_per_step"] for x in t], [x["ms_per_step"] for x in a])
        for t, a in zip(together_runs, alone_runs)
    ]
    cpu_per_thread = [
        median_ratio([x["ms_per_step"] for x in t], [x["ms_per_step"] for x in a])
        for t, a in zip(cpu_together_runs, cpu_alone_runs)
    ]
    out["cpu_alone_ms_per_step"] = [round(statistics.median(x["ms_per_step"] for x in a), 3) for a in cpu_alone_runs]
    out["cpu_threaded_ms_per_step"] = [
        round(statistics.median(x["ms_per_step"] for x in t), 3) for t in cpu_together_runs
    ]
    # The floor Python's interpreter lock sets, for reference: two threads of
    # microsecond PyTorch CPU calls (no EagerTPU) hand the lock over at every
    # call, each hand-over a futex wake-up of the other thread.
    gil_iterations = 2000 if quick else 20000
    gil_alone, gil_together = [], []
    for _ in range(rounds):
        gil_alone.append(tiny_cpu_ops_threaded(1, gil_iterations)[0])
        gil_together.append(statistics.mean(tiny_cpu_ops_threaded(2, gil_iterations)))
    out["tiny_cpu_ops_alone_us"] = round(statistics.median(gil_alone), 3)
    out["tiny_cpu_ops_threaded_us"] = round(statistics.median(gil_together), 3)
    out["what"]["tiny_cpu_ops_alone_us"] = "us per iteration of three tiny PyTorch CPU ops, one thread"
    out["what"]["tiny_cpu_ops_threaded_us"] = "the same, two threads at once (each)"
    # Two processes instead of two threads, for reference: no interpreter
    # lock and no runtime state shared (each child warms up alone, then both
    # train at once).
    process_rounds = 1 if quick else 3
    process_steps = 200 if quick else 2000
    alone_proc = [two_processes([0], process_steps)[0] for _ in range(process_rounds)]
    together_proc = [max(two_processes([0, 1], process_steps)) for _ in range(process_rounds)]
    out["processes_alone_ms_per_step"] = round(statistics.median(alone_proc), 3)
    out["processes_together_ms_per_step"] = round(statistics.median(together_proc), 3)
    out["what"]["processes_alone_ms_per_step"] = "thread 0's job in a process of its own, alone"
    out["what"]["processes_together_ms_per_step"] = (
        "two processes training at once (the slower one's ms/step)"
    )
    out["what"]["cpu_alone_ms_per_step"] = "the same on PyTorch CPU eager, each thread alone"
    out["what"]["cpu_threaded_ms_per_step"] = "the same on PyTorch CPU eager, both at once"
    out["ratios"] = {
        "threaded_over_alone_thread0": per_thread[0],
        "threaded_over_alone_thread1": per_thread[1],
        "threaded_over_alone_mean": round(statistics.mean(per_thread), 3),
        "cpu_threaded_over_alone_mean": round(statistics.mean(cpu_per_thread), 3),
        "processes_together_over_alone": median_ratio(together_proc, alone_proc),
        "tiny_cpu_ops_threaded_over_alone": median_ratio(gil_together, gil_alone),
    }
    out["checks"] = {}
    for i, (t, a) in enumerate(zip(together, alone)):
        worst = max(abs(p - q) / max(abs(q), 1e-6) for p, q in zip(t["losses"], a["losses"]))
        out["checks"][f"thread{i}_losses_match_alone"] = all(map(math.isfinite, t["losses"])) and worst < 1e-4
    table(
        f"two_threads: {out['setup']}",
        ["thread 0", "thread 1"],
        [
            ("alone", out["alone_ms_per_step"], "ms/step"),
            ("both at once", out["threaded_ms_per_step"], "ms/step"),
            ("threaded / alone", per_thread, "(1: full overlap, 2: none)"),
            ("cpu alone", out["cpu_alone_ms_per_step"], "ms/step, PyTorch CPU eager"),
            ("cpu both at once", out["cpu_threaded_ms_per_step"], "ms/step, PyTorch CPU eager"),
            ("cpu threaded / alone", cpu_per_thread, ""),
            ("tiny CPU ops alone", [out["tiny_cpu_ops_alone_us"], None], "us/iteration, no EagerTPU"),
            ("tiny CPU ops, 2 threads", [out["tiny_cpu_ops_threaded_us"], None], "us/iteration, each"),
            ("tpu, 2 processes: alone", [out["processes_alone_ms_per_step"], None], "ms/step"),
            ("tpu, 2 processes: at once", [out["processes_together_ms_per_step"], None], "ms/step, the slower"),
            ("steps alone", out["steps"]["alone"], ""),
            ("steps both at once", out["steps"]["threaded"], ""),
        ],
        note=f"new programs: alone {out['alone_new_programs']}, both at once {out['threaded_new_programs']} "
        f"({d['compiles']} compiled)",
    )
    print_ratios(out["ratios"], out["checks"])
    return out


RUNS = {
    "generate": run_generate,
    "gpt_train": run_gpt_train,
    "two_threads": run_two_threads,
}

if __name__ == "__main__" and sys.argv[1:2] == ["two_processes"]:
    print(json.dumps(two_processes_child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))))
