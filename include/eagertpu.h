/* EagerTPU C ABI.
 *
 * Hand-written; ffi/src is the implementation, and ffi/tests/header.rs fails
 * when a declaration here and the Rust side disagree.
 *
 * Conventions:
 * - Tensors are handles (etpu_tensor); 0 is "no tensor". A null, unknown or
 *   freed handle is the error ETPU_BAD_HANDLE, never a crash.
 * - Every function but the first three returns an etpu_status; on failure,
 *   eagertpu_last_error() holds this thread's message (it names the op, what
 *   it got and what it expected). Nothing unwinds or aborts across the ABI.
 * - Ops take `origin`, the caller's "file:line" (may be NULL). In strict and
 *   fused mode an op that fails to run surfaces at the next read or sync of
 *   anything depending on it; the error names the op and this origin.
 * - Results are new handles written to `out`; free each with etpu_tensor_free.
 */
#ifndef EAGERTPU_H_
#define EAGERTPU_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EAGERTPU_ABI_VERSION 5

typedef int32_t etpu_status;
typedef uint64_t etpu_tensor;
typedef uint64_t etpu_storage;
typedef uint64_t etpu_group;
typedef uint64_t etpu_event;

enum {
  ETPU_OK = 0,
  ETPU_INVALID_ARGUMENT = 1, /* bad shapes, dtypes, dims, indices, names, NULLs */
  ETPU_BAD_HANDLE = 2,       /* a null, unknown or freed tensor handle */
  ETPU_FAILED = 3,           /* no plugin, a compile or execution failure */
  ETPU_PANIC = 4             /* a bug in EagerTPU, caught at the boundary */
};

/* etpu_dtype */
enum {
  ETPU_BOOL = 0,
  ETPU_U8 = 1,
  ETPU_I8 = 2,
  ETPU_I16 = 3,
  ETPU_I32 = 4,
  ETPU_I64 = 5,
  ETPU_F16 = 6,
  ETPU_BF16 = 7,
  ETPU_F32 = 8,
  ETPU_F64 = 9,
  ETPU_C64 = 10, /* complex64: two f32s, real then imaginary */
  ETPU_C128 = 11 /* complex128: two f64s */
};

/* etpu_scalar kinds */
enum { ETPU_SCALAR_BOOL = 0, ETPU_SCALAR_INT = 1, ETPU_SCALAR_FLOAT = 2 };

/* A Python number: a bool (0 or 1) or an integer in `i`, exactly (an int64
 * above 2^53 survives), a float in `f`. Promotes as PyTorch promotes a Python
 * number: an int does not widen an int8 tensor, a float makes an int tensor
 * float32. */
typedef struct {
  int32_t kind;
  int64_t i;
  double f;
} etpu_scalar;

/* etpu_mode */
enum { ETPU_MODE_DEBUG = 0, ETPU_MODE_STRICT = 1, ETPU_MODE_FUSED = 2 };

/* ------------------------------------------------------------ runtime ---- */

/* The library version, a static string. */
const char* eagertpu_version(void);
/* The C ABI version (EAGERTPU_ABI_VERSION). */
uint32_t eagertpu_abi_version(void);
/* This thread's last error message ("" if none). */
const char* eagertpu_last_error(void);

etpu_status eagertpu_device_count(int64_t* out);
/* Switches the mode (etpu_mode) for the process; pending work runs first. */
etpu_status eagertpu_set_mode(int32_t mode);
etpu_status eagertpu_get_mode(int32_t* out);
/* Runs everything pending and waits; reports every failure since the last sync. */
etpu_status eagertpu_sync(void);
/* Runs everything pending, waits, and stops the background compile pool: call before exiting. */
etpu_status eagertpu_shutdown(void);
/* Waits until the fused chunks queued for background compilation are compiled. */
etpu_status eagertpu_wait_for_compiles(void);
/* Opens a call of compiled graph `id` (torch.compile) on `device` for this thread:
   pending work runs first; the ops recorded until eagertpu_graph_end run as one
   program, compiled at once and replayed at the graph's next calls. *opened is 0
   in debug mode, where the graph's ops run one by one. */
etpu_status eagertpu_graph_begin(int64_t device, uint64_t id, int32_t* opened);
/* Closes this thread's open graph call on `device`: its ops run as one program. */
etpu_status eagertpu_graph_end(int64_t device);
/* After a call of graph `id` through a scope, with the tensors it read and returned:
   makes its later calls direct (*captured = 1) if that call ran as one chunk whose
   parameters were those inputs (and scalars) and whose results are those outputs.
   `updates` holds n_updates pairs (input, output): inputs the caller updates with those
   outputs after each call, donated to them where nothing else holds them. */
etpu_status eagertpu_graph_capture(int64_t device, uint64_t id, const etpu_tensor* inputs,
                                   size_t n_inputs, const etpu_tensor* outputs, size_t n_outputs,
                                   const int64_t* updates, size_t n_updates, int32_t* captured);
/* The random draws a direct call of captured graph `id` makes (the keys
   eagertpu_graph_call takes), or -1 when it has no direct call. */
etpu_status eagertpu_graph_draws(int64_t device, uint64_t id, int64_t* draws);
/* Calls captured graph `id`: its program runs on the inputs' buffers (each input the
   contents of allocation storages[i]) with n_keys keys for its random draws (`keys`: two
   halves each, in the order drawn), nothing is recorded, and n_outputs new handles are
   written to `outputs` (*called = 1). An input the graph updates that nothing but its
   allocation and its handle holds is donated: its allocation then holds the updated value.
   *called = 0, nothing written, when it has no direct call, the inputs' types differ from
   the captured ones, or n_keys is not its number of draws. */
etpu_status eagertpu_graph_call(int64_t device, uint64_t id, const etpu_tensor* inputs,
                                const etpu_storage* storages, size_t n_inputs,
                                const uint64_t* keys, size_t n_keys, etpu_tensor* outputs,
                                size_t n_outputs, int32_t* called);
/* 1: the first op producing NaN/Inf is an error naming it. */
etpu_status eagertpu_set_check_nan(int32_t on);
/* 1: fused mode's results depend only on the op stream, bit for bit (a hot chunk is compiled
   on the calling thread and used from its hot sighting on, never earlier from disk). */
etpu_status eagertpu_set_deterministic(int32_t on);
/* One op of the caller's: the ops this thread calls between begin and end run as one program in
   debug and strict modes (a _foreach op over a list launches once, not once per tensor). Scopes
   nest; the outermost end launches (in debug mode, and waits: a launch error is returned there).
   end without a begin on this thread: ETPU_INVALID_ARGUMENT. */
etpu_status etpu_one_op_begin(void);
etpu_status etpu_one_op_end(void);
/* The metrics report: at most `capacity` bytes (NUL-terminated) into `buf`
 * (may be NULL), and the full size including the NUL into `length`. */
etpu_status eagertpu_metrics_report(char* buf, size_t capacity, size_t* length);
/* The same counters as one JSON object (numbers as numbers), written the same way. */
etpu_status eagertpu_metrics_json(char* buf, size_t capacity, size_t* length);
/* Counts a CPU fallback of `op` (an op a caller runs on the CPU for lack of a kernel); `*first`
 * is true the first time for `op`. Under EAGERTPU_FALLBACK=error it is refused instead:
 * ETPU_INVALID_ARGUMENT with a message naming the op. Both are in the metrics. */
etpu_status eagertpu_note_fallback(const char* op, bool* first);

/* ------------------------------------------------------------ tensors ---- */

/* A tensor of `dtype` and shape dims[0..rank] from `nbytes` bytes at `data`
 * (row-major, little-endian; bools 0 or 1) on device `device`; the copy is blamed on
 * `origin` (the caller's `file:line`; may be NULL) in profiler traces. */
etpu_status etpu_tensor_from_host(int64_t device, int32_t dtype, const int64_t* dims, size_t rank,
                                  const void* data, size_t nbytes, const char* origin, etpu_tensor* out);
