"""trace, index_copy, take/put_ and tril/triu_indices against PyTorch CPU in
every mode, and their out-of-range errors (python/csrc/ops_index.cpp)."""

import pytest
import torch
from helpers import assert_same, check, check_grad, next_op_works, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


@pytest.mark.parametrize("shape", [(3, 3), (3, 5), (5, 2), (1, 4), (0, 3)])
def test_trace(shape):
    check(torch.trace, rand(*shape))
    check(torch.trace, rand(*shape, dtype=torch.int32))
    check(lambda x: torch.trace(x.t()), rand(*shape, dtype=torch.float64))
    if 0 not in shape:
        check_grad(torch.trace, rand(*shape))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_copy(dim):
    x = rand(4, 5, 6)
    index = torch.tensor([3, 0, 2])
    shape = list(x.shape)
    shape[dim] = 3
    src = rand(*shape)
    check(lambda x, i, s: x.index_copy(dim, i, s), x, index, src)
    check(lambda x, i, s: x.index_copy_(dim, i, s), x, index, src)
    check(lambda x, i, s: torch.index_copy(x.transpose(0, 2), dim, i, s.transpose(0, 2)), x.transpose(0, 2).clone(),
          index, src.transpose(0, 2).clone())
    shape[dim] = 0
    check(lambda x, i, s: x.index_copy(dim, i, s), x, torch.tensor([], dtype=torch.long), rand(*shape))
    check_grad(lambda x, s: x.index_copy(dim, index.to(x.device), s), x, src)
    check(lambda x, i, s: x.index_copy(0, i, s), rand(5), torch.tensor(2), torch.tensor(7.0))


def test_take_and_put():
    x = rand(3, 4)
    idx = torch.tensor([[0, 11, -1], [5, 5, -12]])
    check(torch.take, x, idx)
    check(torch.take, x.t(), idx)
    check(torch.take, rand(3, 4, dtype=torch.int64), torch.tensor([], dtype=torch.long))
    check_grad(lambda x: torch.take(x, idx.to(x.device)), x)  # its backward puts with accumulate
    src = rand(4)
    flat = torch.tensor([1, -2, 7, 1])
    check(lambda x, i, s: x.put_(i, s), x, torch.tensor([1, -2, 7, 3]), src)
    check(lambda x, i, s: x.put_(i, s, accumulate=True), x, flat, src)
    check(lambda x, i, s: x.put(i, s, accumulate=True), x.t(), flat, src)


@pytest.mark.parametrize("row,col", [(3, 3), (4, 6), (6, 2), (1, 1), (0, 3), (3, 0)])
@pytest.mark.parametrize("offset", [0, 1, -1, 3, -4])
def test_tril_triu_indices(row, col, offset):
    for fn in [torch.tril_indices, torch.triu_indices]:
        expected = fn(row, col, offset)
        assert_same(fn(row, col, offset, device="tpu"), expected)
        assert_same(fn(row, col, offset, dtype=torch.int32, device="tpu"), expected.int())


def test_tri_indices_index_a_matrix():
    x = rand(5, 5)
    i = torch.triu_indices(5, 5, 1)
    check(lambda x: x[tuple(torch.triu_indices(5, 5, 1, device=x.device))], x)
    assert i.shape == (2, 10)



def test_out_of_range_indices_raise():
    x = torch.randn(3, 4, device="tpu")
    out_of_range = r"index_select.*(index 12 is out of range|an index was out of range) for dim 0 of size 12"
    with pytest.raises(RuntimeError, match=out_of_range):
        torch.take(x, torch.tensor([12], device="tpu")).cpu()
    next_op_works()
    with pytest.raises(RuntimeError, match=r"scatter.*out of range for dim 0 of size 3"):
        x.index_copy(0, torch.tensor([5], device="tpu"), torch.ones(1, 4, device="tpu")).cpu()
    next_op_works()
    check(lambda x: torch.take(x, torch.tensor([11, -12], device=x.device)), rand(3, 4))


def test_zero_dim_gather_scatter_and_the_backwards_that_use_them():
    # A 0-d tensor is one element along dim 0: gather/scatter on it, and the
    # backward of max/min/median with a dim on a 0-d input (a scatter into a
    # 0-d gradient), run on the device as on the CPU.
    x, i, src = torch.tensor(3.5), torch.tensor(0), torch.tensor(-2.0)
    check(lambda t, k: t.gather(0, k), x, i)
    check(lambda t, k, s: t.scatter(0, k, s), x, i, src)
    check(lambda t, k, s: t.scatter_add(0, k, s), x, i, src)
    for name in ("max", "min", "median", "nanmedian"):
        check_grad(lambda t, name=name: getattr(torch, name)(t, 0).values * 3.0, torch.tensor(1.25))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_scatter_reduce_matches_the_cpu(reduce, include_self, dtype):
    g = torch.Generator().manual_seed(3)
    if dtype.is_floating_point:
        x, src = torch.randn(5, 4, generator=g).to(dtype), torch.randn(7, 4, generator=g).to(dtype)
    else:
        x, src = torch.randint(-6, 6, (5, 4), generator=g), torch.randint(-6, 6, (7, 4), generator=g)
    index = torch.randint(0, 5, (7, 4), generator=g)  # repeats: several land on one place, some on none
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {}
    check(lambda t, i, s: t.scatter_reduce(0, i, s, reduce, include_self=include_self), x, index, src, **tol)
    check(lambda t, i, s: t.scatter_reduce(1, i, s, reduce, include_self=include_self), x.T.contiguous(),
          index[:4].T.contiguous(), src[:4].T.contiguous(), **tol)
    check(lambda t, i, s: t.clone().scatter_reduce_(0, i, s, reduce, include_self=include_self), x, index, src, **tol)


def test_scatter_reduce_nans_win_amax_and_amin_and_gradients_match_the_cpu():
    nan = float("nan")
    x = torch.tensor([1.0, nan, 3.0, -1.0])
    src = torch.tensor([5.0, nan, 0.5, 2.0, -7.0])
    index = torch.tensor([0, 0, 2, 3, 3])
    for reduce in ("amax", "amin", "sum", "mean", "prod"):
        for include_self in (True, False):
            check(lambda t, i, s: t.scatter_reduce(0, i, s, reduce, include_self=include_self), x, index, src)
    index2 = torch.tensor([[0, 1, 1], [2, 1, 0]])
    for reduce in ("sum", "mean", "amax"):
        check_grad(lambda t, i, s, reduce=reduce: t.scatter_reduce(0, i, s, reduce), rand(3, 3), index2, rand(2, 3))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_matches_the_cpu(reduce, include_self):
    x, source = rand(4, 5), rand(4, 3)
    check(lambda t, i, s: t.index_reduce(1, i, s, reduce, include_self=include_self), x, torch.tensor([0, 3, 3]), source)
    check(lambda t, i, s: t.clone().index_reduce_(0, i, s, reduce, include_self=include_self),
          x, torch.tensor([1, 1, 2]), rand(3, 5))
