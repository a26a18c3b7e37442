// Matmuls, softmax, nll_loss, layer norm, embedding and index kernels: what
// autograd needs to train MLPs and transformers. nll_loss, layer norm and
// their backwards are the runtime's, one call each; the fuser turns each
// into one program in fused mode.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_log_softmax_backward_data_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/_log_softmax_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/_softmax_backward_data_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/_softmax_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/addmm_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/bmm_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/mm_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/nll_loss_backward_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/nll_loss_forward_compositeexplicitautogradnonfunctional_dispatch.h>
#include <torch/library.h>

#include <cstring>

#include "backend.h"

namespace etpu {
namespace {

bool is_one(const at::Scalar& s) { return s.isIntegral(true) ? s.toLong() == 1 : s.toComplexDouble() == 1.0; }
bool is_zero(const at::Scalar& s) { return s.isIntegral(true) ? s.toLong() == 0 : s.toComplexDouble() == 0.0; }

Handle read_as(const at::Tensor& t, at::ScalarType dtype) {
  Handle h = read(t);
  return t.scalar_type() == dtype ? std::move(h) : cast(h, dtype);
}

// ---------------------------------------------------------------- matmul ----

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  OpScope s;
  write(out, matmul(read(self), read(mat2)));
  return out;
}

// beta * self + alpha * product (self ignored when beta is 0, as on CPU).
Handle scaled_sum(const at::Tensor& self, Handle product, const at::Scalar& beta, const at::Scalar& alpha) {
  if (!is_one(alpha)) product = mul(product, alpha);
  if (is_zero(beta)) return product;
  Handle c = read(self);
  if (!is_one(beta)) c = mul(c, beta);
  return add(c, product);
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  OpScope s;
  write(out, scaled_sum(self, matmul(read(mat1), read(mat2)), beta, alpha));
  return out;
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                        const at::Scalar& alpha, at::Tensor& out) {
  return addmm_out(self, b1, b2, beta, alpha, out);
}

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  return addmm_out(self, mat, vec, beta, alpha, out);
}

// The functional products make their result as the runtime computes it
// (tensor_holding: no allocation made before the op, no out= view written).
// Operands the fast path does not take (dtypes apart, shapes that do not
// multiply, a CPU operand) take PyTorch's structured path: its
// meta function and its errors, an empty output, then the out= kernel above.

// Whether `ts` are tpu tensors of one device and dtype.
bool plain_operands(std::initializer_list<const at::Tensor*> ts) {
  const at::Tensor& first = **ts.begin();
  if (first.device().type() != c10::DeviceType::PrivateUse1) return false;
  for (const at::Tensor* t : ts)
    if (t->device() != first.device() || t->scalar_type() != first.scalar_type()) return false;
  return true;
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  if (self.dim() != 2 || mat2.dim() != 2 || self.size(1) != mat2.size(0) || !plain_operands({&self, &mat2}))
    return at::compositeexplicitautogradnonfunctional::mm(self, mat2);
  OpScope s;
  return op_new("matmul", {self, mat2}, {self.size(0), mat2.size(1)}, self.scalar_type(), self.device().index());
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  if (self.dim() != 3 || mat2.dim() != 3 || self.size(0) != mat2.size(0) || self.size(2) != mat2.size(1) ||
      !plain_operands({&self, &mat2}))
    return at::compositeexplicitautogradnonfunctional::bmm(self, mat2);
  OpScope s;
  return op_new("matmul", {self, mat2}, {self.size(0), self.size(1), mat2.size(2)}, self.scalar_type(),
                self.device().index());
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  if (mat1.dim() != 2 || mat2.dim() != 2 || mat1.size(1) != mat2.size(0) ||
      !plain_operands({&mat1, &mat2, &self}) || !at::is_expandable_to(self.sizes(), {mat1.size(0), mat2.size(1)}))
    return at::compositeexplicitautogradnonfunctional::addmm(self, mat1, mat2, beta, alpha);
  OpScope s;
  const c10::SmallVector<int64_t, 2> sizes{mat1.size(0), mat2.size(1)};
  if (beta.isComplex() || alpha.isComplex())  // the C ABI's numbers are real
    return tensor_holding(scaled_sum(self, matmul(read(mat1), read(mat2)), beta, alpha), sizes, mat1.scalar_type(),
                          mat1.device().index());
  return op_new("addmm", {self, mat1, mat2, beta, alpha}, sizes, mat1.scalar_type(), mat1.device().index());
}

