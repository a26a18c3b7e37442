// Convolutions (plain and transposed, any groups), pooling and batch norm:
// what CNNs need. A convolution is one StableHLO convolution; its gradients
// are convolutions too (the runtime builds them). Max pooling returns the
// flat index of each maximum, so its backward is one scatter-add.
#include <ATen/OpMathType.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <array>

#include "backend.h"

namespace etpu {
namespace {

struct ConvArgs {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  size_t nspatial() const { return stride.size(); }
};

ConvArgs conv_args(const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                   at::IntArrayRef dilation, int64_t groups) {
  size_t n = weight.dim() - 2;
  auto expand = [n](at::IntArrayRef v, int64_t fill) {
    std::vector<int64_t> out(v.begin(), v.end());
    if (out.size() == 1 && n > 1) out.assign(n, out[0]);
    if (out.empty()) out.assign(n, fill);
    TORCH_CHECK(out.size() == n, "convolution: expected ", n, " values per spatial dim, got ", v);
    return out;
  };
  return {expand(stride, 1), expand(padding, 0), expand(dilation, 1), groups};
}

Handle conv(const Handle& x, const Handle& w, const ConvArgs& a) {
  Handle h;
  check(etpu_conv(x.get(), w.get(), a.stride.data(), a.padding.data(), a.dilation.data(), a.nspatial(), a.groups,
                  origin(), h.out()));
  return h;
}

Handle conv_grad_input(const Handle& g, const Handle& w, at::IntArrayRef input_sizes, const ConvArgs& a) {
  Handle h;
  check(etpu_conv_backward_input(g.get(), w.get(), input_sizes.data(), input_sizes.size(), a.stride.data(),
                                 a.padding.data(), a.dilation.data(), a.nspatial(), a.groups, origin(), h.out()));
  return h;
}

Handle conv_grad_weight(const Handle& g, const Handle& x, at::IntArrayRef weight_sizes, const ConvArgs& a) {
  Handle h;
  check(etpu_conv_backward_weight(g.get(), x.get(), weight_sizes.data(), weight_sizes.size(), a.stride.data(),
                                  a.padding.data(), a.dilation.data(), a.nspatial(), a.groups, origin(), h.out()));
  return h;
}

// Output sizes of a transposed convolution of `input` by `weight`.
std::vector<int64_t> transposed_sizes(const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                                      at::IntArrayRef output_padding) {
  std::vector<int64_t> out{input.size(0), weight.size(1) * a.groups};
  for (size_t i = 0; i < a.nspatial(); i++) {
    int64_t op = output_padding.empty() ? 0 : output_padding[output_padding.size() == 1 ? 0 : i];
    out.push_back((input.size(i + 2) - 1) * a.stride[i] - 2 * a.padding[i] + a.dilation[i] * (weight.size(i + 2) - 1) +
                  op + 1);
  }
  return out;
}

// bias [C] as [1, C, 1, ...] for a rank-`rank` result.
Handle bias_view(const at::Tensor& bias, int64_t rank) {
  std::vector<int64_t> shape(rank, 1);
  shape[1] = bias.size(0);
  return reshape(read(bias), shape);
}

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
  OpScope s;
  TORCH_CHECK(input.dim() == weight.dim() && input.dim() >= 3, "convolution: expected a batched input of rank ",
              weight.dim(), " for a weight of shape ", weight.sizes(), ", got input of shape ", input.sizes());
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "convolution: input (", input.scalar_type(),
              ") and weight (", weight.scalar_type(), ") must have the same dtype");
  ConvArgs a = conv_args(weight, stride, padding, dilation, groups);
  Handle y = transposed ? conv_grad_input(read(input), read(weight), transposed_sizes(input, weight, a, output_padding), a)
                        : conv(read(input), read(weight), a);
  if (bias.has_value() && bias->defined()) y = add(y, bias_view(*bias, input.dim()));
  at::Tensor out = at::empty(dims_of(y), input.options());
  write(out, y);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  OpScope s;
  ConvArgs a = conv_args(weight, stride, padding, dilation, groups);
  Handle g = read(grad_output);
  at::Tensor gi, gw, gb;
  if (output_mask[0]) {
    // transposed: y = conv_grad_input(x, w), so dx = conv(dy, w) (its
    // leading part: an output padding of a stride or more makes it longer).
    Handle h = transposed ? conv(g, read(weight), a) : conv_grad_input(g, read(weight), input.sizes(), a);
    std::vector<int64_t> got = dims_of(h);
    gi = at::empty(input.sizes(), input.options());
    if (transposed && at::IntArrayRef(got) != input.sizes()) {
      at::Tensor whole = at::empty(got, input.options());
      write(whole, h);
      for (int64_t d = 2; d < input.dim(); d++) whole = whole.narrow(d, 0, input.size(d));
      gi.copy_(whole);
    } else {
      write(gi, h);
    }
  }
  if (output_mask[1]) {
    // transposed: <dy, y> = <x, conv(dy, w)>, so dw is conv's weight gradient
    // with x as the output gradient and dy as the input.
    Handle h = transposed ? conv_grad_weight(read(input), g, weight.sizes(), a)
                          : conv_grad_weight(g, read(input), weight.sizes(), a);
    gw = at::empty(weight.sizes(), weight.options());
    write(gw, h);
  }
  if (output_mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < grad_output.dim(); d++) dims.push_back(d);
    gb = at::empty({grad_output.size(1)}, grad_output.options());
    write(gb, reduce("sum", g, dims, false));
  }
  return {gi, gw, gb};
}

