// unique in its forms (`torch.unique` with and without `dim`,
// `unique_consecutive`, the older `_unique`): sorted on the device, grouped
// where neighbours differ, with one host read of the number of groups (the
// output's size), as on CUDA.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "backend.h"

namespace etpu {
namespace {

// `values` [n] grouped where `is_new` starts a group: (distinct values,
// each element's group, counts), the group count read on the host. `order`
// maps the grouped positions back to the input's (nullopt: the identity).
std::tuple<at::Tensor, at::Tensor, at::Tensor> grouped(const at::Tensor& values, const at::Tensor& is_new,
                                                       const std::optional<at::Tensor>& order, bool return_inverse,
                                                       bool return_counts, at::IntArrayRef input_shape) {
  at::Tensor group = at::cumsum(is_new, 0) - 1;
  int64_t k = group[-1].item<int64_t>() + 1;
  at::Tensor distinct = at::empty({k}, values.options()).scatter(0, group, values);
  at::Tensor inverse = at::empty({0}, group.options()), counts = at::empty({0}, group.options());
  if (return_inverse) {
    inverse = order.has_value() ? at::empty_like(group).scatter(0, *order, group) : group;
    inverse = inverse.reshape(input_shape);
  }
  if (return_counts) counts = at::zeros({k}, group.options()).scatter_add(0, group, at::ones_like(group));
  return {distinct, inverse, counts};
}

// Where each element differs from the one before it (the first always).
at::Tensor starts(const at::Tensor& flat) {
  at::Tensor first = at::ones({1}, flat.options().dtype(at::kBool));
  return at::cat({first, flat.narrow(0, 1, flat.numel() - 1) != flat.narrow(0, 0, flat.numel() - 1)});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> empty_unique(const at::Tensor& self, bool return_inverse) {
  at::Tensor none = at::empty({0}, self.options().dtype(at::kLong));
  return {at::empty({0}, self.options()), return_inverse ? at::empty(self.sizes(), none.options()) : none, none};
}

// Sorted distinct values (also for sorted=False, as PyTorch's CPU kernel).
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool /*sorted*/, bool return_inverse,
                                                       bool return_counts) {
  if (self.numel() == 0) return empty_unique(self, return_inverse);
  auto [values, order] = at::sort(self.reshape({-1}), /*stable=*/true, 0, /*descending=*/false);
  return grouped(values, starts(values), order, return_inverse, return_counts, self.sizes());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  if (dim.has_value()) {
    // Slices along dim compared whole: the first of each run kept.
    int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    int64_t length = self.size(d);
    TORCH_CHECK(length > 0 || self.numel() == 0, "unique_consecutive: dim ", d, " of ", self.sizes(), " is empty");
    at::Tensor none = at::empty({0}, self.options().dtype(at::kLong));
    if (length == 0) return {self.clone(), return_inverse ? at::empty({0}, none.options()) : none, none};
    at::Tensor rows = self.movedim(d, 0).reshape({length, -1});
    at::Tensor differs = (rows.narrow(0, 1, length - 1) != rows.narrow(0, 0, length - 1)).any(1);
    at::Tensor is_new = at::cat({at::ones({1}, differs.options()), differs});
    at::Tensor group = at::cumsum(is_new, 0) - 1;
    at::Tensor kept = at::nonzero(is_new).reshape({-1});
    at::Tensor counts = return_counts ? at::zeros({kept.size(0)}, group.options()).scatter_add(0, group, at::ones_like(group))
                                      : none;
    return {self.index_select(d, kept), return_inverse ? group : none, counts};
  }
  if (self.numel() == 0) return empty_unique(self, return_inverse);
  at::Tensor flat = self.reshape({-1});
  return grouped(flat, starts(flat), std::nullopt, return_inverse, return_counts, self.sizes());
}

// The older `_unique` (what index_fill's gradient and some old code call):
// `_unique2` without the counts.
std::tuple<at::Tensor, at::Tensor> unique_without_counts(const at::Tensor& self, bool sorted, bool return_inverse) {
  auto [values, inverse, counts] = at::_unique2(self, sorted, return_inverse, /*return_counts=*/false);
  return {values, inverse};
}

// The distinct slices along `dim`, in lexicographic order (always sorted, as
// the CPU): the slices flattened to rows, ordered by one stable sort per
// column from the last to the first (a radix sort), grouped where a row
// differs from the one before. Rows holding NaN are distinct from each other,
// as on the CPU (their place among the others may differ: NaN has no order).
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim(const at::Tensor& self, int64_t dim, bool /*sorted*/,
                                                          bool return_inverse, bool return_counts) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  int64_t length = self.size(d);
  at::Tensor none = at::empty({0}, self.options().dtype(at::kLong));
  // Empty dims as the CPU takes them: only `dim` itself may be empty.
  int64_t empty_dims = 0;
  for (int64_t size : self.sizes()) empty_dims += size == 0;
  TORCH_CHECK(empty_dims <= 1, "Number of zero sized dimensions is more than one, so unique cannot be applied");
  TORCH_CHECK(empty_dims == 0 || length == 0,
              "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  if (length == 0) return {self.clone(), none, none};
  at::Tensor rows = self.movedim(d, 0).reshape({length, -1});
  int64_t width = rows.size(1);
  at::Tensor order = at::arange(length, none.options());
  for (int64_t c = width - 1; c >= 0; c--) {
    at::Tensor key = rows.select(1, c).index_select(0, order);
    at::Tensor perm = std::get<1>(at::sort(key, /*stable=*/true, 0, /*descending=*/false));
    order = order.index_select(0, perm);
  }
  at::Tensor sorted_rows = rows.index_select(0, order);
  at::Tensor differs = (sorted_rows.narrow(0, 1, length - 1) != sorted_rows.narrow(0, 0, length - 1)).any(1);
  at::Tensor is_new = at::cat({at::ones({1}, differs.options()), differs});
  at::Tensor group = at::cumsum(is_new, 0) - 1;
  at::Tensor kept = order.index_select(0, at::nonzero(is_new).reshape({-1}));
  at::Tensor inverse = return_inverse ? at::empty_like(group).scatter(0, order, group) : none;
  at::Tensor counts = return_counts
                          ? at::zeros({kept.size(0)}, group.options()).scatter_add(0, group, at::ones_like(group))
                          : none;
  return {self.index_select(d, kept), inverse, counts};
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("_unique", unique_without_counts);
  m.impl("_unique2", unique2);
  m.impl("unique_consecutive", etpu::unique_consecutive);
  m.impl("unique_dim", etpu::unique_dim);
}