// dot, and vdot (the same for real dtypes: it conjugates its first vector).
at::Tensor dot_named(const char* name, const at::Tensor& self, const at::Tensor& other) {
  OpScope s;
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, name, ": expected 1-D tensors, got ", self.dim(), "-D and ",
              other.dim(), "-D");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), name, ": expected both vectors to have the same dtype, got ",
              self.scalar_type(), " and ", other.scalar_type());
  at::Tensor out = at::empty({}, self.options());
  Handle a = read(self);
  if (std::strcmp(name, "vdot") == 0 && self.is_complex()) a = unary("conj_physical", a);
  write(out, matmul(a, read(other)));
  return out;
}

at::Tensor dot(const at::Tensor& self, const at::Tensor& other) { return dot_named("dot", self, other); }

at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) { return dot_named("vdot", self, other); }

// --------------------------------------------------------------- softmax ----

at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  OpScope s;
  write(out, softmax(read_as(self, out.scalar_type()), dim, false));
  return out;
}

at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  OpScope s;
  write(out, softmax(read_as(self, out.scalar_type()), dim, true));
  return out;
}

// The runtime's softmax (or log-softmax) gradient.
Handle softmax_grad(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim, bool log) {
  Handle h;
  check(etpu_softmax_backward(read(grad_output).get(), read(output).get(), dim, log, origin(), h.out()));
  return h;
}

at::Tensor& softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim, bool log,
                             at::Tensor& grad_input) {
  OpScope s;
  write(grad_input, softmax_grad(grad_output, output, dim, log));
  return grad_input;
}

at::Tensor& softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype, at::Tensor& grad_input) {
  return softmax_backward(grad_output, output, dim, false, grad_input);
}

at::Tensor& log_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                     at::ScalarType input_dtype, at::Tensor& grad_input) {
  return softmax_backward(grad_output, output, dim, true, grad_input);
}

// The functional forms, for a floating tpu tensor of at least one dim in its
// own dtype and a dim in range: their results made as the runtime computes
// them (tensor_holding). Anything else (half_to_float, another input dtype)
// takes PyTorch's structured path: the meta function, then the kernels above.
bool plain_softmax(const at::Tensor& x, int64_t dim) {
  return x.dim() > 0 && dim >= -x.dim() && dim < x.dim() && at::isFloatingType(x.scalar_type());
}

at::Tensor softmax_fn(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (half_to_float || !plain_softmax(self, dim))
    return at::compositeexplicitautogradnonfunctional::_softmax(self, dim, half_to_float);
  OpScope s;
  return op_new("softmax", {self, at::Scalar(dim)}, self.sizes(), self.scalar_type(), self.device().index());
}

at::Tensor log_softmax_fn(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (half_to_float || !plain_softmax(self, dim))
    return at::compositeexplicitautogradnonfunctional::_log_softmax(self, dim, half_to_float);
  OpScope s;
  return op_new("log_softmax", {self, at::Scalar(dim)}, self.sizes(), self.scalar_type(), self.device().index());
}

// The gradient, for a gradient and output of one shape and of the input's dtype.
bool plain_softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype) {
  return plain_softmax(output, dim) && grad_output.sizes() == output.sizes() &&
         grad_output.scalar_type() == input_dtype && output.scalar_type() == input_dtype &&
         plain_operands({&grad_output, &output});
}

at::Tensor softmax_backward_fn(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim, bool log) {
  OpScope s;
  return op_new(log ? "log_softmax_backward" : "softmax_backward", {grad_output, output, at::Scalar(dim)}, output.sizes(),
                output.scalar_type(), output.device().index());
}

at::Tensor softmax_backward_data(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype) {
  if (!plain_softmax_backward(grad_output, output, dim, input_dtype))
    return at::compositeexplicitautogradnonfunctional::_softmax_backward_data(grad_output, output, dim, input_dtype);
  return softmax_backward_fn(grad_output, output, dim, false);
}

