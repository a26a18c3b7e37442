"""Elementwise kernels against PyTorch CPU: every dtype they accept,
broadcasting, Python scalars, non-contiguous inputs, in every mode."""

import os
import re

import pytest
import torch
import torch.nn.functional as F
from helpers import FLOATS, INTS, assert_same, check, check_grad, next_op_works, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")

UNARY = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "log": lambda x: torch.log(x.abs() + 0.5),
    "log1p": lambda x: torch.log1p(x.abs()),
    "sqrt": lambda x: torch.sqrt(x.abs()),
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "sin": torch.sin,
    "cos": torch.cos,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "sign": torch.sign,
    "erf": torch.erf,
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "reciprocal": lambda x: torch.reciprocal(x.abs() + 0.5),
    "square": torch.square,
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float(name, dtype):
    check(UNARY[name], rand(3, 7, dtype=dtype) * 3)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("name", ["neg", "abs", "sign", "relu", "square"])
def test_unary_int(name, dtype):
    if dtype == torch.uint8 and name in ("neg", "abs", "sign"):
        pytest.skip("uint8 neg wraps; not a PyTorch-meaningful case")
    check(UNARY[name], rand(4, 5, dtype=dtype))


@pytest.mark.parametrize("name", ["exp", "tanh", "sqrt", "gelu"])
def test_unary_non_contiguous(name):
    f = UNARY[name]
    check(lambda x: f(x.t()), rand(5, 6))
    check(lambda x: f(x[:, 1::2]), rand(4, 9))


def test_unary_in_place_and_out():
    check(lambda x: x.exp_(), rand(3, 4))
    check(lambda x: x.t().neg_(), rand(3, 4))
    check(lambda x, o: torch.tanh(x, out=o), rand(3, 4), torch.empty(3, 4))


BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "atan2": torch.atan2,
    "pow": lambda a, b: torch.pow(a.abs() + 0.5, b),
    "remainder": lambda a, b: torch.remainder(a, b.abs() + 0.5),
    "floor_divide": lambda a, b: torch.div(a, b.abs() + 0.5, rounding_mode="floor"),
    "trunc_divide": lambda a, b: torch.div(a, b.abs() + 0.5, rounding_mode="trunc"),
}

SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ())]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting(name, shapes):
    a, b = shapes
    check(BINARY[name], rand(*a), rand(*b))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "minimum"])
def test_binary_dtypes(name, dtype):
    check(BINARY[name], rand(3, 5, dtype=dtype), rand(5, dtype=dtype))


@pytest.mark.parametrize("dtype", INTS)
def test_integer_division_modes(dtype):
    a, b = rand(4, 6, dtype=dtype), rand(4, 6, dtype=dtype, low=1, high=7)
    check(lambda a, b: torch.div(a, b), a, b)  # true division promotes to float
    check(lambda a, b: torch.div(a, b, rounding_mode="floor"), a, b)
    check(lambda a, b: torch.div(a, b, rounding_mode="trunc"), a, b)
    check(lambda a, b: torch.remainder(a, b), a, b)


@pytest.mark.parametrize(
    "a_dtype,b_dtype",
    [(torch.int64, torch.float32), (torch.int32, torch.float16), (torch.float16, torch.float32),
     (torch.bfloat16, torch.float16), (torch.uint8, torch.int8), (torch.bool, torch.int32)],
    ids=str,
)
def test_type_promotion(a_dtype, b_dtype):
    check(torch.add, rand(3, 4, dtype=a_dtype), rand(4, dtype=b_dtype))
    check(torch.mul, rand(3, 4, dtype=a_dtype), rand(3, 4, dtype=b_dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32, torch.uint8])
def test_python_scalars(dtype):
    x = rand(3, 4, dtype=dtype)
    check(lambda x: x + 2, x)
    check(lambda x: x * 2.5, x)  # int * float -> default float dtype
    check(lambda x: 3 - x, x)
    check(lambda x: x / 4, x)
    check(lambda x: torch.add(x, x, alpha=2), x)
    check(lambda x: x.sub(x * 3, alpha=3), x)


