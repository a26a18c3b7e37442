// Advanced indexing (`x[idx]`, `x[idx] = v`, `index_put_`, `index_add`),
// arange, trace, index_copy, take/put_ and tril/triu_indices. Integer index tensors become one linear index into the indexed
// dims, flattened, so every form is one index_select or one scatter. Boolean
// masks need their true positions on the host first (`nonzero`, a counted
// CPU fallback): their result's shape depends on the data.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

using Indices = c10::List<std::optional<at::Tensor>>;

// The indexing of `self` by `indices`, as PyTorch defines it: index tensors
// (broadcast to `batch`) on dims `dims`; when those dims are not adjacent,
// the batch dims go first in the result.
struct Plan {
  std::vector<int64_t> dims;     // indexed dims of self, ascending
  std::vector<at::Tensor> index; // integer index per indexed dim
  std::vector<int64_t> batch;    // the broadcast shape of the index tensors
  bool adjacent = true;
};

Plan plan(const at::Tensor& self, const Indices& indices) {
  Plan p;
  TORCH_CHECK(static_cast<int64_t>(indices.size()) <= self.dim(), "index: too many indices (", indices.size(),
              ") for a tensor of shape ", self.sizes());
  int64_t d = 0;
  for (size_t i = 0; i < indices.size(); i++) {
    std::optional<at::Tensor> t = indices.get(i);
    if (!t.has_value() || !t->defined()) {
      d++;
      continue;
    }
    if (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte) {
      // A mask over t.dim() dims: its true positions, one index per dim.
      for (int64_t k = 0; k < t->dim(); k++)
        TORCH_CHECK(t->size(k) == self.size(d + k), "index: the mask of shape ", t->sizes(),
                    " does not match the indexed tensor's shape ", self.sizes(), " at dim ", d + k);
      at::Tensor nz = at::nonzero(*t);
      for (int64_t k = 0; k < t->dim(); k++) {
        p.dims.push_back(d + k);
        p.index.push_back(nz.select(1, k));
      }
      d += t->dim();
      continue;
    }
    TORCH_CHECK(at::isIntegralType(t->scalar_type(), false), "index: tensors used as indices must be long, int, byte ",
                "or bool, got ", t->scalar_type());
    p.dims.push_back(d);
    p.index.push_back(*t);
    d++;
  }
  TORCH_CHECK(!p.dims.empty(), "index: expected at least one index tensor");
  for (size_t i = 1; i < p.dims.size(); i++) p.adjacent &= p.dims[i] == p.dims[i - 1] + 1;
  p.batch = p.index[0].sizes().vec();
  for (size_t i = 1; i < p.index.size(); i++) p.batch = at::infer_size(p.batch, p.index[i].sizes());
  return p;
}

// self's values with the indexed dims moved first when they are not adjacent.
struct Layout {
  Handle x;                    // self, permuted
  std::vector<int64_t> sizes;  // its shape
  std::vector<int64_t> perm;   // permutation applied (empty: none)
  int64_t first;               // where the indexed dims start
};

Layout layout(const at::Tensor& self, const Plan& p) {
  Layout l{read(self), self.sizes().vec(), {}, p.dims[0]};
  if (!p.adjacent) {
    l.perm = p.dims;
    for (int64_t d = 0; d < self.dim(); d++)
      if (std::find(p.dims.begin(), p.dims.end(), d) == p.dims.end()) l.perm.push_back(d);
    l.x = permute(l.x, l.perm);
    for (size_t i = 0; i < l.perm.size(); i++) l.sizes[i] = self.size(l.perm[i]);
    l.first = 0;
  }
  return l;
}

// The linear index into the indexed dims (flattened, row-major), of shape
// [numel(batch)]; negative indices count from the end.
Handle linear_index(const Layout& l, const Plan& p, int64_t device) {
  Handle linear;
  int64_t stride = 1;
  for (int64_t j = static_cast<int64_t>(p.dims.size()) - 1; j >= 0; j--) {
    int64_t size = l.sizes[l.first + j];
    // Index tensors may live on the CPU, as with CUDA tensors.
    const at::Tensor& i = p.index[j];
    Handle idx = cast(i.device().is_cpu() ? upload(i, device) : read(i), at::kLong);
    idx = where(binary_scalar("lt", idx, 0), binary_scalar("add", idx, size), idx);
    if (dims_of(idx) != p.batch) idx = expand(idx, p.batch);
    Handle term = stride == 1 ? std::move(idx) : mul(idx, at::Scalar(stride));
    linear = linear.get() == 0 ? std::move(term) : add(linear, term);
    stride *= size;
  }
  return reshape(linear, {c10::multiply_integers(p.batch)});
}

