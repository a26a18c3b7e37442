// PyTorch's _foreach_ ops: what optimizers (foreach is their default on tpu),
// gradient clipping and EMA call once per list of parameters. One runtime call
// (etpu_pointwise_foreach) runs the op over the whole list, where PyTorch's own
// kernel would make one dispatch and one kernel call per tensor.
//
// One boxed kernel serves every registered op and overload: it reads the
// arguments off the schema. Its fast path takes lists of tpu tensors of one
// floating-point dtype, item by item of equal shapes, with Python numbers,
// number lists and 0-d tensors beside them: each result then has its item's
// dtype and shape, as PyTorch's per-tensor loop gives. Anything else (integer
// lists, mixed dtypes or devices, broadcasting, lists of unequal lengths, a
// complex number) runs PyTorch's per-tensor loop, the op's
// CompositeExplicitAutograd kernel, whose per-tensor kernels and errors are the
// ordinary ones.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

constexpr c10::string_view kPrefix = "aten::_foreach_";

// What one argument gives each item: its tensor, one tensor for all (a 0-d
// tpu tensor), one number for all, or its own number.
struct Column {
  enum class Kind { Tensors, SharedTensor, Number, Numbers } kind;
  std::vector<at::Tensor> tensors;
  at::Scalar number;
  std::vector<at::Scalar> numbers;
};

bool floating(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

bool is_one(const at::Scalar& s) { return s.isIntegral(true) ? s.toLong() == 1 : s.toComplexDouble() == 1.0; }

// The numbers of a 1-d CPU tensor of `n` (addcmul's and addcdiv's `scalars`).
std::optional<std::vector<at::Scalar>> numbers_of(const at::Tensor& t, size_t n) {
  if (!t.device().is_cpu() || t.dim() != 1 || static_cast<size_t>(t.numel()) != n) return std::nullopt;
  std::vector<at::Scalar> out;
  out.reserve(n);
  if (at::isFloatingType(t.scalar_type())) {
    at::Tensor d = t.to(at::kDouble).contiguous();
    for (size_t i = 0; i < n; i++) out.emplace_back(d.const_data_ptr<double>()[i]);
  } else if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
    at::Tensor d = t.to(at::kLong).contiguous();
    for (size_t i = 0; i < n; i++) out.emplace_back(d.const_data_ptr<int64_t>()[i]);
  } else {
    return std::nullopt;
  }
  return out;
}

// An argument as a column, or nullopt when the fast path does not take it.
std::optional<Column> column_of(const c10::Argument& formal, const c10::IValue& v, size_t n) {
  Column c;
  if (v.isTensorList()) {
    c.kind = Column::Kind::Tensors;
    c.tensors = v.toTensorVector();
  } else if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (formal.name() == "scalars") {  // addcmul/addcdiv .Tensor: a number per item
      auto numbers = numbers_of(t, n);
      if (!numbers) return std::nullopt;
      c.kind = Column::Kind::Numbers;
      c.numbers = std::move(*numbers);
    } else if (t.dim() != 0) {
      return std::nullopt;
    } else if (t.device().is_cpu()) {
      c.kind = Column::Kind::Number;
      c.number = t.item();
    } else {
      c.kind = Column::Kind::SharedTensor;
      c.tensors = {t};
    }
  } else if (v.isScalar()) {
    c.kind = Column::Kind::Number;
    c.number = v.toScalar();
  } else if (v.isList()) {
    c.kind = Column::Kind::Numbers;
    for (const c10::IValue& e : v.toListRef()) {
      if (!e.isScalar()) return std::nullopt;
      c.numbers.push_back(e.toScalar());
    }
  } else {
    return std::nullopt;
  }
  if (c.kind == Column::Kind::Number && c.number.isComplex()) return std::nullopt;
  for (const at::Scalar& s : c.numbers)
    if (s.isComplex()) return std::nullopt;
  return c;
}

// Whether tensor `t` can stand beside item `like` in the fast path.
bool matches(const at::Tensor& t, const at::Tensor& like, bool same_sizes) {
  return t.defined() && t.device() == like.device() && t.scalar_type() == like.scalar_type() &&
         (!same_sizes || t.sizes() == like.sizes());
}

bool one_dtype_and_device(const std::vector<at::Tensor>& items) {
  for (const at::Tensor& t : items)
    if (t.scalar_type() != items[0].scalar_type() || t.device() != items[0].device()) return false;
  return true;
}

// The runtime's op for a foreach op's base name (`clamp_min` is a maximum).
std::string runtime_op(const std::string& base) {
  if (base == "clamp_min") return "maximum";
  if (base == "clamp_max") return "minimum";
  if (base == "reciprocal") return "div";  // 1 / x: a number 1 goes first
  return base;
}

bool has_fast_path(const std::string& base);

