// Order statistics: median, nanmedian, kthvalue and mode, each the runtime's
// Tensor::order_statistic (or median_all) in one C ABI call.
#include <ATen/ScalarOps.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <tuple>

#include "backend.h"

namespace etpu {
namespace {

// The runtime's `stat` of `self`'s rows along `dim`: (values, indices).
std::pair<Handle, Handle> order_statistic(const char* stat, int64_t k, const at::Tensor& self, int64_t dim,
                                          bool keepdim) {
  std::pair<Handle, Handle> result;
  check(etpu_order_statistic(stat, k, read(self).get(), dim, keepdim, origin(), result.first.out(),
                             result.second.out()));
  return result;
}

std::tuple<at::Tensor&, at::Tensor&> order_statistic_out(const char* stat, int64_t k, const at::Tensor& self,
                                                         int64_t dim, bool keepdim, at::Tensor& values,
                                                         at::Tensor& indices) {
  OpScope s;
  auto [v, i] = order_statistic(stat, k, self, dim, keepdim);
  at::native::resize_output(values, dims_of(v));
  at::native::resize_output(indices, dims_of(i));
  write(values, v);
  write(indices, i);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> median_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                    at::Tensor& values, at::Tensor& indices) {
  return order_statistic_out("median", 0, self, dim, keepdim, values, indices);
}

std::tuple<at::Tensor&, at::Tensor&> nanmedian_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                       at::Tensor& values, at::Tensor& indices) {
  return order_statistic_out("nanmedian", 0, self, dim, keepdim, values, indices);
}

std::tuple<at::Tensor&, at::Tensor&> kthvalue_out(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim,
                                                  at::Tensor& values, at::Tensor& indices) {
  return order_statistic_out("kthvalue", k, self, dim, keepdim, values, indices);
}

std::tuple<at::Tensor, at::Tensor> mode(const at::Tensor& self, int64_t dim, bool keepdim) {
  at::Tensor values = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  order_statistic_out("mode", 0, self, dim, keepdim, values, indices);
  return {values, indices};
}

at::Tensor median_all(const at::Tensor& self, bool ignore_nan) {
  OpScope s;
  Handle m;
  check(etpu_median_all(read(self).get(), ignore_nan, origin(), m.out()));
  at::Tensor values = at::empty({}, self.options());
  write(values, m);
  return values;
}

at::Tensor median(const at::Tensor& self) { return median_all(self, false); }
at::Tensor nanmedian(const at::Tensor& self) { return median_all(self, true); }

// searchsorted and bucketize: the runtime's binary search over every row at
// once (Tensor::searchsorted), with PyTorch's argument checks.
bool search_right(bool right, std::optional<c10::string_view> side) {
  if (!side) return right;
  TORCH_CHECK(*side == "left" || *side == "right", "torch.searchsorted(): side can only be 'left' or 'right' but ",
              "got ", *side);
  TORCH_CHECK(!right || *side == "right", "torch.searchsorted(): side and right can't be set to opposites, got side ",
              "of left while right was True");
  return *side == "right";
}

at::Tensor& searchsorted_out(const at::Tensor& sorted_sequence, const at::Tensor& values, bool out_int32, bool right,
                             std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                             at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(sorted_sequence.dim() == 1 ||
                  (sorted_sequence.dim() == values.dim() &&
                   sorted_sequence.sizes().slice(0, sorted_sequence.dim() - 1) ==
                       values.sizes().slice(0, values.dim() - 1)),
              "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
              "tensor and input value tensor must match, but we got boundaries tensor ", sorted_sequence.sizes(),
              " and input value tensor ", values.sizes());
  TORCH_CHECK(out.scalar_type() == (out_int32 ? at::kInt : at::kLong), "torch.searchsorted(): output tensor's dtype ",
              "is wrong, it can only be Int(int32) or Long(int64) depending on whether out_int32 flag is True, but we "
              "got output tensor's dtype ", out.scalar_type(), " and out_int32 flag is ", out_int32 ? "True" : "False");
  bool r = search_right(right, side);
  const bool sorted_by = sorter.has_value() && sorter->defined();
  at::Tensor sequence = sorted_by ? sorted_sequence.gather(-1, *sorter) : sorted_sequence;
  at::native::resize_output(out, values.sizes());
  pointwise(r ? "searchsorted_right" : "searchsorted", {sequence, values}, out);
  return out;
}

at::Tensor searchsorted_tensor(const at::Tensor& sorted_sequence, const at::Tensor& values, bool out_int32, bool right,
                        std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor out = at::empty({0}, values.options().dtype(out_int32 ? at::kInt : at::kLong));
  return searchsorted_out(sorted_sequence, values, out_int32, right, side, sorter, out);
}

at::Tensor& searchsorted_scalar_out(const at::Tensor& sorted_sequence, const at::Scalar& value, bool out_int32,
                                    bool right, std::optional<c10::string_view> side,
                                    const std::optional<at::Tensor>& sorter, at::Tensor& out) {
  TORCH_CHECK(sorted_sequence.dim() == 1, "torch.searchsorted(): input value can be a scalar only when boundaries ",
              "tensor dimension is 1, but we got boundaries tensor dim(", sorted_sequence.dim(), ")");
  at::Tensor values = c10::scalar_to_tensor(value, sorted_sequence.device());
  return searchsorted_out(sorted_sequence, values, out_int32, right, side, sorter, out);
}

at::Tensor searchsorted_scalar(const at::Tensor& sorted_sequence, const at::Scalar& value, bool out_int32, bool right,
                               std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor out = at::empty({0}, sorted_sequence.options().dtype(out_int32 ? at::kInt : at::kLong));
  return searchsorted_scalar_out(sorted_sequence, value, out_int32, right, side, sorter, out);
}

void bucketize_check(const at::Tensor& boundaries) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
}

at::Tensor& bucketize_out(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right,
                          at::Tensor& out) {
  bucketize_check(boundaries);
  return searchsorted_out(boundaries, self, out_int32, right, std::nullopt, std::nullopt, out);
}

at::Tensor bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  bucketize_check(boundaries);
  return searchsorted_tensor(boundaries, self, out_int32, right, std::nullopt, std::nullopt);
}

at::Tensor bucketize_scalar(const at::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  bucketize_check(boundaries);
  return searchsorted_scalar(boundaries, self, out_int32, right, std::nullopt, std::nullopt);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("searchsorted.Tensor", searchsorted_tensor);
  m.impl("searchsorted.Tensor_out", searchsorted_out);
  m.impl("searchsorted.Scalar", searchsorted_scalar);
  m.impl("searchsorted.Scalar_out", searchsorted_scalar_out);
  m.impl("bucketize.Tensor", bucketize);
  m.impl("bucketize.Tensor_out", bucketize_out);
  m.impl("bucketize.Scalar", bucketize_scalar);
  m.impl("median", median);
  m.impl("median.dim_values", median_dim_out);
  m.impl("nanmedian", nanmedian);
  m.impl("nanmedian.dim_values", nanmedian_dim_out);
  m.impl("kthvalue.values", kthvalue_out);
  m.impl("mode", mode);
}
