// Order statistics: median, nanmedian, kthvalue and mode, composed from
// runtime ops.
//
// They sort each row once (etpu_sort: stable, NaN last) and
// gather one position per row, so the value and its index always agree: the
// index is where that element of the sorted row came from. PyTorch leaves the
// index among equal values unspecified; stable sorting picks the first of a
// run for median and kthvalue and the last for mode, as the CPU tends to.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {


// ------------------------------------------------------ order statistics ----

struct Sorted {
  Handle values, indices;
};

Sorted sort_along(const Handle& x, int64_t d) {
  Sorted s;
  check(etpu_sort(x.get(), d, /*descending=*/false, origin(), s.values.out(), s.indices.out()));
  return s;
}

// A reduction over one dim of `self`: the dim, its size, the input (0-d
// inputs as one element along dim 0), the per-row shape (dim d of size 1) and
// the result shape.
struct Rows {
  int64_t d, n, device;
  Handle x;
  std::vector<int64_t> row, result;
};

Rows rows_of(const char* op, const at::Tensor& self, int64_t dim, bool keepdim) {
  Rows r;
  r.d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  r.n = self.dim() == 0 ? 1 : self.size(r.d);
  r.device = device_index(self);
  TORCH_CHECK(r.n > 0, op, "(): cannot reduce dim ", r.d, " of size 0 (input of shape ", self.sizes(), ")");
  r.result = self.sizes().vec();
  if (self.dim() > 0) {
    if (keepdim) r.result[r.d] = 1;
    else r.result.erase(r.result.begin() + r.d);
  }
  r.x = self.dim() == 0 ? reshape(read(self), {1}) : read(self);
  r.row = dims_of(r.x);
  r.row[r.d] = 1;
  return r;
}

enum class Pick { kMedian, kNanMedian, kKth };

// The position within each sorted row that `pick` selects: k - 1; the lower
// median, or the first NaN when the row has one (NaN sorts last); or the
// lower median of the numbers, ignoring NaN (the first NaN for a row of NaN).
Handle position(const Rows& r, const at::Tensor& self, Pick pick, int64_t k) {
  if (pick == Pick::kKth) return full(r.device, r.row, k - 1, at::kLong);
  Handle mid = full(r.device, r.row, (r.n - 1) / 2, at::kLong);
  if (!at::isFloatingType(self.scalar_type())) return mid;
  Handle nans = reduce("sum", cast(unary("isnan", r.x), at::kLong), {r.d}, true);
  if (pick == Pick::kMedian) {
    return where(binary_scalar("gt", nans, 0), binary_scalar("sub", nans, r.n, /*reversed=*/true), mid);
  }
  // floor((numbers - 1) / 2) in integers: how many of 0, 2, 4, ... are at
  // most numbers - 1, less one; 0 for a row of NaN.
  Handle last = binary_scalar("sub", nans, r.n - 1, /*reversed=*/true);
  std::vector<int64_t> along(r.row.size(), 1);
  along[r.d] = r.n;
  Handle evens = reshape(arange(r.device, 0, static_cast<double>(2 * r.n), 2, at::kLong), along);
  Handle halves = reduce("sum", cast(binary("le", evens, last), at::kLong), {r.d}, true);
  return clamp(binary_scalar("sub", halves, 1), at::Scalar(int64_t{0}), std::nullopt);
}

// The value each row's `pick` selects and where in the row it came from,
// shaped as the result.
Sorted select(const Rows& r, const at::Tensor& self, Pick pick, int64_t k) {
  Sorted sorted = sort_along(r.x, r.d);
  Handle pos = position(r, self, pick, k);
  return {reshape(gather(sorted.values, r.d, pos), r.result), reshape(gather(sorted.indices, r.d, pos), r.result)};
}

