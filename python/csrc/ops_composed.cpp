// ATen ops that PyTorch gives a kernel per device and no composite form,
// made here of at:: calls: each dispatches to this backend's kernels (below
// autograd, so PyTorch's own derivative formulas apply). Norms, rounding to
// decimals, aminmax, renorm, addbmm, scatter with a reduce, batch
// norm with running-stat updates, max unpooling, 2-d NLL loss, channel
// shuffle, masked_scatter, histc, cdist and pdist with their gradients,
// nonzero_static, the multi-class and multi-label margin losses with their
// gradients, frexp, the CPU's flash attention entry, and GroupNorm's and
// Tensor.unfold's backwards. Unique is in ops_unique.cpp; segment_reduce and
// embedding_bag are in ops_segments.cpp.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <limits>
#include <tuple>

#include "backend.h"

namespace etpu {
namespace {

at::Tensor& norm_out(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                     at::Tensor& out) {
  return out.copy_(at::linalg_vector_norm(self, p.value_or(2), dim, keepdim));
}

at::Tensor& norm_dtype_out(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim,
                           bool keepdim, at::ScalarType dtype, at::Tensor& out) {
  return out.copy_(at::linalg_vector_norm(self, p.value_or(2), dim, keepdim, dtype));
}

std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& min, at::Tensor& max) {
  if (dim.has_value()) {
    min.copy_(at::amin(self, *dim, keepdim));
    max.copy_(at::amax(self, *dim, keepdim));
  } else {
    min.copy_(at::amin(self).reshape(min.sizes()));
    max.copy_(at::amax(self).reshape(max.sizes()));
  }
  return {min, max};
}

// As the CPU kernel: x scaled by 10^decimals, rounded half to even, scaled
// back (in x's dtype).
at::Tensor& round_decimals_out(const at::Tensor& self, int64_t decimals, at::Tensor& out) {
  if (decimals == 0) return out.copy_(at::round(self));
  double scale = std::pow(10.0, static_cast<double>(std::abs(decimals)));
  at::Tensor r = decimals > 0 ? at::round(self * scale) / scale : at::round(self / scale) * scale;
  return out.copy_(r);
}

// Each slice along `dim` whose p-norm exceeds maxnorm scaled down to it.
at::Tensor& renorm_out(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm,
                       at::Tensor& out) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> others;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (i != d) others.push_back(i);
  at::Tensor norm = at::linalg_vector_norm(self, p, others, /*keepdim=*/true);
  at::Tensor factor = at::where(norm > maxnorm, maxnorm.toDouble() / (norm + 1e-7), at::ones_like(norm));
  return out.copy_(self * factor);
}

at::Tensor addbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                  const at::Scalar& alpha) {
  TORCH_CHECK(batch1.dim() == 3 && batch2.dim() == 3, "batch1 must be a 3D tensor, batch2 must be a 3D tensor; got ",
              batch1.sizes(), " and ", batch2.sizes());
  at::Tensor products = at::bmm(batch1, batch2).sum(0);
  if (alpha.toComplexDouble() != 1.0) products = products * alpha;
  // beta = 0 ignores self (NaN in it does not propagate), as addmm.
  if (beta.toComplexDouble() == 0.0) return products.expand_as(products).clone();
  return at::add(self * beta, products);
}

at::Tensor& addbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                       const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  at::Tensor r = etpu::addbmm(self, batch1, batch2, beta, alpha);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// scatter with reduce="add" or "multiply": scatter_reduce's sum or prod,
// the destination's own elements included.
const char* scatter_reduction(c10::string_view reduce) {
  if (reduce == "add") return "sum";
  if (reduce == "multiply") return "prod";
  TORCH_CHECK(false, "reduce argument must be either add or multiply, got ", reduce);
}

at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                               c10::string_view reduce, at::Tensor& out) {
  return at::scatter_reduce_out(out, self, dim, index, src, scatter_reduction(reduce), /*include_self=*/true);
}

at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const at::Scalar& value, c10::string_view reduce, at::Tensor& out) {
  at::Tensor src = at::full(index.sizes(), value, self.options());
  return at::scatter_reduce_out(out, self, dim, index, src, scatter_reduction(reduce), /*include_self=*/true);
}

// Training-mode batch norm updating the running statistics: the legit
// kernel's, and an empty reserve (as on the CPU).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  auto [out, mean, invstd] =
      at::_native_batch_norm_legit(input, weight, bias, running_mean, running_var, /*training=*/true, momentum, eps);
  return {out, mean, invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

// Its backward: the native kernel's (the reserve is empty).
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var, bool update, double eps,
    std::array<bool, 3> output_mask, const at::Tensor& /*reserve*/) {
  return at::native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var,
                                        update, eps, output_mask);
}

