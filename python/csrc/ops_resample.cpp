// Resampling: reflection and replication padding (1-3d), and nearest,
// nearest-exact and (bi/tri)linear upsampling (1-3d), with their backwards:
// each the runtime's (Tensor::pad_edges, Tensor::upsample and their
// backwards) in one C ABI call; a kernel here only adapts ATen's schema.
// Bicubic and antialiased bilinear resizing (2-d) are separable: each dim is
// a product with an [out, in] matrix of PyTorch's weights, built on the host
// from the sizes alone (at:: matmuls; the backward multiplies by the
// transposes).

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

// ---------------------------------------------------------------- padding ----

at::Tensor& pad_out(const at::Tensor& self, at::IntArrayRef padding, bool reflect, at::Tensor& out) {
  OpScope s;
  Handle y;
  check(etpu_pad_edges(read(self).get(), padding.data(), padding.size(), reflect, origin(), y.out()));
  at::native::resize_output(out, dims_of(y));
  write(out, y);
  return out;
}

at::Tensor& pad_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef padding,
                             bool reflect, at::Tensor& grad_input) {
  OpScope s;
  Handle g;
  check(etpu_pad_edges_backward(read(grad_output).get(), self.sizes().data(), self.dim(), padding.data(),
                                padding.size(), reflect, origin(), g.out()));
  at::native::resize_output(grad_input, self.sizes());
  write(grad_input, g);
  return grad_input;
}

// The registered forms. Structured ops reach the out= form from their
// functional one; the others register both.
#define PAD_KERNELS(name, reflect)                                                                              \
  at::Tensor& name##_out(const at::Tensor& self, at::IntArrayRef padding, at::Tensor& out) {                     \
    return pad_out(self, padding, reflect, out);                                                                \
  }                                                                                                             \
  [[maybe_unused]] at::Tensor name(const at::Tensor& self, at::IntArrayRef padding) {                           \
    at::Tensor out = at::empty({0}, self.options());                                                            \
    return pad_out(self, padding, reflect, out);                                                                \
  }                                                                                                             \
  at::Tensor& name##_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef padding, \
                                  at::Tensor& grad_input) {                                                     \
    return pad_backward_out(grad_output, self, padding, reflect, grad_input);                                   \
  }                                                                                                             \
  [[maybe_unused]] at::Tensor name##_backward(const at::Tensor& grad_output, const at::Tensor& self,            \
                                              at::IntArrayRef padding) {                                        \
    at::Tensor grad_input = at::empty({0}, grad_output.options());                                              \
    return pad_backward_out(grad_output, self, padding, reflect, grad_input);                                   \
  }

PAD_KERNELS(reflection_pad1d, true)
PAD_KERNELS(reflection_pad2d, true)
PAD_KERNELS(reflection_pad3d, true)
PAD_KERNELS(replication_pad1d, false)
PAD_KERNELS(replication_pad2d, false)
PAD_KERNELS(replication_pad3d, false)

// ------------------------------------------------------------ upsampling ----

using Scales = std::vector<std::optional<double>>;

// The caller's scale factors as the C ABI takes them (0: none).
std::vector<double> scale_values(const Scales& scales) {
  std::vector<double> v;
  for (const auto& s : scales) v.push_back(s.value_or(0.0));
  return v;
}

at::Tensor& upsample_out(const char* mode, bool align_corners, const at::Tensor& self, at::IntArrayRef output_size,
                         const Scales& scales, at::Tensor& out) {
  OpScope s;
  Handle y;
  std::vector<double> sv = scale_values(scales);
  check(etpu_upsample(read(self).get(), mode, align_corners, output_size.data(), output_size.size(), sv.data(),
                      origin(), y.out()));
  at::native::resize_output(out, dims_of(y));
  write(out, y);
  return out;
}

at::Tensor& upsample_backward_out(const char* mode, bool align_corners, const at::Tensor& grad_output,
                                  at::IntArrayRef output_size, at::IntArrayRef input_size, const Scales& scales,
                                  at::Tensor& grad_input) {
  OpScope s;
  TORCH_CHECK(input_size.size() == output_size.size() + 2, "upsampling backward: expected an input size of ",
              output_size.size() + 2, " dims, got ", input_size);
  Handle g;
  std::vector<double> sv = scale_values(scales);
  check(etpu_upsample_backward(read(grad_output).get(), mode, align_corners, output_size.data(), output_size.size(),
                               input_size.data(), sv.data(), origin(), g.out()));
  at::native::resize_output(grad_input, input_size);
  write(grad_input, g);
  return grad_input;
}

using Scale = std::optional<double>;