at::Tensor log_softmax_backward_data(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                     at::ScalarType input_dtype) {
  if (!plain_softmax_backward(grad_output, output, dim, input_dtype))
    return at::compositeexplicitautogradnonfunctional::_log_softmax_backward_data(grad_output, output, dim,
                                                                                  input_dtype);
  return softmax_backward_fn(grad_output, output, dim, true);
}

// -------------------------------------------------------------- nll_loss ----

// The runtime's (Tensor::nll_loss and nll_loss_backward), one call each way;
// ATen's reduction codes (0 none, 1 mean, 2 sum) are the C ABI's.

// The runtime's loss and total weight.
std::pair<Handle, Handle> nll_loss_values(const at::Tensor& self, const at::Tensor& target,
                                          const std::optional<at::Tensor>& weight, int64_t reduction,
                                          int64_t ignore_index) {
  Handle w = optional_read(weight), loss, tw;
  check(etpu_nll_loss(read(self).get(), read(target).get(), w.get(), static_cast<int32_t>(reduction), ignore_index,
                      origin(), loss.out(), tw.out()));
  return {std::move(loss), std::move(tw)};
}

// The runtime's gradient of the loss with respect to `self`.
Handle nll_loss_grad(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                     const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                     const at::Tensor& total_weight) {
  Handle w = optional_read(weight), g;
  check(etpu_nll_loss_backward(read(grad_output).get(), read(self).get(), read(target).get(), w.get(),
                               static_cast<int32_t>(reduction), ignore_index, read(total_weight).get(), origin(),
                               g.out()));
  return g;
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                          const std::optional<at::Tensor>& weight,
                                                          int64_t reduction, int64_t ignore_index,
                                                          at::Tensor& output, at::Tensor& total_weight) {
  OpScope s;
  auto [loss, tw] = nll_loss_values(self, target, weight, reduction, ignore_index);
  write(output, loss);
  write(total_weight, tw);
  return {output, total_weight};
}

at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  OpScope s;
  write(grad_input, nll_loss_grad(grad_output, self, target, weight, reduction, ignore_index, total_weight));
  return grad_input;
}

// The functional forms, for the common case: a batch of logits of a floating
// dtype, class indices of as many items, no class weights, all on one tpu
// device; their results made as the runtime computes them. Anything else
// takes PyTorch's structured path (meta function and its errors, then the
// out= kernels above).
bool plain_nll_loss(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                    int64_t reduction) {
  return self.dim() == 2 && target.dim() == 1 && target.size(0) == self.size(0) && self.size(1) > 0 &&
         at::isFloatingType(self.scalar_type()) && target.scalar_type() == at::kLong &&
         self.device().type() == c10::DeviceType::PrivateUse1 && target.device() == self.device() &&
         !(weight.has_value() && weight->defined()) && reduction >= 0 && reduction <= 2;
}

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight, int64_t reduction,
                                                    int64_t ignore_index) {
  if (!plain_nll_loss(self, target, weight, reduction))
    return at::compositeexplicitautogradnonfunctional::nll_loss_forward(self, target, weight, reduction,
                                                                        ignore_index);
  OpScope s;
  auto [loss, total_weight] = nll_loss_values(self, target, weight, reduction, ignore_index);
  const at::ScalarType t = self.scalar_type();
  const c10::DeviceIndex index = self.device().index();
  c10::SmallVector<int64_t, 1> loss_sizes;
  if (reduction == 0) loss_sizes.push_back(self.size(0));  // none: a loss per item
  return {tensor_holding(loss, loss_sizes, t, index), tensor_holding(total_weight, {}, t, index)};
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  const bool grad_shaped = reduction == 0 ? grad_output.dim() == 1 && grad_output.size(0) == self.size(0)
                                          : grad_output.dim() == 0;
  if (!plain_nll_loss(self, target, weight, reduction) || !grad_shaped || total_weight.dim() != 0 ||
      !plain_operands({&self, &grad_output, &total_weight}))
    return at::compositeexplicitautogradnonfunctional::nll_loss_backward(grad_output, self, target, weight,
                                                                         reduction, ignore_index, total_weight);
  OpScope s;
  return op_new("nll_loss_backward",
                {grad_output, self, target, total_weight, at::Scalar(reduction), at::Scalar(ignore_index)},
                self.sizes(), self.scalar_type(), self.device().index());
}

// ------------------------------------------------------------ layer norm ----

