// Compiled graphs (torch.compile, python/eagertpu/dynamo.py): after a graph's
// call through a runtime graph scope, `graph_capture` hands the runtime what
// the call read and returned, so that it can call the graph's program
// directly; `graph_run` then runs that program on the inputs' buffers, with no
// op dispatched or recorded. Both are bindings of `_backend`.
//
// A training graph reads views (a weight's transpose saved for the backward)
// and returns views of its inputs (the input itself, saved for the backward):
// each input is passed as its allocation's contents (the value the graph's
// program read it from, whole or as a view), checked to be the same view of
// them at each call; an output that is a view of an input or of a result is
// made again as that view.
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend.h"

namespace etpu {
namespace {

// How a direct call reads an input: as its allocation's contents, the
// value the graph's program read it from (as a whole, or as this view of
// them), checked to be the same view of them at each call.
struct InputSpec {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  at::ScalarType dtype = at::kFloat;
  // The first input before it on the same allocation, or -1: the program
  // reads that input's contents for both, so it must share it at each call.
  int64_t shares = -1;
};

// How it makes an output: a view (`sizes`, `strides`, `offset`) of result
// `source` of the program (the contents of a new allocation, made once for
// every output viewing it), or of input `source`'s allocation, at `offset`
// elements from the input's own offset.
struct OutputSpec {
  bool of_input = false;
  size_t source = 0;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

struct Captured {
  std::vector<InputSpec> inputs;
  std::vector<std::optional<OutputSpec>> outputs;
  size_t results = 0;
};

// Graphs' ids are unique in the process (dynamo.py numbers them); a process
// compiling graphs without end keeps the latest ones.
constexpr size_t kMaxGraphs = 4096;
std::mutex graphs_mutex;
std::unordered_map<uint64_t, std::shared_ptr<const Captured>> graphs;

bool on_device(const at::Tensor& t, int64_t device) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && device_index(t) == device;
}

// An allocation's contents as `t`'s dtype, as they are held: no op.
Handle contents(const at::Tensor& t) {
  Handle h;
  check(etpu_storage_read(storage_id(t.storage().data_ptr()), dtype_code(t.scalar_type()), h.out()));
  return h;
}

std::vector<etpu_tensor> raw(const std::vector<Handle>& handles) {
  std::vector<etpu_tensor> out;
  out.reserve(handles.size());
  for (const Handle& h : handles) out.push_back(h.get());
  return out;
}

// After a graph's call through a scope: asks the runtime to call it directly
// from now on. `outputs` are what the call returned (None for a gradient an
// input does not need): views of inputs, or of new allocations whose
// contents the program computed. `updates` pairs an input with the output
// aot_autograd copies into it after each call (an optimizer's state): the
// runtime donates that input's buffer where nothing else holds it. False when
// it cannot: a tensor not on the device, or a program the runtime cannot call
// directly (its results not those allocations' contents, a donation).
bool graph_capture(int64_t device, uint64_t id, const std::vector<at::Tensor>& inputs,
                   const std::vector<std::optional<at::Tensor>>& outputs,
                   const std::vector<std::pair<int64_t, int64_t>>& updates) {
  OpScope scope;
  auto captured = std::make_shared<Captured>();
  std::vector<Handle> in, results;
  for (const at::Tensor& t : inputs) {
    if (!on_device(t, device) || t.numel() == 0) return false;
    in.push_back(contents(t));
    int64_t shares = -1;
    for (size_t j = 0; j < captured->inputs.size() && shares < 0; j++) {
      if (inputs[j].storage().is_alias_of(t.storage())) shares = static_cast<int64_t>(j);
    }
    captured->inputs.push_back(
        InputSpec{t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.scalar_type(), shares});
  }
  // Each new allocation among the outputs (one result of the program each).
  std::vector<const at::Tensor*> allocations;
  for (const std::optional<at::Tensor>& o : outputs) {
    if (!o.has_value() || !o->defined()) {
      captured->outputs.emplace_back(std::nullopt);
      continue;
    }
    if (!on_device(*o, device) || o->numel() == 0) return false;
    OutputSpec spec;
    spec.sizes = o->sizes().vec();
    spec.strides = o->strides().vec();
    spec.offset = o->storage_offset();
    for (size_t k = 0; k < inputs.size() && !spec.of_input; k++) {
      if (o->storage().is_alias_of(inputs[k].storage())) {
        spec.of_input = true;
        spec.source = k;
        spec.offset = o->storage_offset() - inputs[k].storage_offset();
      }
    }
    if (!spec.of_input) {
      auto same = std::find_if(allocations.begin(), allocations.end(),
                               [&](const at::Tensor* a) { return a->storage().is_alias_of(o->storage()); });
      spec.source = static_cast<size_t>(same - allocations.begin());
      if (same == allocations.end()) {
        allocations.push_back(&*o);
        results.push_back(contents(*o));
      } else if ((*same)->scalar_type() != o->scalar_type()) {
        return false;  // another dtype's view of the same bytes
      }
    }
    captured->outputs.emplace_back(std::move(spec));
  }
  captured->results = results.size();
  // An update names a result of the program (an output that is the whole of
  // a new allocation): the runtime's output index of that allocation. An
  // input an output views (saved for the backward, say) is never donated:
  // that output must keep the input's old values.
  auto viewed = [&](int64_t k) {
    return std::any_of(captured->outputs.begin(), captured->outputs.end(), [&](const std::optional<OutputSpec>& o) {
      return o.has_value() && o->of_input && inputs[o->source].storage().is_alias_of(inputs[static_cast<size_t>(k)].storage());
    });
  };
  std::vector<int64_t> pairs;
  for (const auto& [k, o] : updates) {
    if (k < 0 || o < 0 || static_cast<size_t>(k) >= inputs.size() || static_cast<size_t>(o) >= outputs.size()) continue;
    if (viewed(k)) continue;
    const std::optional<OutputSpec>& spec = captured->outputs[static_cast<size_t>(o)];
    if (!spec.has_value() || spec->of_input || spec->offset != 0) continue;
    const at::Tensor& out = *allocations[spec->source];
    if (!outputs[static_cast<size_t>(o)]->is_same(out)) continue;  // (the runtime checks the types)
    pairs.push_back(k);
    pairs.push_back(static_cast<int64_t>(spec->source));
  }
  std::vector<etpu_tensor> in_raw = raw(in), out_raw = raw(results);
  int32_t ok = 0;
  check(eagertpu_graph_capture(device, id, in_raw.data(), in_raw.size(), out_raw.data(), out_raw.size(), pairs.data(),
                               pairs.size() / 2, &ok));
  if (ok == 0) return false;
  std::lock_guard<std::mutex> lock(graphs_mutex);
  if (graphs.size() >= kMaxGraphs) graphs.clear();
  graphs[id] = std::move(captured);
  return true;
}

// Whether `t` is read as `spec` says (the same view of its allocation).
bool matches(const at::Tensor& t, const InputSpec& spec, int64_t device) {
  return on_device(t, device) && t.scalar_type() == spec.dtype && t.storage_offset() == spec.offset && t.sizes() == spec.sizes &&
         t.strides() == spec.strides;
}

// A captured graph's direct call: (true, outputs), or (false, []) when the
// graph has no direct call for these inputs (another device, another view,
// new types: the caller then calls it through a scope).
std::pair<bool, std::vector<std::optional<at::Tensor>>> graph_run(int64_t device, uint64_t id,
                                                                  const std::vector<at::Tensor>& inputs) {
  std::shared_ptr<const Captured> captured;
  {
    std::lock_guard<std::mutex> lock(graphs_mutex);
    auto it = graphs.find(id);
    if (it == graphs.end()) return {false, {}};
    captured = it->second;
  }
  if (inputs.size() != captured->inputs.size()) return {false, {}};
  for (size_t k = 0; k < inputs.size(); k++) {
    const InputSpec& spec = captured->inputs[k];
    if (!matches(inputs[k], spec, device)) return {false, {}};
    if (spec.shares >= 0 && !inputs[k].storage().is_alias_of(inputs[spec.shares].storage())) return {false, {}};
  }
  OpScope scope;
  int64_t draws = -1;
  check(eagertpu_graph_draws(device, id, &draws));
  if (draws < 0) return {false, {}};
  std::vector<Handle> in;
  std::vector<etpu_storage> storages;
  in.reserve(inputs.size());
  storages.reserve(inputs.size());
  for (const at::Tensor& t : inputs) {
    in.push_back(contents(t));
    storages.push_back(storage_id(t.storage().data_ptr()));
  }
  std::vector<etpu_tensor> in_raw = raw(in);
  std::vector<etpu_tensor> results(captured->results, 0);
  // The graph's random draws take their keys from the device's default
  // generator, as its kernels did in the call it was captured from: the same
  // samples as an eager call at this point of the generator's stream.
  auto index = static_cast<c10::DeviceIndex>(device);
  DrawnKeys keys = draw_keys(index, static_cast<size_t>(draws));
  int32_t called = 0;
  // A call that failed may have run with its keys: they stay drawn (as an
  // eager kernel's are), so no later draw repeats them.
  check(eagertpu_graph_call(device, id, in_raw.data(), storages.data(), in_raw.size(), keys.halves.data(),
                            keys.halves.size() / 2,
                            results.data(), results.size(), &called));
  if (called == 0) {
    return_keys(index, keys);
    return {false, {}};
  }
  std::vector<Handle> owned;
  owned.reserve(results.size());
  for (etpu_tensor r : results) owned.emplace_back(r);
  // Each result as a new allocation holding it, in the shape it has.
  std::vector<at::Tensor> allocations;
  allocations.reserve(owned.size());
  for (const Handle& h : owned) {
    at::Tensor a = empty_tpu(dims_of(h), scalar_type(dtype_of(h)), static_cast<c10::DeviceIndex>(device));
    write(a, h);
    allocations.push_back(std::move(a));
  }
  std::vector<std::optional<at::Tensor>> outputs;
  outputs.reserve(captured->outputs.size());
  for (const std::optional<OutputSpec>& spec : captured->outputs) {
    if (!spec.has_value()) {
      outputs.emplace_back(std::nullopt);
      continue;
    }
    const at::Tensor& base = spec->of_input ? inputs[spec->source] : allocations[spec->source];
    int64_t offset = spec->of_input ? base.storage_offset() + spec->offset : spec->offset;
    if (!spec->of_input && offset == 0 && base.sizes() == spec->sizes && base.strides() == spec->strides) {
      outputs.emplace_back(base);  // the allocation itself
    } else {
      outputs.emplace_back(base.as_strided(spec->sizes, spec->strides, offset));
    }
  }
  return {true, std::move(outputs)};
}

}  // namespace

void add_graph_bindings(pybind11::module& m) {
  m.def("graph_capture", &graph_capture,
        "After a graph's call through a scope: whether the runtime will call it directly.");
  m.def("graph_run", &graph_run, "A captured graph's direct call: (called, outputs).");
}

}  // namespace etpu
