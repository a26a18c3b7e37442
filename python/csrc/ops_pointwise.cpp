// Elementwise kernels. Structured ops are registered as `.out` (PyTorch then
// routes the functional and in-place forms to them, with `out` already shaped
// and typed by the op's meta function); `write` converts and broadcasts.
#include <ATen/ExpandUtils.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Resize.h>
#include <c10/util/strides.h>
#include <ATen/ops/result_type_native.h>
#include <ATen/CompositeExplicitAutogradNonFunctionalFunctions.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <string>
#include <limits>

#include "backend.h"

namespace etpu {
namespace {

// An operand next to `like`: a tpu tensor, or a CPU 0-d tensor.
Handle operand(const at::Tensor& t, const at::Tensor& like) { return read_operand(t, device_index(like)); }

bool is_scalar(const at::Tensor& t) { return t.unsafeGetTensorImpl()->is_wrapped_number(); }

// `b * alpha`, for add/sub's alpha (skipped when 1).
Handle scaled(const at::Tensor& b, const at::Scalar& alpha, const at::Tensor& like) {
  Handle h = is_scalar(b) ? full(device_index(like), {}, wrapped_number(b), b.scalar_type()) : operand(b, like);
  bool one = alpha.isIntegral(true) ? alpha.toLong() == 1 : alpha.toComplexDouble() == 1.0;
  return one ? std::move(h) : mul(h, alpha);
}

// angle: not structured in ATen (its CPU kernel picks the result's dtype), so
// both forms are here: a complex tensor's angle is real, an integer's float.
at::Tensor& angle_out(const at::Tensor& self, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, self.sizes());
  pointwise("angle", {self}, out);
  return out;
}

at::Tensor angle(const at::Tensor& self) {
  OpScope s;
  at::ScalarType t = self.scalar_type();
  if (self.is_complex()) t = c10::toRealValueType(t);
  if (at::isIntegralType(t, /*includeBool=*/true)) t = c10::typeMetaToScalarType(c10::get_default_dtype());
  return pointwise_new("angle", {self}, self.sizes(), t, self.device().index());
}

// erfinv: composed by the runtime (Giles' polynomial and two Newton steps).
at::Tensor& erfinv_out(const at::Tensor& self, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(at::isFloatingType(out.scalar_type()), "erfinv: expected a floating point result, got ",
              out.scalar_type());
  at::native::resize_output(out, self.sizes());
  pointwise("erfinv", {self}, out);
  return out;
}

// isnan/isinf/isposinf/isneginf: always false for integer inputs.
at::Tensor bool_like(const at::Tensor& self) { return at::empty(self.sizes(), self.options().dtype(at::kBool)); }

// isnan of an integer tensor is all false (the runtime's isnan says so).
at::Tensor isnan(const at::Tensor& self) {
  OpScope s;
  at::Tensor out = bool_like(self);
  pointwise("isnan", {self}, out);
  return out;
}

at::Tensor isinf(const at::Tensor& self) {
  OpScope s;
  at::Tensor out = bool_like(self);
  pointwise("isinf", {self}, out);
  return out;
}

at::Tensor& isposinf_out(const at::Tensor& self, at::Tensor& out) {
  OpScope s;
  pointwise("isposinf", {self}, out);
  return out;
}

at::Tensor& isneginf_out(const at::Tensor& self, at::Tensor& out) {
  OpScope s;
  pointwise("isneginf", {self}, out);
  return out;
}

at::Tensor& triangle(const at::Tensor& self, int64_t k, bool upper, at::Tensor& out) {
  OpScope s;
  Handle h;
  check(etpu_triangle(read(self).get(), k, upper, origin(), h.out()));
  at::native::resize_output(out, self.sizes());
  write(out, h);
  return out;
}

at::Tensor& triu_out(const at::Tensor& self, int64_t k, at::Tensor& out) { return triangle(self, k, true, out); }
at::Tensor& tril_out(const at::Tensor& self, int64_t k, at::Tensor& out) { return triangle(self, k, false, out); }

at::Tensor relu(const at::Tensor& self) {
  OpScope s;
  // The result has the input's strides (empty_like): made with its
  // allocation when those are the row-major ones.
  if (self.strides().equals(c10::contiguous_strides(self.sizes())))
    return pointwise_new("relu", {self}, self.sizes(), self.scalar_type(), self.device().index());
  at::Tensor out = at::empty_like(self);
  pointwise("relu", {self}, out);
  return out;
}

at::Tensor& relu_(at::Tensor& self) {
  OpScope s;
  pointwise("relu", {self}, self);
  return self;
}


at::Tensor& pow_st_out(const at::Scalar& self, const at::Tensor& exponent, at::Tensor& out) {
  OpScope s;
  write(out, binary_scalar("pow", read(exponent), self, /*reversed=*/true));
  return out;
}

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  OpScope s;
  bool one = alpha.isIntegral(true) ? alpha.toLong() == 1 : alpha.toComplexDouble() == 1.0;
  if (one) {
    pointwise("add", {self, other}, out);
  } else if (!is_scalar(self)) {
    pointwise("add", {self, other, alpha}, out);  // self + alpha * other, in one call
  } else {
    const at::Tensor& like = self.device().is_cpu() ? other : self;
    write(out, add(operand(self, like), scaled(other, alpha, like)));
  }
  return out;
}

