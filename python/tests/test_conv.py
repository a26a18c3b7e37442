"""Convolutions, pooling and batch norm against PyTorch CPU (values and
gradients), in every mode."""

import pytest
import torch
import torch.nn.functional as F
from helpers import check, check_grad, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")

TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "kw",
    [dict(), dict(stride=2, padding=1), dict(padding=2, dilation=2), dict(stride=(2, 1), padding=(0, 1), groups=2)],
    ids=str,
)
def test_conv2d(kw):
    x, w, b = rand(2, 4, 9, 8), rand(6, 4 // kw.get("groups", 1), 3, 3), rand(6)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, **kw), x, w, b, **TOL)


def test_conv1d_depthwise_and_3d():
    check_grad(lambda x, w: F.conv1d(x, w, padding=1, groups=3), rand(2, 3, 10), rand(3, 1, 3), **TOL)
    check_grad(lambda x, w, b: F.conv3d(x, w, b, stride=2), rand(1, 2, 5, 6, 5), rand(3, 2, 2, 2, 2), rand(3), **TOL)
    check(lambda x, w: F.conv2d(x, w), rand(3, 7, 7), rand(2, 3, 3, 3), **TOL)  # unbatched


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1), dict(stride=2, groups=2)], ids=str)
def test_conv_transpose2d(kw):
    x, w, b = rand(2, 4, 5, 5), rand(4, 6 // kw.get("groups", 1), 3, 3), rand(6)
    check_grad(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), x, w, b, **TOL)


@pytest.mark.parametrize(
    "kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=3, stride=2, ceil_mode=True)],
    ids=str,
)
def test_max_pool2d(kw):
    check_grad(lambda x: F.max_pool2d(x, **kw), rand(2, 3, 9, 8))
    check(lambda x: tuple(F.max_pool2d(x, return_indices=True, **kw)), rand(2, 3, 9, 8))


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=2),
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
        dict(kernel_size=3, stride=2, ceil_mode=True),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        dict(kernel_size=2, divisor_override=3),
    ],
    ids=str,
)
def test_avg_pool2d(kw):
    check_grad(lambda x: F.avg_pool2d(x, **kw), rand(2, 3, 9, 8), **TOL)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=3, stride=2, ceil_mode=True, divisor_override=4),
        dict(kernel_size=(3, 2), stride=(2, 3), padding=1, ceil_mode=True, count_include_pad=False, divisor_override=5),
    ],
    ids=str,
)
def test_avg_pool2d_backward_ceil_mode_with_divisor_override(kw):
    # The runtime's avg_pool_backward: overhanging ceil-mode windows, each
    # divided by the override; also unbatched.
    check_grad(lambda x: F.avg_pool2d(x, **kw), rand(2, 3, 8, 9), **TOL)
    check_grad(lambda x: F.avg_pool2d(x, **kw), rand(3, 7, 8), **TOL)


def test_adaptive_avg_pool_to_one():
    check_grad(lambda x: F.adaptive_avg_pool2d(x, 1), rand(2, 3, 5, 4), **TOL)


def test_batch_norm_training_updates_running_stats():
    x, w, b = rand(4, 3, 5, 5), rand(3), rand(3)
    rm, rv = rand(3), rand(3).abs() + 0.5

    def f(x, w, b, rm, rv):
        return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2, eps=1e-5)

    check(f, x, w, b, rm, rv, **TOL)  # compares the running stats after the call too
    check_grad(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, w, b, **TOL)


def test_batch_norm_eval_and_1d():
    x, w, b = rand(4, 3, 5), rand(3), rand(3)
    rm, rv = rand(3), rand(3).abs() + 0.5
    check_grad(lambda x, w, b: F.batch_norm(x, rm.to(x.device), rv.to(x.device), w, b, training=False), x, w, b, **TOL)
    check_grad(lambda x: F.batch_norm(x.transpose(1, 2), None, None, training=True), rand(4, 6, 3), **TOL)


@pytest.mark.parametrize("shape,out", [
    ((2, 3, 8, 6), (4, 3)),     # sizes divide: average pooling
    ((2, 3, 7, 5), (3, 2)),     # overlapping, uneven bins
    ((3, 10, 9), (4, 4)),       # no batch dim
    ((1, 2, 5, 5), (7, 6)),     # more outputs than inputs
    ((1, 2, 6, 4), (None, 3)),  # None keeps the input size
])
def test_adaptive_avg_pool2d_matches_the_cpu_with_gradients(shape, out):
    check(lambda x: F.adaptive_avg_pool2d(x, out), rand(*shape))
    check_grad(lambda x: F.adaptive_avg_pool2d(x, out), rand(*shape))


def test_adaptive_avg_pool2d_in_bf16_and_its_errors():
    check(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), rand(1, 2, 7, 5, dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="Expected 3D or 4D tensor"):
        F.adaptive_avg_pool2d(torch.ones(2, 2, 2, 2, 2, device="tpu"), (2, 2))