/* Copies the elements to `dst` (exactly the tensor's size), waiting for them: a host sync,
 * counted by call site at `origin` (the caller's `file:line`; may be NULL). */
etpu_status etpu_tensor_to_host(etpu_tensor t, void* dst, size_t nbytes, const char* origin);
etpu_status etpu_tensor_free(etpu_tensor t);
/* A second handle to the same tensor. */
etpu_status etpu_tensor_clone(etpu_tensor t, etpu_tensor* out);
etpu_status etpu_tensor_dtype(etpu_tensor t, int32_t* out);
etpu_status etpu_tensor_rank(etpu_tensor t, size_t* out);
/* Writes the dims to out[0..capacity] (capacity >= rank). */
etpu_status etpu_tensor_dims(etpu_tensor t, int64_t* out, size_t capacity);
etpu_status etpu_tensor_device(etpu_tensor t, int64_t* out);
/* Waits until the tensor is computed; its op's error if it failed. */
etpu_status etpu_tensor_sync(etpu_tensor t);
/* Number of live handles (for leak checks). */
etpu_status etpu_live_tensors(int64_t* out);

/* ----------------------------------------------------------- storages ---- */
/* PyTorch's allocator for `tpu` hands out addresses in a reserved, never-mapped
 * range (its data_ptr()s) and registers each allocation here, keeping the
 * etpu_storage id it gets (a number, never a pointer) beside it. Its contents
 * are a runtime value; kernels read a tensor as a view (storage, byte offset,
 * dtype, sizes, strides in elements) and write results through views. A freed
 * or unknown storage id is an error. */

etpu_status etpu_storage_new(int64_t device, size_t nbytes, etpu_storage* out);
etpu_status etpu_storage_free(etpu_storage storage);
/* A new allocation on `value`'s device holding `value` as a contiguous
 * `dtype` array of `sizes[0..rank]` (converted and broadcast to it), its id
 * written to `out`: a kernel's fresh result in one call (no allocation before
 * it, no view written). Nothing is allocated on failure; `value` stays the
 * caller's. */
etpu_status etpu_storage_holding(etpu_tensor value, int32_t dtype, const int64_t* sizes, size_t rank,
                                 const char* origin, etpu_storage* out);
/* Allocations and their bytes on `device` (-1: all devices). */
etpu_status etpu_storage_stats(int64_t device, int64_t* count, int64_t* bytes);
/* A device's memory, as PyTorch's allocator statistics count it: live allocations and bytes,
   their peaks since the last reset, allocations and bytes allocated and freed since the last
   reset; then the plugin's own counts (-1 where the plugin keeps none, as the XLA CPU plugin). */
typedef struct etpu_memory_counts {
  int64_t allocations, bytes, peak_allocations, peak_bytes;
  int64_t allocated_count, allocated_bytes, freed_count, freed_bytes;
  int64_t device_bytes_in_use, device_peak_bytes_in_use, device_bytes_limit;
} etpu_memory_counts;
etpu_status etpu_memory_usage(int64_t device, etpu_memory_counts* out);
/* what = 1: peaks start again from what is live; 2: allocated/freed counts start from zero. */
etpu_status etpu_memory_reset(int64_t device, int32_t what);
/* Events (torch.tpu.Event): recording one launches what is pending on `device`; it is
   complete when the work launched before it is. With `timing` = 1 it notes when that work
   finished (the plugin's completion callbacks: the PJRT C API has no device timestamps). */
etpu_status etpu_event_record(int64_t device, int32_t timing, etpu_event* out);
etpu_status etpu_event_free(etpu_event event);
/* *done = 1 when the work before the event has finished (never blocks). */
etpu_status etpu_event_query(etpu_event event, bool* done);
/* Waits for the work before the event; its first failure. */
etpu_status etpu_event_synchronize(etpu_event event);
/* Milliseconds from `start` to `end` (both recorded with timing); waits for both. */
etpu_status etpu_event_elapsed_ms(etpu_event start, etpu_event end, double* ms);
/* Profiler sessions (torch.profiler, through the backend's Kineto plugin): the runtime's
   activities with wall-clock spans in ns since the Unix epoch (the clock of PyTorch's profiler
   events), each blamed on the user's line (`origin`, "" where none is known: a background
   compile). ETPU_TRACE_EXECUTE spans a program from its launch until the plugin reports its
   outputs ready; an execution still running when the session stops is left out. */
enum {
  ETPU_TRACE_COMPILE = 0,
  ETPU_TRACE_DISK_LOAD = 1,
  ETPU_TRACE_EXECUTE = 2,
  ETPU_TRACE_HOST_READ = 3,
  ETPU_TRACE_TO_DEVICE = 4
};
typedef struct etpu_trace_activity {
  int32_t kind, device;
  int64_t start_ns, end_ns;
  const char* name;   /* "eagertpu::compile", ... */
  const char* detail; /* "37 ops", "float32[64, 10]", ... */
  const char* origin; /* "train.py:12" */
} etpu_trace_activity;
typedef void (*etpu_trace_each)(void* user, const etpu_trace_activity* activity);
/* Starts recording (what an earlier session kept is dropped). */
etpu_status etpu_trace_start(void);
/* Stops recording; calls each(user, activity) for every activity in the order recorded (its
   strings valid during the call) and, unless NULL, writes how many did not fit (2^20 kept). */
etpu_status etpu_trace_stop(void* user, etpu_trace_each each, uint64_t* dropped);
/* The device's kind and the plugin's platform name, written as eagertpu_metrics_report writes. */
etpu_status etpu_device_kind(int64_t device, char* buf, size_t capacity, size_t* length);
etpu_status etpu_platform_name(char* buf, size_t capacity, size_t* length);
/* Copies the first `nbytes` of allocation `src` into allocation `dst`, element
 * by element; the rest of `dst` reads as zeros. */
etpu_status etpu_storage_copy(etpu_storage dst, etpu_storage src, size_t nbytes);
/* The dtype of an allocation's contents (etpu_dtype; -1 if never written). */
etpu_status etpu_storage_dtype(etpu_storage storage, int32_t* out);
etpu_status etpu_view_read(etpu_storage storage, uint64_t byte_offset, int32_t dtype,
                           const int64_t* sizes, const int64_t* strides, size_t rank,
                           const char* origin, etpu_tensor* out);
/* An allocation's contents as `dtype` elements, as they are held (in the shape they
 * were last written with): the value each view of it is read from. */
etpu_status etpu_storage_read(etpu_storage storage, int32_t dtype, etpu_tensor* out);
/* `value` is converted to the view's dtype and broadcast to its shape (as PyTorch
 * writes a result into an out= tensor); a shape that does not broadcast is an error. */
etpu_status etpu_view_write(etpu_storage storage, uint64_t byte_offset, int32_t dtype,
                            const int64_t* sizes, const int64_t* strides, size_t rank,
                            etpu_tensor value, const char* origin);

/* etpu_operand kinds */
enum { ETPU_OPERAND_HANDLE = 0, ETPU_OPERAND_VIEW = 1, ETPU_OPERAND_SCALAR = 2 };

/* An operand of etpu_pointwise: a tensor handle, a view of a storage or a
 * Python number, as `kind` says. A view descriptor is an int64_t array:
 * {storage, byte_offset, dtype, rank, sizes[0..rank], strides[0..rank]} (the
 * storage id as etpu_view_read takes it; strides in elements). */
typedef struct {
  int32_t kind;
  etpu_tensor handle;
  const int64_t* view;
  etpu_scalar scalar;
} etpu_operand;