// ---------------------------------------------------------------- pooling ----

std::vector<int64_t> pool_arg(at::IntArrayRef v, size_t n, at::IntArrayRef fallback, const char* what) {
  if (v.empty()) return fallback.vec();
  std::vector<int64_t> out(v.begin(), v.end());
  if (out.size() == 1) out.assign(n, out[0]);
  TORCH_CHECK(out.size() == n, "pooling: ", what, " must have 1 or ", n, " values, got ", v);
  return out;
}

// Max pooling over the last `n` dims (2 or 3), with the flat index of each
// window's maximum within its (d,) h, w plane, as PyTorch returns it.
std::tuple<at::Tensor&, at::Tensor&> max_pool_with_indices_out(size_t n, const at::Tensor& self,
                                                               at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                               at::IntArrayRef padding, at::IntArrayRef dilation,
                                                               bool ceil_mode, at::Tensor& out, at::Tensor& indices) {
  OpScope s;
  TORCH_CHECK(self.dim() == static_cast<int64_t>(n) + 1 || self.dim() == static_cast<int64_t>(n) + 2, "max_pool", n,
              "d: expected a ", n + 1, "-d or ", n + 2, "-d input, got sizes ", self.sizes());
  auto k = pool_arg(kernel_size, n, {}, "kernel_size");
  auto st = pool_arg(stride, n, k, "stride");
  auto p = pool_arg(padding, n, std::vector<int64_t>(n, 0), "padding");
  auto d = pool_arg(dilation, n, std::vector<int64_t>(n, 1), "dilation");
  Handle values, idx;
  check(etpu_max_pool(read(self).get(), k.data(), st.data(), p.data(), d.data(), n, ceil_mode, origin(), values.out(),
                      idx.out()));
  at::native::resize_output(out, dims_of(values));
  at::native::resize_output(indices, dims_of(idx));
  write(out, values);
  write(indices, idx);
  return {out, indices};
}

template <size_t N>
std::tuple<at::Tensor&, at::Tensor&> max_pool_nd_with_indices_out(const at::Tensor& self, at::IntArrayRef kernel_size,
                                                                  at::IntArrayRef stride, at::IntArrayRef padding,
                                                                  at::IntArrayRef dilation, bool ceil_mode,
                                                                  at::Tensor& out, at::Tensor& indices) {
  return max_pool_with_indices_out(N, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices);
}

std::tuple<at::Tensor, at::Tensor> max_pool3d_with_indices(const at::Tensor& self, at::IntArrayRef kernel_size,
                                                           at::IntArrayRef stride, at::IntArrayRef padding,
                                                           at::IntArrayRef dilation, bool ceil_mode) {
  at::Tensor out = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(at::kLong));
  max_pool_with_indices_out(3, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices);
  return {out, indices};
}

