"""Bad input raises a clear RuntimeError naming the op, the shapes or dtypes
and the user's line; the next op works. Ops without a tpu kernel run on the
CPU: counted, warned about once, refused under EAGERTPU_FALLBACK=error."""

import os
import sys
import threading

import pytest
import torch

import eagertpu
from helpers import next_op_works, run_python

HERE = os.path.abspath(__file__)


def fake_quantize(x):
    """An op with no tpu kernel yet (quantization-aware training's fake
    quantization): it runs through the CPU fallback."""
    return torch.fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 255)


def test_shape_mismatch(mode):
    a, b = torch.ones(3, 4, device="tpu"), torch.ones(5, 4, device="tpu")
    with pytest.raises(RuntimeError, match=r"size of tensor a \(3\) must match the size of tensor b \(5\)"):
        a + b
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 5x4\)"):
        a @ b
    next_op_works()


def test_device_mix_raises_as_on_cuda(mode):
    t, c = torch.ones(3, device="tpu"), torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        t + c
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(t.view(3, 1), c.view(1, 3))
    with pytest.raises(RuntimeError, match="same device"):
        fake_quantize(torch.ones(3, device="tpu")) + c  # through the CPU fallback as well
    assert_same_scalar = (t * torch.tensor(2.0)).sum().item()  # a CPU 0-d tensor is fine, as on CUDA
    assert assert_same_scalar == 6.0
    next_op_works()


def test_unsupported_dtype(mode):
    with pytest.raises(RuntimeError, match="dtype ComplexHalf is not supported on tpu.*complex64 or complex128"):
        torch.zeros(3, dtype=torch.complex32, device="tpu")
    with pytest.raises(RuntimeError, match="not supported on tpu"):
        torch.ones(2, dtype=torch.uint16).to("tpu")
    next_op_works()


def test_out_of_range_index_in_debug_mode_raises_at_the_line():
    x = torch.ones(4, 3, device="tpu")
    i = torch.tensor([0, 7], device="tpu")
    with eagertpu.mode("debug"):
        with pytest.raises(RuntimeError) as e:
            x.index_select(0, i)
    msg = str(e.value)
    assert "index_select" in msg and "index 7 is out of range for dim 0 of size 4" in msg, msg
    assert f"{HERE}:" in msg, msg  # the test's own line, not torch's
    next_op_works()


@pytest.mark.parametrize("mode_name", ["strict", "fused"])
def test_deferred_failure_surfaces_at_sync_with_op_and_line(mode_name):
    with eagertpu.mode(mode_name):
        huge = torch.empty(40_000_000_000, device="tpu")  # 160 GB: the op fails when it runs
        huge.fill_(1.0)
        line = sys._getframe().f_lineno - 1
        y = huge + 1  # recorded after the failing op: fails with it
        with pytest.raises(RuntimeError) as e:
            eagertpu.sync()
        msg = str(e.value)
        assert "fill" in msg or "full" in msg, msg
        assert f"{HERE}:{line}" in msg, msg
        del y, huge
        eagertpu.sync()  # reported once, then cleared
        next_op_works()


@pytest.mark.parametrize("mode_name", ["strict", "fused"])
def test_out_of_range_indices_fail_at_the_next_sync(mode_name):
    x = torch.ones(4, 3, device="tpu")
    with eagertpu.mode(mode_name):
        y = x[torch.tensor([0, 9], device="tpu")] * 2  # the device clamps 9: checked there
        line = sys._getframe().f_lineno - 1
        with pytest.raises(RuntimeError) as e:
            y.cpu()
        msg = str(e.value)
        assert "index_select" in msg and "out of range for dim 0 of size 4" in msg and f"{HERE}:{line}" in msg, msg
        next_op_works()


@pytest.mark.parametrize("mode_name", ["strict", "fused"])
def test_an_op_failing_at_a_line_run_before_names_it_in_every_thread(mode_name):
    # A line's place is looked up once, then read from the backend's cache
    # without taking the GIL: a later failure there, in either of two
    # threads running at once, still names it.
    def pick(x, rows):
        return x[rows] * 2

    line = pick.__code__.co_firstlineno + 1
    x = torch.ones(4, 3, device="tpu")
    messages = []

    def worker():
        for _ in range(20):
            assert pick(x, torch.tensor([0, 1], device="tpu")).sum().item() == 12.0
        try:
            pick(x, torch.tensor([0, 9], device="tpu")).cpu()
        except RuntimeError as e:
            messages.append(str(e))

    with eagertpu.mode(mode_name):
        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        next_op_works()
    assert len(messages) == 2, messages
    for msg in messages:
        assert "out of range" in msg and f"{HERE}:{line}" in msg, msg


