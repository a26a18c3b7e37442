"""`torch.tpu`: the device module of the `tpu` backend, in the shape of
`torch.cuda` (device_count, is_available, synchronize, manual_seed, memory,
streams and events, `amp`)."""

import os

import torch

from . import _lib
from . import amp  # noqa: F401 - torch.tpu.amp, as torch.cuda.amp


def is_available() -> bool:
    try:
        return _lib.device_count() > 0
    except RuntimeError:
        return False


def device_count() -> int:
    return _lib.device_count()


def current_device() -> int:
    """This thread's current tpu device (each thread has its own, as in CUDA)."""
    return torch.accelerator.current_device_index()


def set_device(device) -> None:
    torch.accelerator.set_device_index(_index(device))


class device:
    """`with torch.tpu.device(i):` makes `i` the current tpu device in the block."""

    def __init__(self, device):
        self.index = _index(device)
        self.previous = None

    def __enter__(self):
        self.previous = current_device()
        set_device(self.index)

    def __exit__(self, *exc):
        set_device(self.previous)
        return False


def _index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    return torch.device(device).index or 0


def synchronize(device=None) -> None:
    """Waits for everything recorded on `tpu` (raises the first failure)."""
    _lib.check(_lib.ffi.eagertpu_sync())


def _int64_bits(seed: int) -> int:
    """A 64-bit seed as the int64 with the same bits (as torch.manual_seed takes it)."""
    seed = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    return seed - (1 << 64) if seed >= 1 << 63 else seed


def manual_seed(seed: int) -> None:
    """Seeds the current tpu device's generator (`torch.manual_seed` seeds all)."""
    torch.ops.eagertpu.manual_seed(current_device(), _int64_bits(seed))


def manual_seed_all(seed: int) -> None:
    torch.ops.eagertpu.manual_seed(-1, _int64_bits(seed))


def seed() -> None:
    """Seeds the current device's generator with a non-deterministic number."""
    manual_seed(int.from_bytes(os.urandom(8), "little"))


def seed_all() -> None:
    manual_seed_all(int.from_bytes(os.urandom(8), "little"))


def initial_seed() -> int:
    return torch.ops.eagertpu.initial_seed(current_device()) & 0xFFFF_FFFF_FFFF_FFFF


def get_rng_state(device="tpu") -> torch.Tensor:
    """The generator's state: a CPU uint8 tensor (seed and draw counter)."""
    return torch.ops.eagertpu.get_rng_state(_index(device))


def set_rng_state(state: torch.Tensor, device="tpu") -> None:
    state = state.to(device="cpu", dtype=torch.uint8).reshape(-1)
    if state.numel() != 16:
        raise ValueError(f"a tpu generator state has 16 bytes, got {state.numel()}")
    torch.ops.eagertpu.set_rng_state(_index(device), state)


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states) -> None:
    for i, state in enumerate(states):
        set_rng_state(state, i)


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def memory_allocated(device=None) -> int:
    """Bytes of tensor storage allocated on `device` (all devices if None)."""
    return _lib.storage_stats(-1 if device is None else _index(device))[1]


def memory_stats(device=None) -> dict:
    count, nbytes = _lib.storage_stats(-1 if device is None else _index(device))
    return {"allocated_bytes.all.current": nbytes, "allocation.all.current": count}


def get_amp_supported_dtype() -> list:
    """Autocast's lower-precision dtypes on tpu."""
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bf16 is a tpu's native lower precision (autocast's default here)."""
    return True


class Stream(torch.Stream):
    """A stream of a tpu device, as `torch.cuda.Stream`.

    EagerTPU runs a device's ops in the order they are issued, so every stream
    of a device names that one order: `wait_stream`, `wait_event` and
    `record_event` always hold (the work after a wait is issued after what it
    waits for), and streams never overlap work. Code written for CUDA streams
    (FSDP2's all-gather streams) runs unchanged and right."""

    def __new__(cls, device=None, priority=0, **kwargs):
        return super().__new__(cls, device=torch.device("tpu", _index(device)), priority=priority, **kwargs)


def Event(enable_timing=False, blocking=False, interprocess=False) -> torch.Event:  # noqa: N802 - torch.cuda.Event's name
    """An event of the current tpu device, as `torch.cuda.Event` (a plain
    `torch.Event`: PyTorch's own methods take no subclass). A recorded event is
    complete once the work before it is (`synchronize` waits for the device);
    `query` reports it done, as reads of results wait for their work anyway.
    `elapsed_time` is not measured yet and raises."""
    return torch.Event(
        torch.device("tpu", current_device()), enable_timing=enable_timing, blocking=blocking,
        interprocess=interprocess,
    )


def current_stream(device=None) -> torch.Stream:
    """This thread's current stream of `device`."""
    return torch.accelerator.current_stream(torch.device("tpu", _index(device)))


def default_stream(device=None) -> torch.Stream:
    """The stream a thread starts with on `device` (id 0)."""
    index = _index(device)
    return torch.Stream(stream_id=0, device_index=index, device_type=current_stream(index).device_type)


def set_stream(stream: torch.Stream) -> None:
    """Makes `stream` this thread's current stream of its device."""
    torch.accelerator.set_stream(stream)


class stream:
    """`with torch.tpu.stream(s):` makes `s` the current stream in the block
    (None: no change), as `torch.cuda.stream`."""

    def __init__(self, stream):
        self.stream = stream
        self.previous = None

    def __enter__(self):
        if self.stream is not None:
            self.previous = current_stream(self.stream.device_index)
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.previous is not None:
            set_stream(self.previous)
        return False
