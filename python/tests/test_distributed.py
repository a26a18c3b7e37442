"""torch.distributed's `eagertpu` backend: ranks are threads of one process,
each on its own CPU device (EAGERTPU_DEVICE_COUNT), or processes under
torchrun (collectives staged through gloo). Each case runs in fresh processes
(the device count is fixed when the runtime starts) and checks every rank's
result there against the same computation on CPU tensors."""

import json
import os
import subprocess
import sys

import pytest
from helpers import run_python

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Imported by each case: `run_ranks(body)` runs `body(rank)` on 4 threads, or
# on this process's rank under torchrun; failures are collected as strings and
# printed as JSON on the last line (of each process).
PRELUDE = """
import json, os, sys
from datetime import timedelta
import torch, torch.distributed as dist
import eagertpu
from eagertpu.distributed import spawn_threads
TORCHRUN = "RANK" in os.environ
W = int(os.environ.get("WORLD_SIZE", 4))
failures = []

def dev(rank):
    return torch.device("tpu", rank % torch.tpu.device_count())

def run_ranks(body, **kwargs):
    if not TORCHRUN:
        return spawn_threads(body, W, **kwargs)
    dist.init_process_group("cpu:gloo,tpu:eagertpu", **kwargs)
    try:
        body(dist.get_rank())
    finally:
        dist.destroy_process_group()

def expect(what, got, want, rank):
    # Exact for integers; floats within rounding (a bfloat16 product rounds at
    # each step on gloo, once on the CPU reference: one ulp is 2**-7).
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        tol = 1e-2 if got.dtype == torch.bfloat16 else 1e-6
        if not (got.dtype == want.dtype and got.shape == want.shape and got.is_floating_point()
                and torch.allclose(got.double(), want.double(), rtol=tol, atol=1e-6)):
            failures.append(f"{what} on rank {rank}: got {got}, want {want}")
"""


def run_case(body, mode="fused", **env):
    r = run_python(PRELUDE + body + "\nprint(json.dumps(failures))", EAGERTPU_DEVICE_COUNT="4", EAGERTPU_MODE=mode, **env)
    assert r.returncode == 0, r.stderr[-4000:]
    failures = json.loads(r.stdout.strip().splitlines()[-1])
    assert not failures, "\n".join(failures)
    return r


def run_torchrun_case(body, processes, tmp_path):
    """`body` under `torchrun --nproc-per-node processes`: each process writes
    its failures to a file of its own (their stdout interleaves)."""
    script = tmp_path / "case.py"
    script.write_text(
        PRELUDE + body + "\nopen(os.path.join(os.environ['FAILURES_DIR'], os.environ['RANK']), 'w')"
        ".write(json.dumps(failures))"
    )
    r = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(processes), str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "EAGERTPU_DEVICE_COUNT": "1", "FAILURES_DIR": str(tmp_path)},
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    failures = [f for rank in range(processes) for f in json.loads((tmp_path / str(rank)).read_text())]
    assert not failures, "\n".join(failures)


