"""PyTorch's own operator database (`op_db`, from
torch.testing._internal.common_methods_invocations) run on tpu against the
CPU: for each entry that runs on the CPU in float32 (or another dtype:
`--dtype complex64`), its first samples, with and without gradients. Each
entry ends as

  device    every sample matched the CPU with no op run on the CPU;
  fallback  every sample matched, some op ran on the CPU (counted fallback);
  fail      a sample raised on tpu, or its values differed from the CPU's;
  skip      left out, for the reason in SKIP (random streams, uninitialized
            memory), or no sample of the dtype at all.

`python python/tests/op_db.py [--grad] [--mode M] [--dtype D] [--only NAME,...]`
prints the table and writes target/op_db/<mode>[-grad][-<dtype>].json;
test_op_db.py runs it in every mode and holds the on-device share to its
floor.
"""

import argparse
import collections
import json
import math
import os
import sys
import time
import warnings

import torch

import eagertpu

# Entries compared by distribution or not at all, each with its reason: a
# random op draws from tpu's generator (its own stream, not the CPU's), and
# an uninitialized tensor has no values to compare.
RANDOM = "draws random numbers (tpu's generator is not the CPU's stream)"
UNINITIALIZED = "returns uninitialized memory"
SKIP = {
    "bernoulli": RANDOM,
    "normal": RANDOM,
    "normal.number_mean": RANDOM,
    "multinomial": RANDOM,
    "rand_like": RANDOM,
    "randn_like": RANDOM,
    "randint_like": RANDOM,
    "randint": RANDOM,
    "uniform": RANDOM,
    "cauchy": RANDOM,
    "exponential": RANDOM,
    "geometric": RANDOM,
    "log_normal": RANDOM,
    "nn.functional.dropout": RANDOM,
    "nn.functional.dropout2d": RANDOM,
    "nn.functional.dropout3d": RANDOM,
    "nn.functional.alpha_dropout": RANDOM,
    "nn.functional.feature_alpha_dropout": RANDOM,
    "nn.functional.rrelu": RANDOM,
    "nn.functional.fractional_max_pool2d": RANDOM,
    "nn.functional.fractional_max_pool3d": RANDOM,
    "nn.functional.scaled_dot_product_attention": "dropout_p > 0 in its samples draws random numbers",
    "empty": UNINITIALIZED,
    "empty_like": UNINITIALIZED,
    "new_empty": UNINITIALIZED,
    "new_empty_strided": UNINITIALIZED,
    "empty_strided": UNINITIALIZED,
    "empty_permuted": UNINITIALIZED,
}

# Samples left out of an entry that is otherwise compared: those that draw
# random numbers (multi-head attention in training mode with dropout).
RANDOM_SAMPLES = {
    "nn.functional.multi_head_attention_forward": lambda s: bool(s.kwargs.get("training")) and s.args[9] > 0,
}

# Entries compared with the CPU's float64 result (rounded to float32), with
# the reason: where the CPU's own float32 result is the less accurate one.
FLOAT64_REFERENCE = {
    "matrix_exp": "the CPU's float32 (and bfloat16) squarings lose accuracy (0.05 off an element of 0.15 in op_db's 5 x 5 "
    "sample, whose float64 value tpu's float32 result matches to 2e-3 absolute)",
}

# Entries whose arguments after the input stay on the CPU, as PyTorch
# requires on every device.
CPU_ARGUMENTS = {"tensor_split"}

# How close a result must be to the CPU's: a half-precision result may be a
# rounding apart (the CPU computes some ops in float32 before rounding, some
# not), 2^-8 relative for bfloat16.
DEFAULT_TOLERANCE = dict(rtol=1e-3, atol=1e-4)
TOLERANCES = {
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.float16: dict(rtol=2e-3, atol=1e-3),
}

SAMPLES = 3  # the first samples of each entry (their inputs vary most in shape)