/* `op` over args[0..nargs], broadcast and promoted as PyTorch does: a unary op
 * (x); a binary op (a, b), either of which may be a scalar; add and sub with
 * alpha (a, b, alpha: a scalar): a + alpha * b, alpha never changing the
 * result's dtype (torch.add's alpha); where (condition,
 * x, y); addcmul and addcdiv (self, t1, t2, value: a scalar); lerp (self, end,
 * weight); isinf isposinf isneginf (x); hypot, xlogy, xlog1py, copysign, heaviside,
 * fmod, div_trunc, logaddexp, logaddexp2 (a, b: b may be a scalar); isin, isin_invert (elements, test elements: the
 * result has the elements' shape); searchsorted, searchsorted_right (sorted sequence,
 * values: the insertion indices, int64, the values' shape); a composed
 * function (x, scalar parameters...): expm1 exp2 log2 log10 tan sinh cosh atan
 * asin acos trunc frac erfinv sinc entr mish hardswish hardsigmoid log_sigmoid signbit
 * silu, softplus (beta, threshold), hardtanh (min, max), leaky_relu (slope),
 * elu (alpha, scale, input_scale), logit ([eps]), threshold (threshold, value),
 * nan_to_num (nan, posinf, neginf: a NaN posinf or neginf means the dtype's
 * largest finite value); or the backward of one of those, of gelu, gelu_tanh,
 * sigmoid or tanh, `<name>_backward` (grad, saved input, its parameters...,
 * saved_is_result: true when the saved tensor is the result: elu, leaky_relu,
 * sigmoid and tanh only). The result is written into view `out` (converted to its dtype and
 * broadcast to its shape) when `out` is not NULL, else returned as a new handle
 * in `result`: a kernel reads its inputs, runs the op and writes its output in
 * one call. */
etpu_status etpu_pointwise(const char* op, const etpu_operand* args, size_t nargs, const int64_t* out,
                           const char* origin, etpu_tensor* result);
/* etpu_pointwise's op into a new allocation on `device` holding the result as a
 * contiguous `dtype` array of sizes[0..rank] (converted and broadcast to it;
 * refused, as an out= view refuses, when the result's dtype can't be cast to
 * `dtype`), its id written to `storage`: a kernel's fresh result in one call,
 * no allocation made before it and no view written. Nothing is allocated when
 * it fails. Free it with etpu_storage_free. */
etpu_status etpu_pointwise_new(const char* op, const etpu_operand* args, size_t nargs, int64_t device,
                               int32_t dtype, const int64_t* sizes, size_t rank, const char* origin,
                               etpu_storage* storage);
/* One of the runtime's matrix products, sums and softmaxes over operands as
 * etpu_pointwise takes them (views, handles, numbers), into a new allocation
 * on `device` holding the result as a contiguous `dtype` array of
 * sizes[0..rank] (converted and broadcast to it, a dtype the result can't be
 * cast to refused), its id written to `storage`: a functional kernel's result
 * in one call. `op` (operands): matmul (a, b); addmm (bias, a, b, beta,
 * alpha: numbers): beta * bias + alpha * a @ b, bias ignored when beta is 0;
 * sum (x, dims: an integer with bit d set for each reduced dim d, 0 meaning
 * all, keepdim); softmax, log_softmax (x, dim); softmax_backward,
 * log_softmax_backward (grad, output, dim); nll_loss_backward (grad, input,
 * target, total_weight, reduction, ignore_index: as etpu_nll_loss_backward's,
 * no class weights). Nothing is allocated when it fails. Free it with
 * etpu_storage_free. */
etpu_status etpu_op_new(const char* op, const etpu_operand* args, size_t nargs, int64_t device, int32_t dtype,
                        const int64_t* sizes, size_t rank, const char* origin, etpu_storage* storage);
/* etpu_pointwise over `count` groups of `nargs` operands in one call (PyTorch's
 * _foreach_ ops): group i is args[i * nargs .. (i + 1) * nargs] and its result
 * is written into view outs[i]. The groups run in order, so a group reads what
 * an earlier one wrote; a failing group stops the call with an error naming
 * it, the groups before it written. */
etpu_status etpu_pointwise_foreach(const char* op, const etpu_operand* args, size_t nargs, size_t count,
                                   const int64_t* const* outs, const char* origin);
/* etpu_pointwise_foreach's groups, each result into a new allocation on
 * `device` holding it as a contiguous `dtype` array of sizes[i][0..ranks[i]]
 * (converted and broadcast to it, as etpu_pointwise_new makes one), their ids
 * written to storages[0..count]: a functional _foreach_ op's results in one
 * call, no allocation made before it and no view written. When a group fails
 * (the error names it), nothing is allocated and no id written. Free each with
 * etpu_storage_free. */
etpu_status etpu_pointwise_foreach_new(const char* op, const etpu_operand* args, size_t nargs, size_t count,
                                       int64_t device, int32_t dtype, const int64_t* const* sizes,
                                       const size_t* ranks, const char* origin, etpu_storage* storages);

/* ------------------------------------------------------ optimizer steps ---- */

/* An absent optional operand of the optimizer steps: a handle operand of handle 0. */

/* One Adam step (`decoupled`: AdamW) over `count` parameters, as PyTorch's
 * _fused_adam_ and _fused_adamw_: tensors[6 * i .. 6 * i + 6] are parameter i's
 * param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (with `amsgrad`; otherwise
 * absent) and step (its 0-d count, already incremented). The first five are
 * views, updated in place (grad with its unscaled value). `lr` is a number or a
 * one-element tensor; `grad_scale` and `found_inf` are tensors or absent (a
 * nonzero found_inf leaves everything as it was). Computed on the device, in
 * float32 for half-precision parameters. A parameter that fails stops the call
 * with an error naming it, the parameters before it updated. */
etpu_status etpu_fused_adam(const etpu_operand* tensors, size_t count, etpu_operand lr, double beta1, double beta2,
                            double weight_decay, double eps, bool amsgrad, bool maximize, bool decoupled,
                            etpu_operand grad_scale, etpu_operand found_inf, const char* origin);
/* One SGD step over `count` parameters, as PyTorch's _fused_sgd_:
 * tensors[3 * i .. 3 * i + 3] are parameter i's param, grad and momentum buffer
 * (with a nonzero `momentum`; otherwise absent), views updated in place. On the
 * first step the momentum buffer becomes the gradient. `lr`, `grad_scale` and
 * `found_inf` as etpu_fused_adam takes them. */
etpu_status etpu_fused_sgd(const etpu_operand* tensors, size_t count, etpu_operand lr, double weight_decay,
                           double momentum, double dampening, bool nesterov, bool maximize, bool is_first_step,
                           etpu_operand grad_scale, etpu_operand found_inf, const char* origin);

/* -------------------------------------------------------- collectives ---- */
/* A process group's ranks are devices of this process's client, each driven by
 * its own thread. A collective is called by every rank with its own rank and
 * tensor (on its device) and returns once every rank has called it: the ranks
 * agree on (op, dtype, shape, sequence number) first, so a mismatch fails every
 * rank with an error listing each rank's call and origin, and a rank missing
 * after the group's timeout fails the others with an error naming it. The
 * process goes on after either. The collective runs as a program of its own,
 * after what the rank recorded before it. */

/* etpu_reduce, numbered as c10d's ReduceOp */
enum { ETPU_REDUCE_SUM = 0, ETPU_REDUCE_AVG = 1, ETPU_REDUCE_PRODUCT = 2, ETPU_REDUCE_MIN = 3, ETPU_REDUCE_MAX = 4 };

/* A group of `size` ranks, rank r on device devices[r]; `timeout_seconds` 0
 * means EAGERTPU_COLLECTIVE_TIMEOUT. Writes one handle per rank to
 * out[0..size]; each rank frees its own. */
etpu_status etpu_group_new(const int64_t* devices, size_t size, double timeout_seconds, etpu_group* out);
/* Frees one rank's handle: the rank leaves the group, so a collective the
 * others wait for (or call later) fails at once, naming it. */
