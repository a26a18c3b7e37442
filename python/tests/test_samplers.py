"""Samplers with parameters per element on the device: torch._standard_gamma
(torch.distributions.Gamma, Beta, Chi2, Dirichlet), torch._sample_dirichlet,
torch.poisson and torch.binomial. Samples are checked against the exact
distribution computed on the CPU (the gamma CDF through
torch.special.gammainc, Poisson and binomial probabilities through
log_prob), in every mode and with no fallback."""

import math

import pytest
import torch
from torch import distributions as D

import eagertpu

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")

N = 20_000


def ks_bound(n):
    """Kolmogorov-Smirnov distance a correct sample of n exceeds with
    probability 1e-6 (the samples are fixed by the seed: no flakes)."""
    return math.sqrt(-math.log(0.5e-6) / (2 * n))


def ks_distance(samples, cdf):
    """Largest distance between the empirical CDF of sorted `samples` and the
    exact `cdf` at them (float64 CPU tensors)."""
    x, _ = samples.sort()
    n = x.numel()
    f = cdf(x)
    upper = torch.arange(1, n + 1, dtype=torch.float64) / n - f
    lower = f - torch.arange(0, n, dtype=torch.float64) / n
    return max(upper.max().item(), lower.max().item())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("concentration,rate", [(0.1, 1.0), (0.7, 2.0), (1.0, 0.5), (4.5, 3.0), (60.0, 1.0)])
def test_gamma_samples_follow_the_gamma_cdf(dtype, concentration, rate):
    torch.manual_seed(0)
    a = torch.tensor(concentration, dtype=dtype, device="tpu")
    b = torch.tensor(rate, dtype=dtype, device="tpu")
    x = D.Gamma(a, b).sample((N,))
    assert x.device.type == "tpu" and x.dtype == dtype and x.shape == (N,)
    x = x.cpu().double()
    assert bool((x > 0).all()) and bool(x.isfinite().all())
    d = ks_distance(x, lambda t: torch.special.gammainc(torch.tensor(concentration, dtype=torch.float64), t * rate))
    assert d < ks_bound(N), f"KS distance {d:.4f}"


def test_dirichlet_and_beta_samples_have_their_means_and_sum_to_one():
    torch.manual_seed(1)
    alpha = torch.tensor([0.5, 2.0, 7.5], device="tpu")
    x = D.Dirichlet(alpha).sample((N,))
    assert x.device.type == "tpu" and x.shape == (N, 3)
    x = x.cpu().double()
    assert torch.allclose(x.sum(-1), torch.ones(N, dtype=torch.float64), atol=1e-5)
    mean = alpha.cpu().double() / alpha.sum().item()
    # Each share is Beta(a_i, sum - a_i): standard error of its mean below 0.004.
    assert torch.allclose(x.mean(0), mean, atol=0.012), x.mean(0)
    beta = D.Beta(torch.tensor(2.0, device="tpu"), torch.tensor(5.0, device="tpu")).sample((N,)).cpu().double()
    assert bool(((beta > 0) & (beta < 1)).all())
    # The Beta(2, 5) CDF in closed form: 1 - (1 - t)^5 (1 + 5t).
    d = ks_distance(beta, lambda t: 1 - (1 - t) ** 5 * (1 + 5 * t))
    assert d < ks_bound(N), f"Beta(2, 5) KS distance {d:.4f}"


def test_sample_dirichlet_of_a_zero_row_gives_equal_shares_as_the_cpu():
    rows = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    got = torch._sample_dirichlet(rows.to("tpu")).cpu()
    assert torch.equal(got, torch._sample_dirichlet(rows))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rate", [0.2, 3.0, 9.9, 10.0, 47.0, 400.0])
def test_poisson_samples_have_the_poisson_probabilities(dtype, rate):
    torch.manual_seed(2)
    rates = torch.full((N,), rate, dtype=dtype, device="tpu")
    x = torch.poisson(rates)
    assert x.device.type == "tpu" and x.dtype == dtype
    x = x.cpu().double()
    assert bool((x >= 0).all()) and bool((x == x.round()).all())
    counts = torch.arange(0, int(rate + 10 * math.sqrt(rate) + 10), dtype=torch.float64)
    assert_chi_square(x, D.Poisson(torch.tensor(rate, dtype=torch.float64)).log_prob(counts).exp())