// The registered forms, one per dimensionality: 1-d ops take one scale,
// 2-d ones (h, w), 3-d ones (d, h, w).
#define NEAREST_KERNELS(fn, mode)                                                                               \
  at::Tensor& fn##1d_out(const at::Tensor& self, at::IntArrayRef size, Scale s0, at::Tensor& out) {             \
    return upsample_out(mode, false, self, size, {s0}, out);                                                    \
  }                                                                                                             \
  at::Tensor& fn##2d_out(const at::Tensor& self, at::IntArrayRef size, Scale s0, Scale s1, at::Tensor& out) {   \
    return upsample_out(mode, false, self, size, {s0, s1}, out);                                                \
  }                                                                                                             \
  at::Tensor& fn##3d_out(const at::Tensor& self, at::IntArrayRef size, Scale s0, Scale s1, Scale s2,            \
                         at::Tensor& out) {                                                                     \
    return upsample_out(mode, false, self, size, {s0, s1, s2}, out);                                            \
  }                                                                                                             \
  at::Tensor& fn##1d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,        \
                                  Scale s0, at::Tensor& out) {                                                  \
    return upsample_backward_out(mode, false, g, size, input_size, {s0}, out);                                  \
  }                                                                                                             \
  at::Tensor& fn##2d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,        \
                                  Scale s0, Scale s1, at::Tensor& out) {                                        \
    return upsample_backward_out(mode, false, g, size, input_size, {s0, s1}, out);                              \
  }                                                                                                             \
  at::Tensor& fn##3d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,        \
                                  Scale s0, Scale s1, Scale s2, at::Tensor& out) {                              \
    return upsample_backward_out(mode, false, g, size, input_size, {s0, s1, s2}, out);                          \
  }

NEAREST_KERNELS(upsample_nearest, "nearest")
NEAREST_KERNELS(upsample_nearest_exact, "nearest-exact")

at::Tensor& upsample_linear1d_out(const at::Tensor& self, at::IntArrayRef size, bool align, Scale s0,
                                  at::Tensor& out) {
  return upsample_out("linear", align, self, size, {s0}, out);
}

at::Tensor& upsample_bilinear2d_out(const at::Tensor& self, at::IntArrayRef size, bool align, Scale s0, Scale s1,
                                    at::Tensor& out) {
  return upsample_out("linear", align, self, size, {s0, s1}, out);
}

at::Tensor& upsample_trilinear3d_out(const at::Tensor& self, at::IntArrayRef size, bool align, Scale s0, Scale s1,
                                     Scale s2, at::Tensor& out) {
  return upsample_out("linear", align, self, size, {s0, s1, s2}, out);
}

at::Tensor& upsample_linear1d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,
                                           bool align, Scale s0, at::Tensor& out) {
  return upsample_backward_out("linear", align, g, size, input_size, {s0}, out);
}

at::Tensor& upsample_bilinear2d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,
                                             bool align, Scale s0, Scale s1, at::Tensor& out) {
  return upsample_backward_out("linear", align, g, size, input_size, {s0, s1}, out);
}

at::Tensor& upsample_trilinear3d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,
                                              bool align, Scale s0, Scale s1, Scale s2, at::Tensor& out) {
  return upsample_backward_out("linear", align, g, size, input_size, {s0, s1, s2}, out);
}

// ------------------------------------------- separable resize matrices ----

// PyTorch's source-coordinate scale of a dim: align_corners maps the corner
// pixels' centres onto each other; else the given scale factor, or the
// ratio of sizes.
double source_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<double>(in - 1) / (out - 1) : 0.0;
  return scale.has_value() && *scale > 0 ? 1.0 / *scale : static_cast<double>(in) / out;
}

