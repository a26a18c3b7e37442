"""Fractional max pooling (F.fractional_max_pool2d/3d) on the device: with the
caller's random samples the windows, maxima, indices and gradients are the
CPU's exactly; with samples drawn from tpu's generator, nn.FractionalMaxPool2d
trains with no fallback."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from helpers import check, check_grad, next_op_works, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


@pytest.mark.parametrize("kernel,output", [((3, 2), (5, 6)), ((2, 2), (8, 7)), ((1, 4), (11, 1)), ((4, 3), (2, 2))])
def test_fractional_max_pool2d_matches_the_cpu_with_gradients(kernel, output):
    torch.manual_seed(0)
    x, samples = rand(2, 3, 11, 9), torch.rand(2, 3, 2)
    check(lambda x, s: F.fractional_max_pool2d(x, kernel, output_size=output, return_indices=True,
                                              _random_samples=s), x, samples)
    check_grad(lambda x: F.fractional_max_pool2d(x, kernel, output_size=output,
                                                 _random_samples=samples.to(x.device)), x)
    # Unbatched (C, H, W), and by output_ratio.
    check(lambda x, s: F.fractional_max_pool2d(x, kernel, output_size=output, _random_samples=s), x[0], samples[:1])
    check(lambda x, s: F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5), return_indices=True, _random_samples=s),
          x, samples)


def test_fractional_max_pool3d_matches_the_cpu_with_gradients():
    torch.manual_seed(1)
    x, samples = rand(2, 2, 7, 8, 9), torch.rand(2, 2, 3)
    check(lambda x, s: F.fractional_max_pool3d(x, (2, 3, 2), output_size=(4, 5, 6), return_indices=True,
                                              _random_samples=s), x, samples)
    check_grad(lambda x: F.fractional_max_pool3d(x, (2, 3, 2), output_size=(4, 5, 6),
                                                 _random_samples=samples.to(x.device)), x)
    check(lambda x, s: F.fractional_max_pool3d(x, 2, output_size=(3, 3, 3), _random_samples=s), x[1], samples[:1])


def test_the_module_trains_on_the_device_and_pools_real_windows():
    torch.manual_seed(2)
    pool = nn.FractionalMaxPool2d(3, output_ratio=0.6)
    x = torch.randn(4, 2, 10, 10, device="tpu", requires_grad=True)
    y, indices = F.fractional_max_pool2d(x, 3, output_ratio=(0.6, 0.6), return_indices=True)
    assert y.shape == (4, 2, 6, 6) and pool(x).shape == (4, 2, 6, 6)
    # Each output is the input element its index names.
    flat = x.detach().cpu().flatten(2)
    assert torch.equal(y.detach().cpu(), flat.gather(2, indices.cpu().flatten(2)).reshape(y.shape))
    y.sum().backward()
    assert x.grad.sum().item() == y.numel()


def test_bad_sizes_are_named_and_the_next_op_works():
    x, samples = torch.randn(1, 1, 5, 7, device="tpu"), torch.rand(1, 1, 2, device="tpu")
    with pytest.raises(RuntimeError, match="pool height 4 too large relative to input height 5"):
        F.fractional_max_pool2d(x, 4, output_size=(3, 3), _random_samples=samples)
    with pytest.raises(RuntimeError, match="fractional_max_pool2d"):
        torch.ops.aten.fractional_max_pool2d(x, [2, 2], [2, 2], torch.rand(1, 1, 3, device="tpu"))
    next_op_works()
