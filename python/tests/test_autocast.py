"""Automatic mixed precision on tpu: `torch.autocast("tpu")` casts as CUDA's
autocast does (the same op lists and policies; bf16 by default, fp16
allowed), and `torch.amp.GradScaler("tpu")` scales, unscales and skips steps as
on the CPU. References are PyTorch CPU runs that make CUDA's casts by hand."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import eagertpu
from helpers import assert_same, next_op_works, rand, tpu

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32


def test_bf16_is_the_default_and_fp16_is_allowed():
    assert torch.get_autocast_dtype("tpu") == BF16
    assert torch.tpu.is_bf16_supported()
    lin = nn.Linear(8, 4).to("tpu")
    x = torch.randn(2, 8, device="tpu")
    with torch.autocast("tpu"):
        assert lin(x).dtype == BF16
        with torch.autocast("tpu", enabled=False):
            assert lin(x).dtype == F32
    with torch.autocast("tpu", dtype=F16):
        assert lin(x).dtype == F16
    with torch.tpu.amp.autocast():
        assert lin(x).dtype == BF16
    assert lin(x).dtype == F32


def lower(*ts, dtype=BF16):
    return [t.to(dtype) for t in ts]


# (name, function on the inputs, the CPU reference with CUDA's casts made by
# hand, input shapes): one op per autocast policy, and an op with none.
CASES = [
    # lower_precision_fp: inputs cast to the autocast dtype.
    ("mm", torch.mm, lambda a, b: torch.mm(*lower(a, b)), [(6, 5), (5, 3)]),
    ("matmul", torch.matmul, lambda a, b: torch.matmul(*lower(a, b)), [(2, 6, 5), (5, 3)]),
    ("linear", F.linear, lambda x, w, b: F.linear(*lower(x, w, b)), [(4, 5), (3, 5), (3,)]),
    ("bmm", torch.bmm, lambda a, b: torch.bmm(*lower(a, b)), [(2, 3, 4), (2, 4, 5)]),
    ("addmm", torch.addmm, lambda c, a, b: torch.addmm(*lower(c, a, b)), [(3,), (4, 5), (5, 3)]),
    ("conv2d", F.conv2d, lambda x, w: F.conv2d(*lower(x, w)), [(1, 2, 6, 6), (3, 2, 3, 3)]),
    # fp32: inputs cast up to float32.
    ("exp", torch.exp, lambda x: torch.exp(x.float()), [(4, 5)]),
    ("layer_norm", lambda x: F.layer_norm(x, (5,)), lambda x: F.layer_norm(x.float(), (5,)), [(4, 5)]),
    ("mse_loss", F.mse_loss, lambda a, b: F.mse_loss(a.float(), b.float()), [(4, 5), (4, 5)]),
    # fp32_set_opt_dtype: computed in float32.
    ("softmax", lambda x: torch.softmax(x, 1), lambda x: torch.softmax(x.float(), 1), [(4, 5)]),
    ("sum", torch.sum, lambda x: torch.sum(x.float()), [(4, 5)]),
    # promote: the widest input dtype.
    ("addcmul", torch.addcmul, lambda a, b, c: torch.addcmul(a.float(), b.float(), c.float()), [(4, 5)] * 3),
]


@pytest.mark.parametrize("name,fn,reference,shapes", CASES, ids=[c[0] for c in CASES])
def test_each_policy_casts_as_cudas_autocast(name, fn, reference, shapes):
    """Inputs are bf16 for the first argument and float32 for the rest, so
    that every policy shows: the result's dtype and values are those of the
    CPU doing CUDA's casts by hand."""
    args = [rand(*s).to(BF16 if i == 0 else F32) for i, s in enumerate(shapes)]
    want = reference(*args)
    with torch.autocast("tpu"):
        got = fn(*tpu(args))
    assert_same(got, want, what=name)


def test_ops_without_a_policy_run_in_their_inputs_dtypes():
    a, b = rand(4, 5, dtype=BF16), rand(4, 5, dtype=BF16)
    with torch.autocast("tpu"):
        got = tpu(a) + tpu(b)
        relu = torch.relu(tpu(a))
    assert_same(got, a + b)
    assert_same(relu, torch.relu(a))


def test_binary_cross_entropy_is_refused_naming_the_safe_op():
    p = torch.rand(4, device="tpu")
    with torch.autocast("tpu"):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, torch.ones(4, device="tpu"))
        loss = F.binary_cross_entropy_with_logits(p, torch.ones(4, device="tpu"))
    assert loss.dtype == F32
    next_op_works()


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 4)

    def forward(self, x, by_hand=None):
        """With `by_hand` (a dtype), CUDA's autocast casts made explicitly:
        linear in the lower precision, the loss's log_softmax in float32."""
        def linear(layer, h):
            if by_hand is None:
                return layer(h)
            return F.linear(h.to(by_hand), layer.weight.to(by_hand), layer.bias.to(by_hand))
        h = F.relu(linear(self.fc1, x))
        h = F.relu(linear(self.fc2, h))
        return linear(self.fc3, h)