// The gradient lands where each window's maximum was: a scatter-add into the
// flattened spatial plane of the last `n` dims.
at::Tensor& max_pool_backward_out(size_t n, const at::Tensor& grad_output, const at::Tensor& self,
                                  const at::Tensor& indices, at::Tensor& grad_input) {
  OpScope s;
  int64_t plane = 1, outs = 1;
  for (size_t i = 1; i <= n; ++i) {
    plane *= self.size(-static_cast<int64_t>(i));
    outs *= grad_output.size(-static_cast<int64_t>(i));
  }
  int64_t planes = self.numel() / plane;
  Handle zeros = full(device_index(self), {planes, plane}, 0, self.scalar_type());
  Handle g = reshape(read(grad_output), {planes, outs});
  Handle idx = reshape(read(indices), {planes, outs});
  at::native::resize_output(grad_input, self.sizes());
  write(grad_input, reshape(scatter(zeros, 1, idx, g, /*add=*/true), self.sizes()));
  return grad_input;
}

template <size_t N>
at::Tensor& max_pool_nd_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef,
                                     at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, bool, const at::Tensor& indices,
                                     at::Tensor& grad_input) {
  return max_pool_backward_out(N, grad_output, self, indices, grad_input);
}

at::Tensor max_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel_size,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                               bool ceil_mode, const at::Tensor& indices) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return max_pool_backward_out(3, grad_output, self, indices, grad_input);
}

Handle avg_pool(const Handle& x, const std::vector<int64_t>& k, const std::vector<int64_t>& st,
                const std::vector<int64_t>& p, bool ceil_mode, bool count_include_pad, int64_t divisor) {
  Handle h;
  check(etpu_avg_pool(x.get(), k.data(), st.data(), p.data(), k.size(), ceil_mode, count_include_pad, divisor,
                      origin(), h.out()));
  return h;
}

// Average pooling over the last `n` dims (2 or 3).
at::Tensor& avg_pool_out(size_t n, const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                         at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                         std::optional<int64_t> divisor_override, at::Tensor& out) {
  OpScope s;
  auto k = pool_arg(kernel_size, n, {}, "kernel_size");
  auto st = pool_arg(stride, n, k, "stride");
  auto p = pool_arg(padding, n, std::vector<int64_t>(n, 0), "padding");
  write(out, avg_pool(read(self), k, st, p, ceil_mode, count_include_pad, divisor_override.value_or(0)));
  return out;
}

template <size_t N>
at::Tensor& avg_pool_nd_out(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                            at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                            std::optional<int64_t> divisor_override, at::Tensor& out) {
  return avg_pool_out(N, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out);
}

// The runtime's Tensor::avg_pool_backward (divisors from pooling ones, a
// transposed convolution of ones, ceil mode's overhang cropped): one call.
at::Tensor& avg_pool_backward_out(size_t n, const at::Tensor& grad_output, const at::Tensor& self,
                                  at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override,
                                  at::Tensor& grad_input) {
  OpScope s;
  auto k = pool_arg(kernel_size, n, {}, "kernel_size");
  auto st = pool_arg(stride, n, k, "stride");
  auto p = pool_arg(padding, n, std::vector<int64_t>(n, 0), "padding");
  Handle h;
  check(etpu_avg_pool_backward(read(grad_output).get(), self.sizes().data(), self.dim(), k.data(), st.data(), p.data(),
                               k.size(), ceil_mode, count_include_pad, divisor_override.value_or(0), origin(),
                               h.out()));
  at::native::resize_output(grad_input, self.sizes());
  write(grad_input, h);
  return grad_input;
}

template <size_t N>
at::Tensor& avg_pool_nd_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                     at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                     bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override,
                                     at::Tensor& grad_input) {
  return avg_pool_backward_out(N, grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                               divisor_override, grad_input);
}

// ------------------------------------------------------- im2col, col2im ----
//
// F.unfold and F.fold: each sliding block's elements gathered from (or added
// back into) the zero-padded, flattened plane at indices built on the device.
// Values are moved, never multiplied: exact, and a NaN stays where it was.

struct Blocks {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
  int64_t oh, ow;  // blocks along each dim
};

