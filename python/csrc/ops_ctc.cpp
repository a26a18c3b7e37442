// CTC loss (F.ctc_loss: speech and handwriting recognition) and its
// backward as at:: compositions.
//
// The forward (alpha) recursion of Graves et al. over the extended label
// sequence (blank, l1, blank, l2, ..., blank), in log space, one step per
// time step for the whole batch at once; a sequence's alphas stop at its
// input length. Log-zero is a large negative finite number instead of -inf,
// so that an impossible alignment gives finite intermediates instead of NaN;
// such a loss comes out +inf (ATen's ctc_loss zeroes it for zero_infinity,
// and the backward zeroes its gradient), as PyTorch's, and the
// returned log-alphas have -inf where PyTorch's do. The backward runs the
// beta recursion the same way and gives PyTorch's gradient: exp(log_probs)
// minus each class's posterior occupation (the gradient for the logits
// before a log_softmax, which is what PyTorch's CTC gradient is).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

constexpr double kLogZero = -1e30;

// log(exp(a) + exp(b) + exp(c)), finite for finite inputs.
at::Tensor log_sum_exp3(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  at::Tensor m = at::maximum(at::maximum(a, b), c);
  return m + at::log(at::exp(a - m) + at::exp(b - m) + at::exp(c - m));
}

// x [N, L] shifted right by k along the labels, log-zero filled.
at::Tensor shifted(const at::Tensor& x, int64_t k) {
  int64_t l = x.size(1);
  if (k >= l) return at::full_like(x, kLogZero);
  at::Tensor fill = at::full({x.size(0), k}, kLogZero, x.options());
  return at::cat({fill, x.narrow(1, 0, l - k)}, 1);
}

// The extended labels [N, L] (blank at even positions, L = 2 max(S) + 1)
// and where a step may skip the blank before it (l'_s != blank and l'_s !=
// l'_(s-2)).
struct Extended {
  at::Tensor labels, skip_allowed;
  int64_t length;
};

Extended extended_labels(const at::Tensor& log_probs, const at::Tensor& targets, at::IntArrayRef input_lengths,
                         at::IntArrayRef target_lengths, int64_t blank) {
  TORCH_CHECK(log_probs.dim() == 3, "ctc_loss: expected log_probs of shape (T, N, C), got ", log_probs.sizes());
  int64_t t_max = log_probs.size(0), n = log_probs.size(1), classes = log_probs.size(2);
  TORCH_CHECK(static_cast<int64_t>(input_lengths.size()) == n && static_cast<int64_t>(target_lengths.size()) == n,
              "ctc_loss: expected ", n, " input and target lengths, got ", input_lengths.size(), " and ",
              target_lengths.size());
  TORCH_CHECK(blank >= 0 && blank < classes, "ctc_loss: blank must be in label range");
  for (int64_t i = 0; i < n; ++i)
    TORCH_CHECK(input_lengths[i] >= 0 && input_lengths[i] <= t_max, "ctc_loss: Expected input_lengths to have value "
                "at most ", t_max, ", but got value ", input_lengths[i], " (while checking arguments for ctc_loss_cpu)");
  int64_t s_max = 0;
  for (int64_t v : target_lengths) s_max = std::max(s_max, v);
  auto longs = log_probs.options().dtype(at::kLong);
  // Targets padded to [N, s_max] (a 1-d concatenation is cut per sequence).
  at::Tensor padded;
  if (targets.dim() == 1) {
    std::vector<at::Tensor> rows;
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      at::Tensor row = targets.narrow(0, offset, target_lengths[i]).to(at::kLong);
      rows.push_back(at::constant_pad_nd(row, {0, s_max - target_lengths[i]}, blank));
      offset += target_lengths[i];
    }
    padded = n > 0 ? at::stack(rows) : at::zeros({0, s_max}, longs);
  } else {
    padded = targets.narrow(1, 0, std::min<int64_t>(s_max, targets.size(1))).to(at::kLong);
  }
  int64_t l = 2 * s_max + 1;
  at::Tensor labels = at::full({n, l}, blank, longs);
  if (s_max > 0) labels.narrow(1, 1, 2 * s_max).view({n, s_max, 2}).select(2, 0).copy_(padded);
  at::Tensor two_before = l > 2 ? at::cat({at::full({n, 2}, blank, longs), labels.narrow(1, 0, l - 2)}, 1)
                                : at::full({n, l}, blank, longs);
  at::Tensor skip_allowed = at::logical_and(labels != blank, labels != two_before);
  return {labels, skip_allowed, l};
}

