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
//
// Ranks in different processes (torchrun) cannot share a group of the CPU
// plugin's devices: StagedBackend then copies each collective's tpu tensors
// to the host, runs it with c10d's own gloo backend, and copies the results
// back (the copies are counted as host transfers). Never a transport of our
// own.

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/distributed/c10d/exception.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend.h"

namespace etpu {

// The compiled graphs' bindings of `_backend` (graphs.cpp).
void add_graph_bindings(pybind11::module& m);
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

// What both kinds of rank share: the name, the sequence numbers c10d's
// debug wrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) compares across ranks, the
// coalesced collectives (one after another: each is a program of its own
// anyway) and the deprecated aliases of the single-tensor collectives.
class RankBackend : public c10d::Backend {
 public:
  using Backend::Backend;

  const std::string getBackendName() const override { return "eagertpu"; }
  void setSequenceNumberForGroup() override { sequence_ = 0; }
  uint64_t getSequenceNumberForGroup() override { return sequence_; }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      allreduce(one, opts);
    }
    return done(tensors);
  }
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) override {
    for (size_t i = 0; i < outputs.size(); ++i) all_gather_single(outputs[i], inputs.at(i), opts);
    return done(outputs);
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    for (size_t i = 0; i < outputs.size(); ++i) reduce_scatter_single(outputs[i], inputs.at(i), opts);
    return done(outputs);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single_coalesced(outputs, inputs, opts);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override {
    return all_to_all_single(output, input, output_splits, input_splits, opts);
  }

 protected:
  uint64_t sequence_ = 0;
};

class EagerBackend final : public RankBackend {
 public:
  EagerBackend(etpu_group group, int rank, int size) : RankBackend(rank, size), group_(group) {}
  ~EagerBackend() override { etpu_group_free(group_); }

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
};

// Each tensor's host copy (a counted device-to-host transfer).
std::vector<at::Tensor> on_host(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> host;
  host.reserve(ts.size());
  for (const auto& t : ts) host.push_back(t.to(at::kCPU));
  return host;
}

std::vector<std::vector<at::Tensor>> on_host(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> host;
  for (const auto& l : lists) host.push_back(on_host(l));
  return host;
}

void copy_back(const std::vector<at::Tensor>& device, const std::vector<at::Tensor>& host) {
  for (size_t i = 0; i < device.size(); ++i) device[i].copy_(host[i]);
}

