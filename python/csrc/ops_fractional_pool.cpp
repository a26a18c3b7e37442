// Fractional max pooling (`F.fractional_max_pool2d/3d`, Graham 2014): each
// output position pools a window of the kernel's size whose start along a
// dim follows a pseudo-random increasing sequence fixed by one sample in
// [0, 1) per (batch, channel, dim), given by the caller (`_random_samples`,
// drawn by PyTorch from tpu's generator). Composed of at:: ops: the window
// starts computed as PyTorch computes them, the windows gathered, the max
// and its flat index taken; the backward scatters the gradient to those
// indices. A window's first maximum wins, as on the CPU (NaNs aside: the CPU
// keeps the last NaN of a window, this the first).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

// The window starts along one dim [N, C, out] (int64) from the samples `u`
// [N, C]: trunc((i + u) a) - trunc(u a) for i < out - 1, with
// a = (in - pool) / (out - 1) in the samples' dtype, and in - pool last.
at::Tensor window_starts(const at::Tensor& u, int64_t in, int64_t out, int64_t pool) {
  at::Tensor last = at::full({u.size(0), u.size(1), 1}, in - pool, u.options().dtype(at::kLong));
  if (out == 1) return last;
  at::Tensor alpha = at::scalar_tensor(static_cast<double>(in - pool), u.options()) /
                     at::scalar_tensor(static_cast<double>(out - 1), u.options());
  at::Tensor i = at::arange(out - 1, u.options());
  at::Tensor uu = u.unsqueeze(-1);
  at::Tensor starts = ((i + uu) * alpha).trunc() - (uu * alpha).trunc();
  return at::cat({starts.to(at::kLong), last}, -1);
}

// Which sample of a (batch, channel) each spatial dim uses: PyTorch orders
// them (W, H) in 2-d and (T, H, W) in 3-d.
int64_t sample_of(size_t dims, size_t d) { return dims == 2 ? 1 - static_cast<int64_t>(d) : static_cast<int64_t>(d); }

const char* dim_name(size_t dims, size_t d) {
  static const std::array<const char*, 3> names3 = {"time", "height", "width"};
  return dims == 2 ? names3[d + 1] : names3[d];
}

std::tuple<at::Tensor, at::Tensor> fractional_max_pool(const char* op, const at::Tensor& self, at::IntArrayRef kernel,
                                                       at::IntArrayRef output_size, const at::Tensor& samples) {
  OpScope s;
  size_t k = kernel.size();
  TORCH_CHECK(output_size.size() == k, op, ": expected ", k, " output sizes, got ", output_size.size());
  TORCH_CHECK(self.dim() == static_cast<int64_t>(k) + 1 || self.dim() == static_cast<int64_t>(k) + 2, op,
              ": expected a ", k + 1, "-d or ", k + 2, "-d input, got ", self.sizes());
  bool batched = self.dim() == static_cast<int64_t>(k) + 2;
  at::Tensor x = batched ? self : self.unsqueeze(0);
  int64_t n = x.size(0), c = x.size(1);
  TORCH_CHECK(samples.dim() == 3 && samples.size(0) >= n && samples.size(1) >= c &&
                  samples.size(2) == static_cast<int64_t>(k),
              op, ": expected random samples of shape [", n, ", ", c, ", ", k, "], got ", samples.sizes());
  at::Tensor u = samples.to(x.scalar_type());
  // The flat index (within a plane) of every window element:
  // [N, C, out..., pool...], built one dim at a time.
  std::vector<int64_t> shape = {n, c};
  for (size_t d = 0; d < k; d++) shape.push_back(output_size[d]);
  for (size_t d = 0; d < k; d++) shape.push_back(kernel[d]);
  at::Tensor flat = at::zeros({1}, x.options().dtype(at::kLong));
  int64_t stride = 1;
  for (size_t d = k; d-- > 0;) {
    int64_t in = x.size(2 + d), out = output_size[d], pool = kernel[d];
    TORCH_CHECK(pool > 0 && out > 0, op, ": kernel and output sizes must be positive, got kernel ", kernel,
                " and output ", output_size);
    TORCH_CHECK(out + pool - 1 <= in, op, "(): pool ", dim_name(k, d), " ", pool, " too large relative to input ",
                dim_name(k, d), " ", in);
    at::Tensor starts = window_starts(u.select(2, sample_of(k, d)).narrow(0, 0, n).narrow(1, 0, c), in, out, pool);
    at::Tensor along = starts.unsqueeze(-1) + at::arange(pool, starts.options());  // [N, C, out, pool]
    std::vector<int64_t> view(2 + 2 * k, 1);
    view[0] = n;
    view[1] = c;
    view[2 + d] = out;
    view[2 + k + d] = pool;
    flat = flat + along.reshape(view) * stride;
    stride *= in;
  }
  flat = flat.expand(shape).reshape({n, c, -1});
  at::Tensor values = x.reshape({n, c, -1}).gather(2, flat);
  std::vector<int64_t> pooled(shape.begin(), shape.begin() + 2 + k);
  pooled.push_back(-1);
  auto [best, which] = values.reshape(pooled).max(-1);
  at::Tensor indices = flat.reshape(pooled).gather(-1, which.unsqueeze(-1)).squeeze(-1);
  if (!batched) return {best.squeeze(0), indices.squeeze(0)};
  return {best, indices};
}