at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  OpScope s;
  bool one = alpha.isIntegral(true) ? alpha.toLong() == 1 : alpha.toComplexDouble() == 1.0;
  if (one) {
    pointwise("sub", {self, other}, out);
  } else if (!is_scalar(self)) {
    pointwise("sub", {self, other, alpha}, out);  // self - alpha * other, in one call
  } else {
    const at::Tensor& like = self.device().is_cpu() ? other : self;
    write(out, sub(operand(self, like), scaled(other, alpha, like)));
  }
  return out;
}

// ------------------------------------------------------ functional forms ----
// PyTorch runs `a + b` as add.out behind the structured meta function: a
// TensorIterator built to find the result's dtype and shape, about a quarter
// of a small op's time here. When every operand is a contiguous tpu tensor or
// a Python number, that result is simple: the promoted dtype, the broadcast
// shape, contiguous (what TensorIterator gives for contiguous inputs). These
// kernels compute it directly; anything else (a strided or channels-last
// operand, a CPU tensor, an alpha) takes the structured path.

bool plain(const at::Tensor& t) {
  return t.device().type() == c10::DeviceType::PrivateUse1 && t.is_contiguous();
}

// `a op b` into a new tensor, or nullopt when an operand is not plain.
std::optional<at::Tensor> fresh_binary(const char* op, const at::Tensor& a, const at::Tensor& b, bool to_float) {
  bool a_number = is_scalar(a), b_number = is_scalar(b);
  if (!(a_number ? plain(b) : plain(a) && (b_number || plain(b)))) return std::nullopt;
  // The native function itself, not through the dispatcher (it has one
  // kernel for every device): the dispatch was 2% of a small add.
  at::ScalarType t = at::native::result_type(a, b);
  if (to_float && at::isIntegralType(t, /*includeBool=*/true)) t = c10::typeMetaToScalarType(c10::get_default_dtype());
  const at::Tensor& tensor = a_number ? b : a;
  if (a_number || b_number) return pointwise_new(op, {a, b}, tensor.sizes(), t, tensor.device().index());
  return pointwise_new(op, {a, b}, at::infer_size_dimvector(a.sizes(), b.sizes()), t, tensor.device().index());
}

// Python's `<<` and `>>` (and `<<=`, `>>=`): ATen ops of their own on every
// device, the shifts of the op table here.
at::Tensor lshift_tensor(const at::Tensor& self, const at::Tensor& other) { return at::bitwise_left_shift(self, other); }
at::Tensor lshift_scalar(const at::Tensor& self, const at::Scalar& other) { return at::bitwise_left_shift(self, other); }
at::Tensor rshift_tensor(const at::Tensor& self, const at::Tensor& other) { return at::bitwise_right_shift(self, other); }
at::Tensor rshift_scalar(const at::Tensor& self, const at::Scalar& other) { return at::bitwise_right_shift(self, other); }
at::Tensor& ilshift_tensor(at::Tensor& self, const at::Tensor& other) { return self.bitwise_left_shift_(other); }
at::Tensor& ilshift_scalar(at::Tensor& self, const at::Scalar& other) { return self.bitwise_left_shift_(other); }
at::Tensor& irshift_tensor(at::Tensor& self, const at::Tensor& other) { return self.bitwise_right_shift_(other); }
at::Tensor& irshift_scalar(at::Tensor& self, const at::Scalar& other) { return self.bitwise_right_shift_(other); }

bool is_one(const at::Scalar& alpha) { return alpha.isIntegral(true) ? alpha.toLong() == 1 : alpha.toComplexDouble() == 1.0; }

at::Tensor add_functional(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  OpScope s;
  if (is_one(alpha))
    if (auto out = fresh_binary("add", self, other, false)) return *out;
  return at::compositeexplicitautogradnonfunctional::add(self, other, alpha);
}

at::Tensor sub_functional(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  OpScope s;
  at::native::sub_check(self, other);
  if (is_one(alpha))
    if (auto out = fresh_binary("sub", self, other, false)) return *out;
  return at::compositeexplicitautogradnonfunctional::sub(self, other, alpha);
}