def train(device, dtype, steps, scaler_scale=None, lr=1e-2):
    """An MLP trained with autocast at `dtype` (on tpu) or CUDA's casts by
    hand (on the CPU); with `scaler_scale`, through a GradScaler with that
    initial scale (growth every 2 clean steps). Losses and scales per step."""
    torch.manual_seed(0)
    model = Mlp().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 16, generator=g).to(device), torch.randint(0, 4, (8,), generator=g).to(device)
    scaler = torch.amp.GradScaler(device, init_scale=scaler_scale, growth_interval=2) if scaler_scale else None
    losses, scales = [], []
    for _ in range(steps):
        opt.zero_grad()
        if device == "tpu":
            with torch.autocast("tpu", dtype=dtype):
                loss = F.cross_entropy(model(x), y)
        else:
            loss = F.cross_entropy(model(x, by_hand=dtype).float(), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        losses.append(loss.item())
    return losses, scales, [p.detach().cpu() for p in model.parameters()]


def test_a_bf16_autocast_training_loop_matches_the_cpu_with_cudas_casts():
    got, _, got_params = train("tpu", BF16, 12)
    want, _, want_params = train("cpu", BF16, 12)
    assert got[-1] < got[0]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=2e-2, atol=2e-2)
    for g, w in zip(got_params, want_params):
        assert g.dtype == F32  # the master weights stay float32
        torch.testing.assert_close(g, w, rtol=5e-2, atol=5e-2)


def test_fp16_with_a_grad_scaler_grows_its_scale_as_on_the_cpu():
    got, got_scales, _ = train("tpu", F16, 6, scaler_scale=2.0**10)
    want, want_scales, _ = train("cpu", F16, 6, scaler_scale=2.0**10)
    assert got_scales == want_scales == [2.0**10, 2.0**11, 2.0**11, 2.0**12, 2.0**12, 2.0**13]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-2, atol=1e-2)
    assert got[-1] < got[0]


def test_fp16_gradients_that_overflow_skip_the_step_and_back_off_the_scale():
    got, scales, _ = train("tpu", F16, 4, scaler_scale=2.0**40)
    # fp16 gradients scaled by 2**40 are infinite: no step is taken (the loss
    # stays the same) and the scale halves each time.
    assert got == [got[0]] * 4, got
    assert scales == [2.0**39, 2.0**38, 2.0**37, 2.0**36], scales


@pytest.mark.parametrize("bad", [None, float("inf"), float("nan")])
def test_unscaling_finds_non_finite_gradients_as_the_cpu_kernel(bad):
    grads = [rand(3, 4), rand(5), rand(2, 2).to(BF16)]
    if bad is not None:
        grads[1][2] = bad
    for found_before in (0.0, 1.0):
        cpu = [g.clone() for g in grads]
        dev = tpu(grads)
        found_cpu, found_tpu = torch.full((1,), found_before), torch.full((1,), found_before, device="tpu")
        torch._amp_foreach_non_finite_check_and_unscale_(cpu, found_cpu, torch.full((1,), 0.25))
        torch._amp_foreach_non_finite_check_and_unscale_(dev, found_tpu, torch.full((1,), 0.25, device="tpu"))
        assert_same(found_tpu, found_cpu, what="found_inf")
        for i, (d, c) in enumerate(zip(dev, cpu)):
            assert_same(d, c, what=f"gradient {i}")


@pytest.mark.parametrize(
    "scale,tracker,found,interval",
    [(1024.0, 0, 0.0, 3), (1024.0, 2, 0.0, 3), (1024.0, 2, 1.0, 3), (3e38, 1, 0.0, 2), (8.0, 0, 0.0, 1)],
)
def test_updating_the_scale_matches_the_cpu_kernel(scale, tracker, found, interval):
    def run(device):
        s = torch.full((1,), scale, device=device)
        t = torch.full((1,), tracker, dtype=torch.int32, device=device)
        out = torch._amp_update_scale_(s, t, torch.full((1,), found, device=device), 2.0, 0.5, interval)
        assert out is s
        return s, t

    (s, t), (cs, ct) = run("tpu"), run("cpu")
    assert_same(s, cs, what="scale")
    assert_same(t, ct, what="growth tracker")


def test_update_scale_refuses_bad_dtypes_naming_them():
    with pytest.raises(RuntimeError, match="growth_tracker int32"):
        torch._amp_update_scale_(torch.ones(1, device="tpu"), torch.zeros(1, device="tpu"),
                                 torch.zeros(1, device="tpu"), 2.0, 0.5, 10)
    next_op_works()



def test_autocast_inside_a_compiled_function_casts_as_eager_autocast():
    torch.manual_seed(0)
    model = Mlp().to("tpu")
    x = torch.randn(4, 16, device="tpu")

    @torch.compile(backend="tpu")
    def forward(x):
        with torch.autocast("tpu"):
            return model(x)

    got = forward(x)
    with torch.autocast("tpu"):
        want = model(x)
    assert got.dtype == want.dtype == BF16
    assert torch.equal(got.cpu(), want.cpu())
