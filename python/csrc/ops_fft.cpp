// torch.fft on the device: every torch.fft function (fft, ifft, rfft, irfft,
// hfft, fftn, rfft2, stft's transform, ...) sizes its input and lands on one
// of ATen's three transform kernels, registered here over etpu_fft, which
// lowers to StableHLO's fft (the dims moved last, at most three at a time).
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "backend.h"

namespace etpu {
namespace {

enum Kind : int32_t { kComplexToComplex = 0, kRealToComplex = 1, kComplexToReal = 2 };

Handle transform(const at::Tensor& self, Kind kind, at::IntArrayRef dim, int64_t normalization, int64_t arg) {
  Handle x = read(self);
  Handle h;
  check(etpu_fft(x.get(), kind, dim.data(), dim.size(), normalization, arg, origin(), h.out()));
  return h;
}

// The result of a transform as a new tensor of its own dtype and shape.
at::Tensor fresh(const at::Tensor& self, const Handle& h) {
  at::Tensor out = empty_tpu(dims_of(h), scalar_type(dtype_of(h)), self.device().index());
  write(out, h);
  return out;
}

// The result into a caller's out=, resized as ATen's CPU kernels resize it.
at::Tensor& into(const Handle& h, at::Tensor& out) {
  at::native::resize_output(out, dims_of(h));
  write(out, h);
  return out;
}

at::Tensor fft_c2c(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool forward) {
  OpScope s;
  return fresh(self, transform(self, kComplexToComplex, dim, normalization, forward));
}

at::Tensor& fft_c2c_out(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool forward,
                        at::Tensor& out) {
  OpScope s;
  return into(transform(self, kComplexToComplex, dim, normalization, forward), out);
}

at::Tensor fft_r2c(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided) {
  OpScope s;
  return fresh(self, transform(self, kRealToComplex, dim, normalization, onesided));
}

at::Tensor& fft_r2c_out(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided,
                        at::Tensor& out) {
  OpScope s;
  return into(transform(self, kRealToComplex, dim, normalization, onesided), out);
}

at::Tensor fft_c2r(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, int64_t last_dim_size) {
  OpScope s;
  return fresh(self, transform(self, kComplexToReal, dim, normalization, last_dim_size));
}

at::Tensor& fft_c2r_out(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, int64_t last_dim_size,
                        at::Tensor& out) {
  OpScope s;
  return into(transform(self, kComplexToReal, dim, normalization, last_dim_size), out);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fft_c2c", etpu::fft_c2c);
  m.impl("_fft_c2c.out", etpu::fft_c2c_out);
  m.impl("_fft_r2c", etpu::fft_r2c);
  m.impl("_fft_r2c.out", etpu::fft_r2c_out);
  m.impl("_fft_c2r", etpu::fft_c2r);
  m.impl("_fft_c2r.out", etpu::fft_c2r_out);
}
