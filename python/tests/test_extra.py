"""The extra kernels (python/csrc/ops_extra.cpp, ops_extra2.cpp): regression
losses, reflection/replication padding, nearest/bilinear upsampling, trace,
index_copy, take/put, tril/triu_indices, median, kthvalue and mode, with
their gradients, against PyTorch CPU in every mode."""

import copy

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_same, check, check_grad, rand, tpu

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")

REDUCTIONS = ["mean", "sum", "none"]


def next_op_works():
    x = torch.arange(4.0, device="tpu")
    assert (x * 2).sum().item() == 12.0


# ---------------------------------------------------------------- losses ----


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)])
def test_smooth_l1_and_huber(reduction, shape):
    x, y = rand(*shape) * 2, rand(*shape) * 2
    for beta in [1.0, 0.5, 0.0]:
        check_grad(lambda x, y: F.smooth_l1_loss(x, y, reduction=reduction, beta=beta), x, y)
    for delta in [1.0, 0.3, 2.5]:
        check_grad(lambda x, y: F.huber_loss(x, y, reduction=reduction, delta=delta), x, y)


def test_smooth_l1_and_huber_edges():
    # Differences exactly at 0 and at +-beta take the CPU's side of each branch.
    x = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    y = torch.zeros(6)
    for beta in [0.0, 0.5]:
        check_grad(lambda x: F.smooth_l1_loss(x, y.to(x.device), reduction="sum", beta=beta), x)
        check_grad(lambda x: F.huber_loss(x, y.to(x.device), reduction="sum", delta=beta or 1.0), x)
    # Non-contiguous inputs, a broadcast target, float64 and bfloat16.
    a, b = rand(6, 4).t(), rand(4, 1)
    check(lambda a, b: F.smooth_l1_loss(a, b.expand(4, 6), reduction="none"), a, b)
    check_grad(lambda a: F.huber_loss(a[:, ::2], torch.ones_like(a[:, ::2])), a)
    check(lambda a, b: F.smooth_l1_loss(a, b), rand(3, 4, dtype=torch.float64), rand(3, 4, dtype=torch.float64))
    check(lambda a, b: F.huber_loss(a, b, reduction="sum"), rand(3, 4, dtype=torch.bfloat16),
          rand(3, 4, dtype=torch.bfloat16))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted):
    p = rand(4, 5, low=0.02, high=0.98)
    t = rand(4, 5, low=0.0, high=1.0)
    w = rand(5, low=0.5, high=2.0)
    fn = lambda p, t: F.binary_cross_entropy(p, t, weight=w.to(p.device) if weighted else None,  # noqa: E731
                                             reduction=reduction)
    check_grad(fn, p, t)
    # Probabilities of exactly 0 and 1: each log is clamped at -100.
    edge = torch.tensor([0.0, 1e-30, 0.5, 1.0, 1.0, 0.0])
    target = torch.tensor([1.0, 0.0, 0.3, 0.0, 1.0, 0.0])
    check(lambda p, t: F.binary_cross_entropy(p, t, reduction=reduction), edge, target)
    check(lambda p, t: torch.ops.aten.binary_cross_entropy_backward(torch.ones_like(p), p, t), edge, target)
    # A non-contiguous input.
    check_grad(lambda p, t: F.binary_cross_entropy(p.t(), t.t(), reduction=reduction), p, t)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_composite_losses_stay_on_tpu(reduction):
    x, y = rand(3, 5), rand(3, 5)
    pos = rand(5, low=0.5, high=2.0)
    check_grad(lambda x, y: F.binary_cross_entropy_with_logits(x, torch.sigmoid(y), reduction=reduction), x, y)
    check_grad(lambda x, y: F.binary_cross_entropy_with_logits(x, torch.sigmoid(y), pos_weight=pos.to(x.device),
                                                               reduction=reduction), x, y)
    check_grad(lambda x, y: F.l1_loss(x, y, reduction=reduction), x, y)
    kl = "batchmean" if reduction == "mean" else reduction
    check_grad(lambda x, y: F.kl_div(F.log_softmax(x, 1), F.softmax(y, 1), reduction=kl), x, y)
    check_grad(lambda x, y: F.kl_div(F.log_softmax(x, 1), F.log_softmax(y, 1), reduction=kl, log_target=True), x, y)


