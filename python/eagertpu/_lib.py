"""ctypes bindings of the runtime's C ABI (libeagertpu_ffi.so, include/eagertpu.h).
The backend (_backend.so) is reached through PyTorch: its kernels, and
torch.ops.eagertpu.* for the generators."""

import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))

ffi = ctypes.CDLL(os.path.join(_HERE, "libeagertpu_ffi.so"), mode=ctypes.RTLD_GLOBAL)
ffi.eagertpu_last_error.restype = ctypes.c_char_p
ffi.eagertpu_version.restype = ctypes.c_char_p

MODES = {"debug": 0, "strict": 1, "fused": 2}
MODE_NAMES = {v: k for k, v in MODES.items()}


def check(status: int) -> None:
    if status != 0:
        raise RuntimeError(ffi.eagertpu_last_error().decode("utf-8", "replace"))


def _read_text(fn) -> str:
    """The text `fn(buf, capacity, &length)` writes. The text can grow between
    asking its length and reading it (another thread's op, a rank arriving at
    a collective): read again, larger, until it fits."""
    capacity = 4096
    while True:
        length = ctypes.c_size_t(0)
        buf = ctypes.create_string_buffer(capacity)
        check(fn(buf, capacity, ctypes.byref(length)))
        if length.value <= capacity:  # the NUL included
            return buf.value.decode("utf-8", "replace")
        capacity = 2 * length.value


def runtime_report() -> str:
    return _read_text(ffi.eagertpu_metrics_report)


def runtime_metrics() -> dict:
    import json

    return json.loads(_read_text(ffi.eagertpu_metrics_json))


def storage_stats(device: int = -1) -> tuple[int, int]:
    count, nbytes = ctypes.c_int64(0), ctypes.c_int64(0)
    check(ffi.etpu_storage_stats(ctypes.c_int64(device), ctypes.byref(count), ctypes.byref(nbytes)))
    return count.value, nbytes.value


class MemoryCounts(ctypes.Structure):
    """`etpu_memory_counts` (include/eagertpu.h)."""

    _fields_ = [(name, ctypes.c_int64) for name in (
        "allocations", "bytes", "peak_allocations", "peak_bytes",
        "allocated_count", "allocated_bytes", "freed_count", "freed_bytes",
        "device_bytes_in_use", "device_peak_bytes_in_use", "device_bytes_limit")]


def memory_usage(device: int) -> MemoryCounts:
    usage = MemoryCounts()
    check(ffi.etpu_memory_usage(ctypes.c_int64(device), ctypes.byref(usage)))
    return usage


def memory_reset(device: int, what: int) -> None:
    """what = 1: the peaks; 2: the allocated and freed counts."""
    check(ffi.etpu_memory_reset(ctypes.c_int64(device), ctypes.c_int32(what)))


def device_kind(device: int) -> str:
    return _read_text(lambda buf, cap, length: ffi.etpu_device_kind(ctypes.c_int64(device), buf, cap, length))


def platform_name() -> str:
    return _read_text(ffi.etpu_platform_name)


def device_count() -> int:
    n = ctypes.c_int64(0)
    check(ffi.eagertpu_device_count(ctypes.byref(n)))
    return n.value