// Max unpooling: each value put at its flat index within its plane of the
// output (`spatial` trailing dims of `output_size`), zeros elsewhere.
at::Tensor max_unpool(const at::Tensor& self, const at::Tensor& indices, at::IntArrayRef output_size) {
  int64_t spatial = static_cast<int64_t>(output_size.size());
  TORCH_CHECK(self.dim() == spatial + 1 || self.dim() == spatial + 2, "max_unpool", spatial, "d: expected a ",
              spatial + 1, "-D or ", spatial + 2, "-D input, got ", self.sizes());
  TORCH_CHECK(indices.sizes() == self.sizes(), "max_unpool", spatial,
              "d: expected indices of the input's shape, got input ", self.sizes(), " and indices ", indices.sizes());
  std::vector<int64_t> planes(self.sizes().begin(), self.sizes().end() - spatial);
  std::vector<int64_t> flat = planes, shape = planes;
  int64_t area = 1;
  for (int64_t s : output_size) area *= s;
  flat.push_back(area);
  shape.insert(shape.end(), output_size.begin(), output_size.end());
  std::vector<int64_t> from = planes;
  from.push_back(-1);
  at::Tensor out = at::zeros(flat, self.options());
  return out.scatter(-1, indices.reshape(from), self.reshape(from)).view(shape);
}

at::Tensor max_unpool2d(const at::Tensor& self, const at::Tensor& indices, at::IntArrayRef output_size) {
  return max_unpool(self, indices, output_size);
}

at::Tensor& max_unpool2d_out(const at::Tensor& self, const at::Tensor& indices, at::IntArrayRef output_size,
                             at::Tensor& out) {
  at::Tensor r = max_unpool(self, indices, output_size);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor max_unpool3d(const at::Tensor& self, const at::Tensor& indices, at::IntArrayRef output_size,
                        at::IntArrayRef /*stride*/, at::IntArrayRef /*padding*/) {
  return max_unpool(self, indices, output_size);
}

at::Tensor& max_unpool3d_out(const at::Tensor& self, const at::Tensor& indices, at::IntArrayRef output_size,
                             at::IntArrayRef stride, at::IntArrayRef padding, at::Tensor& out) {
  at::Tensor r = etpu::max_unpool3d(self, indices, output_size, stride, padding);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// NLL loss over images ([N, C, H, W] against [N, H, W]): the 1-d loss of
// every pixel as a row, classes last.
at::Tensor pixels_as_rows(const at::Tensor& self) { return self.movedim(1, -1).reshape({-1, self.size(1)}); }

std::tuple<at::Tensor&, at::Tensor&> nll_loss2d_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                            const std::optional<at::Tensor>& weight,
                                                            int64_t reduction, int64_t ignore_index,
                                                            at::Tensor& output, at::Tensor& total_weight) {
  TORCH_CHECK(self.dim() == 4 && target.dim() == 3, "nll_loss2d: expected input [N, C, H, W] and target [N, H, W], got ",
              self.sizes(), " and ", target.sizes());
  auto [loss, tw] =
      at::nll_loss_forward(pixels_as_rows(self), target.reshape({-1}), weight, reduction, ignore_index);
  if (reduction == at::Reduction::None) loss = loss.view(target.sizes());
  at::native::resize_output(output, loss.sizes());
  at::native::resize_output(total_weight, tw.sizes());
  output.copy_(loss);
  total_weight.copy_(tw);
  return {output, total_weight};
}

std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor& self, const at::Tensor& target,
                                                      const std::optional<at::Tensor>& weight, int64_t reduction,
                                                      int64_t ignore_index) {
  at::Tensor output = at::empty({0}, self.options()), total_weight = at::empty({0}, self.options());
  nll_loss2d_forward_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor& nll_loss2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                    const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                    const at::Tensor& total_weight, at::Tensor& grad_input) {
  at::Tensor grad = reduction == at::Reduction::None ? grad_output.reshape({-1}) : grad_output;
  at::Tensor rows = at::nll_loss_backward(grad, pixels_as_rows(self), target.reshape({-1}), weight, reduction,
                                          ignore_index, total_weight);
  std::vector<int64_t> channels_last = {self.size(0), self.size(2), self.size(3), self.size(1)};
  at::native::resize_output(grad_input, self.sizes());
  return grad_input.copy_(rows.view(channels_last).movedim(-1, 1));
}