def assert_chi_square(samples, p):
    """Pearson's chi-square of `samples` (counts) against the probabilities
    `p` of 0, 1, ... (the last cell taking the rest), over cells expected at
    least 20 times (neighbours pooled): below its mean plus six standard
    deviations (p < 1e-6)."""
    n = samples.numel()
    p = p.clone()
    p[-1] = 1 - p[:-1].sum()
    observed = torch.bincount(samples.long().clamp(max=p.numel() - 1), minlength=p.numel()).double()
    chi2, cells, pooled_p, pooled_o = 0.0, 0, 0.0, 0.0
    for pk, ok in zip(p.tolist(), observed.tolist()):
        pooled_p, pooled_o = pooled_p + pk, pooled_o + ok
        if pooled_p * n >= 20:
            chi2 += (pooled_o - pooled_p * n) ** 2 / (pooled_p * n)
            cells, pooled_p, pooled_o = cells + 1, 0.0, 0.0
    dof = cells - 1
    assert chi2 < dof + 6 * math.sqrt(2 * dof), f"chi-square {chi2:.1f} over {cells} cells"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("count,prob", [(15.0, 0.2), (15.0, 0.7), (80.0, 0.15), (500.0, 0.5), (500.0, 0.93)])
def test_binomial_samples_have_the_binomial_probabilities(dtype, count, prob):
    torch.manual_seed(3)
    n = torch.full((N,), count, dtype=dtype, device="tpu")
    p = torch.tensor(prob, dtype=dtype, device="tpu").expand(N)
    x = torch.binomial(n, p)
    assert x.device.type == "tpu" and x.dtype == dtype
    x = x.cpu().double()
    assert bool(((x >= 0) & (x <= count) & (x == x.round())).all())
    ks = torch.arange(0, int(count) + 1, dtype=torch.float64)
    assert_chi_square(x, D.Binomial(count, torch.tensor(prob, dtype=torch.float64)).log_prob(ks).exp())


def test_binomial_broadcasts_matches_the_cpu_at_the_edges_and_names_bad_dtypes():
    torch.manual_seed(4)
    got = D.Binomial(torch.tensor([[10.0], [20.0]], device="tpu"), torch.tensor([0.0, 0.5, 1.0], device="tpu")).sample()
    assert got.shape == (2, 3)
    got = got.cpu()
    assert got[:, 0].tolist() == [0.0, 0.0] and got[:, 2].tolist() == [10.0, 20.0]
    edges = (torch.tensor([-1.0, 5.5, 4.0]), torch.tensor([0.5, 1.0, 0.0]))
    assert torch.equal(torch.binomial(*(t.to("tpu") for t in edges)).cpu(), torch.binomial(*edges))
    with pytest.raises(RuntimeError, match="binomial only supports floating-point dtypes for count"):
        torch.binomial(torch.tensor([10, 10], device="tpu"), torch.tensor([0.5, 0.5], device="tpu"))
    with pytest.raises(RuntimeError, match="binomial: found dtype Double for prob but expected Float"):
        torch.binomial(torch.tensor([10.0], device="tpu"), torch.tensor([0.5], dtype=torch.float64, device="tpu"))
    assert torch.binomial(torch.tensor([10.0], device="tpu"), torch.tensor([0.5], device="tpu")).item() <= 10


def test_seeds_reproduce_samples_and_rate_zero_is_zero():
    def draw():
        a = torch.tensor([0.3, 1.0, 5.0] * 100, device="tpu")
        return torch._standard_gamma(a).cpu(), torch.poisson(a * 4).cpu()

    torch.manual_seed(7)
    first = draw()
    torch.manual_seed(7)
    again = draw()
    torch.manual_seed(8)
    other = draw()
    for x, y, z in zip(first, again, other):
        assert torch.equal(x, y) and not torch.equal(x, z)
    assert torch.equal(torch.poisson(torch.zeros(5, device="tpu")).cpu(), torch.zeros(5))
    assert torch._standard_gamma(torch.zeros(2, device="tpu")).cpu().tolist() == [torch.finfo(torch.float32).tiny] * 2


def test_out_forms_and_sixteen_bit_floats():
    a = torch.full((1000,), 2.0, device="tpu")
    out = torch.empty(0, device="tpu")
    torch.ops.aten._standard_gamma.out(a, out=out)
    assert out.shape == (1000,) and bool((out > 0).all().cpu())
    counts = torch.empty(0, device="tpu")
    torch.ops.aten.poisson.out(a, out=counts)
    assert counts.shape == (1000,) and abs(counts.mean().item() - 2.0) < 0.3
    half = torch._standard_gamma(torch.full((N,), 3.0, dtype=torch.bfloat16, device="tpu"))
    assert half.dtype == torch.bfloat16 and abs(half.float().mean().item() - 3.0) < 0.1