// A rank of a group whose ranks are processes: gloo on host copies.
class StagedBackend final : public RankBackend {
 public:
  StagedBackend(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size)
      : RankBackend(rank, size), gloo_(std::move(gloo)) {}

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    c10d::AllreduceOptions host_opts = opts;
    bool avg = averaged(host_opts.reduceOp, tensors, "all_reduce");
    return staged(tensors, [&](auto& host) {
      gloo_->allreduce(host, host_opts)->wait();
      if (avg)
        for (auto& t : host) t.div_(getSize());
    });
  }
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    return staged(tensors, [&](auto& host) { gloo_->broadcast(host, opts)->wait(); });
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    ++sequence_;
    auto host_in = on_host(inputs);
    auto host_out = on_host(outputs);
    gloo_->allgather(host_out, host_in, opts)->wait();
    for (size_t i = 0; i < outputs.size(); ++i) copy_back(outputs[i], host_out[i]);
    return done(outputs.empty() ? std::vector<at::Tensor>{} : outputs[0]);
  }
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override {
    return staged_single(output, input, [&](auto& out, auto& in) { gloo_->_allgather_base(out, in, opts)->wait(); });
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    ++sequence_;
    c10d::ReduceScatterOptions host_opts = opts;
    bool avg = averaged(host_opts.reduceOp, outputs, "reduce_scatter");
    auto host_in = on_host(inputs);
    auto host_out = on_host(outputs);
    gloo_->reduce_scatter(host_out, host_in, host_opts)->wait();
    if (avg)
      for (auto& t : host_out) t.div_(getSize());
    copy_back(outputs, host_out);
    return done(outputs);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                       const c10d::ReduceScatterOptions& opts) override {
    c10d::ReduceScatterOptions host_opts = opts;
    std::vector<at::Tensor> outputs{output};
    bool avg = averaged(host_opts.reduceOp, outputs, "reduce_scatter");
    return staged_single(output, input, [&](auto& out, auto& in) {
      gloo_->_reduce_scatter_base(out, in, host_opts)->wait();
      if (avg) out.div_(getSize());
    });
  }
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& output_splits,
                                                   std::vector<int64_t>& input_splits,
                                                   const c10d::AllToAllOptions& opts) override {
    return staged_single(
        output, input,
        [&](auto& out, auto& in) { gloo_->alltoall_base(out, in, output_splits, input_splits, opts)->wait(); },
        /*keep_shapes=*/true);
  }
  // gloo exchanges one flat tensor: each input's elements, split by input.
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    ++sequence_;
    std::vector<at::Tensor> flat;
    std::vector<int64_t> input_splits, output_splits;
    int64_t received = 0;
    for (const auto& t : inputs) {
      flat.push_back(t.to(at::kCPU).reshape({-1}));
      input_splits.push_back(t.numel());
    }
    for (const auto& t : outputs) {
      output_splits.push_back(t.numel());
      received += t.numel();
    }
    at::Tensor in = at::cat(flat);
    at::Tensor out = at::empty({received}, in.options());
    gloo_->alltoall_base(out, in, output_splits, input_splits, opts)->wait();
    int64_t offset = 0;
    for (auto& t : outputs) {
      t.copy_(out.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
    return done(outputs);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    ++sequence_;
    // The rank's own work first, as on the one-process path.
    check(eagertpu_sync());
    c10d::BarrierOptions host = opts;
    host.device = at::Device(at::kCPU);
    host.device_ids.clear();
    gloo_->barrier(host)->wait();
    return done({});
  }

 private:
  // gloo has no AVG: a SUM divided by the group's size (floating-point
  // tensors only, as on the one-process path). Rewrites `op` to SUM.
  bool averaged(c10d::ReduceOp& op, const std::vector<at::Tensor>& ts, const char* collective) const {
    if (op.op_ != c10d::ReduceOp::AVG) return false;
    for (const auto& t : ts)
      TORCH_CHECK_VALUE(at::isFloatingType(t.scalar_type()), "eagertpu ", collective, ": AVG of ", t.scalar_type(),
                        " tensors; expected a floating-point dtype");
    op = c10d::ReduceOp(c10d::ReduceOp::SUM);
    return true;
  }

  // `run` runs gloo's collective on the host copies and waits for it once:
  // a second wait of a gloo work copies its result into the outputs again,
  // undoing what came after the first (an AVG's division).
  template <typename Run>
  c10::intrusive_ptr<c10d::Work> staged(std::vector<at::Tensor>& tensors, Run run) {
    ++sequence_;
    auto host = on_host(tensors);
    run(host);
    copy_back(tensors, host);
    return done(tensors);
  }

  // A collective of one input and one output tensor, on host copies; gloo
  // takes them flat (PyTorch allows an all_gather_into_tensor's output
  // stacked as well as concatenated) unless `keep_shapes`.
  template <typename Run>
  c10::intrusive_ptr<c10d::Work> staged_single(at::Tensor& output, at::Tensor& input, Run run,
                                               bool keep_shapes = false) {
    ++sequence_;
    at::Tensor in = input.to(at::kCPU);
    at::Tensor out = output.to(at::kCPU);
    if (!keep_shapes) {
      in = in.reshape({-1});
      out = out.reshape({-1});
    }
    run(out, in);
    output.copy_(out.view(output.sizes()));
    return done({output});
  }

  c10::intrusive_ptr<c10d::Backend> gloo_;
};

