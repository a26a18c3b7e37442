// trace, index_copy, take/put_, tril/triu_indices, and the order statistics
// (median, nanmedian, kthvalue, mode), composed from runtime ops.
//
// The order statistics sort each row once (etpu_sort: stable, NaN last) and
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

// ------------------------------------------------------------------ trace ----

// The sum of the main diagonal: every (C + 1)-th element of the flattened
// matrix. Integer inputs sum in int64, as on CPU.
at::Tensor trace(const at::Tensor& self) {
  OpScope s;
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim(), " (shape ",
              self.sizes(), ")");
  at::ScalarType t = at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type();
  at::Tensor out = at::empty({}, self.options().dtype(t));
  int64_t rows = self.size(0), cols = self.size(1), n = std::min(rows, cols), dev = device_index(self);
  if (n == 0) {
    write(out, full(dev, {}, 0, t));
    return out;
  }
  Handle diag_index = arange(dev, 0, static_cast<double>(n * (cols + 1)), static_cast<double>(cols + 1), at::kLong);
  Handle diag = index_select(reshape(read(self), {rows * cols}), 0, diag_index);
  write(out, reduce("sum", cast(diag, t), {}, false));
  return out;
}

// ------------------------------------------------------- index_copy, take ----

// out = self with the slices of `source` along `dim` written at `index`: one
// scatter with the index broadcast over the source.
at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           at::Tensor& out) {
  OpScope s;
  int64_t rank = std::max<int64_t>(self.dim(), 1), d = at::maybe_wrap_dim(dim, rank), n = index.numel();
  TORCH_CHECK(index.dim() <= 1, "index_copy_(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
  std::vector<int64_t> base = self.dim() == 0 ? std::vector<int64_t>{1} : self.sizes().vec();
  std::vector<int64_t> src_shape = base;
  src_shape[d] = n;
  int64_t src_numel = 1;
  for (int64_t v : src_shape) src_numel *= v;
  TORCH_CHECK(source.numel() == src_numel, "index_copy_(): source of shape ", source.sizes(),
              " does not match the destination of shape ", self.sizes(), " with ", n, " indices along dim ", d);
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  if (n == 0) {
    if (!out.is_same(self)) write(out, read(self));
    return out;
  }
  Handle src = reshape(cast(read(source), self.scalar_type()), src_shape);
  std::vector<int64_t> col(rank, 1);
  col[d] = n;
  Handle wide = expand(reshape(cast(read(index), at::kLong), col), src_shape);
  Handle r = scatter(reshape(read(self), base), d, wide, src, /*add=*/false);
  write(out, reshape(r, self.sizes()));
  return out;
}

// Flat positions into a tensor of `numel` elements, negative ones from the end.
Handle flat_positions(const at::Tensor& index, int64_t numel) {
  Handle i = reshape(cast(read(index), at::kLong), {index.numel()});
  return where(binary_scalar("lt", i, 0), binary_scalar("add", i, numel), i);
}

at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but got ",
              index.scalar_type());
  at::native::resize_output(out, index.sizes());
  if (index.numel() == 0) return out;
  TORCH_CHECK(self.numel() > 0, "take(): tried to take from an empty tensor (of shape ", self.sizes(), ") with ",
              index.numel(), " indices");
  Handle flat = reshape(read(self), {self.numel()});
  write(out, reshape(index_select(flat, 0, flat_positions(index, self.numel())), index.sizes()));
  return out;
}

at::Tensor take(const at::Tensor& self, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return take_out(self, index, out);
}

// The transpose of take (its backward): `source` written, or added, at the
// flat positions of self.
at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  OpScope s;
  TORCH_CHECK(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(index.numel() == source.numel(), "put_(): Expected source and index to have the same number of ",
              "elements, but got source.numel() = ", source.numel(), ", index.numel() = ", index.numel());
  if (index.numel() == 0) return self;
  TORCH_CHECK(self.numel() > 0, "put_(): Tried to put elements into an empty tensor (of shape ", self.sizes(), ")");
  Handle flat = reshape(read(self), {self.numel()});
  Handle src = reshape(cast(read(source), self.scalar_type()), {source.numel()});
  Handle r = scatter(flat, 0, flat_positions(index, self.numel()), src, accumulate);
  write(self, reshape(r, self.sizes()));
  return self;
}

// ------------------------------------------------------ tril/triu_indices ----

// The [2, K] row and column indices of a triangle, in row-major order. They
// depend only on the arguments, so they are built on the host and uploaded.
at::Tensor tri_indices(const char* op, bool lower, int64_t rows, int64_t cols, int64_t offset,
                       std::optional<at::ScalarType> dtype, std::optional<at::Device> device) {
  OpScope s;
  TORCH_CHECK(rows >= 0, op, ": row must be non-negative, got ", rows);
  TORCH_CHECK(cols >= 0, op, ": col must be non-negative, got ", cols);
  std::vector<int64_t> r, c;
  for (int64_t i = 0; i < rows; i++) {
    int64_t lo = lower ? 0 : std::clamp<int64_t>(i + offset, 0, cols);
    int64_t hi = lower ? std::clamp<int64_t>(i + offset + 1, 0, cols) : cols;
    for (int64_t j = lo; j < hi; j++) {
      r.push_back(i);
      c.push_back(j);
    }
  }
  int64_t k = static_cast<int64_t>(r.size());
  c10::Device dev = device.value_or(c10::Device(c10::DeviceType::PrivateUse1, 0));
  at::Tensor out = at::empty({2, k}, at::TensorOptions().dtype(dtype.value_or(at::kLong)).device(dev));
  if (k == 0) return out;
  r.insert(r.end(), c.begin(), c.end());
  at::Tensor host = at::tensor(at::ArrayRef<int64_t>(r), at::TensorOptions().dtype(at::kLong)).view({2, k});
  write(out, upload(host, device_index(out)));
  return out;
}

at::Tensor tril_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device,
                        std::optional<bool> pin_memory) {
  return tri_indices("tril_indices", true, row, col, offset, dtype, device);
}

at::Tensor triu_indices(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device,
                        std::optional<bool> pin_memory) {
  return tri_indices("triu_indices", false, row, col, offset, dtype, device);
}

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
  m.impl("trace", trace);
  m.impl("index_copy.out", index_copy_out);
  m.impl("take", take);
  m.impl("take.out", take_out);
  m.impl("put_", put_);
  m.impl("tril_indices", tril_indices);
  m.impl("triu_indices", triu_indices);
  m.impl("median", median);
  m.impl("median.dim_values", median_dim_out);
  m.impl("nanmedian", nanmedian);
  m.impl("nanmedian.dim_values", nanmedian_dim_out);
  m.impl("kthvalue.values", kthvalue_out);
  m.impl("mode", mode);
}