@pytest.mark.parametrize("mode_name", ["strict", "fused"])
def test_an_op_inside_a_module_names_the_line_that_called_the_module(mode_name):
    # The failing op runs three torch frames deep (Module.__call__,
    # Embedding.forward, F.embedding): the error names this file's line.
    embed = torch.nn.Embedding(4, 3).to("tpu")
    with eagertpu.mode(mode_name):
        y = embed(torch.tensor([0, 9], device="tpu")) * 2
        line = sys._getframe().f_lineno - 1
        with pytest.raises(RuntimeError) as e:
            y.cpu()
        msg = str(e.value)
        assert "out of range" in msg and f"{HERE}:{line}" in msg, msg
        next_op_works()


def test_out_of_range_targets_raise_in_every_mode(mode):
    logits = torch.randn(3, 5, device="tpu")
    target = torch.tensor([1, 5, 0], device="tpu")
    with pytest.raises(RuntimeError, match=r"out of range .*size 5|index 5 is out of range"):
        torch.nn.functional.cross_entropy(logits, target).item()
    ignored = torch.tensor([1, -100, 0], device="tpu")
    loss = torch.nn.functional.cross_entropy(logits, ignored)
    expected = torch.nn.functional.cross_entropy(logits.cpu(), ignored.cpu())
    assert abs(loss.item() - expected.item()) < 1e-5
    next_op_works()


def test_fallback_is_counted_warned_once_and_correct():
    r = run_python(
        """
        import warnings, torch, eagertpu
        # Fake quantization has no tpu kernel yet: it runs on the CPU.
        x = torch.arange(16.0).view(4, 4) * torch.tensor([1.0, -1.0, 2.0, 0.5])
        quantize = lambda t: torch.fake_quantize_per_tensor_affine(t, 0.1, 0, 0, 255)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in range(3):
                y = quantize(x.to("tpu"))
        assert y.device.type == "tpu", y.device
        torch.testing.assert_close(y.cpu(), quantize(x))
        name = "fake_quantize_per_tensor_affine_cachemask"
        fb = eagertpu.fallbacks()
        assert fb == {"aten::" + name: 3}, fb
        msgs = [str(m.message) for m in w if "no tpu kernel" in str(m.message)]
        assert len(msgs) == 1 and name in msgs[0], msgs
        assert name in eagertpu.metrics_report()
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_fallback_is_an_error_when_asked():
    r = run_python(
        """
        import torch, eagertpu
        x = torch.ones(3, device="tpu")
        try:
            torch.fake_quantize_per_tensor_affine(torch.ones(4, device="tpu"), 0.1, 0, 0, 255)
        except RuntimeError as e:
            assert "fake_quantize_per_tensor_affine" in str(e) and "EAGERTPU_FALLBACK" in str(e), e
            print("raised")
        assert (x + 1).sum().item() == 6.0  # the process keeps working
        """,
        EAGERTPU_FALLBACK="error",
    )
    assert r.returncode == 0 and r.stdout.strip() == "raised", r.stdout + r.stderr


def test_host_syncs_are_reported_by_call_site():
    before = eagertpu.host_syncs()
    x = torch.ones(3, device="tpu")
    for _ in range(5):
        x.sum().item()
        line = sys._getframe().f_lineno - 1
    site = f"{HERE}:{line}"
    assert eagertpu.host_syncs().get(site, 0) - before.get(site, 0) == 5, eagertpu.host_syncs()
    m = eagertpu.metrics()
    assert isinstance(m["compiles"], int) and m["host_syncs_by_site"][site] >= 5
    # The report lists the 20 busiest sites: in this long test process other
    # tests' sites may outnumber this one, in a fresh process it leads.
    r = run_python(
        """
        import torch, eagertpu
        x = torch.ones(3, device="tpu")
        for _ in range(5):
            x.sum().item()
        print(eagertpu.metrics_report())
        """
    )
    assert r.returncode == 0 and "  <string>:5: 5\n" in r.stdout, r.stdout + r.stderr


def test_import_eagertpu_before_torch():
    # Importing torch autoloads eagertpu through its entry point, while
    # `import eagertpu` is still running: this order must work too.
    r = run_python(
        """
        import eagertpu
        import torch
        x = torch.arange(3.0, device="tpu") * 2
        assert x.cpu().tolist() == [0.0, 2.0, 4.0], x.cpu()
        print("ok")
        """
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
