// Advanced indexing (`x[idx]`, `x[idx] = v`, `index_put_`, `index_add`,
// `index_fill_`), arange, trace, index_copy, take/put_ and tril/triu_indices.
// The indexing ops are the runtime's (runtime/src/tensor/index.rs), one call
// each. Boolean masks need their true positions on the host first
// (`nonzero`): their result's shape depends on the data.
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

// The index tensors of `x[indices]` as runtime handles, one per dim (0: a
// full slice), for etpu_index and etpu_index_put. A bool (or byte) mask
// becomes its true positions, one index tensor per dim it covers: `nonzero`
// reads it on the host, as its result's shape depends on the data. Index
// tensors may live on the CPU, as with CUDA tensors: they are uploaded.
struct IndexList {
  std::vector<Handle> owned;
  std::vector<etpu_tensor> handles;
};

IndexList index_list(const at::Tensor& self, const Indices& indices) {
  IndexList l;
  int64_t dev = device_index(self);
  auto add = [&](const at::Tensor& t) {
    l.owned.push_back(t.device().is_cpu() ? upload(t, dev) : read(t));
    l.handles.push_back(l.owned.back().get());
  };
  int64_t d = 0;
  for (size_t i = 0; i < indices.size(); i++) {
    std::optional<at::Tensor> t = indices.get(i);
    if (!t.has_value() || !t->defined()) {
      l.handles.push_back(0);
      d++;
      continue;
    }
    if (t->scalar_type() == at::kBool || t->scalar_type() == at::kByte) {
      for (int64_t k = 0; k < t->dim(); k++)
        TORCH_CHECK(d + k < self.dim() && t->size(k) == self.size(d + k), "index: the mask of shape ", t->sizes(),
                    " does not match the indexed tensor's shape ", self.sizes(), " at dim ", d + k);
      at::Tensor nz = at::nonzero(*t);
      for (int64_t k = 0; k < t->dim(); k++) add(nz.select(1, k));
      d += t->dim();
      continue;
    }
    add(*t);
    d++;
  }
  return l;
}

at::Tensor& index_out(const at::Tensor& self, const Indices& indices, at::Tensor& out) {
  OpScope s;
  IndexList l = index_list(self, indices);
  Handle h;
  check(etpu_index(read(self).get(), l.handles.data(), l.handles.size(), origin(), h.out()));
  at::native::resize_output(out, dims_of(h));
  write(out, h);
  return out;
}

// self[indices] = values (or += with accumulate), in place.
at::Tensor& index_put(at::Tensor& self, const Indices& indices, const at::Tensor& values, bool accumulate,
                      bool unsafe) {
  OpScope s;
  IndexList l = index_list(self, indices);
  Handle v = read_operand(values, device_index(self)), h;
  check(etpu_index_put(read(self).get(), l.handles.data(), l.handles.size(), v.get(), accumulate, origin(),
                       h.out()));
  write(self, h);
  return self;
}

at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const at::Scalar& alpha, at::Tensor& out) {
  OpScope s;
  Handle h;
  check(etpu_index_add(read(self).get(), dim, read(index).get(), read(source).get(), scalar_arg(alpha), origin(),
                       h.out()));
  write(out, h);
  return out;
}

// self[..., index, ...] = value along `dim`, in place.
at::Tensor& index_fill_scalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  if (value.isComplex()) {
    // The C ABI's scalars are real: a complex fill copies a filled source
    // (into a 1-element view of a 0-d tensor, whose only dim is 0 or -1).
    at::Tensor target = self.dim() == 0 ? self.unsqueeze(0) : self;
    std::vector<int64_t> shape = target.sizes().vec();
    shape[at::maybe_wrap_dim(dim, target.dim())] = index.numel();
    target.index_copy_(dim, index.to(self.device()).reshape({-1}), at::full(shape, value, self.options()));
    return self;
  }
  OpScope s;
  Handle i = index.device().is_cpu() ? upload(index, device_index(self)) : read(index), h;
  check(etpu_index_fill(read(self).get(), dim, i.get(), scalar_arg(value), origin(), h.out()));
  write(self, h);
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

at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but got ",
              index.scalar_type());
  at::native::resize_output(out, index.sizes());
  Handle h;
  check(etpu_take(read(self).get(), read(index).get(), origin(), h.out()));
  write(out, h);
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
  Handle h;
  check(etpu_put(read(self).get(), read(index).get(), read(source).get(), accumulate, origin(), h.out()));
  write(self, h);
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
