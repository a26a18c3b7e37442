// torch.distributed on `tpu`: a c10d::Backend named "eagertpu" whose
// collectives are the runtime's (include/eagertpu.h, "collectives"). Each
// rank is a thread of this process driving its own device; the runtime's
// rendezvous makes every collective agree across ranks before it runs, so a
// mismatched or missing rank is an error on every rank, never a hang.
//
// A collective returns once every rank has called it, with its result
// recorded on the rank's stream and written into the output tensors (reads
// of them wait for it, as reads after a CUDA collective wait on its stream):
// the Work it returns is complete, its future holds the outputs.
//
// The Python side (eagertpu/distributed.py) makes the group's handles and
// hands one to each rank's backend (through the c10d store).

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

int32_t reduce_code(const c10d::ReduceOp& op, const char* collective) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ETPU_REDUCE_SUM;
    case c10d::ReduceOp::AVG:
      return ETPU_REDUCE_AVG;
    case c10d::ReduceOp::PRODUCT:
      return ETPU_REDUCE_PRODUCT;
    case c10d::ReduceOp::MIN:
      return ETPU_REDUCE_MIN;
    case c10d::ReduceOp::MAX:
      return ETPU_REDUCE_MAX;
    default:
      TORCH_CHECK_VALUE(false, "eagertpu ", collective, ": reduce op ", static_cast<int>(op.op_),
                        " is not supported; expected SUM, AVG, PRODUCT, MIN or MAX");
  }
  return -1;
}

// A finished collective: its future already holds the outputs.
c10::intrusive_ptr<c10d::Work> done(std::vector<at::Tensor> outputs) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  future->markCompleted(c10::IValue(std::move(outputs)));
  return c10d::Work::create_from_future(future);
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* collective) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "eagertpu ", collective, ": got ", tensors.size(),
                    " tensors; expected one (each rank drives one device)");
  return tensors[0];
}

// `x` flattened: the single-tensor collectives gather and scatter elements
// along dim 0, whatever the layout of the output PyTorch gives.
Handle flat(const Handle& x) {
  int64_t n = 1;
  for (int64_t d : dims_of(x)) n *= d;
  return reshape(x, {n});
}

// Tensors of one shape stacked along a new dim 0.
Handle stacked(const std::vector<at::Tensor>& xs) {
  std::vector<Handle> rows;
  std::vector<etpu_tensor> ids;
  for (const auto& x : xs) {
    auto sizes = x.sizes().vec();
    sizes.insert(sizes.begin(), 1);
    rows.push_back(reshape(read(x), sizes));
    ids.push_back(rows.back().get());
  }
  return cat(ids, 0);
}

// Row `i` of `x` (dim 0), written into `out`.
void write_row(const at::Tensor& out, const Handle& x, int64_t i) {
  write(out, reshape(slice(x, 0, i, i + 1, 1), out.sizes()));
}

class EagerBackend final : public c10d::Backend {
 public:
  EagerBackend(etpu_group group, int rank, int size) : Backend(rank, size), group_(group) {}
  ~EagerBackend() override { etpu_group_free(group_); }

  const std::string getBackendName() const override { return "eagertpu"; }