@pytest.mark.parametrize("pool", [
    lambda t: F.avg_pool3d(t, 2),
    lambda t: F.avg_pool3d(t, 3, stride=2, padding=1, count_include_pad=False),
    lambda t: F.avg_pool3d(t, 2, ceil_mode=True, divisor_override=3),
    lambda t: F.max_pool3d(t, 2),
    lambda t: F.max_pool3d(t, 2, stride=1, padding=1),
    lambda t: F.max_pool3d(t, (2, 3, 2), ceil_mode=True, dilation=(1, 1, 2)),
], ids=["avg", "avg_padded", "avg_ceil_divisor", "max", "max_padded", "max_ceil_dilated"])
def test_3d_pooling_matches_the_cpu_with_gradients(pool):
    check(pool, rand(2, 3, 5, 6, 7))
    check(pool, rand(3, 5, 6, 7))  # no batch dim
    check_grad(pool, rand(2, 3, 5, 6, 7))


def test_max_pool3d_indices_match_the_cpu():
    check(lambda t: F.max_pool3d(t, 2, stride=(1, 2, 2), return_indices=True), rand(2, 2, 4, 6, 6))


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_legit_forms_match_the_cpu(training):
    """What export and decompositions call: native batch norm with running
    statistics updated in place, or without any (training only: eval
    needs statistics)."""
    x, w, b = rand(4, 3, 5), rand(3), rand(3)
    mean, var = rand(3), rand(3).abs() + 0.5

    def with_stats(x, w, b, mean, var):
        return torch.ops.aten._native_batch_norm_legit(x, w, b, mean, var, training, 0.1, 1e-5)

    check(with_stats, x, w, b, mean, var)  # also compares the updated statistics
    if training:
        check(lambda x, w, b: torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5), x, w, b)


UNFOLD_ARGS = [
    dict(kernel_size=3),
    dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(2, 1)),
    dict(kernel_size=1, stride=2),
]


@pytest.mark.parametrize("kw", UNFOLD_ARGS, ids=["plain", "dilated_padded_strided", "one_by_one"])
def test_unfold_and_fold_match_the_cpu_with_gradients(kw):
    x = rand(2, 3, 7, 6)
    x[0, 0, 1, 1] = float("nan")  # moved, never multiplied: it stays in its own blocks
    check(lambda t: F.unfold(t, **kw), x)
    check(lambda t: F.unfold(t, **kw), rand(3, 7, 6))  # no batch dim
    check_grad(lambda t: F.unfold(t, **kw), rand(2, 3, 7, 6))
    cols = F.unfold(rand(2, 3, 7, 6), **kw)
    check(lambda c: F.fold(c, (7, 6), **kw), cols)
    check_grad(lambda c: F.fold(c, (7, 6), **kw), cols)
    # An empty batch.
    check(lambda t: F.unfold(t, **kw), rand(0, 3, 7, 6))
    check(lambda c: F.fold(c, (7, 6), **kw), cols[:0])


def test_unfold_and_fold_refuse_what_the_cpu_refuses():
    with pytest.raises(RuntimeError, match="must be at least one"):
        F.unfold(torch.ones(1, 1, 2, 2, device="tpu"), kernel_size=3)
    with pytest.raises(RuntimeError, match="calculated number of sliding blocks"):
        F.fold(torch.ones(1, 9, 5, device="tpu"), (4, 4), kernel_size=3)


@pytest.mark.parametrize("shape,out", [
    ((2, 3, 8, 6), (4, 3)),
    ((2, 3, 7, 5), (3, 2)),
    ((3, 8, 6), (4, 3)),
    ((1, 2, 5, 5), (7, 6)),
])
def test_adaptive_max_pool2d_matches_the_cpu_with_indices_and_gradients(shape, out):
    check(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), rand(*shape))
    check_grad(lambda x: F.adaptive_max_pool2d(x, out), rand(*shape))


@pytest.mark.parametrize("shape,out", [
    ((2, 3, 4, 8, 6), (2, 4, 3)),  # sizes divide
    ((1, 2, 5, 7, 5), (3, 3, 2)),  # overlapping, uneven bins
    ((2, 6, 5, 4), (4, 2, 3)),     # no batch dim
    ((1, 1, 3, 2, 2), (4, 3, 5)),  # more outputs than inputs
])
def test_adaptive_pool3d_matches_the_cpu_with_indices_and_gradients(shape, out):
    check(lambda x: F.adaptive_avg_pool3d(x, out), rand(*shape))
    check_grad(lambda x: F.adaptive_avg_pool3d(x, out), rand(*shape))
    check(lambda x: F.adaptive_max_pool3d(x, out, return_indices=True), rand(*shape))
    check_grad(lambda x: F.adaptive_max_pool3d(x, out), rand(*shape))
    with pytest.raises(RuntimeError, match="Expected 4D or 5D tensor"):
        torch._C._nn.adaptive_avg_pool3d(torch.ones(2, 2, 2, 2, 2, 2, device="tpu"), out)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_conv_transpose_with_an_output_padding_past_the_stride(dims):
    # output_padding may reach the dilation when it is past the stride: the
    # forward convolution of such an output reads more outputs than the input
    # has (zero gradient), and the input's gradient is the leading part.
    conv = [F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][dims - 1]
    stride, padding, output_padding, dilation = (3, 2, 2)[:dims], (1, 2, 0)[:dims], (2, 3, 1)[:dims], (4, 4, 3)[:dims]
    x = rand(2, 2, *(4,) * dims)
    w = rand(2, 2, *(4, 5, 3)[:dims])
    b = rand(4)
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=2, dilation=dilation)
    check(lambda x, w, b: conv(x, w, b, **kw), x, w, b, rtol=1e-4, atol=1e-4)
    check_grad(lambda x, w, b: conv(x, w, b, **kw), x, w, b, rtol=1e-4, atol=1e-4)
