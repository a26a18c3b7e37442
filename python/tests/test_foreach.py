"""PyTorch's _foreach_ ops on tpu against the CPU: every registered op and
overload, in place and not; the fast path is one runtime call for the list
(no per-tensor dispatch), and whatever it does not take runs PyTorch's own
per-tensor loop with its errors; optimizers with foreach=True match the CPU."""

import json

import pytest
import torch
from torch.profiler import profile

import eagertpu
from helpers import TOL, assert_same, run_python, tpu

UNARY = ["abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "exp", "expm1", "floor", "frac", "log",
         "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt",
         "tan", "tanh", "trunc"]
# Inputs in each op's domain: (low, high) of a uniform draw.
DOMAIN = {"acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "log": (0.1, 3.0), "log10": (0.1, 3.0), "log1p": (0.1, 3.0),
          "log2": (0.1, 3.0), "sqrt": (0.1, 3.0), "rsqrt": (0.1, 3.0), "reciprocal": (0.5, 3.0)}
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "clamp_min", "clamp_max"]
SHAPES = [(3, 4), (5,), ()]


def floats(seed, low=-2.0, high=2.0, dtype=torch.float32, shapes=SHAPES):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(s, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype) for s in shapes]


def check_both_forms(name, make_args, overload_kwargs=None, dtype=torch.float32, inplace=True, cpu_last=False):
    """torch._foreach_<name>(*args) and its in-place form on tpu match the CPU
    (with `cpu_last`, the last argument stays on the CPU on both sides)."""
    kwargs = overload_kwargs or {}

    def on_tpu():
        args = make_args()
        return (*tpu(args[:-1]), args[-1]) if cpu_last else tpu(args)

    cpu_args = make_args()
    out_of_place = getattr(torch, f"_foreach_{name}")
    want = out_of_place(*cpu_args, **kwargs)
    got = out_of_place(*on_tpu(), **kwargs)
    rtol, atol = TOL[dtype]
    assert_same(got, want, rtol, atol, what=f"_foreach_{name}")
    if not inplace:
        return
    in_place = getattr(torch, f"_foreach_{name}_")
    cpu_args = make_args()
    tpu_args = on_tpu()
    in_place(*cpu_args, **kwargs)
    in_place(*tpu_args, **kwargs)
    assert_same(tpu_args[0], cpu_args[0], rtol, atol, what=f"_foreach_{name}_")


@pytest.mark.parametrize("name", UNARY)
def test_unary_foreach_ops_match_cpu(name, no_fallbacks):
    low, high = DOMAIN.get(name, (-2.0, 2.0))
    check_both_forms(name, lambda: (floats(1, low, high),))


@pytest.mark.parametrize("name", BINARY)
def test_binary_foreach_ops_with_a_number_and_a_number_list_match_cpu(name, no_fallbacks):
    low = 0.1 if name == "pow" else -2.0
    check_both_forms(name, lambda: (floats(2, low), 0.75))
    check_both_forms(name, lambda: (floats(3, low), [0.5, -1.5, 2.0]))


@pytest.mark.parametrize("name", BINARY)
def test_binary_foreach_ops_with_a_list_match_cpu(name, no_fallbacks):
    low = 0.1 if name == "pow" else -2.0
    check_both_forms(name, lambda: (floats(4, low), floats(5, 0.5, 2.0)))
    if name in ("add", "sub"):
        check_both_forms(name, lambda: (floats(6), floats(7)), {"alpha": -0.3})


@pytest.mark.parametrize("name", ["add", "mul", "div"])
def test_foreach_ops_with_a_0d_tensor_match_cpu(name, no_fallbacks):
    kwargs = {"alpha": 2} if name == "add" else {}
    # A CPU 0-d tensor (a number to the kernel) and a tpu one (an operand).
    check_both_forms(name, lambda: (floats(8), torch.tensor(0.5)), kwargs)
    want = getattr(torch, f"_foreach_{name}")(floats(9), torch.tensor(-1.25), **kwargs)
    got = getattr(torch, f"_foreach_{name}")(tpu(floats(9)), torch.tensor(-1.25, device="tpu"), **kwargs)
    assert_same(got, want, *TOL[torch.float32])


