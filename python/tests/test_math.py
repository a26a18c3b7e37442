"""The second set of math ops (python/csrc/ops_math.cpp): more unary and
binary math, activations with their backwards, flip/roll, eye/linspace, prod,
and the fused LSTM/GRU cells, against PyTorch CPU in every mode."""

import copy

import pytest
import torch
import torch.nn.functional as F
from helpers import check, check_grad, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")

UNARY = ["exp2", "log2", "log10", "expm1", "tan", "sinh", "cosh", "atan", "trunc", "frac", "signbit"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_unary(name, dtype):
    fn = getattr(torch, name)
    low, high = (0.1, 4.0) if name.startswith("log") else (-1.2, 1.2)
    x = rand(3, 7, dtype=dtype, low=low, high=high)
    check(fn, x)
    if name != "signbit":
        check(lambda x: getattr(x.clone(), name + "_")(), x)


def test_inverse_trig_and_expm1_precision():
    x = rand(11, low=-0.99, high=0.99)
    check(torch.asin, x)
    check(torch.acos, x)
    # expm1 keeps its precision near zero, where exp(x) - 1 loses it.
    tiny = torch.tensor([1e-7, -3e-8, 1e-10, 2.5e-6], dtype=torch.float32)
    check(torch.expm1, tiny, rtol=1e-5, atol=0)
    check(torch.expm1, tiny.double(), rtol=1e-12, atol=0)
    check_grad(torch.tan, rand(5, low=-1.0, high=1.0))
    check_grad(torch.atan, rand(5))
    check_grad(torch.expm1, rand(5))


def test_nan_to_num_logit_xlogy():
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -2.5])
    check(torch.nan_to_num, x)
    check(lambda x: torch.nan_to_num(x, nan=0.5, posinf=9.0, neginf=-9.0), x)
    p = rand(8, low=0.01, high=0.99)
    check(torch.logit, p)
    check(lambda p: torch.logit(p, eps=0.05), torch.tensor([0.0, 0.01, 0.5, 0.99, 1.0]))
    check_grad(torch.logit, p)
    a = torch.tensor([0.0, 0.0, 1.5, 2.0, 3.0])
    b = torch.tensor([0.0, float("nan"), 2.0, 0.5, 1.0])
    check(torch.xlogy, a, b)
    check(torch.special.xlogy, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32])