at::Tensor nll_loss2d_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                               const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return nll_loss2d_backward_out(grad_output, self, target, weight, reduction, ignore_index, total_weight,
                                 grad_input);
}

// [N, C, *] as [N, groups, C / groups, *] with the two middle dims swapped.
at::Tensor channel_shuffle(const at::Tensor& self, int64_t groups) {
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive.", " Value of groups:", groups);
  int64_t c = self.size(1);
  TORCH_CHECK(c % groups == 0, "Number of channels must be divisible by groups. Got ", c, " channels and ", groups,
              " groups.");
  std::vector<int64_t> split = {self.size(0), groups, c / groups};
  split.insert(split.end(), self.sizes().begin() + 2, self.sizes().end());
  return self.reshape(split).transpose(1, 2).reshape(self.sizes()).clone();
}

// The source's elements, in order, where the mask holds: the k-th true
// element takes source's k-th.
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  at::Tensor m = mask.expand(self.sizes());
  if (self.numel() == 0) return self;
  at::Tensor order = (at::cumsum(m.reshape({-1}), 0) - 1).clamp_min(0);
  at::Tensor taken = source.numel() == 0 ? at::zeros_like(self) : source.reshape({-1}).index_select(0, order).view(self.sizes());
  return self.copy_(at::where(m, taken.to(self.scalar_type()), self));
}

// Counts of `bins` equal-width bins over [min, max] (the data's range when
// min == max; one either side of a single value); values outside, and NaN,
// are not counted.
at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor& out) {
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for bins");
  double lo_value = min.toDouble(), hi_value = max.toDouble();
  TORCH_CHECK(lo_value <= hi_value, "torch.histc(): max must be larger than min");
  at::Tensor x = self.reshape({-1});
  at::Tensor lo, hi;
  if (lo_value == hi_value && x.numel() > 0) {
    lo = at::amin(x);
    hi = at::amax(x);
  } else {
    lo = at::full({}, lo_value, self.options());
    hi = at::full({}, hi_value, self.options());
  }
  if (x.numel() > 0) {
    at::Tensor same = lo == hi;
    lo = at::where(same, lo - 1, lo);
    hi = at::where(same, hi + 1, hi);
  }
  at::native::resize_output(out, {bins});
  if (x.numel() == 0) return out.zero_();
  at::Tensor inside = (x >= lo).logical_and(x <= hi);
  at::Tensor pos = at::floor((x - lo) * static_cast<double>(bins) / (hi - lo)).nan_to_num(0).clamp(0, bins - 1);
  at::Tensor counts = at::zeros({bins}, self.options()).scatter_add(0, pos.to(at::kLong), inside.to(self.scalar_type()));
  return out.copy_(counts);
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  at::Tensor out = at::empty({0}, self.options());
  return histc_out(self, bins, min, max, out);
}

// ------------------------------------------------------ pairwise distances ----

// x1 [..., P, M] and x2 [..., R, M]: [..., P, R, M], each pair's difference.
at::Tensor pair_differences(const at::Tensor& x1, const at::Tensor& x2) { return x1.unsqueeze(-2) - x2.unsqueeze(-3); }

at::Tensor cdist_forward(const at::Tensor& x1, const at::Tensor& x2, double p, std::optional<int64_t> /*mode*/) {
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  return at::linalg_vector_norm(pair_differences(x1, x2), p, {-1});
}

// d dist(x1_i, x2_j) / d x1_i, times the gradient, summed over j (0 where
// the distance is 0, as PyTorch's kernels).
at::Tensor cdist_backward(const at::Tensor& grad, const at::Tensor& x1, const at::Tensor& x2, double p,
                          const at::Tensor& dist) {
  if (p == 0 || x1.numel() == 0 || x2.numel() == 0) return at::zeros_like(x1);
  at::Tensor diff = pair_differences(x1, x2);
  at::Tensor d = dist.unsqueeze(-1);
  at::Tensor term;
  if (p == 1) {
    term = at::sign(diff);
  } else if (std::isinf(p)) {
    term = at::sign(diff) * (at::abs(diff) == d).to(diff.scalar_type());
  } else if (p == 2) {
    term = diff / d;
  } else {
    term = at::sign(diff) * at::pow(at::abs(diff), p - 1) / at::pow(d, p - 1);
  }
  term = at::where(d == 0, at::zeros_like(term), term);
  return (grad.unsqueeze(-1) * term).sum(-2);
}

