"""Functional kernels that make their result in the runtime's call: mm, bmm,
addmm, sum, threshold_backward, softmax and log_softmax and their backwards,
nll_loss and its backward, layer norm. The
common case (tpu operands of one dtype, shapes that fit) takes the fast path,
with no allocation made before the op; everything else takes PyTorch's
structured path (meta function, empty output, out= kernel), with its errors.
Both are checked against PyTorch CPU."""

import json

import pytest
import torch
import torch.nn.functional as F
from helpers import FLOATS, assert_same, check, check_grad, next_op_works, rand, run_python, tpu

aten = torch.ops.aten


@pytest.mark.parametrize("dtype", FLOATS)
def test_matrix_products_of_each_float_dtype(dtype):
    check(torch.mm, rand(5, 7, dtype=dtype), rand(7, 3, dtype=dtype))
    check(torch.bmm, rand(2, 5, 7, dtype=dtype), rand(2, 7, 3, dtype=dtype))
    check(torch.addmm, rand(3, dtype=dtype), rand(5, 7, dtype=dtype), rand(7, 3, dtype=dtype))


def test_addmm_broadcasts_its_bias_and_scales():
    check(torch.addmm, rand(1, 3), rand(5, 7), rand(7, 3), beta=0.5, alpha=2.0)
    check(torch.addmm, rand(5, 1), rand(5, 7), rand(7, 3), beta=2, alpha=-1)
    check(torch.addmm, rand(5, 3), rand(5, 7), rand(7, 3))
    # beta = 0 ignores the bias, NaN and all (as on the CPU).
    check(torch.addmm, torch.full((3,), float("nan")), rand(5, 7), rand(7, 3), beta=0)


def test_matrix_products_of_integers_complex_numbers_and_conjugate_views():
    # Integers exactly (products past 2**53 would round through a double).
    big = torch.tensor([[2**40 + 1, 3], [-7, 2**20]])
    check(torch.mm, big, torch.tensor([[2**12 + 1, 0], [5, -1]]))
    check(torch.addmm, torch.tensor([1, 2**50]), big, torch.eye(2, dtype=torch.long), beta=3, alpha=2)
    z = lambda *s: torch.randn(*s, dtype=torch.complex64)

    def close(fn, *args, **kwargs):  # complex results, within float32's rounding
        got = fn(*tpu(args), **kwargs)
        assert got.device.type == "tpu" and got.dtype == torch.complex64
        torch.testing.assert_close(got.cpu(), fn(*args, **kwargs), rtol=1e-5, atol=1e-5)

    # Complex scales (numbers the C ABI does not take: computed on handles).
    close(torch.addmm, z(3), z(5, 7), z(7, 3), beta=1 + 1j, alpha=0.5 - 2j)
    close(torch.addmm, z(3), z(5, 7), z(7, 3), beta=2, alpha=-1)
    # A lazily conjugated operand: its values, not its memory's.
    close(lambda a, b: torch.mm(a.conj(), b), z(4, 6), z(6, 2))
    close(lambda c, a, b: torch.addmm(c, a, b.conj()), z(2), z(4, 6), z(6, 2))


def test_matrix_products_with_empty_and_transposed_operands():
    check(torch.mm, rand(0, 4), rand(4, 3))
    check(torch.mm, rand(5, 0), rand(0, 3))  # zeros of (5, 3)
    check(lambda a, b: torch.mm(a.t(), b.t()), rand(7, 5), rand(3, 7))
    check(lambda a, b: torch.bmm(a.transpose(1, 2), b), rand(2, 7, 5), rand(2, 7, 3))


def test_matrix_products_the_fast_path_refuses_keep_pytorchs_errors():
    cases = [
        (torch.mm, (rand(2, 3), rand(4, 5))),  # shapes that do not multiply
        (torch.mm, (rand(3), rand(3, 5))),  # not a matrix
        (torch.bmm, (rand(2, 2, 3), rand(3, 3, 5))),  # batches apart
    ]
    for fn, args in cases:
        with pytest.raises(RuntimeError) as cpu_error:
            fn(*args)
        with pytest.raises(RuntimeError) as tpu_error:
            fn(*tpu(list(args)))
        assert str(tpu_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0], fn
    # What the CPU kernel refuses (not the meta function), the runtime's ops
    # refuse, naming what they got.
    for fn, args, named in [
        (torch.mm, (rand(2, 3), rand(3, 5, dtype=torch.float64)), "float64"),
        (torch.addmm, (rand(5, dtype=torch.float64), rand(2, 3), rand(3, 5)), "Double and Float"),
        (torch.addmm, (rand(4), rand(2, 3), rand(3, 5)), r"\[4\] and \[2, 5\]"),  # a bias that does not broadcast
    ]:
        with pytest.raises(RuntimeError):
            fn(*args)
        with pytest.raises(RuntimeError, match=named):
            fn(*tpu(list(args)))
    next_op_works()


