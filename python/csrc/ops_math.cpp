// More elementwise math: the functions and activations (with their backwards)
// the runtime composes (runtime/src/tensor/activation.rs); flip, roll,
// linspace, eye, count_nonzero; and the fused LSTM and GRU cells
// torch.nn.LSTM/GRU call on non-CPU devices: one runtime call each.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/threshold_backward_compositeexplicitautogradnonfunctional_dispatch.h>
#include <torch/library.h>

#include <limits>

#include "backend.h"

namespace etpu {
namespace {

// `out = name(args...)`, shaped as `like`: a function the runtime composes
// (runtime/src/tensor/activation.rs), one call. A backward, `name_backward`,
// takes (grad, saved, params..., saved_is_result) and is shaped as `saved`.
at::Tensor& composed(const char* name, std::initializer_list<PointwiseArg> args, const at::Tensor& like,
                     at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, like.sizes());
  pointwise(name, args, out);
  return out;
}

// A backward's saved_is_result argument: the saved tensor is the input.
const at::Scalar kSavedIsInput(false);

#define COMPOSED_KERNEL(name) \
  at::Tensor& name##_out(const at::Tensor& self, at::Tensor& out) { return composed(#name, {self}, self, out); }

COMPOSED_KERNEL(exp2)
COMPOSED_KERNEL(log2)
COMPOSED_KERNEL(log10)
COMPOSED_KERNEL(expm1)
COMPOSED_KERNEL(tan)
COMPOSED_KERNEL(sinh)
COMPOSED_KERNEL(cosh)
COMPOSED_KERNEL(atan)
COMPOSED_KERNEL(asin)
COMPOSED_KERNEL(acos)
COMPOSED_KERNEL(trunc)
COMPOSED_KERNEL(frac)
COMPOSED_KERNEL(mish)
COMPOSED_KERNEL(hardswish)
COMPOSED_KERNEL(hardsigmoid)
COMPOSED_KERNEL(sinc)

at::Tensor& special_entr_out(const at::Tensor& self, at::Tensor& out) { return composed("entr", {self}, self, out); }

at::Tensor& signbit_out(const at::Tensor& self, at::Tensor& out) { return composed("signbit", {self}, self, out); }

// A NaN posinf or neginf: the dtype's largest finite value (etpu_pointwise).
at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                           std::optional<double> neginf, at::Tensor& out) {
  const double largest = std::numeric_limits<double>::quiet_NaN();
  return composed("nan_to_num",
                  {self, at::Scalar(nan.value_or(0.0)), at::Scalar(posinf.value_or(largest)),
                   at::Scalar(neginf.value_or(largest))},
                  self, out);
}

at::Tensor logit(const at::Tensor& self, std::optional<double> eps) {
  at::ScalarType t = at::isFloatingType(self.scalar_type()) ? self.scalar_type() : at::kFloat;
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(t));
  if (eps.has_value()) return composed("logit", {self, at::Scalar(*eps)}, self, out);
  return composed("logit", {self}, self, out);
}

at::Tensor& logit_backward_out(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps,
                               at::Tensor& grad_input) {
  if (eps.has_value()) return composed("logit_backward", {grad, self, at::Scalar(*eps), kSavedIsInput}, self, grad_input);
  return composed("logit_backward", {grad, self, kSavedIsInput}, self, grad_input);
}

// ---------------------------------------------------------------- binary ----

Handle operand(const at::Tensor& t, const at::Tensor& like) { return read_operand(t, device_index(like)); }

// hypot, xlogy, fmod: composed by the runtime (runtime/src/tensor/pointwise.rs).
at::Tensor& xlogy_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, at::infer_size(self.sizes(), other.sizes()));
  pointwise("xlogy", {self, other}, out);
  return out;
}

at::Tensor& fmod_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  pointwise("fmod", {self, other}, out);
  return out;
}

at::Tensor& fmod_scalar_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) {
  OpScope s;
  pointwise("fmod", {self, other}, out);
  return out;
}

at::Tensor& hypot_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  pointwise("hypot", {self, other}, out);
  return out;
}

