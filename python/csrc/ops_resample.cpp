// Resampling: reflection and replication padding (1-3d), and nearest,
// nearest-exact and (bi/tri)linear upsampling (1-3d), with their backwards,
// composed from runtime ops.
//
// Padding and upsampling are gathers: each padded or resized dim reads its
// input through one index vector (index_select), and the backward adds the
// gradient back at the same indices (scatter add), so the two always agree.
// Padding builds its indices on the device (arange, abs, clamp: exact integer
// math); upsampling builds them, and bilinear's weights, on the host with
// PyTorch's float rounding, so the taps match the CPU kernels bit for bit.

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

at::ScalarType type_of(const Handle& h) { return scalar_type(dtype_of(h)); }

// ------------------------------------------------------- gathers by dim ----

// x with `index` (1-D, int64) selected along d: the forward of every kernel below.
Handle take_along(const Handle& x, int64_t d, const Handle& index) { return index_select(x, d, index); }

// The transpose of take_along: g's slices along d added into a zero tensor
// whose dim d has `size` entries, each at its index.
Handle untake_along(const Handle& g, int64_t d, const Handle& index, int64_t size, int64_t device) {
  std::vector<int64_t> shape = dims_of(g);
  std::vector<int64_t> col(shape.size(), 1);
  col[d] = shape[d];
  Handle wide = expand(reshape(index, col), shape);
  std::vector<int64_t> zshape = shape;
  zshape[d] = size;
  return scatter(full(device, zshape, 0, type_of(g)), d, wide, g, /*add=*/true);
}

// ---------------------------------------------------------------- padding ----

std::string shape_str(at::IntArrayRef s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

// The shape of `self` with its last k dims padded, after PyTorch's checks
// (with PyTorch's messages, prefixed by the op's name). padding holds k
// (before, after) pairs, the last dim's first; negative ones crop.
std::vector<int64_t> padded_shape(const char* op, int64_t k, const at::Tensor& self, at::IntArrayRef padding,
                                  bool reflect) {
  TORCH_CHECK(static_cast<int64_t>(padding.size()) == 2 * k, op, "(): padding size is expected to be ", 2 * k,
              ", but got: ", padding.size());
  int64_t rank = self.dim();
  bool ok = rank == k + 1 || rank == k + 2;
  for (int64_t d = rank - k - 1; ok && d < rank; d++) ok = d < 0 || self.size(d) != 0;
  TORCH_CHECK(ok, op, "(): Expected ", k + 1, "D or ", k + 2,
              "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
              self.sizes());
  std::vector<int64_t> shape = self.sizes().vec();
  for (int64_t i = 0; i < k; i++) {
    int64_t d = rank - 1 - i, before = padding[2 * i], after = padding[2 * i + 1];
    if (reflect)
      TORCH_CHECK(before < self.size(d) && after < self.size(d), op,
                  "(): Argument #4: Padding size should be less than the corresponding input dimension, but got: "
                  "padding (",
                  before, ", ", after, ") at dimension ", d, " of input ", self.sizes());
    shape[d] = self.size(d) + before + after;
  }
  for (int64_t i = 0; i < k; i++) {
    int64_t d = rank - 1 - i;
    TORCH_CHECK(shape[d] >= 1, op, "(): input of shape ", self.sizes(), " is too small for padding ", padding,
                ": the calculated output shape ", shape_str(shape), " must be >= 1 in every padded dimension");
  }
  return shape;
}

// Where output position j of a padded dim reads: input position j - before,
// mirrored about the first and last elements (reflect) or clamped to them.
Handle pad_index(int64_t device, int64_t size, int64_t before, int64_t after, bool reflect) {
  Handle i = arange(device, static_cast<double>(-before), static_cast<double>(size + after), 1, at::kLong);
  if (!reflect) return clamp(i, at::Scalar(int64_t{0}), at::Scalar(size - 1));
  // For -(size-1) <= i <= 2(size-1): last - |last - |i||, with last = size - 1.
  Handle a = unary("abs", i);
  Handle b = unary("abs", binary_scalar("sub", a, size - 1, /*reversed=*/true));
  return binary_scalar("sub", b, size - 1, /*reversed=*/true);
}

at::Tensor& pad_out(const char* op, int64_t k, const at::Tensor& self, at::IntArrayRef padding, bool reflect,
                    at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, padded_shape(op, k, self, padding, reflect));
  if (out.numel() == 0) return out;
  Handle x = read(self);
  int64_t dev = device_index(self);
  for (int64_t i = 0; i < k; i++) {
    int64_t d = self.dim() - 1 - i;
    if (padding[2 * i] == 0 && padding[2 * i + 1] == 0) continue;
    x = take_along(x, d, pad_index(dev, self.size(d), padding[2 * i], padding[2 * i + 1], reflect));
  }
  write(out, x);
  return out;
}