double cubic(double x) {
  const double a = -0.75;
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// Bicubic: output o reads taps floor(src) - 1 .. + 2 (clamped to the edges)
// with the cubic convolution weights of src's fraction; src = scale * o
// (align_corners) or scale * (o + 0.5) - 0.5.
at::Tensor bicubic_matrix(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  double s = source_scale(in, out, align_corners, scale);
  at::Tensor m = at::zeros({out, in}, at::kDouble);
  auto w = m.accessor<double, 2>();
  for (int64_t o = 0; o < out; ++o) {
    double src = align_corners ? s * o : s * (o + 0.5) - 0.5;
    double base = std::floor(src), t = src - base;
    for (int64_t k = -1; k <= 2; ++k) {
      int64_t i = std::clamp<int64_t>(static_cast<int64_t>(base) + k, 0, in - 1);
      w[o][i] += cubic(k - t);
    }
  }
  return m;
}

// Antialiased bilinear: output o averages the inputs within the triangle
// filter's support around scale * (o + 0.5), widened by the scale when
// shrinking, the weights normalized to sum to 1.
at::Tensor antialiased_bilinear_matrix(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  double s = source_scale(in, out, align_corners, scale);
  double support = s >= 1 ? s : 1.0, inverse = s >= 1 ? 1.0 / s : 1.0;
  at::Tensor m = at::zeros({out, in}, at::kDouble);
  auto w = m.accessor<double, 2>();
  for (int64_t o = 0; o < out; ++o) {
    double center = s * (o + 0.5);
    int64_t first = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    int64_t last = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    double total = 0;
    for (int64_t i = first; i < last; ++i) {
      double v = std::max(0.0, 1.0 - std::abs((i - center + 0.5) * inverse));
      w[o][i] = v;
      total += v;
    }
    if (total != 0)
      for (int64_t i = first; i < last; ++i) w[o][i] /= total;
  }
  return m;
}

using ResizeMatrix = at::Tensor (*)(int64_t, int64_t, bool, std::optional<double>);

// x [..., h, w] resized to `size` by the two dims' matrices (or, for the
// backward, a gradient [..., out_h, out_w] taken back by their transposes).
at::Tensor resize_2d(ResizeMatrix matrix, const at::Tensor& x, int64_t in_h, int64_t in_w, int64_t out_h,
                     int64_t out_w, bool align_corners, Scale scales_h, Scale scales_w, bool backward) {
  auto on_device = [&](const at::Tensor& m) { return m.to(x.options()); };
  at::Tensor rows = on_device(matrix(in_h, out_h, align_corners, scales_h));
  at::Tensor cols = on_device(matrix(in_w, out_w, align_corners, scales_w));
  if (backward) return at::matmul(at::matmul(rows.t(), x), cols);
  return at::matmul(at::matmul(rows, x), cols.t());
}

template <ResizeMatrix M>
at::Tensor& resize_2d_out(const at::Tensor& self, at::IntArrayRef size, bool align, Scale s0, Scale s1,
                          at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(self.dim() == 4 && size.size() == 2, "upsample (2-d): expected a 4-d input and 2 output sizes, got ",
              self.sizes(), " and ", size);
  at::Tensor r = resize_2d(M, self, self.size(2), self.size(3), size[0], size[1], align, s0, s1, false);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

template <ResizeMatrix M>
at::Tensor& resize_2d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size, bool align,
                                   Scale s0, Scale s1, at::Tensor& grad_input) {
  OpScope s;
  at::Tensor r = resize_2d(M, g, input_size[2], input_size[3], size[0], size[1], align, s0, s1, true);
  at::native::resize_output(grad_input, input_size);
  return grad_input.copy_(r);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("reflection_pad1d.out", reflection_pad1d_out);
  m.impl("reflection_pad1d_backward.grad_input", reflection_pad1d_backward_out);
  m.impl("reflection_pad2d", reflection_pad2d);
  m.impl("reflection_pad2d.out", reflection_pad2d_out);
  m.impl("reflection_pad2d_backward", reflection_pad2d_backward);
  m.impl("reflection_pad2d_backward.grad_input", reflection_pad2d_backward_out);
  m.impl("reflection_pad3d.out", reflection_pad3d_out);
  m.impl("reflection_pad3d_backward.grad_input", reflection_pad3d_backward_out);
  m.impl("replication_pad1d.out", replication_pad1d_out);
  m.impl("replication_pad1d_backward.grad_input", replication_pad1d_backward_out);
  m.impl("replication_pad2d.out", replication_pad2d_out);
  m.impl("replication_pad2d_backward", replication_pad2d_backward);
  m.impl("replication_pad2d_backward.grad_input", replication_pad2d_backward_out);
  m.impl("replication_pad3d.out", replication_pad3d_out);
  m.impl("replication_pad3d_backward", replication_pad3d_backward);
  m.impl("replication_pad3d_backward.grad_input", replication_pad3d_backward_out);
  m.impl("upsample_nearest1d.out", upsample_nearest1d_out);
  m.impl("upsample_nearest2d.out", upsample_nearest2d_out);
  m.impl("upsample_nearest3d.out", upsample_nearest3d_out);
  m.impl("upsample_nearest1d_backward.grad_input", upsample_nearest1d_backward_out);
  m.impl("upsample_nearest2d_backward.grad_input", upsample_nearest2d_backward_out);
  m.impl("upsample_nearest3d_backward.grad_input", upsample_nearest3d_backward_out);
  m.impl("_upsample_nearest_exact1d.out", upsample_nearest_exact1d_out);
  m.impl("_upsample_nearest_exact2d.out", upsample_nearest_exact2d_out);
  m.impl("_upsample_nearest_exact3d.out", upsample_nearest_exact3d_out);
  m.impl("_upsample_nearest_exact1d_backward.grad_input", upsample_nearest_exact1d_backward_out);
  m.impl("_upsample_nearest_exact2d_backward.grad_input", upsample_nearest_exact2d_backward_out);
  m.impl("_upsample_nearest_exact3d_backward.grad_input", upsample_nearest_exact3d_backward_out);
  m.impl("upsample_linear1d.out", upsample_linear1d_out);
  m.impl("upsample_bilinear2d.out", upsample_bilinear2d_out);
  m.impl("upsample_trilinear3d.out", upsample_trilinear3d_out);
  m.impl("upsample_linear1d_backward.grad_input", upsample_linear1d_backward_out);
  m.impl("upsample_bilinear2d_backward.grad_input", upsample_bilinear2d_backward_out);
  m.impl("upsample_trilinear3d_backward.grad_input", upsample_trilinear3d_backward_out);
  m.impl("upsample_bicubic2d.out", resize_2d_out<bicubic_matrix>);
  m.impl("upsample_bicubic2d_backward.grad_input", resize_2d_backward_out<bicubic_matrix>);
  m.impl("_upsample_bilinear2d_aa.out", resize_2d_out<antialiased_bilinear_matrix>);
  m.impl("_upsample_bilinear2d_aa_backward.grad_input", resize_2d_backward_out<antialiased_bilinear_matrix>);
}
