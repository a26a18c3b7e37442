"""torch.tpu streams and events, as torch.cuda's: every stream of a device
names the device's one op order, so waits always hold (what FSDP2 relies on)."""

import threading

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


def test_event_timing_says_it_is_not_measured():
    a, b = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match="elapsed_time"):
        a.elapsed_time(b)


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
