"""`torch.tpu`: the device module of the `tpu` backend, in the shape of
`torch.cuda` (device_count, is_available, synchronize, manual_seed, memory,
streams and events, `amp`)."""

import os
import threading

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


# Memory. EagerTPU has no caching allocator of its own: a tensor's storage is
# registered with the runtime when PyTorch allocates it and forgotten when
# PyTorch frees it, and the device buffers behind it are the plugin's. So
# "allocated" counts the bytes of live tpu storages (as torch.cuda counts live
# tensors' blocks) and "reserved" is what the plugin reports holding where it
# reports it (libtpu, CUDA), else the allocated bytes (nothing is cached).


def memory_allocated(device=None) -> int:
    """Bytes of live tpu storage on `device` (the current device if None)."""
    return _lib.memory_usage(_index(device)).bytes


def max_memory_allocated(device=None) -> int:
    """The peak of `memory_allocated` since the start or the last
    `reset_peak_memory_stats`."""
    return _lib.memory_usage(_index(device)).peak_bytes


def memory_reserved(device=None) -> int:
    """Bytes the plugin holds for `device` where it reports them (libtpu,
    CUDA); else `memory_allocated` (no allocator cache holds more)."""
    u = _lib.memory_usage(_index(device))
    return u.device_bytes_in_use if u.device_bytes_in_use >= 0 else u.bytes


def max_memory_reserved(device=None) -> int:
    """The plugin's peak for `device` where it reports one; else
    `max_memory_allocated`."""
    u = _lib.memory_usage(_index(device))
    return u.device_peak_bytes_in_use if u.device_peak_bytes_in_use >= 0 else u.peak_bytes


def reset_peak_memory_stats(device=None) -> None:
    """Starts the peaks again from what is live now (the plugin's own peak,
    where it keeps one, is the plugin's and is not reset)."""
    _lib.memory_reset(_index(device), 1)


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def memory_cached(device=None) -> int:
    """`memory_reserved` under its old name (torch.cuda keeps it for old
    callers, DeepSpeed's accelerator among them)."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """`max_memory_reserved` under its old name."""
    return max_memory_reserved(device)


def reset_max_memory_cached(device=None) -> None:
    """`reset_peak_memory_stats` under its old name."""
    reset_peak_memory_stats(device)


OutOfMemoryError = torch.OutOfMemoryError


def reset_accumulated_memory_stats(device=None) -> None:
    """Zeroes the counts of allocations made and freed."""
    _lib.memory_reset(_index(device), 2)


def memory_stats(device=None) -> dict:
    """`torch.cuda.memory_stats`'s keys that mean something here: live, peak,
    allocated and freed bytes and allocations, and the reserved bytes."""
    u = _lib.memory_usage(_index(device))
    stats = {}
    for key, value in (("allocated_bytes", u.bytes), ("allocation", u.allocations)):
        peak = u.peak_bytes if key == "allocated_bytes" else u.peak_allocations
        made = u.allocated_bytes if key == "allocated_bytes" else u.allocated_count
        freed = u.freed_bytes if key == "allocated_bytes" else u.freed_count
        for name, v in (("current", value), ("peak", peak), ("allocated", made), ("freed", freed)):
            stats[f"{key}.all.{name}"] = v
    stats["reserved_bytes.all.current"] = memory_reserved(device)
    stats["reserved_bytes.all.peak"] = max_memory_reserved(device)
    stats["num_alloc_retries"] = 0
    stats["num_ooms"] = 0
    return stats


def memory_summary(device=None, abbreviated=False) -> str:
    """A few lines on `device`'s memory, as `torch.cuda.memory_summary`."""
    stats = memory_stats(device)
    mib = 1 << 20
    lines = [f"tpu:{_index(device)} ({get_device_name(device)}) memory"]
    for label, key in (("allocated", "allocated_bytes"), ("reserved", "reserved_bytes")):
        lines.append(f"  {label:<10} {stats[key + '.all.current'] / mib:10.1f} MiB now, "
                     f"{stats[key + '.all.peak'] / mib:10.1f} MiB peak")
    lines.append(f"  allocations {stats['allocation.all.current']} live, {stats['allocation.all.peak']} peak, "
                 f"{stats['allocation.all.allocated']} made, {stats['allocation.all.freed']} freed")
    return "\n".join(lines) + "\n"