# --------------------------------------------------------------- padding ----

PADS_1D = [(1, 1), (2, 0), (0, 3), (0, 0), (-1, 2)]
PADS_2D = [(1, 1, 1, 1), (2, 0, 1, 3), (0, 0, 0, 0), (0, 2, 0, 0), (-1, 1, 2, -1)]


@pytest.mark.parametrize("padmode", ["reflect", "replicate"])
@pytest.mark.parametrize("pad", PADS_1D)
def test_pad1d(padmode, pad):
    for shape in [(3, 5), (2, 3, 6)]:
        x = rand(*shape)
        check_grad(lambda x: F.pad(x, pad, mode=padmode), x)
    x = rand(2, 6, 4).transpose(1, 2)  # non-contiguous
    check_grad(lambda x: F.pad(x, pad, mode=padmode), x)


@pytest.mark.parametrize("padmode", ["reflect", "replicate"])
@pytest.mark.parametrize("pad", PADS_2D)
def test_pad2d(padmode, pad):
    for shape in [(3, 4, 5), (2, 3, 4, 6)]:
        check_grad(lambda x: F.pad(x, pad, mode=padmode), rand(*shape))
    x = rand(2, 5, 4, 3).permute(0, 3, 2, 1)  # non-contiguous
    check_grad(lambda x: F.pad(x, pad, mode=padmode), x)
    check(lambda x: F.pad(x, pad, mode=padmode), rand(2, 3, 4, 5, dtype=torch.bfloat16))
    check(lambda x: F.pad(x, pad, mode=padmode), rand(1, 4, 5, dtype=torch.int64))


@pytest.mark.parametrize("padmode", ["reflect", "replicate"])
def test_pad3d_and_modules(padmode):
    x = rand(2, 2, 3, 4, 5)
    check_grad(lambda x: F.pad(x, (1, 2, 0, 1, 2, 1), mode=padmode), x)
    check_grad(lambda x: F.pad(x, (1, 1, 1, 1, 1, 1), mode=padmode), x[0])
    cls = torch.nn.ReflectionPad2d if padmode == "reflect" else torch.nn.ReplicationPad2d
    check_grad(cls((3, 0, 1, 2)), rand(1, 2, 4, 5))
    # The largest reflection: padding of size - 1 on both sides.
    check_grad(lambda x: F.pad(x, (4, 4, 3, 3), mode=padmode), rand(1, 2, 4, 5))


def test_pad_errors_name_the_op_and_shapes():
    x = torch.randn(1, 1, 2, 2, device="tpu")
    with pytest.raises(RuntimeError, match=r"reflection_pad2d.*Padding size should be less than the corresponding "
                                           r"input dimension, but got: padding \(3, 3\) at dimension 3 of input "
                                           r"\[1, 1, 2, 2\]"):
        F.pad(x, (3, 3, 3, 3), mode="reflect")
    next_op_works()
    with pytest.raises(RuntimeError, match=r"Padding size should be less than .* padding \(3, 3\) at dimension 1 "
                                           r"of input \[1, 2\]"):
        F.pad(torch.randn(1, 2, device="tpu"), (3, 3), mode="reflect")
    next_op_works()
    with pytest.raises(RuntimeError, match=r"Expected 3D or 4D .* but got: \[1, 1, 0, 2\]"):
        F.pad(torch.randn(1, 1, 0, 2, device="tpu"), (1, 1, 1, 1), mode="reflect")
    with pytest.raises(RuntimeError, match=r"-1"):
        F.pad(x, (-3, 0, 0, 0), mode="replicate")
    next_op_works()
    check_grad(lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), rand(1, 1, 2, 2))


# ------------------------------------------------------------ upsampling ----

NEAREST = [
    dict(scale_factor=2),
    dict(scale_factor=3),
    dict(scale_factor=1),
    dict(scale_factor=1.5),
    dict(scale_factor=(0.5, 2.7)),
    dict(size=(7, 3)),
    dict(size=(4, 5)),
    dict(size=(1, 11)),
    dict(scale_factor=1.7, recompute_scale_factor=True),
]


