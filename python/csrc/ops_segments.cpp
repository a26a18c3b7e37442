// Reductions over segments of a tensor, made of at:: calls as
// ops_composed.cpp's: segment_reduce and embedding_bag (a bag is a segment
// of the rows an index picks), each with its gradients.

#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>
#include <tuple>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

// segment_reduce: `data`'s elements along `axis` in consecutive segments of
// the given lengths (or between offsets), each reduced ("sum", "prod",
// "max", "min", "mean"), `initial` taking part in every segment; an empty
// segment is `initial`, else the reduction's identity (NaN for mean). Each
// element's segment from searchsorted on the lengths' running sum; a
// scatter reduce into the segments (one more, which takes what lies past the
// lengths' total, and is dropped).
struct Segments {
  at::Tensor ids;     // [*batch, n]: each element's segment
  at::Tensor counts;  // [*batch, segments]
  int64_t axis, segments;
};

Segments segments_of(const at::Tensor& data, const std::optional<at::Tensor>& lengths,
                     const std::optional<at::Tensor>& offsets, int64_t axis, bool check_total) {
  // Autograd passes an absent optional as an undefined tensor.
  bool has_lengths = lengths.has_value() && lengths->defined();
  bool has_offsets = offsets.has_value() && offsets->defined();
  TORCH_CHECK(has_lengths != has_offsets, "segment_reduce(): Either lengths or offsets must be defined, and not both");
  at::Tensor l = has_lengths ? *lengths : at::diff(*offsets, 1, -1);
  axis = at::maybe_wrap_dim(axis, data.dim());
  TORCH_CHECK(l.dim() == axis + 1, "segment_reduce(): Expected lengths (or offsets) of ", axis + 1,
              " dims for axis ", axis, ", got ", l.sizes());
  int64_t n = data.size(axis), s = l.size(-1);
  l = l.to(at::kLong);
  at::Tensor ends = at::cumsum(l, -1);
  if (check_total && n > 0)
    TORCH_CHECK((ends.select(-1, s - 1) == n).all().item<bool>(),
                "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                "when !unsafe.");
  std::vector<int64_t> batch(l.sizes().begin(), l.sizes().end() - 1);
  std::vector<int64_t> positions_shape = batch;
  positions_shape.push_back(n);
  at::Tensor positions = at::arange(n, l.options()).expand(positions_shape).contiguous();
  at::Tensor ids = at::searchsorted(ends.contiguous(), positions, /*out_int32=*/false, /*right=*/true);
  std::vector<int64_t> counts_shape = batch;
  counts_shape.push_back(s + 1);
  at::Tensor counts = at::zeros(counts_shape, data.options()).scatter_add_(-1, ids, at::ones_like(ids, data.options()));
  return {ids, counts.narrow(-1, 0, s), axis, s};
}

// ids [*batch, n] as an index of data's shape along the axis.
at::Tensor spread_ids(const Segments& g, const at::Tensor& data) {
  std::vector<int64_t> shape(g.ids.sizes().begin(), g.ids.sizes().end());
  for (int64_t d = g.axis + 1; d < data.dim(); ++d) shape.push_back(1);
  return g.ids.view(shape).expand(data.sizes());
}

// A per-segment tensor [*batch, segments, ...] read at each element's
// segment (the one past the last reads zero).
at::Tensor per_element(const Segments& g, const at::Tensor& per_segment, const at::Tensor& data) {
  at::Tensor padded = at::cat({per_segment, at::zeros_like(per_segment.narrow(g.axis, 0, 1))}, g.axis);
  return at::gather(padded, g.axis, spread_ids(g, data));
}

// counts [*batch, segments] broadcast against per-segment values.
at::Tensor counts_like(const Segments& g, const at::Tensor& per_segment) {
  std::vector<int64_t> shape(g.counts.sizes().begin(), g.counts.sizes().end());
  for (int64_t d = g.axis + 1; d < per_segment.dim(); ++d) shape.push_back(1);
  return g.counts.view(shape);
}

at::Tensor segment_reduce(const at::Tensor& data, c10::string_view reduce, const std::optional<at::Tensor>& lengths,
                          const std::optional<at::Tensor>& indices, const std::optional<at::Tensor>& offsets,
                          int64_t axis, bool unsafe, const std::optional<at::Scalar>& initial) {
  OpScope scope;
  TORCH_CHECK(!indices.has_value(), "segment_reduce(): indices based reduction is not supported yet.");
  Segments g = segments_of(data, lengths, offsets, axis, !unsafe);
  std::vector<int64_t> shape = data.sizes().vec();
  shape[g.axis] = g.segments + 1;
  at::Tensor index = spread_ids(g, data);
  double inf = std::numeric_limits<double>::infinity();
  at::Tensor out;
  if (reduce == "max" || reduce == "min") {
    bool max = reduce == "max";
    out = at::full(shape, max ? -inf : inf, data.options())
              .scatter_reduce(g.axis, index, data, max ? "amax" : "amin", /*include_self=*/false);
  } else if (reduce == "prod") {
    out = at::ones(shape, data.options()).scatter_reduce(g.axis, index, data, "prod", /*include_self=*/true);
  } else if (reduce == "sum" || reduce == "mean") {
    out = at::zeros(shape, data.options()).scatter_add(g.axis, index, data);
  } else {
    TORCH_CHECK(false, "segment_reduce(): reduce must be one of sum, prod, max, min, mean, got ", reduce);
  }
  out = out.narrow(g.axis, 0, g.segments);
  at::Tensor counts = counts_like(g, out);
  if (initial.has_value()) {
    at::Tensor init = at::full({}, *initial, data.options());
    if (reduce == "max") out = at::maximum(out, init);
    if (reduce == "min") out = at::minimum(out, init);
    if (reduce == "sum") out = out + init;
    if (reduce == "prod") out = out * init;
    if (reduce == "mean") out = at::where(counts == 0, init, (out + init) / counts);
  } else if (reduce == "mean") {
    out = out / counts;
  }
  return out;
}

// Its gradient: sum and mean spread the segment's gradient (over the count);
// max and min give it to the elements equal to the result, shared among
// ties; prod gives each element the product of the others (the result over
// the element, or with zeros: the product of the non-zeros to a segment's
// only zero, nothing else).
at::Tensor segment_reduce_backward(const at::Tensor& grad, const at::Tensor& output, const at::Tensor& data,
                                   c10::string_view reduce, const std::optional<at::Tensor>& lengths,
                                   const std::optional<at::Tensor>& offsets, int64_t axis,
                                   const std::optional<at::Scalar>& initial) {
  OpScope scope;
  Segments g = segments_of(data, lengths, offsets, axis, false);
  at::Tensor counts = counts_like(g, grad);
  if (reduce == "sum") return per_element(g, grad, data);
  if (reduce == "mean") return per_element(g, grad / counts.clamp_min(1), data);
  if (reduce == "max" || reduce == "min") {
    at::Tensor hit = (data == per_element(g, output, data)).to(data.scalar_type());
    std::vector<int64_t> shape = data.sizes().vec();
    shape[g.axis] = g.segments + 1;
    at::Tensor ties = at::zeros(shape, data.options())
                          .scatter_add(g.axis, spread_ids(g, data), hit)
                          .narrow(g.axis, 0, g.segments);
    return hit * per_element(g, grad / ties.clamp_min(1), data);
  }
  TORCH_CHECK(reduce == "prod", "segment_reduce(): reduce must be one of sum, prod, max, min, mean, got ", reduce);
  at::Tensor zero = data == 0;
  at::Tensor index = spread_ids(g, data);
  std::vector<int64_t> shape = data.sizes().vec();
  shape[g.axis] = g.segments + 1;
  at::Tensor zeros_in = at::zeros(shape, data.options())
                            .scatter_add(g.axis, index, zero.to(data.scalar_type()))
                            .narrow(g.axis, 0, g.segments);
  at::Tensor nonzero_product = at::ones(shape, data.options())
                                   .scatter_reduce(g.axis, index, at::where(zero, at::ones_like(data), data), "prod",
                                                   /*include_self=*/true)
                                   .narrow(g.axis, 0, g.segments);
  if (initial.has_value()) nonzero_product = nonzero_product * initial->toDouble();
  at::Tensor grad_e = per_element(g, grad, data);
  at::Tensor others = at::where(zero, at::where(per_element(g, zeros_in, data) == 1,
                                                per_element(g, nonzero_product, data), at::zeros_like(data)),
                                per_element(g, output, data) / at::where(zero, at::ones_like(data), data));
  return grad_e * others;
}

// embedding_bag: the rows of `weight` that `indices` pick, reduced per bag
// (bags start at `offsets`): summed (times per_sample_weights), averaged, or
// their maximum, padding_idx's rows left out (and not counted); an empty
// bag is zeros. Also what the backward reads: each index's bag, the bags'
// sizes, and (max) which index gave each maximum, as the CPU's kernel.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool scale_grad_by_freq,
    int64_t mode, bool sparse, const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  OpScope scope;
  TORCH_CHECK(indices.dim() == 1 && offsets.dim() == 1 && weight.dim() == 2,
              "embedding_bag: expected 1-d indices and offsets and a 2-d weight, got ", indices.sizes(), ", ",
              offsets.sizes(), " and ", weight.sizes());
  TORCH_CHECK(mode >= 0 && mode <= 2, "embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got ", mode);
  bool has_weights = per_sample_weights.has_value() && per_sample_weights->defined();
  TORCH_CHECK(!has_weights || mode == 0, "embedding_bag: per_sample_weights was not None. per_sample_weights is "
              "only supported for mode='sum' (got mode='", mode == 1 ? "mean" : "max", "'). Please open a feature "
              "request on GitHub.");
  int64_t n = indices.size(0), bags = include_last_offset ? offsets.size(0) - 1 : offsets.size(0);
  int64_t d = weight.size(1);
  auto longs = indices.options().dtype(at::kLong);
  at::Tensor idx = indices.to(at::kLong);
  at::Tensor starts = offsets.to(at::kLong).narrow(0, 0, bags).contiguous();
  at::Tensor bag = at::searchsorted(starts, at::arange(n, longs), /*out_int32=*/false, /*right=*/true) - 1;
  // With include_last_offset, the last offset ends the last bag: what
  // follows it is in bag `bags`, which is dropped (and whose gradient, in the
  // backward, is zero).
  if (include_last_offset)
    bag = at::where(at::arange(n, longs) < offsets.to(at::kLong)[bags], bag, at::full({}, bags, longs));
  at::Tensor valid = padding_idx >= 0 ? idx != padding_idx : at::ones({n}, longs.dtype(at::kBool));
  at::Tensor rows = at::index_select(weight, 0, idx);
  if (has_weights) rows = rows * per_sample_weights->unsqueeze(1).to(weight.scalar_type());
  at::Tensor keep = valid.unsqueeze(1);
  // One more bag than asked for, dropped at the end.
  at::Tensor bag_size = at::zeros({bags + 1}, longs).index_add_(0, bag, valid.to(at::kLong)).narrow(0, 0, bags);
  at::Tensor out, max_indices;
  if (mode == 2) {
    double inf = std::numeric_limits<double>::infinity();
    at::Tensor candidates = at::where(keep, rows, at::full({}, -inf, weight.options()));
    at::Tensor expanded = bag.unsqueeze(1).expand({n, d});
    at::Tensor best = at::full({bags + 1, d}, -inf, weight.options())
                          .scatter_reduce(0, expanded, candidates, "amax", /*include_self=*/true);
    // The first index reaching each maximum.
    at::Tensor hit = at::logical_and(keep, candidates == at::gather(best, 0, expanded));
    at::Tensor position = at::where(hit, at::arange(n, longs).unsqueeze(1), at::full({}, n, longs));
    at::Tensor first = at::full({bags + 1, d}, n, longs).scatter_reduce(0, expanded, position, "amin", true);
    at::Tensor padded = at::cat({idx, at::zeros({1}, longs)});
    max_indices = at::index_select(padded, 0, first.narrow(0, 0, bags).reshape({-1})).reshape({bags, d});
    out = at::where((bag_size > 0).unsqueeze(1), best.narrow(0, 0, bags), at::zeros({}, weight.options()));
  } else {
    out = at::zeros({bags + 1, d}, weight.options())
              .index_add_(0, bag, at::where(keep, rows, at::zeros_like(rows)))
              .narrow(0, 0, bags);
    if (mode == 1) out = out / bag_size.clamp_min(1).unsqueeze(1).to(weight.scalar_type());
    max_indices = bag_size.clone();
  }
  return {out, bag, bag_size, max_indices};
}