// The distances of the rows i < j of x [N, M], row-major: the upper triangle
// of cdist(x, x).
at::Tensor pdist_forward(const at::Tensor& self, double p) {
  TORCH_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
  int64_t n = self.size(0);
  at::Tensor pairs = at::triu_indices(n, n, 1, self.options().dtype(at::kLong));
  at::Tensor full = cdist_forward(self, self, p, std::nullopt);
  return full.index({pairs[0], pairs[1]});
}

// The pairs' gradients and distances spread over both triangles of [N, N]:
// then each row's gradient is cdist's.
at::Tensor pdist_backward(const at::Tensor& grad, const at::Tensor& self, double p, const at::Tensor& pdist) {
  int64_t n = self.size(0);
  at::Tensor pairs = at::triu_indices(n, n, 1, self.options().dtype(at::kLong));
  auto symmetric = [&](const at::Tensor& values) {
    at::Tensor m = at::zeros({n, n}, self.options()).index_put({pairs[0], pairs[1]}, values);
    return m + m.t();
  };
  return cdist_backward(symmetric(grad), self, self, p, symmetric(pdist));
}

// ----------------------------------------------------------- nonzero_static ----

// The indices of the first `size` nonzero elements, rows of `fill_value`
// after them: nonzero's rows without its host read.
at::Tensor& nonzero_static_out(const at::Tensor& self, int64_t size, int64_t fill_value, at::Tensor& out) {
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  int64_t rank = self.dim();
  at::native::resize_output(out, {size, rank});
  out.fill_(fill_value);
  if (self.numel() == 0 || size == 0 || rank == 0) {
    if (rank == 0 && size > 0) out.resize_({size, 0});
    return out;
  }
  at::Tensor flat = self.reshape({-1}) != 0;
  at::Tensor order = at::cumsum(flat, 0) - 1;  // int64: each nonzero's rank
  at::Tensor row = at::where(flat.logical_and(order < size), order, at::full_like(order, size));
  at::Tensor position = at::arange(self.numel(), order.options());
  std::vector<at::Tensor> coordinates;
  int64_t stride = self.numel();
  for (int64_t d = 0; d < rank; ++d) {
    stride /= self.size(d);
    coordinates.push_back(at::div(position, stride, "floor").remainder(self.size(d)));
  }
  at::Tensor rows = at::full({size + 1, rank}, fill_value, out.options());
  rows.index_put_({row}, at::stack(coordinates, 1));
  return out.copy_(rows.narrow(0, 0, size));
}

at::Tensor nonzero_static(const at::Tensor& self, int64_t size, int64_t fill_value) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_static_out(self, size, fill_value, out);
}

// ---------------------------------------------------- multi-class margin ----

// Per sample and class j: max(0, margin - x[y] + x[j])^p, weighted by
// w[y], 0 at j = y. Rows [N, C] (a 1-d input is one row).
struct MarginTerms {
  at::Tensor x, y, hinge, active, weight_y;
};

MarginTerms margin_terms(const at::Tensor& self, const at::Tensor& target, const at::Scalar& margin,
                         const std::optional<at::Tensor>& weight) {
  at::Tensor x = self.dim() <= 1 ? self.reshape({1, -1}) : self;
  at::Tensor y = target.reshape({-1, 1});
  at::Tensor x_y = x.gather(1, y);
  at::Tensor hinge = (x - x_y + margin).clamp_min(0);
  at::Tensor other = at::arange(x.size(1), y.options()).unsqueeze(0) != y;
  at::Tensor active = other.logical_and(hinge > 0);
  at::Tensor weight_y = weight.has_value() && weight->defined() ? weight->index_select(0, y.reshape({-1})).unsqueeze(1)
                                                                : at::ones_like(x_y);
  return {x, y, hinge, active, weight_y};
}

at::Tensor multi_margin_loss(const at::Tensor& self, const at::Tensor& target, const at::Scalar& p,
                             const at::Scalar& margin, const std::optional<at::Tensor>& weight, int64_t reduction) {
  TORCH_CHECK(p.toLong() == 1 || p.toLong() == 2, "only p == 1 and p == 2 supported");
  auto t = margin_terms(self, target, margin, weight);
  at::Tensor h = at::where(t.active, t.hinge, at::zeros_like(t.hinge));
  if (p.toLong() == 2) h = h * h;
  at::Tensor loss = (h * t.weight_y).sum(1) / t.x.size(1);
  if (reduction == at::Reduction::Mean) return loss.mean();
  if (reduction == at::Reduction::Sum) return loss.sum();
  return self.dim() <= 1 ? loss.reshape(target.sizes()) : loss;
}