  // The count of collectives this rank has called (c10d's debug wrapper,
  // TORCH_DISTRIBUTED_DEBUG=DETAIL, compares it across ranks).
  void setSequenceNumberForGroup() override { sequence_ = 0; }
  uint64_t getSequenceNumberForGroup() override { return sequence_; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    OpScope scope;
    ++sequence_;
    const auto& t = single(tensors, "all_reduce");
    Handle out;
    check(etpu_all_reduce(group_, getRank(), read(t).get(), reduce_code(opts.reduceOp, "all_reduce"), origin(),
                          out.out()));
    write(t, out);
    return done(tensors);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    OpScope scope;
    ++sequence_;
    const auto& t = single(tensors, "broadcast");
    Handle out;
    check(etpu_broadcast(group_, getRank(), read(t).get(), opts.rootRank, origin(), out.out()));
    write(t, out);
    return done(tensors);
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    OpScope scope;
    ++sequence_;
    const auto& x = single(inputs, "all_gather");
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                      "eagertpu all_gather: expected one list of ", getSize(), " output tensors");
    auto sizes = x.sizes().vec();
    sizes.insert(sizes.begin(), 1);
    Handle gathered;
    check(etpu_all_gather(group_, getRank(), reshape(read(x), sizes).get(), 0, origin(), gathered.out()));
    for (int i = 0; i < getSize(); ++i) write_row(outputs[0][i], gathered, i);
    return done(outputs[0]);
  }

  // Every rank's input, in rank order, filling `output` (of size() times the
  // input's elements, stacked or concatenated along dim 0).
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override {
    OpScope scope;
    ++sequence_;
    Handle gathered;
    check(etpu_all_gather(group_, getRank(), flat(read(input)).get(), 0, origin(), gathered.out()));
    write(output, reshape(gathered, output.sizes()));
    return done({output});
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single(output, input, opts);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    OpScope scope;
    ++sequence_;
    const auto& out = single(outputs, "reduce_scatter");
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                      "eagertpu reduce_scatter: expected one list of ", getSize(), " input tensors");
    Handle block;
    check(etpu_reduce_scatter(group_, getRank(), stacked(inputs[0]).get(),
                              reduce_code(opts.reduceOp, "reduce_scatter"), 0, origin(), block.out()));
    write(out, reshape(block, out.sizes()));
    return done(outputs);
  }

  // The reduction of every rank's input (size() blocks along dim 0), this
  // rank's block into `output`.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                       const c10d::ReduceScatterOptions& opts) override {
    OpScope scope;
    ++sequence_;
    Handle block;
    check(etpu_reduce_scatter(group_, getRank(), flat(read(input)).get(), reduce_code(opts.reduceOp, "reduce_scatter"),
                              0, origin(), block.out()));
    write(output, reshape(block, output.sizes()));
    return done({output});
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single(output, input, opts);
  }

  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& output_splits,
                                                   std::vector<int64_t>& input_splits,
                                                   const c10d::AllToAllOptions& opts) override {
    OpScope scope;
    ++sequence_;
    TORCH_CHECK_VALUE(even(output_splits, output) && even(input_splits, input),
                      "eagertpu all_to_all_single: got uneven split sizes (input ", c10::IntArrayRef(input_splits),
                      ", output ", c10::IntArrayRef(output_splits), "); expected equal splits of dim 0 across the ", getSize(), " ranks");
    Handle exchanged;
    check(etpu_all_to_all(group_, getRank(), read(input).get(), 0, 0, origin(), exchanged.out()));
    write(output, reshape(exchanged, output.sizes()));
    return done({output});
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override {
    return all_to_all_single(output, input, output_splits, input_splits, opts);
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    OpScope scope;
    ++sequence_;
    TORCH_CHECK_VALUE(static_cast<int>(inputs.size()) == getSize() && outputs.size() == inputs.size(),
                      "eagertpu all_to_all: expected ", getSize(), " input and output tensors");
    Handle exchanged;
    check(etpu_all_to_all(group_, getRank(), stacked(inputs).get(), 0, 0, origin(), exchanged.out()));
    for (int i = 0; i < getSize(); ++i) write_row(outputs[i], exchanged, i);
    return done(outputs);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    OpScope scope;
    ++sequence_;
    check(etpu_barrier(group_, getRank(), origin()));
    return done({});
  }

 private:
  // Split sizes PyTorch passes for an even exchange: none, or all equal.
  bool even(const std::vector<int64_t>& splits, const at::Tensor& t) const {
    if (splits.empty()) return t.dim() > 0 && t.size(0) % getSize() == 0;
    if (static_cast<int>(splits.size()) != getSize()) return false;
    for (int64_t s : splits)
      if (s != splits[0]) return false;
    return true;
  }

  etpu_group group_;
  uint64_t sequence_ = 0;
};

}  // namespace
}  // namespace etpu

// `import eagertpu._backend` (the library torch.ops.load_library loaded):
// what eagertpu/distributed.py needs to make groups and backends.
PYBIND11_MODULE(_backend, m) {
  m.def(
      "group_new",
      [](const std::vector<int64_t>& devices, double timeout_seconds) {
        std::vector<etpu_group> handles(devices.size());
        etpu::check(etpu_group_new(devices.data(), devices.size(), timeout_seconds, handles.data()));
        return std::vector<uint64_t>(handles.begin(), handles.end());
      },
      "One handle per rank to a new group, rank r on device devices[r].");
  m.def(
      "group_free", [](uint64_t handle) { etpu::check(etpu_group_free(handle)); },
      "Frees a handle no backend took.");
  m.def(
      "backend",
      [](uint64_t handle, int rank, int size) -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<etpu::EagerBackend>(handle, rank, size);
      },
      "Rank `rank`'s c10d backend over its group handle (which it frees).");
}