// [pre..., prod(indexed), post...]
std::vector<int64_t> flat_shape(const Layout& l, const Plan& p) {
  std::vector<int64_t> s(l.sizes.begin(), l.sizes.begin() + l.first);
  int64_t n = 1;
  for (size_t j = 0; j < p.dims.size(); j++) n *= l.sizes[l.first + j];
  s.push_back(n);
  s.insert(s.end(), l.sizes.begin() + l.first + p.dims.size(), l.sizes.end());
  return s;
}

// [pre..., batch..., post...]
std::vector<int64_t> result_shape(const Layout& l, const Plan& p) {
  std::vector<int64_t> s(l.sizes.begin(), l.sizes.begin() + l.first);
  s.insert(s.end(), p.batch.begin(), p.batch.end());
  s.insert(s.end(), l.sizes.begin() + l.first + p.dims.size(), l.sizes.end());
  return s;
}

at::Tensor& index_out(const at::Tensor& self, const Indices& indices, at::Tensor& out) {
  OpScope s;
  Plan p = plan(self, indices);
  Layout l = layout(self, p);
  auto shape = result_shape(l, p);
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  Handle flat = reshape(l.x, flat_shape(l, p));
  Handle picked = index_select(flat, l.first, linear_index(l, p, device_index(self)));
  write(out, reshape(picked, shape));
  return out;
}

// self[indices] = values (or += with accumulate), in place.
at::Tensor& index_put(at::Tensor& self, const Indices& indices, const at::Tensor& values, bool accumulate,
                      bool unsafe) {
  OpScope s;
  Plan p = plan(self, indices);
  Layout l = layout(self, p);
  auto shape = result_shape(l, p);
  int64_t n = c10::multiply_integers(p.batch);
  if (n == 0 || self.numel() == 0) return self;
  auto fshape = flat_shape(l, p);
  // values broadcast to the result's shape, then flattened like the result.
  Handle v = cast(read_operand(values, device_index(self)), self.scalar_type());
  if (dims_of(v) != shape) v = expand(v, shape);
  std::vector<int64_t> vflat(fshape);
  vflat[l.first] = n;
  v = reshape(v, vflat);
  // The linear index along the flattened dim, broadcast over the others.
  std::vector<int64_t> ishape(fshape.size(), 1);
  ishape[l.first] = n;
  Handle idx = expand(reshape(linear_index(l, p, device_index(self)), ishape), vflat);
  Handle updated = scatter(reshape(l.x, fshape), l.first, idx, v, accumulate);
  updated = reshape(updated, l.sizes);
  if (!l.perm.empty()) {
    std::vector<int64_t> inverse(l.perm.size());
    for (size_t i = 0; i < l.perm.size(); i++) inverse[l.perm[i]] = static_cast<int64_t>(i);
    updated = permute(updated, inverse);
  }
  write(self, updated);
  return self;
}

at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const at::Scalar& alpha, at::Tensor& out) {
  OpScope s;
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  Handle x = read(self);
  if (source.numel() == 0) {
    write(out, x);
    return out;
  }
  Handle src = cast(read(source), self.scalar_type());
  bool one = alpha.isIntegral(true) ? alpha.toLong() == 1 : alpha.toDouble() == 1.0;
  if (!one) src = mul(src, alpha);
  if (self.dim() == 0) {
    write(out, add(x, reshape(src, {})));
    return out;
  }
  std::vector<int64_t> ishape(self.dim(), 1);
  ishape[d] = index.numel();
  Handle idx = cast(reshape(read(index), ishape), at::kLong);
  idx = expand(idx, source.sizes());
  write(out, scatter(x, d, idx, src, /*add=*/true));
  return out;
}