def test_alpha_scales_the_other_operand_in_every_dtype_mix():
    check(lambda a, b: torch.add(a, b, alpha=-0.25), rand(3, 4), rand(4))
    check(lambda a, b: torch.sub(a, b, alpha=3), rand(3, 4, dtype=torch.bfloat16), rand(3, 4, dtype=torch.bfloat16))
    check(lambda a, b: torch.add(a, b, alpha=2.5), rand(5, dtype=torch.float64), rand(5, dtype=torch.int64))
    check(lambda a, b: torch.add(a, b, alpha=7), rand(5, dtype=torch.int64), rand(5, dtype=torch.int32))
    check(lambda a: torch.add(a, 3, alpha=2), rand(5, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="alpha"):
        torch.add(rand(3, dtype=torch.int64).to("tpu"), rand(3, dtype=torch.int64).to("tpu"), alpha=0.5)


def test_out_and_in_place_results_are_never_silently_truncated():
    # A float result into an int tensor, a non-bool one into a bool tensor:
    # refused as on the CPU (it used to be truncated into the tensor).
    for dev in ("cpu", "tpu"):
        x = torch.arange(4).to(dev)
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            torch.mul(x, 0.5, out=x)
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            torch.add(x, torch.ones(4, device=dev), out=x)
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            torch.add(x, x, out=torch.zeros(4, dtype=torch.bool, device=dev))
    # Casts PyTorch allows still happen: an int result into a float tensor.
    out = torch.zeros(4, device="tpu")
    torch.add(torch.arange(4).to("tpu"), 1, out=out)
    assert out.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]


def test_int64_python_numbers_beyond_2_pow_53_stay_exact():
    # 2^60 + 1 is no double: a fill value, a mask value, an offset, a bound or
    # a range end that crossed the C ABI as one came out 2^60.
    big = 2**60 + 1
    x = torch.arange(6, dtype=torch.int64).reshape(2, 3) * 2**40
    check(lambda x: x + big, x)
    check(lambda x: big - x, x)
    check(lambda x: x * (2**22 + 1), x)
    check(lambda x: x == big, x + big)
    check(lambda x: x.clone().fill_(big), x)
    check(lambda x: x.masked_fill(x > 2**41, -big), x)
    check(lambda x: torch.clamp(x, min=big), x)
    check(lambda x: torch.where(x > 2**41, x, big), x)
    assert_same(torch.full((3,), big, device="tpu"), torch.full((3,), big))
    assert_same(torch.arange(big, big + 4, device="tpu"), torch.arange(big, big + 4))
    assert_same(torch.arange(-big, big, big // 3 + 7, device="tpu"), torch.arange(-big, big, big // 3 + 7))


def test_bool_python_numbers_keep_bool_results():
    b = torch.tensor([True, False, True])
    check(lambda b: b + True, b)
    check(lambda b: b * False, b)
    check(lambda b: torch.full((2,), True, device=b.device), b)


def test_python_scalar_does_not_promote_half():
    check(lambda x: x * 1e-3 + 1, rand(8, dtype=torch.float16))
    check(lambda x: x * 0.5, rand(8, dtype=torch.bfloat16))


def test_zero_dim_cpu_tensor_operand():
    check(lambda x: x * torch.tensor(2.5), rand(3, 4))  # a CPU 0-d tensor is allowed, as on CUDA
    check(lambda x: x + torch.tensor(3), rand(3, dtype=torch.int32))


def _layouts():
    """(name, CPU tensor) pairs: contiguous, channels-last, transposed, a
    broadcast row, an int tensor, a bool tensor, a 0-d tensor."""
    x = rand(2, 3, 4, 5)
    return [
        ("contiguous", x),
        ("channels_last", x.to(memory_format=torch.channels_last)),
        ("transposed", x.transpose(1, 3)),
        ("row", rand(5)),
        ("int", rand(2, 3, 4, 5, dtype=torch.int32)),
        ("bool", rand(2, 3, 4, 5, dtype=torch.bool)),
        ("zero_dim", rand()),
    ]


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_results_have_cpus_dtype_shape_and_strides(name):
    """The functional forms compute their result's dtype, shape and strides
    themselves for contiguous operands: they must be the CPU's."""
    f = getattr(torch, name)
    for (a_name, a), (b_name, b) in [(p, q) for p in _layouts() for q in _layouts()]:
        if name == "sub" and a.dtype == b.dtype == torch.bool:
            continue
        try:
            expected = f(a, b)
        except RuntimeError:
            continue  # shapes that do not broadcast
        for operands in [(a.to("tpu"), b.to("tpu")), (a.to("tpu"), 3), (2.5, b.to("tpu"))]:
            actual = f(*operands)
            want = f(*[o.cpu() if isinstance(o, torch.Tensor) else o for o in operands])
            what = f"{name}({a_name}, {b_name}) {[type(o).__name__ for o in operands]}"
            assert (actual.dtype, actual.shape, actual.stride()) == (want.dtype, want.shape, want.stride()), what
            assert_same(actual, want, what=what)
        del expected


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "neg"])
def test_unary_results_have_cpus_dtype_shape_and_strides(name):
    f = getattr(torch, name)
    for x_name, x in _layouts():
        if name == "neg" and x.dtype == torch.bool:
            continue
        want, actual = f(x), f(x.to("tpu"))  # NaNs of log and sqrt compare equal
        assert (actual.dtype, actual.shape, actual.stride()) == (want.dtype, want.shape, want.stride()), x_name
        assert_same(actual, want, what=f"{name}({x_name})")