std::tuple<at::Tensor&, at::Tensor&> select_out(const char* op, const at::Tensor& self, int64_t dim, bool keepdim,
                                                Pick pick, int64_t k, at::Tensor& values, at::Tensor& indices) {
  OpScope s;
  Rows r = rows_of(op, self, dim, keepdim);
  TORCH_CHECK(pick != Pick::kKth || (k >= 1 && k <= r.n), op, "(): selected number k = ", k,
              " out of range for dimension ", r.d, " of size ", r.n, " (input of shape ", self.sizes(), ")");
  at::native::resize_output(values, r.result);
  at::native::resize_output(indices, r.result);
  Sorted picked = select(r, self, pick, k);
  write(values, picked.values);
  write(indices, picked.indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> median_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                    at::Tensor& values, at::Tensor& indices) {
  return select_out("median", self, dim, keepdim, Pick::kMedian, 0, values, indices);
}

std::tuple<at::Tensor&, at::Tensor&> nanmedian_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                       at::Tensor& values, at::Tensor& indices) {
  return select_out("nanmedian", self, dim, keepdim, Pick::kNanMedian, 0, values, indices);
}

std::tuple<at::Tensor&, at::Tensor&> kthvalue_out(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim,
                                                  at::Tensor& values, at::Tensor& indices) {
  return select_out("kthvalue", self, dim, keepdim, Pick::kKth, k, values, indices);
}

// The median of all elements (NaN for an empty tensor, as on CPU).
at::Tensor median_all(const char* op, const at::Tensor& self, Pick pick) {
  OpScope s;
  at::Tensor values = at::empty({}, self.options());
  if (self.numel() == 0) {
    TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, "(): cannot compute the median of an empty ",
                self.scalar_type(), " tensor (shape ", self.sizes(), ")");
    write(values, full(device_index(self), {}, std::numeric_limits<double>::quiet_NaN(), self.scalar_type()));
    return values;
  }
  Rows r{0, self.numel(), device_index(self), reshape(read(self), {self.numel()}), {1}, {}};
  write(values, select(r, self, pick, 0).values);
  return values;
}

at::Tensor median(const at::Tensor& self) { return median_all("median", self, Pick::kMedian); }
at::Tensor nanmedian(const at::Tensor& self) { return median_all("nanmedian", self, Pick::kNanMedian); }

// The most frequent value of each row, the smallest on a tie, and the last
// index it occurs at. Runs of equal values in the sorted row are numbered
// (a cumsum of run starts), counted (a scatter add) and the first position
// of a longest run taken (argmax).
std::tuple<at::Tensor, at::Tensor> mode(const at::Tensor& self, int64_t dim, bool keepdim) {
  OpScope s;
  Rows r = rows_of("mode", self, dim, keepdim);
  Sorted sorted = sort_along(r.x, r.d);
  std::vector<int64_t> shape = dims_of(r.x);
  Handle starts = full(r.device, r.row, 1, at::kLong);
  if (r.n > 1) {
    Handle changed = cast(binary("ne", slice(sorted.values, r.d, 1, r.n, 1), slice(sorted.values, r.d, 0, r.n - 1, 1)),
                          at::kLong);
    starts = cat({starts.get(), changed.get()}, r.d);
  }
  Handle run;
  check(etpu_cumulative("cumsum", starts.get(), r.d, origin(), run.out()));
  run = binary_scalar("sub", run, 1);
  Handle counts = scatter(full(r.device, shape, 0, at::kLong), r.d, run, full(r.device, shape, 1, at::kLong), true);
  Handle freq = gather(counts, r.d, run);
  Handle first = argreduce("argmax", freq, r.d, true);
  Handle last = add(first, binary_scalar("sub", gather(freq, r.d, first), 1));
  at::Tensor values = at::empty(r.result, self.options());
  at::Tensor indices = at::empty(r.result, self.options().dtype(at::kLong));
  write(values, reshape(gather(sorted.values, r.d, first), r.result));
  write(indices, reshape(gather(sorted.indices, r.d, last), r.result));
  return {values, indices};
}

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
