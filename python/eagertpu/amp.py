"""`torch.tpu.amp`: automatic mixed precision on tpu, in the shape of
`torch.cuda.amp` (whose names PyTorch keeps for code written before
`torch.amp`). Autocast on tpu follows the op lists and cast policies PyTorch
uses for CUDA (python/csrc/autocast.cpp); its lower-precision dtype is bf16 by
default, as TPUs compute it natively, and fp16 with a `GradScaler` works too.

    with torch.autocast("tpu"):              # bf16
        loss = model(x)
    scaler = torch.amp.GradScaler("tpu")     # for fp16
"""

import torch


def autocast(enabled: bool = True, dtype: torch.dtype = torch.bfloat16, cache_enabled: bool = True):
    """`torch.autocast("tpu", ...)`, as `torch.cuda.amp.autocast` is
    `torch.autocast("cuda", ...)` (bf16 here by default)."""
    return torch.autocast("tpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def GradScaler(init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,  # noqa: N802
               growth_interval: int = 2000, enabled: bool = True) -> torch.amp.GradScaler:
    """`torch.amp.GradScaler("tpu", ...)`: loss scaling for fp16 autocast (bf16
    needs none). Unscaling and the scale's update run on the device; the
    scaler reads whether any gradient was non-finite once a step, as on CUDA."""
    return torch.amp.GradScaler("tpu", init_scale=init_scale, growth_factor=growth_factor,
                                backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """`torch.amp.custom_fwd(device_type="tpu", ...)` for a custom autograd
    Function's forward."""
    return torch.amp.custom_fwd(fwd, device_type="tpu", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """`torch.amp.custom_bwd(device_type="tpu")` for its backward."""
    return torch.amp.custom_bwd(bwd, device_type="tpu")
