"""The runtime's counters as users and `make bench` read them."""

import eagertpu
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
    # Each add: its storage registered and freed, one view op (two reads, a
    # write), one op recorded.
    assert d["abi"]["calls"] >= 3 * 1000, d
    assert d["views"]["calls"] >= 3 * 1000, d
    assert d["record"]["calls"] >= 1000, d
    assert all(d[k]["nanos"] > 0 for k in ("abi", "views", "record")), d
    assert d["abi"]["nanos"] > d["views"]["nanos"] + d["record"]["nanos"], d
    assert d["record"]["nanos"] >= d["cut"]["nanos"], d