@pytest.mark.parametrize("kw", NEAREST, ids=str)
@pytest.mark.parametrize("interp", ["nearest", "nearest-exact"])
def test_upsample_nearest(kw, interp):
    x = rand(2, 3, 4, 5)
    check_grad(lambda x: F.interpolate(x, mode=interp, **kw), x)
    check_grad(lambda x: F.interpolate(x, mode=interp, **kw), rand(2, 5, 4, 3).transpose(1, 3))
    check(lambda x: F.interpolate(x, mode=interp, **kw), rand(2, 2, 4, 5, dtype=torch.uint8))


BILINEAR = [
    dict(scale_factor=2),
    dict(scale_factor=1),
    dict(scale_factor=1.5),
    dict(scale_factor=(0.5, 2.7)),
    dict(size=(7, 3)),
    dict(size=(1, 1)),
    dict(size=(9, 13)),
    dict(scale_factor=1.7, recompute_scale_factor=True),
]


@pytest.mark.parametrize("kw", BILINEAR, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
def test_upsample_bilinear(kw, align_corners):
    x = rand(2, 3, 4, 5)
    fn = lambda x: F.interpolate(x, mode="bilinear", align_corners=align_corners, **kw)  # noqa: E731
    check_grad(fn, x)
    check_grad(fn, rand(2, 5, 4, 3).transpose(1, 3))
    check(fn, rand(1, 2, 4, 5, dtype=torch.float64))
    check(fn, rand(1, 2, 4, 5, dtype=torch.bfloat16))


@pytest.mark.parametrize("interp", ["nearest", "nearest-exact", "linear", "linear-aligned"])
@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(scale_factor=1.5), dict(size=3), dict(size=1),
                                dict(size=6)], ids=str)
def test_upsample_1d(interp, kw):
    extra = dict(mode="linear", align_corners=True) if interp == "linear-aligned" else dict(mode=interp)
    fn = lambda x: F.interpolate(x, **kw, **extra)  # noqa: E731
    check_grad(fn, rand(2, 3, 6))
    check_grad(fn, rand(6, 3, 2).transpose(0, 2))


@pytest.mark.parametrize("interp", ["nearest", "nearest-exact", "trilinear", "trilinear-aligned"])
@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(scale_factor=(1.5, 1, 0.7)), dict(size=(2, 5, 1))],
                         ids=str)
def test_upsample_3d(interp, kw):
    extra = dict(mode="trilinear", align_corners=True) if interp == "trilinear-aligned" else dict(mode=interp)
    check_grad(lambda x: F.interpolate(x, **kw, **extra), rand(1, 2, 3, 4, 5))


def test_padding_and_upsampling_in_a_network():
    net = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"),
                              torch.nn.Upsample(scale_factor=2, mode="bilinear"),
                              torch.nn.ReplicationPad2d(1), torch.nn.Upsample(size=(11, 9)))
    tnet = copy.deepcopy(net).to("tpu")
    x = rand(2, 2, 4, 4)
    y, ty = net(x), tnet(tpu(x))
    assert_same(ty, y.detach(), 1e-4, 1e-4)
    g = torch.randn_like(y)
    y.backward(g)
    ty.backward(tpu(g))
    for p, tp in zip(net.parameters(), tnet.parameters()):
        assert_same(tp.grad, p.grad, 1e-4, 1e-4, "parameter grad")


# ------------------------------------------------------ trace, index ops ----


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


# ------------------------------------------------------ order statistics ----


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
    with pytest.raises(RuntimeError, match=r"kthvalue\(\): selected number k = 5 out of range for dimension 1 of "
                                           r"size 4 \(input of shape \[3, 4\]\)"):
        torch.kthvalue(x, 5, 1)
    next_op_works()
    with pytest.raises(RuntimeError, match=r"kthvalue\(\): selected number k = 0 out of range"):
        torch.kthvalue(x, 0)
    with pytest.raises(RuntimeError, match=r"median\(\): cannot reduce dim 1 of size 0 \(input of shape \[3, 0\]\)"):
        torch.median(torch.ones(3, 0, device="tpu"), 1)
    with pytest.raises(RuntimeError, match=r"trace: expected a matrix, but got tensor with dim 3"):
        torch.trace(torch.ones(2, 2, 2, device="tpu"))
    with pytest.raises(RuntimeError, match=r"triu_indices: row must be non-negative, got -1"):
        torch.triu_indices(-1, 3, device="tpu")
    next_op_works()
    check(lambda x: torch.kthvalue(x, 2, 1), rand(3, 4))


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