at::Tensor& pad_backward_out(const char* op, int64_t k, const at::Tensor& grad_output, const at::Tensor& self,
                             at::IntArrayRef padding, bool reflect, at::Tensor& grad_input) {
  OpScope s;
  std::vector<int64_t> shape = padded_shape(op, k, self, padding, reflect);
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(shape), op, "(): expected grad_output of shape ",
              shape_str(shape), " (input ", self.sizes(), " padded by ", padding, "), got ", grad_output.sizes());
  at::native::resize_output(grad_input, self.sizes());
  if (grad_input.numel() == 0) return grad_input;
  Handle g = read(grad_output);
  int64_t dev = device_index(self);
  for (int64_t i = 0; i < k; i++) {
    int64_t d = self.dim() - 1 - i, size = self.size(d);
    if (padding[2 * i] == 0 && padding[2 * i + 1] == 0) continue;
    g = untake_along(g, d, pad_index(dev, size, padding[2 * i], padding[2 * i + 1], reflect), size, dev);
  }
  write(grad_input, g);
  return grad_input;
}

// The registered forms. Structured ops reach the out= form from their
// functional one; the others register both.
#define PAD_KERNELS(name, k, reflect)                                                                           \
  at::Tensor& name##_out(const at::Tensor& self, at::IntArrayRef padding, at::Tensor& out) {                     \
    return pad_out(#name, k, self, padding, reflect, out);                                                      \
  }                                                                                                             \
  [[maybe_unused]] at::Tensor name(const at::Tensor& self, at::IntArrayRef padding) {                           \
    at::Tensor out = at::empty({0}, self.options());                                                            \
    return pad_out(#name, k, self, padding, reflect, out);                                                      \
  }                                                                                                             \
  at::Tensor& name##_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef padding, \
                                  at::Tensor& grad_input) {                                                     \
    return pad_backward_out(#name "_backward", k, grad_output, self, padding, reflect, grad_input);             \
  }                                                                                                             \
  [[maybe_unused]] at::Tensor name##_backward(const at::Tensor& grad_output, const at::Tensor& self,            \
                                              at::IntArrayRef padding) {                                        \
    at::Tensor grad_input = at::empty({0}, grad_output.options());                                              \
    return pad_backward_out(#name "_backward", k, grad_output, self, padding, reflect, grad_input);              \
  }

PAD_KERNELS(reflection_pad1d, 1, true)
PAD_KERNELS(reflection_pad2d, 2, true)
PAD_KERNELS(reflection_pad3d, 3, true)
PAD_KERNELS(replication_pad1d, 1, false)
PAD_KERNELS(replication_pad2d, 2, false)
PAD_KERNELS(replication_pad3d, 3, false)

// ------------------------------------------------------------ upsampling ----
// Each resized spatial dim (the dims after N and C) is one gather, the last
// dim first as the CPU kernels accumulate; the backward goes in reverse.

using Scales = std::vector<std::optional<double>>;

// PyTorch's ratio of input to output positions: 1 / scale when the caller
// gave a positive scale, else in / out, rounded to the accumulation type T.
template <typename T>
T source_ratio(int64_t in, int64_t out, std::optional<double> scale) {
  if (scale.has_value() && *scale > 0) return static_cast<T>(1.0 / *scale);
  return static_cast<T>(in) / static_cast<T>(out);
}

Handle upload_longs(const std::vector<int64_t>& v, int64_t device) {
  return upload(at::tensor(at::ArrayRef<int64_t>(v), at::TensorOptions().dtype(at::kLong)), device);
}

// Checks the sizes; returns the output's shape (N, C, output_size...).
std::vector<int64_t> upsampled_shape(const char* op, at::IntArrayRef input_size, at::IntArrayRef output_size) {
  size_t k = output_size.size();
  TORCH_CHECK(input_size.size() == k + 2, op, "(): expected a ", k + 2, "-D input (N, C and ", k,
              " spatial dims), got one of shape ", input_size);
  for (size_t i = 0; i < k; i++)
    TORCH_CHECK(input_size[i + 2] > 0 && output_size[i] > 0, op,
                "(): input and output sizes should be greater than 0, but got input of shape ", input_size,
                " and output_size ", output_size);
  std::vector<int64_t> shape{input_size[0], input_size[1]};
  shape.insert(shape.end(), output_size.begin(), output_size.end());
  return shape;
}

// Source position of each output position of a nearest resize: floor(j * r)
// (exact: floor((j + 1/2) r)), clamped to the input, in float as on CPU.
std::vector<int64_t> nearest_source(int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  std::vector<int64_t> idx(out);
  float r = source_ratio<float>(in, out, scale);
  for (int64_t j = 0; j < out; j++) {
    if (out == in) {
      idx[j] = j;
    } else if (!exact && out == 2 * in) {
      idx[j] = j / 2;
    } else {
      float src = exact ? static_cast<float>((static_cast<double>(j) + 0.5) * r) : static_cast<float>(j) * r;
      idx[j] = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    }
  }
  return idx;
}

at::Tensor& nearest_out(const char* op, const at::Tensor& self, at::IntArrayRef output_size, const Scales& scales,
                        bool exact, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, upsampled_shape(op, self.sizes(), output_size));
  if (out.numel() == 0) return out;
  int64_t dev = device_index(self), k = static_cast<int64_t>(output_size.size());
  Handle x = read(self);
  for (int64_t i = k - 1; i >= 0; i--) {
    int64_t in = self.size(i + 2);
    if (output_size[i] != in)
      x = take_along(x, i + 2, upload_longs(nearest_source(in, output_size[i], scales[i], exact), dev));
  }
  write(out, x);
  return out;
}