// The weight's gradient: each bag's gradient to the rows its indices picked
// (over the bag's size for mean, times per_sample_weights for sum, over the
// index's frequency with scale_grad_by_freq), or for max to the row that
// gave each maximum; padding_idx's row gets none.
at::Tensor embedding_bag_dense_backward(const at::Tensor& grad, const at::Tensor& indices,
                                        const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                        const at::Tensor& maximum_indices, c10::SymInt num_weights_sym,
                                        bool scale_grad_by_freq, int64_t mode,
                                        const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  OpScope scope;
  int64_t num_weights = num_weights_sym.expect_int(), d = grad.size(1);
  at::Tensor idx = indices.to(at::kLong);
  at::Tensor out = at::zeros({num_weights, d}, grad.options());
  if (mode == 2) {
    at::Tensor filled = (bag_size > 0).unsqueeze(1).expand({grad.size(0), d});
    at::Tensor g = at::where(filled, grad, at::zeros({}, grad.options()));
    at::Tensor rows = at::where(filled, maximum_indices, at::zeros({}, maximum_indices.options()));
    out = out.scatter_add(0, rows, g);
  } else {
    // Indices past the last bag (offset2bag = the number of bags) get zero.
    at::Tensor padded = at::cat({grad, at::zeros({1, d}, grad.options())});
    at::Tensor sizes = at::cat({bag_size, at::ones({1}, bag_size.options())});
    at::Tensor g = at::index_select(padded, 0, offset2bag);
    if (mode == 1) g = g / at::index_select(sizes, 0, offset2bag).clamp_min(1).unsqueeze(1).to(grad.scalar_type());
    if (per_sample_weights.has_value() && per_sample_weights->defined())
      g = g * per_sample_weights->unsqueeze(1).to(grad.scalar_type());
    if (scale_grad_by_freq) {
      at::Tensor frequency = at::zeros({num_weights}, grad.options()).index_add_(0, idx, at::ones_like(idx, grad.options()));
      g = g / at::index_select(frequency, 0, idx).unsqueeze(1);
    }
    out = out.index_add(0, idx, g);
  }
  if (padding_idx >= 0) out.select(0, padding_idx).zero_();
  return out;
}