at::Tensor& multi_margin_loss_out(const at::Tensor& self, const at::Tensor& target, const at::Scalar& p,
                                  const at::Scalar& margin, const std::optional<at::Tensor>& weight, int64_t reduction,
                                  at::Tensor& out) {
  at::Tensor r = etpu::multi_margin_loss(self, target, p, margin, weight, reduction);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor multi_margin_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                      const at::Scalar& p, const at::Scalar& margin,
                                      const std::optional<at::Tensor>& weight, int64_t reduction) {
  auto t = margin_terms(self, target, margin, weight);
  at::Tensor slope = p.toLong() == 2 ? 2 * t.hinge : at::ones_like(t.hinge);
  at::Tensor g = at::where(t.active, slope, at::zeros_like(slope)) * t.weight_y / t.x.size(1);
  // x[y] takes minus the sum of the others' slopes.
  g = g.scatter_add(1, t.y, -g.sum(1, /*keepdim=*/true));
  at::Tensor scale = grad_output;
  if (reduction == at::Reduction::Mean) scale = grad_output / t.x.size(0);
  if (reduction == at::Reduction::None) scale = grad_output.reshape({-1, 1});
  return (g * scale).reshape(self.sizes());
}

// ---------------------------------------------------- multi-label margin ----

// Per sample [N, C] (a 1-d input is one row): its targets (target's entries
// before the first -1), each target slot j against each class k that is no
// target: max(0, 1 - (x[t_j] - x[k])).
struct LabelMargins {
  at::Tensor is_target, slots, valid, active, margin;
};

LabelMargins label_margins(const at::Tensor& self, const at::Tensor& target) {
  at::Tensor x = self.dim() <= 1 ? self.reshape({1, -1}) : self;
  at::Tensor t = target.reshape(x.sizes()).to(at::kLong);
  int64_t c = x.size(1);
  at::Tensor valid = at::cumprod((t != -1).to(at::kLong), 1).to(at::kBool);
  at::Tensor slots = at::where(valid, t, at::zeros_like(t));
  at::Tensor spread = at::where(valid, t, at::full_like(t, c));
  at::Tensor is_target =
      at::zeros({x.size(0), c + 1}, x.options()).scatter(1, spread, 1.0).narrow(1, 0, c).contiguous();
  at::Tensor margin = 1 - x.gather(1, slots).unsqueeze(2) + x.unsqueeze(1);
  at::Tensor active = valid.unsqueeze(2).logical_and((is_target == 0).unsqueeze(1)).logical_and(margin > 0);
  return {is_target, slots, valid, active, margin};
}

std::tuple<at::Tensor, at::Tensor> multilabel_margin_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                                  int64_t reduction) {
  TORCH_CHECK(self.dim() <= 2 && target.sizes() == self.sizes(),
              "multilabel_margin_loss: expected input [N, C] or [C] and target of its shape, got ", self.sizes(),
              " and ", target.sizes());
  auto m = label_margins(self, target);
  int64_t c = std::max<int64_t>(m.is_target.size(1), 1);
  at::Tensor loss = at::where(m.active, m.margin, at::zeros_like(m.margin)).sum({1, 2}) / c;
  if (reduction == at::Reduction::Mean) loss = loss.mean();
  else if (reduction == at::Reduction::Sum) loss = loss.sum();
  else if (self.dim() <= 1) loss = loss.reshape({});
  return {loss, m.is_target.view(target.sizes())};
}

std::tuple<at::Tensor&, at::Tensor&> multilabel_margin_loss_forward_out(const at::Tensor& self,
                                                                        const at::Tensor& target, int64_t reduction,
                                                                        at::Tensor& output, at::Tensor& is_target) {
  auto [loss, targets] = etpu::multilabel_margin_loss_forward(self, target, reduction);
  at::native::resize_output(output, loss.sizes());
  at::native::resize_output(is_target, targets.sizes());
  output.copy_(loss);
  is_target.copy_(targets);
  return {output, is_target};
}

// Each active pair adds 1/C to its class's gradient and takes it from its
// target's.
at::Tensor multilabel_margin_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                           const at::Tensor& target, int64_t reduction,
                                           const at::Tensor& /*is_target*/) {
  auto m = label_margins(self, target);
  int64_t n = m.is_target.size(0), c = std::max<int64_t>(m.is_target.size(1), 1);
  at::Tensor a = m.active.to(self.scalar_type()) / c;
  at::Tensor g = a.sum(1) - at::zeros_like(m.is_target).scatter_add(1, m.slots, a.sum(2));
  at::Tensor scale = grad_output;
  if (reduction == at::Reduction::Mean) scale = grad_output / n;
  if (reduction == at::Reduction::None) scale = grad_output.reshape({-1, 1});
  return (g * scale).reshape(self.sizes());
}