at::Tensor mul_functional(const at::Tensor& self, const at::Tensor& other) {
  OpScope s;
  if (auto out = fresh_binary("mul", self, other, false)) return *out;
  return at::compositeexplicitautogradnonfunctional::mul(self, other);
}

at::Tensor div_functional(const at::Tensor& self, const at::Tensor& other) {
  OpScope s;
  if (auto out = fresh_binary("div", self, other, true)) return *out;
  return at::compositeexplicitautogradnonfunctional::div(self, other);
}

// neg keeps its dtype; PyTorch rejects bool.
at::Tensor neg_functional(const at::Tensor& self) {
  OpScope s;
  if (!plain(self) || self.scalar_type() == at::kBool) return at::compositeexplicitautogradnonfunctional::neg(self);
  return pointwise_new("neg", {self}, self.sizes(), self.scalar_type(), self.device().index());
}

// Rounded division: floor_divide and div_trunc keep integers exact.
at::Tensor& div_mode_out(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode,
                         at::Tensor& out) {
  OpScope s;
  const char* op = "div";
  if (mode.has_value()) {
    TORCH_CHECK(*mode == "floor" || *mode == "trunc",
                "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
    op = *mode == "floor" ? "floor_divide" : "div_trunc";
  }
  pointwise(op, {self, other}, out);
  return out;
}

at::Tensor& where_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  OpScope s;
  write(out, where(operand(condition, out), operand(self, out), operand(other, out)));
  return out;
}

at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  at::ScalarType t = at::result_type(self, other);
  auto shape = at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes());
  const at::Tensor& like = self.device().is_cpu() ? other : self;
  at::Tensor out = at::empty(shape, like.options().dtype(t));
  return where_out(condition, self, other, out);
}

at::Tensor& clamp_out(const at::Tensor& self, const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max,
                      at::Tensor& out) {
  OpScope s;
  write(out, clamp(read(self), min, max));
  return out;
}

at::Tensor& clamp_min_out(const at::Tensor& self, const at::Scalar& min, at::Tensor& out) {
  return clamp_out(self, min, std::nullopt, out);
}

at::Tensor& clamp_max_out(const at::Tensor& self, const at::Scalar& max, at::Tensor& out) {
  return clamp_out(self, std::nullopt, max, out);
}

at::Tensor& addcmul_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& value,
                        at::Tensor& out) {
  OpScope s;
  pointwise("addcmul", {self, t1, t2, value}, out);
  return out;
}

at::Tensor& addcdiv_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& value,
                        at::Tensor& out) {
  OpScope s;
  pointwise("addcdiv", {self, t1, t2, value}, out);
  return out;
}

at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  OpScope s;
  pointwise("lerp", {self, end, weight}, out);
  return out;
}

at::Tensor& lerp_tensor_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, at::Tensor& out) {
  OpScope s;
  pointwise("lerp", {self, end, weight}, out);
  return out;
}

at::Tensor& masked_fill_scalar(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  OpScope s;
  Handle v = full(device_index(self), {}, value, self.scalar_type());
  write(self, where(operand(mask, self), v, read(self)));
  return self;
}

at::Tensor& masked_fill_tensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  if (value.device().is_cpu()) return masked_fill_scalar(self, mask, value.item());
  OpScope s;
  write(self, where(operand(mask, self), cast(read(value), self.scalar_type()), read(self)));
  return self;
}

at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  OpScope s;
  write(out, unary(approximate == "tanh" ? "gelu_tanh" : "gelu", read(self)));
  return out;
}

}  // namespace