Blocks blocks(const char* op, int64_t h, int64_t w, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
              at::IntArrayRef padding, at::IntArrayRef stride) {
  TORCH_CHECK(kernel_size.size() == 2 && dilation.size() == 2 && padding.size() == 2 && stride.size() == 2, op,
              ": kernel_size, dilation, padding and stride must have 2 values each");
  Blocks b{kernel_size[0], kernel_size[1], dilation[0], dilation[1], padding[0], padding[1], stride[0], stride[1], 0, 0};
  TORCH_CHECK(b.kh > 0 && b.kw > 0, op, ": kernel size should be greater than zero, but got kernel_height: ", b.kh,
              " kernel_width: ", b.kw);
  TORCH_CHECK(b.sh > 0 && b.sw > 0, op, ": stride should be greater than zero, but got stride_height: ", b.sh,
              " stride_width: ", b.sw);
  TORCH_CHECK(b.dh > 0 && b.dw > 0, op, ": dilation should be greater than zero, but got dilation_height: ", b.dh,
              " dilation_width: ", b.dw);
  TORCH_CHECK(b.ph >= 0 && b.pw >= 0, op, ": padding should be non-negative, but got pad_height: ", b.ph,
              " pad_width: ", b.pw);
  b.oh = (h + 2 * b.ph - (b.dh * (b.kh - 1) + 1)) / b.sh + 1;
  b.ow = (w + 2 * b.pw - (b.dw * (b.kw - 1) + 1)) / b.sw + 1;
  TORCH_CHECK(b.oh >= 1 && b.ow >= 1, "Given input with spatial size (", h, ", ", w, "), kernel_size=(", b.kh, ", ",
              b.kw, "), dilation=(", b.dh, ", ", b.dw, "), padding=(", b.ph, ", ", b.pw,
              "), calculated shape of the array of sliding blocks as (", b.oh, ", ", b.ow,
              "), but its components must be at least one.");
  return b;
}

// [kh*kw*oh*ow] indices into the padded plane, flattened: block (y, x)'s
// element (i, j) is at row y*sh + i*dh, column x*sw + j*dw.
at::Tensor block_indices(const Blocks& b, int64_t padded_w, const at::Tensor& like) {
  auto longs = like.options().dtype(at::kLong);
  at::Tensor i = at::arange(b.kh, longs).view({b.kh, 1, 1, 1});
  at::Tensor j = at::arange(b.kw, longs).view({1, b.kw, 1, 1});
  at::Tensor y = at::arange(b.oh, longs).view({1, 1, b.oh, 1});
  at::Tensor x = at::arange(b.ow, longs).view({1, 1, 1, b.ow});
  at::Tensor rows = y * b.sh + i * b.dh, cols = x * b.sw + j * b.dw;
  return (rows * padded_w + cols).reshape({-1});
}

at::Tensor unfold_blocks(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  OpScope s;
  TORCH_CHECK((self.dim() == 3 || self.dim() == 4) && self.size(-1) > 0 && self.size(-2) > 0 && self.size(-3) > 0,
              "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
              "input, but got: ", self.sizes());
  const bool batched = self.dim() == 4;
  at::Tensor x = batched ? self : self.unsqueeze(0);
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  Blocks b = blocks("im2col", h, w, kernel_size, dilation, padding, stride);
  at::Tensor padded = at::constant_pad_nd(x, {b.pw, b.pw, b.ph, b.ph}, 0);
  int64_t padded_w = w + 2 * b.pw;
  // Explicit sizes: an empty batch makes -1 ambiguous.
  at::Tensor plane = padded.reshape({n, c, (h + 2 * b.ph) * padded_w});
  at::Tensor cols = at::index_select(plane, 2, block_indices(b, padded_w, self)).reshape({n, c * b.kh * b.kw, b.oh * b.ow});
  return batched ? cols : cols.squeeze(0);
}

at::Tensor& im2col_out(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                       at::IntArrayRef padding, at::IntArrayRef stride, at::Tensor& out) {
  at::Tensor cols = unfold_blocks(self, kernel_size, dilation, padding, stride);
  at::native::resize_output(out, cols.sizes());
  return out.copy_(cols);
}