def entry_name(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def to_tpu(x):
    if isinstance(x, torch.Tensor) and x.is_conj():
        # The same lazy conjugate view, of the conjugated values on tpu.
        t = x.detach().conj().to("tpu").conj()
        return t.requires_grad_(x.requires_grad)
    if isinstance(x, torch.Tensor):
        base = x._base
        if base is not None and base.is_contiguous() and base.storage_offset() == 0:
            # A view keeps its place in its base's storage (as_strided reads
            # the storage, not the view).
            view = base.detach().to("tpu").as_strided(x.size(), x.stride(), x.storage_offset())
            return view.requires_grad_(x.requires_grad)
        t = x.detach().to("tpu")
        return t.requires_grad_(x.requires_grad) if x.is_leaf and x.requires_grad else t
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_tpu(v) for k, v in x.items()}
    return x


def tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from tensors(v)


def compare(got, want, what="result"):
    """None if `got` (tpu) matches `want` (CPU), else what differs."""
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{what}: got {type(got).__name__}, expected a tensor"
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"{what}: got {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
        g = got.detach().cpu()
        w = want.detach()
        if not (w.is_complex() or w.dtype.is_floating_point):
            return None if torch.equal(g, w) else f"{what}: values differ"
        try:
            torch.testing.assert_close(g, w, **TOLERANCES.get(w.dtype, DEFAULT_TOLERANCE), equal_nan=True)
        except AssertionError as e:
            return f"{what}: {str(e).splitlines()[0] if str(e) else 'values differ'}"
        return None
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"{what}: got {type(got).__name__}, expected {len(want)} results"
        for i, (g, w) in enumerate(zip(got, want)):
            d = compare(g, w, f"{what}[{i}]")
            if d:
                return d
        return None
    if isinstance(want, float) and math.isnan(want):
        return None if isinstance(got, float) and math.isnan(got) else f"{what}: {got} != nan"
    return None if got == want else f"{what}: {got} != {want}"


def differentiable(t):
    return t.requires_grad and (t.dtype.is_floating_point or t.is_complex())


def total(outs):
    """A real scalar of the outputs (a complex one's parts both count)."""
    return sum(o.real.sum() + o.imag.sum() if o.is_complex() else o.sum() for o in outs)


def run_sample(op, sample, grad):
    """(None or what failed, whether the sample is usable)."""
    args = (sample.input, *sample.args)
    # What PyTorch's own device-vs-CPU test compares (test_compare_cpu): the
    # outputs through the sample's output_process_fn_grad, which leaves out
    # what is not unique (the signs of singular and eigen vectors).
    process = sample.output_process_fn_grad
    try:
        if entry_name(op) in FLOAT64_REFERENCE:
            dtype = sample.input.dtype
            wide_dtype = torch.complex128 if dtype.is_complex else torch.float64
            wide = [a.to(wide_dtype) if isinstance(a, torch.Tensor) and a.dtype == dtype else a for a in args]
            want = process(op(*wide, **sample.kwargs))
            narrow = lambda w: w.to(dtype)  # noqa: E731 - rounded to the sample's dtype
            want = type(want)(map(narrow, want)) if isinstance(want, (tuple, list)) else narrow(want)
        else:
            want = process(op(*args, **sample.kwargs))
    except Exception:
        return None, False  # the CPU refuses it too
    if grad:
        outs = [t for t in tensors(want) if differentiable(t)]
        leaves = [t for t in tensors(args) if t.requires_grad]
        if not outs or not leaves:
            return None, False
        want_grads = torch.autograd.grad(total(outs), leaves, allow_unused=True)
    targs = (to_tpu(args[0]), *args[1:]) if op.name in CPU_ARGUMENTS else to_tpu(args)
    tkwargs = to_tpu(sample.kwargs)
    try:
        got = process(op(*targs, **tkwargs))
        diff = compare(got, want)
        if diff is None and grad:
            touts = [t for t in tensors(got) if differentiable(t)]
            tleaves = [t for t in tensors(targs) if t.requires_grad]
            got_grads = torch.autograd.grad(total(touts), tleaves, allow_unused=True)
            for i, (g, w) in enumerate(zip(got_grads, want_grads)):
                if (g is None) != (w is None):
                    diff = f"grad {i}: got {g is not None}, expected {w is not None}"
                elif w is not None:
                    diff = compare(g, w, f"grad {i}")
                if diff:
                    break
        eagertpu.sync()
    except Exception as e:  # noqa: BLE001 - every failure is a result here
        try:
            eagertpu.sync()
        except Exception:  # noqa: BLE001
            pass
        return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}", True
    return diff, True


