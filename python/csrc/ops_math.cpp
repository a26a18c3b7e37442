// More elementwise math and activations (with their backwards), composed
// from the runtime's ops; flip/roll/linspace/eye; and the fused LSTM and GRU
// cells that torch.nn.LSTM/GRU call on non-CPU devices (the runtime's, one
// call each).
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>
#include <functional>
#include <limits>

#include "backend.h"

namespace etpu {
namespace {

using Fn = std::function<Handle(const Handle&)>;

Handle s_add(const Handle& x, double v) { return binary_scalar("add", x, v); }
Handle s_rsub(double v, const Handle& x) { return binary_scalar("sub", x, v, /*reversed=*/true); }
Handle s_mul(const Handle& x, double v) { return binary_scalar("mul", x, v); }
Handle zero_like(const Handle& x) { return s_mul(x, 0.0); }

// A unary op computed in the result's (floating) dtype.
at::Tensor& unary_into(const at::Tensor& self, at::Tensor& out, const Fn& f) {
  OpScope s;
  at::native::resize_output(out, self.sizes());
  Handle x = read(self);
  if (at::isFloatingType(out.scalar_type()) && self.scalar_type() != out.scalar_type()) x = cast(x, out.scalar_type());
  write(out, f(x));
  return out;
}

// exp(x) - 1 without cancellation near 0 (Kahan): u = exp(x); (u - 1) * x / log(u).
Handle expm1_of(const Handle& x) {
  Handle u = unary("exp", x);
  Handle um1 = s_add(u, -1.0);
  Handle accurate = div(mul(um1, x), unary("log", u));
  Handle one = binary_scalar("eq", u, 1.0);
  Handle inf = binary_scalar("eq", u, std::numeric_limits<double>::infinity());
  return where(one, x, where(inf, u, where(binary_scalar("eq", um1, -1.0), um1, accurate)));
}

Handle trunc_of(const Handle& x) { return mul(unary("sign", x), unary("floor", unary("abs", x))); }

Handle softplus_of(const Handle& x, double beta, double threshold) {
  Handle bx = s_mul(x, beta);
  Handle soft = s_mul(unary("log1p", unary("exp", bx)), 1.0 / beta);
  return where(binary_scalar("gt", bx, threshold), x, soft);
}

#define MATH_KERNEL(name, body)                                                   \
  at::Tensor& name##_out(const at::Tensor& self, at::Tensor& out) {               \
    return unary_into(self, out, [](const Handle& x) -> Handle { return body; }); \
  }

MATH_KERNEL(exp2, unary("exp", s_mul(x, M_LN2)))
MATH_KERNEL(log2, s_mul(unary("log", x), 1.0 / M_LN2))
MATH_KERNEL(log10, s_mul(unary("log", x), 1.0 / M_LN10))
MATH_KERNEL(expm1, expm1_of(x))
MATH_KERNEL(tan, div(unary("sin", x), unary("cos", x)))
MATH_KERNEL(sinh, s_mul(sub(unary("exp", x), unary("exp", unary("neg", x))), 0.5))
MATH_KERNEL(cosh, s_mul(add(unary("exp", x), unary("exp", unary("neg", x))), 0.5))
MATH_KERNEL(atan, binary("atan2", x, s_add(zero_like(x), 1.0)))
MATH_KERNEL(asin, binary("atan2", x, unary("sqrt", s_rsub(1.0, mul(x, x)))))
MATH_KERNEL(acos, binary("atan2", unary("sqrt", s_rsub(1.0, mul(x, x))), x))
MATH_KERNEL(trunc, trunc_of(x))
MATH_KERNEL(frac, sub(x, trunc_of(x)))
MATH_KERNEL(mish, mul(x, unary("tanh", softplus_of(x, 1.0, 20.0))))

at::Tensor& signbit_out(const at::Tensor& self, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, self.sizes());
  Handle x = read(self);
  if (!at::isFloatingType(self.scalar_type())) {
    write(out, binary_scalar("lt", x, 0));
    return out;
  }
  // -0.0 has its sign bit set: atan2(-0.0, -1) is -pi.
  Handle neg_zero = binary_scalar("lt", binary("atan2", x, s_add(zero_like(x), -1.0)), 0.0);
  Handle sign = where(binary_scalar("eq", x, 0.0), neg_zero, binary_scalar("lt", x, 0.0));
  write(out, where(unary("isnan", x), full(device_index(self), {}, 0, at::kBool), sign));
  return out;
}