// The runtime's layer norm with its statistics (Tensor::layer_norm_with_stats
// and layer_norm_backward): one call each way.

// A new tensor holding `value` (its shape and dtype), on `like`'s device.
at::Tensor tensor_of(const Handle& value, const at::Tensor& like) {
  return tensor_holding(value, dims_of(value), scalar_type(dtype_of(value)), like.device().index());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor& input,
                                                                 at::IntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  OpScope s;
  Handle w = optional_read(weight), b = optional_read(bias), y, mean, rstd;
  check(etpu_layer_norm(read(input).get(), normalized_shape.data(), normalized_shape.size(), w.get(), b.get(), eps,
                        origin(), y.out(), mean.out(), rstd.out()));
  return {tensor_of(y, input), tensor_of(mean, input), tensor_of(rstd, input)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  OpScope s;
  Handle w = optional_read(weight), b = optional_read(bias), gi, gw, gb;
  int32_t mask = (output_mask[0] ? 1 : 0) | (output_mask[1] ? 2 : 0) | (output_mask[2] ? 4 : 0);
  check(etpu_layer_norm_backward(read(grad_out).get(), read(input).get(), normalized_shape.data(),
                                 normalized_shape.size(), read(mean).get(), read(rstd).get(), w.get(), b.get(), mask,
                                 origin(), gi.out(), gw.out(), gb.out()));
  auto result = [&](const Handle& g) { return g.get() != 0 ? tensor_of(g, input) : at::Tensor(); };
  return {result(gi), result(gw), result(gb)};
}

// ------------------------------------------------------------ activations ----

at::Tensor& reciprocal_out(const at::Tensor& self, at::Tensor& out) {
  OpScope s;
  write(out, binary_scalar("div", read_as(self, out.scalar_type()), 1.0, /*reversed=*/true));
  return out;
}

// ----------------------------------------------------------------- index ----

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(index.dim() <= 1, "index_select(): index must be 0-D or 1-D, got shape ", index.sizes());
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[d] = index.numel();
  at::native::resize_output(out, shape);
  Handle idx = read(index);
  if (index.dim() == 0) idx = reshape(idx, {1});
  write(out, index_select(read(self), d, idx));
  return out;
}

at::Tensor index_select_fn(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                       at::Tensor& out) {
  OpScope s;
  write(out, gather(read(self), at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1)), read(index)));
  return out;
}

at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out) {
  OpScope s;
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  write(out, scatter(read(self), d, read(index), read(src), /*add=*/true));
  return out;
}

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out) {
  OpScope s;
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  write(out, scatter(read(self), d, read(index), read(src), /*add=*/false));
  return out;
}

// scatter_reduce (sum prod mean amax amin, with or without self's elements):
// the runtime's, one call (PyTorch's structured meta function checked the
// shapes and dtypes).
Handle scatter_reduced(const at::Tensor& self, int64_t dim, const Handle& index, const Handle& src,
                       c10::string_view reduce, bool include_self) {
  std::string how(reduce);
  Handle h;
  check(etpu_scatter_reduce(read(self).get(), dim, index.get(), src.get(), how.c_str(), include_self, origin(),
                            h.out()));
  return h;
}

at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                               c10::string_view reduce, bool include_self, at::Tensor& out) {
  OpScope s;
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  write(out, scatter_reduced(self, d, read(index), read(src), reduce, include_self));
  return out;
}

// index_reduce (prod mean amax amin): a scatter_reduce with the 1-d index
// broadcast over the source's slices along dim.
at::Tensor& index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                             c10::string_view reduce, bool include_self, at::Tensor& out) {
  OpScope s;
  int64_t rank = std::max<int64_t>(self.dim(), 1), d = at::maybe_wrap_dim(dim, rank);
  if (out.numel() == 0) return out;
  if (index.numel() == 0) {
    if (!out.is_same(self)) write(out, read(self));
    return out;
  }
  std::vector<int64_t> src_shape = source.dim() == 0 ? std::vector<int64_t>{1} : source.sizes().vec();
  std::vector<int64_t> col(rank, 1);
  col[d] = index.numel();
  Handle wide = expand(reshape(cast(read(index), at::kLong), col), src_shape);
  Handle src = reshape(read(source), src_shape);
  if (self.dim() == 0) {
    at::Tensor flat = self.reshape({1});
    write(out, reshape(scatter_reduced(flat, 0, wide, src, reduce, include_self), self.sizes()));
  } else {
    write(out, scatter_reduced(self, d, wide, src, reduce, include_self));
  }
  return out;
}

