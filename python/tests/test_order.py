"""Order statistics (median, nanmedian, kthvalue, mode), values and indices,
with their gradients, against PyTorch CPU in every mode
(python/csrc/ops_order.cpp)."""

import pytest
import torch
from helpers import assert_same, check, check_grad, next_op_works, rand, tpu

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


def check_select(fn, x, dim):
    """fn's values match the CPU's; its indices point at those values (PyTorch
    leaves the index among equal values unspecified)."""
    values, indices = fn(tpu(x))
    expected = fn(x)
    assert_same(values, expected.values)
    assert indices.dtype == torch.int64 and indices.shape == expected.indices.shape
    picked = x.gather(dim, indices.cpu() if indices.dim() == x.dim() else indices.cpu().unsqueeze(dim))
    assert torch.equal(picked.view(values.shape), values.cpu()) or torch.allclose(
        picked.view(values.shape), values.cpu(), equal_nan=True)


@pytest.mark.parametrize("shape,dim", [((7,), 0), ((4, 6), 1), ((4, 6), 0), ((2, 5, 3), -1), ((2, 5, 3), 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_and_kthvalue_by_dim(shape, dim, keepdim):
    x = rand(*shape)  # no ties: the indices are the CPU's
    check(lambda x: torch.median(x, dim, keepdim), x)
    check(lambda x: torch.nanmedian(x, dim, keepdim), x)
    n = shape[dim]
    for k in sorted({1, (n + 1) // 2, n}):
        check(lambda x: torch.kthvalue(x, k, dim, keepdim), x)
    check_grad(lambda x: torch.median(x, dim, keepdim).values, x)
    check_grad(lambda x: torch.kthvalue(x, n, dim, keepdim).values, x)
    check(lambda x: torch.median(x.transpose(0, -1), dim, keepdim), x)  # non-contiguous
    ties = rand(*shape, dtype=torch.int64, low=0, high=3)
    check_select(lambda x: torch.median(x, dim, keepdim), ties, dim)
    check_select(lambda x: torch.kthvalue(x, 1, dim, keepdim), ties.double(), dim)


def test_median_all():
    for x in [rand(7), rand(4, 6), rand(3, 4, 5).transpose(0, 2), rand(1), rand(5, dtype=torch.float64)]:
        check(torch.median, x)
        check(torch.nanmedian, x)
        check_grad(torch.median, x.contiguous())
    ties = torch.tensor([[1.0, 2.0, 2.0], [3.0, 3.0, 1.0]])
    check(torch.median, ties)
    check_grad(torch.median, ties)  # the gradient is shared among the tied medians
    check(torch.median, rand(3, 5, dtype=torch.int32, low=0, high=4))
    check(torch.median, torch.tensor([]))
    check(torch.median, torch.tensor(3.5))


def test_median_nan():
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 2.0, nan], [3.0, 0.5, 2.0, 1.0], [nan, nan, nan, nan], [nan, 4.0, 0.0, 1.0]])
    check(lambda x: torch.median(x, 1), x)  # a row with NaN: its first NaN
    check(lambda x: torch.nanmedian(x, 1), x[[0, 1, 3]])  # NaN ignored
    check_select(lambda x: torch.nanmedian(x, 1), x, 1)  # a row of NaN: NaN, at an index the CPU leaves open
    check(torch.median, x)
    check(torch.nanmedian, x)
    check(torch.nanmedian, torch.tensor([nan, nan]))
    check(lambda x: torch.kthvalue(x, 4, 1), x)  # NaN is the largest


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_mode(dim):
    x = rand(5, 6, 7, dtype=torch.int64, low=0, high=4)
    check(lambda x: torch.mode(x, dim), x)
    check(lambda x: torch.mode(x, dim, keepdim=True), x)
    check(lambda x: torch.mode(x.transpose(0, 2), dim), x)
    check(lambda x: torch.mode(x, dim), (x - 2).double())
    check_grad(lambda x: torch.mode(x, dim).values, rand(4, 5, 6).round())
    check(lambda x: torch.mode(x), torch.tensor([1.0, 2.0, 2.0, 3.0, 3.0, 1.0]))
    check(lambda x: torch.mode(x, 0), torch.tensor(2.5))


def test_order_statistic_errors():
    x = torch.randn(3, 4, device="tpu")
    with pytest.raises(RuntimeError, match=r"kthvalue: selected number k = 5 out of range for dimension 1 of "
                                           r"size 4 \(input of shape \[3, 4\]\)"):
        torch.kthvalue(x, 5, 1)
    next_op_works()
    with pytest.raises(RuntimeError, match=r"kthvalue: selected number k = 0 out of range"):
        torch.kthvalue(x, 0)
    with pytest.raises(RuntimeError, match=r"median: cannot reduce dim 1 of size 0 \(input of shape \[3, 0\]\)"):
        torch.median(torch.ones(3, 0, device="tpu"), 1)
    with pytest.raises(RuntimeError, match=r"trace: expected a matrix, but got tensor with dim 3"):
        torch.trace(torch.ones(2, 2, 2, device="tpu"))
    with pytest.raises(RuntimeError, match=r"triu_indices: row must be non-negative, got -1"):
        torch.triu_indices(-1, 3, device="tpu")
    next_op_works()
    check(lambda x: torch.kthvalue(x, 2, 1), rand(3, 4))


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize_match_the_cpu(right):
    nan = float("nan")
    seq = torch.tensor([[1.0, 3.0, 3.0, 5.0, 9.0], [-2.0, 0.0, 0.0, 0.0, 4.0]])
    values = torch.tensor([[0.0, 3.0, 9.0, nan], [-3.0, 0.0, 4.0, 7.0]])
    check(lambda s, v: torch.searchsorted(s, v, right=right), seq, values)
    check(lambda s, v: torch.searchsorted(s, v, side="right" if right else "left", out_int32=True), seq, values)
    check(lambda s, v: torch.searchsorted(s, v, right=right), seq[0], values)
    check(lambda s: torch.searchsorted(s, 3, right=right), seq[0])
    check(lambda v, b: torch.bucketize(v, b, right=right), values, seq[1])
    check(lambda b: torch.bucketize(0.0, b, right=right), seq[1])
    big = 1 << 60
    check(lambda s, v: torch.searchsorted(s, v, right=right), torch.tensor([big, big + 2, big + 4]),
          torch.tensor([[big + 1, big + 2], [big + 5, 0]]))
    # A sorter: the sequence is sorted through it.
    unsorted = torch.tensor([5.0, 1.0, 9.0, 3.0])
    check(lambda s, o, v: torch.searchsorted(s, v, sorter=o, right=right), unsorted, torch.argsort(unsorted),
          torch.tensor([2.0, 5.0, 10.0]))


def test_searchsorted_refuses_what_the_cpu_refuses():
    seq = torch.arange(10.0, device="tpu").reshape(2, 5)
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        torch.searchsorted(seq, torch.ones(3, 1, device="tpu"))
    with pytest.raises(RuntimeError, match="opposites"):
        torch.searchsorted(seq[0], torch.ones(2, device="tpu"), right=True, side="left")
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        torch.bucketize(torch.ones(2, device="tpu"), seq)
    next_op_works()