def test_pow_of_a_number_by_a_list_matches_cpu(no_fallbacks):
    check_both_forms("pow", lambda: (2.0, floats(10)), inplace=False)


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addcmul_and_addcdiv_foreach_match_cpu(name, no_fallbacks):
    def lists(seed):
        return floats(seed), floats(seed + 1), floats(seed + 2, 0.5, 2.0)

    check_both_forms(name, lambda: (*lists(11), -0.5))
    check_both_forms(name, lambda: (*lists(14), [0.5, 2.0, -1.0]))
    # A 1-d CPU tensor of a number per item.
    check_both_forms(name, lambda: (*lists(17), torch.tensor([0.25, -3.0, 1.5])), cpu_last=True)


def test_lerp_foreach_matches_cpu(no_fallbacks):
    check_both_forms("lerp", lambda: (floats(20), floats(21), floats(22, 0.0, 1.0)))
    check_both_forms("lerp", lambda: (floats(23), floats(24), 0.1))
    check_both_forms("lerp", lambda: (floats(25), floats(26), 0.9))
    check_both_forms("lerp", lambda: (floats(27), floats(28), [0.1, 0.6, 1.0]))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_foreach_ops_in_other_float_dtypes_match_cpu(dtype, no_fallbacks):
    check_both_forms("add", lambda: (floats(30, dtype=dtype), floats(31, dtype=dtype)), {"alpha": 0.5}, dtype)
    check_both_forms("mul", lambda: (floats(32, dtype=dtype), 0.9), dtype=dtype)
    check_both_forms("addcdiv", lambda: (floats(33, dtype=dtype), floats(34, dtype=dtype),
                                         floats(35, 0.5, 2.0, dtype=dtype), [0.1, 0.2, 0.3]), dtype=dtype)
    check_both_forms("sqrt", lambda: (floats(36, 0.1, 3.0, dtype=dtype),), dtype=dtype)


def test_an_in_place_foreach_op_writes_through_views(no_fallbacks):
    base_cpu = floats(40, shapes=[(4, 6)])[0]
    base = base_cpu.to("tpu")
    views_cpu = [base_cpu.t(), base_cpu[1:3, ::2]]
    views = [base.t(), base[1:3, ::2]]
    torch._foreach_mul_(views_cpu, [2.0, -1.0])
    torch._foreach_mul_(views, [2.0, -1.0])
    # The views overlap: the items run in order, as on the CPU.
    assert_same(base, base_cpu)


def foreach_calls(fn):
    """The aten ops profiled while `fn` runs (names, with repeats)."""
    with profile() as p:
        fn()
        eagertpu.sync()
    return [e.name for e in p.events() if e.name.startswith("aten::")]


def test_a_float_list_runs_as_one_call_and_other_lists_as_pytorchs_loop(mode, no_fallbacks):
    xs = tpu(floats(50))
    names = foreach_calls(lambda: torch._foreach_mul_(xs, 0.9))
    assert names == ["aten::_foreach_mul_"], names
    ds = tpu(floats(51, 1.0, 2.0))
    names = foreach_calls(lambda: torch._foreach_addcdiv_(xs, xs, ds, [0.1, 0.2, 0.3]))
    assert names == ["aten::_foreach_addcdiv_"], names
    # Integers take PyTorch's per-tensor loop: one mul_ per tensor, exact.
    ints_cpu = [torch.arange(6).reshape(2, 3), torch.tensor([7, -8, 2**40 + 1])]
    ints = tpu(ints_cpu)
    names = foreach_calls(lambda: torch._foreach_mul_(ints, 3))
    assert names.count("aten::_foreach_mul_") == 1 and names.count("aten::mul_") == 2, names
    torch._foreach_mul_(ints_cpu, 3)
    assert_same(ints, ints_cpu)


def executions(fn):
    """The programs `fn` launched (what it recorded, all run)."""
    eagertpu.sync()
    before = eagertpu.metrics()["executions"]
    fn()
    eagertpu.sync()
    return eagertpu.metrics()["executions"] - before