def test_a_cpu_operand_is_refused_with_both_devices_named():
    with pytest.raises(RuntimeError, match="tpu and cpu"):
        torch.mm(rand(2, 3).to("tpu"), rand(3, 2))
    next_op_works()


@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_over_dims(dtype):
    x = rand(3, 4, 5, dtype=dtype)
    for dim, keepdim in [([0], False), ([1, -1], True), ([-3, 2], False), ([], False), ([], True), ([2, 0, 1], True)]:
        check(lambda t: torch.sum(t, dim, keepdim=keepdim), x)
    check(lambda t: t.sum(), x)
    check(lambda t: t.sum(dim=None, keepdim=True), x)


def test_sum_the_fast_path_refuses_follows_pytorch():
    check(lambda t: t.sum(0, dtype=torch.float64), rand(3, 4))  # another dtype
    check(lambda t: t.sum(1), rand(3, 4, dtype=torch.int32))  # ints sum in int64
    check(lambda t: t.sum(0), torch.tensor(2.5))  # a 0-d tensor
    check(lambda t: t.sum(1), rand(3, 0))
    for bad in ([0, 0], [3], [-4]):
        with pytest.raises((RuntimeError, IndexError)) as cpu_error:
            rand(3, 4, 5).sum(bad)
        with pytest.raises(type(cpu_error.value)) as tpu_error:
            rand(3, 4, 5).to("tpu").sum(bad)
        assert str(tpu_error.value) == str(cpu_error.value)
    next_op_works()


def test_relu_backward_of_contiguous_and_strided_inputs():
    check_grad(torch.relu, rand(6, 5))
    check_grad(lambda t: torch.relu(t.t()), rand(5, 6))  # strided: the structured path
    check(aten.threshold_backward, rand(4, 5), rand(4, 5), 0.5)
    check(aten.threshold_backward, rand(4, 5, dtype=torch.float64), rand(4, 5, dtype=torch.float64), -0.25)
    check(aten.threshold_backward, rand(4, 5), rand(5), 0.0)  # broadcast: the structured path


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_and_its_gradient(reduction):
    logits, target = rand(6, 5), torch.tensor([0, 4, 2, -100, 1, 4])
    check_grad(lambda x: F.nll_loss(F.log_softmax(x, 1), target.to(x.device), reduction=reduction), logits)
    in_range = torch.tensor([0, 4, 2, 3, 1, 4])
    check_grad(
        lambda x: F.nll_loss(F.log_softmax(x, 1), in_range.to(x.device), reduction=reduction, ignore_index=4), logits
    )
    check_grad(lambda x: F.cross_entropy(x, target.to(x.device), reduction=reduction), logits)


def test_nll_loss_the_fast_path_refuses_follows_pytorch():
    weight = rand(5, low=0.5, high=2.0)
    target = torch.tensor([0, 4, 2, 3])
    check(lambda x, t, w: F.nll_loss(x, t, weight=w), rand(4, 5), target, weight)  # class weights
    check(lambda x, t: F.nll_loss(x, t), rand(5), torch.tensor(3))  # one item
    check(lambda x, t: F.nll_loss(x, t), rand(2, 5, 3), torch.tensor([[0, 1, 4], [2, 2, 0]]))  # spatial
    with pytest.raises(ValueError) as cpu_error:
        F.nll_loss(rand(4, 5), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError) as tpu_error:
        F.nll_loss(rand(4, 5).to("tpu"), torch.tensor([0, 1, 2]).to("tpu"))
    assert str(tpu_error.value) == str(cpu_error.value)
    with pytest.raises(RuntimeError) as cpu_error:
        aten.nll_loss_forward(rand(4, 5), torch.tensor([0, 1, 2]), None, 1, -100)
    with pytest.raises(RuntimeError) as tpu_error:
        aten.nll_loss_forward(rand(4, 5).to("tpu"), torch.tensor([0, 1, 2]).to("tpu"), None, 1, -100)
    assert str(tpu_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]
    next_op_works()


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_and_log_softmax_with_their_gradients(dtype):
    x = rand(3, 4, 5, dtype=dtype)
    for dim in (0, 1, -1):
        check(lambda t: torch.softmax(t, dim), x)
        check(lambda t: torch.log_softmax(t, dim), x)
        check(lambda t: torch.softmax(t.transpose(0, 2), dim), x)  # strided input
    if dtype in (torch.float32, torch.float64):
        check_grad(lambda t: torch.softmax(t, 1), rand(3, 4, 5, dtype=dtype))
        check_grad(lambda t: torch.log_softmax(t, -1), rand(3, 4, 5, dtype=dtype))