def _host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory, from /proc/meminfo."""
    fields = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            fields[name] = int(rest.split()[0]) * 1024
    return fields["MemAvailable"], fields["MemTotal"]


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of `device`'s memory: from the plugin's limit and
    use where it reports them (libtpu, CUDA); on the XLA CPU plugin, whose
    device memory is the host's, the host's available and total memory. A
    plugin that reports neither raises, saying so."""
    u = _lib.memory_usage(_index(device))
    if u.device_bytes_limit >= 0 and u.device_bytes_in_use >= 0:
        return u.device_bytes_limit - u.device_bytes_in_use, u.device_bytes_limit
    if _lib.platform_name().lower() == "cpu":
        return _host_memory()
    raise RuntimeError(f"mem_get_info: the {_lib.platform_name()} PJRT plugin reports no memory limit for tpu:"
                       f"{_index(device)} (PJRT_Device_MemoryStats has no bytes_limit)")


def empty_cache() -> None:
    """Runs what is pending, so that buffers only pending work held are freed.
    There is no allocator cache to empty: freed storage goes back to the
    plugin at once."""
    synchronize()


class _DeviceProperties:
    """`torch.tpu.get_device_properties(i)`: what the plugin says of device i
    (`name`, `platform`, `total_memory`, `index`), in the shape of CUDA's
    properties object for the fields that apply."""

    def __init__(self, index: int):
        self.index = index
        self.name = _lib.device_kind(index)
        self.platform = _lib.platform_name()
        self.total_memory = mem_get_info(index)[1]

    def __repr__(self):
        return (f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
                f"total_memory={self.total_memory // (1 << 20)}MB, index={self.index})")


def get_device_name(device=None) -> str:
    """The device's kind as the plugin names it (`cpu` on the XLA CPU plugin,
    `TPU v5 lite` on libtpu)."""
    return _lib.device_kind(_index(device))


def get_device_properties(device=None) -> _DeviceProperties:
    return _DeviceProperties(_index(device))


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
    `torch.Event`: PyTorch's own methods take no subclass). Recording it
    launches what is pending on the device; it is complete (`query`) when the
    work launched before it is, and `synchronize` waits for that work only.
    With `enable_timing=True`, `start.elapsed_time(end)` is the device's time
    between the two in milliseconds: when the work before each finished, as
    the plugin reports it done (PJRT has no device timestamps; the host learns
    of each completion microseconds after it)."""
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


class device_of(device):
    """`with torch.tpu.device_of(t):` makes the device of tensor `t` current in
    the block (no change for a CPU tensor), as `torch.cuda.device_of`."""

    def __init__(self, obj):
        super().__init__(obj.device if obj.device.type == "tpu" else None)


# Named ranges in profiler traces, what torch.cuda.nvtx's range_push/range_pop
# are on CUDA (DeepSpeed's accelerator calls them around training phases):
# each is a `torch.profiler.record_function` range on this thread.
_ranges = threading.local()


def range_push(msg: str) -> int:
    """Opens a range named `msg` in profiler traces; its nesting depth."""
    ctx = torch.autograd.profiler.record_function(msg)
    ctx.__enter__()
    stack = _ranges.__dict__.setdefault("stack", [])
    stack.append(ctx)
    return len(stack) - 1


def range_pop() -> int:
    """Closes the innermost open range of this thread; the depth it was at
    (-1 when none was open, as nvtx's)."""
    stack = _ranges.__dict__.setdefault("stack", [])
    if not stack:
        return -1
    stack.pop().__exit__(None, None, None)
    return len(stack)


class _Range:
    """`with torch.tpu.nvtx.range("phase"):` a range around the block."""

    def __init__(self, msg: str):
        self.msg = msg

    def __enter__(self):
        range_push(self.msg)

    def __exit__(self, *exc):
        range_pop()
        return False


class nvtx:
    """`torch.tpu.nvtx.range_push/range_pop/range`, where code written for
    `torch.cuda.nvtx` looks for them."""

    range_push = staticmethod(range_push)
    range_pop = staticmethod(range_pop)
    range = _Range


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
