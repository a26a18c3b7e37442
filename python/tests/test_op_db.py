"""PyTorch's own operator database on tpu (op_db.py): every entry's first
samples against the CPU, in float32 forward in every mode and with gradients
in fused mode, and in bfloat16 and complex64 forward and with gradients in
fused mode. Every entry the baseline (op_db_baseline.json) has on the device
must stay there: a regression names the entry and what failed. The figures
go to target/op_db/<pass>.json; an entry that newly runs on the device is
reported, and `python python/tests/op_db.py --mode M [--grad] [--dtype D]
--bless` records it."""

import json
import os

import pytest
import torch
from op_db import baseline_path, pass_name, run, write

PASSES = [
    ("debug", False, "float32"),
    ("strict", False, "float32"),
    ("fused", False, "float32"),
    ("fused", True, "float32"),
    ("fused", False, "bfloat16"),
    ("fused", True, "bfloat16"),
    ("fused", False, "complex64"),
    ("fused", True, "complex64"),
]


@pytest.mark.parametrize("mode,grad,dtype", PASSES, ids=[pass_name(*p) for p in PASSES])
def test_op_db_entries_stay_on_the_device(mode, grad, dtype):
    with open(baseline_path()) as f:
        baseline = json.load(f)[pass_name(mode, grad, dtype)]
    summary, results = run(mode, grad, dtype=getattr(torch, dtype))
    write(summary, results, os.path.join(os.path.dirname(__file__), "..", "..", "target", "op_db"))
    print(json.dumps(summary))
    lost = {name: results.get(name, ("missing", "")) for name in baseline if results.get(name, ("",))[0] != "device"}
    gained = sorted(name for name, (status, _) in results.items() if status == "device" and name not in baseline)
    if gained:
        print(f"newly on the device ({len(gained)}): {', '.join(gained)}")
    assert not lost, "entries no longer on the device: " + "; ".join(
        f"{name}: {status} {detail}" for name, (status, detail) in sorted(lost.items())
    )