at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                           std::optional<double> neginf, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, self.sizes());
  Handle x = read(self);
  if (!at::isFloatingType(self.scalar_type())) {
    write(out, x);
    return out;
  }
  double big = self.scalar_type() == at::kDouble      ? std::numeric_limits<double>::max()
               : self.scalar_type() == at::kHalf      ? 65504.0
               : self.scalar_type() == at::kBFloat16  ? 3.3895313892515355e38
                                                      : std::numeric_limits<float>::max();
  const double inf = std::numeric_limits<double>::infinity();
  int64_t dev = device_index(self);
  at::ScalarType t = self.scalar_type();
  Handle r = where(unary("isnan", x), full(dev, {}, nan.value_or(0.0), t), x);
  r = where(binary_scalar("eq", x, inf), full(dev, {}, posinf.value_or(big), t), r);
  r = where(binary_scalar("eq", x, -inf), full(dev, {}, neginf.value_or(-big), t), r);
  write(out, r);
  return out;
}

at::Tensor logit(const at::Tensor& self, std::optional<double> eps) {
  OpScope s;
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(at::isFloatingType(self.scalar_type())
                                                                    ? self.scalar_type()
                                                                    : at::kFloat));
  return unary_into(self, out, [eps](const Handle& x) {
    if (!eps.has_value()) return unary("log", div(x, s_rsub(1.0, x)));
    Handle p = clamp(x, at::Scalar(*eps), at::Scalar(1.0 - *eps));
    return unary("log", div(p, s_rsub(1.0, p)));
  });
}

// d logit(x) = 1 / (x (1 - x)); outside [eps, 1 - eps] the clamp makes it 0,
// and without eps it is NaN outside [0, 1], as ATen has it.
at::Tensor& logit_backward_out(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps,
                               at::Tensor& grad_input) {
  OpScope s;
  Handle x = read(self), g = read(grad);
  double lo = eps.value_or(0.0), hi = 1.0 - lo;
  Handle outside = binary("logical_or", binary_scalar("lt", x, lo), binary_scalar("gt", x, hi));
  Handle d = div(g, mul(x, s_rsub(1.0, x)));
  double fill = eps.has_value() ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  write(grad_input, where(outside, full(device_index(self), {}, fill, grad_input.scalar_type()), d));
  return grad_input;
}

// ---------------------------------------------------------------- binary ----

Handle operand(const at::Tensor& t, const at::Tensor& like) { return read_operand(t, device_index(like)); }

at::Tensor& xlogy_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, at::infer_size(self.sizes(), other.sizes()));
  Handle x = cast(operand(self, out), out.scalar_type()), y = cast(operand(other, out), out.scalar_type());
  Handle r = where(binary_scalar("eq", x, 0.0), zero_like(mul(x, y)), mul(x, unary("log", y)));
  write(out, where(unary("isnan", y), y, r));
  return out;
}

at::Tensor& fmod_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  Handle a = cast(operand(self, out), out.scalar_type()), b = cast(operand(other, out), out.scalar_type());
  Handle q = div(a, b);
  if (at::isIntegralType(out.scalar_type(), true)) q = cast(trunc_of(q), out.scalar_type());
  else q = trunc_of(q);
  write(out, sub(a, mul(b, q)));
  return out;
}

at::Tensor& fmod_scalar_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) {
  at::Tensor o = at::scalar_tensor(other, at::TensorOptions().dtype(other.isFloatingPoint() ? at::kDouble : at::kLong));
  o.unsafeGetTensorImpl()->set_wrapped_number(true);
  return etpu::fmod_out(self, o, out);
}

at::Tensor& hypot_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  Handle a = operand(self, out), b = operand(other, out);
  write(out, unary("sqrt", add(mul(a, a), mul(b, b))));
  return out;
}

at::Tensor floor_divide(const at::Tensor& self, const at::Tensor& other) {
  return at::div(self, other, "floor");
}

at::Tensor& clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                             const std::optional<at::Tensor>& max, at::Tensor& out) {
  OpScope s;
  Handle x = cast(read(self), out.scalar_type());
  if (min.has_value() && min->defined()) x = binary("maximum", x, cast(operand(*min, out), out.scalar_type()));
  if (max.has_value() && max->defined()) x = binary("minimum", x, cast(operand(*max, out), out.scalar_type()));
  write(out, x);
  return out;
}