def run_entry(op, grad, dtype=torch.float32):
    """(status, detail) of one op_db entry."""
    name = entry_name(op)
    if name in SKIP or op.name in SKIP:
        return "skip", SKIP.get(name, SKIP.get(op.name))
    if dtype not in op.supported_dtypes("cpu"):
        return "skip", f"no {str(dtype).removeprefix('torch.')} on the CPU"
    if grad and not op.supports_autograd:
        return "skip", "no autograd"
    before = eagertpu.fallbacks()
    ran = 0
    try:
        samples = op.sample_inputs("cpu", dtype, requires_grad=grad)
        random_sample = RANDOM_SAMPLES.get(name, lambda s: False)
        for sample in samples:
            if ran == SAMPLES:
                break
            if random_sample(sample):
                continue
            diff, usable = run_sample(op, sample, grad)
            ran += usable
            if diff:
                return "fail", diff
    except Exception as e:  # noqa: BLE001 - sample generation itself
        return "skip", f"its samples failed on the CPU: {type(e).__name__}"
    if ran == 0:
        return "skip", "no sample the CPU runs"
    after = eagertpu.fallbacks()
    fell = sorted(k for k, v in after.items() if v != before.get(k, 0))
    return ("fallback", ", ".join(fell)) if fell else ("device", "")


def run(mode="fused", grad=False, only=None, dtype=torch.float32):
    from torch.testing._internal.common_methods_invocations import op_db

    results = {}
    start = time.perf_counter()
    with eagertpu.mode(mode), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in op_db:
            name = entry_name(op)
            if only and name not in only and op.name not in only:
                continue
            torch.manual_seed(0)
            results[name] = run_entry(op, grad, dtype)
    counts = collections.Counter(status for status, _ in results.values())
    ran = counts["device"] + counts["fallback"] + counts["fail"]
    summary = {
        "mode": mode,
        "grad": grad,
        "dtype": str(dtype).removeprefix("torch."),
        "entries": len(results),
        "counts": dict(counts),
        "device_share": round(counts["device"] / ran, 4) if ran else None,
        "seconds": round(time.perf_counter() - start, 1),
    }
    return summary, results


def write(summary, results, directory="target/op_db"):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, pass_name(summary["mode"], summary["grad"], summary["dtype"]) + ".json")
    with open(path, "w") as f:
        json.dump({"summary": summary, "entries": {k: list(v) for k, v in sorted(results.items())}}, f, indent=1)
    return path


def baseline_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_db_baseline.json")


def pass_name(mode, grad, dtype="float32"):
    return f"{mode}{'-grad' if grad else ''}{'' if dtype == 'float32' else '-' + dtype}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="fused", choices=["debug", "strict", "fused"])
    parser.add_argument("--grad", action="store_true", help="with gradients (entries that support autograd)")
    parser.add_argument("--dtype", default="float32", help="the samples' dtype (float32, complex64, ...)")
    parser.add_argument("--only", default="", help="comma-separated entry names")
    parser.add_argument("--verbose", action="store_true", help="every entry's status")
    parser.add_argument("--bless", action="store_true",
                        help="record this pass's on-device entries as the baseline test_op_db.py holds")
    a = parser.parse_args()
    only = set(filter(None, a.only.split(","))) or None
    summary, results = run(a.mode, a.grad, only, getattr(torch, a.dtype))
    for name, (status, detail) in sorted(results.items()):
        if a.verbose or status in ("fail", "fallback"):
            print(f"{status:9} {name:45} {detail}")
    print(json.dumps(summary))
    print("wrote", write(summary, results))
    if a.bless:
        path = baseline_path()
        baseline = json.load(open(path)) if os.path.exists(path) else {}
        baseline[pass_name(a.mode, a.grad, a.dtype)] = sorted(k for k, (status, _) in results.items() if status == "device")
        with open(path, "w") as f:
            json.dump(baseline, f, indent=1, sort_keys=True)
            f.write("\n")
        print("blessed", path)


if __name__ == "__main__":
    sys.exit(main())