etpu_status etpu_group_free(etpu_group group);
/* Rank `rank`'s device. */
etpu_status etpu_group_device(etpu_group group, int64_t rank, int64_t* out);
/* Every rank's `x` reduced (etpu_reduce; AVG for floating-point dtypes only). */
etpu_status etpu_all_reduce(etpu_group group, int64_t rank, etpu_tensor x, int32_t reduce, const char* origin,
                            etpu_tensor* out);
/* Every rank's `x` concatenated along `dim`, in rank order. */
etpu_status etpu_all_gather(etpu_group group, int64_t rank, etpu_tensor x, int64_t dim, const char* origin,
                            etpu_tensor* out);
/* The reduction of every rank's `x`, split along `dim` into one block per rank:
 * this rank's block. */
etpu_status etpu_reduce_scatter(etpu_group group, int64_t rank, etpu_tensor x, int32_t reduce, int64_t dim,
                                const char* origin, etpu_tensor* out);
/* Rank `root`'s `x`, bit for bit (the others' values are not read). */
etpu_status etpu_broadcast(etpu_group group, int64_t rank, etpu_tensor x, int64_t root, const char* origin,
                           etpu_tensor* out);
/* `x` split along `split_dim` into one block per rank, block k sent to rank k;
 * the blocks received concatenated along `concat_dim`, in rank order. */
etpu_status etpu_all_to_all(etpu_group group, int64_t rank, etpu_tensor x, int64_t split_dim, int64_t concat_dim,
                            const char* origin, etpu_tensor* out);
/* Returns once every rank has called it and this rank's earlier work has run. */
etpu_status etpu_barrier(etpu_group group, int64_t rank, const char* origin);

/* -------------------------------------------------- distributed store ---- */
/* A multi-process job's plugin clients (libtpu, the CUDA plugin) find each
 * other through a key-value store: PyTorch's c10d store, handed over as three
 * functions. Each returns an etpu_kv_status and hands back the value (or, on
 * failure, a message) by calling deliver(sink, bytes, size), which copies. */

/* etpu_kv_status */
enum { ETPU_KV_OK = 0, ETPU_KV_NOT_FOUND = 1, ETPU_KV_TIMEOUT = 2, ETPU_KV_UNAVAILABLE = 3 };

typedef void (*etpu_kv_deliver)(void* sink, const char* bytes, size_t size);
/* The value under `key`, waiting up to `timeout_ms` for a process to put it. */
typedef int32_t (*etpu_kv_get)(void* user, const char* key, size_t key_size, int64_t timeout_ms, void* sink,
                               etpu_kv_deliver deliver);
/* The value under `key` now, or ETPU_KV_NOT_FOUND. */
typedef int32_t (*etpu_kv_try_get)(void* user, const char* key, size_t key_size, void* sink, etpu_kv_deliver deliver);
typedef int32_t (*etpu_kv_put)(void* user, const char* key, size_t key_size, const char* value, size_t value_size,
                               void* sink, etpu_kv_deliver deliver);

/* Makes this process node `node_id` of `num_nodes`; its plugin's client gets
 * the store (the CPU plugin takes it and never calls it). `user` is passed to
 * each function and must stay valid for the process. Before the runtime starts
 * (the first op), once. */
etpu_status etpu_set_distributed_store(int64_t node_id, int64_t num_nodes, etpu_kv_get get, etpu_kv_try_get try_get,
                                       etpu_kv_put put, void* user);
/* Calls the store's functions as a plugin's client does when it starts: this
 * node puts its key, then reads every node's within `timeout_ms`; a node
 * missing is an error naming it. */
etpu_status etpu_check_distributed_store(int64_t timeout_ms);

/* ---------------------------------------------------------------- ops ---- */

/* BEGIN elementwise op lists: generated from fusion/src/elementwise.rs. */
/* X(name, rule, aten_out) for each op of etpu_unary, and X(name, rule, aten_tensor_out,
 * aten_scalar_out) for each op of etpu_binary and etpu_binary_scalar (broadcasting and type
 * promotion as in PyTorch). rule: how the result dtype follows the operands' (FLOAT: integers
 * compute in the default float dtype; NUMERIC: bool is an error; PROMOTED: the operands'
 * promoted dtype; ...). aten_*: the ATen overload the PyTorch backend registers a kernel
 * for, or none. */
#define ETPU_UNARY_OPS(X) \
  X(neg, NUMERIC, out) \
  X(abs, NUMERIC, out) \
  X(exp, FLOAT, out) \
  X(log, FLOAT, out) \
  X(log1p, FLOAT, out) \
  X(sqrt, FLOAT, out) \
  X(rsqrt, FLOAT, out) \
  X(tanh, FLOAT, out) \
  X(sigmoid, FLOAT, out) \
  X(relu, NUMERIC, none) \
  X(gelu, FLOAT_OF_NUMERIC, none) \
  X(gelu_tanh, FLOAT_OF_NUMERIC, none) \
  X(sin, FLOAT, out) \
  X(cos, FLOAT, out) \
  X(floor, NUMERIC, out) \
  X(ceil, NUMERIC, out) \
  X(round, NUMERIC, out) \
  X(sign, SAME, out) \
  X(erf, FLOAT, out) \
  X(logical_not, BOOL, out) \
  X(isnan, BOOL, none) \
  X(bitwise_not, INTEGRAL, out) \
  X(erfc, FLOAT, out) \
  X(lgamma, FLOAT, out) \
  X(digamma, FLOAT, out) \
  X(asinh, FLOAT, out) \
  X(acosh, FLOAT, out) \
  X(atanh, FLOAT, out) \
  X(i0, FLOAT, out) \
  X(special_i0e, FLOAT, out) \
  X(special_i1, FLOAT, out) \
  X(special_i1e, FLOAT, out) \
  X(special_modified_bessel_i0, FLOAT, out) \
  X(special_modified_bessel_i1, FLOAT, out) \
  X(special_ndtri, FLOAT, out) \
  X(special_log_ndtr, FLOAT, out) \
  X(special_erfcx, FLOAT, out) \
  X(special_modified_bessel_k0, FLOAT, out) \
  X(special_modified_bessel_k1, FLOAT, out) \
  X(special_scaled_modified_bessel_k0, FLOAT, out) \
  X(special_scaled_modified_bessel_k1, FLOAT, out) \
  X(special_bessel_j0, FLOAT, out) \
  X(special_bessel_j1, FLOAT, out) \
  X(special_bessel_y0, FLOAT, out) \
  X(special_bessel_y1, FLOAT, out) \
  X(special_airy_ai, FLOAT, out) \
  X(special_spherical_bessel_j0, FLOAT, out) \
  X(real, PART, none) \
  X(imag, PART, none) \
  X(conj_physical, SAME, out) \
  X(angle, FLOAT, none) \
  X(sgn, SAME, out)
#define ETPU_BINARY_OPS(X) \
  X(add, PROMOTED, none, none) \
  X(sub, PROMOTED_NUMERIC, none, none) \
  X(mul, PROMOTED, out, none) \
  X(div, FLOAT, out, none) \
  X(pow, PROMOTED_NUMERIC, Tensor_Tensor_out, Tensor_Scalar_out) \
  X(maximum, PROMOTED, out, none) \
  X(minimum, PROMOTED, out, none) \
  X(remainder, PROMOTED_NUMERIC, Tensor_out, Scalar_out) \
  X(floor_divide, PROMOTED_NUMERIC, none, none) \
  X(atan2, FLOAT, out, none) \
  X(eq, BOOL, Tensor_out, Scalar_out) \
  X(ne, BOOL, Tensor_out, Scalar_out) \
  X(lt, BOOL, Tensor_out, Scalar_out) \
  X(le, BOOL, Tensor_out, Scalar_out) \
  X(gt, BOOL, Tensor_out, Scalar_out) \
  X(ge, BOOL, Tensor_out, Scalar_out) \
  X(logical_and, BOOL, out, none) \
  X(logical_or, BOOL, out, none) \
  X(logical_xor, BOOL, out, none) \
  X(bitwise_and, INTEGRAL, Tensor_out, none) \
  X(bitwise_or, INTEGRAL, Tensor_out, none) \
  X(bitwise_xor, INTEGRAL, Tensor_out, none) \
  X(bitwise_left_shift, INTEGER, Tensor_out, none) \
  X(bitwise_right_shift, INTEGER, Tensor_out, none) \
  X(gcd, INTEGER, out, none) \
  X(lcm, INTEGER, out, none) \
  X(polygamma, FLOAT, none, none) \
  X(special_zeta, FLOAT, out, none) \
  X(igamma, FLOAT, out, none) \
  X(igammac, FLOAT, out, none) \
  X(nextafter, FLOAT_OPERANDS, out, none) \
  X(_standard_gamma_grad, FLOAT, out, none) \
  X(complex, COMPLEX_OF_FLOATS, out, none) \
  X(polar, COMPLEX_OF_FLOATS, out, none)
