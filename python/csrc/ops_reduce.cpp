// Reductions, arg-reductions and norms. The output's shape and dtype come
// from the op's meta function (structured ops) or are computed here; the
// input is cast to the output dtype first, so summing bools or ints
// accumulates in int64 as on CPU.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/sum_compositeexplicitautogradnonfunctional_dispatch.h>
#include <torch/library.h>

#include "backend.h"

namespace etpu {
namespace {

// `dim` normalized against `t`; empty (all dims) when absent.
std::vector<int64_t> wrapped(const at::Tensor& t, at::OptionalIntArrayRef dim) {
  std::vector<int64_t> out;
  if (!dim.has_value()) return out;
  for (int64_t d : *dim) out.push_back(at::maybe_wrap_dim(d, std::max<int64_t>(t.dim(), 1)));
  return out;
}

// The input, in `out`'s dtype.
Handle read_as(const at::Tensor& t, at::ScalarType dtype) {
  Handle h = read(t);
  return t.scalar_type() == dtype ? std::move(h) : cast(h, dtype);
}

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  OpScope s;
  write(out, reduce("sum", read_as(self, out.scalar_type()), wrapped(self, dim), keepdim));
  return out;
}

// The functional sum of a floating tpu tensor in its own dtype, over distinct
// dims in range: its result made as the runtime computes it (tensor_holding:
// no allocation before the op, no out= view written). Anything else takes
// PyTorch's structured path (the meta function, its dtype and its errors,
// then sum_out).
at::Tensor sum_fn(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  const int64_t rank = self.dim();
  bool plain = rank > 0 && rank <= 64 && at::isFloatingType(self.scalar_type()) &&
               (!dtype.has_value() || *dtype == self.scalar_type());
  uint64_t reduced = 0;  // a bit per dim
  std::vector<int64_t> dims;
  if (plain && dim.has_value()) {
    for (int64_t d : *dim) {
      const int64_t w = d < 0 ? d + rank : d;
      if (w < 0 || w >= rank || (reduced >> w & 1) != 0) {
        plain = false;
        break;
      }
      reduced |= uint64_t{1} << w;
      dims.push_back(w);
    }
  }
  if (!plain) return at::compositeexplicitautogradnonfunctional::sum(self, dim, keepdim, dtype);
  if (dims.empty()) reduced = ~uint64_t{0};  // no dims: all of them
  c10::SmallVector<int64_t, 6> sizes;
  for (int64_t i = 0; i < rank; i++) {
    if ((reduced >> i & 1) == 0) {
      sizes.push_back(self.size(i));
    } else if (keepdim) {
      sizes.push_back(1);
    }
  }
  OpScope s;
  // The reduced dims as a bit each (none: all), keepdim beside them.
  const int64_t mask = dims.empty() ? 0 : static_cast<int64_t>(reduced);
  return op_new("sum", {self, at::Scalar(mask), at::Scalar(keepdim)}, sizes, self.scalar_type(), self.device().index());
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out) {
  OpScope s;
  write(out, reduce("mean", read_as(self, out.scalar_type()), wrapped(self, dim), keepdim));
  return out;
}

at::Tensor& prod_out(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype,
                     at::Tensor& out) {
  OpScope s;
  write(out, reduce("prod", read_as(self, out.scalar_type()), {at::maybe_wrap_dim(dim, self.dim())}, keepdim));
  return out;
}

at::Tensor& amax_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  OpScope s;
  write(out, reduce("max", read(self), wrapped(self, dim), keepdim));
  return out;
}

at::Tensor& amin_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  OpScope s;
  write(out, reduce("min", read(self), wrapped(self, dim), keepdim));
  return out;
}

at::Tensor full_reduce(const char* op, const at::Tensor& self) {
  OpScope s;
  TORCH_CHECK(self.numel() > 0, op, "(): expected a non-empty tensor (it has shape ", self.sizes(),
              "); specify a dim to reduce over an empty one");
  at::Tensor out = at::empty({}, self.options());
  write(out, reduce(op, read(self), {}, false));
  return out;
}

