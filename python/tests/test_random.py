"""Random ops on the device: reproducible under torch.manual_seed, right
statistics, no recompiles per draw, and the nn.init functions."""

import math
import re

import pytest
import torch
import torch.nn as nn

import eagertpu

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


def draw():
    return (
        torch.rand(1000, device="tpu"),
        torch.randn(1000, device="tpu"),
        torch.randint(0, 10, (1000,), device="tpu"),
        torch.empty(1000, device="tpu").bernoulli_(0.3),
    )


def test_manual_seed_reproduces_draws():
    torch.manual_seed(123)
    a = [t.cpu() for t in draw()]
    torch.manual_seed(123)
    b = [t.cpu() for t in draw()]
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    torch.manual_seed(124)
    c = [t.cpu() for t in draw()]
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[1], c[1])
    assert not torch.equal(a[0], a[1])  # successive draws differ


def test_generator_state_and_explicit_generators():
    torch.manual_seed(5)
    state = torch.tpu.get_rng_state()
    x = torch.randn(50, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.randn(50, device="tpu").cpu(), x)
    g = torch.Generator(device="tpu")
    g.manual_seed(9)
    y = torch.rand(20, device="tpu", generator=g).cpu()
    g.manual_seed(9)
    assert torch.equal(torch.rand(20, device="tpu", generator=g).cpu(), y)
    assert torch.tpu.initial_seed() == 5


