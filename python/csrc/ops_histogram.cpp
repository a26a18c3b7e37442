// torch.histogram and torch.histogramdd as at:: compositions (each call
// dispatches to this backend's kernels). The bin edges are PyTorch's: the
// range given, or the data's minimum and maximum (one host read, as the CPU
// kernel reads them), widened by 0.5 on each side when they are equal, then
// linspace. An element falls in the bin whose edges hold it, the last bin
// closed on the right (searchsorted on the edges, as the CPU's
// upper_bound); elements outside the edges and NaNs are not counted.
// torch.bincount likewise: its length is the data's maximum + 1 (one host
// read of the extremes, as the CPU and CUDA kernels read them), the counts
// an index_add.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

// Each dim's outer edges: `range` (2 per dim) or the data's extremes.
std::vector<std::pair<double, double>> outer_edges(const char* op, const at::Tensor& points, int64_t dims,
                                                   std::optional<at::ArrayRef<double>> range) {
  std::vector<std::pair<double, double>> edges(dims);
  if (range.has_value()) {
    TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * dims, op, ": expected ", 2 * dims,
                " sequences in range, but got ", range->size());
    for (int64_t d = 0; d < dims; ++d) edges[d] = {(*range)[2 * d], (*range)[2 * d + 1]};
  } else if (points.size(0) > 0) {
    // One host read for every dim's extremes.
    at::Tensor extremes = at::stack({std::get<0>(at::aminmax(points, 0)), std::get<1>(at::aminmax(points, 0))})
                              .to(at::kDouble)
                              .cpu();
    for (int64_t d = 0; d < dims; ++d)
      edges[d] = {extremes[0][d].item<double>(), extremes[1][d].item<double>()};
  }
  for (int64_t d = 0; d < dims; ++d) {
    auto& [lo, hi] = edges[d];
    TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), op, ": range of [", lo, ", ", hi, "] is not finite");
    TORCH_CHECK(lo <= hi, op, ": min should not exceed max, but got min ", lo, " max ", hi);
    if (lo == hi) {
      lo -= 0.5;
      hi += 0.5;
    }
  }
  return edges;
}

std::vector<at::Tensor> bin_edges_of(const char* op, const at::Tensor& points, at::IntArrayRef bins,
                                     std::optional<at::ArrayRef<double>> range) {
  int64_t dims = points.size(1);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == dims, op, ": expected ", dims, " sequences of bin edges for a ",
              dims, "-dimensional histogram but got ", bins.size());
  auto outer = outer_edges(op, points, dims, range);
  std::vector<at::Tensor> edges;
  for (int64_t d = 0; d < dims; ++d) {
    TORCH_CHECK(bins[d] > 0, op, ": expected bins[", d, "] to be a positive integer, but got ", bins[d]);
    edges.push_back(at::linspace(outer[d].first, outer[d].second, bins[d] + 1, points.options()));
  }
  return edges;
}

// The histogram of `points` [N, D] over per-dim `edges`, weighted, as a
// tensor of the bins' counts [bins_0, ..., bins_(D-1)].
at::Tensor counts(const at::Tensor& points, const std::vector<at::Tensor>& edges,
                  const std::optional<at::Tensor>& weight, bool density) {
  int64_t n = points.size(0), dims = points.size(1);
  auto longs = points.options().dtype(at::kLong);
  at::Tensor flat = at::zeros({n}, longs);
  at::Tensor inside = at::ones({n}, points.options().dtype(at::kBool));
  std::vector<int64_t> shape;
  int64_t total = 1;
  for (int64_t d = 0; d < dims; ++d) {
    const at::Tensor& e = edges[d];
    int64_t k = e.size(0) - 1;
    at::Tensor x = points.select(1, d).contiguous();
    at::Tensor pos = at::searchsorted(e, x, /*out_int32=*/false, /*right=*/true) - 1;
    // The last edge closes the last bin.
    pos = at::where(x == e[k], at::full({}, k - 1, longs), pos);
    inside = at::logical_and(inside, at::logical_and(x >= e[0], x <= e[k]));
    flat = flat * k + at::clamp(pos, 0, std::max<int64_t>(k - 1, 0));
    shape.push_back(k);
    total *= k;
  }
  at::Tensor w = weight.has_value() ? weight->reshape({n}).to(points.scalar_type())
                                    : at::ones({n}, points.options());
  w = at::where(inside, w, at::zeros({}, points.options()));
  at::Tensor hist = at::zeros({total}, points.options()).index_add_(0, flat, w).reshape(shape);
  if (density) {
    at::Tensor scale = hist.sum();
    for (int64_t d = 0; d < dims; ++d) {
      std::vector<int64_t> view(dims, 1);
      view[d] = shape[d];
      at::Tensor widths = edges[d].narrow(0, 1, shape[d]) - edges[d].narrow(0, 0, shape[d]);
      scale = scale * widths.view(view);
    }
    hist = hist / scale;
  }
  return hist;
}

// The input's points [N, D]: a 1-d histogram flattens its input.
at::Tensor points_of(const at::Tensor& self, int64_t dims) {
  return dims == 1 ? self.reshape({-1, 1}) : self.reshape({-1, self.size(-1)});
}

void check_weight(const char* op, const at::Tensor& self, const std::optional<at::Tensor>& weight, bool flat) {
  if (!weight.has_value()) return;
  auto expected = flat ? self.sizes().vec() : self.sizes().slice(0, self.dim() - 1).vec();
  TORCH_CHECK(weight->sizes().vec() == expected, op, ": if weight tensor is provided it should have the same shape ",
              "as the input tensor excluding its innermost dimension, but got input with shape ", self.sizes(),
              " and weight with shape ", weight->sizes());
}