at::Tensor long_vector(at::IntArrayRef values, const at::Tensor& like) {
  return at::tensor(std::vector<int64_t>(values.begin(), values.end()), like.options().dtype(at::kLong));
}

std::tuple<at::Tensor, at::Tensor> ctc_loss(const at::Tensor& log_probs, const at::Tensor& targets,
                                            at::IntArrayRef input_lengths, at::IntArrayRef target_lengths,
                                            int64_t blank, bool zero_infinity) {
  OpScope scope;
  (void)zero_infinity;  // applied by ATen's ctc_loss and by the backward
  Extended x = extended_labels(log_probs, targets, input_lengths, target_lengths, blank);
  int64_t t_max = log_probs.size(0), n = log_probs.size(1), l = x.length;
  auto longs = log_probs.options().dtype(at::kLong);
  at::Tensor emissions = at::gather(log_probs, 2, x.labels.unsqueeze(0).expand({t_max, n, l}));  // [T, N, L]
  at::Tensor positions = at::arange(l, longs).unsqueeze(0);
  at::Tensor lengths = long_vector(input_lengths, log_probs).unsqueeze(1);
  at::Tensor log_zero = at::full({}, kLogZero, log_probs.options());
  at::Tensor alpha = at::where(positions < 2, emissions.select(0, 0), log_zero);
  alpha = at::where(lengths > 0, alpha, log_zero);
  std::vector<at::Tensor> alphas = {alpha};
  for (int64_t t = 1; t < t_max; ++t) {
    at::Tensor two_back = at::where(x.skip_allowed, shifted(alpha, 2), log_zero);
    at::Tensor next = log_sum_exp3(alpha, shifted(alpha, 1), two_back) + emissions.select(0, t);
    alpha = at::where(lengths > t, next, alpha);
    alphas.push_back(alpha);
  }
  // -log(alpha(L_n - 1) + alpha(L_n - 2)) at each sequence's last step.
  at::Tensor target_len = long_vector(target_lengths, log_probs);
  at::Tensor last = (2 * target_len).unsqueeze(1);
  at::Tensor before = at::clamp_min(2 * target_len - 1, 0).unsqueeze(1);
  at::Tensor end = alpha.gather(1, last).squeeze(1);
  at::Tensor end_before = at::where(target_len > 0, alpha.gather(1, before).squeeze(1), log_zero);
  at::Tensor m = at::maximum(end, end_before);
  at::Tensor loss = -(m + at::log(at::exp(end - m) + at::exp(end_before - m)));
  at::Tensor impossible = loss > -kLogZero / 10;
  double inf = std::numeric_limits<double>::infinity();
  // +inf even with zero_infinity: ATen's ctc_loss zeroes it, and the
  // backward reads the infinity to zero the gradient.
  loss = at::where(impossible, at::full({}, inf, loss.options()), loss);
  at::Tensor log_alpha = at::stack(alphas, 1);  // [N, T, L]
  log_alpha = at::where(log_alpha < kLogZero / 10, at::full({}, -inf, log_alpha.options()), log_alpha);
  return {loss, log_alpha};
}

// x [N, L] shifted left by k along the labels, log-zero filled.
at::Tensor shifted_left(const at::Tensor& x, int64_t k) {
  int64_t l = x.size(1);
  if (k >= l) return at::full_like(x, kLogZero);
  at::Tensor fill = at::full({x.size(0), k}, kLogZero, x.options());
  return at::cat({x.narrow(1, k, l - k), fill}, 1);
}

