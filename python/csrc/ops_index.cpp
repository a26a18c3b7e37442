// Advanced indexing (`x[idx]`, `x[idx] = v`, `index_put_`, `index_add`) and
// arange. Integer index tensors become one linear index into the indexed
// dims, flattened, so every form is one index_select or one scatter. Boolean
// masks need their true positions on the host first (`nonzero`, a counted
// CPU fallback): their result's shape depends on the data.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

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
  double size_d;
  if (out.scalar_type() == at::kLong && start.isIntegral(true) && end.isIntegral(true) && step.isIntegral(true)) {
    size_d = std::ceil(static_cast<double>(end.toLong() - start.toLong()) / static_cast<double>(step.toLong()));
  } else {
    size_d = std::ceil((b - a) / st);
  }
  int64_t size = static_cast<int64_t>(size_d);
  at::native::resize_output(out, {size});
  if (size > 0) write(out, arange(device_index(out), a, b, st, out.scalar_type()));
  return out;
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
}
