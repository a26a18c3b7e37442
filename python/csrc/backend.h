// EagerTPU's PyTorch backend: a thin C++ shim over include/eagertpu.h.
//
// A `tpu` tensor is an ordinary TensorImpl whose storage lives at an address
// in a reserved, never-mapped range (device.cpp); the runtime keeps each
// allocation's contents as a storage value, named by the id the allocation
// keeps in its DataPtr's context. Kernels read their inputs as views of those
// values (read), call runtime ops, and write results through views (write).
// Everything here is glue: dtype mapping, handle ownership, errors, origins.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "eagertpu.h"

namespace etpu {

// What a `tpu` DataPtr's context holds (device.cpp): the runtime's id for the
// allocation, and the range of the reserved address space it has.
struct Allocation {
  etpu_storage storage = 0;
  uintptr_t address = 0;
  size_t size = 0;
};

// The runtime's storage id of a `tpu` allocation (its DataPtr's context).
etpu_storage storage_id(const c10::DataPtr& p);

// Throws a c10::Error (a RuntimeError in Python) carrying the runtime's
// message, when `status` is not ETPU_OK.
void check(etpu_status status);

int32_t dtype_code(at::ScalarType t);
at::ScalarType scalar_type(int32_t code);
bool supported(at::ScalarType t);

// An owned runtime tensor handle, freed when it goes out of scope.
class Handle {
 public:
  Handle() = default;
  explicit Handle(etpu_tensor h) : h_(h) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, 0)) {}
  Handle& operator=(Handle&& o) noexcept {
    reset();
    h_ = std::exchange(o.h_, 0);
    return *this;
  }
  ~Handle() { reset(); }
  etpu_tensor get() const { return h_; }
  // Where a runtime call writes a new handle.
  etpu_tensor* out() {
    reset();
    return &h_;
  }
  void reset() {
    if (h_ != 0) etpu_tensor_free(h_);
    h_ = 0;
  }

 private:
  etpu_tensor h_ = 0;
};

// The user's Python `file:line` that called the current op (the innermost
// frame outside torch and eagertpu), or "autograd backward" on autograd's
// threads. Computed once per op, lazily.
const char* origin();

// Runs `f` as one op of the caller's (etpu_one_op_begin/end): the runtime ops
// it calls run as one program in debug and strict modes, as a _foreach op
// over a list is one op, not one per tensor. An exception from `f` still
// ends the scope (what ran before it launches) and propagates.
template <class F>
void as_one_op(F&& f) {
  check(etpu_one_op_begin());
  try {
    f();
  } catch (...) {
    etpu_one_op_end();  // f's error is the one to report
    throw;
  }
  check(etpu_one_op_end());
}

// Marks the start of a kernel: the origin is recomputed on first use.
struct OpScope {
  OpScope();
  ~OpScope();
};

// The tensor `t` (on `tpu`) as a runtime tensor: a view of its storage.
Handle read(const at::Tensor& t);

// A tensor argument that may be absent (`std::nullopt` or undefined): the
// C ABI's no-tensor handle (0) then.
Handle optional_read(const std::optional<at::Tensor>& t);

// An operand: a `tpu` tensor, or a CPU 0-d tensor (uploaded to `device`).
Handle read_operand(const at::Tensor& t, int64_t device);

// `h`, what `t`'s memory holds, as `t`'s values: its lazy conjugate and
// negative bits applied (each its own inverse: also the other way).
Handle resolve_lazy_bits(const at::Tensor& t, Handle h);

// Writes `value` into `out` (a `tpu` tensor or view), converting it to
// out's dtype and broadcasting it to out's shape.
void write(const at::Tensor& out, const Handle& value);

// An operand of a pointwise op: a tensor (on tpu, or a CPU 0-d tensor; a
// wrapped Python number counts as a number) or a Python number.
struct PointwiseArg {
  PointwiseArg(const at::Tensor& t) : tensor(&t) {}  // NOLINT: implicit, for {a, b} lists
  PointwiseArg(const at::Scalar& s) : number(s) {}   // NOLINT
  const at::Tensor* tensor = nullptr;
  at::Scalar number;
};