/* END elementwise op lists */

/* op: a name of ETPU_UNARY_OPS. */
etpu_status etpu_unary(const char* op, etpu_tensor x, const char* origin, etpu_tensor* out);
/* op: a name of ETPU_BINARY_OPS; broadcasting and type promotion as in PyTorch. */
etpu_status etpu_binary(const char* op, etpu_tensor a, etpu_tensor b, const char* origin,
                        etpu_tensor* out);
/* op(a, value), or op(value, a) when `reversed`; `value` promotes like a
 * Python number (int8 + 1000 stays int8). */
etpu_status etpu_binary_scalar(const char* op, etpu_tensor a, etpu_scalar value, bool reversed,
                               const char* origin, etpu_tensor* out);
etpu_status etpu_where(etpu_tensor condition, etpu_tensor x, etpu_tensor y, const char* origin,
                       etpu_tensor* out);
etpu_status etpu_cast(etpu_tensor x, int32_t dtype, const char* origin, etpu_tensor* out);
etpu_status etpu_full(int64_t device, const int64_t* dims, size_t rank, etpu_scalar value,
                      int32_t dtype, const char* origin, etpu_tensor* out);
/* One dim may be -1. */
etpu_status etpu_reshape(etpu_tensor x, const int64_t* dims, size_t rank, const char* origin,
                         etpu_tensor* out);
etpu_status etpu_permute(etpu_tensor x, const int64_t* perm, size_t rank, const char* origin,
                         etpu_tensor* out);
/* Shifted by shifts[i] along dims[i] (torch.roll); with no dims, the flattened tensor by the one
 * shift. */
etpu_status etpu_roll(etpu_tensor x, const int64_t* shifts, size_t nshifts, const int64_t* dims, size_t n,
                      const char* origin, etpu_tensor* out);
/* The n x m identity of `dtype` (torch.eye). */
etpu_status etpu_eye(int64_t device, int64_t n, int64_t m, int32_t dtype, const char* origin, etpu_tensor* out);
/* `steps` values from start to end inclusive (torch.linspace: both ends exact; integer
   dtypes truncate the ends and each value). */
etpu_status etpu_linspace(int64_t device, double start, double end, int64_t steps, int32_t dtype,
                          const char* origin, etpu_tensor* out);
/* Reversed along dims (stablehlo.reverse); negative dims count from the end. */
etpu_status etpu_flip(etpu_tensor x, const int64_t* dims, size_t n, const char* origin, etpu_tensor* out);
/* -1 keeps a dim. */
etpu_status etpu_expand(etpu_tensor x, const int64_t* dims, size_t rank, const char* origin,
                        etpu_tensor* out);
/* x[start:end:step] along `dim`, with Python's rules. */
etpu_status etpu_slice(etpu_tensor x, int64_t dim, int64_t start, int64_t end, int64_t step,
                       const char* origin, etpu_tensor* out);
etpu_status etpu_cat(const etpu_tensor* xs, size_t n, int64_t dim, const char* origin,
                     etpu_tensor* out);
/* op (the runtime's Reduce table): sum mean prod max min logsumexp, any all (bool),
   count_nonzero (int64; keepdim false); no dims (ndims 0) reduces every dim. An unknown op is
   an error listing the table's names. */
etpu_status etpu_reduce(const char* op, etpu_tensor x, const int64_t* dims, size_t ndims,
                        bool keepdim, const char* origin, etpu_tensor* out);
etpu_status etpu_matmul(etpu_tensor a, etpu_tensor b, const char* origin, etpu_tensor* out);
/* softmax along `dim`, or log_softmax when `log`. */
etpu_status etpu_softmax(etpu_tensor x, int64_t dim, bool log, const char* origin,
                         etpu_tensor* out);
/* The gradient of softmax (log_softmax when `log`) along `dim`, from the gradient of its result
   `grad` and the result `output`. */
etpu_status etpu_softmax_backward(etpu_tensor grad, etpu_tensor output, int64_t dim, bool log,
                                  const char* origin, etpu_tensor* out);
/* The gradient of an embedding lookup (embedding_dense_backward), [num_weights, D]: the rows of
   `grad` (indices' shape then D) summed into the rows their integer `indices` name; rows looked up
   at padding_idx (negative: none, as ATen passes it) give none; with scale_grad_by_freq, each row
   is divided by how often its index occurs. */
etpu_status etpu_embedding_backward(etpu_tensor grad, etpu_tensor indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq, const char* origin,
                                    etpu_tensor* out);
/* torch.triu(x, k) when `upper`, else torch.tril(x, k): the elements on one side of diagonal k of
   the last two dims, zeros elsewhere. */
etpu_status etpu_triangle(etpu_tensor x, int64_t k, bool upper, const char* origin, etpu_tensor* out);
/* Advanced indexing, x[indices[0], ..., indices[n - 1]]: each entry an integer index tensor, or 0 for a
   full slice (a bool mask goes as its true positions, one index tensor per dim). The index tensors
   broadcast together and negative indices count from the end; when the indexed dims are not adjacent,
   the broadcast dims go first in the result. */
etpu_status etpu_index(etpu_tensor x, const etpu_tensor* indices, size_t n, const char* origin,
                       etpu_tensor* out);
/* x with values (cast to x's dtype, broadcast to the shape x[indices] has) written at x[indices], or
   added there when `accumulate` (repeated positions sum). */
etpu_status etpu_index_put(etpu_tensor x, const etpu_tensor* indices, size_t n, etpu_tensor values,
                           bool accumulate, const char* origin, etpu_tensor* out);
/* x.index_add(dim, index, source, alpha=alpha): alpha * source added along dim at index (0-d or 1-d). */
etpu_status etpu_index_add(etpu_tensor x, int64_t dim, etpu_tensor index, etpu_tensor source,
                           etpu_scalar alpha, const char* origin, etpu_tensor* out);
/* x.index_fill(dim, index, value); negative indices count from the end. */
etpu_status etpu_index_fill(etpu_tensor x, int64_t dim, etpu_tensor index, etpu_scalar value,
                            const char* origin, etpu_tensor* out);
/* torch.take(x, index): the flattened x at index (negative positions count from the end). */
etpu_status etpu_take(etpu_tensor x, etpu_tensor index, const char* origin, etpu_tensor* out);
/* Tensor.put_: x with source written (or added, when `accumulate`) at the flat positions index. */
etpu_status etpu_put(etpu_tensor x, etpu_tensor index, etpu_tensor source, bool accumulate,
                     const char* origin, etpu_tensor* out);
/* The sum of the main diagonal of a matrix (ints and bools sum to int64). */
etpu_status etpu_trace(etpu_tensor x, const char* origin, etpu_tensor* out);
/* PyTorch's native_layer_norm over the trailing dims normalized_shape[0..n]: y (x's dtype), mean and
   rstd (float32 for 16-bit x; x's shape with the normalized dims 1). weight and bias may be 0 (none). */
etpu_status etpu_layer_norm(etpu_tensor x, const int64_t* normalized_shape, size_t n, etpu_tensor weight,
                            etpu_tensor bias, double eps, const char* origin, etpu_tensor* y,
                            etpu_tensor* mean, etpu_tensor* rstd);