at::Tensor& clamp_min_tensor_out(const at::Tensor& self, const at::Tensor& min, at::Tensor& out) {
  return etpu::clamp_tensor_out(self, min, std::nullopt, out);
}

at::Tensor& clamp_max_tensor_out(const at::Tensor& self, const at::Tensor& max, at::Tensor& out) {
  return etpu::clamp_tensor_out(self, std::nullopt, max, out);
}

// ----------------------------------------------------------- activations ----

at::Tensor& hardtanh_out(const at::Tensor& self, const at::Scalar& lo, const at::Scalar& hi, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, self.sizes());
  write(out, clamp(read(self), lo, hi));
  return out;
}

at::Tensor hardtanh(const at::Tensor& self, const at::Scalar& lo, const at::Scalar& hi) {
  at::Tensor out = at::empty_like(self);
  return etpu::hardtanh_out(self, lo, hi, out);
}

at::Tensor& hardtanh_(at::Tensor& self, const at::Scalar& lo, const at::Scalar& hi) {
  return etpu::hardtanh_out(self, lo, hi, self);
}

at::Tensor& hardtanh_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lo,
                                  const at::Scalar& hi, at::Tensor& grad_input) {
  OpScope s;
  at::native::resize_output(grad_input, self.sizes());
  Handle x = read(self);
  Handle inside = binary("logical_and", binary_scalar("gt", x, lo), binary_scalar("lt", x, hi));
  write(grad_input, where(inside, read(grad), full(device_index(self), {}, 0, grad.scalar_type())));
  return grad_input;
}

at::Tensor hardtanh_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lo,
                             const at::Scalar& hi) {
  at::Tensor out = at::empty_like(grad);
  return etpu::hardtanh_backward_out(grad, self, lo, hi, out);
}

at::Tensor& leaky_relu_out(const at::Tensor& self, const at::Scalar& slope, at::Tensor& out) {
  OpScope s;
  Handle x = read(self);
  write(out, where(binary_scalar("gt", x, 0.0), x, mul(x, slope)));
  return out;
}

at::Tensor& leaky_relu_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& slope,
                                    bool self_is_result, at::Tensor& grad_input) {
  OpScope s;
  Handle g = read(grad);
  write(grad_input, where(binary_scalar("gt", read(self), 0.0), g, mul(g, slope)));
  return grad_input;
}

at::Tensor& elu_out(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                    const at::Scalar& input_scale, at::Tensor& out) {
  OpScope s;
  Handle x = read(self);
  Handle neg = s_mul(expm1_of(s_mul(x, input_scale.toDouble())), alpha.toDouble());
  write(out, s_mul(where(binary_scalar("gt", x, 0.0), x, neg), scale.toDouble()));
  return out;
}

at::Tensor& elu_backward_out(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                             const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                             at::Tensor& grad_input) {
  OpScope s;
  Handle v = read(self_or_result), g = read(grad);
  double a = alpha.toDouble(), sc = scale.toDouble(), is = input_scale.toDouble();
  // x <= 0: d = scale * alpha * input_scale * exp(x * input_scale), or from the
  // result y = scale * alpha * (exp(x is) - 1): d = is * (y + scale * alpha).
  Handle neg = is_result ? s_mul(s_add(v, sc * a), is) : s_mul(unary("exp", s_mul(v, is)), sc * a * is);
  write(grad_input, mul(g, where(binary_scalar("gt", v, 0.0), s_add(zero_like(v), sc), neg)));
  return grad_input;
}

at::Tensor& softplus_out(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold,
                         at::Tensor& out) {
  OpScope s;
  write(out, softplus_of(read(self), beta.toDouble(), threshold.toDouble()));
  return out;
}

at::Tensor& softplus_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& beta,
                                  const at::Scalar& threshold, at::Tensor& grad_input) {
  OpScope s;
  Handle x = read(self), g = read(grad);
  Handle bx = s_mul(x, beta.toDouble());
  Handle d = unary("sigmoid", bx);
  write(grad_input, where(binary_scalar("gt", bx, threshold.toDouble()), g, mul(g, d)));
  return grad_input;
}