// A c10d store as the runtime's key-value store for PJRT's distributed
// client (etpu_set_distributed_store): `user` is the store, kept for the
// process. A wait that times out is ETPU_KV_TIMEOUT, any other failure
// ETPU_KV_UNAVAILABLE, each with its message.
c10d::Store& store_of(void* user) { return **static_cast<c10::intrusive_ptr<c10d::Store>*>(user); }

template <typename Call>
int32_t store_call(void* sink, etpu_kv_deliver deliver, Call call) {
  auto fail = [&](int32_t status, const char* what) {
    deliver(sink, what, std::strlen(what));
    return status;
  };
  try {
    return call();
  } catch (const c10::DistNetworkError& e) {
    return fail(ETPU_KV_UNAVAILABLE, e.what());
  } catch (const c10::DistStoreError& e) {
    return fail(ETPU_KV_TIMEOUT, e.what());
  } catch (const std::exception& e) {
    return fail(ETPU_KV_UNAVAILABLE, e.what());
  }
}

int32_t store_get(void* user, const char* key, size_t key_size, int64_t timeout_ms, void* sink,
                  etpu_kv_deliver deliver) {
  return store_call(sink, deliver, [&] {
    std::string k(key, key_size);
    store_of(user).wait({k}, std::chrono::milliseconds(timeout_ms));
    auto value = store_of(user).get(k);
    deliver(sink, reinterpret_cast<const char*>(value.data()), value.size());
    return static_cast<int32_t>(ETPU_KV_OK);
  });
}

int32_t store_try_get(void* user, const char* key, size_t key_size, void* sink, etpu_kv_deliver deliver) {
  return store_call(sink, deliver, [&] {
    std::string k(key, key_size);
    if (!store_of(user).check({k})) {
      deliver(sink, "no such key", 11);
      return static_cast<int32_t>(ETPU_KV_NOT_FOUND);
    }
    auto value = store_of(user).get(k);
    deliver(sink, reinterpret_cast<const char*>(value.data()), value.size());
    return static_cast<int32_t>(ETPU_KV_OK);
  });
}

int32_t store_put(void* user, const char* key, size_t key_size, const char* value, size_t value_size, void* sink,
                  etpu_kv_deliver deliver) {
  return store_call(sink, deliver, [&] {
    store_of(user).set(std::string(key, key_size), std::vector<uint8_t>(value, value + value_size));
    return static_cast<int32_t>(ETPU_KV_OK);
  });
}

}  // namespace
}  // namespace etpu

// `import eagertpu._backend` (the library torch.ops.load_library loaded):
// what eagertpu/distributed.py needs to make groups and backends, and the
// direct call of compiled graphs (graphs.cpp).
PYBIND11_MODULE(_backend, m) {
  etpu::add_graph_bindings(m);
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
  m.def(
      "staged_backend",
      [](c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size) -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<etpu::StagedBackend>(std::move(gloo), rank, size);
      },
      "Rank `rank`'s c10d backend for ranks in different processes: gloo on host copies.");
  m.def(
      "set_distributed_store",
      [](c10::intrusive_ptr<c10d::Store> store, int64_t node_id, int64_t num_nodes) {
        auto* kept = new c10::intrusive_ptr<c10d::Store>(std::move(store));  // lives for the process
        etpu_status status =
            etpu_set_distributed_store(node_id, num_nodes, etpu::store_get, etpu::store_try_get, etpu::store_put, kept);
        if (status != ETPU_OK) delete kept;
        etpu::check(status);
      },
      "Makes this process node `node_id` of `num_nodes`, PJRT's client finding the others through `store`.");
  m.def(
      "check_distributed_store", [](int64_t timeout_ms) { etpu::check(etpu_check_distributed_store(timeout_ms)); },
      "Calls the store as a plugin's client does when it starts; a missing node is an error naming it.");
}
