// Automatic mixed precision on tpu: `torch.autocast("tpu")` with the op lists
// and cast policies PyTorch uses for CUDA (ATen/autocast_mode.h's lists, the
// header's KERNEL_PRIVATEUSEONE registration), bf16 by default as on TPUs
// (fp16 allowed), and the two ops `torch.amp.GradScaler("tpu")` runs on the
// device: unscaling gradients while looking for non-finite values, and
// updating the loss scale. Both run as the device's own ops (no host read);
// the scaler reads `found_inf` once a step, as it does on CUDA.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "backend.h"

namespace etpu {
namespace {

// As on CUDA: binary_cross_entropy on lower-precision probabilities loses
// what its log needs; autocast refuses it and names the safe op.
at::Tensor binary_cross_entropy_refused(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                        int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast on tpu, as on "
              "CUDA: the probabilities they take may be rounded to bf16/fp16 before their log. Use "
              "torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss (they combine the "
              "sigmoid and the loss and are safe to autocast), or run the loss outside the autocast region on "
              "float32 inputs.");
}

// torch._amp_foreach_non_finite_check_and_unscale_: each gradient multiplied
// by inv_scale in place; found_inf (a one-element float tensor) set to 1 when
// any gradient had a NaN or an infinity before, left as it was otherwise.
void amp_unscale(at::TensorList grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  OpScope s;
  TORCH_CHECK(inv_scale.numel() == 1, "_amp_foreach_non_finite_check_and_unscale_: inv_scale must be a 1-element "
              "tensor, got sizes ", inv_scale.sizes());
  TORCH_CHECK(found_inf.numel() == 1, "_amp_foreach_non_finite_check_and_unscale_: found_inf must be a 1-element "
              "tensor, got sizes ", found_inf.sizes());
  TORCH_CHECK(inv_scale.scalar_type() == at::kFloat && found_inf.scalar_type() == at::kFloat,
              "_amp_foreach_non_finite_check_and_unscale_: inv_scale and found_inf must be float32, got ",
              inv_scale.scalar_type(), " and ", found_inf.scalar_type());
  // One op over the list: one program in debug and strict modes.
  as_one_op([&] {
    for (size_t i = 0; i < grads.size(); ++i) {
      const at::Tensor& g = grads[i];
      TORCH_CHECK(g.device() == found_inf.device(), "_amp_foreach_non_finite_check_and_unscale_: gradient ", i,
                  " is on ", g.device(), ", found_inf on ", found_inf.device());
      TORCH_CHECK(at::isFloatingType(g.scalar_type()), "_amp_foreach_non_finite_check_and_unscale_: gradient ", i,
                  " has dtype ", g.scalar_type(), ", expected a floating-point dtype");
      if (g.numel() == 0) continue;
      at::Tensor nonfinite = at::logical_not(at::isfinite(g)).any().to(at::kFloat).reshape(found_inf.sizes());
      found_inf.copy_(at::maximum(found_inf, nonfinite));
      g.mul_(inv_scale.to(g.scalar_type()).reshape({}));
    }
  });
}

// torch._amp_update_scale_: after a step with non-finite gradients the scale
// backs off and the growth tracker restarts; after growth_interval clean
// steps in a row the scale grows. As CUDA's kernel, on the device.
at::Tensor& amp_update_scale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                             double growth_factor, double backoff_factor, int64_t growth_interval) {
  OpScope s;
  TORCH_CHECK(scale.numel() == 1 && growth_tracker.numel() == 1 && found_inf.numel() == 1,
              "_amp_update_scale_: scale, growth_tracker and found_inf must be 1-element tensors, got sizes ",
              scale.sizes(), ", ", growth_tracker.sizes(), " and ", found_inf.sizes());
  TORCH_CHECK(scale.scalar_type() == at::kFloat && found_inf.scalar_type() == at::kFloat &&
                  growth_tracker.scalar_type() == at::kInt,
              "_amp_update_scale_: expected scale and found_inf float32 and growth_tracker int32, got ",
              scale.scalar_type(), ", ", found_inf.scalar_type(), " and ", growth_tracker.scalar_type());
  // One op: one program in debug and strict modes.
  as_one_op([&] {
    at::Tensor inf = found_inf.reshape(scale.sizes()) != 0;
    at::Tensor grown = growth_tracker + 1;
    at::Tensor grow = at::logical_and(at::logical_not(inf), grown == growth_interval);
    // A grown scale that would overflow is not taken (the tracker restarts).
    at::Tensor grown_scale = scale * growth_factor;
    at::Tensor take_growth = at::logical_and(grow, at::isfinite(grown_scale));
    at::Tensor new_scale = at::where(inf, scale * backoff_factor, at::where(take_growth, grown_scale, scale));
    at::Tensor new_tracker = at::where(at::logical_or(inf, grow), at::zeros_like(growth_tracker), grown);
    scale.copy_(new_scale);
    growth_tracker.copy_(new_tracker);
  });
  return scale;
}

}  // namespace
}  // namespace etpu

// Ops with no policy run as they are.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

namespace etpu {
namespace {
// The header's lists name their types unqualified, as inside at::autocast.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define ETPU_AUTOCAST_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(ETPU_AUTOCAST_LOWER_PRECISION)
#undef ETPU_AUTOCAST_LOWER_PRECISION
#define ETPU_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(ETPU_AUTOCAST_FP32)
#undef ETPU_AUTOCAST_FP32
#define ETPU_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(ETPU_AUTOCAST_FP32_SET_OPT_DTYPE)
#undef ETPU_AUTOCAST_FP32_SET_OPT_DTYPE
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define ETPU_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(ETPU_AUTOCAST_PROMOTE)
#undef ETPU_AUTOCAST_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_refused));
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", etpu::amp_unscale);
  m.impl("_amp_update_scale_", etpu::amp_update_scale);
}

namespace {
// Autocast's lower-precision dtype on tpu is bf16, as TPUs compute it
// natively (PyTorch's default for a new device type is fp16).
const bool bf16_by_default = [] {
  at::autocast::set_autocast_dtype(at::kPrivateUse1, at::kBFloat16);
  return true;
}();
}  // namespace