// logaddexp, logaddexp2: composed by the runtime without overflow.
at::Tensor& logaddexp_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  pointwise("logaddexp", {self, other}, out);
  return out;
}

at::Tensor& logaddexp2_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  pointwise("logaddexp2", {self, other}, out);
  return out;
}

// xlog1py, copysign, heaviside: composed by the runtime (pointwise.rs).
at::Tensor& special_xlog1py_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, at::infer_size(self.sizes(), other.sizes()));
  pointwise("xlog1py", {self, other}, out);
  return out;
}

at::Tensor& copysign_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  pointwise("copysign", {self, other}, out);
  return out;
}

at::Tensor& heaviside_out(const at::Tensor& self, const at::Tensor& values, at::Tensor& out) {
  OpScope s;
  pointwise("heaviside", {self, values}, out);
  return out;
}

// polygamma(n, x): the runtime's table op (CHLO's polygamma), n the left
// operand; digamma's backward (n = 1) lands here.
at::Tensor& polygamma_out(int64_t n, const at::Tensor& self, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  pointwise("polygamma", {at::Scalar(n), self}, out);
  return out;
}

// torch.special's orthogonal polynomials: the runtime's Tensor::polynomial
// (one op, a loop up to the largest degree), the structured meta function
// having broadcast x and n and chosen the dtype.
#define POLYNOMIAL_OUT(name)                                                                      \
  at::Tensor& special_##name##_out(const at::Tensor& x, const at::Tensor& n, at::Tensor& out) { \
    OpScope s;                                                                                  \
    Handle h;                                                                                   \
    int64_t d = device_index(out);                                                              \
    check(etpu_polynomial(#name, read_operand(x, d).get(), read_operand(n, d).get(), origin(), h.out())); \
    write(out, h);                                                                              \
    return out;                                                                                 \
  }
#define POLYNOMIALS(X)                    \
  X(chebyshev_polynomial_t)               \
  X(chebyshev_polynomial_u)               \
  X(chebyshev_polynomial_v)               \
  X(chebyshev_polynomial_w)               \
  X(shifted_chebyshev_polynomial_t)       \
  X(shifted_chebyshev_polynomial_u)       \
  X(shifted_chebyshev_polynomial_v)       \
  X(shifted_chebyshev_polynomial_w)       \
  X(hermite_polynomial_h)                 \
  X(hermite_polynomial_he)                \
  X(laguerre_polynomial_l)                \
  X(legendre_polynomial_p)
POLYNOMIALS(POLYNOMIAL_OUT)
#undef POLYNOMIAL_OUT

// isin: each element compared with every test element by the runtime (what
// generate() asks at every token: are the new tokens end-of-sequence ones).
at::Tensor& isin_out(const at::Tensor& elements, const at::Tensor& test, bool /*assume_unique*/, bool invert,
                     at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, elements.sizes());
  pointwise(invert ? "isin_invert" : "isin", {elements, test}, out);
  return out;
}

at::Tensor& isin_scalar_test_out(const at::Tensor& elements, const at::Scalar& test, bool /*assume_unique*/,
                                 bool invert, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, elements.sizes());
  pointwise(invert ? "isin_invert" : "isin", {elements, test}, out);
  return out;
}

at::Tensor& isin_scalar_element_out(const at::Scalar& element, const at::Tensor& test, bool assume_unique,
                                    bool invert, at::Tensor& out) {
  return isin_out(at::scalar_tensor(element, test.options()), test, assume_unique, invert, out);
}

// nansum: NaNs read as zeros, then PyTorch's sum (dtype and dims as sum's).
at::Tensor without_nans(const at::Tensor& self) {
  return at::isFloatingType(self.scalar_type()) ? at::where(at::isnan(self), 0, self) : self;
}

at::Tensor nansum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  OpScope s;
  return at::sum(without_nans(self), dim, keepdim, dtype);
}

at::Tensor& nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, at::Tensor& out) {
  OpScope s;
  return at::sum_out(out, without_nans(self), dim, keepdim, dtype);
}

at::Tensor floor_divide(const at::Tensor& self, const at::Tensor& other) {
  return at::div(self, other, "floor");
}