// The common start of an upsampling backward: checks grad_output's shape and
// sizes grad_input; false when there is nothing to compute.
bool start_backward(const char* op, const at::Tensor& grad_output, at::IntArrayRef output_size,
                    at::IntArrayRef input_size, at::Tensor& grad_input) {
  std::vector<int64_t> shape = upsampled_shape(op, input_size, output_size);
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(shape), op, "(): expected grad_output of shape ",
              shape_str(shape), ", got ", grad_output.sizes());
  at::native::resize_output(grad_input, input_size);
  return grad_input.numel() > 0;
}

at::Tensor& nearest_backward_out(const char* op, const at::Tensor& grad_output, at::IntArrayRef output_size,
                                 at::IntArrayRef input_size, const Scales& scales, bool exact,
                                 at::Tensor& grad_input) {
  OpScope s;
  if (!start_backward(op, grad_output, output_size, input_size, grad_input)) return grad_input;
  int64_t dev = device_index(grad_output);
  Handle g = read(grad_output);
  for (size_t i = 0; i < output_size.size(); i++) {
    int64_t in = input_size[i + 2];
    if (output_size[i] != in)
      g = untake_along(g, i + 2, upload_longs(nearest_source(in, output_size[i], scales[i], exact), dev), in, dev);
  }
  write(grad_input, g);
  return grad_input;
}