std::tuple<at::Tensor&, at::Tensor&> histogram_bin_ct_out(const at::Tensor& self, int64_t bins,
                                                           std::optional<at::ArrayRef<double>> range,
                                                           const std::optional<at::Tensor>& weight, bool density,
                                                           at::Tensor& hist, at::Tensor& bin_edges) {
  OpScope s;
  check_weight("torch.histogram", self, weight, true);
  at::Tensor points = points_of(self, 1);
  at::Tensor edges = bin_edges_of("torch.histogram", points, {bins}, range)[0];
  at::Tensor h = counts(points, {edges}, weight, density);
  at::native::resize_output(hist, h.sizes());
  at::native::resize_output(bin_edges, edges.sizes());
  hist.copy_(h);
  bin_edges.copy_(edges);
  return {hist, bin_edges};
}

std::tuple<at::Tensor&, at::Tensor&> histogram_bins_tensor_out(const at::Tensor& self, const at::Tensor& bins,
                                                               const std::optional<at::Tensor>& weight, bool density,
                                                               at::Tensor& hist, at::Tensor& bin_edges) {
  OpScope s;
  check_weight("torch.histogram", self, weight, true);
  TORCH_CHECK(bins.dim() == 1 && bins.numel() > 0, "torch.histogram: bins tensor should have one dimension and at ",
              "least 1 element, but got ", bins.sizes());
  at::Tensor edges = bins.to(self.scalar_type());
  at::Tensor h = counts(points_of(self, 1), {edges}, weight, density);
  at::native::resize_output(hist, h.sizes());
  at::native::resize_output(bin_edges, edges.sizes());
  hist.copy_(h);
  bin_edges.copy_(edges);
  return {hist, bin_edges};
}

std::tuple<at::Tensor, at::Tensor> histogram_bin_ct(const at::Tensor& self, int64_t bins,
                                                    std::optional<at::ArrayRef<double>> range,
                                                    const std::optional<at::Tensor>& weight, bool density) {
  at::Tensor hist = at::empty({0}, self.options()), edges = at::empty({0}, self.options());
  histogram_bin_ct_out(self, bins, range, weight, density, hist, edges);
  return {hist, edges};
}

std::tuple<at::Tensor, at::Tensor> histogram_bins_tensor(const at::Tensor& self, const at::Tensor& bins,
                                                         const std::optional<at::Tensor>& weight, bool density) {
  at::Tensor hist = at::empty({0}, self.options()), edges = at::empty({0}, self.options());
  histogram_bins_tensor_out(self, bins, weight, density, hist, edges);
  return {hist, edges};
}

std::vector<at::Tensor> histogramdd_bin_edges(const at::Tensor& self, at::IntArrayRef bins,
                                              std::optional<at::ArrayRef<double>> range,
                                              const std::optional<at::Tensor>& weight, bool density) {
  OpScope s;
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions, but got ",
              self.dim());
  check_weight("torch.histogramdd", self, weight, false);
  return bin_edges_of("torch.histogramdd", points_of(self, self.size(-1)), bins, range);
}

at::Tensor histogramdd_from_bin_cts(const at::Tensor& self, at::IntArrayRef bins, std::optional<at::ArrayRef<double>> range,
                                    const std::optional<at::Tensor>& weight, bool density) {
  OpScope s;
  at::Tensor points = points_of(self, self.size(-1));
  return counts(points, histogramdd_bin_edges(self, bins, range, weight, density), weight, density);
}

at::Tensor histogramdd_from_bin_tensors(const at::Tensor& self, at::TensorList bins,
                                        const std::optional<at::Tensor>& weight, bool density) {
  OpScope s;
  check_weight("torch.histogramdd", self, weight, false);
  std::vector<at::Tensor> edges;
  for (const at::Tensor& b : bins) edges.push_back(b.to(self.scalar_type()));
  return counts(points_of(self, self.size(-1)), edges, weight, density);
}

}  // namespace
}  // namespace etpu

namespace etpu {
namespace {

at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength) {
  TORCH_CHECK(self.dim() == 1 && at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
              "bincount only supports 1-d non-negative integral inputs.");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  bool weighted = weights.has_value() && weights->defined();
  if (weighted)
    TORCH_CHECK(weights->dim() == 1 && weights->size(0) == self.size(0),
                "weights should be 1-d and have the same length as input");
  int64_t length = minlength;
  if (self.numel() > 0) {
    at::Tensor extremes = at::stack({self.min(), self.max()}).to(at::kLong).cpu();
    TORCH_CHECK(extremes[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
    length = std::max(length, extremes[1].item<int64_t>() + 1);
  }
  // The CPU kernel's dtypes: int64 counts, float32 for float32 weights,
  // float64 for any other weights.
  at::ScalarType t = !weighted ? at::kLong : weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  at::Tensor counts = at::zeros({length}, self.options().dtype(t));
  if (self.numel() == 0) return counts;
  at::Tensor added = weighted ? weights->to(t) : at::ones({self.size(0)}, counts.options());
  return counts.index_add_(0, self, added);
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("histogram.bin_ct", histogram_bin_ct);
  m.impl("histogram.bin_ct_out", histogram_bin_ct_out);
  m.impl("histogram.bins_tensor", histogram_bins_tensor);
  m.impl("histogram.bins_tensor_out", histogram_bins_tensor_out);
  m.impl("_histogramdd_bin_edges", histogramdd_bin_edges);
  m.impl("_histogramdd_from_bin_cts", histogramdd_from_bin_cts);
  m.impl("_histogramdd_from_bin_tensors", histogramdd_from_bin_tensors);
  m.impl("bincount", bincount);
}
