// Order statistics: median, nanmedian, kthvalue and mode, each the runtime's
// Tensor::order_statistic (or median_all) in one C ABI call.
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

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("median", median);
  m.impl("median.dim_values", median_dim_out);
  m.impl("nanmedian", nanmedian);
  m.impl("nanmedian.dim_values", nanmedian_dim_out);
  m.impl("kthvalue.values", kthvalue_out);
  m.impl("mode", mode);
}