// ------------------------------------------------ the op tables' kernels ----
// A kernel per op of the header's ETPU_UNARY_OPS and ETPU_BINARY_OPS (fusion's
// op tables, fusion/src/elementwise.rs), registered below under the ATen
// overloads the tables name: a new elementwise op needs no line here.
namespace table {

#define UNARY_OUT_KERNEL(name, rule, aten_out)                      \
  at::Tensor& name##_out(const at::Tensor& self, at::Tensor& out) { \
    OpScope s;                                                      \
    at::native::resize_output(out, self.sizes());                   \
    pointwise(#name, {self}, out);                                  \
    return out;                                                     \
  }
ETPU_UNARY_OPS(UNARY_OUT_KERNEL)
#undef UNARY_OUT_KERNEL

#define BINARY_OUT_KERNELS(name, rule, aten_tensor_out, aten_scalar_out)                           \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {        \
    OpScope s;                                                                                     \
    at::native::resize_output(out, at::infer_size(self.sizes(), other.sizes()));                   \
    pointwise(#name, {self, other}, out);                                                          \
    return out;                                                                                    \
  }                                                                                                \
  at::Tensor& name##_scalar_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) { \
    OpScope s;                                                                                     \
    at::native::resize_output(out, self.sizes());                                                  \
    pointwise(#name, {self, other}, out);                                                          \
    return out;                                                                                    \
  }
ETPU_BINARY_OPS(BINARY_OUT_KERNELS)
#undef BINARY_OUT_KERNELS

// A FLOAT op's functional form (`torch.exp(x)`) without the structured meta
// function when its operand is plain: integers and bools compute in the
// default float dtype. Anything else (a complex operand among them: angle's
// result is real) takes the structured path (`composite`).
template <typename Composite>
at::Tensor float_functional(const char* op, const at::Tensor& self, Composite composite) {
  OpScope s;
  if (!plain(self) || self.is_complex()) return composite(self);
  at::ScalarType t = self.scalar_type();
  if (at::isIntegralType(t, /*includeBool=*/true)) t = c10::typeMetaToScalarType(c10::get_default_dtype());
  return pointwise_new(op, {self}, self.sizes(), t, self.device().index());
}

// Registers `kernel` as `aten::<name>.<overload>`, unless the overload is none.
template <typename Kernel>
void register_overload(torch::Library& m, const char* name, const char* overload, Kernel kernel) {
  if (std::strcmp(overload, "none") == 0) return;
  m.impl((std::string(name) + "." + overload).c_str(), kernel);
}

}  // namespace table
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  // The op tables: a kernel per ATen overload they name, and the functional
  // fast path of each FLOAT op.
#define FUNCTIONAL_FLOAT(name)                                                                  \
  m.impl(#name, [](const at::Tensor& self) {                                                    \
    return table::float_functional(#name, self,                                                 \
                                   [](const at::Tensor& x) { return at::compositeexplicitautogradnonfunctional::name(x); }); \
  });
#define FUNCTIONAL_FLOAT_OF_NUMERIC(name)
#define FUNCTIONAL_NUMERIC(name)
#define FUNCTIONAL_SAME(name)
#define FUNCTIONAL_BOOL(name)
#define FUNCTIONAL_INTEGRAL(name)
#define FUNCTIONAL_PART(name)
// An op with an out= kernel gets its rule's functional form; one without
// (none) gets nothing.
#define FUNCTIONAL_out(rule, name) FUNCTIONAL_##rule(name)
#define FUNCTIONAL_none(rule, name)
#define REGISTER_UNARY(name, rule, aten_out)                         \
  table::register_overload(m, #name, #aten_out, table::name##_out); \
  FUNCTIONAL_##aten_out(rule, name)
#define REGISTER_BINARY(name, rule, aten_tensor_out, aten_scalar_out)            \
  table::register_overload(m, #name, #aten_tensor_out, table::name##_out);       \
  table::register_overload(m, #name, #aten_scalar_out, table::name##_scalar_out);
  ETPU_UNARY_OPS(REGISTER_UNARY)
  ETPU_BINARY_OPS(REGISTER_BINARY)
  m.impl("erfinv.out", erfinv_out);
  m.impl("angle", angle);
  m.impl("angle.out", angle_out);
  m.impl("isnan", isnan);
  m.impl("isinf", isinf);
  m.impl("isposinf.out", isposinf_out);
  m.impl("isneginf.out", isneginf_out);
  m.impl("triu.out", triu_out);
  m.impl("tril.out", tril_out);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("add.out", add_out);
  m.impl("add.Tensor", add_functional);
  m.impl("__lshift__.Tensor", lshift_tensor);
  m.impl("__lshift__.Scalar", lshift_scalar);
  m.impl("__rshift__.Tensor", rshift_tensor);
  m.impl("__rshift__.Scalar", rshift_scalar);
  m.impl("__ilshift__.Tensor", ilshift_tensor);
  m.impl("__ilshift__.Scalar", ilshift_scalar);
  m.impl("__irshift__.Tensor", irshift_tensor);
  m.impl("__irshift__.Scalar", irshift_scalar);
  m.impl("sub.Tensor", sub_functional);
  m.impl("mul.Tensor", mul_functional);
  m.impl("div.Tensor", div_functional);
  m.impl("neg", neg_functional);
  m.impl("sub.out", sub_out);
  m.impl("div.out_mode", div_mode_out);
  m.impl("pow.Scalar_out", pow_st_out);
  m.impl("where.self_out", where_out);
  m.impl("where.self", where_self);
  m.impl("clamp.out", clamp_out);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("lerp.Scalar_out", lerp_scalar_out);
  m.impl("lerp.Tensor_out", lerp_tensor_out);
  m.impl("masked_fill_.Scalar", masked_fill_scalar);
  m.impl("masked_fill_.Tensor", masked_fill_tensor);
  m.impl("gelu.out", gelu_out);
}