// `out = op(args...)` (a unary or binary op, where, addcmul, addcdiv, lerp:
// see etpu_pointwise) in one runtime call: each tpu tensor goes as a view of
// its storage, so nothing is read or written in between. The result is
// converted to out's dtype and broadcast to its shape.
void pointwise(const char* op, std::initializer_list<PointwiseArg> args, const at::Tensor& out);

// `op(args...)` as a new contiguous tpu tensor of `sizes` and dtype `t` on
// device `index` (the result converted and broadcast to them), in one runtime
// call that also makes its allocation (etpu_pointwise_new).
at::Tensor pointwise_new(const char* op, std::initializer_list<PointwiseArg> args, at::IntArrayRef sizes,
                         at::ScalarType t, c10::DeviceIndex index);

// The runtime's `op` (a matrix product, sum or softmax: see etpu_op_new) over
// `args` as a new contiguous tpu tensor of `sizes` and dtype `t` on device
// `index`, made in one runtime call as pointwise_new makes one.
at::Tensor op_new(const char* op, std::initializer_list<PointwiseArg> args, at::IntArrayRef sizes, at::ScalarType t,
                  c10::DeviceIndex index);

// `value` as a new contiguous tpu tensor of `sizes` and dtype `t` on device
// `index` (converted and broadcast to them), made by one runtime call that
// registers an allocation holding it (etpu_storage_holding): a functional
// kernel's result, with no allocation made before the op and no view written.
at::Tensor tensor_holding(const Handle& value, at::IntArrayRef sizes, at::ScalarType t, c10::DeviceIndex index);

// A tensor as the C ABI's view descriptor: {storage, byte_offset, dtype,
// rank, sizes, strides} (etpu_operand). Points into itself: never moved once
// an operand refers to it.
class ViewDesc {
 public:
  explicit ViewDesc(const at::Tensor& t);
  const int64_t* get() const { return d_.data(); }

 private:
  c10::SmallVector<int64_t, 16> d_;
};

// The operands of one C ABI call over many tensors (the foreach ops, the
// optimizer steps): a tpu tensor as a view of its storage, a Python number as
// a weak scalar, a CPU 0-d tensor uploaded, an absent optional tensor as
// handle 0. Descriptors and uploads live as long as the list.
class OperandList {
 public:
  explicit OperandList(int64_t device) : device_(device) {}
  OperandList(const OperandList&) = delete;
  OperandList& operator=(const OperandList&) = delete;
  void add(const PointwiseArg& a);
  void add_absent();
  void add_optional(const std::optional<at::Tensor>& t);
  const etpu_operand* data() const { return operands_.data(); }
  size_t size() const { return operands_.size(); }
  const etpu_operand& operator[](size_t i) const { return operands_[i]; }

 private:
  int64_t device_;
  std::vector<etpu_operand> operands_;
  std::deque<ViewDesc> views_;  // a deque: its elements never move
  std::deque<Handle> handles_;
};

// `op` over `outs.size()` groups of `nargs` operands in one runtime call (for
// PyTorch's _foreach_ ops): group i is args[i * nargs .. (i + 1) * nargs] and
// its result is written into outs[i] (a tpu tensor or view with elements).
void pointwise_foreach(const char* op, const std::vector<PointwiseArg>& args, size_t nargs, at::TensorList outs);

// pointwise_foreach's groups, each result a new contiguous tensor of its
// `likes` item's shape, dtype and device (one dtype and device for all, each
// with elements), made in the call (etpu_pointwise_foreach_new).
std::vector<at::Tensor> pointwise_foreach_new(const char* op, const std::vector<PointwiseArg>& args, size_t nargs,
                                              at::TensorList likes);

// Fills `out` (a tpu tensor or view) with samples of `distribution` keyed by
// `key` (see etpu_sample): `args` are its parameters, or bernoulli's tensor of
// probabilities.
void sample(const char* distribution, std::initializer_list<PointwiseArg> args, std::pair<uint64_t, uint64_t> key,
            const at::Tensor& out);

// A CPU tensor uploaded to device `device`.
Handle upload(const at::Tensor& cpu, int64_t device);

// Dims of a runtime tensor.
std::vector<int64_t> dims_of(const Handle& h);
int32_t dtype_of(const Handle& h);