at::Tensor& multilabel_margin_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                                const at::Tensor& target, int64_t reduction,
                                                const at::Tensor& is_target, at::Tensor& grad_input) {
  at::Tensor g = etpu::multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target);
  at::native::resize_output(grad_input, g.sizes());
  return grad_input.copy_(g);
}

// 2^k for integral-valued float k in the dtype's normal range, exactly: its
// bits, (k + bias) << mantissa bits, built as an integer.
at::Tensor power_of_two(const at::Tensor& k) {
  if (k.scalar_type() == at::kDouble) return ((k.to(at::kLong) + 1023) * (int64_t{1} << 52)).view(at::kDouble);
  return ((k.to(at::kInt) + 127) * (1 << 23)).view(at::kFloat);
}

// frexp: x = mantissa * 2^exponent, |mantissa| in [0.5, 1). The exponent
// from floor(log2|x|) + 1, then corrected by one either way where log2
// rounded across a power of two; the scaling by 2^-exponent is exact (two
// exact powers of two, so neither leaves the normal range). Zeros, infinities
// and NaN keep their value with exponent 0, as the CPU. Half precision
// computes in float32 (exact both ways).
std::tuple<at::Tensor&, at::Tensor&> frexp_out(const at::Tensor& self, at::Tensor& mantissa, at::Tensor& exponent) {
  OpScope s;
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "torch.frexp() only supports floating-point dtypes, but got ", self.scalar_type());
  TORCH_CHECK(mantissa.scalar_type() == self.scalar_type(), "torch.frexp() expects mantissa to have dtype ",
              self.scalar_type(), " but got ", mantissa.scalar_type());
  TORCH_CHECK(exponent.scalar_type() == at::kInt, "torch.frexp() expects exponent to have int dtype but got ",
              exponent.scalar_type());
  at::Tensor x = self.scalar_type() == at::kDouble ? self : self.to(at::kFloat);
  at::Tensor regular = at::logical_and(at::isfinite(x), x != 0);
  at::Tensor a = at::where(regular, x.abs(), at::ones({}, x.options()));
  at::Tensor e = at::floor(at::log2(a)) + 1;
  at::Tensor half = at::floor(e / 2);
  at::Tensor m = x * power_of_two(-half) * power_of_two(half - e);
  at::Tensor big = m.abs() >= 1;
  e = at::where(big, e + 1, e);
  m = at::where(big, m * 0.5, m);
  at::Tensor small = m.abs() < 0.5;
  e = at::where(small, e - 1, e);
  m = at::where(small, m * 2, m);
  at::native::resize_output(mantissa, self.sizes());
  at::native::resize_output(exponent, self.sizes());
  mantissa.copy_(at::where(regular, m, x));
  exponent.copy_(at::where(regular, e, at::zeros({}, x.options())));
  return {mantissa, exponent};
}

double attention_scale(const at::Tensor& query, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

// q k^T * scale in the op-math dtype, the causal triangle and the mask
// applied (bool: where to attend; else added).
at::Tensor attention_scores(const at::Tensor& query, const at::Tensor& key, bool is_causal,
                            const std::optional<at::Tensor>& attn_mask, std::optional<double> scale) {
  at::ScalarType math = at::toOpMathType(query.scalar_type());
  at::Tensor scores = at::matmul(query.to(math), key.to(math).transpose(-2, -1)) * attention_scale(query, scale);
  double minus_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    at::Tensor keep = at::ones({query.size(-2), key.size(-2)}, query.options().dtype(at::kBool)).tril();
    scores = scores.masked_fill(keep.logical_not(), minus_inf);
  }
  if (attn_mask.has_value() && attn_mask->defined()) {
    if (attn_mask->scalar_type() == at::kBool)
      scores = scores.masked_fill(attn_mask->logical_not(), minus_inf);
    else
      scores = scores + attn_mask->to(math);
  }
  return scores;
}