// self[..., index, ...] = value along `dim`, in place.
at::Tensor& index_fill_scalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  OpScope s;
  TORCH_CHECK(index.dim() <= 1, "index_fill_: index must be 0-D or 1-D, got shape ", index.sizes());
  if (index.numel() == 0 || self.numel() == 0) return self;
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  int64_t dev = device_index(self);
  if (self.dim() == 0) {
    write(self, full(dev, {}, value, self.scalar_type()));
    return self;
  }
  int64_t size = self.size(d);
  Handle idx = cast(index.device().is_cpu() ? upload(index, dev) : read(index), at::kLong);
  idx = where(binary_scalar("lt", idx, 0), binary_scalar("add", idx, size), idx);
  std::vector<int64_t> ishape(self.dim(), 1), shape = self.sizes().vec();
  ishape[d] = shape[d] = index.numel();
  idx = expand(reshape(idx, ishape), shape);
  Handle src = full(dev, shape, value, self.scalar_type());
  write(self, scatter(read(self), d, idx, src, /*add=*/false));
  return self;
}

at::Tensor& index_fill_tensor(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_: expected a 0-D value tensor, got shape ", value.sizes());
  return index_fill_scalar(self, dim, index, value.item());
}

// nonzero and masked_select have data-dependent shapes: as on CUDA they read
// the mask on the host (a counted host sync, not a fallback), then gather on
// the device.
at::Tensor nonzero_kernel(const at::Tensor& self) {
  at::Tensor mask = self.ne(0).cpu();
  return at::nonzero(mask).to(self.device());
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected a bool mask, got ", mask.scalar_type());
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  at::Tensor flat_mask = mask.expand(shape).reshape(-1);
  at::Tensor idx = nonzero_kernel(flat_mask).view(-1);
  return self.expand(shape).reshape(-1).index_select(0, idx);
}

bool equal(const at::Tensor& self, const at::Tensor& other) {
  if (self.sizes() != other.sizes() || self.scalar_type() != other.scalar_type()) return false;
  if (self.numel() == 0) return true;
  return self.eq(other).all().item<bool>();
}

at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  OpScope s;
  double st = step.toDouble(), a = start.toDouble(), b = end.toDouble();
  TORCH_CHECK(st != 0, "arange: step must be nonzero");
  TORCH_CHECK(std::isfinite(a) && std::isfinite(b), "arange: unsupported range: ", a, " -> ", b);
  TORCH_CHECK((st > 0 && b >= a) || (st < 0 && b <= a), "arange: upper bound and larger bound inconsistent with step sign");
  int64_t size;
  if (start.isIntegral(true) && end.isIntegral(true) && step.isIntegral(true)) {
    // In integers: bounds beyond 2^53 do not survive a double.
    __int128 span = static_cast<__int128>(end.toLong()) - start.toLong(), by = step.toLong();
    size = static_cast<int64_t>(span == 0 ? 0 : (span + by - (by > 0 ? 1 : -1)) / by);
  } else {
    size = static_cast<int64_t>(std::ceil((b - a) / st));
  }
  at::native::resize_output(out, {size});
  if (size > 0) write(out, arange(device_index(out), start, end, step, out.scalar_type()));
  return out;
}


// ------------------------------------------------------------------ trace ----

// The sum of the main diagonal: every (C + 1)-th element of the flattened
// matrix. Integer inputs sum in int64, as on CPU.
at::Tensor trace(const at::Tensor& self) {
  OpScope s;
  at::ScalarType t = at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type();
  at::Tensor out = at::empty({}, self.options().dtype(t));
  Handle h;
  check(etpu_trace(read(self).get(), origin(), h.out()));
  write(out, h);
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

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("index.Tensor_out", index_out);
  m.impl("_index_put_impl_", index_put);
  m.impl("index_add.out", index_add_out);
  m.impl("index_fill_.int_Scalar", index_fill_scalar);
  m.impl("index_fill_.int_Tensor", index_fill_tensor);
  m.impl("arange.start_out", arange_out);
  m.impl("nonzero", nonzero_kernel);
  m.impl("masked_select", masked_select);
  m.impl("equal", equal);
  m.impl("trace", trace);
  m.impl("index_copy.out", index_copy_out);
  m.impl("take", take);
  m.impl("take.out", take_out);
  m.impl("put_", put_);
  m.impl("tril_indices", tril_indices);
  m.impl("triu_indices", triu_indices);
}