at::Tensor fold_blocks(const at::Tensor& self, c10::SymIntArrayRef output_size_sym, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  OpScope s;
  at::IntArrayRef output_size = C10_AS_INTARRAYREF_SLOW(output_size_sym);
  TORCH_CHECK(output_size.size() == 2, "col2im: output_size must have 2 values, got ", output_size);
  TORCH_CHECK((self.dim() == 2 || self.dim() == 3) && self.size(-1) > 0 && self.size(-2) > 0,
              "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for "
              "input, but got: ", self.sizes());
  const bool batched = self.dim() == 3;
  at::Tensor cols = batched ? self : self.unsqueeze(0);
  int64_t h = output_size[0], w = output_size[1];
  Blocks b = blocks("col2im", h, w, kernel_size, dilation, padding, stride);
  int64_t per_block = b.kh * b.kw;
  TORCH_CHECK(cols.size(1) % per_block == 0, "Expected size of input's dimension 1 to be divisible by the product of ",
              "kernel_size, but got input.size(1)=", cols.size(1), " and kernel_size=(", b.kh, ", ", b.kw, ")");
  TORCH_CHECK(cols.size(2) == b.oh * b.ow, "Given output_size=(", h, ", ", w, "), kernel_size=(", b.kh, ", ", b.kw,
              "), dilation=(", b.dh, ", ", b.dw, "), padding=(", b.ph, ", ", b.pw, "), stride=(", b.sh, ", ", b.sw,
              "), expected size of input's dimension 2 to match the calculated number of sliding blocks ", b.oh,
              " * ", b.ow, " = ", b.oh * b.ow, ", but got input.size(2)=", cols.size(2), ".");
  int64_t n = cols.size(0), c = cols.size(1) / per_block;
  int64_t padded_h = h + 2 * b.ph, padded_w = w + 2 * b.pw;
  at::Tensor plane = at::zeros({n, c, padded_h * padded_w}, cols.options());
  plane.index_add_(2, block_indices(b, padded_w, cols), cols.reshape({n, c, per_block * b.oh * b.ow}));
  at::Tensor image = plane.reshape({n, c, padded_h, padded_w})
                         .narrow(2, b.ph, h)
                         .narrow(3, b.pw, w)
                         .contiguous();
  return batched ? image : image.squeeze(0);
}

// -------------------------------------------------------- adaptive pooling ----
//
// Adaptive average pooling of the last N (2 or 3) dims to `output_size`:
// output index i of a dim averages input [floor(i*in/out), ceil((i+1)*in/out)).
// When the sizes divide, that is average pooling with kernel = stride =
// in/out (exact, the runtime's avg_pool); else each dim is averaged by a
// matrix product with its [out, in] averaging matrix, in float32, built on
// the device. (Global pooling is PyTorch's mean and never reaches here.)

at::Tensor averaging_matrix(int64_t in, int64_t out, const at::Tensor& like) {
  auto longs = like.options().dtype(at::kLong);
  at::Tensor i = at::arange(out, longs).unsqueeze(1);
  at::Tensor start = at::floor_divide(i * in, out);
  at::Tensor end = at::floor_divide((i + 1) * in + (out - 1), out);
  at::Tensor j = at::arange(in, longs).unsqueeze(0);
  at::Tensor inside = at::logical_and(j >= start, j < end);
  return inside.to(at::kFloat) / (end - start).to(at::kFloat);
}

// PyTorch's checks of adaptive_{avg,max}_pool{2,3}d; the output sizes.
std::vector<int64_t> adaptive_checks(const char* op, int64_t nd, const at::Tensor& self,
                                     at::IntArrayRef output_size) {
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == nd, op, ": output_size must be ", nd, ", got ",
              output_size);
  TORCH_CHECK(self.dim() == nd + 1 || self.dim() == nd + 2, op, "(): Expected ", nd + 1, "D or ", nd + 2,
              "D tensor, but got ", self.sizes());
  for (int64_t d = 1; d < self.dim(); ++d)
    TORCH_CHECK(self.size(d) > 0, op, "(): Expected input to have non-zero size for non-batch dimensions, but input "
                "has sizes ", self.sizes(), " with dimension ", d, " being empty");
  for (int64_t o : output_size)
    TORCH_CHECK(o >= 0, op, ": elements of output_size must be greater than or equal to 0 but received ",
                output_size);
  return output_size.vec();
}

bool divides(const at::Tensor& self, const std::vector<int64_t>& out) {
  int64_t nd = static_cast<int64_t>(out.size());
  for (int64_t i = 0; i < nd; ++i) {
    int64_t in = self.size(self.dim() - nd + i);
    if (out[i] == 0 || in % out[i] != 0) return false;
  }
  return true;
}

std::vector<int64_t> kernel_of(const at::Tensor& self, const std::vector<int64_t>& out) {
  int64_t nd = static_cast<int64_t>(out.size());
  std::vector<int64_t> k;
  for (int64_t i = 0; i < nd; ++i) k.push_back(self.size(self.dim() - nd + i) / out[i]);
  return k;
}

// x (float32) multiplied along `dim` by `m` [out, in] (or, `transposed`, by
// m^T: the backward).
at::Tensor along(const at::Tensor& x, int64_t dim, const at::Tensor& m, bool transposed) {
  return at::movedim(at::matmul(at::movedim(x, dim, -1), transposed ? m : m.t()), -1, dim);
}