@pytest.mark.parametrize("mode", ["debug", "strict"], indirect=True)
def test_a_foreach_op_or_a_fused_optimizer_step_launches_one_program_for_its_list(mode, no_fallbacks):
    # Debug and strict modes run one op at a time: the op is the list's, not
    # each tensor's (an addcmul_ of six tensors was 18 programs, 3 a tensor).
    shapes = [(3, 4), (5,), (), (2, 2), (7,), (1, 3)]
    xs_cpu, ys_cpu = floats(70, shapes=shapes), floats(71, shapes=shapes)
    xs, ys = tpu(xs_cpu), tpu(ys_cpu)
    assert executions(lambda: torch._foreach_addcmul_(xs, ys, ys, value=0.5)) == 1
    torch._foreach_addcmul_(xs_cpu, ys_cpu, ys_cpu, value=0.5)
    assert_same(xs, xs_cpu)
    assert executions(lambda: torch._foreach_lerp_(xs, ys, 0.25)) == 1
    torch._foreach_lerp_(xs_cpu, ys_cpu, 0.25)
    assert_same(xs, xs_cpu)
    # PyTorch's per-tensor loop (an op the one-call path does not take, and
    # integers), and AMP's unscaling of a list of gradients: one program too.
    norms = []
    assert executions(lambda: norms.extend(torch._foreach_norm(xs))) == 1
    assert_same(norms, torch._foreach_norm(xs_cpu), 1e-5, 1e-6)
    ints_cpu = [torch.arange(6).reshape(2, 3), torch.tensor([7, -8, 2**40 + 1])]
    ints = tpu(ints_cpu)
    assert executions(lambda: torch._foreach_mul_(ints, 3)) == 1
    torch._foreach_mul_(ints_cpu, 3)
    assert_same(ints, ints_cpu)
    found_inf, inv_scale = torch.zeros(1), torch.full((1,), 0.5)
    found_dev, inv_dev = tpu((found_inf, inv_scale))
    ys_cpu[2] = torch.tensor(float("inf"))
    ys = tpu(ys_cpu)
    unscale = torch._amp_foreach_non_finite_check_and_unscale_
    assert executions(lambda: unscale(ys, found_dev, inv_dev)) == 1
    unscale(ys_cpu, found_inf, inv_scale)
    assert_same(ys, ys_cpu)
    assert_same(found_dev, found_inf)

    torch.manual_seed(3)
    cpu = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    dev = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_dev = torch.optim.AdamW(dev.parameters(), lr=1e-2, fused=True)
    x = torch.randn(5, 4)
    for step in range(2):
        for model, opt, inp in ((cpu, opt_cpu, x), (dev, opt_dev, x.to("tpu"))):
            opt.zero_grad()
            model(inp).square().mean().backward()
        opt_cpu.step()
        # The second step (the first makes the state): the step counts'
        # increment (a _foreach_add_, one program) and the update of the four
        # parameters (one program, for its 60-odd ops).
        before = eagertpu.metrics()["ops_recorded"]
        launched = executions(opt_dev.step)
        if step == 1:
            assert eagertpu.metrics()["ops_recorded"] - before > 4 * 8 and launched == 2, launched
    for p_dev, p_cpu in zip(dev.parameters(), cpu.parameters()):
        assert_same(p_dev.detach(), p_cpu.detach(), 1e-5, 1e-6)


def test_lists_the_fast_path_does_not_take_match_cpu_or_raise_as_it_does(mode, no_fallbacks):
    # Mixed dtypes and broadcasting: PyTorch's loop, the same results.
    mixed = lambda: ([torch.ones(3), torch.full((2,), 2.0, dtype=torch.float64)], [torch.ones(3), torch.ones(2)])
    check_both_forms("add", mixed)
    broadcast = lambda: ([torch.ones(3, 4)], [torch.arange(4.0)])
    check_both_forms("mul", broadcast)
    # A float result into an int list: refused, as on the CPU.
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        torch._foreach_mul_([torch.arange(3).to("tpu")], 0.5)
    # Lists of unequal lengths, and a CPU tensor in a tpu list.
    with pytest.raises(RuntimeError, match="same number of tensors"):
        torch._foreach_add_(tpu(floats(60)), tpu(floats(61))[:2])
    with pytest.raises(RuntimeError, match="same device|tpu and cpu|two devices"):
        torch._foreach_add_(tpu(floats(62)), floats(63))
    # The next foreach call works.
    xs, xs_cpu = tpu(floats(64)), floats(64)
    torch._foreach_add_(xs, 1.0)
    torch._foreach_add_(xs_cpu, 1.0)
    assert_same(xs, xs_cpu)