at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                  const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                  const at::Tensor& maximum_indices, c10::SymInt num_weights, bool scale_grad_by_freq,
                                  int64_t mode, bool sparse, const std::optional<at::Tensor>& per_sample_weights,
                                  int64_t padding_idx) {
  TORCH_CHECK(!sparse, "embedding_bag: sparse=True gradients are not supported on tpu (no sparse tensors); use "
              "sparse=False");
  return embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                      scale_grad_by_freq, mode, per_sample_weights, padding_idx);
}

// per_sample_weights' gradient (sum): each index's row dotted with its
// bag's gradient; padding_idx's entries get zero.
at::Tensor embedding_bag_per_sample_weights_backward(const at::Tensor& grad, const at::Tensor& weight,
                                                     const at::Tensor& indices, const at::Tensor& offsets,
                                                     const at::Tensor& offset2bag, int64_t mode,
                                                     int64_t padding_idx) {
  OpScope scope;
  TORCH_CHECK(mode == 0, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  at::Tensor idx = indices.to(at::kLong);
  at::Tensor padded = at::cat({grad, at::zeros({1, grad.size(1)}, grad.options())});
  at::Tensor g = (at::index_select(padded, 0, offset2bag) * at::index_select(weight, 0, idx)).sum(1);
  if (padding_idx >= 0) g = at::where(idx == padding_idx, at::zeros({}, g.options()), g);
  return g;
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("segment_reduce", segment_reduce);
  m.impl("_segment_reduce_backward", segment_reduce_backward);
  m.impl("_embedding_bag", embedding_bag);
  m.impl("_embedding_bag_forward_only", embedding_bag);
  m.impl("_embedding_bag_dense_backward", embedding_bag_dense_backward);
  m.impl("_embedding_bag_backward", embedding_bag_backward);
  m.impl("_embedding_bag_per_sample_weights_backward", embedding_bag_per_sample_weights_backward);
}