// The CPU's flash attention entry (what scaled_dot_product_attention picks
// on the CPU, and what a graph traced there calls): softmax(q k^T * scale +
// mask) v, the mask additive (of the query's dtype, as the CPU requires),
// causal as a lower triangle; and the log-sum-exp of each query's scores [B, H, L] (float).
std::tuple<at::Tensor, at::Tensor> sdpa_flash_for_cpu(const at::Tensor& query, const at::Tensor& key,
                                                      const at::Tensor& value, double dropout_p, bool is_causal,
                                                      const std::optional<at::Tensor>& attn_mask,
                                                      std::optional<double> scale) {
  OpScope s;
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "scaled_dot_product_flash_attention_for_cpu: expected query, key and value of 4 dims, got ",
              query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  TORCH_CHECK(!attn_mask.has_value() || !attn_mask->defined() || attn_mask->scalar_type() == query.scalar_type(),
              "scaled_dot_product_attention_flash_attention: Attention mask is the same data type as query");
  at::ScalarType math = at::toOpMathType(query.scalar_type());
  at::Tensor scores = attention_scores(query, key, is_causal, attn_mask, scale);
  at::Tensor lse = at::logsumexp(scores, -1);
  at::Tensor weights = at::softmax(scores, -1);
  if (dropout_p > 0) weights = at::dropout(weights, dropout_p, /*train=*/true);
  at::Tensor out = at::matmul(weights, value.to(math)).to(query.scalar_type());
  return {out, lse};
}

// Its backward, from the saved log-sum-exp: p = exp(scores - lse), dv =
// p^T dout, ds = p * (dout v^T - rowsum(dout * out)), dq = ds k * scale, dk
// = ds^T q * scale. Dropout's mask is not saved, so a backward through it
// is refused (the forward with dropout is not differentiable here).
std::tuple<at::Tensor, at::Tensor, at::Tensor> sdpa_flash_for_cpu_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, double dropout_p, bool is_causal,
    const std::optional<at::Tensor>& attn_mask, std::optional<double> scale) {
  OpScope s;
  TORCH_CHECK(dropout_p == 0, "scaled_dot_product_flash_attention_for_cpu_backward on tpu: dropout_p = ", dropout_p,
              " is not supported (the dropout mask is not saved); use dropout_p = 0 or scaled_dot_product_attention");
  at::ScalarType math = at::toOpMathType(query.scalar_type());
  double factor = attention_scale(query, scale);
  at::Tensor q = query.to(math), k = key.to(math), v = value.to(math), dout = grad_out.to(math);
  at::Tensor scores = attention_scores(query, key, is_causal, attn_mask, scale);
  at::Tensor p = at::exp(scores - logsumexp.to(math).unsqueeze(-1));
  at::Tensor dv = at::matmul(p.transpose(-2, -1), dout);
  at::Tensor dp = at::matmul(dout, v.transpose(-2, -1));
  at::Tensor row = (dout * out.to(math)).sum(-1, /*keepdim=*/true);
  at::Tensor ds = p * (dp - row);
  at::Tensor dq = at::matmul(ds, k) * factor;
  at::Tensor dk = at::matmul(ds.transpose(-2, -1), q) * factor;
  return {dq.to(query.scalar_type()), dk.to(key.scalar_type()), dv.to(value.scalar_type())};
}

// GroupNorm's backward, from the saved mean and rstd [N, G]: with x_hat =
// (x - mean) rstd and g = dy * weight over each group's D elements, dx =
// rstd (g - mean(g) - x_hat mean(g x_hat)); dweight and dbias sum dy x_hat
// and dy over the batch and the spatial positions.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, c10::SymInt n_sym, c10::SymInt c_sym, c10::SymInt hw_sym, int64_t group,
    std::array<bool, 3> output_mask) {
  OpScope scope;
  int64_t n = n_sym.expect_int(), c = c_sym.expect_int(), hw = hw_sym.expect_int();
  at::ScalarType math = at::toOpMathType(input.scalar_type());
  at::Tensor x = input.reshape({n, group, c / group, hw}).to(math);
  at::Tensor dy = grad_out.reshape({n, group, c / group, hw}).to(math);
  at::Tensor m = mean.reshape({n, group, 1, 1}).to(math), r = rstd.reshape({n, group, 1, 1}).to(math);
  at::Tensor x_hat = (x - m) * r;
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    bool has_weight = weight.has_value() && weight->defined();
    at::Tensor g = has_weight ? dy * weight->reshape({1, group, c / group, 1}).to(math) : dy;
    at::Tensor g_mean = g.mean({2, 3}, /*keepdim=*/true);
    at::Tensor gx_mean = (g * x_hat).mean({2, 3}, /*keepdim=*/true);
    grad_input = (r * (g - g_mean - x_hat * gx_mean)).reshape(input.sizes()).to(input.scalar_type());
  }
  if (output_mask[1]) grad_weight = (dy * x_hat).sum({0, 3}).reshape({c}).to(input.scalar_type());
  if (output_mask[2]) grad_bias = dy.sum({0, 3}).reshape({c}).to(input.scalar_type());
  return {grad_input, grad_weight, grad_bias};
}