def test_fmod_floor_divide_hypot(dtype):
    a = rand(4, 5, dtype=dtype) * 3
    b = rand(4, 5, dtype=dtype)
    b[b == 0] = 3
    check(torch.fmod, a, b)
    check(lambda a: torch.fmod(a, 4), a)
    check(torch.floor_divide, a, b)
    check(lambda a: a // 4, a)
    if dtype.is_floating_point:
        check(torch.hypot, a, b)
        check(lambda a: torch.fmod(a, 2.5), a)


def test_signbit_of_negative_zero_and_nan_to_num_of_every_dtype():
    check(torch.signbit, torch.tensor([-0.0, 0.0, -1.0, float("inf"), float("-inf")]))
    check(torch.signbit, torch.tensor([-3, 0, 4]))
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        check(torch.nan_to_num, torch.tensor([1.5, float("nan"), float("inf"), -float("inf")], dtype=dtype))
    check(lambda x: torch.nan_to_num(x, neginf=-1.0), torch.tensor([float("nan"), float("inf"), -float("inf")]))
    check(torch.nan_to_num, torch.tensor([-3, 7]))
    check(lambda x: torch.logit(x), torch.tensor([0, 1], dtype=torch.int64))


def test_fmod_of_large_integers_is_exact_and_xlogy_takes_a_number_first():
    big = torch.tensor([2**60 + 7, -(2**60 + 7), 2**53 + 1, -5], dtype=torch.int64)
    check(lambda a: torch.fmod(a, 3), big)  # went through float32 division: wrong past 2^24
    check(torch.fmod, big, torch.tensor([3, -3, 2, 3]))
    y = torch.tensor([0.5, 1.0, float("nan"), 4.0])
    check(lambda y: torch.xlogy(2.0, y), y)
    check(lambda y: torch.special.xlogy(0, y), y)
    check(lambda y: torch.hypot(y, torch.tensor(3.0)), y)


def test_clamp_with_tensor_bounds():
    x, lo, hi = rand(4, 5), rand(4, 5) - 1, rand(5) + 1
    check(torch.clamp, x, lo, hi)
    check(lambda x, lo: torch.clamp(x, min=lo), x, lo)
    check(lambda x, hi: torch.clamp(x, max=hi), x, hi)
    check(torch.clamp_min, x, lo)
    check(torch.clamp_max, x, hi)
    check_grad(torch.clamp, x, lo, hi)


ACTIVATIONS = [
    lambda x: F.hardtanh(x, -0.5, 0.7),
    lambda x: F.relu6(x),
    lambda x: F.leaky_relu(x, 0.1),
    lambda x: F.elu(x),
    lambda x: F.elu(x, alpha=0.5),
    lambda x: F.selu(x),
    lambda x: F.celu(x, 1.3),
    lambda x: F.softplus(x),
    lambda x: F.softplus(x, beta=2.0, threshold=1.0),
    lambda x: F.mish(x),
    lambda x: F.hardswish(x),
    lambda x: F.hardsigmoid(x),
    lambda x: F.logsigmoid(x),
]


@pytest.mark.parametrize("i", range(len(ACTIVATIONS)))
def test_activations_forward_and_backward(i):
    fn = ACTIVATIONS[i]
    x = rand(4, 6) * 3
    check_grad(fn, x)
    check(fn, rand(3, 5, dtype=torch.bfloat16) * 3)


def test_inplace_activations():
    x = rand(4, 6) * 3
    check(lambda x: F.hardtanh(x, inplace=True), x)
    check(lambda x: F.leaky_relu(x, 0.2, inplace=True), x)
    check(lambda x: F.elu(x, inplace=True), x)
    check(lambda x: F.hardswish(x, inplace=True), x)


def test_flip_roll():
    x = rand(3, 4, 5)
    check(lambda x: torch.flip(x, [0, 2]), x)
    check(lambda x: torch.flip(x, [-1]), x)
    check(lambda x: torch.roll(x, 2, 1), x)
    check(lambda x: torch.roll(x, (-1, 7), (0, 2)), x)
    check(lambda x: torch.roll(x, 3), x)
    check(lambda x: x.transpose(0, 2).flip(0).roll(1, 1), x)
    check_grad(lambda x: torch.roll(torch.flip(x, [1]), 1, 0), x)


def test_eye_linspace():
    check(lambda d: torch.eye(4, device=d.device), torch.zeros(1))
    check(lambda d: torch.eye(3, 5, dtype=torch.int64, device=d.device), torch.zeros(1))
    check(lambda d: torch.linspace(-1, 2, 7, device=d.device), torch.zeros(1))
    for kwargs in [dict(), dict(base=2.0), dict(dtype=torch.float64), dict(base=3.0, dtype=torch.int64)]:
        check(lambda d: torch.logspace(-1, 2, 7, device=d.device, **kwargs), torch.zeros(1))
    check(lambda d: torch.logspace(0, 1, 0, device=d.device), torch.zeros(1))
    check(lambda d: torch.linspace(0, 10, 1, device=d.device), torch.zeros(1))
    check(lambda d: torch.linspace(5, 0, 6, dtype=torch.float64, device=d.device), torch.zeros(1))


def test_prod_count_nonzero():
    x = rand(3, 4, low=0.5, high=1.5)
    check(torch.prod, x)
    check(lambda x: torch.prod(x, 1), x)
    check(lambda x: torch.prod(x, 0, keepdim=True), x)
    check(torch.prod, torch.tensor([[2, 3], [4, -1]]))
    check_grad(lambda x: torch.prod(x, 1), x)
    z = rand(4, 5, dtype=torch.int64)
    check(torch.count_nonzero, z)
    check(lambda z: torch.count_nonzero(z, 1), z)
    check(lambda z: torch.count_nonzero(z, (0, 1)), z)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent_layer_trains_like_cpu(kind):
    cls = getattr(torch.nn, kind)
    cpu = cls(5, 7, num_layers=2, batch_first=True)
    dev = copy.deepcopy(cpu).to("tpu")
    x, y = rand(3, 4, 5), rand(3, 4, 7)
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1)
    for _ in range(3):
        for model, opt, dx, dy in ((cpu, opt_c, x, y), (dev, opt_d, x.to("tpu"), y.to("tpu"))):
            opt.zero_grad()
            out, _ = model(dx)
            loss = F.mse_loss(out, dy)
            loss.backward()
            opt.step()
    for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(pd.cpu(), pc.detach(), rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
def test_recurrent_cell_gradients(kind):
    cell = getattr(torch.nn, kind)(4, 6)
    names = [n for n, _ in cell.named_parameters()]
    weights = [p.detach().clone() for p in cell.parameters()]

    def run(x, h, c, *w):
        state = (h, c) if kind == "LSTMCell" else h
        out = torch.func.functional_call(cell, dict(zip(names, w)), (x, state))
        return out[0] + out[1].sin() if kind == "LSTMCell" else out

    check_grad(run, rand(3, 4), rand(3, 6), rand(3, 6), *weights, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fn", [torch.logaddexp, torch.logaddexp2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_logaddexp_matches_the_cpu_without_overflow(fn, dtype):
    inf, nan = float("inf"), float("nan")
    a = torch.tensor([[1000.0, -1000.0, 0.5, inf], [-inf, 3.0, nan, -2.0]], dtype=dtype)
    b = torch.tensor([999.0, -1001.0, -0.25, inf], dtype=dtype)
    check(fn, a, b)
    check(fn, rand(3, 4, dtype=dtype), rand(4, dtype=dtype))
    check_grad(fn, rand(3, 4), rand(3, 4))


def test_isin_matches_the_cpu():
    big = (1 << 60) + 1
    elements = torch.tensor([[big, big + 1, 5], [-3, 7, 0]])
    test = torch.tensor([[big, 7], [0, 42]])
    check(torch.isin, elements, test)
    check(lambda e, t: torch.isin(e, t, invert=True), elements, test)
    check(lambda e: torch.isin(e, 5), elements)
    check(lambda t: torch.isin(7, t), test)
    check(torch.isin, elements, torch.tensor([], dtype=torch.long))
    check(torch.isin, torch.tensor([float("nan"), 1.5, 2.0]), torch.tensor([1.5, float("nan")]))


@pytest.mark.parametrize("fn", [torch.nansum, torch.nanmean])
def test_nansum_and_nanmean_skip_nans_as_the_cpu(fn):
    x = rand(3, 4)
    x[0, 1] = x[2, 3] = float("nan")
    check(fn, x)
    check(lambda t: fn(t, dim=1), x)
    check(lambda t: fn(t, dim=0, keepdim=True), x)
    check(lambda t: fn(t, dim=1, dtype=torch.float64), x)
    if fn is torch.nansum:
        check(fn, torch.arange(6).reshape(2, 3))


# Edge values of the special functions: poles (0, negative integers), signed
# zeros, the edges of the inverse hyperbolics' domains, large arguments,
# infinities and NaN.
SPECIAL_EDGES = [0.0, -0.0, -1.0, -2.0, -2.5, -0.5, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 30.0, 171.5, -9.25,
                 float("inf"), float("-inf"), float("nan"), 1e-6, -1e-6, 0.999, -0.999, 5.0, -5.0]


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "asinh", "acosh", "atanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_special_functions_match_the_cpu_at_their_edges(name, dtype):
    fn = getattr(torch, name)
    low, high = {"acosh": (1.0, 6.0), "atanh": (-0.95, 0.95), "lgamma": (-4.0, 8.0), "digamma": (-4.0, 8.0)}.get(
        name, (-3.0, 3.0)
    )
    x = rand(4, 9, dtype=dtype, low=low, high=high)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-4, "atol": 1e-5}
    if dtype == torch.float64:
        tol = {"rtol": 1e-9, "atol": 1e-12}
    check(fn, x, **tol)
    edges = torch.tensor(SPECIAL_EDGES, dtype=dtype)
    check(fn, edges, **tol)
    check(lambda t: getattr(t.clone(), name + "_")(), x, **tol)


def test_special_functions_of_integers_are_float_and_digamma_keeps_pytorchs_poles():
    ints = torch.tensor([-3, -1, 0, 1, 2, 7, 20])
    for fn in (torch.lgamma, torch.digamma, torch.erfc, torch.asinh):
        out = check(fn, ints, rtol=1e-5, atol=1e-6)
        assert out.dtype == torch.float32
    # PyTorch: digamma(+0) = -inf, digamma(-0) = +inf, NaN at the negative integers.
    got = torch.digamma(torch.tensor([0.0, -0.0, -1.0, -4.0]).to("tpu")).cpu()
    assert got[0] == float("-inf") and got[1] == float("inf") and got[2:].isnan().all(), got


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma_matches_the_cpu(n):
    x = rand(3, 8, low=0.2, high=6.0)
    check(lambda t: torch.polygamma(n, t), x, rtol=1e-4, atol=1e-5)
    check(lambda t: torch.polygamma(n, t), x.double(), rtol=1e-8, atol=1e-10)
    check(lambda t: t.clone().polygamma_(n), x, rtol=1e-4, atol=1e-5)
    # Below zero (the reflection formula; CHLO's polygamma is for x > 0).
    negative = torch.tensor([-0.3, -1.5, -2.75, -5.1, -8.478])
    check(lambda t: torch.polygamma(n, t), negative, rtol=1e-3, atol=1e-4)
    check(lambda t: torch.polygamma(n, t), negative.double(), rtol=1e-7, atol=1e-9)
    # The poles: digamma's for n = 0, (-1)^(n+1) inf beyond (PyTorch's
    # trigamma is inf at zero only).
    poles = torch.tensor([0.0, -0.0] if n == 1 else [0.0, -0.0, -1.0, -2.0, -3.0])
    check(lambda t: torch.polygamma(n, t), poles)
    with pytest.raises(RuntimeError, match="negative n"):
        torch.polygamma(-1, x.to("tpu"))


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "asinh", "acosh", "atanh", "mvlgamma"])
def test_special_function_gradients_match_the_cpu(name):
    # lgamma's backward is digamma, digamma's is polygamma(1, x): all on the device.
    fn = (lambda t: torch.mvlgamma(t, 3)) if name == "mvlgamma" else getattr(torch, name)
    low, high = {"acosh": (1.1, 5.0), "atanh": (-0.9, 0.9), "mvlgamma": (1.5, 5.0), "digamma": (0.3, 5.0)}.get(
        name, (-2.2, 3.0)
    )
    check_grad(fn, rand(6, low=low, high=high), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_sinc_and_entr_match_the_cpu(dtype):
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    x = rand(5, 7, dtype=dtype, low=-3.0, high=3.0)
    edges = torch.tensor([0.0, -0.0, 1.0, -2.0, 0.5, 1e-4, float("inf"), float("-inf"), float("nan")], dtype=dtype)
    for fn in (torch.sinc, torch.special.entr):
        check(fn, x, **tol)
        check(fn, edges, **tol)
    check(lambda t: t.clone().sinc_(), x, **tol)
    check(torch.sinc, torch.tensor([0, 1, -3, 2]))  # integers: float results
    if dtype != torch.bfloat16:
        check_grad(torch.sinc, rand(6, dtype=dtype, low=0.1, high=2.0))
        check_grad(torch.special.entr, rand(6, dtype=dtype, low=0.1, high=2.0))


def test_xlog1py_copysign_heaviside_match_the_cpu():
    a, b = rand(4, 6, low=-2.0, high=2.0), rand(6, low=-0.9, high=3.0)
    zeros_and_nans = torch.tensor([0.0, 0.0, 1.5, -0.0, 2.0, 0.0])
    ys = torch.tensor([0.5, float("nan"), float("nan"), -0.5, float("inf"), -1.0])
    check(torch.special.xlog1py, a, b)
    check(torch.special.xlog1py, zeros_and_nans, ys)
    check(torch.special.xlog1py, a, 0.25)
    check(torch.special.xlog1py, 2.0, b)
    # copysign takes the sign bit: -0.0 is negative, integers give floats.
    signs = torch.tensor([1.0, -1.0, 0.0, -0.0, float("inf"), float("-inf")])
    mags = torch.tensor([2.0, -3.0, -0.0, 0.0, 1.0, float("nan")])
    check(torch.copysign, mags, signs)
    check(torch.copysign, a, b)
    check(torch.copysign, a, -0.0)
    check(torch.copysign, torch.tensor([3, -4, 5]), torch.tensor([-1, 2, -0]))
    check(lambda t, u: t.clone().copysign_(u), a, b)
    check_grad(torch.copysign, rand(5, low=0.5, high=2.0), rand(5, low=-1.0, high=1.0))
    # heaviside: values where x is zero; NaN gives 0; same dtypes only.
    x = torch.tensor([-1.5, 0.0, -0.0, 2.0, float("nan"), 0.0])
    check(torch.heaviside, x, torch.tensor([0.5]))
    check(torch.heaviside, x, torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]))
    check(torch.heaviside, torch.tensor([-2, 0, 3]), torch.tensor([7, 8, 9]))
    with pytest.raises(RuntimeError, match="different dtypes"):
        torch.heaviside(x.to("tpu"), torch.tensor([1], device="tpu"))


