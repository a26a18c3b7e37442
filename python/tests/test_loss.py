"""Regression losses (smooth L1, Huber), binary cross entropy and the
losses PyTorch composes from them, with their gradients, against PyTorch CPU
in every mode (python/csrc/ops_loss.cpp)."""

import pytest
import torch
import torch.nn.functional as F
from helpers import check, check_grad, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


REDUCTIONS = ["mean", "sum", "none"]


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


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_loss_matches_the_cpu_with_gradients(reduction):
    t, n, c = 12, 3, 5
    logits = rand(t, n, c)
    # Repeated labels (a blank must separate them), an empty target.
    targets = torch.tensor([[1, 1, 2, 0], [3, 4, 0, 0], [2, 0, 0, 0]])
    input_lengths, target_lengths = [12, 9, 7], [3, 2, 0]
    ctc = lambda x, tg: F.ctc_loss(x.log_softmax(2), tg, input_lengths, target_lengths, reduction=reduction)
    check(ctc, logits, targets, rtol=1e-4, atol=1e-5)
    check_grad(lambda x: ctc(x, targets.to(x.device)), logits, rtol=1e-4, atol=1e-5)
    # The gradient for log_probs themselves (PyTorch's convention: for the
    # logits before a log_softmax).
    lp = logits.log_softmax(2)
    check_grad(lambda x: F.ctc_loss(x, targets.to(x.device), input_lengths, target_lengths, reduction=reduction),
               lp, rtol=1e-4, atol=1e-5)
    # 1-d concatenated targets and tensor lengths.
    flat = torch.tensor([1, 1, 2, 3, 4])
    check(lambda x, tg, il, tl: F.ctc_loss(x, tg, il, tl, reduction=reduction), lp, flat,
          torch.tensor(input_lengths), torch.tensor(target_lengths), rtol=1e-4, atol=1e-5)


def test_ctc_loss_of_an_impossible_alignment_is_infinite_or_zeroed():
    lp = rand(2, 1, 4).log_softmax(2)
    targets = torch.tensor([[1, 2, 3]])  # 3 labels in 2 steps
    for zero_infinity in [False, True]:
        check(lambda x: F.ctc_loss(x, targets.to(x.device), [2], [3], reduction="none", zero_infinity=zero_infinity), lp)
    check_grad(lambda x: F.ctc_loss(x, targets.to(x.device), [2], [3], reduction="sum", zero_infinity=True), lp)
