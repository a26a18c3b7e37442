"""`torch.tpu`: the device module of the `tpu` backend, in the shape of
`torch.cuda` (device_count, is_available, synchronize, manual_seed, memory)."""

import torch

from . import _lib

_current = 0
_seed = 0


def is_available() -> bool:
    try:
        return _lib.device_count() > 0
    except RuntimeError:
        return False


def device_count() -> int:
    return _lib.device_count()


def current_device() -> int:
    return _current


def set_device(device) -> None:
    global _current
    _current = torch.device(device).index or 0 if not isinstance(device, int) else device


def synchronize(device=None) -> None:
    """Waits for everything recorded on `tpu` (raises the first failure)."""
    _lib.check(_lib.ffi.eagertpu_sync())


def manual_seed(seed: int) -> None:
    global _seed
    _seed = int(seed)


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def initial_seed() -> int:
    return _seed


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def memory_allocated(device=None) -> int:
    """Bytes of tensor storage allocated on `device` (all devices if None)."""
    index = -1 if device is None else (torch.device(device).index or 0 if not isinstance(device, int) else device)
    return _lib.storage_stats(index)[1]


def memory_stats(device=None) -> dict:
    index = -1 if device is None else (torch.device(device).index or 0 if not isinstance(device, int) else device)
    count, nbytes = _lib.storage_stats(index)
    return {"allocated_bytes.all.current": nbytes, "allocation.all.current": count}