at::Tensor ctc_loss_backward(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                             at::IntArrayRef input_lengths, at::IntArrayRef target_lengths,
                             const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                             bool zero_infinity) {
  OpScope scope;
  Extended x = extended_labels(log_probs, targets, input_lengths, target_lengths, blank);
  int64_t t_max = log_probs.size(0), n = log_probs.size(1), l = x.length;
  at::Tensor expanded = x.labels.unsqueeze(0).expand({t_max, n, l});
  at::Tensor emissions = at::gather(log_probs, 2, expanded);  // [T, N, L]
  at::Tensor positions = at::arange(l, log_probs.options().dtype(at::kLong)).unsqueeze(0);
  at::Tensor lengths = long_vector(input_lengths, log_probs).unsqueeze(1);
  at::Tensor target_len = long_vector(target_lengths, log_probs).unsqueeze(1);
  at::Tensor log_zero = at::full({}, kLogZero, log_probs.options());
  // Beta from each sequence's last step: its last two labels at t = T_n - 1.
  at::Tensor ends = at::logical_and(positions <= 2 * target_len, positions >= 2 * target_len - 1);
  at::Tensor skip_from_above = shifted_left(x.skip_allowed.to(log_probs.scalar_type()), 2) > 0;
  at::Tensor beta = at::full({n, l}, kLogZero, log_probs.options());
  std::vector<at::Tensor> betas(t_max);
  for (int64_t t = t_max - 1; t >= 0; --t) {
    at::Tensor start = at::where(ends, emissions.select(0, t), log_zero);
    at::Tensor two_ahead = at::where(skip_from_above, shifted_left(beta, 2), log_zero);
    at::Tensor next = log_sum_exp3(beta, shifted_left(beta, 1), two_ahead) + emissions.select(0, t);
    beta = at::where(lengths - 1 == t, start, at::where(lengths - 1 > t, next, log_zero));
    betas[t] = beta;
  }
  at::Tensor alpha = at::where(at::isinf(log_alpha), log_zero, log_alpha).transpose(0, 1);  // [T, N, L]
  at::Tensor nll = neg_log_likelihood.unsqueeze(0).unsqueeze(2);
  // Each label position's posterior, summed into its class.
  at::Tensor occupation = at::exp(alpha + at::stack(betas) - emissions + nll);
  at::Tensor per_class = at::zeros_like(log_probs).scatter_add(2, expanded, occupation);
  at::Tensor g = at::exp(log_probs) - per_class;
  at::Tensor inside = (at::arange(t_max, lengths.options()).unsqueeze(1) < lengths.squeeze(1).unsqueeze(0))
                          .unsqueeze(2);  // [T, N, 1]
  at::Tensor zero = at::zeros({}, log_probs.options());
  g = at::where(inside, g, zero) * grad.unsqueeze(0).unsqueeze(2);
  if (zero_infinity) g = at::where(at::isinf(neg_log_likelihood).unsqueeze(0).unsqueeze(2), zero, g);
  return g;
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs, const at::Tensor& targets,
                                                   const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                                   int64_t blank, bool zero_infinity) {
  // The lengths shape the computation: one host read, as the CPU's.
  at::Tensor in = input_lengths.to(at::kCPU).to(at::kLong).contiguous();
  at::Tensor target = target_lengths.to(at::kCPU).to(at::kLong).contiguous();
  return ctc_loss(log_probs, targets, at::IntArrayRef(in.data_ptr<int64_t>(), in.numel()),
                  at::IntArrayRef(target.data_ptr<int64_t>(), target.numel()), blank, zero_infinity);
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                                    const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                    const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                                    bool zero_infinity) {
  at::Tensor in = input_lengths.to(at::kCPU).to(at::kLong).contiguous();
  at::Tensor target = target_lengths.to(at::kCPU).to(at::kLong).contiguous();
  return ctc_loss_backward(grad, log_probs, targets, at::IntArrayRef(in.data_ptr<int64_t>(), in.numel()),
                           at::IntArrayRef(target.data_ptr<int64_t>(), target.numel()), neg_log_likelihood, log_alpha,
                           blank, zero_infinity);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", etpu::ctc_loss);
  m.impl("_ctc_loss.Tensor", etpu::ctc_loss_tensor);
  m.impl("_ctc_loss_backward", etpu::ctc_loss_backward);
  m.impl("_ctc_loss_backward.Tensor", etpu::ctc_loss_backward_tensor);
}
