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
    _current = _index(device)


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
    return _lib.storage_stats(-1 if device is None else _index(device))[1]


def memory_stats(device=None) -> dict:
    count, nbytes = _lib.storage_stats(-1 if device is None else _index(device))
    return {"allocated_bytes.all.current": nbytes, "allocation.all.current": count}


def get_amp_supported_dtype() -> list:
    """Autocast's lower-precision dtypes on tpu."""
    return [torch.bfloat16, torch.float16]
