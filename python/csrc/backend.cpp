// Glue between ATen and the runtime's C ABI: errors, dtypes, origins, and
// reading and writing tensors as views of their storages.
#include "backend.h"

#include <c10/core/AutogradState.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstring>
#include <deque>

#include <Python.h>
#include <frameobject.h>

// CPython 3.11 keeps a running function's frame as an internal
// `_PyInterpreterFrame`; the public `PyEval_GetFrame()` and `PyFrame_GetBack()`
// turn each frame they reach into a heap `PyFrameObject`, allocated and later
// freed for every new call of a library function an op is made in (3-5% of a
// small MLP's training step, side by side). On 3.11 the caller's frames are
// read in place, as PyTorch's own frame evaluation hooks read them; other
// versions use the public API.
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define ETPU_READ_INTERPRETER_FRAMES 1
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#else
#define ETPU_READ_INTERPRETER_FRAMES 0
#endif

#include <mutex>
#include <optional>
#include <unordered_map>

namespace etpu {

void check(etpu_status status) {
  if (status == ETPU_OK) return;
  TORCH_CHECK(false, eagertpu_last_error());
}

namespace {
// Torch dtypes in etpu_dtype order.
constexpr at::ScalarType kTypes[] = {
    at::kBool, at::kByte,      at::kChar,  at::kShort,  at::kInt,           at::kLong,
    at::kHalf, at::kBFloat16, at::kFloat, at::kDouble, at::kComplexFloat, at::kComplexDouble,
};
constexpr int8_t kTypeCount = sizeof(kTypes) / sizeof(kTypes[0]);
constexpr int kScalarTypes = static_cast<int>(at::ScalarType::NumOptions);

// The etpu_dtype code of each torch dtype, -1 for those not supported: every
// operand of every op asks.
constexpr std::array<int8_t, kScalarTypes> codes_by_type() {
  std::array<int8_t, kScalarTypes> codes{};
  for (auto& c : codes) c = -1;
  for (int8_t i = 0; i < kTypeCount; i++) codes[static_cast<int>(kTypes[i])] = i;
  return codes;
}
constexpr std::array<int8_t, kScalarTypes> kCodes = codes_by_type();

int8_t code_of(at::ScalarType t) {
  int i = static_cast<int>(t);
  return i >= 0 && i < kScalarTypes ? kCodes[i] : -1;
}
}  // namespace

bool supported(at::ScalarType t) { return code_of(t) >= 0; }

int32_t dtype_code(at::ScalarType t) {
  int8_t code = code_of(t);
  if (code >= 0) return code;
  TORCH_CHECK(false, "dtype ", t,
              " is not supported on tpu (expected bool, uint8, int8, int16, int32, int64, float16, bfloat16, "
              "float32, float64, complex64 or complex128)");
}

at::ScalarType scalar_type(int32_t code) {
  TORCH_CHECK(code >= 0 && code < kTypeCount, "unknown etpu dtype ", code);
  return kTypes[code];
}

// ------------------------------------------------------------- origins ----

namespace {
thread_local int scope_depth = 0;
thread_local bool origin_valid = false;
thread_local const char* origin_text = "";

std::mutex internal_mu;
std::vector<std::string> internal_dirs;

// Frames of torch, eagertpu and the standard library's helpers are skipped.
bool internal_file(const char* f) {
  if (strncmp(f, "<frozen", 7) == 0) return true;
  std::lock_guard<std::mutex> lock(internal_mu);
  for (const auto& d : internal_dirs)
    if (strncmp(f, d.c_str(), d.size()) == 0) return true;
  return false;
}

// A frame's place in the code: (code object, instruction offset). Computing
// a line number scans the code's line table and classifying a file compares
// it with every internal directory, too slow to do for every op, so both are
// cached per place. The first line number is in the key, so a code object
// freed and another allocated at its address is not mistaken for it.
struct Site {
  const void* code;
  int lasti;
  int first_line;
  bool operator==(const Site& o) const { return code == o.code && lasti == o.lasti && first_line == o.first_line; }
};
struct SiteHash {
  size_t operator()(const Site& s) const {
    return std::hash<const void*>()(s.code) ^ (static_cast<size_t>(s.lasti) * 0x9e3779b97f4a7c15ULL);
  }
};
// A place's `file:line`, or nullopt for a frame of torch or eagertpu. Never
// cleared (the strings are handed out as origins; a program has a bounded
// number of call sites): past kMaxSites, places are looked up uncached.
// Guarded by `sites_mu`, never held while taking the GIL.
constexpr size_t kMaxSites = 1 << 16;
std::mutex sites_mu;
std::unordered_map<Site, std::optional<std::string>, SiteHash> sites;
thread_local std::string uncached_site;

const char* kNoFrame = "autograd backward (no Python frame)";

// Each thread's copy of the places it has looked up (entries point into
// `sites`, whose nodes never move or go): an op walks several library frames
// to reach the user's, and looking each up under `sites_mu` cost a lock per
// frame per op. Bounded as `sites` is.
thread_local std::unordered_map<Site, const char*, SiteHash> thread_sites;

// The cached place of `key`: found (its text, or nullptr for an internal
// frame) or not.
std::optional<const char*> cached_site(const Site& key) {
  auto local = thread_sites.find(key);
  if (local != thread_sites.end()) return local->second;
  std::lock_guard<std::mutex> lock(sites_mu);
  auto it = sites.find(key);
  if (it == sites.end()) return std::nullopt;
  const char* text = it->second ? it->second->c_str() : nullptr;
  if (thread_sites.size() < kMaxSites) thread_sites.emplace(key, text);
  return text;
}

// The code of an FX graph (torch.compile) is in files named so.
constexpr char kGraphCode[] = "<eval_with_key>";

// The user's line behind line `line` of a compiled graph's code, as the
// dynamo backend mapped it (eagertpu.dynamo.user_line), if it did. The GIL held.
std::optional<std::string> compiled_graph_user_line(const char* file, int line) {
  PyObject* name = PyUnicode_FromString("eagertpu.dynamo");
  PyObject* module = name == nullptr ? nullptr : PyImport_GetModule(name);
  Py_XDECREF(name);
  if (module == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  PyObject* found = PyObject_CallMethod(module, "user_line", "si", file, line);
  Py_DECREF(module);
  std::optional<std::string> out;
  if (found != nullptr && PyUnicode_Check(found)) {
    if (const char* text = PyUnicode_AsUTF8(found)) out = text;
  }
  Py_XDECREF(found);
  PyErr_Clear();
  return out;
}

// The user's `file:line` of the frame running `code` at byte offset `lasti`,
// or nullptr for an internal frame. The GIL held.
const char* site_of(PyCodeObject* code, int lasti) {
  Site key{code, lasti, code->co_firstlineno};
  if (auto cached = cached_site(key)) return *cached;
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  std::optional<std::string> text;
  if (file != nullptr && !internal_file(file)) {
    int line = PyCode_Addr2Line(code, lasti);
    text = std::string(file) + ":" + std::to_string(line);
    if (std::strncmp(file, kGraphCode, sizeof(kGraphCode) - 1) == 0) {
      if (auto user = compiled_graph_user_line(file, line)) text = std::move(user);
    }
  }
  std::lock_guard<std::mutex> lock(sites_mu);
  if (sites.size() >= kMaxSites) {
    if (!text) return nullptr;
    uncached_site = std::move(*text);
    return uncached_site.c_str();
  }
  auto it = sites.emplace(key, std::move(text)).first;
  return it->second ? it->second->c_str() : nullptr;
}

#if ETPU_READ_INTERPRETER_FRAMES
// The place a frame is at (a frame still setting up has none of its own yet).
std::optional<Site> site_key(_PyInterpreterFrame* f) {
  if (_PyFrame_IsIncomplete(f)) return std::nullopt;
  int lasti = _PyInterpreterFrame_LASTI(f);
  return Site{f->f_code, lasti < 0 ? -1 : lasti * static_cast<int>(sizeof(_Py_CODEUNIT)), f->f_code->co_firstlineno};
}

// The innermost user frame's `file:line` (or nullptr) if every frame up to
// it is a place seen before; nullopt otherwise. Needs no GIL: a thread in a
// kernel is not running Python, so its own frames (and the code objects they
// hold) stay as they are while they are read; the GIL, which ATen released
// for the op, is taken only to read a new place (taken for every op, it
// also made each op wait while another Python thread held it).
std::optional<const char*> innermost_cached_site(PyThreadState* tstate) {
  for (_PyInterpreterFrame* f = tstate->cframe->current_frame; f != nullptr; f = f->previous) {
    auto key = site_key(f);
    if (!key) continue;
    auto cached = cached_site(*key);
    if (!cached) return std::nullopt;
    if (*cached != nullptr) return cached;
  }
  return nullptr;
}
#endif

// The innermost user frame's `file:line` (the GIL held), or nullptr.
const char* innermost_user_site() {
#if ETPU_READ_INTERPRETER_FRAMES
  for (_PyInterpreterFrame* f = PyThreadState_Get()->cframe->current_frame; f != nullptr; f = f->previous) {
    auto key = site_key(f);
    if (!key) continue;
    if (const char* out = site_of(f->f_code, key->lasti)) return out;
  }
  return nullptr;
#else
  const char* out = nullptr;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  while (frame != nullptr && out == nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    out = site_of(code, PyFrame_GetLasti(frame));
    Py_DECREF(code);
    PyFrameObject* back = out == nullptr ? PyFrame_GetBack(frame) : nullptr;
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  return out;
#endif
}

const char* compute_origin() {
  if (!Py_IsInitialized()) return "a C++ caller";
  // A thread that never ran Python (autograd's device threads) has no frames:
  // no need to take the GIL to find that out.
  PyThreadState* tstate = PyGILState_GetThisThreadState();
  if (tstate == nullptr) return kNoFrame;
#if ETPU_READ_INTERPRETER_FRAMES
  if (auto cached = innermost_cached_site(tstate)) return *cached == nullptr ? kNoFrame : *cached;
#endif
  PyGILState_STATE gil = PyGILState_Ensure();
  const char* out = innermost_user_site();
  if (PyErr_Occurred()) PyErr_Clear();
  PyGILState_Release(gil);
  return out == nullptr ? kNoFrame : out;
}
}  // namespace

// A thread's first tpu op turns off autograd's device threads for it: its
// backward passes then run on the thread itself, as on the CPU, instead of on
// autograd's one worker thread per device, where two Python threads training
// at once would have their backward ops interleaved into one op stream (the
// runtime keeps one trace per recording thread). Kernels only record ops, so
// a worker thread would overlap nothing. A user's own setting made after that
// first op stands.
thread_local bool backward_on_this_thread = false;

// The runtime's deterministic setting follows PyTorch's
// (`torch.use_deterministic_algorithms`), passed on when it changes: -1 until
// the first op. Fused mode's last bits then depend on the op stream alone.
std::atomic<int> deterministic_passed{-1};

void follow_deterministic_setting() {
  int now = at::globalContext().deterministicAlgorithms() ? 1 : 0;
  if (deterministic_passed.load(std::memory_order_relaxed) != now) {
    check(eagertpu_set_deterministic(now));
    deterministic_passed.store(now, std::memory_order_relaxed);
  }
}

OpScope::OpScope() {
  if (scope_depth++ == 0) {
    origin_valid = false;
    follow_deterministic_setting();
  }
  if (!backward_on_this_thread) {
    backward_on_this_thread = true;
    c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
  }
}

OpScope::~OpScope() { scope_depth--; }

const char* origin() {
  if (!origin_valid || scope_depth == 0) {
    origin_text = compute_origin();
    origin_valid = scope_depth > 0;
  }
  return origin_text;
}

// --------------------------------------------------------- reading/writing ----

std::vector<int64_t> dims_of(const Handle& h) {
  size_t rank = 0;
  check(etpu_tensor_rank(h.get(), &rank));
  std::vector<int64_t> d(rank);
  check(etpu_tensor_dims(h.get(), d.data(), rank));
  return d;
}

int32_t dtype_of(const Handle& h) {
  int32_t d = 0;
  check(etpu_tensor_dtype(h.get(), &d));
  return d;
}

etpu_scalar scalar_arg(const at::Scalar& s) {
  TORCH_CHECK(!s.isComplex(), "complex scalars are not supported on tpu, got ", s);
  if (s.isBoolean()) return {ETPU_SCALAR_BOOL, s.toBool() ? 1 : 0, 0.0};
  if (s.isIntegral(/*includeBool=*/false)) return {ETPU_SCALAR_INT, s.toLong(), 0.0};
  return {ETPU_SCALAR_FLOAT, 0, s.toDouble()};
}

Handle full(int64_t device, at::IntArrayRef sizes, const at::Scalar& v, at::ScalarType t) {
  Handle h;
  if (v.isComplex()) {
    // The C ABI's scalars are real: a complex one is uploaded, then expanded.
    TORCH_CHECK(at::isComplexType(t), "cannot fill a ", t, " tensor with the complex number ", v);
    return expand(upload(at::scalar_tensor(v, at::TensorOptions().dtype(t)), device), sizes);
  }
  check(etpu_full(device, sizes.data(), sizes.size(), scalar_arg(v), dtype_code(t), origin(), h.out()));
  return h;
}

namespace {
// Where `t`'s elements start in its storage, in bytes.
uint64_t byte_offset(const at::Tensor& t) { return static_cast<uint64_t>(t.storage_offset()) * t.itemsize(); }
}  // namespace

// A tensor's lazy conjugate and negative bits (`z.conj()`, `z.conj().imag`:
// views whose memory holds the conjugate or the negative of their values)
// applied to what its memory holds, both ways (the operation is its own
// inverse). PyTorch's fallbacks resolve the bits before most kernels; views,
// copies and the matrix products (mm, bmm, addmm, dot, ...) get them as they
// are, and read and write here.
Handle resolve_lazy_bits(const at::Tensor& t, Handle h) {
  if (t.is_conj()) h = unary("conj_physical", h);
  if (t.is_neg()) h = unary("neg", h);
  return h;
}

namespace {
// The dtype a Python complex number travels as beside an operand of dtype
// `t` (the C ABI's scalars are real): complex64, PyTorch's default complex
// dtype, which promotes as the number would; complex128 beside a
// double-precision operand, so that its digits survive.
at::ScalarType complex_number_type(at::ScalarType t) {
  return t == at::kDouble || t == at::kComplexDouble ? at::kComplexDouble : at::kComplexFloat;
}
}  // namespace

Handle read(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "Expected all tensors to be on the same device, but found at least two devices, tpu and ", t.device(),
              " (a ", t.scalar_type(), t.sizes(), " tensor on ", t.device(), ")");
  if (t.numel() == 0) return full(device_index(t), t.sizes(), 0, t.scalar_type());
  Handle h;
  check(etpu_view_read(storage_id(t.storage().data_ptr()), byte_offset(t), dtype_code(t.scalar_type()),
                       t.sizes().data(), t.strides().data(), t.dim(), origin(), h.out()));
  return resolve_lazy_bits(t, std::move(h));
}

Handle upload(const at::Tensor& cpu, int64_t device) {
  at::Tensor c = cpu.contiguous();
  Handle h;
  check(etpu_tensor_from_host(device, dtype_code(c.scalar_type()), c.sizes().data(), c.dim(), c.const_data_ptr(),
                              c.nbytes(), origin(), h.out()));
  return h;
}

Handle optional_read(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? read(*t) : Handle();
}

Handle read_operand(const at::Tensor& t, int64_t device) {
  if (t.device().is_cpu()) {
    TORCH_CHECK(t.dim() == 0, "expected all tensors to be on the same device, but found tensors on tpu:", device,
                " and cpu (a ", t.sizes(), " CPU tensor)");
    return upload(t, device);
  }
  return read(t);
}

void write(const at::Tensor& out, const Handle& value) {
  TORCH_CHECK(out.device().type() == c10::DeviceType::PrivateUse1, "expected a tpu tensor to write, got ",
              out.device());
  if (out.numel() == 0) return;
  Handle resolved;
  const Handle* stored = &value;
  if (out.is_conj() || out.is_neg()) {
    // The bits want the value's conjugate or negative in memory (in out's
    // dtype first: a real value's conjugate is itself).
    resolved = resolve_lazy_bits(out, cast(value, out.scalar_type()));
    stored = &resolved;
  }
  // The runtime converts the value to out's dtype and broadcasts it.
  check(etpu_view_write(storage_id(out.storage().data_ptr()), byte_offset(out), dtype_code(out.scalar_type()),
                        out.sizes().data(), out.strides().data(), out.dim(), stored->get(), origin()));
}

// ----------------------------------------------------- ops between views ----

ViewDesc::ViewDesc(const at::Tensor& t) {
  int64_t rank = t.dim();
  d_.reserve(4 + 2 * rank);
  d_.push_back(static_cast<int64_t>(storage_id(t.storage().data_ptr())));
  d_.push_back(static_cast<int64_t>(byte_offset(t)));
  d_.push_back(dtype_code(t.scalar_type()));
  d_.push_back(rank);
  d_.append(t.sizes().begin(), t.sizes().end());
  d_.append(t.strides().begin(), t.strides().end());
}

namespace {
// A tpu tensor with elements, read or written as a view of its storage by
// the runtime itself (one with a lazy bit goes through read and write).
bool direct(const at::Tensor& t) {
  return t.device().type() == c10::DeviceType::PrivateUse1 && t.numel() > 0 && !t.is_conj() && !t.is_neg();
}

}  // namespace

// As the C ABI's limit (elu_backward takes six).
constexpr size_t kMaxPointwiseArgs = 8;

at::Scalar wrapped_number(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kDouble: return *t.const_data_ptr<double>();
    case at::kLong: return *t.const_data_ptr<int64_t>();
    case at::kBool: return *t.const_data_ptr<bool>();
    default: return t.item();
  }
}

namespace {
// One operand as the C ABI takes it: a tpu tensor as a view of its storage, a
// Python number as a weak scalar, a CPU 0-d tensor (or a tensor without
// elements) uploaded. A view's descriptor goes to `views` and an upload's
// handle to `handles`, whose elements must never move (the operand points
// into its descriptor). A Python complex number goes as a 0-d tensor
// (complex_number_type) of the widest precision among the call's `others`.
template <typename Views, typename Handles>
etpu_operand encode(const PointwiseArg& a, int64_t device, Views& views, Handles& handles,
                    std::initializer_list<PointwiseArg> others = {}) {
  const at::Tensor* t = a.tensor;
  if (t == nullptr || t->unsafeGetTensorImpl()->is_wrapped_number()) {
    at::Scalar number = t == nullptr ? a.number : wrapped_number(*t);
    if (number.isComplex()) {
      at::ScalarType complex_type = at::kComplexFloat;
      for (const PointwiseArg& o : others) {
        if (o.tensor != nullptr && !o.tensor->unsafeGetTensorImpl()->is_wrapped_number() &&
            complex_number_type(o.tensor->scalar_type()) == at::kComplexDouble) {
          complex_type = at::kComplexDouble;
        }
      }
      at::Tensor cpu = at::scalar_tensor(number, at::TensorOptions().dtype(complex_type));
      return {ETPU_OPERAND_HANDLE, handles.emplace_back(upload(cpu, device)).get(), nullptr, {}};
    }
    return {ETPU_OPERAND_SCALAR, 0, nullptr, scalar_arg(number)};
  }
  if (direct(*t)) return {ETPU_OPERAND_VIEW, 0, views.emplace_back(*t).get(), {}};
  return {ETPU_OPERAND_HANDLE, handles.emplace_back(read_operand(*t, device)).get(), nullptr, {}};
}

// The operands of one call. Built in place and never moved.
class Operands {
 public:
  Operands(const char* op, std::initializer_list<PointwiseArg> args, int64_t device) {
    TORCH_CHECK(args.size() <= kMaxPointwiseArgs, op, ": got ", args.size(), " operands, expected at most ",
                kMaxPointwiseArgs);
    for (const PointwiseArg& a : args) operands_.push_back(encode(a, device, views_, handles_, args));
  }
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  const etpu_operand* data() const { return operands_.data(); }
  size_t size() const { return operands_.size(); }