at::Tensor adaptive_avg_pool(const char* op, int64_t nd, const at::Tensor& self, c10::SymIntArrayRef output_size) {
  OpScope s;
  auto out = adaptive_checks(op, nd, self, C10_AS_INTARRAYREF_SLOW(output_size));
  if (divides(self, out)) {
    auto k = kernel_of(self, out);
    return nd == 2 ? at::avg_pool2d(self, k) : at::avg_pool3d(self, k);
  }
  at::Tensor x = self.to(at::kFloat);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t dim = self.dim() - nd + i;
    x = along(x, dim, averaging_matrix(self.size(dim), out[i], self), false);
  }
  return x.to(self.scalar_type());
}

at::Tensor adaptive_avg_pool_backward(int64_t nd, const at::Tensor& grad_output, const at::Tensor& self) {
  OpScope s;
  std::vector<int64_t> out(grad_output.sizes().end() - nd, grad_output.sizes().end());
  if (divides(self, out)) {
    auto k = kernel_of(self, out);
    std::vector<int64_t> zeros(nd, 0);
    return nd == 2 ? at::avg_pool2d_backward(grad_output, self, k, k, zeros, false, true, std::nullopt)
                   : at::avg_pool3d_backward(grad_output, self, k, k, zeros, false, true, std::nullopt);
  }
  at::Tensor g = grad_output.to(at::kFloat);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t dim = self.dim() - nd + i;
    g = along(g, dim, averaging_matrix(self.size(dim), out[i], self), true);
  }
  return g.to(self.scalar_type());
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::SymIntArrayRef output_size) {
  return adaptive_avg_pool("adaptive_avg_pool2d", 2, self, output_size);
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  return adaptive_avg_pool_backward(2, grad_output, self);
}

at::Tensor adaptive_avg_pool3d(const at::Tensor& self, c10::SymIntArrayRef output_size) {
  return adaptive_avg_pool("adaptive_avg_pool3d", 3, self, output_size);
}

at::Tensor& adaptive_avg_pool3d_out(const at::Tensor& self, c10::SymIntArrayRef output_size, at::Tensor& out) {
  at::Tensor r = adaptive_avg_pool3d(self, output_size);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor adaptive_avg_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  return adaptive_avg_pool_backward(3, grad_output, self);
}

at::Tensor& adaptive_avg_pool3d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                             at::Tensor& grad_input) {
  at::Tensor r = adaptive_avg_pool3d_backward(grad_output, self);
  at::native::resize_output(grad_input, r.sizes());
  return grad_input.copy_(r);
}

// Adaptive max pooling: each bin's elements gathered (a bin shorter than the
// longest repeats its last element, which changes neither the maximum nor
// where it first is), then the maximum and its first position, as the flat
// index in the input's spatial dims PyTorch returns.

// Output index i's bin positions [out, longest] along a dim: start + a,
// clamped to the bin's last; and the bins' starts and ends [out, 1].
struct Bins {
  at::Tensor positions, start, end;
  int64_t longest;
};

Bins bins(int64_t in, int64_t out, const at::Tensor& like) {
  auto longs = like.options().dtype(at::kLong);
  int64_t longest = 0;
  for (int64_t i = 0; i < out; ++i)
    longest = std::max(longest, (((i + 1) * in + out - 1) / out) - (i * in / out));
  at::Tensor i = at::arange(out, longs).unsqueeze(1);
  at::Tensor start = at::floor_divide(i * in, out), end = at::floor_divide((i + 1) * in + (out - 1), out);
  at::Tensor positions = at::minimum(start + at::arange(longest, longs).unsqueeze(0), end - 1);
  return {positions, start, end, longest};
}

