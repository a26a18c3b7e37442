// Compiled graphs (torch.compile, python/eagertpu/dynamo.py): after a graph's
// call through a runtime graph scope, `graph_capture` hands the runtime the
// tensors the call read and returned, so that it can call the graph's program
// directly; `graph_call` then runs that program on the inputs' buffers and
// writes each result into a fresh output tensor (a whole contiguous storage:
// the write binds the result, no op is recorded).
#include <torch/library.h>

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

bool graph_call(int64_t device, int64_t id, const std::vector<at::Tensor>& inputs,
                const std::vector<at::Tensor>& outputs) {
  OpScope scope;
  std::vector<Handle> in = read_all(inputs);
  std::vector<etpu_tensor> in_raw = raw(in);
  std::vector<etpu_tensor> results(outputs.size(), 0);
  int32_t called = 0;
  check(eagertpu_graph_call(device, static_cast<uint64_t>(id), in_raw.data(), in_raw.size(), results.data(),
                            results.size(), &called));
  if (called == 0) return false;
  std::vector<Handle> owned;
  owned.reserve(results.size());
  for (etpu_tensor r : results) owned.emplace_back(r);
  for (size_t i = 0; i < outputs.size(); i++) write(outputs[i], owned[i]);
  return true;
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_FRAGMENT(eagertpu, m) {
  m.def("graph_capture(int device, int id, Tensor[] inputs, Tensor[] outputs) -> bool", &etpu::graph_capture);
  m.def("graph_call(int device, int id, Tensor[] inputs, Tensor[] outputs) -> bool", &etpu::graph_call);
}
