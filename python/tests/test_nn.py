"""Matmuls, softmax, losses, normalization, embedding, index ops and
attention against PyTorch CPU (values and gradients), in every mode."""

import copy

import pytest
import eagertpu
import torch
import torch.nn.functional as F
from helpers import check, check_grad, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_matmuls(dtype):
    tol = dict(rtol=3e-2, atol=5e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    a, b = rand(5, 7, dtype=dtype), rand(7, 3, dtype=dtype)
    check(torch.mm, a, b, **tol)
    check(lambda a, b: torch.mm(b.t(), a.t()), a, b, **tol)
    check(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2), rand(3, dtype=dtype), a, b, **tol)
    check(torch.bmm, rand(2, 5, 7, dtype=dtype), rand(2, 7, 3, dtype=dtype), **tol)
    check(torch.matmul, rand(2, 1, 5, 7, dtype=dtype), rand(3, 7, 4, dtype=dtype), **tol)
    check(torch.matmul, rand(7, dtype=dtype), rand(7, 3, dtype=dtype), **tol)
    check(torch.matmul, rand(5, 7, dtype=dtype), rand(7, dtype=dtype), **tol)
    check(torch.dot, rand(7, dtype=dtype), rand(7, dtype=dtype), **tol)
    check(lambda x, w, b: F.linear(x, w, b), rand(2, 4, 7, dtype=dtype), rand(3, 7, dtype=dtype), rand(3, dtype=dtype), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_layers_with_more_outputs_than_rows(dtype, mode):
    """On the CPU plugin such a layer's `x @ w.T` is emitted weight first,
    `(w @ x.T).T` (Eigen runs it 2-3x faster); the values are the CPU's, for
    a weight that is a whole tensor or a view into a larger storage, on
    batched inputs, and through autograd. Each case runs until a call runs
    only fused programs (fused mode: a chunk compiles once seen twice), its
    values checked every time."""
    tol = dict(rtol=3e-2, atol=5e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    cases = [
        (check, lambda x, w, b: F.linear(x, w, b), rand(4, 16, dtype=dtype), rand(24, 16, dtype=dtype), rand(24, dtype=dtype)),
        (check, lambda x, w: F.linear(x, w), rand(2, 3, 16, dtype=dtype), rand(40, 16, dtype=dtype)),
        (check, lambda x, big: F.linear(x, big[5:29]), rand(4, 16, dtype=dtype), rand(40, 16, dtype=dtype)),
        (check, lambda x, w: x @ w.t(), rand(3, 9, dtype=dtype), rand(11, 9, dtype=dtype)),
        (check_grad, lambda x, w: F.linear(x, w), rand(4, 16, dtype=dtype), rand(24, 16, dtype=dtype)),
    ]
    for checker, fn, *args in cases:
        fused_only = False
        for _ in range(6):
            op_by_op = eagertpu.metrics()["chunks_op_by_op"]
            checker(fn, *args, **tol)
            eagertpu.wait_for_compiles()
            fused_only = eagertpu.metrics()["chunks_op_by_op"] == op_by_op
            if fused_only:
                break
        assert fused_only or mode != "fused", "no call ran only fused programs"


def test_matmul_gradients():
    check_grad(lambda a, b: a @ b, rand(4, 5), rand(5, 3), rtol=1e-4, atol=1e-4)
    check_grad(lambda x, w, b: F.linear(x, w, b), rand(2, 3, 5), rand(4, 5), rand(4), rtol=1e-4, atol=1e-4)
    check_grad(lambda a, b: torch.bmm(a, b.transpose(1, 2)), rand(2, 3, 4), rand(2, 5, 4), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dim):
    x = rand(4, 5, 6) * 3
    check_grad(lambda x: F.softmax(x, dim), x)
    check_grad(lambda x: F.log_softmax(x, dim), x)
    check(lambda x: F.softmax(x, dim, dtype=torch.float32), x.to(torch.float16), rtol=1e-3, atol=1e-3)
    check(lambda x: F.softmax(x.transpose(0, 2), dim), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("log", [False, True])
def test_half_precision_softmax_gradients_round_once_as_the_cpu(dtype, log):
    # PyTorch computes the backward in float32 and rounds once; in 16 bits
    # `grad - sum(grad * y)` cancels (0.062 where the CPU gives 0.015).
    g = torch.Generator().manual_seed(3)
    x, grad = torch.randn(6, 40, generator=g), torch.randn(6, 40, generator=g)
    f = torch._log_softmax_backward_data if log else torch._softmax_backward_data
    y = (F.log_softmax if log else F.softmax)(x, 1).to(dtype)
    want = f(grad.to(dtype), y, 1, dtype)
    got = f(grad.to(dtype).to("tpu"), y.to("tpu"), 1, dtype).cpu()
    ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    torch.testing.assert_close(got.float(), want.float(), rtol=ulp, atol=1e-3 * ulp)


def test_cross_entropy_and_nll():
    logits, target = rand(6, 5) * 2, torch.randint(0, 5, (6,))
    for reduction in ("mean", "sum", "none"):
        check_grad(lambda x: F.cross_entropy(x, target.to(x.device), reduction=reduction), logits)
    w = rand(5, low=0.5, high=2.0)
    check_grad(lambda x: F.cross_entropy(x, target.to(x.device), weight=w.to(x.device)), logits)
    t = target.clone()
    t[1] = -100
    check_grad(lambda x: F.cross_entropy(x, t.to(x.device)), logits)
    for reduction in ("mean", "none"):  # weighted, one target ignored
        check_grad(lambda x: F.nll_loss(F.log_softmax(x, 1), t.to(x.device), w.to(x.device), reduction=reduction), logits)
    check_grad(lambda x: F.cross_entropy(x, target.to(x.device), ignore_index=3, reduction="sum"), logits)
    check_grad(lambda x: F.nll_loss(F.log_softmax(x, 0), target[0].to(x.device)), logits[0])
    check_grad(lambda x: F.cross_entropy(x, target.to(x.device), label_smoothing=0.1), logits)


def test_nll_loss_is_one_runtime_op_and_keeps_the_cpu_edges(mode):
    logits, target = rand(6, 5) * 2, torch.randint(0, 5, (6,))
    # ignore_index outside [0, C), as segmentation uses (-1, 255): such
    # targets are not out of range, in every mode.
    for ignore in (-1, 255):
        t = target.clone()
        t[[0, 4]] = ignore
        for reduction in ("mean", "sum", "none"):
            check_grad(lambda x: F.cross_entropy(x, t.to(x.device), ignore_index=ignore, reduction=reduction), logits)
    # An ignored row of -inf log-probabilities costs 0, not NaN (its target
    # picks nothing); bfloat16 log-probabilities.
    logp = F.log_softmax(logits, 1)
    logp[2] = float("-inf")
    t = target.clone()
    t[2] = -100
    for reduction in ("mean", "none"):
        check_grad(lambda x: F.nll_loss(x, t.to(x.device), reduction=reduction), logp)
    check(lambda x: F.nll_loss(x, target.to(x.device)), logp.clone().fill_(-0.5).bfloat16())
    # A target out of range with a custom ignore_index is still an error
    # naming the op.
    bad = target.clone()
    bad[3] = 5
    with pytest.raises(RuntimeError, match=r"nll_loss.*out of range"):
        F.cross_entropy(logits.to("tpu"), bad.to("tpu"), ignore_index=255).item()
    # Through PyTorch, nll_loss forward and backward are one runtime op each
    # (with the index check and the total weight), not a gather and a dozen
    # pointwise ops: it is in every classifier's step.
    x = logp.detach().clone().fill_(-1.0).to("tpu").requires_grad_()
    before = eagertpu.metrics()["ops_recorded"]
    loss = F.nll_loss(x, target.to("tpu"))
    forward = eagertpu.metrics()["ops_recorded"] - before
    loss.backward()
    backward = eagertpu.metrics()["ops_recorded"] - before - forward
    assert forward <= 5 and backward <= 2, (forward, backward)
    assert x.grad.cpu().sum().item() == pytest.approx(-1.0)  # d mean(-x[t]) / dx sums to -1


def test_mse_loss():
    for reduction in ("mean", "sum", "none"):
        check_grad(lambda a, b: F.mse_loss(a, b, reduction=reduction), rand(4, 3), rand(4, 3))


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(affine):
    x = rand(3, 4, 8)
    w, b = rand(8), rand(8)
    if affine:
        check_grad(lambda x, w, b: F.layer_norm(x, (8,), w, b, eps=1e-5), x, w, b, rtol=1e-4, atol=1e-4)
        check_grad(lambda x, w, b: F.layer_norm(x, (4, 8), w.expand(4, 8), None), x, w, b, rtol=1e-4, atol=1e-4)
        # One row, no leading dims: the weight's and bias's gradients are not summed over anything.
        check_grad(lambda x, w, b: F.layer_norm(x, (8,), w, b), rand(8), w, b, rtol=1e-4, atol=1e-4)
    else:
        check_grad(lambda x: F.layer_norm(x, (8,)), x, rtol=1e-4, atol=1e-4)
    check(lambda x: F.layer_norm(x, (8,)), x.to(torch.bfloat16), rtol=3e-2, atol=3e-2)


def test_embedding():
    w = rand(10, 4)
    idx = torch.tensor([[1, 3, 3], [9, 0, 1]])
    check_grad(lambda w: F.embedding(idx.to(w.device), w), w)
    check_grad(lambda w: F.embedding(idx.to(w.device), w, padding_idx=3), w)
    check_grad(lambda w: F.embedding(idx.to(w.device), w, scale_grad_by_freq=True), w)


def test_embedding_backward_padding_and_frequency_together():
    # The runtime's embedding_backward: padding_idx (negative counts from the
    # end) with scale_grad_by_freq, repeated indices, int32 indices.
    w = rand(10, 4)
    idx = torch.tensor([[1, 3, 3, 9], [9, 0, 1, 3]])
    check_grad(lambda w: F.embedding(idx.to(w.device), w, padding_idx=3, scale_grad_by_freq=True), w)
    check_grad(lambda w: F.embedding(idx.to(w.device), w, padding_idx=-1, scale_grad_by_freq=True), w)
    check_grad(lambda w: F.embedding(idx.to(w.device, torch.int32), w, padding_idx=0), w)


def test_index_ops():
    x = rand(5, 6)
    i = torch.tensor([4, 0, 0, 2])
    check(lambda x, i: x.index_select(0, i), x, i)
    check(lambda x, i: x.index_select(1, i), x, i)
    check(lambda x, i: x.t().index_select(0, i), x, i)
    g = torch.randint(0, 6, (5, 3))
    check(lambda x, g: torch.gather(x, 1, g), x, g)
    check(lambda x, g, s: x.scatter(1, g[:, :1], s[:, :1]), x, g, rand(5, 3))
    check(lambda x, g, s: x.scatter_add(1, g, s), x, g, rand(5, 3))
    check(lambda x, g: x.scatter(1, g[:, :1], 2.5), x, g)
    check_grad(lambda x: torch.gather(x, 1, g.to(x.device)), x)
    check_grad(lambda x: x.index_select(0, i.to(x.device)), x)
    check(lambda x, i: x[i], x, i)
    check(lambda x, i: x[:, i], x, i)


def test_cat_and_stack():
    a, b = rand(2, 3), rand(4, 3)
    check(lambda a, b: torch.cat([a, b]), a, b)
    check(lambda a, b: torch.cat([a.t(), b.t()], dim=1), a, b)
    check(lambda a, b: torch.cat([a, b.to(torch.float64)]), a, b)
    check(lambda a: torch.cat([a, a[:0], a]), a)
    check(lambda a: torch.stack([a, a * 2], dim=1), a)
    check_grad(lambda a, b: torch.cat([a, b], 0) * 2, a, b)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention(causal):
    q, k, v = rand(2, 4, 6, 8), rand(2, 4, 6, 8), rand(2, 4, 6, 8)
    check_grad(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v, rtol=1e-4, atol=1e-4)
    mask = rand(6, 6) > 0
    mask[:, 0] = True
    check_grad(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.device)), q, k, v, rtol=1e-4, atol=1e-4
    )
    bias = rand(2, 1, 6, 6)
    check_grad(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.device)), q, k, v, rtol=1e-4, atol=1e-4
    )