at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value,
                              at::Tensor& out) {
  OpScope s;
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  Handle src = full(device_index(self), index.sizes(), value, self.scalar_type());
  write(out, scatter(read(self), d, read(index), src, /*add=*/false));
  return out;
}

// The gradient of an embedding lookup: the runtime's
// Tensor::embedding_backward (padding_idx, scale_grad_by_freq, the
// scatter-add of rows), one call.
at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  OpScope s;
  Handle h;
  check(etpu_embedding_backward(read(grad).get(), read(indices).get(), num_weights, padding_idx, scale_grad_by_freq,
                                origin(), h.out()));
  at::Tensor out = at::empty({num_weights, grad.size(-1)}, grad.options());
  write(out, h);
  return out;
}

// ------------------------------------------------------------------- cat ----

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  OpScope s;
  std::vector<Handle> parts;
  std::vector<etpu_tensor> raw;
  for (const at::Tensor& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0) continue;  // legacy: empty 1-D tensors are skipped
    if (t.numel() == 0) continue;
    parts.push_back(read_as(t, out.scalar_type()));
    raw.push_back(parts.back().get());
  }
  if (raw.empty()) return out;
  write(out, cat(raw, at::maybe_wrap_dim(dim, out.dim())));
  return out;
}

// ------------------------------------------------------------ glu, prelu ----
//
// Composed of the device's own ops, with PyTorch's checks and messages.

std::vector<at::Tensor> glu_halves(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() > 0, "glu does not support scalars because halving size must be even");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(self.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ",
              self.size(d));
  return self.chunk(2, d);
}

// glu(x) = a * sigmoid(b), where a and b are x's halves along dim.
at::Tensor& glu_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  OpScope s;
  auto halves = glu_halves(self, dim);
  at::native::resize_output(out, halves[0].sizes());
  return at::mul_out(out, halves[0], at::sigmoid(halves[1]));
}

at::Tensor glu_grad(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim) {
  OpScope s;
  auto halves = glu_halves(self, dim);
  at::Tensor gate = at::sigmoid(halves[1]);
  at::Tensor grad_a = grad_output * gate;
  at::Tensor grad_b = grad_a * halves[0] * (1 - gate);
  return at::cat({grad_a, grad_b}, at::maybe_wrap_dim(dim, self.dim()));
}

at::Tensor& glu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim,
                             at::Tensor& grad_input) {
  at::Tensor g = glu_grad(grad_output, self, dim);
  at::native::resize_output(grad_input, g.sizes());
  return grad_input.copy_(g);
}

// PReLU with its weight already shaped to broadcast (PyTorch's prelu does that).
at::Tensor prelu_kernel(const at::Tensor& self, const at::Tensor& weight) {
  OpScope s;
  return at::where(self > 0, self, weight * self);
}

// Gradients of both, in the broadcast shape (autograd sums the weight's).
std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                         const at::Tensor& weight) {
  OpScope s;
  at::Tensor positive = self > 0;
  return {at::where(positive, grad_output, weight * grad_output),
          at::where(positive, at::zeros({}, grad_output.options()), self * grad_output)};
}

}  // namespace
}  // namespace etpu

namespace etpu {
namespace {

// Weight normalization (`nn.utils.weight_norm`): w = v * g / ||v||, the norm
// over every dim but `dim` (the norms keep g's shape), in float32 at least,
// as the CPU kernel; and its backward, from the saved norms:
// grad_g = sum(grad_w * v) / n, grad_v = (g / n) * (grad_w - v * grad_g / n).
std::vector<int64_t> all_but(const at::Tensor& v, int64_t dim) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < v.dim(); ++d)
    if (d != dim) dims.push_back(d);
  return dims;
}

at::ScalarType norm_type(const at::Tensor& v) {
  return at::isReducedFloatingType(v.scalar_type()) ? at::kFloat : v.scalar_type();
}

