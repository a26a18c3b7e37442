"""torch.tpu streams and events, as torch.cuda's: every stream of a device
names the device's one op order, so waits always hold (what FSDP2 relies on)."""

import threading
import time

import pytest
import torch


def test_work_on_a_side_stream_is_seen_after_wait_stream(mode):
    main = torch.tpu.current_stream()
    side = torch.tpu.Stream()
    assert side.stream_id != main.stream_id
    x = torch.arange(6.0, device="tpu")
    side.wait_stream(main)
    with torch.tpu.stream(side):
        assert torch.tpu.current_stream() == side
        y = x * 3 + 1
    assert torch.tpu.current_stream() == main
    main.wait_stream(side)
    assert torch.equal(y.cpu(), torch.arange(6.0) * 3 + 1)


def test_an_event_orders_streams_and_synchronizes(mode):
    side = torch.tpu.Stream()
    with torch.tpu.stream(side):
        y = torch.ones(4, device="tpu").cumsum(0)
        done = side.record_event()
    torch.tpu.current_stream().wait_event(done)
    done.synchronize()
    assert done.query()
    assert torch.equal(y.cpu(), torch.tensor([1.0, 2.0, 3.0, 4.0]))
    e = torch.tpu.Event()
    e.record()
    e.wait()
    assert e.query()


def timed_pair(work):
    """Events around `work()`'s ops: (elapsed_time, the host's wall time
    from before the first record to after the second synchronize), in ms."""
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    out = work()
    end.record()
    end.synchronize()
    wall = (time.perf_counter() - t0) * 1e3
    assert start.query() and end.query()
    return start.elapsed_time(end), wall, out


def test_event_timing_measures_the_work_between_two_events(mode):
    x = torch.randn(384, 384, device="tpu") * 0.01  # a contraction: rounding does not grow
    torch.tpu.synchronize()

    def matmuls(n):
        y = x
        for _ in range(n):
            y = torch.tanh(y @ x)
        return y

    nothing, nothing_wall, _ = timed_pair(lambda: None)
    busy, busy_wall, y = timed_pair(lambda: matmuls(40))
    # Both ends of each interval lie inside the host's own interval around it.
    assert 0 <= nothing <= nothing_wall
    assert 0 < busy <= busy_wall
    assert busy > nothing
    want = x.cpu()
    for _ in range(40):
        want = torch.tanh(want @ x.cpu())
    torch.testing.assert_close(y.cpu(), want, rtol=1e-4, atol=1e-4)


def test_event_timing_needs_timing_events_recorded_and_complete():
    a, b = torch.tpu.Event(), torch.tpu.Event()
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        a.elapsed_time(b)
    c, d = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    c.record()
    with pytest.raises(ValueError, match="recorded"):
        c.elapsed_time(d)
    d.record()
    d.synchronize()
    assert c.elapsed_time(d) >= 0


def test_recording_an_event_launches_pending_work_and_synchronize_waits_for_it(mode):
    import eagertpu

    before = eagertpu.metrics()["chunks"]["event"]
    y = torch.ones(1000, device="tpu").cumsum(0) * 2
    e = torch.tpu.Event()
    e.record()
    e.synchronize()
    assert e.query()
    if mode == "fused":
        assert eagertpu.metrics()["chunks"]["event"] == before + 1
    assert y[-1].item() == 2000.0


def test_the_current_stream_and_device_are_per_thread():
    side = torch.tpu.Stream()
    torch.tpu.set_stream(side)
    seen = {}

    def other():
        seen["stream"] = torch.tpu.current_stream().stream_id
        torch.tpu.set_device(0)
        seen["device"] = torch.tpu.current_device()

    try:
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert seen["stream"] == 0
        assert torch.tpu.current_stream() == side
        assert torch.tpu.default_stream().stream_id == 0
    finally:
        torch.tpu.set_stream(torch.tpu.default_stream())


def test_device_of_a_tensor_is_current_in_the_block():
    before = torch.tpu.current_device()
    other = torch.tpu.device_count() - 1
    t = torch.ones(2, device=f"tpu:{other}")
    with torch.tpu.device_of(t):
        assert torch.tpu.current_device() == other
        with torch.tpu.device_of(torch.ones(2)):  # a CPU tensor changes nothing
            assert torch.tpu.current_device() == other
    assert torch.tpu.current_device() == before