// Linear interpolation along one dim: output j is w0[j] x[i0[j]] + w1[j] x[i1[j]].
struct Taps {
  Handle i0, i1, w0, w1;  // index vectors, and weights shaped to broadcast along the dim
};

// PyTorch's linear taps: the source position is r j (align_corners) or
// r (j + 1/2) - 1/2 clamped at 0, in the accumulation type T; the lower
// neighbour is its floor and the upper one the next (the same at the edge).
template <typename T>
Taps linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale, int64_t trailing,
                 at::ScalarType dtype, int64_t device) {
  std::vector<int64_t> i0(out), i1(out);
  std::vector<T> w0(out), w1(out);
  T r = align_corners ? (out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0))
                      : source_ratio<T>(in, out, scale);
  for (int64_t j = 0; j < out; j++) {
    if (in == out) {
      i0[j] = i1[j] = j;
      w0[j] = 1;
      w1[j] = 0;
      continue;
    }
    T src = align_corners ? r * static_cast<T>(j) : r * (static_cast<T>(j) + static_cast<T>(0.5)) - static_cast<T>(0.5);
    if (!align_corners && src < 0) src = 0;
    i0[j] = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    w1[j] = std::min(std::max(src - static_cast<T>(i0[j]), T(0)), T(1));
    w0[j] = T(1) - w1[j];
    i1[j] = i0[j] + (i0[j] < in - 1 ? 1 : 0);
  }
  std::vector<int64_t> col(trailing + 1, 1);
  col[0] = out;
  auto weights = [&](const std::vector<T>& w) {
    at::Tensor t = at::tensor(at::ArrayRef<T>(w), at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value));
    return cast(reshape(upload(t, device), col), dtype);
  };
  return {upload_longs(i0, device), upload_longs(i1, device), weights(w0), weights(w1)};
}

// The taps of dim d of a rank-`rank` tensor like `like` (float64 tensors
// accumulate in double, the others in float).
Taps taps_for(const at::Tensor& like, int64_t d, int64_t rank, int64_t in, int64_t out, bool align_corners,
              std::optional<double> scale) {
  at::ScalarType t = like.scalar_type();
  if (t == at::kDouble) return linear_taps<double>(in, out, align_corners, scale, rank - 1 - d, t, device_index(like));
  return linear_taps<float>(in, out, align_corners, scale, rank - 1 - d, t, device_index(like));
}

Handle interpolate(const Handle& x, int64_t d, const Taps& t) {
  return add(mul(take_along(x, d, t.i0), t.w0), mul(take_along(x, d, t.i1), t.w1));
}

// The transpose of interpolate: both weighted gradients added back.
Handle uninterpolate(const Handle& g, int64_t d, const Taps& t, int64_t size, int64_t device) {
  Handle lo = untake_along(mul(g, t.w0), d, t.i0, size, device);
  return add(lo, untake_along(mul(g, t.w1), d, t.i1, size, device));
}

at::Tensor& linear_out(const char* op, const at::Tensor& self, at::IntArrayRef output_size, bool align_corners,
                       const Scales& scales, at::Tensor& out) {
  OpScope s;
  at::native::resize_output(out, upsampled_shape(op, self.sizes(), output_size));
  if (out.numel() == 0) return out;
  int64_t k = static_cast<int64_t>(output_size.size());
  Handle x = read(self);
  for (int64_t i = k - 1; i >= 0; i--) {
    int64_t d = i + 2;
    if (output_size[i] != self.size(d))
      x = interpolate(x, d, taps_for(self, d, k + 2, self.size(d), output_size[i], align_corners, scales[i]));
  }
  write(out, x);
  return out;
}