at::Tensor mish_backward(const at::Tensor& grad, const at::Tensor& self) {
  OpScope s;
  Handle x = read(self);
  Handle t = unary("tanh", softplus_of(x, 1.0, 20.0));
  // d = tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)^2)
  Handle d = add(t, mul(mul(x, unary("sigmoid", x)), s_rsub(1.0, mul(t, t))));
  at::Tensor out = at::empty_like(grad);
  write(out, mul(read(grad), d));
  return out;
}

at::Tensor& hardswish_out(const at::Tensor& self, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, self.sizes());
  Handle x = read(self);
  write(out, s_mul(mul(x, clamp(s_add(x, 3.0), at::Scalar(0.0), at::Scalar(6.0))), 1.0 / 6.0));
  return out;
}

at::Tensor hardswish(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self);
  return etpu::hardswish_out(self, out);
}

at::Tensor& hardswish_(at::Tensor& self) { return etpu::hardswish_out(self, self); }

at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& self) {
  OpScope s;
  Handle x = read(self);
  Handle mid = s_add(s_mul(x, 1.0 / 3.0), 0.5);
  Handle d = where(binary_scalar("lt", x, -3.0), zero_like(x),
                   where(binary_scalar("le", x, 3.0), mid, s_add(zero_like(x), 1.0)));
  at::Tensor out = at::empty_like(grad);
  write(out, mul(read(grad), d));
  return out;
}

// hardsigmoid(x) = clamp(x / 6 + 1/2, 0, 1); its slope is 1/6 inside (-3, 3).
at::Tensor& hardsigmoid_out(const at::Tensor& self, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, self.sizes());
  write(out, clamp(s_add(s_mul(read(self), 1.0 / 6.0), 0.5), at::Scalar(0.0), at::Scalar(1.0)));
  return out;
}

at::Tensor hardsigmoid(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self);
  return etpu::hardsigmoid_out(self, out);
}

at::Tensor& hardsigmoid_(at::Tensor& self) { return etpu::hardsigmoid_out(self, self); }

at::Tensor& hardsigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, at::Tensor& grad_input) {
  OpScope s;
  at::native::resize_output(grad_input, self.sizes());
  Handle x = read(self), g = read(grad);
  Handle inside = binary("logical_and", binary_scalar("gt", x, -3.0), binary_scalar("lt", x, 3.0));
  write(grad_input, where(inside, s_mul(g, 1.0 / 6.0), zero_like(g)));
  return grad_input;
}

at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor out = at::empty_like(grad);
  return etpu::hardsigmoid_backward_out(grad, self, out);
}

// log_sigmoid(x) = -softplus(-x); the buffer is unused (CPU keeps exp(-|x|)).
std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self, at::Tensor& output,
                                                             at::Tensor& buffer) {
  OpScope s;
  at::native::resize_output(output, self.sizes());
  at::native::resize_output(buffer, {0});
  write(output, unary("neg", softplus_of(unary("neg", read(self)), 1.0, 20.0)));
  return {output, buffer};
}

std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self), buffer = at::empty({0}, self.options());
  etpu::log_sigmoid_forward_out(self, out, buffer);
  return {out, buffer};
}

at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer,
                                     at::Tensor& grad_input) {
  OpScope s;
  at::native::resize_output(grad_input, self.sizes());
  write(grad_input, mul(read(grad), unary("sigmoid", unary("neg", read(self)))));
  return grad_input;
}

at::Tensor log_sigmoid_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer) {
  at::Tensor out = at::empty_like(grad);
  return etpu::log_sigmoid_backward_out(grad, self, buffer, out);
}

// ---------------------------------------------------------------- layout ----

at::Tensor flip_fn(const at::Tensor& self, at::IntArrayRef dims) {
  OpScope s;
  at::Tensor out = at::empty(self.sizes(), self.options());
  write(out, etpu::flip(read(self), dims));
  return out;
}