COLLECTIVES = """
DTYPES = [torch.float32, torch.bfloat16, torch.int32, torch.int64]

def data(rank, dtype, n=6):
    # Distinct per rank; int64 values above 2**53 must survive exactly.
    base = torch.arange(n, dtype=torch.int64) * (rank + 1) - 3 * rank
    if dtype == torch.int64:
        base = base + 2**53 + 1 if rank % 2 else base
    return base.to(dtype)

def body(rank):
    d = dev(rank)
    for dtype in DTYPES:
        inputs = [data(r, dtype) for r in range(W)]
        stacked = torch.stack(inputs)
        reductions = {"sum": (dist.ReduceOp.SUM, stacked.sum(0)), "max": (dist.ReduceOp.MAX, stacked.amax(0)),
                      "min": (dist.ReduceOp.MIN, stacked.amin(0))}
        if dtype != torch.int64:
            reductions["product"] = (dist.ReduceOp.PRODUCT, stacked.prod(0).to(dtype))
        if dtype.is_floating_point:
            reductions["avg"] = (dist.ReduceOp.AVG, (stacked.double().mean(0)).to(dtype))
        for name, (op, want) in reductions.items():
            x = inputs[rank].to(d)
            dist.all_reduce(x, op=op)
            expect(f"all_reduce {name} {dtype}", x, want.to(dtype), rank)
        x = inputs[rank].to(d)
        dist.broadcast(x, src=2)
        expect(f"broadcast {dtype}", x, inputs[2], rank)
        outs = [torch.empty(6, dtype=dtype, device=d) for _ in range(W)]
        dist.all_gather(outs, inputs[rank].to(d))
        for r in range(W):
            expect(f"all_gather[{r}] {dtype}", outs[r], inputs[r], rank)
        flat = torch.empty(W * 6, dtype=dtype, device=d)
        dist.all_gather_into_tensor(flat, inputs[rank].to(d))
        expect(f"all_gather_into_tensor {dtype}", flat, torch.cat(inputs), rank)
        grid = torch.empty(W, 6, dtype=dtype, device=d)
        dist.all_gather_into_tensor(grid, inputs[rank].to(d))
        expect(f"all_gather_into_tensor stacked {dtype}", grid, stacked, rank)
        # reduce_scatter: rank r's input holds W blocks of 3; block k goes to rank k.
        blocks = [torch.cat([data(r, dtype, 3) + k for k in range(W)]) for r in range(W)]
        block = torch.empty(3, dtype=dtype, device=d)
        dist.reduce_scatter_tensor(block, blocks[rank].to(d))
        expect(f"reduce_scatter_tensor {dtype}", block, torch.stack(blocks).sum(0).to(dtype)[3 * rank:3 * rank + 3], rank)
        if dtype.is_floating_point:
            block = torch.empty(3, dtype=dtype, device=d)
            dist.reduce_scatter_tensor(block, blocks[rank].to(d), op=dist.ReduceOp.AVG)
            want = (torch.stack(blocks).double().mean(0)).to(dtype)[3 * rank:3 * rank + 3]
            expect(f"reduce_scatter_tensor avg {dtype}", block, want, rank)
        block = torch.empty(3, dtype=dtype, device=d)
        dist.reduce_scatter(block, [b.to(d) for b in blocks[rank].chunk(W)])
        expect(f"reduce_scatter {dtype}", block, torch.stack(blocks).sum(0).to(dtype)[3 * rank:3 * rank + 3], rank)
        exchanged = torch.empty(W * 3, dtype=dtype, device=d)
        dist.all_to_all_single(exchanged, blocks[rank].to(d))
        expect(f"all_to_all_single {dtype}", exchanged, torch.cat([blocks[r][3 * rank:3 * rank + 3] for r in range(W)]), rank)
        outs = [torch.empty(3, dtype=dtype, device=d) for _ in range(W)]
        dist.all_to_all(outs, [b.to(d) for b in blocks[rank].chunk(W)])
        for r in range(W):
            expect(f"all_to_all[{r}] {dtype}", outs[r], blocks[r][3 * rank:3 * rank + 3], rank)
    # A 2-d tensor through a strided view: written back in place.
    x = torch.arange(12.0).reshape(3, 4).t().to(d) * (rank + 1)
    dist.all_reduce(x)
    expect("all_reduce of a transposed view", x, torch.arange(12.0).reshape(3, 4).t() * 10, rank)
    # Subgroups: their ranks' devices, rank numbers local to the group.
    odd = dist.new_group([1, 3])
    even = dist.new_group([0, 2])
    mine = odd if rank % 2 else even
    x = torch.tensor([float(rank)], device=d)
    dist.all_reduce(x, group=mine)
    expect("all_reduce in a subgroup", x, torch.tensor([4.0 if rank % 2 else 2.0]), rank)
    x = torch.tensor([float(rank)], device=d)
    dist.broadcast(x, src=3 if rank % 2 else 2, group=mine)
    expect("broadcast in a subgroup (global src)", x, torch.tensor([3.0 if rank % 2 else 2.0]), rank)
    dist.barrier()
    # CPU tensors go to gloo.
    c = torch.ones(2) * rank
    dist.all_reduce(c)
    expect("all_reduce of a CPU tensor (gloo)", c, torch.ones(2) * 6, rank)

run_ranks(body)
m = eagertpu.metrics()
if m["fallbacks"]:
    failures.append(f"ops ran on the CPU: {m['fallbacks']}")
"""


