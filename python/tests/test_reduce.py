"""Reductions against PyTorch CPU, in every mode."""

import pytest
import torch
from helpers import FLOATS, INTS, check, check_grad, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
def test_sum(dtype):
    x = rand(3, 4, 5, dtype=dtype)
    rtol = 2e-2 if dtype in (torch.float16, torch.bfloat16) else None
    check(lambda x: x.sum(), x, rtol=rtol, atol=rtol)
    check(lambda x: x.sum(1), x, rtol=rtol, atol=rtol)
    check(lambda x: x.sum((0, 2), keepdim=True), x, rtol=rtol, atol=rtol)
    check(lambda x: x.sum(-1, dtype=torch.float64), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_mean_var_std(dtype):
    x = rand(4, 6, dtype=dtype)
    loose = dtype in (torch.float16, torch.bfloat16)
    tol = dict(rtol=3e-2, atol=3e-2) if loose else {}
    check(lambda x: x.mean(), x, **tol)
    check(lambda x: x.mean(0, keepdim=True), x, **tol)
    check(lambda x: x.var(1), x, **tol)
    check(lambda x: x.var(1, correction=0), x, **tol)
    check(lambda x: x.std(), x, **tol)
    check(lambda x: torch.var_mean(x, dim=0), x, **tol)


def test_mean_of_ints_needs_a_dtype():
    with pytest.raises(RuntimeError, match="mean"):
        torch.arange(4, device="tpu").mean()
    check(lambda x: x.mean(dtype=torch.float32), rand(5, dtype=torch.int32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.uint8])
def test_max_min(dtype):
    x = rand(3, 7, dtype=dtype)
    check(torch.amax, x)
    check(lambda x: torch.amax(x, dim=1), x)
    check(lambda x: torch.amin(x, dim=(0, 1)), x)
    check(lambda x: x.max(), x)
    check(lambda x: x.min(), x)
    check(lambda x: tuple(x.max(dim=1)), x)
    check(lambda x: tuple(x.min(dim=0, keepdim=True)), x)
    check(lambda x: x.argmax(), x)
    check(lambda x: x.argmax(1), x)
    check(lambda x: x.argmin(0, keepdim=True), x)


def test_max_with_ties_returns_first_index():
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    check(lambda x: tuple(x.max(dim=1)), x)
    check(lambda x: x.argmax(1), x)
    check(lambda x: x.argmin(1), x)


def test_prod_logsumexp_any_all_norm():
    x = rand(3, 5, low=0.5, high=1.5)
    check(lambda x: x.prod(1), x)
    check(lambda x: torch.logsumexp(x * 10, dim=1), x)
    check(lambda x: torch.logsumexp(x, dim=(0, 1)), x)
    b = rand(4, 5, dtype=torch.bool)
    check(torch.any, b)
    check(torch.all, b)
    check(lambda b: b.any(1), b)
    check(lambda b: b.all(0), b)
    check(lambda x: (x > 1).any(dim=1, keepdim=True), x)
    check(lambda x: torch.linalg.vector_norm(x), x)
    check(lambda x: torch.linalg.vector_norm(x, ord=1, dim=1), x)
    check(lambda x: torch.linalg.vector_norm(x, ord=float("inf")), x)
    check(lambda x: torch.linalg.vector_norm(x, ord=3, dim=0), x)
    check(lambda x: x.norm(), x)


def test_reductions_of_non_contiguous_views():
    check(lambda x: x.t().sum(1), rand(5, 3))
    check(lambda x: x[:, ::2].mean(0), rand(4, 8))
    check(lambda x: x.permute(2, 0, 1).amax(dim=(1, 2)), rand(2, 3, 4))


def test_reduction_gradients():
    check_grad(lambda x: x.sum(1), rand(3, 4))
    check_grad(lambda x: x.mean((0, 2)), rand(3, 4, 5))
    check_grad(lambda x: x.var(1), rand(3, 6))
    check_grad(lambda x: x.amax(1), rand(3, 6))
    check_grad(lambda x: torch.logsumexp(x, 1), rand(3, 6))
    check_grad(lambda x: x.norm(dim=1), rand(3, 6))


@pytest.mark.parametrize("ord", [2, 6, 0.5])
def test_half_precision_vector_norms_round_once_as_the_cpu(ord):
    # PyTorch computes a bfloat16 norm in float32 and rounds once; each power
    # rounded in 16 bits moved the norm, and its gradient, by several ulps.
    g = torch.Generator().manual_seed(4)
    x = (4 * torch.randn(4, 30, generator=g)).to(torch.bfloat16)

    def norm_and_grad(device):
        t = x.to(device).requires_grad_()
        n = torch.linalg.vector_norm(t, ord, dim=1)
        n.sum().backward()
        return n.detach().cpu().float(), t.grad.cpu().float()

    ulp = 2.0**-7
    for got, want in zip(norm_and_grad("tpu"), norm_and_grad("cpu")):
        torch.testing.assert_close(got, want, rtol=2 * ulp, atol=ulp / 8)
