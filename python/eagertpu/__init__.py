"""EagerTPU for PyTorch: `torch.device("tpu")` as a real device.

`import eagertpu` (or just `import torch`: the `torch.backends` entry point
autoloads it) registers the `tpu` device (PyTorch's PrivateUse1 slot): plain
tensors, no subclasses or wrappers. Ops run on EagerTPU's runtime in the mode
`EAGERTPU_MODE` picks (debug, strict, fused); ops without a tpu kernel run on
the CPU, counted (`fallbacks()`), warned about once, or refused under
`EAGERTPU_FALLBACK=error`.
"""

import atexit
import contextlib
import os
import warnings


def _autoload() -> None:
    """The `torch.backends` entry point: importing this module registers the
    device (or warns why it could not). Defined before `import torch`, which
    calls it: `import eagertpu` before `import torch` works too."""


import torch  # noqa: E402 - after _autoload, which importing torch calls

from . import _lib, dynamo

__all__ = [
    "sync",
    "set_mode",
    "get_mode",
    "mode",
    "metrics",
    "metrics_report",
    "fallbacks",
    "host_syncs",
    "memory_info",
]

_HERE = os.path.dirname(os.path.abspath(__file__))
_registered = False


def _register() -> None:
    global _registered
    if _registered:
        return
    torch.ops.load_library(os.path.join(_HERE, "_backend.so"))
    torch.utils.rename_privateuse1_backend("tpu")
    from . import tpu as _tpu

    torch._register_device_module("tpu", _tpu)
    # Errors and host syncs name the user's line: the innermost frame outside these.
    for d in (os.path.dirname(torch.__file__), _HERE, os.path.dirname(contextlib.__file__)):
        torch.ops.eagertpu.add_internal_dir(os.path.join(d, ""))
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    dynamo.install_inductor_hook()
    if torch.distributed.is_available():
        from . import distributed

        distributed.register()
    _registered = True


# Registration must never break `import torch` (which imports this module
# through the entry point): a failure is a warning here, and an error at the
# first use of this API.
_load_error = None


def _shutdown_at_exit() -> None:
    # Before the interpreter and the plugin's static state go away: no
    # background compile may still be running inside the plugin.
    if _load_error is None:
        _lib.ffi.eagertpu_shutdown()


try:
    _register()
    atexit.register(_shutdown_at_exit)
except Exception as e:  # noqa: BLE001 - reported, then raised on use
    _load_error = e
    warnings.warn(f"eagertpu: the tpu backend did not load: {e}", stacklevel=2)


def _loaded() -> None:
    if _load_error is not None:
        raise RuntimeError(f"the eagertpu backend did not load: {_load_error}") from _load_error


def sync() -> None:
    """Runs everything recorded on `tpu` and waits; raises the first failure."""
    _loaded()
    _lib.check(_lib.ffi.eagertpu_sync())


def wait_for_compiles() -> None:
    """Waits until the fused chunks queued for background compilation are compiled.

    Recording never needs this; call it to measure a warmed-up loop."""
    _loaded()
    _lib.check(_lib.ffi.eagertpu_wait_for_compiles())


def set_mode(name: str) -> None:
    """`"debug"`, `"strict"` or `"fused"` for the whole process; pending work runs first."""
    _loaded()
    if name not in _lib.MODES:
        raise ValueError(f"unknown mode {name!r}: expected one of {sorted(_lib.MODES)}")
    _lib.check(_lib.ffi.eagertpu_set_mode(_lib.MODES[name]))


def get_mode() -> str:
    import ctypes

    m = ctypes.c_int32(0)
    _lib.check(_lib.ffi.eagertpu_get_mode(ctypes.byref(m)))
    return _lib.MODE_NAMES[m.value]


@contextlib.contextmanager
def mode(name: str):
    """`with eagertpu.mode("debug"): ...` runs the block in a mode."""
    previous = get_mode()
    set_mode(name)
    try:
        yield
    finally:
        set_mode(previous)


def fallbacks() -> dict:
    """Ops that ran on the CPU for lack of a tpu kernel: {op: count}."""
    return metrics()["fallbacks"]


def host_syncs() -> dict:
    """Host reads of tpu values (`.item()`, `.cpu()`, printing) by call site: {"file:line": count}."""
    return metrics()["host_syncs_by_site"]


def metrics() -> dict:
    """The runtime's counters (compiles, cache hits, chunks by cut reason,
    transfers, host syncs, compiled graph calls, ...) as numbers, with
    `fallbacks` ({op: count}), `host_syncs_by_site` ({"file:line": count})
    and `dynamo` (torch.compile's graphs, graph breaks and recompiles with
    their reasons: `eagertpu.dynamo.dynamo_stats()`)."""
    m = _lib.runtime_metrics()
    m["dynamo"] = dynamo.dynamo_stats()
    return m


def metrics_report() -> str:
    """A text report: runtime counters, CPU fallbacks, host syncs by call
    site, torch.compile's graph breaks and recompiles."""
    return _lib.runtime_report() + dynamo.report()


def memory_info(device="tpu:0") -> dict:
    """Storage bytes allocated on a tpu device (and the number of allocations)."""
    index = torch.device(device).index or 0
    count, nbytes = _lib.storage_stats(index)
    return {"allocated_bytes": nbytes, "allocations": count}