// The gradient of each input element: the sum of the gradients of the
// outputs whose window maximum it was.
at::Tensor fractional_max_pool_backward(size_t k, const at::Tensor& grad_output, const at::Tensor& self,
                                        const at::Tensor& indices) {
  OpScope s;
  int64_t spatial = self.dim() - static_cast<int64_t>(k);
  at::Tensor grad = at::zeros_like(self, at::MemoryFormat::Contiguous).flatten(spatial);
  grad.scatter_add_(-1, indices.flatten(spatial), grad_output.flatten(spatial).to(grad.scalar_type()));
  return grad.reshape(self.sizes());
}

template <size_t K>
std::tuple<at::Tensor, at::Tensor> pool(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef output_size,
                                        const at::Tensor& samples) {
  return fractional_max_pool(K == 2 ? "fractional_max_pool2d" : "fractional_max_pool3d", self, kernel, output_size,
                             samples);
}

template <size_t K>
std::tuple<at::Tensor&, at::Tensor&> pool_out(const at::Tensor& self, at::IntArrayRef kernel,
                                              at::IntArrayRef output_size, const at::Tensor& samples,
                                              at::Tensor& output, at::Tensor& indices) {
  auto [best, where] = pool<K>(self, kernel, output_size, samples);
  at::native::resize_output(output, best.sizes());
  at::native::resize_output(indices, where.sizes());
  output.copy_(best);
  indices.copy_(where);
  return {output, indices};
}

template <size_t K>
at::Tensor pool_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef /*kernel*/,
                         at::IntArrayRef /*output_size*/, const at::Tensor& indices) {
  return fractional_max_pool_backward(K, grad_output, self, indices);
}

template <size_t K>
at::Tensor& pool_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel,
                              at::IntArrayRef output_size, const at::Tensor& indices, at::Tensor& grad_input) {
  at::Tensor g = pool_backward<K>(grad_output, self, kernel, output_size, indices);
  at::native::resize_output(grad_input, g.sizes());
  return grad_input.copy_(g);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("fractional_max_pool2d", pool<2>);
  m.impl("fractional_max_pool2d.output", pool_out<2>);
  m.impl("fractional_max_pool2d_backward", pool_backward<2>);
  m.impl("fractional_max_pool2d_backward.grad_input", pool_backward_out<2>);
  m.impl("fractional_max_pool3d", pool<3>);
  m.impl("fractional_max_pool3d.output", pool_out<3>);
  m.impl("fractional_max_pool3d_backward", pool_backward<3>);
  m.impl("fractional_max_pool3d_backward.grad_input", pool_backward_out<3>);
}
