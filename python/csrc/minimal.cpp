// The kernels every backend needs: making tensors, views, resizing, copies
// between devices, reading a scalar, filling. Views never touch data: they
// are new TensorImpls over the same storage (the runtime resolves them when a
// kernel reads them).
#include <ATen/EmptyTensor.h>
#include <ATen/native/ComplexHelper.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include "backend.h"

namespace etpu {

c10::Allocator* tpu_allocator();

namespace {

constexpr c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

at::ScalarType checked_dtype(std::optional<at::ScalarType> dtype) {
  at::ScalarType t = c10::dtype_or_default(dtype);
  dtype_code(t);  // throws for dtypes the runtime does not have
  return t;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  const c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_generic(size, tpu_allocator(), kTpuKeys, checked_dtype(dtype), memory_format);
}

}  // namespace

at::Tensor empty_tpu(at::IntArrayRef sizes, at::ScalarType t, c10::DeviceIndex index) {
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index));
  return at::detail::empty_generic(sizes, tpu_allocator(), kTpuKeys, checked_dtype(t), std::nullopt);
}

at::Tensor tpu_tensor_of(etpu_storage storage, at::IntArrayRef sizes, at::ScalarType t, c10::DeviceIndex index) {
  caffe2::TypeMeta dtype = c10::scalarTypeToTypeMeta(t);
  size_t nbytes = at::detail::computeStorageNbytesContiguous(sizes, dtype.itemsize());
  if (nbytes == 0) {
    etpu_storage_free(storage);
    TORCH_CHECK(false, "tpu: a storage adopted for a tensor of shape ", sizes, " (no elements)");
  }
  auto impl = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                    adopt_storage(storage, nbytes, index), tpu_allocator(),
                                                    /*resizable=*/true);
  at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(impl)), kTpuKeys, dtype);
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return tensor;
}

namespace {

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  const c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, tpu_allocator(), kTpuKeys, checked_dtype(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }

// `param.data = tpu_tensor` (what Module.to does) keeps the Parameter object,
// so weights tied before `.to("tpu")` stay tied: a strided CPU tensor and a
// tpu tensor can take each other's metadata.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (t.is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) || (dense(self) && dense(from));
}

at::Tensor unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

// Makes `storage` hold at least `nbytes`, keeping its bytes.
void ensure_storage(const c10::Storage& storage, size_t nbytes) {
  if (nbytes <= storage.nbytes()) return;
  at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(storage, nbytes);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != at::MemoryFormat::Contiguous &&
      *memory_format != at::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  size_t needed = static_cast<size_t>(self.storage_offset() + self.numel()) * self.itemsize();
  if (self.numel() > 0) ensure_storage(self.storage(), needed);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(source);
  impl->set_storage_offset(offset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
  } else {
    impl->set_sizes_and_strides(size, stride);
  }
  int64_t numel = self.numel();
  if (numel > 0) {
    int64_t last = offset;
    for (int64_t d = 0; d < self.dim(); d++) last += (self.size(d) - 1) * self.stride(d);
    ensure_storage(self.storage(), static_cast<size_t>(last + 1) * self.itemsize());
  }
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage source, int64_t offset, c10::IntArrayRef size,
                                      c10::IntArrayRef stride) {
  return set_storage(self, std::move(source), offset, size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return set_storage(self, std::move(source), 0, {n}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, tpu_allocator(), /*resizable=*/true);
  return set_storage(self, std::move(empty), 0, {0}, {});
}

// Copies keep the lazy bits' meaning (read and write apply a tpu tensor's;
// a CPU tensor's are resolved here).
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  OpScope scope;
  if (self.device().is_cpu() && dst.device().type() == c10::DeviceType::PrivateUse1) {
    at::Tensor src = self.resolve_conj().resolve_neg().to(dst.scalar_type()).expand(dst.sizes()).contiguous();
    write(dst, upload(src, device_index(dst)));
  } else if (self.device().type() == c10::DeviceType::PrivateUse1 && dst.device().is_cpu()) {
    Handle h = resolve_lazy_bits(dst, read(self));
    if (dtype_of(h) != dtype_code(dst.scalar_type())) h = cast(h, dst.scalar_type());
    if (dims_of(h) != dst.sizes().vec()) h = expand(h, dst.sizes());
    if (dst.is_contiguous()) {
      check(etpu_tensor_to_host(h.get(), dst.mutable_data_ptr(), dst.nbytes(), origin()));
    } else {
      at::Tensor tmp = at::empty(dst.sizes(), dst.options());
      check(etpu_tensor_to_host(h.get(), tmp.mutable_data_ptr(), tmp.nbytes(), origin()));
      dst.copy_(tmp);
    }
  } else {
    TORCH_CHECK(self.device().type() == c10::DeviceType::PrivateUse1 &&
                    dst.device().type() == c10::DeviceType::PrivateUse1,
                "copy between ", self.device(), " and ", dst.device(), " is not supported by the tpu backend");
    write(dst, read(self));
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  OpScope scope;
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  at::Tensor cpu = at::empty({}, self.options().device(at::kCPU));
  Handle h = read(self);
  check(etpu_tensor_to_host(h.get(), cpu.mutable_data_ptr(), cpu.nbytes(), origin()));
  return cpu.item();
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  OpScope scope;
  write(self, full(device_index(self), self.sizes(), value, self.scalar_type()));
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (value.device().is_cpu()) return fill_scalar(self, value.item());
  OpScope scope;
  write(self, read(value));
  return self;
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", etpu::empty_memory_format);
  m.impl("empty_strided", etpu::empty_strided);
  m.impl("as_strided", etpu::as_strided);
  m.impl("view", etpu::view);
  // A complex tensor's parts as a float tensor of a last dim of 2 and back:
  // the same storage read as another dtype (the runtime reinterprets it).
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("unfold", etpu::unfold);
  m.impl("_has_compatible_shallow_copy_type", etpu::has_compatible_shallow_copy_type);
  m.impl("_reshape_alias", etpu::reshape_alias);
  m.impl("resize_", etpu::resize_);
  m.impl("set_.source_Storage", etpu::set_source_storage);
  m.impl("set_.source_Storage_storage_offset", etpu::set_source_storage_offset);
  m.impl("set_.source_Tensor", etpu::set_source_tensor);
  m.impl("set_", etpu::set_empty);
  m.impl("_copy_from", etpu::copy_from);
  m.impl("_copy_from_and_resize", etpu::copy_from_and_resize);
  m.impl("_local_scalar_dense", etpu::local_scalar_dense);
  m.impl("fill_.Scalar", etpu::fill_scalar);
  m.impl("fill_.Tensor", etpu::fill_tensor);
  m.impl("zero_", etpu::zero_);
}

// PyTorch's conjugate and negative fallbacks materialize an input with a
// lazy bit with clone(), whose copy lands on _copy_from again (an endless
// recursion for a backend whose copies go through _copy_from); copy_from
// above keeps the bits' meaning itself, so _copy_from skips the fallbacks.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