def test_collectives_match_the_cpu_for_each_dtype_reduction_and_subgroup():
    run_case(COLLECTIVES)


def test_collectives_of_ranks_in_processes_match_the_cpu_through_gloo(tmp_path):
    # Each rank a process of its own (torchrun): the CPU plugin has no
    # collectives across processes, so they run on gloo over host copies.
    run_torchrun_case(COLLECTIVES + """
if eagertpu.metrics()["transfers_to_host"] == 0:
    failures.append("staged collectives made no host transfers")
""", 4, tmp_path)


MISMATCH = """
def body(rank):
    d = dev(rank)
    x = torch.ones(2 if rank != 1 else 3, device=d)
    try:
        dist.all_reduce(x)  # the mismatched call
        failures.append(f"rank {rank}: a mismatched all_reduce did not fail")
    except RuntimeError as e:
        msg = str(e)
        for want in ["different collectives", "rank 0: all_reduce(Sum) float32[2]",
                     "rank 1: all_reduce(Sum) float32[3]", "<string>:"]:
            if want not in msg:
                failures.append(f"rank {rank}: {want!r} not in {msg!r}")
    # The group goes on.
    y = torch.full((2,), float(rank), device=d)
    dist.all_reduce(y)
    expect("all_reduce after a mismatch", y, torch.full((2,), 6.0), rank)

spawn_threads(body, W)
"""


def test_a_mismatched_collective_fails_every_rank_naming_each_call_and_line():
    run_case(MISMATCH)


MISSING = """
import time
def body(rank):
    d = dev(rank)
    if rank == 3:
        time.sleep(5)  # in the group, busy: never comes to the collective
        return
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(2, device=d))
        failures.append(f"rank {rank}: an all_reduce without rank 3 did not fail")
    except RuntimeError as e:
        msg = str(e)
        for want in ["timed out", "rank 3 (last finished: no collective)", "waiting for 1 of 4 ranks"]:
            if want not in msg:
                failures.append(f"rank {rank}: {want!r} not in {msg!r}")
    if time.monotonic() - start > 60:
        failures.append(f"rank {rank}: the timeout took {time.monotonic() - start:.0f} s")
    # The process goes on.
    x = torch.arange(4.0, device=d)
    expect("an op after a timeout", x * 2, torch.arange(4.0) * 2, rank)

spawn_threads(body, W, timeout=timedelta(seconds=1))
"""


def test_a_missing_rank_fails_the_others_within_the_timeout_and_the_process_goes_on():
    run_case(MISSING)


