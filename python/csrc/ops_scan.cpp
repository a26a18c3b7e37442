// Cumulative sums and products, sort and topk. PyTorch's functional and
// in-place forms (cumsum, cumsum_, sort, sort.stable, topk) are structured or
// composite ops that land on the out= kernels registered here; argsort and
// msort are sorts. Gradients need nothing more: cumsum's is a flipped cumsum,
// and sort's and topk's scatter into zeros at the indices.
#include <ATen/WrapDimUtils.h>
#include <cstring>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "backend.h"

namespace etpu {
namespace {

// op ("cumsum"/"cumprod") of `self` along `dim` into `out`. The input is cast
// to out's dtype first, as PyTorch does for an explicit `dtype` (without one,
// out is int64 for ints and bools and the runtime widens them the same way).
at::Tensor& cumulative_out(const char* op, const at::Tensor& self, int64_t dim, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, self.sizes());
  Handle x = read(self);
  if (self.scalar_type() != out.scalar_type()) x = cast(x, out.scalar_type());
  Handle h;
  check(etpu_cumulative(op, x.get(), dim, origin(), h.out()));
  write(out, h);
  return out;
}

at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return cumulative_out("cumsum", self, dim, out);
}

at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  return cumulative_out("cumprod", self, dim, out);
}

// cummax/cummin (their CompositeExplicitAutograd forms call these helpers):
// the values and the indices, two runtime ops reading one input.
void cumulative_extreme(const char* op, const at::Tensor& self, at::Tensor& values, at::Tensor& indices,
                        int64_t dim) {
  OpScope s;
  Handle x = read(self);
  Handle v, i;
  check(etpu_cumulative(op, x.get(), dim, origin(), v.out()));
  check(etpu_cumulative(strcmp(op, "cummax") == 0 ? "cummax_indices" : "cummin_indices", x.get(), dim, origin(),
                        i.out()));
  write(values, v);
  write(indices, i);
}

void cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  cumulative_extreme("cummax", self, values, indices, dim);
}

void cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  cumulative_extreme("cummin", self, values, indices, dim);
}

at::Tensor& logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  return cumulative_out("logcumsumexp", self, dim, out);
}

at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  OpScope s;
  at::Tensor out = empty_tpu(self.sizes(), self.scalar_type(), self.device().index());
  return cumulative_out("logcumsumexp", self, dim, out);
}

// Always stable: with `stable` false or unset PyTorch allows any order among
// equal elements, and index order is one of them.
std::tuple<at::Tensor&, at::Tensor&> sort_out(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                              bool descending, at::Tensor& values, at::Tensor& indices) {
  OpScope s;
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  Handle v, i;
  check(etpu_sort(read(self).get(), dim, descending, origin(), v.out(), i.out()));
  write(values, v);
  write(indices, i);
  return {values, indices};
}

// Sorted whatever `sorted` says (unsorted allows any order).
std::tuple<at::Tensor&, at::Tensor&> topk_out(const at::Tensor& self, int64_t k, int64_t dim, bool largest,
                                              bool sorted, at::Tensor& values, at::Tensor& indices) {
  OpScope s;
  Handle v, i;
  check(etpu_topk(read(self).get(), k, dim, largest, sorted, origin(), v.out(), i.out()));
  std::vector<int64_t> shape = dims_of(v);
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  write(values, v);
  write(indices, i);
  return {values, indices};
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("cumsum.out", cumsum_out);
  m.impl("cumprod.out", cumprod_out);
  m.impl("_cummax_helper", cummax_helper);
  m.impl("_cummin_helper", cummin_helper);
  m.impl("_logcumsumexp", logcumsumexp);
  m.impl("_logcumsumexp.out", logcumsumexp_out);
  m.impl("sort.values_stable", sort_out);
  m.impl("topk.values", topk_out);
}