// Tensor.unfold's backward: each window's gradient added back at its
// positions (window w, offset k at w * step + k along dim).
at::Tensor unfold_backward(const at::Tensor& grad_in, c10::SymIntArrayRef input_sizes_sym, int64_t dim, int64_t size,
                           int64_t step) {
  OpScope scope;
  at::IntArrayRef input_sizes = C10_AS_INTARRAYREF_SLOW(input_sizes_sym);
  int64_t d = at::maybe_wrap_dim(dim, static_cast<int64_t>(std::max<size_t>(input_sizes.size(), 1)));
  at::Tensor out = at::zeros(input_sizes, grad_in.options());
  if (input_sizes.empty()) return out + grad_in.reshape({});
  int64_t windows = grad_in.size(d);
  // [..., windows, ..., size] -> [..., windows * size, ...]
  at::Tensor moved = at::movedim(grad_in, -1, d + 1);
  std::vector<int64_t> shape = moved.sizes().vec();
  shape[d] = windows * size;
  shape.erase(shape.begin() + d + 1);
  at::Tensor flat = moved.reshape(shape);
  auto longs = grad_in.options().dtype(at::kLong);
  at::Tensor index = (at::arange(windows, longs).unsqueeze(1) * step + at::arange(size, longs).unsqueeze(0)).reshape({-1});
  return out.index_add(d, index, flat);
}

// A tensor of zeros (autograd's stand-in for a gradient known to be zero).
at::Tensor efficient_zero_tensor(c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                                 std::optional<bool> pin_memory) {
  return at::zeros(C10_AS_INTARRAYREF_SLOW(size),
                   at::TensorOptions().dtype(dtype).layout(layout).device(device).pinned_memory(pin_memory));
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("norm.out", norm_out);
  m.impl("frexp.Tensor_out", frexp_out);
  m.impl("native_group_norm_backward", native_group_norm_backward);
  m.impl("unfold_backward", unfold_backward);
  m.impl("_efficientzerotensor", efficient_zero_tensor);
  m.impl("_scaled_dot_product_flash_attention_for_cpu", sdpa_flash_for_cpu);
  m.impl("_scaled_dot_product_flash_attention_for_cpu_backward", sdpa_flash_for_cpu_backward);
  m.impl("norm.dtype_out", norm_dtype_out);
  m.impl("aminmax.out", aminmax_out);
  m.impl("round.decimals_out", round_decimals_out);
  m.impl("renorm.out", renorm_out);
  m.impl("addbmm", addbmm);
  m.impl("addbmm.out", addbmm_out);
  m.impl("scatter.reduce_out", scatter_reduce_out);
  m.impl("scatter.value_reduce_out", scatter_value_reduce_out);
  m.impl("_batch_norm_with_update", batch_norm_with_update);
  m.impl("batch_norm_backward", etpu::batch_norm_backward);
  m.impl("max_unpool2d", max_unpool2d);
  m.impl("max_unpool2d.out", max_unpool2d_out);
  m.impl("max_unpool3d", max_unpool3d);
  m.impl("max_unpool3d.out", max_unpool3d_out);
  m.impl("nll_loss2d_forward", nll_loss2d_forward);
  m.impl("nll_loss2d_forward.output", nll_loss2d_forward_out);
  m.impl("nll_loss2d_backward", nll_loss2d_backward);
  m.impl("nll_loss2d_backward.grad_input", nll_loss2d_backward_out);
  m.impl("channel_shuffle", channel_shuffle);
  m.impl("masked_scatter_", masked_scatter_);
  m.impl("histc", histc);
  m.impl("histc.out", histc_out);
  m.impl("_cdist_forward", cdist_forward);
  m.impl("_cdist_backward", cdist_backward);
  m.impl("_pdist_forward", pdist_forward);
  m.impl("_pdist_backward", pdist_backward);
  m.impl("nonzero_static", etpu::nonzero_static);
  m.impl("nonzero_static.out", nonzero_static_out);
  m.impl("multi_margin_loss", etpu::multi_margin_loss);
  m.impl("multi_margin_loss.out", multi_margin_loss_out);
  m.impl("multi_margin_loss_backward", etpu::multi_margin_loss_backward);
  m.impl("multilabel_margin_loss_forward", etpu::multilabel_margin_loss_forward);
  m.impl("multilabel_margin_loss_forward.output", multilabel_margin_loss_forward_out);
  m.impl("multilabel_margin_loss_backward", etpu::multilabel_margin_loss_backward);
  m.impl("multilabel_margin_loss_backward.grad_input", multilabel_margin_loss_backward_out);
}
