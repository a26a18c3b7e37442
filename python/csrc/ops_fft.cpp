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

// A kernel's functional form: the result as a new tensor of its own dtype
// and shape. `Arg` is the kernel's last argument: c2c's `forward`, r2c's
// `onesided`, c2r's `last_dim_size`.
template <Kind kind, typename Arg>
at::Tensor functional(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, Arg arg) {
  OpScope s;
  Handle h = transform(self, kind, dim, normalization, static_cast<int64_t>(arg));
  at::Tensor out = empty_tpu(dims_of(h), scalar_type(dtype_of(h)), self.device().index());
  write(out, h);
  return out;
}

// Its out= form, resized as ATen's CPU kernels resize it.
template <Kind kind, typename Arg>
at::Tensor& out_form(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, Arg arg, at::Tensor& out) {
  OpScope s;
  Handle h = transform(self, kind, dim, normalization, static_cast<int64_t>(arg));
  at::native::resize_output(out, dims_of(h));
  write(out, h);
  return out;
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("_fft_c2c", functional<kComplexToComplex, bool>);
  m.impl("_fft_c2c.out", out_form<kComplexToComplex, bool>);
  m.impl("_fft_r2c", functional<kRealToComplex, bool>);
  m.impl("_fft_r2c.out", out_form<kRealToComplex, bool>);
  m.impl("_fft_c2r", functional<kComplexToReal, int64_t>);
  m.impl("_fft_c2r.out", out_form<kComplexToReal, int64_t>);
}
