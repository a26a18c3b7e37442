// PyTorch's fused optimizers (`torch.optim.Adam/AdamW/SGD(..., fused=True)`,
// Hugging Face's `adamw_torch_fused`): the whole step over every parameter is
// one runtime call (etpu_fused_adam, etpu_fused_sgd; the math is the runtime's
// `Adam` and `Sgd`), computed on the device: the step counts stay device
// tensors and are never read on the host.
#include <torch/library.h>

#include <optional>

#include "backend.h"

namespace etpu {
namespace {

// Checks that every list has `n` tensors, each on tpu (a name per list).
void check_lists(const char* op, size_t n, std::initializer_list<std::pair<const char*, at::TensorList>> lists) {
  for (const auto& [name, list] : lists) {
    TORCH_CHECK(list.size() == n, op, ": expected ", n, " ", name, " (one per parameter), got ", list.size());
    for (const at::Tensor& t : list) {
      TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, op, ": expected all ", name,
                  " on tpu, but found one on ", t.device(), " (Expected all tensors to be on the same device)");
    }
  }
}

// The parameters with elements (an empty one has nothing to update).
std::vector<size_t> nonempty(at::TensorList params) {
  std::vector<size_t> out;
  for (size_t i = 0; i < params.size(); i++)
    if (params[i].numel() > 0) out.push_back(i);
  return out;
}

void fused_adam(const char* op, at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,
                const PointwiseArg& lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                bool maximize, bool decoupled, const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
  OpScope s;
  const size_t n = params.size();
  check_lists(op, n, {{"params", params}, {"grads", grads}, {"exp_avgs", exp_avgs}, {"exp_avg_sqs", exp_avg_sqs}});
  TORCH_CHECK(steps.size() == n, op, ": expected ", n, " state_steps, got ", steps.size());
  if (amsgrad) {
    check_lists(op, n, {{"max_exp_avg_sqs", max_exp_avg_sqs}});
  } else {
    TORCH_CHECK(max_exp_avg_sqs.empty(), op, ": max_exp_avg_sqs must be empty without amsgrad, got ",
                max_exp_avg_sqs.size());
  }
  const std::vector<size_t> live = nonempty(params);
  if (live.empty()) return;
  OperandList tensors(device_index(params[live[0]]));
  for (size_t i : live) {
    for (const at::Tensor* t : {&params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i]}) tensors.add(*t);
    if (amsgrad) {
      tensors.add(max_exp_avg_sqs[i]);
    } else {
      tensors.add_absent();
    }
    tensors.add(steps[i]);
  }
  OperandList scalars(device_index(params[live[0]]));
  scalars.add(lr);
  scalars.add_optional(grad_scale);
  scalars.add_optional(found_inf);
  check(etpu_fused_adam(tensors.data(), live.size(), scalars[0], beta1, beta2, weight_decay, eps, amsgrad, maximize,
                        decoupled, scalars[1], scalars[2], origin()));
}

// Adam and AdamW, with a number or a tensor learning rate (the .tensor_lr
// overloads). A macro: the four kernels differ in their lr's type and mode.
#define FUSED_ADAM_KERNEL(name, decoupled, lr_type)                                                                 \
  void name(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,      \
            at::TensorList max_exp_avg_sqs, at::TensorList steps, lr_type lr, double beta1, double beta2,          \
            double weight_decay, double eps, bool amsgrad, bool maximize,                                          \
            const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {             \
    fused_adam(decoupled ? "_fused_adamw_" : "_fused_adam_", params, grads, exp_avgs, exp_avg_sqs,                 \
               max_exp_avg_sqs, steps, PointwiseArg(lr), beta1, beta2, weight_decay, eps, amsgrad, maximize,       \
               decoupled, grad_scale, found_inf);                                                                   \
  }
FUSED_ADAM_KERNEL(fused_adam_, false, double)
FUSED_ADAM_KERNEL(fused_adamw_, true, double)
FUSED_ADAM_KERNEL(fused_adam_tensor_lr_, false, const at::Tensor&)
FUSED_ADAM_KERNEL(fused_adamw_tensor_lr_, true, const at::Tensor&)
#undef FUSED_ADAM_KERNEL

void fused_sgd(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
               double momentum, const PointwiseArg& lr, double dampening, bool nesterov, bool maximize,
               bool is_first_step, const std::optional<at::Tensor>& grad_scale,
               const std::optional<at::Tensor>& found_inf) {
  OpScope s;
  const char* op = "_fused_sgd_";
  const size_t n = params.size();
  check_lists(op, n, {{"params", params}, {"grads", grads}});
  if (momentum != 0.0) check_lists(op, n, {{"momentum_buffer_list", momentum_buffers}});
  const std::vector<size_t> live = nonempty(params);
  if (live.empty()) return;
  OperandList tensors(device_index(params[live[0]]));
  for (size_t i : live) {
    tensors.add(params[i]);
    tensors.add(grads[i]);
    if (momentum != 0.0) {
      tensors.add(momentum_buffers[i]);
    } else {
      tensors.add_absent();
    }
  }
  OperandList scalars(device_index(params[live[0]]));
  scalars.add(lr);
  scalars.add_optional(grad_scale);
  scalars.add_optional(found_inf);
  check(etpu_fused_sgd(tensors.data(), live.size(), scalars[0], weight_decay, momentum, dampening, nesterov, maximize,
                       is_first_step, scalars[1], scalars[2], origin()));
}

void fused_sgd_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
                double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  fused_sgd(params, grads, momentum_buffers, weight_decay, momentum, PointwiseArg(at::Scalar(lr)), dampening,
            nesterov, maximize, is_first_step, grad_scale, found_inf);
}

void fused_sgd_tensor_lr_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
                          double weight_decay, double momentum, const at::Tensor& lr, double dampening, bool nesterov,
                          bool maximize, bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                          const std::optional<at::Tensor>& found_inf) {
  fused_sgd(params, grads, momentum_buffers, weight_decay, momentum, PointwiseArg(lr), dampening, nesterov, maximize,
            is_first_step, grad_scale, found_inf);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", etpu::fused_adam_);
  m.impl("_fused_adamw_", etpu::fused_adamw_);
  m.impl("_fused_adam_.tensor_lr", etpu::fused_adam_tensor_lr_);
  m.impl("_fused_adamw_.tensor_lr", etpu::fused_adamw_tensor_lr_);
  m.impl("_fused_sgd_", etpu::fused_sgd_);
  m.impl("_fused_sgd_.tensor_lr", etpu::fused_sgd_tensor_lr_);
}