/* Its gradients from grad_out and the mean and rstd it returned. mask: bit 0 the input's, bit 1 the
   weight's, bit 2 the bias's; a gradient not computed (not asked for, or no weight or bias) is 0. */
etpu_status etpu_layer_norm_backward(etpu_tensor grad_out, etpu_tensor x, const int64_t* normalized_shape,
                                     size_t n, etpu_tensor mean, etpu_tensor rstd, etpu_tensor weight,
                                     etpu_tensor bias, int32_t mask, const char* origin,
                                     etpu_tensor* grad_x, etpu_tensor* grad_weight,
                                     etpu_tensor* grad_bias);
/* PyTorch's native_batch_norm of x [N, C, ...] over every dim but 1: y (x's dtype), and in training the
   batch's save_mean and save_invstd ([C], float32 for 16-bit x; [0] in eval). weight, bias,
   running_mean and running_var may be 0 (none; eval needs the running statistics). In training with
   running statistics, their new values (their dtypes; the tensors given are not written) go to
   new_running_mean and new_running_var, which may otherwise be NULL (or get 0). */
etpu_status etpu_batch_norm(etpu_tensor x, etpu_tensor weight, etpu_tensor bias, etpu_tensor running_mean,
                            etpu_tensor running_var, bool training, double momentum, double eps,
                            const char* origin, etpu_tensor* y, etpu_tensor* save_mean,
                            etpu_tensor* save_invstd, etpu_tensor* new_running_mean,
                            etpu_tensor* new_running_var);
/* Its gradients from grad_out: in training from the save_mean and save_invstd it returned, in eval from
   running_mean and running_var (the others may be 0); weight may be 0 (none). Each gradient asked for
   (want_input, want_weight, want_bias) is written to its pointer; a pointer whose gradient is not asked
   for may be NULL, or gets 0. grad_x has x's dtype, grad_weight and grad_bias weight's (x's without). */
etpu_status etpu_batch_norm_backward(etpu_tensor grad_out, etpu_tensor x, etpu_tensor weight,
                                     etpu_tensor running_mean, etpu_tensor running_var, etpu_tensor save_mean,
                                     etpu_tensor save_invstd, bool training, double eps, bool want_input,
                                     bool want_weight, bool want_bias, const char* origin,
                                     etpu_tensor* grad_x, etpu_tensor* grad_weight,
                                     etpu_tensor* grad_bias);
/* PyTorch's nll_loss of log-probabilities input ([N, C] or [C]) against class targets ([N] or []): the
   loss and the total weight (what mean divides by). weight may be 0 (none); reduction: 0 none, 1 mean,
   2 sum; targets equal to ignore_index weigh 0. */
etpu_status etpu_nll_loss(etpu_tensor input, etpu_tensor target, etpu_tensor weight, int32_t reduction,
                          int64_t ignore_index, const char* origin, etpu_tensor* loss,
                          etpu_tensor* total_weight);
/* Its gradient with respect to input, from the loss's gradient and the total weight it returned. */
etpu_status etpu_nll_loss_backward(etpu_tensor grad_out, etpu_tensor input, etpu_tensor target,
                                   etpu_tensor weight, int32_t reduction, int64_t ignore_index,
                                   etpu_tensor total_weight, const char* origin, etpu_tensor* out);
/* A loss taken element by element and reduced: loss is "mse_loss", "smooth_l1_loss" (parameter: beta),
   "huber_loss" (parameter: delta) or "binary_cross_entropy"; each element's loss is multiplied by weight
   (0: none). reduction: 0 none, 1 mean, 2 sum. */
etpu_status etpu_pointwise_loss(const char* loss, double parameter, etpu_tensor input, etpu_tensor target,
                                etpu_tensor weight, int32_t reduction, const char* origin, etpu_tensor* out);
/* Its gradient with respect to input, from the loss's gradient grad_out. */
etpu_status etpu_pointwise_loss_backward(const char* loss, double parameter, etpu_tensor grad_out,
                                         etpu_tensor input, etpu_tensor target, etpu_tensor weight,
                                         int32_t reduction, const char* origin, etpu_tensor* out);
/* reduction: 0 none, 1 mean, 2 sum; targets of -100 are ignored. */
etpu_status etpu_cross_entropy(etpu_tensor logits, etpu_tensor target, int32_t reduction,
                               const char* origin, etpu_tensor* out);
etpu_status etpu_index_select(etpu_tensor x, int64_t dim, etpu_tensor index, const char* origin,
                              etpu_tensor* out);

etpu_status etpu_gather(etpu_tensor x, int64_t dim, etpu_tensor index, const char* origin,
                        etpu_tensor* out);
/* x with src written (or added, when `add`) at index along dim. */
etpu_status etpu_scatter(etpu_tensor x, int64_t dim, etpu_tensor index, etpu_tensor src, bool add,
                         const char* origin, etpu_tensor* out);
/* torch.scatter_reduce: x where index names places along dim, each holding `reduce` (sum prod
   mean amax amin) of the src elements landing there and, with include_self, of its own. */
etpu_status etpu_scatter_reduce(etpu_tensor x, int64_t dim, etpu_tensor index, etpu_tensor src,
                                const char* reduce, bool include_self, const char* origin,
                                etpu_tensor* out);
/* Integer bounds and step give an exact length, whatever their size. */
etpu_status etpu_arange(int64_t device, etpu_scalar start, etpu_scalar end, etpu_scalar step,
                        int32_t dtype, const char* origin, etpu_tensor* out);
/* A NULL bound is none. */
etpu_status etpu_clamp(etpu_tensor x, const etpu_scalar* lo, const etpu_scalar* hi, const char* origin,
                       etpu_tensor* out);
/* op: argmax argmin; over `dim`, or the flattened tensor unless has_dim. */
etpu_status etpu_argreduce(const char* op, etpu_tensor x, int64_t dim, bool has_dim, bool keepdim,
                           const char* origin, etpu_tensor* out);
etpu_status etpu_var(etpu_tensor x, const int64_t* dims, size_t ndims, int64_t correction,
                     bool keepdim, const char* origin, etpu_tensor* out);
/* The square root of etpu_var's result. */
etpu_status etpu_std(etpu_tensor x, const int64_t* dims, size_t ndims, int64_t correction,
                     bool keepdim, const char* origin, etpu_tensor* out);
/* torch.linalg.vector_norm of a floating-point x: sum(|x|^ord)^(1/ord) over dims (none: all);
   ord inf/-inf: the largest/smallest |x|; ord 0: how many are not zero. */
etpu_status etpu_vector_norm(etpu_tensor x, double ord, const int64_t* dims, size_t ndims,
                             bool keepdim, const char* origin, etpu_tensor* out);
/* op: max min; torch.max(x, dim): the extremes along dim, and unless indices is NULL the int64
   index of the first of each. */
etpu_status etpu_extreme_dim(const char* op, etpu_tensor x, int64_t dim, bool keepdim,
                             const char* origin, etpu_tensor* values, etpu_tensor* indices);
/* op: cumsum cumprod; running sums or products along `dim`, of x's shape
 * (ints and bools accumulate in int64, floats keep their dtype); cummax cummin,
 * the running extremes (x's dtype; a NaN, once met, stays), cummax_indices
 * cummin_indices, where they were (int64, the latest of equal ones); logcumsumexp
 * (floats only). */
etpu_status etpu_cumulative(const char* op, etpu_tensor x, int64_t dim, const char* origin,
                            etpu_tensor* out);
/* The discrete Fourier transform of `x` over dims[0..ndims] (ATen's kernels):
 * `kind` 0 complex to complex (`arg` 1 forward, 0 inverse), 1 real to complex
 * (`arg` 1 for the one-sided half along the last of `dims`), 2 complex to real
 * (`arg` the last of `dims`' output size); `normalization` 0 none, 1 by
 * 1/sqrt(n), 2 by 1/n, n the signal's size (ATen's fft_norm_mode). */