def test_rsub_fmax_fmin_and_the_shrinks_match_the_cpu():
    a, b = rand(4, 5), rand(5)
    check(lambda x, y: torch.rsub(x, y), a, b)
    check(lambda x, y: torch.rsub(x, y, alpha=2.5), a, b)
    check(lambda x: 3 - x, torch.tensor([1, 2, 3]))
    nan = float("nan")
    x = torch.tensor([1.0, nan, nan, -2.0, 0.0, float("inf")])
    y = torch.tensor([nan, 3.0, nan, -1.0, -0.0, 5.0])
    for fn in (torch.fmax, torch.fmin):
        check(fn, x, y)
        check(fn, a, b)
        check(fn, torch.tensor([3, -1, 7]), torch.tensor([2, 5, 7]))
    for fn in (F.hardshrink, F.softshrink):
        check(lambda t: fn(t, 0.5), a)
        check_grad(lambda t: fn(t, 0.5), rand(7))
    check(lambda t: F.softshrink(t, 0.0), a)


POLYNOMIALS = [
    torch.special.chebyshev_polynomial_t, torch.special.chebyshev_polynomial_u,
    torch.special.chebyshev_polynomial_v, torch.special.chebyshev_polynomial_w,
    torch.special.shifted_chebyshev_polynomial_t, torch.special.shifted_chebyshev_polynomial_u,
    torch.special.shifted_chebyshev_polynomial_v, torch.special.shifted_chebyshev_polynomial_w,
    torch.special.hermite_polynomial_h, torch.special.hermite_polynomial_he,
    torch.special.laguerre_polynomial_l, torch.special.legendre_polynomial_p,
]


