"""The runtime's counters as users and `make bench` read them."""

import ctypes

import eagertpu
import torch
from helpers import run_python


def test_op_timing_is_off_by_default():
    timing = eagertpu.metrics()["op_timing"]
    assert set(timing) == {"abi", "views", "record", "cut"}, timing
    assert all(t["calls"] == 0 and t["nanos"] == 0 for t in timing.values()), timing


def test_op_timing_counts_every_stage_of_each_op_and_the_stages_nest():
    r = run_python(
        """
        import json, torch, eagertpu
        a, b = torch.randn(4, 4).to("tpu"), torch.randn(4, 4).to("tpu")
        t0 = eagertpu.metrics()["op_timing"]
        for _ in range(1000):
            c = torch.add(a, b)
        t1 = eagertpu.metrics()["op_timing"]
        torch.testing.assert_close(c.cpu(), a.cpu() + b.cpu())
        print(json.dumps({k: {f: t1[k][f] - t0[k][f] for f in ("calls", "nanos")} for k in t1}))
        """,
        EAGERTPU_OP_TIMING="1",
        EAGERTPU_MODE="fused",
    )
    assert r.returncode == 0, r.stderr
    import json

    d = json.loads(r.stdout.strip().splitlines()[-1])
    # Each add: one call that records it and registers its result's storage
    # (etpu_pointwise_new), one that frees the storage of the result it
    # replaced; two view reads; one op recorded.
    assert d["abi"]["calls"] >= 2 * 1000, d
    assert d["views"]["calls"] >= 2 * 1000, d
    assert d["record"]["calls"] >= 1000, d
    assert all(d[k]["nanos"] > 0 for k in ("abi", "views", "record")), d
    assert d["abi"]["nanos"] > d["views"]["nanos"] + d["record"]["nanos"], d
    assert d["record"]["nanos"] >= d["cut"]["nanos"], d


def test_metrics_text_that_grows_between_reads_is_read_whole():
    # Another thread's ops or a rank arriving at a collective can lengthen the
    # metrics between asking their length and reading them: the reader asks
    # again, larger, instead of returning a truncated text (it once cut the
    # JSON of metrics() in half). Here a writer with the C ABI's contract
    # lengthens its text at every call.
    from eagertpu import _lib

    texts = ["x" * n for n in (5000, 12000, 40000)]
    calls = []

    def writer(buf, capacity, length):
        text = texts[min(len(calls), len(texts) - 1)].encode()
        calls.append(capacity)
        length._obj.value = len(text) + 1
        n = min(len(text), capacity - 1)
        ctypes.memmove(buf, text, n)
        buf[n] = b"\0"
        return 0

    assert _lib._read_text(writer) == texts[-1]
    # 5001 > 4096, 12001 > 10002, 40001 > 24002, then 40001 <= 80002.
    assert calls == [4096, 10002, 24002, 80002]
    calls.clear()
    texts[:] = ["y" * 100]
    assert _lib._read_text(writer) == texts[0]
    assert calls == [4096]
    # Whole JSON from the runtime, twice over a burst of ops on another thread.
    import threading

    stop = threading.Event()

    def ops():
        x = torch.ones(3, device="tpu")
        while not stop.is_set():
            x = x + 1
            x.sum().item()

    t = threading.Thread(target=ops)
    t.start()
    try:
        for _ in range(200):
            assert "compiles" in eagertpu.metrics()
            assert "compiles" in eagertpu.metrics_report()
    finally:
        stop.set()
        t.join()