etpu_status etpu_fft(etpu_tensor x, int32_t kind, const int64_t* dims, size_t ndims, int64_t normalization,
                     int64_t arg, const char* origin, etpu_tensor* out);
/* The Cholesky factor of `a`, square float32/float64 matrices [..., n, n]
 * (lower-triangular l with l l^T = a, or with `upper` u with u^T u = a; only
 * that triangle of `a` read, zeros in the other) to `factor` and, unless
 * `info` is NULL, int32 [...] to `info`: 0 per positive-definite matrix, else
 * the order of its first leading minor that is not (the factor holds NaN from
 * there). */
etpu_status etpu_cholesky(etpu_tensor a, bool upper, const char* origin, etpu_tensor* factor,
                          etpu_tensor* info);
/* x solving op(a) x = b (`left`) or x op(a) = b, with `a` upper- or
 * lower-triangular as `upper` says (the other triangle never read, the
 * diagonal taken as ones with `unit_diagonal`) and op(a) its transpose with
 * `transpose`; batch dims broadcast, the dtypes match. */
etpu_status etpu_solve_triangular(etpu_tensor a, etpu_tensor b, bool upper, bool left, bool unit_diagonal,
                                  bool transpose, const char* origin, etpu_tensor* out);
/* LU factorization with partial pivoting (LAPACK's getrf) of `a`, float32 or
 * float64 [..., m, n]: the factors (L below the diagonal, its unit diagonal
 * implied; U on and above) to `factors`, the int32 1-based pivots
 * [..., min(m, n)] to `pivots` (step i swapped rows i and pivots[i] - 1) and,
 * unless `info` is NULL, int32 [...] to `info`: 0, or the step (1-based) of
 * the first zero pivot. */
etpu_status etpu_lu_factor(etpu_tensor a, const char* origin, etpu_tensor* factors, etpu_tensor* pivots,
                           etpu_tensor* info);
/* The permutation LU pivots [..., k] make of 0..rows, int32 [..., rows], with
 * a[perm] = l u. */
etpu_status etpu_lu_permutation(etpu_tensor pivots, int64_t rows, const char* origin, etpu_tensor* out);
/* x solving a x = b (`left`) or x a = b, with a's transpose for `adjoint`,
 * from a's LU `factors` and `pivots`; batch dims broadcast. */
etpu_status etpu_lu_solve(etpu_tensor factors, etpu_tensor pivots, etpu_tensor b, bool left, bool adjoint,
                          const char* origin, etpu_tensor* out);
/* LDL^T factorization with Bunch-Kaufman pivoting (LAPACK's sytrf) of
 * symmetric `a`, float32 or float64 [..., n, n], only its lower triangle read:
 * L and D's 1x1 and 2x2 blocks to `factors` (zeros above the diagonal), int32
 * 1-based pivots [..., n] to `pivots` (both steps of a 2x2 block negative) and,
 * unless `info` is NULL, int32 [...] to `info`: 0, or the step of the first
 * zero column. */
etpu_status etpu_ldl_factor(etpu_tensor a, const char* origin, etpu_tensor* factors, etpu_tensor* pivots,
                            etpu_tensor* info);
/* x solving a x = b, b [..., n, k], from a's LDL `factors` and `pivots`; batch
 * dims broadcast. */
etpu_status etpu_ldl_solve(etpu_tensor factors, etpu_tensor pivots, etpu_tensor b, const char* origin,
                           etpu_tensor* out);
/* Householder QR (LAPACK's geqrf) of `a`, float32 or float64 [..., m, n]: R on
 * and above the diagonal and each reflector's vector below it (its leading 1
 * implied) to `factors`, the reflectors' scales [..., min(m, n)] to `tau`. */
etpu_status etpu_geqrf(etpu_tensor a, const char* origin, etpu_tensor* factors, etpu_tensor* tau);
/* `c` multiplied by q = h_0 ... h_{k-1} of the reflectors in the columns of
 * `reflectors` [..., m, k'] and `tau` [..., k] (LAPACK's ormqr): q c (`left`,
 * c [..., m, p]) or c q (c [..., p, m]), of q^T with `transpose`. */
etpu_status etpu_ormqr(etpu_tensor reflectors, etpu_tensor tau, etpu_tensor c, bool left, bool transpose,
                       const char* origin, etpu_tensor* out);
/* Eigendecomposition of the symmetric matrices whose upper (`upper`) or lower
 * triangle `a` (float32 or float64 [..., n, n]) holds: the eigenvalues
 * [..., n], ascending, to `values` and, unless `vectors` is NULL, orthonormal
 * eigenvectors [..., n, n] in columns to `vectors`. */
etpu_status etpu_eigh(etpu_tensor a, bool upper, const char* origin, etpu_tensor* values, etpu_tensor* vectors);
/* Singular value decomposition of `a`, float32 or float64 [..., m, n]: the
 * singular values [..., k] (k = min(m, n)), descending, to `s` and, unless `u`
 * and `vh` are both NULL, u [..., m, k] and vh [..., k, n] (u [..., m, m] and
 * vh [..., n, n] with `full_matrices`) with a = u diag(s) vh. */
etpu_status etpu_svd(etpu_tensor a, bool full_matrices, const char* origin, etpu_tensor* u, etpu_tensor* s,
                     etpu_tensor* vh);
/* The orthogonal polynomial `kind` of torch.special ("chebyshev_polynomial_t",
 * "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
 * their "shifted_" forms, "hermite_polynomial_h", "hermite_polynomial_he",
 * "laguerre_polynomial_l", "legendre_polynomial_p") of degree trunc(n) at x,
 * elementwise; x and n broadcast and promote to a float dtype; 0 for a
 * negative degree. */
etpu_status etpu_polynomial(const char* kind, etpu_tensor x, etpu_tensor n, const char* origin, etpu_tensor* out);
/* x sorted along `dim`, stably (equal elements keep their order), NaN last
 * ascending and first descending: the values to `values` and, unless `indices`
 * is NULL, the int64 positions they came from to `indices`. */
etpu_status etpu_sort(etpu_tensor x, int64_t dim, bool descending, const char* origin,
                      etpu_tensor* values, etpu_tensor* indices);
/* The k largest (smallest unless `largest`) elements along `dim`, always in
 * sorted order, and (unless `indices` is NULL) their int64 positions; NaN is
 * the largest. 0 <= k <= the dim's size. */
etpu_status etpu_topk(etpu_tensor x, int64_t k, int64_t dim, bool largest, bool sorted,
                      const char* origin, etpu_tensor* values, etpu_tensor* indices);

/* An order statistic of each row along `dim`: stat is "median" (the lower median; NaN where the row
 * has one), "nanmedian" (NaN ignored), "kthvalue" (the k-th smallest, k from 1) or "mode" (the most
 * frequent, the smallest on a tie); the values and the int64 positions they came from. */
etpu_status etpu_order_statistic(const char* stat, int64_t k, etpu_tensor x, int64_t dim, bool keepdim,
                                 const char* origin, etpu_tensor* values, etpu_tensor* indices);
/* The median of all elements of x (NaN ignored when `ignore_nan`); NaN for an empty float tensor. */
etpu_status etpu_median_all(etpu_tensor x, bool ignore_nan, const char* origin, etpu_tensor* out);

/* ------------------------------------------------------ padding, upsampling ---- */
/* x with its last npadding / 2 dims (1 to 3) padded by reflection (`reflect`) or replication: padding
 * holds (before, after) pairs, the last dim's first, as torch.nn.functional.pad; negative ones crop. */
etpu_status etpu_pad_edges(etpu_tensor x, const int64_t* padding, size_t npadding, bool reflect,
                           const char* origin, etpu_tensor* out);
