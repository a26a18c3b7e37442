"""Comparing tpu results with PyTorch CPU on the same inputs."""

import os
import subprocess
import sys
import textwrap

import torch

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]

# Tolerances per dtype (rtol, atol): XLA's CPU math (exp, tanh, erf, ...) is
# not bit-identical to ATen's, and half types round every op.
TOL = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-10, 1e-10),
    torch.float16: (5e-3, 5e-3),
    torch.bfloat16: (3e-2, 3e-2),
}


def rand(*shape, dtype=torch.float32, low=None, high=None):
    """Random CPU data of `dtype`: normal floats (or uniform in [low, high)),
    small ints, or bools."""
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        if low is not None:
            return (torch.rand(shape, dtype=torch.float64) * (high - low) + low).to(dtype)
        return torch.randn(shape, dtype=torch.float64).to(dtype)
    lo = 0 if dtype == torch.uint8 else -9
    return torch.randint(lo if low is None else low, 10 if high is None else high, shape, dtype=dtype)


def tpu(x):
    """`x` moved to tpu (recursively through lists and tuples)."""
    if isinstance(x, torch.Tensor):
        return x.to("tpu")
    if isinstance(x, (list, tuple)):
        return type(x)(tpu(v) for v in x)
    return x


def assert_same(actual, expected, rtol=None, atol=None, what="result"):
    """`actual` (from tpu) matches `expected` (from CPU): same type, shape,
    dtype and values within the dtype's tolerance (exact for ints and bools)."""
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), (actual, expected)
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, rtol, atol, f"{what}[{i}]")
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected or abs(actual - expected) <= (atol or 0), (what, actual, expected)
        return
    assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {actual!r}"
    assert actual.device.type == "tpu", f"{what} is on {actual.device}, expected tpu"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    got = actual.cpu()
    if expected.dtype.is_floating_point:
        r, a = TOL[expected.dtype]
        torch.testing.assert_close(got, expected, rtol=rtol or r, atol=atol or a, equal_nan=True, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(got, expected), f"{what}:\n{got}\nexpected\n{expected}"


def check(fn, *args, rtol=None, atol=None, **kwargs):
    """Runs `fn` on the CPU args and on tpu copies; compares the results and
    the args afterwards (in-place ops)."""
    cpu_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    tpu_args = [tpu(a) for a in args]
    expected = fn(*cpu_args, **kwargs)
    actual = fn(*tpu_args, **kwargs)
    assert_same(actual, expected, rtol, atol)
    for i, (a, e) in enumerate(zip(tpu_args, cpu_args)):
        if isinstance(e, torch.Tensor):
            assert_same(a, e, rtol, atol, f"argument {i} after the call")
    return actual


def check_grad(fn, *args, rtol=None, atol=None):
    """Compares fn's result and the gradients of its float args (with a random
    output gradient) between CPU and tpu."""
    cpu_args = [a.clone().requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a for a in args]
    tpu_args = [
        a.detach().to("tpu").requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a
        for a in cpu_args
    ]
    expected = fn(*cpu_args)
    actual = fn(*tpu_args)
    assert_same(actual, expected.detach(), rtol, atol)
    g = torch.randn_like(expected)
    expected.backward(g)
    actual.backward(g.to("tpu"))
    for i, (a, e) in enumerate(zip(tpu_args, cpu_args)):
        if isinstance(e, torch.Tensor) and e.requires_grad:
            assert_same(a.grad, e.grad, rtol, atol, f"grad of argument {i}")


def run_python(code, **env):
    """Runs `code` in a fresh Python process with `env` added to the
    environment; the CompletedProcess (stdout and stderr as text)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def next_op_works():
    """After an error, the next op on tpu runs and is right."""
    x = torch.arange(4.0, device="tpu")
    assert (x * 2).sum().item() == 12.0