std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool_out(const char* op, int64_t nd, const at::Tensor& self,
                                                           at::IntArrayRef output_size, at::Tensor& out,
                                                           at::Tensor& indices) {
  OpScope s;
  auto o = adaptive_checks(op, nd, self, output_size);
  for (int64_t v : o) TORCH_CHECK(v > 0, op, ": output_size must be positive, got ", output_size);
  const bool batched = self.dim() == nd + 2;
  at::Tensor x = batched ? self : self.unsqueeze(0);
  int64_t n = x.size(0), c = x.size(1);
  std::vector<Bins> b;
  for (int64_t i = 0; i < nd; ++i) b.push_back(bins(x.size(2 + i), o[i], self));
  // [n, c, o0*L0, o1*L1, ...] -> [n, c, o0, o1, ..., L0*L1*...]
  at::Tensor g = x;
  std::vector<int64_t> split = {n, c}, perm = {0, 1}, pooled = {n, c};
  int64_t window = 1;
  for (int64_t i = 0; i < nd; ++i) {
    g = at::index_select(g, 2 + i, b[i].positions.reshape({-1}));
    split.insert(split.end(), {o[i], b[i].longest});
    perm.push_back(2 + 2 * i);
    pooled.push_back(o[i]);
    window *= b[i].longest;
  }
  for (int64_t i = 0; i < nd; ++i) perm.push_back(3 + 2 * i);
  pooled.push_back(window);
  g = g.reshape(split).permute(perm).reshape(pooled);
  auto [values, k] = at::max(g, -1);
  // k's position in the window, one dim at a time from the last; the flat
  // index over the input's spatial dims.
  at::Tensor flat = at::zeros_like(k);
  int64_t stride = 1;
  for (int64_t i = nd - 1; i >= 0; --i) {
    std::vector<int64_t> shape(nd + 2, 1);
    shape[2 + i] = o[i];
    at::Tensor position = at::minimum(b[i].start.view(shape) + at::remainder(k, b[i].longest),
                                      b[i].end.view(shape) - 1);
    k = at::floor_divide(k, b[i].longest);
    flat = flat + position * stride;
    stride *= x.size(2 + i);
  }
  at::native::resize_output(out, batched ? values.sizes() : values.sizes().slice(1));
  at::native::resize_output(indices, out.sizes());
  out.copy_(batched ? values : values.squeeze(0));
  indices.copy_(batched ? flat : flat.squeeze(0));
  return {out, indices};
}

std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool2d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                                             at::Tensor& out, at::Tensor& indices) {
  return adaptive_max_pool_out("adaptive_max_pool2d", 2, self, output_size, out, indices);
}

std::tuple<at::Tensor&, at::Tensor&> adaptive_max_pool3d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                                             at::Tensor& out, at::Tensor& indices) {
  return adaptive_max_pool_out("adaptive_max_pool3d", 3, self, output_size, out, indices);
}

template <int64_t N>
std::tuple<at::Tensor, at::Tensor> adaptive_max_pool(const at::Tensor& self, at::IntArrayRef output_size) {
  at::Tensor out = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(at::kLong));
  adaptive_max_pool_out(N == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d", N, self, output_size, out, indices);
  return {out, indices};
}

template <int64_t N>
at::Tensor& adaptive_max_pool_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                           const at::Tensor& indices, at::Tensor& grad_input) {
  return max_pool_backward_out(N, grad_output, self, indices, grad_input);
}

template <int64_t N>
at::Tensor adaptive_max_pool_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                      const at::Tensor& indices) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return max_pool_backward_out(N, grad_output, self, indices, grad_input);
}

// ------------------------------------------------------------- batch norm ----

// The runtime's batch norm with its statistics (Tensor::batch_norm_with_stats
// and batch_norm_backward): one call each way. The runtime returns the new
// running statistics; they are written here, as PyTorch updates them in place.