def test_generator_state_is_16_bytes_and_seeds_keep_all_64_bits():
    seed = 2**64 - 3  # above int64: crosses torch.ops.eagertpu as the int64 with the same bits
    torch.tpu.manual_seed(seed)
    assert torch.tpu.initial_seed() == seed
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.shape == (16,) and state.device.type == "cpu"
    assert int.from_bytes(bytes(state[:8].tolist()), "little") == seed
    x = torch.rand(8, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.rand(8, device="tpu").cpu(), x)
    with pytest.raises(ValueError, match="16 bytes"):
        torch.tpu.set_rng_state(torch.zeros(8, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="tpu device 99 does not exist"):
        torch.ops.eagertpu.initial_seed(99)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_distributions(dtype):
    n = 200_000
    u = torch.empty(n, device="tpu", dtype=dtype).uniform_(-2, 3).cpu().double()
    # half types round a draw just below `to` up to it, as on CPU and CUDA
    assert u.min() >= -2 and (u.max() < 3 if dtype in (torch.float32, torch.float64) else u.max() <= 3)
    assert abs(u.mean() - 0.5) < 0.03 and abs(u.var() - 25 / 12) < 0.05
    z = torch.empty(n, device="tpu", dtype=dtype).normal_(1.5, 2.0).cpu().double()
    assert abs(z.mean() - 1.5) < 0.03 and abs(z.std() - 2.0) < 0.03
    assert torch.isfinite(z).all()
    # the tails are normal: P(|z - mean| > 2 std) ~ 4.55%
    tail = ((z - 1.5).abs() > 4.0).double().mean()
    assert abs(tail - 0.0455) < 0.005
    b = torch.empty(n, device="tpu", dtype=dtype).bernoulli_(0.3).cpu().double()
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log_normal_cauchy_and_geometric_draws(dtype):
    n = 200_000
    ln = torch.empty(n, device="tpu", dtype=dtype).log_normal_(0.5, 0.4).cpu().double().log()
    assert abs(ln.mean() - 0.5) < 0.01 and abs(ln.std() - 0.4) < 0.01
    c = torch.empty(n, device="tpu", dtype=dtype).cauchy_(1.0, 2.0).cpu().double().sort().values
    # median 1, quartiles at 1 -+ 2 (the scale)
    assert abs(c[n // 2] - 1.0) < 0.05 and abs(c[3 * n // 4] - c[n // 4] - 4.0) < 0.1
    g = torch.empty(n, device="tpu", dtype=dtype).geometric_(0.25).cpu().double()
    assert g.min() == 1 and torch.equal(g, g.round())
    assert abs(g.mean() - 4.0) < 0.05 and abs((g == 1).double().mean() - 0.25) < 0.01  # mean 1/p, P(1) = p
    ints = torch.empty(1000, device="tpu", dtype=torch.int64).geometric_(0.5).cpu()
    assert ints.dtype == torch.int64 and ints.min() >= 1
    for bad, match in [(lambda t: t.log_normal_(0, 0), "std > 0.0"), (lambda t: t.cauchy_(0, -1), "sigma > 0.0"),
                       (lambda t: t.geometric_(1.5), r"p to be in \(0, 1\)")]:
        with pytest.raises(RuntimeError, match=match):
            bad(torch.empty(3, device="tpu", dtype=dtype))


def test_multinomial_samples_the_distribution_with_and_without_replacement():
    q = torch.tensor([0.1, 0.0, 0.6, 0.3])
    rows = 50_000
    p = q.repeat(rows, 1).to("tpu")
    with_ = torch.multinomial(p, 2, replacement=True).cpu()
    assert with_.dtype == torch.int64 and with_.shape == (rows, 2)
    freq = torch.bincount(with_.flatten(), minlength=4).double() / (2 * rows)
    assert (freq - q.double()).abs().max() < 0.01 and freq[1] == 0  # never a category of probability 0
    # Without replacement: distinct picks; the first ~ q, the second ~ q_j / (1 - q_i).
    without = torch.multinomial(p, 2).cpu()
    assert (without[:, 0] != without[:, 1]).all() and (without != 1).all()
    pairs = torch.bincount(without[:, 0] * 4 + without[:, 1], minlength=16).double().view(4, 4) / rows
    expected = torch.tensor([[q[i] * q[j] / (1 - q[i]) if i != j else 0.0 for j in range(4)] for i in range(4)])
    assert (pairs - expected.double()).abs().max() < 0.01, pairs
    # Unnormalized weights, one row, one sample, every category of a row once.
    assert torch.multinomial(torch.tensor([0.0, 0.0, 5.0], device="tpu"), 1).item() == 2
    assert sorted(torch.multinomial(torch.ones(6, device="tpu"), 6).tolist()) == list(range(6))
    assert torch.multinomial(torch.ones(0, 3, device="tpu"), 2).shape == (0, 2)
    torch.manual_seed(5)
    a = torch.multinomial(p[:8], 3).cpu()
    torch.manual_seed(5)
    assert torch.equal(a, torch.multinomial(p[:8], 3).cpu())
    for bad, match in [([0.5, -0.1], "element < 0"), ([float("nan"), 1.0], "nan"), ([float("inf"), 1.0], "inf"),
                       ([0.0, 0.0], "sum of probabilities <= 0")]:
        with pytest.raises(RuntimeError, match=match):
            torch.multinomial(torch.tensor(bad, device="tpu"), 1)
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(torch.ones(3, device="tpu"), 4)
    with pytest.raises(RuntimeError, match="1 or 2 dim"):
        torch.multinomial(torch.ones(2, 2, 2, device="tpu"), 1)
    assert torch.multinomial(torch.ones(3, device="tpu"), 1).item() in (0, 1, 2)  # the process goes on


def test_randperm_is_a_uniform_permutation_reproducible_under_a_seed():
    p = torch.randperm(1000, device="tpu")
    assert p.device.type == "tpu" and p.dtype == torch.int64
    assert torch.equal(p.cpu().sort().values, torch.arange(1000))
    torch.manual_seed(7)
    a = torch.randperm(50, device="tpu").cpu()
    torch.manual_seed(7)
    assert torch.equal(a, torch.randperm(50, device="tpu").cpu())
    assert torch.randperm(0, device="tpu").numel() == 0
    assert torch.randperm(6, device="tpu", dtype=torch.float32).dtype == torch.float32
    # Where 0 lands is uniform over the 5 places: 2000 draws, 400 expected each.
    places = torch.stack([torch.randperm(5, device="tpu") for _ in range(2000)]).cpu().argmin(1)
    counts = torch.bincount(places, minlength=5).double()
    assert ((counts - 400) ** 2 / 400).sum() < 25  # chi-square, 4 dof: p ~ 5e-5


def test_integers_and_probabilities():
    r = torch.randint(3, 9, (100_000,), device="tpu").cpu()
    assert r.dtype == torch.int64 and r.min() == 3 and r.max() == 8
    counts = torch.bincount(r - 3).double() / r.numel()
    assert (counts - 1 / 6).abs().max() < 0.01
    p = torch.tensor([0.0, 0.25, 1.0]).repeat(20000).to("tpu")
    b = torch.bernoulli(p).cpu().view(-1, 3)
    assert b[:, 0].sum() == 0 and b[:, 2].min() == 1 and abs(b[:, 1].mean() - 0.25) < 0.01
    e = torch.empty(100_000, device="tpu").exponential_(2.0).cpu()
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.01


def test_draws_do_not_recompile():
    torch.rand(64, device="tpu").sum().item()
    before = eagertpu.metrics()["compiles"]
    for _ in range(10):
        torch.rand(64, device="tpu").sum().item()
    assert eagertpu.metrics()["compiles"] == before


def test_dropout():
    x = torch.ones(100_000, device="tpu")
    drop = nn.Dropout(0.25)
    y = drop(x).cpu()
    kept = y != 0
    assert abs(kept.double().mean() - 0.75) < 0.01
    assert torch.allclose(y[kept], torch.tensor(1 / 0.75))
    drop.eval()
    assert torch.equal(drop(x).cpu(), x.cpu())
    # backward uses the same mask
    x = torch.ones(1000, device="tpu", requires_grad=True)
    y = nn.functional.dropout(x, 0.5)
    y.sum().backward()
    assert torch.equal((x.grad != 0).cpu(), (y != 0).cpu())


def test_rrelu_draws_slopes_on_the_device_and_backpropagates_them():
    x = torch.randn(20_000)
    negative = x <= 0
    # Evaluation: leaky ReLU with the mean slope, as on the CPU.
    for f in [lambda t: nn.functional.rrelu(t, 0.1, 0.3), lambda t: nn.RReLU(0.1, 0.3).eval()(t)]:
        assert torch.equal(f(x.to("tpu")).cpu(), f(x))
    # Training: each non-positive element times a slope from U(0.1, 0.3).
    xt = x.to("tpu").requires_grad_()
    y = nn.functional.rrelu(xt, 0.1, 0.3, training=True)
    slopes = (y.detach().cpu() / x)[negative]
    assert torch.equal(y.detach().cpu()[~negative], x[~negative])
    assert 0.1 <= slopes.min() and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 0.005 and abs(slopes.var() - 0.2**2 / 12) < 0.001
    y.sum().backward()
    grad = xt.grad.cpu()
    assert torch.equal(grad[~negative], torch.ones(int((~negative).sum())))
    torch.testing.assert_close(grad[negative], slopes)
    # In place, and reproducible under a seed.
    torch.manual_seed(3)
    a = nn.functional.rrelu_(x.to("tpu"), training=True).cpu()
    torch.manual_seed(3)
    b = nn.RReLU(inplace=True).train()(x.to("tpu")).cpu()
    assert torch.equal(a, b) and torch.equal(a[~negative], x[~negative])


def test_nn_init_statistics():
    w = torch.empty(512, 256, device="tpu")
    nn.init.uniform_(w, -0.1, 0.1)
    c = w.cpu()
    assert c.min() >= -0.1 and c.max() < 0.1 and abs(c.std() - 0.2 / math.sqrt(12)) < 2e-3
    nn.init.normal_(w, 0.0, 0.02)
    assert abs(w.cpu().std() - 0.02) < 5e-4
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(w.cpu().std() - math.sqrt(2 / 256)) < 2e-3
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))  # nn.Linear's default
    bound = 1 / math.sqrt(256)
    assert w.cpu().abs().max() <= bound and abs(w.cpu().std() - bound / math.sqrt(3)) < 1e-3
    nn.init.xavier_uniform_(w)
    assert abs(w.cpu().std() - math.sqrt(2 / (512 + 256))) < 1e-3
    nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)
    c = w.cpu()
    assert c.abs().max() <= 0.04 and 0.015 < c.std() < 0.02
    nn.init.zeros_(w)
    assert w.cpu().abs().max() == 0
    nn.init.constant_(w, 0.5)
    assert (w.cpu() == 0.5).all()
    nn.init.ones_(w)
    assert (w.cpu() == 1).all()