at::Tensor roll(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  OpScope s;
  at::Tensor out = at::empty(self.sizes(), self.options());
  Handle x = read(self);
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "roll: without dims, expected one shift, got ", shifts);
    x = reshape(x, {self.numel()});
  }
  std::vector<int64_t> ds = dims.empty() ? std::vector<int64_t>{0} : dims.vec();
  TORCH_CHECK(ds.size() == shifts.size(), "roll: shifts ", shifts, " and dims ", dims, " must have the same length");
  std::vector<int64_t> shape = dims.empty() ? std::vector<int64_t>{self.numel()} : self.sizes().vec();
  for (size_t i = 0; i < ds.size(); i++) {
    int64_t d = at::maybe_wrap_dim(ds[i], static_cast<int64_t>(shape.size()));
    int64_t n = shape[d];
    if (n == 0) continue;
    int64_t k = ((shifts[i] % n) + n) % n;
    if (k == 0) continue;
    Handle tail = slice(x, d, n - k, n, 1), head = slice(x, d, 0, n - k, 1);
    x = cat({tail.get(), head.get()}, d);
  }
  write(out, reshape(x, self.sizes()));
  return out;
}

// PyTorch's linspace: the first half steps up from start, the second half
// down from end, so both ends are exact.
at::Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  double a = start.toDouble(), b = end.toDouble();
  if (!at::isFloatingType(out.scalar_type())) {
    a = std::trunc(a);
    b = std::trunc(b);
  }
  int64_t dev = device_index(out);
  if (steps == 1) {
    write(out, full(dev, {1}, a, at::kDouble));
    return out;
  }
  Handle i = arange(dev, 0, static_cast<double>(steps), 1, at::kDouble);
  double step = steps > 1 ? (b - a) / static_cast<double>(steps - 1) : 0.0;
  Handle up = s_add(s_mul(i, step), a);
  Handle down = s_rsub(b, s_mul(s_rsub(static_cast<double>(steps - 1), i), step));
  write(out, where(binary_scalar("lt", i, static_cast<double>(steps / 2)), up, down));
  return out;
}

at::Tensor& eye_out(int64_t n, int64_t m, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, {n, m});
  if (n == 0 || m == 0) return out;
  int64_t dev = device_index(out);
  Handle rows = reshape(arange(dev, 0, static_cast<double>(n), 1, at::kLong), {n, 1});
  write(out, binary("eq", rows, arange(dev, 0, static_cast<double>(m), 1, at::kLong)));
  return out;
}

at::Tensor& eye_n_out(int64_t n, at::Tensor& out) { return etpu::eye_out(n, n, out); }

at::Tensor prod_all(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  OpScope s;
  at::ScalarType t = dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  at::Tensor out = at::empty({}, self.options().dtype(t));
  write(out, reduce("prod", cast(read(self), t), {}, false));
  return out;
}

at::Tensor count_nonzero(const at::Tensor& self, at::IntArrayRef dims) {
  OpScope s;
  Handle nz = cast(binary_scalar("ne", read(self), 0), at::kLong);
  std::vector<int64_t> ds;
  for (int64_t d : dims) ds.push_back(at::maybe_wrap_dim(d, std::max<int64_t>(self.dim(), 1)));
  Handle r = reduce("sum", nz, ds, false);
  at::Tensor out = at::empty(dims_of(r), self.options().dtype(at::kLong));
  write(out, r);
  return out;
}

// ------------------------------------------------------------ RNN cells ----
// The runtime's fused cells (Tensor::lstm_cell, gru_cell and their
// backwards), one C ABI call each.

at::Tensor materialize(const Handle& h, const at::Tensor& like) {
  at::Tensor out = at::empty(dims_of(h), like.options());
  write(out, h);
  return out;
}