// ATen ops with a kernel per device (none composite), made of the tpu
// kernels: each at:: call below dispatches to this backend's kernels.

// rsub: other - alpha * self.
at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

// fmax, fmin: the larger (smaller) of the two, NaN only where both are.
at::Tensor& fmax_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  at::Tensor both = at::maximum(self, other);
  at::Tensor r = at::where(at::isnan(self), other, at::where(at::isnan(other), self, both));
  return out.copy_(r);
}

at::Tensor& fmin_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  at::Tensor both = at::minimum(self, other);
  at::Tensor r = at::where(at::isnan(self), other, at::where(at::isnan(other), self, both));
  return out.copy_(r);
}

// hardshrink: x where |x| > lambda, else 0; softshrink: x moved toward 0 by
// lambda, 0 within it. Their backwards pass the gradient where x is kept.
at::Tensor& hardshrink_out(const at::Tensor& self, const at::Scalar& lambd, at::Tensor& out) {
  return out.copy_(at::where(at::abs(self) > lambd, self, at::zeros_like(self)));
}

at::Tensor& hardshrink_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                                    at::Tensor& out) {
  return out.copy_(at::where(at::abs(self) > lambd, grad, at::zeros_like(grad)));
}

at::Tensor& softshrink_out(const at::Tensor& self, const at::Scalar& lambd, at::Tensor& out) {
  TORCH_CHECK(lambd.toDouble() >= 0, "lambda must be greater or equal to 0, but found to be ", lambd.toDouble(), ".");
  at::Tensor shrunk = at::where(self > lambd, self - lambd, at::where(self < -lambd.toDouble(), self + lambd,
                                                                       at::zeros_like(self)));
  return out.copy_(shrunk);
}

at::Tensor& softshrink_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd,
                                    at::Tensor& out) {
  return out.copy_(at::where(at::abs(self) > lambd, grad, at::zeros_like(grad)));
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
// Each one call of a function the runtime composes (with its parameters);
// the functional and in-place forms allocate or reuse, then call it.

at::Tensor& hardtanh_out(const at::Tensor& self, const at::Scalar& lo, const at::Scalar& hi, at::Tensor& out) {
  return composed("hardtanh", {self, lo, hi}, self, out);
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
  return composed("hardtanh_backward", {grad, self, lo, hi, kSavedIsInput}, self, grad_input);
}

at::Tensor hardtanh_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lo,
                             const at::Scalar& hi) {
  at::Tensor out = at::empty_like(grad);
  return etpu::hardtanh_backward_out(grad, self, lo, hi, out);
}

at::Tensor& leaky_relu_out(const at::Tensor& self, const at::Scalar& slope, at::Tensor& out) {
  return composed("leaky_relu", {self, slope}, self, out);
}

at::Tensor& leaky_relu_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& slope,
                                    bool self_is_result, at::Tensor& grad_input) {
  return composed("leaky_relu_backward", {grad, self, slope, at::Scalar(self_is_result)}, self, grad_input);
}

at::Tensor& elu_out(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                    const at::Scalar& input_scale, at::Tensor& out) {
  return composed("elu", {self, alpha, scale, input_scale}, self, out);
}

at::Tensor& elu_backward_out(const at::Tensor& grad, const at::Scalar& alpha, const at::Scalar& scale,
                             const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                             at::Tensor& grad_input) {
  return composed("elu_backward", {grad, self_or_result, alpha, scale, input_scale, at::Scalar(is_result)},
                           self_or_result, grad_input);
}

at::Tensor& softplus_out(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold,
                         at::Tensor& out) {
  return composed("softplus", {self, beta, threshold}, self, out);
}

at::Tensor& softplus_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& beta,
                                  const at::Scalar& threshold, at::Tensor& grad_input) {
  return composed("softplus_backward", {grad, self, beta, threshold, kSavedIsInput}, self, grad_input);
}

at::Tensor mish_backward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor out = at::empty_like(grad);
  return composed("mish_backward", {grad, self, kSavedIsInput}, self, out);
}

at::Tensor hardswish(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self);
  return etpu::hardswish_out(self, out);
}

