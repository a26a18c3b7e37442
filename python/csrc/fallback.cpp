// The CPU fallback for ops the backend has no kernel for. Never silent: each
// op is counted (eagertpu.fallbacks()), warned about once, and is an error
// under EAGERTPU_FALLBACK=error. Mixing `tpu` and `cpu` tensors raises as CUDA
// does (a boxed fallback would otherwise quietly compute it on the CPU).
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "backend.h"

namespace etpu {
namespace {

std::mutex mu;
std::map<std::string, int64_t> counts;

bool fallback_is_error() {
  const char* v = std::getenv("EAGERTPU_FALLBACK");
  return v != nullptr && std::string(v) == "error";
}

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
  TORCH_CHECK(!fallback_is_error(), name,
              " has no tpu kernel and EAGERTPU_FALLBACK=error forbids running it on the CPU");
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    first = counts[name]++ == 0;
  }
  if (first) {
    TORCH_WARN(name, " has no tpu kernel: it runs on the CPU (copying its inputs and outputs). ",
               "eagertpu.fallbacks() counts these; EAGERTPU_FALLBACK=error makes them errors.");
  }
  at::native::cpu_fallback(op, stack);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&etpu::tpu_fallback>()); }

extern "C" {

// CPU fallbacks by op, as "op\tcount\n" lines; returns the size needed.
size_t etpu_py_fallbacks(char* buf, size_t capacity) {
  std::string text;
  {
    std::lock_guard<std::mutex> lock(etpu::mu);
    for (const auto& [name, n] : etpu::counts) text += name + "\t" + std::to_string(n) + "\n";
  }
  if (buf != nullptr && capacity > 0) {
    size_t n = std::min(text.size(), capacity - 1);
    memcpy(buf, text.data(), n);
    buf[n] = 0;
  }
  return text.size() + 1;
}

void etpu_py_reset_fallbacks() {
  std::lock_guard<std::mutex> lock(etpu::mu);
  etpu::counts.clear();
}
}