 private:
  // On the stack, never grown past their capacity (checked above).
  c10::SmallVector<etpu_operand, kMaxPointwiseArgs> operands_;
  c10::SmallVector<ViewDesc, kMaxPointwiseArgs> views_;
  c10::SmallVector<Handle, kMaxPointwiseArgs> handles_;
};
}  // namespace

void OperandList::add(const PointwiseArg& a) { operands_.push_back(encode(a, device_, views_, handles_)); }

void OperandList::add_absent() { operands_.push_back({ETPU_OPERAND_HANDLE, 0, nullptr, {}}); }

void OperandList::add_optional(const std::optional<at::Tensor>& t) {
  if (t.has_value() && t->defined()) {
    add(*t);
  } else {
    add_absent();
  }
}

void pointwise_foreach(const char* op, const std::vector<PointwiseArg>& args, size_t nargs, at::TensorList outs) {
  TORCH_CHECK(nargs > 0 && nargs <= kMaxPointwiseArgs && args.size() == nargs * outs.size(), op, ": got ",
              args.size(), " operands for ", outs.size(), " outputs of ", nargs, " operands each");
  if (outs.empty()) return;
  OperandList operands(device_index(outs[0]));
  for (const PointwiseArg& a : args) operands.add(a);
  std::deque<ViewDesc> out_views;
  std::vector<const int64_t*> out_ptrs;
  out_ptrs.reserve(outs.size());
  for (const at::Tensor& o : outs) {
    TORCH_CHECK(direct(o), op, ": expected tpu outputs with elements, got a ", o.scalar_type(), o.sizes(), " on ",
                o.device());
    out_ptrs.push_back(out_views.emplace_back(o).get());
  }
  check(etpu_pointwise_foreach(op, operands.data(), nargs, outs.size(), out_ptrs.data(), origin()));
}

std::vector<at::Tensor> pointwise_foreach_new(const char* op, const std::vector<PointwiseArg>& args, size_t nargs,
                                              at::TensorList likes) {
  TORCH_CHECK(nargs > 0 && nargs <= kMaxPointwiseArgs && args.size() == nargs * likes.size(), op, ": got ",
              args.size(), " operands for ", likes.size(), " results of ", nargs, " operands each");
  if (likes.empty()) return {};
  const at::ScalarType t = likes[0].scalar_type();
  const c10::DeviceIndex index = likes[0].device().index();
  OperandList operands(device_index(likes[0]));
  for (const PointwiseArg& a : args) operands.add(a);
  std::vector<const int64_t*> sizes;
  std::vector<size_t> ranks;
  sizes.reserve(likes.size());
  ranks.reserve(likes.size());
  for (const at::Tensor& like : likes) {
    TORCH_CHECK(like.numel() > 0 && like.scalar_type() == t && like.device() == likes[0].device(), op,
                ": expected results with elements of one dtype and device, got a ", like.scalar_type(),
                like.sizes(), " on ", like.device(), " beside a ", t, " on ", likes[0].device());
    sizes.push_back(like.sizes().data());
    ranks.push_back(like.dim());
  }
  std::vector<etpu_storage> storages(likes.size(), 0);
  check(etpu_pointwise_foreach_new(op, operands.data(), nargs, likes.size(), device_index(likes[0]), dtype_code(t),
                                   sizes.data(), ranks.data(), origin(), storages.data()));
  std::vector<at::Tensor> results;
  results.reserve(likes.size());
  size_t i = 0;
  try {
    for (; i < likes.size(); i++) results.push_back(tpu_tensor_of(storages[i], likes[i].sizes(), t, index));
  } catch (...) {
    // tpu_tensor_of freed the storage it refused; the ones after it are ours.
    for (size_t j = i + 1; j < storages.size(); j++) etpu_storage_free(storages[j]);
    throw;
  }
  return results;
}

void pointwise(const char* op, std::initializer_list<PointwiseArg> args, const at::Tensor& out) {
  Operands operands(op, args, device_index(out));
  if (direct(out)) {
    check(etpu_pointwise(op, operands.data(), operands.size(), ViewDesc(out).get(), origin(), nullptr));
  } else {
    Handle result;
    check(etpu_pointwise(op, operands.data(), operands.size(), nullptr, origin(), result.out()));
    write(out, result);
  }
}

namespace {
// `call` (etpu_pointwise_new or etpu_op_new: the same parameters) running
// `op` over `args` into a new allocation, as a tensor of `sizes` and `t`.
at::Tensor made_by(decltype(&etpu_op_new) call, const char* op, std::initializer_list<PointwiseArg> args,
                   at::IntArrayRef sizes, at::ScalarType t, c10::DeviceIndex index) {
  Operands operands(op, args, index);
  etpu_storage storage = 0;
  check(call(op, operands.data(), operands.size(), index, dtype_code(t), sizes.data(), sizes.size(), origin(),
             &storage));
  return tpu_tensor_of(storage, sizes, t, index);
}
}  // namespace

at::Tensor pointwise_new(const char* op, std::initializer_list<PointwiseArg> args, at::IntArrayRef sizes,
                         at::ScalarType t, c10::DeviceIndex index) {
  if (c10::multiply_integers(sizes) == 0) {  // no allocation to make
    at::Tensor out = empty_tpu(sizes, t, index);
    pointwise(op, args, out);
    return out;
  }
  return made_by(etpu_pointwise_new, op, args, sizes, t, index);
}

at::Tensor op_new(const char* op, std::initializer_list<PointwiseArg> args, at::IntArrayRef sizes, at::ScalarType t,
                  c10::DeviceIndex index) {
  if (c10::multiply_integers(sizes) == 0) return empty_tpu(sizes, t, index);  // no values to make
  return made_by(etpu_op_new, op, args, sizes, t, index);
}

at::Tensor tensor_holding(const Handle& value, at::IntArrayRef sizes, at::ScalarType t, c10::DeviceIndex index) {
  if (c10::multiply_integers(sizes) == 0) return empty_tpu(sizes, t, index);  // no allocation to make
  etpu_storage storage = 0;
  check(etpu_storage_holding(value.get(), dtype_code(t), sizes.data(), sizes.size(), origin(), &storage));
  return tpu_tensor_of(storage, sizes, t, index);
}

void sample(const char* distribution, std::initializer_list<PointwiseArg> args, std::pair<uint64_t, uint64_t> key,
            const at::Tensor& out) {
  if (out.numel() == 0) return;
  Operands operands(distribution, args, device_index(out));
  check(etpu_sample(device_index(out), distribution, operands.data(), operands.size(), key.first, key.second,
                    ViewDesc(out).get(), origin()));
}

// ------------------------------------------------------------------ ops ----

Handle unary(const char* op, const Handle& x) {
  Handle h;
  check(etpu_unary(op, x.get(), origin(), h.out()));
  return h;
}

Handle binary(const char* op, const Handle& a, const Handle& b) {
  Handle h;
  check(etpu_binary(op, a.get(), b.get(), origin(), h.out()));
  return h;
}

Handle binary_scalar(const char* op, const Handle& a, const at::Scalar& s, bool reversed) {
  Handle h;
  if (s.isComplex()) {
    // As a 0-d complex tensor (see encode: it promotes as the number would).
    int64_t device = 0;
    check(etpu_tensor_device(a.get(), &device));
    Handle number = full(device, {}, s, complex_number_type(scalar_type(dtype_of(a))));
    return reversed ? binary(op, number, a) : binary(op, a, number);
  }
  check(etpu_binary_scalar(op, a.get(), scalar_arg(s), reversed, origin(), h.out()));
  return h;
}

Handle cast(const Handle& x, at::ScalarType t) {
  Handle h;
  check(etpu_cast(x.get(), dtype_code(t), origin(), h.out()));
  return h;
}

Handle reshape(const Handle& x, at::IntArrayRef sizes) {
  Handle h;
  check(etpu_reshape(x.get(), sizes.data(), sizes.size(), origin(), h.out()));
  return h;
}

Handle permute(const Handle& x, at::IntArrayRef perm) {
  Handle h;
  check(etpu_permute(x.get(), perm.data(), perm.size(), origin(), h.out()));
  return h;
}

Handle flip(const Handle& x, at::IntArrayRef dims) {
  Handle h;
  check(etpu_flip(x.get(), dims.data(), dims.size(), origin(), h.out()));
  return h;
}

Handle expand(const Handle& x, at::IntArrayRef sizes) {
  Handle h;
  check(etpu_expand(x.get(), sizes.data(), sizes.size(), origin(), h.out()));
  return h;
}

Handle reduce(const char* op, const Handle& x, at::IntArrayRef dims, bool keepdim) {
  Handle h;
  check(etpu_reduce(op, x.get(), dims.data(), dims.size(), keepdim, origin(), h.out()));
  return h;
}

Handle matmul(const Handle& a, const Handle& b) {
  Handle h;
  check(etpu_matmul(a.get(), b.get(), origin(), h.out()));
  return h;
}

Handle softmax(const Handle& x, int64_t dim, bool log) {
  Handle h;
  check(etpu_softmax(x.get(), dim, log, origin(), h.out()));
  return h;
}

Handle where(const Handle& c, const Handle& x, const Handle& y) {
  Handle h;
  check(etpu_where(c.get(), x.get(), y.get(), origin(), h.out()));
  return h;
}

Handle index_select(const Handle& x, int64_t dim, const Handle& index) {
  Handle h;
  check(etpu_index_select(x.get(), dim, index.get(), origin(), h.out()));
  return h;
}

Handle gather(const Handle& x, int64_t dim, const Handle& index) {
  Handle h;
  check(etpu_gather(x.get(), dim, index.get(), origin(), h.out()));
  return h;
}

Handle scatter(const Handle& x, int64_t dim, const Handle& index, const Handle& src, bool add) {
  Handle h;
  check(etpu_scatter(x.get(), dim, index.get(), src.get(), add, origin(), h.out()));
  return h;
}

Handle arange(int64_t device, const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
              at::ScalarType t) {
  Handle h;
  check(etpu_arange(device, scalar_arg(start), scalar_arg(end), scalar_arg(step), dtype_code(t), origin(), h.out()));
  return h;
}

Handle clamp(const Handle& x, const std::optional<at::Scalar>& lo, const std::optional<at::Scalar>& hi) {
  Handle h;
  // Both bounds integers or both floats, as before the tagged scalar: an
  // integer bound beside a float one is a float.
  bool is_float = (lo && lo->isFloatingPoint()) || (hi && hi->isFloatingPoint());
  auto arg = [is_float](const std::optional<at::Scalar>& s) {
    return is_float ? etpu_scalar{ETPU_SCALAR_FLOAT, 0, s->toDouble()} : scalar_arg(*s);
  };
  etpu_scalar l = lo ? arg(lo) : etpu_scalar{}, u = hi ? arg(hi) : etpu_scalar{};
  check(etpu_clamp(x.get(), lo ? &l : nullptr, hi ? &u : nullptr, origin(), h.out()));
  return h;
}

Handle argreduce(const char* op, const Handle& x, std::optional<int64_t> dim, bool keepdim) {
  Handle h;
  check(etpu_argreduce(op, x.get(), dim.value_or(0), dim.has_value(), keepdim, origin(), h.out()));
  return h;
}

Handle var(const Handle& x, at::IntArrayRef dims, int64_t correction, bool keepdim) {
  Handle h;
  check(etpu_var(x.get(), dims.data(), dims.size(), correction, keepdim, origin(), h.out()));
  return h;
}

Handle slice(const Handle& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Handle h;
  check(etpu_slice(x.get(), dim, start, end, step, origin(), h.out()));
  return h;
}

Handle cat(const std::vector<etpu_tensor>& xs, int64_t dim) {
  Handle h;
  check(etpu_cat(xs.data(), xs.size(), dim, origin(), h.out()));
  return h;
}

}  // namespace etpu

// Python files under `dir` (a path ending in '/') are not user code:
// torch.ops.eagertpu.add_internal_dir, called by the package for torch's
// directory and its own.
namespace {
void add_internal_dir(c10::string_view dir) {
  std::lock_guard<std::mutex> lock(etpu::internal_mu);
  etpu::internal_dirs.emplace_back(dir);
}
}  // namespace

TORCH_LIBRARY_FRAGMENT(eagertpu, m) { m.def("add_internal_dir(str dir) -> ()", &add_internal_dir); }
