// Pointwise losses (mse, smooth L1, Huber, binary cross entropy) and their
// backwards: each the runtime's Tensor::pointwise_loss (or its backward) in
// one C ABI call; a kernel here only adapts ATen's schema.

#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <optional>

#include "backend.h"

namespace etpu {
namespace {

// `out` = the runtime's `loss` of `self` against `target` (`parameter`: beta
// or delta), resized to the loss's shape.
at::Tensor& loss_out(const char* loss, double parameter, const at::Tensor& self, const at::Tensor& target,
                     const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& out) {
  OpScope s;
  Handle w = optional_read(weight), value;
  check(etpu_pointwise_loss(loss, parameter, read(self).get(), read(target).get(), w.get(),
                            static_cast<int32_t>(reduction), origin(), value.out()));
  at::native::resize_output(out, dims_of(value));
  write(out, value);
  return out;
}

// `grad_input` = the gradient of `loss` with respect to `self`.
at::Tensor& loss_backward_out(const char* loss, double parameter, const at::Tensor& grad_output,
                              const at::Tensor& self, const at::Tensor& target,
                              const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& grad_input) {
  OpScope s;
  Handle w = optional_read(weight), grad;
  check(etpu_pointwise_loss_backward(loss, parameter, read(grad_output).get(), read(self).get(), read(target).get(),
                                     w.get(), static_cast<int32_t>(reduction), origin(), grad.out()));
  at::native::resize_output(grad_input, self.sizes());
  write(grad_input, grad);
  return grad_input;
}

// A new tensor like `self` for a functional variant to fill.
at::Tensor empty_like_input(const at::Tensor& self) { return at::empty({0}, self.options()); }

at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, at::Tensor& out) {
  return loss_out("mse_loss", 0, self, target, std::nullopt, reduction, out);
}

at::Tensor& mse_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  int64_t reduction, at::Tensor& grad_input) {
  return loss_backward_out("mse_loss", 0, grad_output, self, target, std::nullopt, reduction, grad_input);
}

at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             int64_t reduction) {
  at::Tensor grad_input = empty_like_input(self);
  return mse_loss_backward_out(grad_output, self, target, reduction, grad_input);
}

at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta,
                               at::Tensor& out) {
  return loss_out("smooth_l1_loss", beta, self, target, std::nullopt, reduction, out);
}

at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                        const at::Tensor& target, int64_t reduction, double beta,
                                        at::Tensor& grad_input) {
  return loss_backward_out("smooth_l1_loss", beta, grad_output, self, target, std::nullopt, reduction, grad_input);
}

at::Tensor& huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                           at::Tensor& out) {
  return loss_out("huber_loss", delta, self, target, std::nullopt, reduction, out);
}

at::Tensor huber_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta) {
  at::Tensor out = empty_like_input(self);
  return huber_loss_out(self, target, reduction, delta, out);
}

at::Tensor& huber_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction, double delta, at::Tensor& grad_input) {
  return loss_backward_out("huber_loss", delta, grad_output, self, target, std::nullopt, reduction, grad_input);
}

at::Tensor& binary_cross_entropy_out(const at::Tensor& self, const at::Tensor& target,
                                     const std::optional<at::Tensor>& weight, int64_t reduction, at::Tensor& out) {
  return loss_out("binary_cross_entropy", 0, self, target, weight, reduction, out);
}

at::Tensor binary_cross_entropy(const at::Tensor& self, const at::Tensor& target,
                                const std::optional<at::Tensor>& weight, int64_t reduction) {
  at::Tensor out = empty_like_input(self);
  return binary_cross_entropy_out(self, target, weight, reduction, out);
}

at::Tensor& binary_cross_entropy_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                              const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                              int64_t reduction, at::Tensor& grad_input) {
  return loss_backward_out("binary_cross_entropy", 0, grad_output, self, target, weight, reduction, grad_input);
}

at::Tensor binary_cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                         const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                         int64_t reduction) {
  at::Tensor grad_input = empty_like_input(self);
  return binary_cross_entropy_backward_out(grad_output, self, target, weight, reduction, grad_input);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("mse_loss.out", mse_loss_out);
  m.impl("mse_loss_backward.grad_input", mse_loss_backward_out);
  m.impl("mse_loss_backward", mse_loss_backward);
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