at::Tensor& hardswish_(at::Tensor& self) { return etpu::hardswish_out(self, self); }

at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor out = at::empty_like(grad);
  return composed("hardswish_backward", {grad, self, kSavedIsInput}, self, out);
}

at::Tensor hardsigmoid(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self);
  return etpu::hardsigmoid_out(self, out);
}

at::Tensor& hardsigmoid_(at::Tensor& self) { return etpu::hardsigmoid_out(self, self); }

at::Tensor& hardsigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, at::Tensor& grad_input) {
  return composed("hardsigmoid_backward", {grad, self, kSavedIsInput}, self, grad_input);
}

COMPOSED_KERNEL(silu)

at::Tensor& silu_backward_out(const at::Tensor& grad, const at::Tensor& self, at::Tensor& grad_input) {
  return composed("silu_backward", {grad, self, kSavedIsInput}, self, grad_input);
}

at::Tensor& gelu_backward_out(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate,
                              at::Tensor& grad_input) {
  const char* name = approximate == "tanh" ? "gelu_tanh_backward" : "gelu_backward";
  return composed(name, {grad, self, kSavedIsInput}, self, grad_input);
}

// sigmoid's and tanh's backwards take the result.
at::Tensor& sigmoid_backward_out(const at::Tensor& grad, const at::Tensor& output, at::Tensor& grad_input) {
  return composed("sigmoid_backward", {grad, output, at::Scalar(true)}, output, grad_input);
}

at::Tensor& tanh_backward_out(const at::Tensor& grad, const at::Tensor& output, at::Tensor& grad_input) {
  return composed("tanh_backward", {grad, output, at::Scalar(true)}, output, grad_input);
}

at::Tensor& threshold_out(const at::Tensor& self, const at::Scalar& threshold, const at::Scalar& value,
                          at::Tensor& out) {
  return composed("threshold", {self, threshold, value}, self, out);
}

// What relu's backward calls (with relu's result as `self`); the result has
// the shape grad and self broadcast to.
at::Tensor& threshold_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold,
                                   at::Tensor& grad_input) {
  OpScope s;
  at::native::resize_output(grad_input, at::infer_size_dimvector(grad.sizes(), self.sizes()));
  pointwise("threshold_backward", {grad, self, threshold, at::Scalar(0.0), kSavedIsInput}, grad_input);
  return grad_input;
}

// The functional form (relu's backward), for a contiguous gradient and input
// of one floating dtype and shape on one tpu device: its result made as the
// runtime computes it (pointwise_new; contiguous, as TensorIterator makes it
// for such operands). Anything else takes PyTorch's structured path
// (TensorIterator's meta function and its layout, then the out= kernel above).
at::Tensor threshold_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold) {
  if (grad.device() != self.device() || grad.scalar_type() != self.scalar_type() || grad.sizes() != self.sizes() ||
      !at::isFloatingType(self.scalar_type()) || !grad.is_contiguous() || !self.is_contiguous())
    return at::compositeexplicitautogradnonfunctional::threshold_backward(grad, self, threshold);
  OpScope s;
  return pointwise_new("threshold_backward", {grad, self, threshold, at::Scalar(0.0), kSavedIsInput}, self.sizes(),
                       self.scalar_type(), self.device().index());
}

at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor out = at::empty_like(grad);
  return etpu::hardsigmoid_backward_out(grad, self, out);
}

// The buffer is unused (CPU keeps exp(-|x|) in it).
std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self, at::Tensor& output,
                                                             at::Tensor& buffer) {
  at::native::resize_output(buffer, {0});
  composed("log_sigmoid", {self}, self, output);
  return {output, buffer};
}

std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self), buffer = at::empty({0}, self.options());
  etpu::log_sigmoid_forward_out(self, out, buffer);
  return {out, buffer};
}

at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer,
                                     at::Tensor& grad_input) {
  return composed("log_sigmoid_backward", {grad, self, kSavedIsInput}, self, grad_input);
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
  Handle h;
  check(etpu_roll(read(self).get(), shifts.data(), shifts.size(), dims.data(), dims.size(), origin(), h.out()));
  write(out, h);
  return out;
}