at::Tensor max_all(const at::Tensor& self) { return full_reduce("max", self); }
at::Tensor min_all(const at::Tensor& self) { return full_reduce("min", self); }

std::tuple<at::Tensor&, at::Tensor&> dim_reduce(const char* op, const at::Tensor& self, int64_t dim, bool keepdim,
                                                at::Tensor& values, at::Tensor& indices) {
  OpScope s;
  Handle v, i;
  check(etpu_extreme_dim(op, read(self).get(), dim, keepdim, origin(), v.out(), i.out()));
  write(values, v);
  write(indices, i);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& max,
                                                 at::Tensor& max_values) {
  return dim_reduce("max", self, dim, keepdim, max, max_values);
}

std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& min,
                                                 at::Tensor& min_indices) {
  return dim_reduce("min", self, dim, keepdim, min, min_indices);
}

at::Tensor& arg_out(const char* op, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                    at::Tensor& out) {
  OpScope s;
  if (self.dim() == 0) {
    write(out, full(device_index(self), {}, 0, at::kLong));
    return out;
  }
  std::optional<int64_t> d;
  if (dim.has_value()) d = at::maybe_wrap_dim(*dim, self.dim());
  write(out, argreduce(op, read(self), d, keepdim));
  return out;
}

at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  return arg_out("argmax", self, dim, keepdim, out);
}

at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  return arg_out("argmin", self, dim, keepdim, out);
}

int64_t correction_of(const std::optional<at::Scalar>& correction) {
  return correction.has_value() ? correction->toLong() : 1;
}

// The result of a reduction in a new tensor of `dtype` (for ops that are
// not structured: PyTorch computes no output shape for them).
at::Tensor materialize(const at::Tensor& like, const Handle& h, at::ScalarType dtype) {
  at::Tensor out = at::empty(dims_of(h), like.options().dtype(dtype));
  write(out, h);
  return out;
}

// The dtype of a variance or a standard deviation: the input's, or its
// parts' for a complex input.
at::ScalarType float_result(const at::Tensor& self, const char* op) {
  at::ScalarType t = self.scalar_type();
  TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t), op, ": expected a floating point or complex input, got ",
              t);
  return c10::toRealValueType(t);
}

Handle var_of(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
              bool keepdim) {
  return var(read(self), wrapped(self, dim), correction_of(correction), keepdim);
}

Handle std_of(const Handle& x, const at::Tensor& self, at::OptionalIntArrayRef dim,
              const std::optional<at::Scalar>& correction, bool keepdim) {
  Handle h;
  auto dims = wrapped(self, dim);
  check(etpu_std(x.get(), dims.data(), dims.size(), correction_of(correction), keepdim, origin(), h.out()));
  return h;
}

at::Tensor var_fn(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                  bool keepdim) {
  OpScope s;
  return materialize(self, var_of(self, dim, correction, keepdim), float_result(self, "var"));
}

at::Tensor std_fn(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                  bool keepdim) {
  OpScope s;
  return materialize(self, std_of(read(self), self, dim, correction, keepdim), float_result(self, "std"));
}

std::tuple<at::Tensor, at::Tensor> var_mean_fn(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                               const std::optional<at::Scalar>& correction, bool keepdim) {
  OpScope s;
  at::ScalarType t = float_result(self, "var_mean");
  at::Tensor v = materialize(self, var_of(self, dim, correction, keepdim), t);
  at::Tensor m = materialize(self, reduce("mean", read(self), wrapped(self, dim), keepdim), self.scalar_type());
  return {v, m};
}

std::tuple<at::Tensor, at::Tensor> std_mean_fn(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                               const std::optional<at::Scalar>& correction, bool keepdim) {
  OpScope s;
  at::ScalarType t = float_result(self, "std_mean");
  at::Tensor v = materialize(self, std_of(read(self), self, dim, correction, keepdim), t);
  at::Tensor m = materialize(self, reduce("mean", read(self), wrapped(self, dim), keepdim), self.scalar_type());
  return {v, m};
}

