"""Cumulative sums and products, sort, argsort and topk against PyTorch CPU,
in every mode, with no op falling back to the CPU."""

import pytest
import torch
from helpers import FLOATS, INTS, check, check_grad, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")

SHAPES_DIMS = [((3, 4, 5), 1), ((3, 4, 5), -1), ((3, 4, 5), 0), ((7,), 0), ((5, 1, 3), 1), ((), 0), ((2, 0, 3), 2)]


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
def test_cumsum(dtype, shape, dim):
    x = rand(*shape, dtype=dtype)
    loose = dtype in (torch.float16, torch.bfloat16)
    tol = dict(rtol=2e-2, atol=2e-2) if loose else {}
    check(lambda x: torch.cumsum(x, dim), x, **tol)
    check(lambda x: x.cumsum(dim, dtype=torch.float64), x)


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
def test_cumprod(dtype, shape, dim):
    if dtype.is_floating_point:
        x = rand(*shape, dtype=dtype, low=0.5, high=1.5)
    else:
        x = rand(*shape, dtype=dtype, low=0 if dtype in (torch.uint8, torch.bool) else -2, high=3)
    loose = dtype in (torch.float16, torch.bfloat16)
    tol = dict(rtol=2e-2, atol=2e-2) if loose else {}
    check(lambda x: torch.cumprod(x, dim), x, **tol)


def test_in_place_and_out_forms():
    x = rand(4, 6)
    check(lambda x: x.cumsum_(1), x)
    check(lambda x: x.cumprod_(0), rand(3, 5, low=0.5, high=1.5))
    check(lambda x: torch.cumsum(x, 0, out=torch.empty(4, 6, device=x.device)), x)
    check(lambda x: torch.sort(x, 1, out=(torch.empty(0, device=x.device), torch.empty(0, dtype=torch.long, device=x.device))), x)


def test_scans_of_non_contiguous_inputs():
    check(lambda x: x.t().cumsum(1), rand(5, 3))
    check(lambda x: x[:, ::2].cumprod(0), rand(4, 8, low=0.5, high=1.5))
    check(lambda x: tuple(torch.sort(x.t(), 1)), rand(6, 4))
    check(lambda x: tuple(torch.topk(x.permute(2, 0, 1), 2, dim=0)), rand(2, 3, 4))


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable(dtype, shape, dim, descending):
    # Few distinct values: many ties, so the indices check stability.
    x = rand(*shape, dtype=dtype) if dtype == torch.bool else rand(*shape, dtype=torch.int64, low=0, high=4).to(dtype)
    check(lambda x: tuple(torch.sort(x, dim=dim, descending=descending, stable=True)), x)
    check(lambda x: torch.argsort(x, dim=dim, descending=descending, stable=True), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sort_of_random_floats_and_nan_placement(dtype):
    x = rand(4, 9, dtype=dtype)
    check(lambda x: tuple(torch.sort(x)), x)
    check(lambda x: tuple(torch.sort(x, 0, descending=True)), x)
    check(torch.msort, x)
    nan, inf = float("nan"), float("inf")
    y = torch.tensor([[3.0, nan, -inf, 1.0, nan, -0.0, 0.0, inf, 1.0, -2.0]], dtype=dtype)
    for descending in (False, True):
        check(lambda y: tuple(torch.sort(y, dim=1, descending=descending, stable=True)), y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.uint8])
def test_topk(dtype):
    x = rand(5, 8, dtype=dtype) if dtype.is_floating_point else torch.randperm(40).reshape(5, 8).to(dtype)
    for k in (0, 1, 3, 8):
        check(lambda x: tuple(torch.topk(x, k, dim=1)), x)
        check(lambda x: tuple(torch.topk(x, k, dim=-1, largest=False)), x)
    check(lambda x: tuple(torch.topk(x, 5, dim=0)), x)
    # Unsorted results may come in any order: compare them sorted.
    check(lambda x: torch.topk(x, 3, dim=1, sorted=False).values.sort(1).values, x)


def test_topk_with_nan_counts_it_largest():
    x = torch.tensor([[1.0, float("nan"), 3.0, 2.0], [4.0, 0.5, float("nan"), -1.0]])
    check(lambda x: tuple(torch.topk(x, 2, dim=1)), x)
    check(lambda x: tuple(torch.topk(x, 2, dim=1, largest=False)), x)