// An optional result: undefined where the runtime returned none (handle 0).
at::Tensor materialize_optional(const Handle& h, const at::Tensor& like) {
  return h.get() == 0 ? at::Tensor() : materialize(h, like);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                         const at::Tensor& cx, const std::optional<at::Tensor>& ib,
                                                         const std::optional<at::Tensor>& hb) {
  OpScope s;
  Handle b0 = optional_read(ib), b1 = optional_read(hb), hy, cy, ws;
  check(etpu_lstm_cell(read(input_gates).get(), read(hidden_gates).get(), read(cx).get(), b0.get(), b1.get(),
                       origin(), hy.out(), cy.out(), ws.out()));
  return {materialize(hy, cx), materialize(cy, cx), materialize(ws, input_gates)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward(const std::optional<at::Tensor>& grad_hy,
                                                                  const std::optional<at::Tensor>& grad_cy,
                                                                  const at::Tensor& cx, const at::Tensor& cy,
                                                                  const at::Tensor& workspace, bool has_bias) {
  OpScope s;
  Handle ghy = optional_read(grad_hy), gcy = optional_read(grad_cy), gates, gcx, gb;
  check(etpu_lstm_cell_backward(ghy.get(), gcy.get(), read(cx).get(), read(cy).get(), read(workspace).get(), has_bias,
                                origin(), gates.out(), gcx.out(), gb.out()));
  return {materialize(gates, workspace), materialize(gcx, cx), materialize_optional(gb, workspace)};
}

std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                            const at::Tensor& hx, const std::optional<at::Tensor>& ib,
                                            const std::optional<at::Tensor>& hb) {
  OpScope s;
  Handle b0 = optional_read(ib), b1 = optional_read(hb), hy, ws;
  check(etpu_gru_cell(read(input_gates).get(), read(hidden_gates).get(), read(hx).get(), b0.get(), b1.get(), origin(),
                      hy.out(), ws.out()));
  return {materialize(hy, hx), materialize(ws, hx)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(const at::Tensor& grad_hy,
                                                                                         const at::Tensor& workspace,
                                                                                         bool has_bias) {
  OpScope s;
  Handle gi, gh, gx, gib, ghb;
  check(etpu_gru_cell_backward(read(grad_hy).get(), read(workspace).get(), has_bias, origin(), gi.out(), gh.out(),
                               gx.out(), gib.out(), ghb.out()));
  return {materialize(gi, grad_hy), materialize(gh, grad_hy), materialize(gx, grad_hy),
          materialize_optional(gib, grad_hy), materialize_optional(ghb, grad_hy)};
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("exp2.out", exp2_out);
  m.impl("log2.out", log2_out);
  m.impl("log10.out", log10_out);
  m.impl("expm1.out", expm1_out);
  m.impl("tan.out", tan_out);
  m.impl("sinh.out", sinh_out);
  m.impl("cosh.out", cosh_out);
  m.impl("atan.out", atan_out);
  m.impl("asin.out", asin_out);
  m.impl("acos.out", acos_out);
  m.impl("trunc.out", trunc_out);
  m.impl("frac.out", frac_out);
  m.impl("mish.out", mish_out);
  m.impl("signbit.out", signbit_out);
  m.impl("nan_to_num.out", nan_to_num_out);
  m.impl("logit", logit);
  m.impl("logit_backward.grad_input", logit_backward_out);
  m.impl("xlogy.OutTensor", xlogy_out);
  m.impl("fmod.Tensor_out", fmod_out);
  m.impl("fmod.Scalar_out", fmod_scalar_out);
  m.impl("hypot.out", hypot_out);
  m.impl("floor_divide", floor_divide);
  m.impl("clamp.Tensor_out", clamp_tensor_out);
  m.impl("clamp_min.Tensor_out", clamp_min_tensor_out);
  m.impl("clamp_max.Tensor_out", clamp_max_tensor_out);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("hardtanh_", hardtanh_);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("leaky_relu.out", leaky_relu_out);
  m.impl("leaky_relu_backward.grad_input", leaky_relu_backward_out);
  m.impl("elu.out", elu_out);
  m.impl("elu_backward.grad_input", elu_backward_out);
  m.impl("softplus.out", softplus_out);
  m.impl("softplus_backward.grad_input", softplus_backward_out);
  m.impl("mish_backward", mish_backward);
  m.impl("hardsigmoid", hardsigmoid);
  m.impl("hardsigmoid.out", hardsigmoid_out);
  m.impl("hardsigmoid_", hardsigmoid_);
  m.impl("hardsigmoid_backward", hardsigmoid_backward);
  m.impl("hardsigmoid_backward.grad_input", hardsigmoid_backward_out);
  m.impl("hardswish", hardswish);
  m.impl("hardswish.out", hardswish_out);
  m.impl("hardswish_", hardswish_);
  m.impl("hardswish_backward", hardswish_backward);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_forward.output", log_sigmoid_forward_out);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("log_sigmoid_backward.grad_input", log_sigmoid_backward_out);
  m.impl("flip", flip_fn);
  m.impl("roll", roll);
  m.impl("linspace.out", linspace_out);
  m.impl("eye.m_out", eye_out);
  m.impl("eye.out", eye_n_out);
  m.impl("prod", prod_all);
  m.impl("count_nonzero.dim_IntList", count_nonzero);
  m.impl("_thnn_fused_lstm_cell", lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", gru_cell_backward);
}