at::Tensor& var_out(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                    bool keepdim, at::Tensor& out) {
  OpScope s;
  // A complex input's variance is real: it is cast after, not before.
  Handle x = self.is_complex() ? read(self) : read_as(self, out.scalar_type());
  Handle v = var(x, wrapped(self, dim), correction_of(correction), keepdim);
  at::native::resize_output(out, dims_of(v));
  write(out, v);
  return out;
}

at::Tensor& std_out(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                    bool keepdim, at::Tensor& out) {
  OpScope s;
  Handle x = self.is_complex() ? read(self) : read_as(self, out.scalar_type());
  Handle v = std_of(x, self, dim, correction, keepdim);
  at::native::resize_output(out, dims_of(v));
  write(out, v);
  return out;
}

at::Tensor& logsumexp_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  OpScope s;
  // Integers compute in float32; a complex input stays complex (shifted by
  // its largest real part, as PyTorch computes it).
  at::ScalarType t = at::isFloatingType(self.scalar_type()) || self.is_complex() ? self.scalar_type() : at::kFloat;
  Handle v = reduce("logsumexp", read_as(self, t), wrapped(self, dim), keepdim);
  at::native::resize_output(out, dims_of(v));
  write(out, v);
  return out;
}

at::Tensor& logical_reduce(const char* op, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                           at::Tensor& out) {
  OpScope s;
  write(out, reduce(op, read(self), wrapped(self, dim), keepdim));  // write casts to out's dtype (uint8 for uint8)
  return out;
}

at::Tensor& any_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  return logical_reduce("any", self, dim, keepdim, out);
}

at::Tensor& all_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  return logical_reduce("all", self, dim, keepdim, out);
}

at::Tensor& any_all_out(const at::Tensor& self, at::Tensor& out) { return any_dims_out(self, std::nullopt, false, out); }
at::Tensor& all_all_out(const at::Tensor& self, at::Tensor& out) { return all_dims_out(self, std::nullopt, false, out); }

at::Tensor& any_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return any_dims_out(self, at::IntArrayRef{dim}, keepdim, out);
}

at::Tensor& all_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return all_dims_out(self, at::IntArrayRef{dim}, keepdim, out);
}

// torch.linalg.vector_norm, what clip_grad_norm_ calls.
at::Tensor& vector_norm_out(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, at::Tensor& out) {
  OpScope s;
  auto dims = wrapped(self, dim);
  Handle h;
  // A complex input's norm is of its magnitudes (cast after, not before).
  Handle x = self.is_complex() ? read(self) : read_as(self, out.scalar_type());
  check(etpu_vector_norm(x.get(), ord.toDouble(), dims.data(), dims.size(), keepdim, origin(), h.out()));
  write(out, h);
  return out;
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("sum.dim_IntList", sum_fn);
  m.impl("sum.IntList_out", sum_out);
  m.impl("mean.out", mean_out);
  m.impl("prod.int_out", prod_out);
  m.impl("amax.out", amax_out);
  m.impl("amin.out", amin_out);
  m.impl("max", max_all);
  m.impl("min", min_all);
  m.impl("max.dim_max", max_dim_out);
  m.impl("min.dim_min", min_dim_out);
  m.impl("argmax.out", argmax_out);
  m.impl("argmin.out", argmin_out);
  m.impl("var.correction", var_fn);
  m.impl("std.correction", std_fn);
  m.impl("var_mean.correction", var_mean_fn);
  m.impl("std_mean.correction", std_mean_fn);
  m.impl("var.correction_out", var_out);
  m.impl("std.correction_out", std_out);
  m.impl("logsumexp.out", logsumexp_out);
  m.impl("any.dims_out", any_dims_out);
  m.impl("all.dims_out", all_dims_out);
  m.impl("any.all_out", any_all_out);
  m.impl("all.all_out", all_all_out);
  m.impl("any.out", any_dim_out);
  m.impl("all.out", all_dim_out);
  m.impl("linalg_vector_norm.out", vector_norm_out);
}