# A rank that fails leaves the group (its process group is destroyed): the
# others, waiting at a collective under the default 300 s timeout, fail at
# once naming it, and spawn_threads raises the failed rank's own error.
LEAVING = """
import time
def body(rank):
    d = dev(rank)
    x = torch.full((2,), float(rank), device=d)
    dist.all_reduce(x)
    if rank == 3:
        time.sleep(0.5)  # the others wait at their second all_reduce
        raise ValueError("rank 3's own bug")
    try:
        dist.all_reduce(x)
        failures.append(f"rank {rank}: an all_reduce without rank 3 did not fail")
    except RuntimeError as e:
        msg = str(e)
        for want in ["all_reduce: rank 3 (last finished: all_reduce(Sum) float32[2] (collective #1)",
                     "left the group", f"rank {rank}: all_reduce(Sum) float32[2] (collective #2) at <string>:"]:
            if want not in msg:
                failures.append(f"rank {rank}: {want!r} not in {msg!r}")
    expect("an op after the failed collective", x * 2, torch.full((2,), 12.0), rank)

start = time.monotonic()
try:
    spawn_threads(body, W)
    failures.append("spawn_threads did not raise")
except RuntimeError as e:
    if str(e) != "rank 3 failed: rank 3's own bug" or not isinstance(e.__cause__, ValueError):
        failures.append(f"spawn_threads raised {e!r}, not rank 3's error")
if time.monotonic() - start > 60:
    failures.append(f"the ranks waited {time.monotonic() - start:.0f} s for a rank that had left")
# The process goes on: a new group's collectives run.
def again(rank):
    x = torch.ones(2, device=dev(rank))
    dist.all_reduce(x)
    expect("all_reduce in a new group", x, torch.full((2,), 4.0), rank)
spawn_threads(again, W)
"""


def test_a_rank_that_fails_fails_the_others_at_once_naming_it():
    run_case(LEAVING)


def run_example(*args, **env):
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "ddp_mlp.py"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    assert "ops that ran on the CPU" not in r.stderr, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_ddp_of_an_mlp_matches_one_process_on_the_global_batch(mode, ranks):
    out = run_example("--ranks", str(ranks), EAGERTPU_MODE=mode)
    assert out["ranks"] == ranks and out["mpmd"] and out["steps"] == 5
    assert out["max_param_diff_vs_single"] < 1e-5, out


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_ddp_of_a_transformer_matches_one_process_on_the_global_batch(mode, ranks):
    out = run_example("--ranks", str(ranks), "--model", "transformer", EAGERTPU_MODE=mode)
    assert out["max_param_diff_vs_single"] < 1e-5, out


def test_ddp_keeps_working_under_torch_distributed_debug_detail():
    out = run_example("--ranks", "2", TORCH_DISTRIBUTED_DEBUG="DETAIL")
    assert out["max_param_diff_vs_single"] < 1e-5, out


WAITING = """
import time
def body(rank):
    d = dev(rank)
    x = torch.full((2,), float(rank), device=d)
    if rank == 3:
        # Where the others wait, on demand, before this rank comes.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            waiting = eagertpu.metrics()["collectives_waiting"]
            if waiting and waiting[0].count("all_reduce(Sum) float32[2]") == 3:
                break
            time.sleep(0.05)
        line = waiting[0] if waiting else ""
        for want in ["group on devices [0, 1, 2, 3]", "rank 0: all_reduce(Sum) float32[2] (collective #2) at <string>:",
                     "rank 2: all_reduce", "waiting", "missing: rank 3 (last finished: all_reduce(Sum) float32[1]"]:
            if want not in line:
                failures.append(f"{want!r} not in {waiting!r}")
        if "  waiting: group on devices [0, 1, 2, 3]: rank 0: all_reduce" not in eagertpu.metrics_report():
            failures.append("the report does not show where ranks wait")
        print(line, file=sys.stderr)
    dist.all_reduce(x)
    expect("all_reduce after the wait", x, torch.full((2,), 6.0), rank)

before = eagertpu.metrics()["collectives"]

def both(rank):
    dist.all_reduce(torch.ones(1, device=dev(rank)))
    body(rank)

spawn_threads(both, W)
if eagertpu.metrics()["collectives"] - before != 2:
    failures.append(f"collectives counted: {eagertpu.metrics()['collectives'] - before}, want 2")
if eagertpu.metrics()["collectives_waiting"]:
    failures.append(f"still waiting: {eagertpu.metrics()['collectives_waiting']}")
"""


def test_where_ranks_wait_is_in_the_metrics_on_demand():
    run_case(WAITING)