def test_bad_rates_and_shapes_are_named_and_the_next_call_works():
    with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-negative"):
        torch.poisson(torch.tensor([1.0, -1.0], device="tpu"))
    with pytest.raises(RuntimeError, match="invalid Poisson rate"):
        torch.poisson(torch.tensor([float("nan")], device="tpu"))
    with pytest.raises(RuntimeError, match="poisson: expected a floating-point rate tensor"):
        torch.poisson(torch.tensor([1, 2], device="tpu"))
    with pytest.raises(RuntimeError, match=r"_standard_gamma.*int64.*floating-point"):
        torch._standard_gamma(torch.tensor([1, 2], device="tpu"))
    # A negative shape: NaN (the CPU loops forever), never a hang.
    assert torch._standard_gamma(torch.tensor([-1.0], device="tpu")).isnan().item()
    assert torch.poisson(torch.tensor([3.0], device="tpu")).item() >= 0
    eagertpu.sync()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_standard_gamma_grad_matches_the_cpu_in_each_region(dtype):
    # Small x (the series), shape above 8 near and away from the mode (the
    # saddle point), and the rational fit between; NaN-free at the edges.
    alpha = torch.tensor([0.05, 0.5, 1.0, 3.0, 7.9, 9.0, 20.0, 20.0, 20.0, 150.0, 0.7, 2.5, 6.0, 1e-3],
                         dtype=dtype)
    x = torch.tensor([0.01, 0.3, 0.79, 0.5, 0.2, 8.5, 19.0, 12.0, 31.0, 140.0, 2.0, 6.0, 3.0, 1e-30],
                     dtype=dtype)
    want = torch._standard_gamma_grad(alpha, x)
    got = torch._standard_gamma_grad(alpha.to("tpu"), x.to("tpu")).cpu()
    assert got.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_gamma_rsample_backpropagates_on_the_device():
    torch.manual_seed(5)
    concentration = torch.tensor([0.4, 1.5, 12.0], device="tpu", requires_grad=True)
    rate = torch.tensor([2.0, 1.0, 0.5], device="tpu", requires_grad=True)
    x = D.Gamma(concentration, rate).rsample((500,))
    (x * torch.arange(500, device="tpu").unsqueeze(1)).sum().backward()
    # d x / d concentration = standard_gamma_grad(concentration, x * rate) / rate,
    # d x / d rate = -x / rate, weighted by the upstream gradient (the row).
    a, r, xs = concentration.detach().cpu(), rate.detach().cpu(), x.detach().cpu()
    weights = torch.arange(500.0).unsqueeze(1)
    want_a = (torch._standard_gamma_grad(a.expand(500, 3), xs * r) / r * weights).sum(0)
    want_r = (-xs / r * weights).sum(0)
    torch.testing.assert_close(concentration.grad.cpu(), want_a, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(rate.grad.cpu(), want_r, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dirichlet_grad_matches_the_cpu_in_each_region(dtype):
    torch.manual_seed(6)
    x = torch.rand(3000, dtype=dtype) * 0.998 + 0.001
    alpha = torch.rand(3000, dtype=dtype) * 20 + 0.05
    total = alpha + torch.rand(3000, dtype=dtype) * 20 + 0.05
    want = torch._dirichlet_grad(x, alpha, total)
    got = torch._dirichlet_grad(x.to("tpu"), alpha.to("tpu"), total.to("tpu")).cpu()
    assert got.dtype == dtype
    # Computed in float64 on the device; the CPU's float32 series regions
    # are themselves within 8e-4 of float64.
    tol = 1.5e-3 if dtype == torch.float32 else 1e-11
    torch.testing.assert_close(got, want, rtol=tol, atol=1e-6 if dtype == torch.float32 else 1e-12)


def test_beta_and_dirichlet_rsample_backpropagate_on_the_device():
    from torch.distributions.dirichlet import _Dirichlet_backward

    torch.manual_seed(7)
    a = torch.tensor([0.6, 3.0, 9.0], device="tpu", requires_grad=True)
    b = torch.tensor([2.0, 0.8, 12.0], device="tpu", requires_grad=True)
    x = D.Beta(a, b).rsample((400,))
    assert x.device.type == "tpu"
    weights = torch.linspace(0, 1, 400).unsqueeze(1)
    (x * weights.to("tpu")).sum().backward()
    # The CPU's backward from the same samples: Beta's rsample is the first
    # share of a two-share Dirichlet.
    shares = torch.stack([x.detach().cpu(), 1 - x.detach().cpu()], -1)
    concentration = torch.stack([a.detach().cpu(), b.detach().cpu()], -1).expand(400, 3, 2)
    upstream = torch.stack([weights.expand(400, 3), torch.zeros(400, 3)], -1)
    want = _Dirichlet_backward(shares, concentration, upstream).sum(0)
    torch.testing.assert_close(a.grad.cpu(), want[:, 0], rtol=2e-3, atol=1e-4)
    torch.testing.assert_close(b.grad.cpu(), want[:, 1], rtol=2e-3, atol=1e-4)
    # A three-share Dirichlet the same way.
    alpha = torch.tensor([0.5, 2.0, 7.0], device="tpu", requires_grad=True)
    y = D.Dirichlet(alpha).rsample((300,))
    (y[:, 0] - 2 * y[:, 2]).sum().backward()
    upstream = torch.tensor([1.0, 0.0, -2.0]).expand(300, 3)
    want = _Dirichlet_backward(y.detach().cpu(), alpha.detach().cpu().expand(300, 3), upstream).sum(0)
    torch.testing.assert_close(alpha.grad.cpu(), want, rtol=2e-3, atol=1e-4)
