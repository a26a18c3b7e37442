"""Reflection/replication padding and nearest/(bi/tri)linear upsampling, with
their gradients, against PyTorch CPU in every mode
(python/csrc/ops_resample.cpp)."""

import copy

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_same, check, check_grad, next_op_works, rand, tpu

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


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


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_the_cpu_with_gradients(interpolation, padding, align_corners):
    kw = dict(mode=interpolation, padding_mode=padding, align_corners=align_corners)
    image = rand(2, 3, 5, 7)
    # Points inside, on the edges and well outside [-1, 1] (padding's work).
    grid = rand(2, 4, 6, 2) * 1.6
    grid[0, 0, 0] = torch.tensor([1.0, -1.0])
    grid[1, 1, 1] = torch.tensor([3.7, -2.9])
    check(lambda x, g: F.grid_sample(x, g, **kw), image, grid, rtol=1e-4, atol=1e-5)
    if interpolation != "nearest":  # nearest's grid gradient is zero on the CPU too
        check_grad(lambda x, g: F.grid_sample(x, g, **kw), image, grid, rtol=1e-3, atol=1e-4)
    else:
        check_grad(lambda x: F.grid_sample(x, grid.to(x.device), **kw), image, rtol=1e-3, atol=1e-4)
    if interpolation != "bicubic":
        volume, grid3 = rand(1, 2, 3, 4, 5), rand(1, 2, 3, 4, 3) * 1.6
        check(lambda x, g: F.grid_sample(x, g, **kw), volume, grid3, rtol=1e-4, atol=1e-5)
        check_grad(lambda x: F.grid_sample(x, grid3.to(x.device), **kw), volume, rtol=1e-3, atol=1e-4)


def test_affine_grid_and_grid_sample_warp_like_the_cpu():
    # Away from sample points on pixel centres, where bilinear's gradient
    # jumps (and a last-bit difference in the grid could pick either side).
    theta = torch.tensor([[[0.873, -0.231, 0.117], [0.311, 1.071, -0.193]]])
    image = rand(1, 3, 7, 9)
    warp = lambda t, x: F.grid_sample(x, F.affine_grid(t, list(x.shape), align_corners=False), align_corners=False)
    check(warp, theta, image, rtol=1e-4, atol=1e-5)
    check_grad(warp, theta, image, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("size,scale", [((9, 11), None), ((3, 4), None), (None, 1.7), (None, 0.45)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_bicubic_and_antialiased_resizing_match_the_cpu_with_gradients(size, scale, align_corners):
    x = rand(2, 3, 6, 7)
    for kwargs in [dict(mode="bicubic"), dict(mode="bilinear", antialias=True)]:
        fn = lambda t: F.interpolate(t, size=size, scale_factor=scale, align_corners=align_corners, **kwargs)
        check(fn, x, rtol=1e-4, atol=1e-5)
        check_grad(fn, x, rtol=1e-4, atol=1e-5)
