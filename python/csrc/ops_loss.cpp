// Regression losses (smooth L1, Huber) and binary cross entropy, with their
// backwards, composed from runtime ops.

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

Handle s_mul(const Handle& x, double v) { return binary_scalar("mul", x, v); }

at::ScalarType type_of(const Handle& h) { return scalar_type(dtype_of(h)); }

// The loss per element, summed or averaged over all elements as asked.
Handle reduced(Handle loss, int64_t reduction) {
  if (reduction == at::Reduction::Sum) return reduce("sum", loss, {}, false);
  if (reduction == at::Reduction::Mean) return reduce("mean", loss, {}, false);
  return loss;
}

// The factor a mean reduction puts on each element's gradient.
double mean_scale(const at::Tensor& self, int64_t reduction) {
  if (reduction != at::Reduction::Mean) return 1.0;
  return 1.0 / static_cast<double>(std::max<int64_t>(self.numel(), 1));
}

std::vector<int64_t> loss_shape(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  if (reduction != at::Reduction::None) return {};
  return at::infer_size(self.sizes(), target.sizes());
}

// ------------------------------------------------------ smooth L1, Huber ----

// |d| < beta: d^2 / (2 beta); else |d| - beta / 2. beta 0 is the L1 loss.
at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta,
                               at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta, got ", beta);
  at::native::resize_output(out, loss_shape(self, target, reduction));
  Handle d = sub(read(self), read(target));
  Handle loss = unary("abs", d);
  if (beta > 0) {
    Handle quad = s_mul(mul(d, d), 0.5 / beta);
    loss = where(binary_scalar("lt", loss, beta), quad, binary_scalar("sub", loss, 0.5 * beta));
  }
  write(out, reduced(std::move(loss), reduction));
  return out;
}

// The gradient is d / beta inside (-beta, beta) and -1 or 1 outside; at
// d == 0 with beta 0 it is -1, as on CPU.
at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                        const at::Tensor& target, int64_t reduction, double beta,
                                        at::Tensor& grad_input) {
  OpScope s;
  at::native::resize_output(grad_input, self.sizes());
  int64_t dev = device_index(self);
  Handle d = sub(read(self), read(target));
  at::ScalarType t = type_of(d);
  Handle inside = beta > 0 ? s_mul(d, 1.0 / beta) : full(dev, {}, 0, t);
  Handle slope = where(binary_scalar("le", d, -beta), full(dev, {}, -1, t),
                       where(binary_scalar("ge", d, beta), full(dev, {}, 1, t), inside));
  write(grad_input, s_mul(mul(slope, read(grad_output)), mean_scale(self, reduction)));
  return grad_input;
}

// |d| < delta: d^2 / 2; else delta (|d| - delta / 2).
at::Tensor& huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                           at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta, got ", delta);
  at::native::resize_output(out, loss_shape(self, target, reduction));
  Handle d = sub(read(self), read(target));
  Handle z = unary("abs", d);
  Handle loss = where(binary_scalar("lt", z, delta), s_mul(mul(d, d), 0.5),
                      s_mul(binary_scalar("sub", z, 0.5 * delta), delta));
  write(out, reduced(std::move(loss), reduction));
  return out;
}

at::Tensor huber_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta) {
  at::Tensor out = at::empty({0}, self.options());
  return huber_loss_out(self, target, reduction, delta, out);
}

at::Tensor& huber_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction, double delta, at::Tensor& grad_input) {
  OpScope s;
  at::native::resize_output(grad_input, self.sizes());
  Handle d = sub(read(self), read(target));
  Handle slope = clamp(d, at::Scalar(-delta), at::Scalar(delta));
  write(grad_input, s_mul(mul(slope, read(grad_output)), mean_scale(self, reduction)));
  return grad_input;
}

// ------------------------------------------------- binary cross entropy ----

// -w (y log(p) + (1 - y) log(1 - p)), each log clamped at -100 as PyTorch
// does, so p of 0 or 1 gives a finite loss. Inputs outside [0, 1] give NaN
// here; the CPU raises, which would need a host sync.
at::Tensor& binary_cross_entropy_out(const at::Tensor& self, const at::Tensor& target,
                                     const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(self.sizes() == target.sizes(), "binary_cross_entropy: the target size ", target.sizes(),
              " must be the same as the input size ", self.sizes());
  at::native::resize_output(out, loss_shape(self, target, reduction));
  Handle p = read(self), y = read(target);
  Handle log_p = clamp(unary("log", p), at::Scalar(-100.0), std::nullopt);
  Handle log_q = clamp(unary("log1p", unary("neg", p)), at::Scalar(-100.0), std::nullopt);
  Handle loss = sub(mul(binary_scalar("sub", y, 1.0), log_q), mul(y, log_p));
  if (weight.has_value() && weight->defined()) loss = mul(loss, read(*weight));
  write(out, reduced(std::move(loss), reduction));
  return out;
}

at::Tensor binary_cross_entropy(const at::Tensor& self, const at::Tensor& target,
                                const std::optional<at::Tensor>& weight, int64_t reduction) {
  at::Tensor out = at::empty({0}, self.options());
  return binary_cross_entropy_out(self, target, weight, reduction, out);
}

// g w (p - y) / max(p (1 - p), 1e-12)
at::Tensor& binary_cross_entropy_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                              const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                              int64_t reduction, at::Tensor& grad_input) {
  OpScope s;
  at::native::resize_output(grad_input, self.sizes());
  Handle p = read(self);
  Handle denom = clamp(mul(binary_scalar("sub", p, 1.0, /*reversed=*/true), p), at::Scalar(1e-12), std::nullopt);
  Handle g = div(mul(sub(p, read(target)), read(grad_output)), denom);
  if (weight.has_value() && weight->defined()) g = mul(g, read(*weight));
  write(grad_input, s_mul(g, mean_scale(self, reduction)));
  return grad_input;
}

at::Tensor binary_cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                         const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                         int64_t reduction) {
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  return binary_cross_entropy_backward_out(grad_output, self, target, weight, reduction, grad_input);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("smooth_l1_loss.out", smooth_l1_loss_out);
  m.impl("smooth_l1_loss_backward.grad_input", smooth_l1_loss_backward_out);
  m.impl("huber_loss", huber_loss);
  m.impl("huber_loss.out", huber_loss_out);
  m.impl("huber_loss_backward.out", huber_loss_backward_out);
  m.impl("binary_cross_entropy", binary_cross_entropy);
  m.impl("binary_cross_entropy.out", binary_cross_entropy_out);
  m.impl("binary_cross_entropy_backward", binary_cross_entropy_backward);
  m.impl("binary_cross_entropy_backward.grad_input", binary_cross_entropy_backward_out);
}