// Runtime ops with this op's origin.
Handle unary(const char* op, const Handle& x);
Handle binary(const char* op, const Handle& a, const Handle& b);
Handle binary_scalar(const char* op, const Handle& a, const at::Scalar& s, bool reversed = false);
Handle cast(const Handle& x, at::ScalarType t);
// The value of a wrapped Python number (a CPU 0-d tensor), read without a
// dispatch (`item()` costs a dispatch, a large part of a small op).
at::Scalar wrapped_number(const at::Tensor& t);
// A Python number as the C ABI takes it: an int64 exactly, never through a double.
etpu_scalar scalar_arg(const at::Scalar& s);
Handle full(int64_t device, at::IntArrayRef sizes, const at::Scalar& v, at::ScalarType t);
Handle reshape(const Handle& x, at::IntArrayRef sizes);
Handle permute(const Handle& x, at::IntArrayRef perm);
Handle expand(const Handle& x, at::IntArrayRef sizes);
Handle flip(const Handle& x, at::IntArrayRef dims);
Handle reduce(const char* op, const Handle& x, at::IntArrayRef dims, bool keepdim);
Handle matmul(const Handle& a, const Handle& b);
Handle softmax(const Handle& x, int64_t dim, bool log);
Handle where(const Handle& c, const Handle& x, const Handle& y);
Handle index_select(const Handle& x, int64_t dim, const Handle& index);
Handle gather(const Handle& x, int64_t dim, const Handle& index);
Handle scatter(const Handle& x, int64_t dim, const Handle& index, const Handle& src, bool add);
Handle arange(int64_t device, const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
              at::ScalarType t);
Handle clamp(const Handle& x, const std::optional<at::Scalar>& lo, const std::optional<at::Scalar>& hi);
Handle argreduce(const char* op, const Handle& x, std::optional<int64_t> dim, bool keepdim);
Handle var(const Handle& x, at::IntArrayRef dims, int64_t correction, bool keepdim);
Handle slice(const Handle& x, int64_t dim, int64_t start, int64_t end, int64_t step);
Handle cat(const std::vector<etpu_tensor>& xs, int64_t dim);
// x with a scalar: the runtime's promotion of Python numbers applies.
inline Handle mul(const Handle& x, const at::Scalar& s) { return binary_scalar("mul", x, s); }
inline Handle add(const Handle& a, const Handle& b) { return binary("add", a, b); }
inline Handle sub(const Handle& a, const Handle& b) { return binary("sub", a, b); }
inline Handle mul(const Handle& a, const Handle& b) { return binary("mul", a, b); }
inline Handle div(const Handle& a, const Handle& b) { return binary("div", a, b); }

// A new contiguous `tpu` tensor on device `index` (no dispatch).
at::Tensor empty_tpu(at::IntArrayRef sizes, at::ScalarType t, c10::DeviceIndex index);

// Runtime allocation `storage` of `nbytes` (> 0) on device `index` as a
// DataPtr of the tpu allocator (device.cpp), which now owns it: freed if
// that fails.
c10::DataPtr adopt_storage(etpu_storage storage, size_t nbytes, c10::DeviceIndex index);

// A contiguous tpu tensor of `sizes` and dtype `t` over runtime allocation
// `storage` (made by the runtime, holding at least one element), which it
// now owns.
at::Tensor tpu_tensor_of(etpu_storage storage, at::IntArrayRef sizes, at::ScalarType t, c10::DeviceIndex index);

// The device index of a `tpu` tensor.
inline int64_t device_index(const at::Tensor& t) { return t.device().index() < 0 ? 0 : t.device().index(); }

// The default tpu generator of a device (ops_random.cpp).
const at::Generator& default_generator(c10::DeviceIndex index);
// A new tpu generator (`torch.Generator(device="tpu")`).
at::Generator new_generator(c10::DeviceIndex index);

// The keys of `n` draws from device `index`'s default generator, taken in
// one step (as n kernels drawing one after another would take them): two
// halves each, in order; `counter` is the generator's counter before them.
struct DrawnKeys {
  std::vector<uint64_t> halves;
  uint64_t counter = 0;
};
DrawnKeys draw_keys(c10::DeviceIndex index, size_t n);

// Gives drawn keys back (a call that did not use them): the generator's
// counter goes back to before them, unless something drew after them.
void return_keys(c10::DeviceIndex index, const DrawnKeys& keys);

}  // namespace etpu