@pytest.mark.parametrize("fn", POLYNOMIALS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_orthogonal_polynomials_match_the_cpu(fn, dtype):
    # The ends of the interval, inside it, outside, and 0; degrees negative,
    # 0, 1, fractional (truncated) and high enough for the closed forms.
    x = torch.tensor([-1.0, -0.7, -0.2, 0.0, 0.3, 0.5, 0.9, 1.0, 1.3, -2.0], dtype=dtype)
    n = torch.tensor([-2.0, 0.0, 1.0, 2.5, 3.0, 5.0, 7.0, 9.0, 12.0, 4.9], dtype=dtype)
    check(fn, x.unsqueeze(1), n.unsqueeze(0), rtol=1e-4, atol=1e-4)  # every x with every n
    check(fn, x, n, rtol=1e-4, atol=1e-4)
    check(lambda x: fn(x, 6), x, rtol=1e-4, atol=1e-4)  # n a number
    check(lambda x, n: fn(x, n), x, torch.tensor([2, 0, 11, 3, 1, 8, 5, 7, 9, 4]), rtol=1e-4, atol=1e-4)  # int n
    check(fn, torch.tensor(0.25, dtype=dtype), torch.tensor(10.0, dtype=dtype), rtol=1e-4, atol=1e-4)  # 0-d


BESSEL_AND_NORMAL = {
    "i0": torch.i0,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "i1e": torch.special.i1e,
    "modified_bessel_i0": torch.special.modified_bessel_i0,
    "modified_bessel_i1": torch.special.modified_bessel_i1,
    "erfcx": torch.special.erfcx,
    "log_ndtr": torch.special.log_ndtr,
    "modified_bessel_k0": torch.special.modified_bessel_k0,
    "modified_bessel_k1": torch.special.modified_bessel_k1,
    "scaled_modified_bessel_k0": torch.special.scaled_modified_bessel_k0,
    "scaled_modified_bessel_k1": torch.special.scaled_modified_bessel_k1,
    "bessel_j0": torch.special.bessel_j0,
    "bessel_j1": torch.special.bessel_j1,
    "bessel_y0": torch.special.bessel_y0,
    "bessel_y1": torch.special.bessel_y1,
    "airy_ai": torch.special.airy_ai,
    "spherical_bessel_j0": torch.special.spherical_bessel_j0,
}
# PyTorch has no derivative for these.
NO_GRADIENT = {"modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
               "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "spherical_bessel_j0", "airy_ai"}


@pytest.mark.parametrize("name", list(BESSEL_AND_NORMAL))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bessel_and_normal_functions_match_the_cpu(name, dtype):
    fn = BESSEL_AND_NORMAL[name]
    # Both sides of each method switch (40 for the Bessel functions, -20 and
    # 0 for log_ndtr, 12 for erfcx), tiny arguments, NaN; within float32's
    # range (PyTorch's float32 i0 overflows at 88.7 where I0 does not).
    x = torch.tensor([0.0, -0.0, 1e-20, 1e-5, 0.5, -1.5, 3.0, 11.9, 12.1, -19.9, -20.1, 25.0, 39.9, 40.1, -60.0,
                      80.0, float("nan")], dtype=dtype)
    x = torch.cat([x, torch.linspace(-30, 30, 121, dtype=dtype)])
    # erfcx grows as e^(x^2) below 0: PyTorch's float32 e^(x^2) carries x^2's
    # float32 rounding (about 1e-5 relative at x = -20).
    rtol = 3e-5 if (name == "erfcx" and dtype == torch.float32) else None
    # PyTorch's float32 J0 and J1 are good to about 1e-6 absolute near their
    # zeros (ours to float32's rounding of the float64 value).
    atol = 3e-6 if name.startswith("bessel_") else None
    if name == "airy_ai":
        # PyTorch's Ai is 2e-6 off at -2.5 (ours is within 1e-14 of mpmath
        # there, tests/ops_special.rs).
        rtol = 3e-6
    check(fn, x, rtol=rtol, atol=atol)
    if name not in NO_GRADIENT:
        check_grad(fn, rand(6, dtype=dtype) * 4, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ndtri_zeta_and_nextafter_match_the_cpu(dtype):
    p = torch.cat([torch.rand(50, dtype=dtype),
                   torch.tensor([0.0, 1.0, 0.5, 1e-30, 1e-12, 0.999, -0.5, 1.5, float("nan")], dtype=dtype)])
    check(torch.special.ndtri, p)
    check_grad(torch.special.ndtri, torch.rand(6, dtype=dtype) * 0.9 + 0.05, rtol=1e-4, atol=1e-6)
    x = torch.tensor([2.0, 3.0, 1.5, 1.0, 0.5, 2.5, 2.0, 4.0], dtype=dtype)
    q = torch.tensor([1.0, 0.5, 4.0, 2.0, 2.0, -3.0, -1.5, 0.0], dtype=dtype)
    check(torch.special.zeta, x, q)
    check(lambda x: torch.special.zeta(x, 2.0), x)
    a, b = rand(20, dtype=dtype), rand(20, dtype=dtype)
    check(torch.nextafter, a, b)
    check(torch.nextafter, a, a)


def test_nextafter_of_integers_is_an_error_naming_the_op():
    i = torch.ones(3, dtype=torch.int64, device="tpu")
    with pytest.raises(RuntimeError, match="nextafter"):
        torch.nextafter(i, i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_incomplete_gamma_matches_the_cpu(dtype):
    a = torch.cat([torch.rand(60, dtype=dtype) * 20, torch.tensor([0.5, 3.0, 0.0, 1.0, 2.0, -1.0], dtype=dtype)])
    x = torch.cat([torch.rand(60, dtype=dtype) * 25, torch.tensor([0.0, 30.0, 1.0, float("inf"), 2.0, 1.0],
                                                                   dtype=dtype)])
    check(torch.igamma, a, x, rtol=1e-5, atol=1e-7)
    check(torch.igammac, a, x, rtol=1e-5, atol=1e-7)
    check(lambda x: torch.special.gammainc(torch.full_like(x, 2.5), x), x[:60])
    # The gradient for x (PyTorch has none for a).
    av = torch.rand(6, dtype=dtype) * 4 + 0.5
    check_grad(lambda x: torch.igamma(av.to(x.device), x), torch.rand(6, dtype=dtype) * 5, rtol=1e-4, atol=1e-6)
    check_grad(lambda x: torch.igammac(av.to(x.device), x), torch.rand(6, dtype=dtype) * 5, rtol=1e-4, atol=1e-6)
