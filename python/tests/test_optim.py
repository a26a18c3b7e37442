"""Fused optimizers on tpu (`fused=True`: Adam, AdamW, SGD) against the CPU's
own fused kernels: a few training steps match in every mode, with AMSGrad,
maximize, weight decay, momentum and nesterov, a tensor learning rate, and
AMP's grad_scale/found_inf; the step never reads the device on the host."""

import pytest
import torch

import eagertpu
from helpers import assert_same, tpu

FUSED = {
    "adam": lambda p, **kw: torch.optim.Adam(p, lr=1e-2, fused=True, **kw),
    "adam_amsgrad_maximize": lambda p, **kw: torch.optim.Adam(p, lr=1e-2, amsgrad=True, maximize=True,
                                                              weight_decay=0.01, fused=True, **kw),
    "adamw": lambda p, **kw: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, fused=True, **kw),
    "adamw_tensor_lr": lambda p, **kw: torch.optim.AdamW(p, lr=torch.tensor(1e-2), fused=True, **kw),
    "sgd": lambda p, **kw: torch.optim.SGD(p, lr=0.05, fused=True, **kw),
    "sgd_nesterov": lambda p, **kw: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3,
                                                    fused=True, **kw),
    "sgd_dampening": lambda p, **kw: torch.optim.SGD(p, lr=0.05, momentum=0.5, dampening=0.2, maximize=True,
                                                     fused=True, **kw),
}


def models():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    dev = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_optimizers_match_the_cpus_fused_kernels(name, mode, no_fallbacks):
    cpu, dev = models()
    opt_cpu, opt_dev = FUSED[name](cpu.parameters()), FUSED[name](dev.parameters())
    x, y = torch.randn(6, 8), torch.randint(0, 3, (6,))
    syncs = None
    for step in range(4):
        for model, opt, inputs in ((cpu, opt_cpu, (x, y)), (dev, opt_dev, tpu((x, y)))):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(inputs[0]), inputs[1]).backward()
            if model is dev and step == 3:
                syncs = eagertpu.metrics()["host_syncs"]
            opt.step()
            if model is dev and step == 3:
                # The step counts stay on the device: the step reads nothing back.
                assert eagertpu.metrics()["host_syncs"] == syncs
    for (n, p_cpu), p_dev in zip(cpu.named_parameters(), dev.parameters()):
        assert_same(p_dev.detach(), p_cpu.detach(), 1e-4, 1e-5, what=f"{name} {n}")
    for p_cpu, p_dev in zip(cpu.parameters(), dev.parameters()):
        for k, v in opt_cpu.state[p_cpu].items():
            assert_same(opt_dev.state[p_dev][k], v, 1e-4, 1e-6, what=f"{name} state {k}")


def lists(seed, n=3, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for s in [(3, 4), (5,), ()][:n]]


@pytest.mark.parametrize("adamw", [False, True])
def test_grad_scale_unscales_and_found_inf_skips_as_on_the_cpu(adamw, mode, no_fallbacks):
    fused = torch._fused_adamw_ if adamw else torch._fused_adam_
    for found in (0.0, 1.0):
        state = lambda: [lists(1), lists(2), lists(3), [x.abs() for x in lists(4)], [torch.tensor(3.0)] * 3]
        cpu, dev = state(), tpu(state())
        kwargs = dict(lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.05, eps=1e-8, amsgrad=False, maximize=False)
        fused(*cpu[:4], [], cpu[4], **kwargs, grad_scale=torch.tensor(4.0), found_inf=torch.tensor(found))
        fused(*dev[:4], [], dev[4], **kwargs, grad_scale=torch.tensor(4.0, device="tpu"),
              found_inf=torch.tensor(found, device="tpu"))
        for what, got, want in zip(("param", "grad", "exp_avg", "exp_avg_sq"), dev[:4], cpu[:4]):
            assert_same(got, want, 1e-5, 1e-6, what=f"{what} found_inf={found}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_parameters_step_in_float32_as_on_the_cpu(dtype, no_fallbacks):
    state = lambda: [lists(5, dtype=dtype), lists(6, dtype=dtype), lists(7, dtype=dtype),
                     [x.abs() for x in lists(8, dtype=dtype)], [torch.tensor(2.0)] * 3]
    cpu, dev = state(), tpu(state())
    kwargs = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    torch._fused_adamw_(*cpu[:4], [], cpu[4], **kwargs)
    torch._fused_adamw_(*dev[:4], [], dev[4], **kwargs)
    for what, got, want in zip(("param", "grad", "exp_avg", "exp_avg_sq"), dev[:4], cpu[:4]):
        assert_same(got, want, what=f"{what} {dtype}")


def test_bad_lists_are_refused_naming_the_list_and_the_next_step_works(no_fallbacks):
    params, grads = tpu(lists(9)), tpu(lists(10))
    with pytest.raises(RuntimeError, match="_fused_adam_: expected 3 exp_avgs"):
        torch._fused_adam_(params, grads, tpu(lists(11))[:2], tpu(lists(12)), [], tpu([torch.tensor(1.0)] * 3),
                           lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError, match="same device"):
        torch._fused_sgd_(params, lists(10), [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0,
                          nesterov=False, maximize=False, is_first_step=True)
    before = [p.cpu() for p in params]
    torch._fused_sgd_(params, grads, [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False,
                      maximize=False, is_first_step=True)
    for p, b, g in zip(params, before, grads):
        assert_same(p, b - 0.1 * g.cpu())