def test_bool_subtraction_and_negation_are_errors_as_on_cpu():
    b = rand(3, dtype=torch.bool)
    for f in (lambda x: x - x, lambda x: -x):
        with pytest.raises(RuntimeError) as cpu_error:
            f(b)
        with pytest.raises(RuntimeError) as tpu_error:
            f(b.to("tpu"))
        assert str(tpu_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool])
def test_comparisons(op, dtype):
    f = getattr(torch, op)
    a, b = rand(4, 5, dtype=dtype), rand(5, dtype=dtype)
    check(f, a, b)
    check(lambda a: f(a, 1), a)


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical(op):
    f = getattr(torch, op)
    check(f, rand(4, 5, dtype=torch.bool), rand(5, dtype=torch.bool))
    check(f, rand(4, 5), rand(4, 5, dtype=torch.int32))
    check(torch.logical_not, rand(6, dtype=torch.int32))


@pytest.mark.parametrize("op", ["bitwise_and", "bitwise_or", "bitwise_xor"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_bitwise(op, dtype):
    check(getattr(torch, op), rand(3, 4, dtype=dtype), rand(3, 4, dtype=dtype))
    check(torch.bitwise_not, rand(3, 4, dtype=dtype))


def test_where_clamp_and_friends():
    x, y = rand(3, 4), rand(4)
    check(lambda x, y: torch.where(x > 0, x, y), x, y)
    check(lambda x: torch.where(x > 0, x, 0.0), x)
    check(lambda x: x.clamp(-0.5, 0.5), x)
    check(lambda x: x.clamp(min=0.1), x)
    check(lambda x: x.clamp_(max=0.2), x)
    check(lambda x: x.clamp(-3, 3), rand(3, 4, dtype=torch.int64))
    check(lambda x, y: torch.addcmul(x, x, y, value=0.5), x, y)
    check(lambda x, y: torch.addcdiv(x, x, y.abs() + 1, value=-2), x, y)
    check(lambda x, y: torch.lerp(x, y, 0.3), x, y)
    check(lambda x, y: torch.lerp(x, y, torch.sigmoid(x)), x, y)
    check(lambda x: x.masked_fill(x > 0, -1.0), x)
    check(lambda x: x.masked_fill_(x < 0, torch.tensor(7.0)), x)


def test_addcmul_addcdiv_and_lerp_as_optimizers_use_them():
    x, y, w = rand(3, 4), rand(4), rand(3, 4)
    for weight in (0.0, 0.5, 0.9, 1.0, -1.5):  # PyTorch's far form from 0.5 on: weight 1 gives y exactly
        check(lambda x, y: torch.lerp(x, y.expand(3, 4), weight), x, y)
    check(lambda x, y: torch.lerp(x, y, torch.tensor(0.75)), x, y)  # a CPU 0-d weight
    check(lambda x, w: x.t().addcmul_(w.t(), w.t(), value=-0.1), x, w)  # into a transposed view
    check(lambda x, y: torch.addcmul(x.bfloat16(), y, y, value=2), x, y)  # promotes to float32
    check(lambda x, y: x[:, ::2].addcdiv_(y[::2], y[::2].abs() + 1, value=3), x, y)
    params, grads, avg, sq = [rand(5), rand(2, 3)], [rand(5), rand(2, 3)], [rand(5), rand(2, 3)], [rand(5), rand(2, 3)]

    def adam_moments(p, g, m, v):
        torch._foreach_lerp_(m, g, 0.1)
        torch._foreach_mul_(v, 0.999)
        torch._foreach_addcmul_(v, g, g, 0.001)
        torch._foreach_addcdiv_(p, m, torch._foreach_add(torch._foreach_sqrt(v), 1e-8), -0.01)
        return p + m + v

    check(adam_moments, params, grads, avg, sq)
    check(lambda x: torch.triu(x, 1), rand(2, 4, 5))
    check(lambda x: torch.tril(x, -1), rand(5, 4))
    check(lambda x: x.tril_(), rand(4, 4))


def test_addcmul_addcdiv_and_lerp_are_one_op_each_with_the_scalar_a_parameter():
    import eagertpu

    x, y, z = (rand(3, 4) for _ in range(3))
    tx, ty, tz = x.to("tpu"), y.to("tpu"), z.to("tpu") + 1.5
    cases = [
        (lambda x, y, z: torch.addcmul(x, y, z, value=0.3), 0.3),
        (lambda x, y, z: torch.addcdiv(x, y, z, value=0.3), 0.3),
        (lambda x, y, z: torch.lerp(x, y, 0.3), 0.3),
        # The far form (weight >= 0.5) is the same op and the same program:
        # the weight is a parameter, and the program picks the form.
        (lambda x, y, z: torch.lerp(x, y, 0.7), 0.7),
    ]
    for fn, _ in cases:
        before = eagertpu.metrics()
        got = fn(tx, ty, tz)
        after = eagertpu.metrics()
        assert after["ops_recorded"] - before["ops_recorded"] == 1
        assert_same(got, fn(x, y, z + 1.5))
    eagertpu.sync()
    compiles = eagertpu.metrics()["compiles"]
    for weight in (0.2, 0.45, 0.55, 0.95):  # 0, 1 and -1 are constants of their programs
        assert_same(torch.lerp(tx, ty, weight), torch.lerp(x, y, weight))
        assert_same(torch.addcmul(tx, ty, tz, value=weight), torch.addcmul(x, y, z + 1.5, value=weight))
    assert eagertpu.metrics()["compiles"] == compiles, "a new scalar value compiled a program"
    # bfloat16 computes in float32 with a float32 scalar, rounded once, as the
    # CPU's kernels do: exact against the CPU here.
    b = [t.bfloat16() for t in (x, y, z)]
    assert torch.equal(torch.addcmul(*[t.to("tpu") for t in b], value=0.001).cpu(), torch.addcmul(*b, value=0.001))
    assert torch.equal(torch.lerp(b[0].to("tpu"), b[1].to("tpu"), 0.1).cpu(), torch.lerp(b[0], b[1], 0.1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_erfinv(dtype):
    y = torch.linspace(-0.999999, 0.999999, 2001, dtype=dtype)
    check(torch.erfinv, y, rtol=1e-5 if dtype == torch.float32 else 1e-12, atol=1e-6 if dtype == torch.float32 else 1e-12)
    check(torch.erfinv, torch.tensor([-1.0, 1.0, 0.0, 1.5], dtype=dtype))


def test_nan_and_inf_tests():
    x = torch.tensor([0.0, float("nan"), float("inf"), -float("inf"), 2.0])
    for f in (torch.isnan, torch.isinf, torch.isposinf, torch.isneginf, torch.isfinite):
        check(f, x)
    check(torch.isnan, torch.arange(4))
    check(lambda x: torch.maximum(x, torch.zeros_like(x)), x)  # NaN propagates as on CPU


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["tanh", "sigmoid", "gelu", "gelu_tanh", "relu", "silu", "exp", "sqrt", "log"])
def test_activation_gradients(name, dtype):
    check_grad(UNARY[name], rand(4, 6, dtype=dtype))


def test_binary_gradients_with_broadcasting():
    check_grad(lambda a, b: (a * b + a / (b.abs() + 1)).pow(2), rand(3, 4), rand(4))
    check_grad(lambda a, b: torch.where(a > b, a, b) - torch.maximum(a, b) * 0.5, rand(3, 4), rand(3, 4))


def table_ops(macro):
    """(name, rule, ATen overloads...) of each op of an X-macro list in
    include/eagertpu.h (fusion's op tables, rendered)."""
    header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "eagertpu.h")
    text = open(header).read()
    block = text[text.index(f"#define {macro}(X)") :]
    block = re.split(r"\n#define|/\* END", block[1:])[0]
    return [tuple(a.strip() for a in m.split(",")) for m in re.findall(r"X\(([^)]*)\)", block)]


UNARY_TABLE = table_ops("ETPU_UNARY_OPS")
BINARY_TABLE = table_ops("ETPU_BINARY_OPS")


def torch_function(name):
    """The table op `name` as PyTorch spells it: torch.<name>, or
    torch.special.<rest> for `special_<rest>`."""
    fn = getattr(torch, name, None)
    return fn if fn is not None else getattr(torch.special, name.removeprefix("special_"))


def test_the_op_tables_are_read_from_the_header():
    assert len(UNARY_TABLE) >= 20 and len(BINARY_TABLE) >= 20
    assert ("exp", "FLOAT", "out") in UNARY_TABLE
    assert ("eq", "BOOL", "Tensor_out", "Scalar_out") in BINARY_TABLE


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
@pytest.mark.parametrize("name", [n for n, rule, _ in UNARY_TABLE if rule == "FLOAT"])
def test_every_float_op_computes_integers_in_the_default_float_dtype(name, dtype):
    # Integers in [0, 10): log and rsqrt give -inf and inf at 0, as on the CPU.
    x = rand(3, 5, dtype=dtype) if dtype == torch.bool else rand(3, 5, dtype=dtype, low=0)
    check(torch_function(name), x)
    check(lambda t: torch_function(name)(t, out=torch.empty(3, 5, device=t.device)), x)


def operands(rule):
    if rule == "INTEGRAL":
        return rand(3, 4, dtype=torch.int32), rand(3, 4, dtype=torch.int32)
    if rule == "INTEGER":
        # Shift amounts past the bit width and below 0 too.
        return rand(3, 4, dtype=torch.int32), torch.randint(-3, 40, (1, 4), dtype=torch.int32)
    a, b = rand(3, 4), rand(1, 4)
    return a, b.abs() + 0.5  # pow, remainder: a positive right-hand side


@pytest.mark.parametrize("row", BINARY_TABLE, ids=lambda r: r[0])
def test_every_binary_op_of_the_table_through_its_aten_overloads(row):
    name, rule, tensor_out, scalar_out = row
    a, b = operands(rule)
    if name == "polygamma":
        # PyTorch's polygamma takes its order n, an int, first.
        check(lambda x: torch.polygamma(2, x), b, rtol=1e-4, atol=1e-5)
        return
    fn = torch_function(name)
    check(fn, a, b)
    if tensor_out != "none":
        # The overload itself (`torch._standard_gamma_grad` has no out= in
        # Python).
        overload = getattr(getattr(torch.ops.aten, name), tensor_out)
        shape = torch.broadcast_shapes(a.shape, b.shape)
        dtype = fn(a, b).dtype
        check(lambda x, y: overload(x, y, out=torch.empty(shape, dtype=dtype, device=x.device)), a, b)
    if scalar_out != "none":
        check(lambda x: fn(x, 3), a)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_shifts_match_the_cpu_at_every_width_and_out_of_range(dtype):
    bits = torch.iinfo(dtype).bits
    low = 0 if dtype == torch.uint8 else torch.iinfo(dtype).min
    a = torch.cat([torch.tensor([low, torch.iinfo(dtype).max, 1, 0, 5]).to(dtype), rand(20, dtype=dtype)])
    b = torch.randint(0 if dtype == torch.uint8 else -2, bits + 3, a.shape).to(dtype)
    check(lambda x, y: x << y, a, b)
    check(lambda x, y: x >> y, a, b)
    check(lambda x: x << 3, a)
    check(lambda x: x >> 2, a)
    check(lambda x: 3 << x.clamp(0, bits - 1), a)

    def in_place(x, y):
        x <<= y
        x >>= 1
        return x

    check(in_place, a, b)
    check(lambda x: torch.tensor([True, False], device=x.device) << 2, a)  # bool << int: int64
    with pytest.raises(RuntimeError, match="integer"):
        torch.ones(2, device="tpu") << 1
    next_op_works()


def test_gcd_and_lcm_match_the_cpu():
    big = torch.iinfo(torch.int64).min
    a = torch.tensor([0, -4, 6, 0, big, 48, 17, 1071, 2**62, 832040])  # 832040, 514229: Fibonacci numbers
    b = torch.tensor([0, 6, -4, 5, 2, 18, 0, 462, 3 * 2**40, 514229])
    check(torch.gcd, a, b)
    check(torch.lcm, a[:4], b[:4])
    check(torch.lcm, torch.tensor([2**40]), torch.tensor([3**20]))
    x, y = torch.randint(-10**6, 10**6, (300,)), torch.randint(-10**6, 10**6, (300,))
    check(torch.gcd, x, y)
    check(torch.lcm, x, y)
    check(torch.gcd, x.to(torch.int16), y.to(torch.int16))
    check(torch.gcd, torch.tensor([5, 0, 255], dtype=torch.uint8), torch.tensor([200, 0, 15], dtype=torch.uint8))
    check(torch.gcd, torch.tensor(12, dtype=torch.int32), torch.tensor([[8], [18]], dtype=torch.int32))
    check(lambda x, y: x.gcd_(y), x, y)
    with pytest.raises(RuntimeError, match="gcd.*float32.*integer"):
        torch.gcd(torch.ones(2, device="tpu"), torch.ones(2, device="tpu"))
    next_op_works()


def test_rounded_division_of_int64_is_exact_beyond_2_53():
    # Through a float, the quotient of these would be off by thousands.
    a = torch.tensor([2**60 + 3, -(2**53) - 1, 7, -7, 6, 2**62 + 1])
    b = torch.tensor([2, 3, -2, 2, -3, -5])
    for mode in ("floor", "trunc"):
        assert_same(torch.div(a.to("tpu"), b.to("tpu"), rounding_mode=mode), torch.div(a, b, rounding_mode=mode))
        assert_same(torch.div(a.to("tpu"), -3, rounding_mode=mode), torch.div(a, -3, rounding_mode=mode))
    assert_same(a.to("tpu") // b.to("tpu"), a // b)
    assert_same(torch.floor_divide(a.to("tpu"), 7), torch.floor_divide(a, 7))


def test_threshold_and_the_activation_backwards_run_on_the_device():
    # F.threshold (forward and backward), silu, gelu (both forms), sigmoid
    # and tanh backwards: one runtime call each, no CPU fallback.
    check(lambda x: F.threshold(x, 0.3, -2.0), rand(4, 5))
    check(lambda x: F.threshold(x, 1, 7), rand(4, 5, dtype=torch.int64))
    check_grad(lambda x: F.threshold(x, 0.3, -2.0).pow(2), rand(4, 5))
    check_grad(lambda x: F.silu(x) * 2, rand(4, 5))
    check_grad(lambda x: F.gelu(x) + F.gelu(x, approximate="tanh"), rand(4, 5))
    check_grad(lambda x: torch.sigmoid(x) * torch.tanh(x), rand(4, 5))