def test_errors_name_the_op_and_the_shape():
    x = torch.zeros(3, 4, device="tpu")
    # PyTorch's own checks run first for the functional forms...
    with pytest.raises(IndexError, match="out of range"):
        torch.cumsum(x, 2)
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.topk(x, 5, dim=1)
    # ...and out= goes straight to the kernels, where the runtime checks.
    v, i = torch.empty(0, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    with pytest.raises(RuntimeError, match=r"cumsum: got dim 2 for a tensor float32\[3, 4\], expected a dim in \[-2, 1\]"):
        torch.cumsum(x, 2, out=torch.empty(3, 4, device="tpu"))
    with pytest.raises(RuntimeError, match=r"topk: got k = 5 .* float32\[3, 4\], expected k in \[0, 4\]"):
        torch.topk(x, 5, dim=1, out=(v, i))
    with pytest.raises(RuntimeError, match=r"sort: got dim -3 for a tensor float32\[3, 4\]"):
        torch.sort(x, -3, out=(v, i))
    # The device still works.
    check(lambda x: torch.cumsum(x, 0), rand(3, 4))


def test_gradients():
    check_grad(lambda x: torch.cumsum(x, 1), rand(3, 5))
    check_grad(lambda x: torch.cumsum(x, 0), rand(4, 2, 3))
    check_grad(lambda x: torch.cumprod(x, 1), rand(3, 5, low=0.5, high=1.5))
    check_grad(lambda x: torch.cumprod(x, -1), rand(2, 3, 4, low=-1.5, high=-0.5))
    check_grad(lambda x: torch.sort(x, 1).values, rand(4, 6))
    check_grad(lambda x: torch.sort(x, 0, descending=True).values, rand(4, 6))
    check_grad(lambda x: torch.topk(x, 3, dim=1).values, rand(4, 6))
    check_grad(lambda x: torch.topk(x, 2, dim=0, largest=False).values, rand(4, 6))


@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
def test_cummax_and_cummin(fn, dtype, shape, dim):
    # Small integer ranges make ties: the latest of equal extremes is the index.
    if dtype.is_floating_point:
        x = rand(*shape, dtype=dtype, low=-2, high=2)
    else:
        x = rand(*shape, dtype=dtype, low=0 if dtype in (torch.uint8, torch.bool) else -2, high=3)
    check(lambda t: fn(t, dim), x)


@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
def test_cummax_and_cummin_keep_pytorchs_nans_and_ties(fn):
    nan = float("nan")
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, nan, 5.0, nan, 0.0], [-1.0, -1.0, -0.0, 0.0, -5.0, -5.0, 7.0, 7.0]])
    check(lambda t: fn(t, 1), x)
    check(lambda t: fn(t, 0), x)
    check(lambda t: fn(t, 0), torch.tensor([float("-inf"), float("-inf"), float("inf"), float("inf")]))
    check_grad(lambda t: fn(t, 1).values, rand(3, 6))
    check_grad(lambda t: fn(t, 0).values, rand())  # a 0-d input's backward scatters into a 0-d tensor


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
def test_logcumsumexp(dtype, shape, dim):
    loose = dtype in (torch.float16, torch.bfloat16)
    tol = dict(rtol=2e-2, atol=2e-2) if loose else dict(rtol=1e-5, atol=1e-5)
    check(lambda t: torch.logcumsumexp(t, dim), rand(*shape, dtype=dtype, low=-3, high=3), **tol)


def test_logcumsumexp_does_not_overflow_and_keeps_infinities():
    inf = float("inf")
    big = torch.tensor([1000.0, 1000.0, -1000.0, 2000.0, 0.0])
    check(lambda t: torch.logcumsumexp(t, 0), big)
    check(lambda t: torch.logcumsumexp(t, 0), torch.tensor([-inf, -inf, 0.0, inf, inf, 1.0]))
    check(lambda t: torch.logcumsumexp(t, 0), torch.tensor([float("nan"), 1.0, 2.0]))
    check_grad(lambda t: torch.logcumsumexp(t, 1), rand(3, 5), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError):
        torch.logcumsumexp(torch.tensor([1, 2], device="tpu"), 0)