// Runs the op when the fast path takes it: pops its arguments and pushes its
// result. Returns false, the stack untouched, otherwise.
bool run_fast(const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  const c10::FunctionSchema& schema = op.schema();
  std::string base = schema.name().substr(kPrefix.size());
  bool inplace = !base.empty() && base.back() == '_';
  if (inplace) base.pop_back();
  if (!has_fast_path(base)) return false;
  const auto& formals = schema.arguments();
  const size_t nformals = formals.size();
  auto actuals = torch::jit::last(stack, nformals);

  // The first list sets the items: their number, devices, dtypes and shapes.
  const c10::IValue* first = nullptr;
  for (const c10::IValue& v : actuals)
    if (v.isTensorList()) {
      first = &v;
      break;
    }
  if (first == nullptr) return false;
  const std::vector<at::Tensor> items = first->toTensorVector();
  const size_t n = items.size();
  if (n == 0) return false;

  std::vector<Column> columns;
  if (base == "reciprocal") columns.push_back({Column::Kind::Number, {}, 1.0, {}});
  std::optional<at::Scalar> alpha;
  for (size_t j = 0; j < nformals; j++) {
    if (formals[j].name() == "alpha") {
      alpha = actuals[j].toScalar();
      if (alpha->isComplex()) return false;
      continue;
    }
    auto c = column_of(formals[j], actuals[j], n);
    if (!c) return false;
    columns.push_back(std::move(*c));
  }
  if (alpha && !is_one(*alpha)) columns.push_back({Column::Kind::Number, {}, *alpha, {}});

  for (size_t i = 0; i < n; i++) {
    const at::Tensor& like = items[i];
    if (!like.defined() || like.device().type() != c10::DeviceType::PrivateUse1 || like.numel() == 0 ||
        !floating(like.scalar_type()) || (!inplace && !like.is_contiguous()))
      return false;
    for (const Column& c : columns) {
      if (c.kind == Column::Kind::Tensors && (c.tensors.size() != n || !matches(c.tensors[i], like, true)))
        return false;
      if (c.kind == Column::Kind::SharedTensor && !matches(c.tensors[0], like, false)) return false;
      if (c.kind == Column::Kind::Numbers && c.numbers.size() != n) return false;
    }
  }

  std::vector<PointwiseArg> args;
  args.reserve(n * columns.size());
  for (size_t i = 0; i < n; i++) {
    for (const Column& c : columns) {
      switch (c.kind) {
        case Column::Kind::Tensors: args.emplace_back(c.tensors[i]); break;
        case Column::Kind::SharedTensor: args.emplace_back(c.tensors[0]); break;
        case Column::Kind::Number: args.emplace_back(c.number); break;
        case Column::Kind::Numbers: args.emplace_back(c.numbers[i]); break;
      }
    }
  }
  const std::string name = runtime_op(base);
  if (inplace) {
    pointwise_foreach(name.c_str(), args, columns.size(), items);
    torch::jit::drop(stack, nformals);
    return true;
  }
  // The results: made in the call when the items share a dtype and device
  // (one allocation each, no view written), else written into new tensors.
  std::vector<at::Tensor> outs;
  if (one_dtype_and_device(items)) {
    outs = pointwise_foreach_new(name.c_str(), args, columns.size(), items);
  } else {
    outs.reserve(n);
    for (const at::Tensor& like : items)
      outs.push_back(empty_tpu(like.sizes(), like.scalar_type(), like.device().index()));
    pointwise_foreach(name.c_str(), args, columns.size(), outs);
  }
  torch::jit::drop(stack, nformals);
  stack.emplace_back(std::move(outs));
  return true;
}

void foreach_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  OpScope s;
  // The one runtime call is one op already; PyTorch's per-tensor loop is
  // made one too: one program for the list.
  if (run_fast(op, *stack)) return;
  as_one_op([&] { op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack); });
}

// The foreach ops with a fast path, by base name; each overload of each (and
// its in-place form) that PyTorch defines is registered.
constexpr const char* kOps[] = {
    // unary
    "abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "exp", "expm1", "floor", "frac", "log", "log10",
    "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh",
    "trunc",
    // binary
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "clamp_min", "clamp_max",
    // ternary
    "addcmul", "addcdiv", "lerp"};

bool has_fast_path(const std::string& base) {
  for (const char* name : kOps)
    if (base == name) return true;
  return false;
}

}  // namespace
}  // namespace etpu

// Every _foreach op PyTorch defines with a per-tensor loop (its
// CompositeExplicitAutograd kernel) takes the kernel above: the ops of kOps
// run in one runtime call, the others as PyTorch's loop, all as one op.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::_foreach_", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) continue;
    std::string full = name.name.substr(std::string("aten::").size());
    if (!name.overload_name.empty()) full += "." + name.overload_name;
    m.impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&etpu::foreach_kernel>());
  }
}