OPTIMIZERS = {
    "sgd_momentum": lambda p, **f: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3, **f),
    "adam": lambda p, **f: torch.optim.Adam(p, lr=1e-2, **f),
    "adamw_amsgrad": lambda p, **f: torch.optim.AdamW(p, lr=1e-2, amsgrad=True, **f),
    "rmsprop": lambda p, **f: torch.optim.RMSprop(p, lr=1e-2, momentum=0.5, **f),
    "adagrad": lambda p, **f: torch.optim.Adagrad(p, lr=0.1, **f),
    "adamax": lambda p, **f: torch.optim.Adamax(p, lr=1e-2, **f),
    "nadam": lambda p, **f: torch.optim.NAdam(p, lr=1e-2, **f),
    "radam": lambda p, **f: torch.optim.RAdam(p, lr=1e-2, **f),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizers_with_foreach_match_the_cpu(name, mode, no_fallbacks):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    dev = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    opt_cpu = OPTIMIZERS[name](cpu.parameters(), foreach=False)
    opt_dev = OPTIMIZERS[name](dev.parameters(), foreach=True)
    x, y = torch.randn(6, 8), torch.randint(0, 3, (6,))
    for _ in range(4):
        for model, opt, inputs in ((cpu, opt_cpu, (x, y)), (dev, opt_dev, tpu((x, y)))):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(inputs[0]), inputs[1]).backward()
            opt.step()
    for (n, p_cpu), p_dev in zip(cpu.named_parameters(), dev.parameters()):
        assert_same(p_dev.detach(), p_cpu.detach(), 1e-4, 1e-5, what=f"{name} {n}")


def test_a_functional_foreach_op_makes_its_results_in_its_one_call():
    # A functional op over a list of one dtype (AdamW's _foreach_sqrt of the
    # second moments): one C call makes every result (no empty tensor made
    # first per item, no view written), and each result is its own tensor.
    r = run_python(
        """
        import json, torch, eagertpu
        xs = [torch.rand(s).add(0.5).to("tpu") for s in [(64, 32), (32,), (32, 10), (10,), (), (3, 1, 2)]]
        out = {}
        for name, fn in {"sqrt": lambda: torch._foreach_sqrt(xs),
                         "add_list": lambda: torch._foreach_add(xs, xs, alpha=2.0)}.items():
            results = fn()
            t0 = eagertpu.metrics()["op_timing"]
            for _ in range(50):
                results = fn()
            t1 = eagertpu.metrics()["op_timing"]
            out[name] = {k: t1[k]["calls"] - t0[k]["calls"] for k in ("abi", "views")}
        cpu = [x.cpu() for x in xs]
        got = torch._foreach_sqrt(xs)
        got[1].mul_(-1.0)  # each result is its own storage: the others are untouched
        want = torch._foreach_sqrt(cpu)
        want[1].mul_(-1.0)
        out["same"] = all(torch.allclose(g.cpu(), w, rtol=1e-6, atol=1e-6) and g.shape == w.shape
                          for g, w in zip(got, want))
        out["distinct"] = len({g.untyped_storage().data_ptr() for g in got})
        print(json.dumps(out))
        """,
        EAGERTPU_OP_TIMING="1",
        EAGERTPU_MODE="fused",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["same"] and out["distinct"] == 6, out
    # Per call: the one etpu_pointwise_foreach_new, then the six results of
    # the call before it freed (etpu_storage_free); one view read per
    # operand. Empty results then the out= path would add an
    # etpu_storage_new per item.
    calls = 50 * (1 + 6)
    for name, views in (("sqrt", 6), ("add_list", 12)):
        assert calls <= out[name]["abi"] <= calls + 1, (name, out[name])
        assert out[name]["views"] == 50 * views, (name, out[name])


def test_a_functional_foreach_op_over_a_list_of_mixed_float_dtypes_matches_cpu(mode, no_fallbacks):
    # Items of different dtypes (each op's operands match their item): each
    # result keeps its item's dtype, as PyTorch's loop gives.
    def make():
        xs = floats(80, 0.5, 2.0)
        return ([xs[0], xs[1].double(), xs[2].to(torch.bfloat16)],)

    got = torch._foreach_sqrt(*tpu(make()))
    want = torch._foreach_sqrt(*make())
    assert [g.dtype for g in got] == [torch.float32, torch.float64, torch.bfloat16]
    assert_same(got, want, 1e-2, 1e-2)
