// The CPU fallback for ops the backend has no kernel for. Never silent: the
// runtime counts each op (eagertpu.fallbacks(), the metrics report) and
// refuses it under EAGERTPU_FALLBACK=error; the first of each op warns. Mixing `tpu` and `cpu` tensors raises as CUDA
// does (a boxed fallback would otherwise quietly compute it on the CPU).
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <string>

#include "backend.h"

namespace etpu {
namespace {

// Every tensor argument must be on tpu, except CPU 0-d tensors (scalars).
void check_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& args = op.schema().arguments();
  std::optional<c10::Device> tpu, cpu;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().type() == c10::DeviceType::PrivateUse1) {
      tpu = t.device();
    } else if (t.device().is_cpu() && t.dim() > 0) {
      cpu = t.device();
    }
  };
  auto first = stack.size() - args.size();
  for (size_t i = 0; i < args.size(); i++) {
    const auto& v = stack[first + i];
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const auto& t : v.toTensorList()) visit(t);
    }
  }
  TORCH_CHECK(!(tpu && cpu), "Expected all tensors to be on the same device, but found at least two devices, ",
              *tpu, " and cpu! (in ", op.schema().name(), ")");
}

void tpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op.schema().name() + (op.schema().overload_name().empty() ? "" : "." + op.schema().overload_name());
  check_devices(op, *stack);
  bool first = false;
  check(eagertpu_note_fallback(name.c_str(), &first));
  if (first) {
    TORCH_WARN(name, " has no tpu kernel: it runs on the CPU (copying its inputs and outputs). ",
               "eagertpu.fallbacks() counts these; EAGERTPU_FALLBACK=error makes them errors.");
  }
  at::native::cpu_fallback(op, stack);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&etpu::tpu_fallback>()); }