std::tuple<at::Tensor, at::Tensor> weight_norm_interface(const at::Tensor& v, const at::Tensor& g, int64_t dim) {
  dim = at::maybe_wrap_dim(dim, v.dim());
  at::Tensor v32 = v.to(norm_type(v));
  at::Tensor norms = at::linalg_vector_norm(v32, 2, all_but(v, dim), /*keepdim=*/true);
  at::Tensor w = (v32 * (g.to(v32.scalar_type()) / norms)).to(v.scalar_type());
  return {w, norms};
}

std::tuple<at::Tensor, at::Tensor> weight_norm_interface_backward(const at::Tensor& grad_w, const at::Tensor& v,
                                                                  const at::Tensor& g, const at::Tensor& norms,
                                                                  int64_t dim) {
  dim = at::maybe_wrap_dim(dim, v.dim());
  at::ScalarType t = norms.scalar_type();
  at::Tensor gw = grad_w.to(t), v32 = v.to(t), g32 = g.to(t);
  at::Tensor grad_g = (gw * v32).sum(all_but(v, dim), /*keepdim=*/true) / norms;
  at::Tensor grad_v = (g32 / norms) * (gw - v32 * (grad_g / norms));
  return {grad_v.to(v.scalar_type()), grad_g.to(g.scalar_type())};
}

// F.embedding's max_norm: each row `indices` names whose p-norm is above
// max_norm is scaled to max_norm (PyTorch's 1e-7 guard included), in place,
// with no host read (a mask of the rows named instead of their unique list).
at::Tensor& embedding_renorm_(at::Tensor& self, const at::Tensor& indices, double max_norm, double norm_type) {
  TORCH_CHECK(self.dim() == 2, "embedding_renorm_: self must be 2-D, got ", self.dim(), "-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_renorm_: expected indices to be Long or Int, got ", indices.scalar_type());
  at::Tensor named = at::zeros({self.size(0)}, self.options().dtype(at::kBool))
                         .index_fill_(0, indices.reshape(-1).to(at::kLong), true);
  at::Tensor norms = at::linalg_vector_norm(self, norm_type, {1}, /*keepdim=*/false);
  at::Tensor scale = at::where(named & (norms > max_norm), max_norm / (norms + 1e-7), at::ones_like(norms));
  return self.mul_(scale.unsqueeze(1));
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("glu.out", glu_out);
  m.impl("_weight_norm_interface", weight_norm_interface);
  m.impl("_weight_norm_interface_backward", weight_norm_interface_backward);
  m.impl("embedding_renorm_", embedding_renorm_);
  m.impl("glu_backward", glu_grad);
  m.impl("glu_backward.grad_input", glu_backward_out);
  m.impl("_prelu_kernel", prelu_kernel);
  m.impl("_prelu_kernel_backward", prelu_kernel_backward);
  m.impl("mm", mm);
  m.impl("bmm", bmm);
  m.impl("addmm", addmm);
  m.impl("nll_loss_forward", nll_loss_forward);
  m.impl("nll_loss_backward", nll_loss_backward);
  m.impl("mm.out", mm_out);
  m.impl("bmm.out", mm_out);
  m.impl("addmm.out", addmm_out);
  m.impl("baddbmm.out", baddbmm_out);
  m.impl("addmv.out", addmv_out);
  m.impl("dot", dot);
  m.impl("vdot", vdot);
  m.impl("_softmax", softmax_fn);
  m.impl("_log_softmax", log_softmax_fn);
  m.impl("_softmax_backward_data", softmax_backward_data);
  m.impl("_log_softmax_backward_data", log_softmax_backward_data);
  m.impl("_softmax.out", softmax_out);
  m.impl("_log_softmax.out", log_softmax_out);
  m.impl("_softmax_backward_data.out", softmax_backward_out);
  m.impl("_log_softmax_backward_data.out", log_softmax_backward_out);
  m.impl("nll_loss_forward.output", nll_loss_forward_out);
  m.impl("nll_loss_backward.grad_input", nll_loss_backward_out);
  m.impl("native_layer_norm", native_layer_norm);
  m.impl("native_layer_norm_backward", native_layer_norm_backward);
  m.impl("reciprocal.out", reciprocal_out);
  m.impl("index_select", index_select_fn);
  m.impl("index_select.out", index_select_out);
  m.impl("gather.out", gather_out);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("scatter_reduce.two_out", scatter_reduce_out);
  m.impl("index_reduce.out", index_reduce_out);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("cat.out", cat_out);
}
