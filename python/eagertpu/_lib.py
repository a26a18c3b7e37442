"""ctypes bindings: the runtime's C ABI (libeagertpu_ffi.so) and the few
functions the backend (_backend.so) exports for Python."""

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


def text(fn, *args) -> str:
    """Reads a string from a (buf, capacity, ...) -> size_needed function."""
    need = fn(None, 0, *args)
    buf = ctypes.create_string_buffer(need)
    fn(buf, need, *args)
    return buf.value.decode("utf-8", "replace")


def runtime_report() -> str:
    length = ctypes.c_size_t(0)
    check(ffi.eagertpu_metrics_report(None, 0, ctypes.byref(length)))
    buf = ctypes.create_string_buffer(length.value)
    check(ffi.eagertpu_metrics_report(buf, length.value, ctypes.byref(length)))
    return buf.value.decode("utf-8", "replace")


def runtime_metrics() -> dict:
    import json

    length = ctypes.c_size_t(0)
    check(ffi.eagertpu_metrics_json(None, 0, ctypes.byref(length)))
    buf = ctypes.create_string_buffer(length.value)
    check(ffi.eagertpu_metrics_json(buf, length.value, ctypes.byref(length)))
    return json.loads(buf.value.decode("utf-8", "replace"))


def storage_stats(device: int = -1) -> tuple[int, int]:
    count, nbytes = ctypes.c_int64(0), ctypes.c_int64(0)
    check(ffi.etpu_storage_stats(ctypes.c_int64(device), ctypes.byref(count), ctypes.byref(nbytes)))
    return count.value, nbytes.value


def device_count() -> int:
    n = ctypes.c_int64(0)
    check(ffi.eagertpu_device_count(ctypes.byref(n)))
    return n.value


_backend = None


def backend():
    global _backend
    if _backend is None:
        _backend = ctypes.CDLL(os.path.join(_HERE, "_backend.so"))
        _backend.etpu_py_fallbacks.restype = ctypes.c_size_t
        _backend.etpu_py_fallbacks.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _backend.etpu_py_sync_sites.restype = ctypes.c_size_t
        _backend.etpu_py_sync_sites.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _backend.etpu_py_add_internal_dir.argtypes = [ctypes.c_char_p]
        _backend.etpu_py_manual_seed.argtypes = [ctypes.c_int64, ctypes.c_uint64]
        _backend.etpu_py_initial_seed.argtypes = [ctypes.c_int64]
        _backend.etpu_py_initial_seed.restype = ctypes.c_uint64
        _backend.etpu_py_get_rng_state.argtypes = [ctypes.c_int64, ctypes.c_void_p]
        _backend.etpu_py_set_rng_state.argtypes = [ctypes.c_int64, ctypes.c_void_p]
    return _backend


def counted_lines(fn) -> dict:
    out = {}
    for line in text(fn).splitlines():
        if "\t" in line:
            key, n = line.rsplit("\t", 1)
            out[key] = int(n)
    return out
