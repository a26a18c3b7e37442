// Compiled graphs (torch.compile, python/eagertpu/dynamo.py): after a graph's
// call through a runtime graph scope, `graph_capture` hands the runtime the
// tensors the call read and returned, so that it can call the graph's program
// directly; `graph_run` (a binding of `_backend`, no op dispatched) then runs
// that program on the inputs' buffers and returns each result as a fresh
// tensor (a whole contiguous storage: the write binds the result, no op is
// recorded).
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <utility>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

std::vector<Handle> read_all(const std::vector<at::Tensor>& tensors) {
  std::vector<Handle> handles;
  handles.reserve(tensors.size());
  for (const at::Tensor& t : tensors) handles.push_back(read(t));
  return handles;
}

std::vector<etpu_tensor> raw(const std::vector<Handle>& handles) {
  std::vector<etpu_tensor> out;
  out.reserve(handles.size());
  for (const Handle& h : handles) out.push_back(h.get());
  return out;
}

bool graph_capture(int64_t device, int64_t id, const std::vector<at::Tensor>& inputs,
                   const std::vector<at::Tensor>& outputs) {
  OpScope scope;
  std::vector<Handle> in = read_all(inputs), out = read_all(outputs);
  std::vector<etpu_tensor> in_raw = raw(in), out_raw = raw(out);
  int32_t captured = 0;
  check(eagertpu_graph_capture(device, static_cast<uint64_t>(id), in_raw.data(), in_raw.size(), out_raw.data(),
                               out_raw.size(), &captured));
  return captured != 0;
}

// The direct call from Python (`dynamo.GraphCall`), with no op dispatch: the
// inputs must be tpu tensors on `device`; the program runs on their buffers
// and its `n_outputs` results come back as new tensors. (false, []) when the
// graph has no direct call for these inputs (another device, new types).
std::pair<bool, std::vector<at::Tensor>> graph_run(int64_t device, uint64_t id, const std::vector<at::Tensor>& inputs,
                                                   size_t n_outputs) {
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 || device_index(t) != device) {
      return {false, {}};
    }
  }
  OpScope scope;
  std::vector<Handle> in = read_all(inputs);
  std::vector<etpu_tensor> in_raw = raw(in);
  std::vector<etpu_tensor> results(n_outputs, 0);
  int32_t called = 0;
  check(eagertpu_graph_call(device, id, in_raw.data(), in_raw.size(), results.data(), results.size(), &called));
  if (called == 0) return {false, {}};
  std::vector<Handle> owned;
  owned.reserve(results.size());
  for (etpu_tensor r : results) owned.emplace_back(r);
  std::vector<at::Tensor> outputs;
  outputs.reserve(owned.size());
  for (const Handle& h : owned) {
    at::Tensor out = empty_tpu(dims_of(h), scalar_type(dtype_of(h)), static_cast<c10::DeviceIndex>(device));
    write(out, h);
    outputs.push_back(std::move(out));
  }
  return {true, std::move(outputs)};
}

}  // namespace

void add_graph_bindings(pybind11::module& m) {
  m.def("graph_run", &graph_run, "A captured graph's direct call: (called, outputs).");
}

}  // namespace etpu

TORCH_LIBRARY_FRAGMENT(eagertpu, m) {
  m.def("graph_capture(int device, int id, Tensor[] inputs, Tensor[] outputs) -> bool", &etpu::graph_capture);
}