at::Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  Handle h;
  check(etpu_linspace(device_index(out), start.toDouble(), end.toDouble(), steps, dtype_code(out.scalar_type()),
                      origin(), h.out()));
  write(out, h);
  return out;
}

// base ** linspace(start, end, steps), computed in float64 and converted to
// out's dtype, as the CPU kernel computes it.
at::Tensor& logspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, double base, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  at::Tensor exponents = at::linspace(start, end, steps, out.options().dtype(at::kDouble));
  return out.copy_(at::pow(base, exponents));
}

at::Tensor& eye_out(int64_t n, int64_t m, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, {n, m});
  if (n == 0 || m == 0) return out;
  Handle h;
  check(etpu_eye(device_index(out), n, m, dtype_code(out.scalar_type()), origin(), h.out()));
  write(out, h);
  return out;
}

at::Tensor& eye_n_out(int64_t n, at::Tensor& out) { return etpu::eye_out(n, n, out); }

at::Tensor prod_all(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  OpScope s;
  at::ScalarType t = dtype.value_or(at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  at::Tensor out = at::empty({}, self.options().dtype(t));
  Handle x = read(self);
  // The runtime widens ints and bools to int64 itself: a cast only for an explicit dtype.
  if (dtype.has_value() && *dtype != self.scalar_type()) x = cast(x, *dtype);
  write(out, reduce("prod", x, {}, false));
  return out;
}

at::Tensor count_nonzero(const at::Tensor& self, at::IntArrayRef dims) {
  OpScope s;
  Handle r = reduce("count_nonzero", read(self), dims, false);
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
  m.impl("polygamma.out", polygamma_out);
#define REGISTER_POLYNOMIAL(name) m.impl("special_" #name ".out", special_##name##_out);
  POLYNOMIALS(REGISTER_POLYNOMIAL)
#undef REGISTER_POLYNOMIAL
  m.impl("sinc.out", sinc_out);
  m.impl("special_entr.out", special_entr_out);
  m.impl("special_xlog1py.out", special_xlog1py_out);
  m.impl("copysign.out", copysign_out);
  m.impl("heaviside.out", heaviside_out);
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
  m.impl("logaddexp.out", logaddexp_out);
  m.impl("logaddexp2.out", logaddexp2_out);
  m.impl("isin.Tensor_Tensor_out", isin_out);
  m.impl("isin.Tensor_Scalar_out", isin_scalar_test_out);
  m.impl("isin.Scalar_Tensor_out", isin_scalar_element_out);
  m.impl("nansum", nansum);
  m.impl("nansum.out", nansum_out);
  m.impl("floor_divide", floor_divide);
  m.impl("rsub.Tensor", rsub);
  m.impl("fmax.out", fmax_out);
  m.impl("fmin.out", fmin_out);
  m.impl("hardshrink.out", hardshrink_out);
  m.impl("hardshrink_backward.grad_input", hardshrink_backward_out);
  m.impl("softshrink.out", softshrink_out);
  m.impl("softshrink_backward.grad_input", softshrink_backward_out);
  m.impl("clamp.Tensor_out", clamp_tensor_out);
  m.impl("clamp_min.Tensor_out", clamp_min_tensor_out);
  m.impl("clamp_max.Tensor_out", clamp_max_tensor_out);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("hardtanh_", hardtanh_);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("silu.out", silu_out);
  m.impl("silu_backward.grad_input", silu_backward_out);
  m.impl("gelu_backward.grad_input", gelu_backward_out);
  m.impl("sigmoid_backward.grad_input", sigmoid_backward_out);
  m.impl("tanh_backward.grad_input", tanh_backward_out);
  m.impl("threshold.out", threshold_out);
  m.impl("threshold_backward", threshold_backward);
  m.impl("threshold_backward.grad_input", threshold_backward_out);
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
  m.impl("logspace.out", logspace_out);
  m.impl("eye.m_out", eye_out);
  m.impl("eye.out", eye_n_out);
  m.impl("prod", prod_all);
  m.impl("count_nonzero.dim_IntList", count_nonzero);
  m.impl("_thnn_fused_lstm_cell", lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", gru_cell_backward);
}