def test_modules_initialize_on_tpu_like_on_cpu():
    torch.manual_seed(0)
    m = nn.Linear(300, 200, device="tpu")
    bound = 1 / math.sqrt(300)
    w = m.weight.detach().cpu()
    assert w.abs().max() <= bound and abs(w.std() - bound / math.sqrt(3)) < 2e-3
    assert m.bias.detach().cpu().abs().max() <= bound


def test_bad_parameters_are_named_and_large_integer_ranges_stay_exact():
    x = torch.empty(5, device="tpu")
    for fill, words in [
        (lambda: x.uniform_(2, 1), "from <= to"),
        (lambda: x.exponential_(-1.0), "lambda > 0"),
        (lambda: x.bernoulli_(1.5), "p in [0, 1]"),
        (lambda: torch.empty(3, dtype=torch.int64, device="tpu").normal_(), "floating-point"),
    ]:
        with pytest.raises(RuntimeError, match=re.escape(words)):
            fill()
    assert torch.isfinite(x.uniform_(0, 1)).all()  # the tensor and the process go on
    big = torch.empty(2000, dtype=torch.int64, device="tpu").random_(2**60, 2**60 + 10).cpu()
    assert ((big >= 2**60) & (big < 2**60 + 10)).all() and len(set(big.tolist())) == 10