def test_multi_head_attention_module():
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = rand(3, 5, 8)

    def run(x):
        m = copy.deepcopy(mha).to(x.device)
        out, weights = m(x, x, x)
        return out.sum() + weights.sum()

    check_grad(lambda x: run(x), x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_glu_matches_the_cpu_with_gradients(dim):
    check(lambda x: F.glu(x, dim), rand(4, 6, 2))
    check_grad(lambda x: F.glu(x, dim), rand(4, 6, 2))


def test_glu_refuses_an_odd_dimension_as_the_cpu():
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(torch.ones(3, 5, device="tpu"))


@pytest.mark.parametrize("channels", [1, 3])
def test_prelu_matches_the_cpu_with_gradients(channels):
    weight = torch.tensor([0.25, -0.1, 0.5][:channels])
    check(F.prelu, rand(2, 3, 4, 4), weight)
    check_grad(F.prelu, rand(2, 3, 4, 4), weight)
    check_grad(lambda x, w: torch.nn.PReLU(3).to(x.device)(x) * w.sum(), rand(2, 3, 5), weight)


@pytest.mark.parametrize("dim", [0, 1])
def test_weight_norm_matches_the_cpu_with_gradients(dim):
    v, g = rand(4, 6), rand(4, 1) if dim == 0 else rand(1, 6)
    check(lambda v, g: torch._weight_norm_interface(v, g, dim), v, g)
    check(lambda v, g: torch._weight_norm_interface(v, g, dim), v.half(), g.half(), rtol=1e-3, atol=1e-3)
    check_grad(lambda v, g: torch._weight_norm(v, g, dim), v, g, rtol=1e-4, atol=1e-5)
    # The module API, trained a step.
    torch.manual_seed(0)
    cpu = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(6, 4), dim=dim)
    tpu = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(6, 4), dim=dim)
    tpu.load_state_dict(cpu.state_dict())
    tpu = tpu.to("tpu")
    x = rand(3, 6)
    for m, inp in [(cpu, x), (tpu, x.to("tpu"))]:
        m(inp).square().sum().backward()
    for (name, a), (_, b) in zip(cpu.named_parameters(), tpu.named_parameters()):
        torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_embedding_max_norm_renormalizes_the_rows_used_in_place():
    weight = rand(10, 4) * 3
    idx = torch.tensor([[1, 2, 2], [7, 1, 0]])
    for norm_type in [2.0, 1.0]:
        check(lambda w, i: F.embedding(i, w, max_norm=1.5, norm_type=norm_type), weight, idx)  # weight compared too
    check(lambda w, i: torch.embedding_renorm_(w, i, 1.5, 2.0), weight, torch.tensor([3, 3, 9]))