bool has(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(const at::Tensor& input,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias,
                                                                 const std::optional<at::Tensor>& running_mean,
                                                                 const std::optional<at::Tensor>& running_var,
                                                                 bool training, double momentum, double eps) {
  OpScope s;
  Handle y, mean, invstd, new_mean, new_var;
  check(etpu_batch_norm(read(input).get(), optional_read(weight).get(), optional_read(bias).get(),
                        optional_read(running_mean).get(), optional_read(running_var).get(), training, momentum, eps,
                        origin(), y.out(), mean.out(), invstd.out(), new_mean.out(), new_var.out()));
  // The statistics are [C] in training, [0] in eval, in the op-math dtype.
  auto stat_options = input.options().dtype(at::toOpMathType(input.scalar_type()));
  int64_t stats = training ? input.size(1) : 0;
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  at::Tensor save_mean = at::empty({stats}, stat_options), save_invstd = at::empty({stats}, stat_options);
  write(out, y);
  write(save_mean, mean);
  write(save_invstd, invstd);
  if (new_mean.get() != 0) write(*running_mean, new_mean);
  if (new_var.get() != 0) write(*running_var, new_var);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  OpScope s;
  // Training reads the saved statistics, eval the running ones: only those
  // go (eval's saved ones are empty).
  auto used = [](bool use, const std::optional<at::Tensor>& t) { return use ? optional_read(t) : Handle(); };
  Handle gi, gw, gb;
  check(etpu_batch_norm_backward(read(grad_out).get(), read(input).get(), optional_read(weight).get(),
                                 used(!train, running_mean).get(), used(!train, running_var).get(),
                                 used(train, save_mean).get(), used(train, save_invstd).get(), train, eps,
                                 output_mask[0], output_mask[1], output_mask[2], origin(), gi.out(), gw.out(),
                                 gb.out()));
  // The input's gradient in its dtype, the weight's and the bias's in the
  // weight's (the input's without one).
  auto param_options = input.options().dtype(has(weight) ? weight->scalar_type() : input.scalar_type());
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    grad_input = at::empty_like(input, at::MemoryFormat::Contiguous);
    write(grad_input, gi);
  }
  if (output_mask[1]) {
    grad_weight = at::empty({input.size(1)}, param_options);
    write(grad_weight, gw);
  }
  if (output_mask[2]) {
    grad_bias = at::empty({input.size(1)}, param_options);
    write(grad_bias, gb);
  }
  return {grad_input, grad_weight, grad_bias};
}

// The "legit" forms (what export and decompositions call): native_batch_norm
// with the running statistics updated in place, or without any.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_legit(const at::Tensor& input,
                                                                const std::optional<at::Tensor>& weight,
                                                                const std::optional<at::Tensor>& bias,
                                                                at::Tensor& running_mean, at::Tensor& running_var,
                                                                bool training, double momentum, double eps) {
  return etpu::native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_legit_no_stats(const at::Tensor& input,
                                                                         const std::optional<at::Tensor>& weight,
                                                                         const std::optional<at::Tensor>& bias,
                                                                         bool training, double momentum, double eps) {
  return etpu::native_batch_norm(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
  m.impl("max_pool2d_with_indices.out", max_pool_nd_with_indices_out<2>);
  m.impl("max_pool2d_with_indices_backward.grad_input", max_pool_nd_backward_out<2>);
  m.impl("avg_pool2d.out", avg_pool_nd_out<2>);
  m.impl("avg_pool2d_backward.grad_input", avg_pool_nd_backward_out<2>);
  m.impl("max_pool3d_with_indices", max_pool3d_with_indices);
  m.impl("max_pool3d_with_indices.out", max_pool_nd_with_indices_out<3>);
  m.impl("max_pool3d_with_indices_backward", max_pool3d_backward);
  m.impl("max_pool3d_with_indices_backward.grad_input", max_pool_nd_backward_out<3>);
  m.impl("avg_pool3d.out", avg_pool_nd_out<3>);
  m.impl("avg_pool3d_backward.grad_input", avg_pool_nd_backward_out<3>);
  m.impl("_adaptive_avg_pool2d", adaptive_avg_pool2d);
  m.impl("im2col", unfold_blocks);
  m.impl("im2col.out", im2col_out);
  m.impl("col2im", fold_blocks);
  m.impl("_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
  m.impl("adaptive_max_pool2d", adaptive_max_pool<2>);
  m.impl("adaptive_max_pool2d.out", adaptive_max_pool2d_out);
  m.impl("adaptive_max_pool2d_backward", adaptive_max_pool_backward<2>);
  m.impl("adaptive_max_pool2d_backward.grad_input", adaptive_max_pool_backward_out<2>);
  m.impl("_adaptive_avg_pool3d", adaptive_avg_pool3d);
  m.impl("_adaptive_avg_pool3d.out", adaptive_avg_pool3d_out);
  m.impl("_adaptive_avg_pool3d_backward", adaptive_avg_pool3d_backward);
  m.impl("_adaptive_avg_pool3d_backward.out", adaptive_avg_pool3d_backward_out);
  m.impl("adaptive_max_pool3d", adaptive_max_pool<3>);
  m.impl("adaptive_max_pool3d.out", adaptive_max_pool3d_out);
  m.impl("adaptive_max_pool3d_backward", adaptive_max_pool_backward<3>);
  m.impl("adaptive_max_pool3d_backward.grad_input", adaptive_max_pool_backward_out<3>);
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("_native_batch_norm_legit", batch_norm_legit);
  m.impl("_native_batch_norm_legit.no_stats", batch_norm_legit_no_stats);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
}
