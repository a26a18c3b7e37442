"""torch.profiler on tpu through Kineto's PrivateUse1 plugin
(python/csrc/profiler.cpp): the runtime's compiles, loads from the disk
cache, executions, host reads and copies to the device appear in the trace
beside the CPU ops, on the profiler's clock, each naming the user's line,
counted exactly as the runtime's metrics count them, with device time."""

import json
import os

import pytest
import torch
from helpers import run_python
from torch.profiler import ProfilerActivity, profile

import eagertpu

pytestmark = pytest.mark.usefixtures("no_fallbacks")

HERE = os.path.basename(__file__)


def ours(prof, tmp_path):
    """The trace's events, and those of the runtime, from the Chrome trace."""
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    return events, [e for e in events if str(e.get("name", "")).startswith("eagertpu::")]


def test_the_runtime_shows_in_the_trace_as_its_metrics_count_it(mode, tmp_path):
    x = torch.randn(48, 48)
    eagertpu.sync()
    before = eagertpu.metrics()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        y = x.to("tpu")  # the copy
        for _ in range(4):
            y = torch.tanh(y @ y) * 0.5  # the ops' line
        total = y.sum().item()  # the read's line
        eagertpu.sync()
        eagertpu.wait_for_compiles()
    after = eagertpu.metrics()
    events, runtime = ours(prof, tmp_path)
    count = lambda name: sum(e["name"] == name for e in runtime)
    delta = lambda key: after[key] - before[key]
    assert count("eagertpu::execute") == delta("executions") > 0
    assert count("eagertpu::host_read") == delta("host_syncs") >= 1
    assert count("eagertpu::to_device") == delta("transfers_to_device") >= 1
    assert count("eagertpu::compile") == delta("compiles")
    assert count("eagertpu::load_from_disk_cache") == delta("disk_hits")
    # Each names the user's line: the read's, the copy's, the ops'.
    lines = {e["name"]: set() for e in runtime}
    for e in runtime:
        lines[e["name"]].add(e["args"].get("origin", ""))
    line = lambda text: f"{__file__}:{next(i for i, l in enumerate(open(__file__), 1) if text in l)}"
    assert lines["eagertpu::host_read"] == {line("# the read's line")}
    assert line("# the ops' line") in lines["eagertpu::execute"]
    # The tensor's copy, and the scalar 0.5 as a program parameter (unless an
    # earlier test left it in the stream's cache), each blamed on its line.
    copies = [(e["args"]["detail"], e["args"].get("origin")) for e in runtime if e["name"] == "eagertpu::to_device"]
    assert ("float32[48, 48]", line("# the copy")) in copies
    assert set(copies) <= {("float32[48, 48]", line("# the copy")), ("float32[]", line("# the ops' line"))}, copies
    # Executions are the device's kernels: PyTorch counts their device time.
    kernels = [e for e in runtime if e["name"] == "eagertpu::execute"]
    assert all(e["cat"] == "kernel" for e in kernels)
    device_time = sum(a.self_device_time_total for a in prof.key_averages() if a.key == "eagertpu::execute")
    assert device_time > 0
    # The same clock as the CPU ops: the read's activity overlaps the ATen op
    # that read (the runtime's host read happens inside it).
    read = next(e for e in runtime if e["name"] == "eagertpu::host_read")
    aten = [e for e in events if e.get("name") == "aten::_local_scalar_dense"]
    assert any(a["ts"] <= read["ts"] + read["dur"] and read["ts"] <= a["ts"] + a["dur"] for a in aten), (read, aten)
    assert total == total  # a number, not NaN


def test_nothing_is_recorded_outside_a_session(mode, tmp_path):
    x = torch.ones(8, device="tpu")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        (x * 3).sum().item()
    _, runtime = ours(prof, tmp_path)
    assert any(e["name"] == "eagertpu::host_read" for e in runtime)
    (x + 1).sum().item()  # between sessions: not kept for the next one
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        pass
    _, runtime = ours(prof, tmp_path)
    assert runtime == []


def test_compiles_and_disk_loads_name_the_line_that_needed_the_program(tmp_path):
    # Fresh processes on an empty cache directory: the first compiles, the
    # second loads what the first wrote.
    code = """
        import json, sys, torch, eagertpu
        from torch.profiler import ProfilerActivity, profile
        eagertpu.set_mode("debug")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            y = torch.ones(5, 7, device="tpu").exp().sum(0)  # line 6
            y.cpu()
        prof.export_chrome_trace("TRACE")
        m = eagertpu.metrics()
        print(json.dumps({"compiles": m["compiles"], "disk_hits": m["disk_hits"]}))
        """
    results = []
    for run in range(2):
        trace = tmp_path / f"trace{run}.json"
        r = run_python(code.replace("TRACE", str(trace)), EAGERTPU_CACHE_DIR=str(tmp_path / "cache"))
        assert r.returncode == 0, r.stderr
        counts = json.loads(r.stdout.strip().splitlines()[-1])
        events = [e for e in json.loads(trace.read_text())["traceEvents"] if str(e.get("name", "")).startswith("eagertpu::")]
        results.append((counts, events))
    (first, first_events), (second, second_events) = results
    compiles = [e for e in first_events if e["name"] == "eagertpu::compile"]
    assert len(compiles) == first["compiles"] > 0 and first["disk_hits"] == 0
    assert all(e["args"]["origin"] == "<string>:6" for e in compiles), compiles
    assert all("StableHLO" in e["args"]["detail"] and e["dur"] > 0 for e in compiles)
    loads = [e for e in second_events if e["name"] == "eagertpu::load_from_disk_cache"]
    assert second["compiles"] == 0 and len(loads) == second["disk_hits"] == first["compiles"]
    assert all(e["args"]["origin"] == "<string>:6" for e in loads), loads


def test_nvtx_style_ranges_are_profiler_ranges():
    # torch.cuda.nvtx's calls (DeepSpeed's accelerator makes them around its
    # phases) as record_function ranges, nested per thread.
    x = torch.ones(4, device="tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        assert torch.tpu.nvtx.range_push("step") == 0
        assert torch.tpu.range_push("forward") == 1
        (x * 2).sum().item()
        assert torch.tpu.range_pop() == 1
        assert torch.tpu.nvtx.range_pop() == 0
        assert torch.tpu.range_pop() == -1  # none open, as nvtx says
        with torch.tpu.nvtx.range("optimizer"):
            x.add_(1)
    spans = {e.name: e for e in prof.events() if e.name in ("step", "forward", "optimizer")}
    assert set(spans) == {"step", "forward", "optimizer"}
    step, forward = spans["step"].time_range, spans["forward"].time_range
    assert step.start <= forward.start and forward.end <= step.end