def run_example_under_torchrun(*args):
    """examples/ddp_mlp.py on 2 processes (torchrun); rank 0's JSON line."""
    r = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         os.path.join(ROOT, "examples", "ddp_mlp.py"), *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "EAGERTPU_DEVICE_COUNT"},
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads([line for line in r.stdout.splitlines() if line.startswith("{")][-1])


def test_the_ddp_example_runs_under_torchrun_with_ranks_as_processes():
    out = run_example_under_torchrun()
    assert out["ranks"] == 2 and out["mpmd"], out
    assert out["max_param_diff_vs_single"] < 1e-5, out


@pytest.mark.parametrize("model", ["mlp", "transformer"])
def test_fsdp2_matches_one_process_on_the_global_batch(model):
    out = run_example("--ranks", "2", "--parallel", "fsdp", "--model", model)
    assert out["max_param_diff_vs_single"] < 1e-5, out


def test_fsdp2_of_a_transformer_under_torchrun_matches_one_process():
    out = run_example_under_torchrun("--parallel", "fsdp", "--model", "transformer")
    assert out["max_param_diff_vs_single"] < 1e-5, out


STORE_NODE = """
import os, sys
from datetime import timedelta
import torch, torch.distributed as dist
import eagertpu
from eagertpu.distributed import set_pjrt_store, check_pjrt_store
node, nodes = int(os.environ["NODE"]), int(os.environ["NODES"])
store = dist.TCPStore("127.0.0.1", int(os.environ["PORT"]), nodes, node == 0, timeout=timedelta(seconds=60),
                      wait_for_workers=False)
set_pjrt_store(store, node, nodes)
try:
    check_pjrt_store(timedelta(seconds=float(os.environ["CHECK_SECONDS"])))
    print("check passed")
except RuntimeError as e:
    print("check failed:", e)
# What each node put went through the plugin-facing callbacks into the TCPStore.
print("stored:", sorted(store.get(f"eagertpu/check/node/{n}").decode() for n in range(nodes) if store.check([f"eagertpu/check/node/{n}"])))
# The runtime starts with the store handed to PJRT_Client_Create, and works.
print("op:", (torch.arange(3.0, device="tpu") * 2).tolist())
try:
    set_pjrt_store(store, node, nodes)
except RuntimeError as e:
    print("second store:", e)
"""


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_store_nodes(nodes, check_seconds, only=None):
    """`nodes` processes sharing a TCPStore (node 0 hosts it); the stdout of
    each node started (`only`: those), in node order."""
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STORE_NODE],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NODE": str(n), "NODES": str(nodes), "PORT": port, "CHECK_SECONDS": str(check_seconds)},
        )
        for n in (only if only is not None else range(nodes))
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    return [out for out, _ in outs]


def test_the_pjrt_client_store_reaches_every_node_through_a_real_tcp_store():
    for out in run_store_nodes(2, 60):
        assert "check passed" in out, out
        assert "stored: ['node 0 of 2', 'node 1 of 2']" in out, out
        assert "op: [0.0, 2.0, 4.0]" in out, out
        assert "second store: distributed store: the runtime has already started" in out, out


def test_a_missing_node_fails_the_store_check_naming_it_and_the_process_goes_on():
    (out,) = run_store_nodes(2, 1, only=[0])
    assert "check failed:" in out and "node 1 of 2 did not put eagertpu/check/node/1" in out, out
    assert "op: [0.0, 2.0, 4.0]" in out, out


def test_a_bad_node_number_is_refused():
    r = run_python(
        """
        import torch, torch.distributed as dist
        from eagertpu.distributed import set_pjrt_store
        store = dist.HashStore()
        for node, nodes in [(2, 2), (-1, 2)]:
            try:
                set_pjrt_store(store, node, nodes)
                print("accepted", node, nodes)
            except RuntimeError as e:
                print("refused:", e)
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused: distributed store: got node 2 of 2; expected a node in 0..2" in r.stdout, r.stdout
    assert "refused: distributed store: node -1 is negative" in r.stdout, r.stdout
    assert "accepted" not in r.stdout