/* Its gradient with respect to an input of shape input_dims[0..rank]. */
etpu_status etpu_pad_edges_backward(etpu_tensor grad_out, const int64_t* input_dims, size_t rank,
                                    const int64_t* padding, size_t npadding, bool reflect,
                                    const char* origin, etpu_tensor* out);
/* x (N, C and k spatial dims, k from 1 to 3) resized to output_size[0..k] by mode ("nearest",
 * "nearest-exact" or "linear", with align_corners), as torch.nn.functional.interpolate; scales[0..k]
 * are the caller's scale factors (0, or scales NULL: none), which set the source positions. */
etpu_status etpu_upsample(etpu_tensor x, const char* mode, bool align_corners, const int64_t* output_size,
                          size_t k, const double* scales, const char* origin, etpu_tensor* out);
/* Its gradient with respect to an input of shape input_dims[0..k + 2]. */
etpu_status etpu_upsample_backward(etpu_tensor grad_out, const char* mode, bool align_corners,
                                   const int64_t* output_size, size_t k, const int64_t* input_dims,
                                   const double* scales, const char* origin, etpu_tensor* out);

/* ---------------------------------------------------------------- RNN cells ---- */
/* Optional tensors (biases, gradients) are 0 when absent; an absent result is written as 0. */
/* One LSTM step: gates [B, 4H] in PyTorch's order i, f, g, o (input_gates + hidden_gates + the biases
 * [4H]); hy, cy and the workspace the backward reads. */
etpu_status etpu_lstm_cell(etpu_tensor input_gates, etpu_tensor hidden_gates, etpu_tensor cx,
                           etpu_tensor input_bias, etpu_tensor hidden_bias, const char* origin,
                           etpu_tensor* hy, etpu_tensor* cy, etpu_tensor* workspace);
/* Its gradient with respect to the summed gates, cx and (when has_bias) a bias. */
etpu_status etpu_lstm_cell_backward(etpu_tensor grad_hy, etpu_tensor grad_cy, etpu_tensor cx, etpu_tensor cy,
                                    etpu_tensor workspace, bool has_bias, const char* origin,
                                    etpu_tensor* grad_gates, etpu_tensor* grad_cx, etpu_tensor* grad_bias);
/* One GRU step: gates [B, 3H] in PyTorch's order r, z, n, biases [3H]; hy and the workspace. */
etpu_status etpu_gru_cell(etpu_tensor input_gates, etpu_tensor hidden_gates, etpu_tensor hx,
                          etpu_tensor input_bias, etpu_tensor hidden_bias, const char* origin, etpu_tensor* hy,
                          etpu_tensor* workspace);
/* Its gradient with respect to the input gates, the hidden gates, hx and (when has_bias) the biases. */
etpu_status etpu_gru_cell_backward(etpu_tensor grad_hy, etpu_tensor workspace, bool has_bias,
                                   const char* origin, etpu_tensor* grad_input_gates,
                                   etpu_tensor* grad_hidden_gates, etpu_tensor* grad_hx,
                                   etpu_tensor* grad_input_bias, etpu_tensor* grad_hidden_bias);
/* ---------------------------------------------- convolution, pooling, rng ---- */
/* Lists of spatial attributes (stride, padding, dilation, kernel) hold
 * `nspatial` values each; NULL takes PyTorch's default: stride 1 for a
 * convolution and the kernel for a pooling, padding 0, dilation 1. A pooling's
 * kernel is required. Shapes follow torch.nn.functional. */

/* Samples uniform in [0, 1) of shape dims[0..rank] and a float `dtype`, from
 * the Threefry generator keyed by (key0, key1): the same key gives the same
 * samples, in every mode. Keys are program parameters: a new key never
 * compiles a new program. */
etpu_status etpu_rand_uniform(int64_t device, uint64_t key0, uint64_t key1, const int64_t* dims,
                              size_t rank, int32_t dtype, const char* origin, etpu_tensor* out);
/* Fills view `out` (a view descriptor, as etpu_pointwise's, on device `device`) with samples of
 * `distribution` keyed by (key0, key1), converted to its dtype: "uniform" (from, to), "normal"
 * (mean, std), "integers" (from[, to]: [from, to), or the dtype's range), "exponential" (lambda),
 * "bernoulli" (p: a number, or a tensor of probabilities shaped as `out`), "gamma" (a float
 * tensor of shapes shaped as `out`: a standard gamma sample per element, never below the dtype's
 * smallest normal, NaN for a negative or NaN shape) and "poisson" (a float tensor of rates: a
 * count per element, NaN for a negative or non-finite rate) and "binomial" (float tensors of
 * counts and probabilities of one dtype, broadcast together). args[0..nargs] are the parameters
 * (scalar operands), or the tensor operands of bernoulli, gamma, poisson or binomial. Bad
 * parameters (from > to, std < 0, p outside [0, 1], a non-float dtype for uniform, normal,
 * exponential, gamma, poisson, binomial) are errors. */
etpu_status etpu_sample(int64_t device, const char* distribution, const etpu_operand* args, size_t nargs,
                        uint64_t key0, uint64_t key1, const int64_t* out, const char* origin);
/* conv{1,2,3}d without bias: x [N, C, *spatial] or [C, *spatial],
 * w [O, C / groups, *kernel]; nspatial is w's rank minus 2. */
etpu_status etpu_conv(etpu_tensor x, etpu_tensor w, const int64_t* stride, const int64_t* padding,
                      const int64_t* dilation, size_t nspatial, int64_t groups, const char* origin,
                      etpu_tensor* out);
/* The gradient of etpu_conv with respect to x, whose sizes are
 * input_sizes[0..rank]. */
etpu_status etpu_conv_backward_input(etpu_tensor grad_out, etpu_tensor w,
                                     const int64_t* input_sizes, size_t rank,
                                     const int64_t* stride, const int64_t* padding,
                                     const int64_t* dilation, size_t nspatial, int64_t groups,
                                     const char* origin, etpu_tensor* out);
/* The gradient of etpu_conv with respect to w, whose sizes are
 * weight_sizes[0..rank]. */
etpu_status etpu_conv_backward_weight(etpu_tensor grad_out, etpu_tensor x,
                                      const int64_t* weight_sizes, size_t rank,
                                      const int64_t* stride, const int64_t* padding,
                                      const int64_t* dilation, size_t nspatial, int64_t groups,
                                      const char* origin, etpu_tensor* out);
/* Max pooling over the trailing nspatial dims (implicit -inf padding): the max
 * of each window to `values` and, unless `indices` is NULL, its int64 flat
 * index within the spatial plane (max_pool2d_with_indices). NaN is the max;
 * ties take the first index. The backward is a scatter_add at the indices. */
etpu_status etpu_max_pool(etpu_tensor x, const int64_t* kernel, const int64_t* stride,
                          const int64_t* padding, const int64_t* dilation, size_t nspatial,
                          bool ceil_mode, const char* origin, etpu_tensor* values,
                          etpu_tensor* indices);
/* Average pooling over the trailing nspatial dims (zero padding);
 * divisor_override 0: none. */
etpu_status etpu_avg_pool(etpu_tensor x, const int64_t* kernel, const int64_t* stride,
                          const int64_t* padding, size_t nspatial, bool ceil_mode,
                          bool count_include_pad, int64_t divisor_override /* 0: none */,
                          const char* origin, etpu_tensor* out);
/* The gradient of etpu_avg_pool with respect to its input, of sizes input_sizes[0..rank], from
 * the gradient of its output `grad_out` and the pooling's attributes (divisor_override 0: none). */
etpu_status etpu_avg_pool_backward(etpu_tensor grad_out, const int64_t* input_sizes, size_t rank,
                                   const int64_t* kernel, const int64_t* stride,
                                   const int64_t* padding, size_t nspatial, bool ceil_mode,
                                   bool count_include_pad, int64_t divisor_override /* 0: none */,
                                   const char* origin, etpu_tensor* out);

#ifdef __cplusplus
}
#endif

#endif /* EAGERTPU_H_ */