at::Tensor& linear_backward_out(const char* op, const at::Tensor& grad_output, at::IntArrayRef output_size,
                                at::IntArrayRef input_size, bool align_corners, const Scales& scales,
                                at::Tensor& grad_input) {
  OpScope s;
  if (!start_backward(op, grad_output, output_size, input_size, grad_input)) return grad_input;
  int64_t dev = device_index(grad_output), k = static_cast<int64_t>(output_size.size());
  Handle g = read(grad_output);
  for (int64_t i = 0; i < k; i++) {
    int64_t d = i + 2, in = input_size[d];
    if (output_size[i] != in)
      g = uninterpolate(g, d, taps_for(grad_output, d, k + 2, in, output_size[i], align_corners, scales[i]), in, dev);
  }
  write(grad_input, g);
  return grad_input;
}

using Scale = std::optional<double>;

// The registered forms, one per dimensionality: 1-d ops take one scale,
// 2-d ones (h, w), 3-d ones (d, h, w).
#define NEAREST_KERNELS(fn, op, exact)                                                                          \
  at::Tensor& fn##1d_out(const at::Tensor& self, at::IntArrayRef size, Scale s0, at::Tensor& out) {             \
    return nearest_out(op "1d", self, size, {s0}, exact, out);                                                  \
  }                                                                                                             \
  at::Tensor& fn##2d_out(const at::Tensor& self, at::IntArrayRef size, Scale s0, Scale s1, at::Tensor& out) {   \
    return nearest_out(op "2d", self, size, {s0, s1}, exact, out);                                              \
  }                                                                                                             \
  at::Tensor& fn##3d_out(const at::Tensor& self, at::IntArrayRef size, Scale s0, Scale s1, Scale s2,            \
                         at::Tensor& out) {                                                                     \
    return nearest_out(op "3d", self, size, {s0, s1, s2}, exact, out);                                          \
  }                                                                                                             \
  at::Tensor& fn##1d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,        \
                                  Scale s0, at::Tensor& out) {                                                  \
    return nearest_backward_out(op "1d_backward", g, size, input_size, {s0}, exact, out);                       \
  }                                                                                                             \
  at::Tensor& fn##2d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,        \
                                  Scale s0, Scale s1, at::Tensor& out) {                                        \
    return nearest_backward_out(op "2d_backward", g, size, input_size, {s0, s1}, exact, out);                   \
  }                                                                                                             \
  at::Tensor& fn##3d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,        \
                                  Scale s0, Scale s1, Scale s2, at::Tensor& out) {                              \
    return nearest_backward_out(op "3d_backward", g, size, input_size, {s0, s1, s2}, exact, out);               \
  }

NEAREST_KERNELS(upsample_nearest, "upsample_nearest", false)
NEAREST_KERNELS(upsample_nearest_exact, "_upsample_nearest_exact", true)

at::Tensor& upsample_linear1d_out(const at::Tensor& self, at::IntArrayRef size, bool align, Scale s0,
                                  at::Tensor& out) {
  return linear_out("upsample_linear1d", self, size, align, {s0}, out);
}

at::Tensor& upsample_bilinear2d_out(const at::Tensor& self, at::IntArrayRef size, bool align, Scale s0, Scale s1,
                                    at::Tensor& out) {
  return linear_out("upsample_bilinear2d", self, size, align, {s0, s1}, out);
}

at::Tensor& upsample_trilinear3d_out(const at::Tensor& self, at::IntArrayRef size, bool align, Scale s0, Scale s1,
                                     Scale s2, at::Tensor& out) {
  return linear_out("upsample_trilinear3d", self, size, align, {s0, s1, s2}, out);
}

at::Tensor& upsample_linear1d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,
                                           bool align, Scale s0, at::Tensor& out) {
  return linear_backward_out("upsample_linear1d_backward", g, size, input_size, align, {s0}, out);
}

at::Tensor& upsample_bilinear2d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,
                                             bool align, Scale s0, Scale s1, at::Tensor& out) {
  return linear_backward_out("upsample_bilinear2d_backward", g, size, input_size, align, {s0, s1}, out);
}

at::Tensor& upsample_trilinear3d_backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input_size,
                                              bool align, Scale s0, Scale s1, Scale s2, at::Tensor& out) {
  return linear_backward_out("upsample_trilinear3d_backward", g, size, input_size, align, {s0, s1, s2}, out);
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
}