def test_softmax_the_fast_path_refuses_follows_pytorch():
    # Half to float (the CPU has no such kernel: its float result is the reference).
    x = rand(3, 4, dtype=torch.float16)
    assert_same(aten._softmax(tpu(x), 0, True), torch.softmax(x.float(), 0), rtol=1e-3, atol=1e-3)
    assert_same(aten._log_softmax(tpu(x), 1, True), torch.log_softmax(x.float(), 1), rtol=1e-3, atol=1e-3)
    check(lambda t: torch.softmax(t, 0), torch.tensor(1.5))  # 0-d
    check(lambda t: torch.log_softmax(t, -1), rand(0, 3))
    check(lambda t: torch.softmax(t, 1, dtype=torch.float64), rand(3, 4))
    g, out = rand(3, 4), torch.softmax(rand(3, 4), 1)
    check(lambda g, o: aten._softmax_backward_data(g, o, 1, torch.float32), g, out)
    check(lambda g, o: aten._log_softmax_backward_data(g, o, 0, torch.float32), g, out)
    for bad in (2, -3):
        with pytest.raises(IndexError) as cpu_error:
            torch.softmax(rand(3, 4), bad)
        with pytest.raises(IndexError) as tpu_error:
            torch.softmax(rand(3, 4).to("tpu"), bad)
        assert str(tpu_error.value) == str(cpu_error.value)
    next_op_works()


def test_layer_norm_results_and_gradients():
    check_grad(lambda x: F.layer_norm(x, (6,)), rand(3, 4, 6))
    w, b = rand(4, 6), rand(4, 6)
    check_grad(lambda x, w, b: F.layer_norm(x, (4, 6), w, b), rand(3, 4, 6), w, b)
    out, mean, rstd = aten.native_layer_norm(rand(3, 6).to("tpu"), [6], None, None, 1e-5)
    expected = aten.native_layer_norm(out.cpu(), [6], None, None, 1e-5)
    assert [t.shape for t in (out, mean, rstd)] == [t.shape for t in expected]


def test_the_fast_paths_make_no_allocation_before_the_op():
    # Each functional kernel's C calls, counted: the op's result is made by
    # the call that computes it (no etpu_storage_new, no view written), as a
    # fresh add's is. An empty tensor then the out= kernel would add at
    # least two calls and one view write each.
    r = run_python(
        """
        import json, torch, eagertpu
        import torch.nn.functional as F
        aten = torch.ops.aten
        a, w, b = torch.randn(8, 32).to("tpu"), torch.randn(32, 16).to("tpu"), torch.randn(16).to("tpu")
        logp = F.log_softmax(torch.randn(8, 10), 1).to("tpu")
        y = torch.randint(0, 10, (8,)).to("tpu")
        loss, total = aten.nll_loss_forward(logp, y, None, 1, -100)
        cases = {
            "mm": lambda: torch.mm(a, w),
            "addmm": lambda: torch.addmm(b, a, w),
            "sum": lambda: a.sum(0),
            "threshold_backward": lambda: aten.threshold_backward(a, a, 0.0),
            "log_softmax": lambda: aten._log_softmax(a, 1, False),
            "log_softmax_backward": lambda: aten._log_softmax_backward_data(a, a, 1, torch.float32),
            "nll_loss_forward": lambda: aten.nll_loss_forward(logp, y, None, 1, -100),
            "nll_loss_backward": lambda: aten.nll_loss_backward(loss, logp, y, None, 1, -100, total),
        }
        out = {}
        for name, fn in cases.items():
            fn()
            t0 = eagertpu.metrics()["op_timing"]
            for _ in range(100):
                fn()
            t1 = eagertpu.metrics()["op_timing"]
            out[name] = {k: t1[k]["calls"] - t0[k]["calls"] for k in ("abi", "views")}
        print(json.dumps(out))
        """,
        EAGERTPU_OP_TIMING="1",
        EAGERTPU_MODE="fused",
    )
    assert r.returncode == 0, r.stderr
    calls = json.loads(r.stdout.strip().splitlines()[-1])
    # Per call: the op over its operands' views making its result
    # (etpu_op_new, etpu_pointwise_new), then the previous result freed; one
    # view read per operand, no view written. nll_loss_forward (two results)
    # still reads its operands as handles (a view read, a handle freed
    # each), runs the op, then has each result held (etpu_storage_holding)
    # and its handle freed.
    expected = {
        "mm": (1 + 1, 2),
        "addmm": (1 + 1, 3),
        "sum": (1 + 1, 1),
        "threshold_backward": (1 + 1, 2),
        "log_softmax": (1 + 1, 1),
        "log_softmax_backward": (1 + 1, 2),
        "nll_loss_forward": (2 * 2 + 1 + 2 * 2 + 2, 2),
        "nll_loss_backward": (1 + 1, 4),
    }
    for name, (abi, views) in expected.items():
        # (+1: the metrics read itself may be counted)
        assert 100 * abi <= calls[name]["abi"] <= 100 * abi + 1, (name, calls[name])
        assert calls[name]["views"] == 100 * views, (name, calls[name])
