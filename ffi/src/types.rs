//! The C spelling of every type that crosses the ABI, so the header can be
//! checked against the Rust declarations.

use std::ffi::{c_char, c_void};

/// A tensor handle (`etpu_tensor`): an index into the handle table; 0 is none.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TensorHandle(pub u64);

/// A storage id (`etpu_storage`): the runtime's number for one allocation
/// (`eagertpu::storage::StorageId`), kept by the allocator beside it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StorageHandle(pub u64);

/// A process group handle (`etpu_group`): one rank's handle to a group of
/// ranks (`eagertpu::ProcessGroup`); 0 is none.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupHandle(pub u64);

/// An event handle (`etpu_event`): a point recorded on a device's op stream;
/// 0 is none.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EventHandle(pub u64);

/// A Python number as it crosses the ABI (`etpu_scalar`): a tag and the value
/// in the slot of its kind, so an int64 survives exactly (a double holds
/// integers only up to 2^53).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ScalarArg {
    /// `ETPU_SCALAR_BOOL`, `ETPU_SCALAR_INT` or `ETPU_SCALAR_FLOAT`.
    pub kind: i32,
    /// The value of a bool (0 or 1) or an integer.
    pub int: i64,
    /// The value of a float.
    pub float: f64,
}

pub const ETPU_SCALAR_BOOL: i32 = 0;
pub const ETPU_SCALAR_INT: i32 = 1;
pub const ETPU_SCALAR_FLOAT: i32 = 2;

/// An operand of `etpu_pointwise` (`etpu_operand`): a tensor handle, a view
/// descriptor or a scalar, as `kind` says.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OperandArg {
    /// `ETPU_OPERAND_HANDLE`, `ETPU_OPERAND_VIEW` or `ETPU_OPERAND_SCALAR`.
    pub kind: i32,
    pub handle: TensorHandle,
    /// `{storage, byte_offset, dtype, rank, sizes[0..rank], strides[0..rank]}`.
    pub view: *const i64,
    pub scalar: ScalarArg,
}

pub const ETPU_OPERAND_HANDLE: i32 = 0;
pub const ETPU_OPERAND_VIEW: i32 = 1;
pub const ETPU_OPERAND_SCALAR: i32 = 2;

/// Where a key-value callback hands back bytes (a value, or its failure's
/// message): `deliver(sink, bytes, size)` copies them.
pub type KvDeliver = unsafe extern "C" fn(sink: *mut c_void, bytes: *const c_char, size: usize);

/// The foreign store's calls (`etpu_kv_get`, `etpu_kv_try_get`,
/// `etpu_kv_put`): each returns an `etpu_kv_status` and delivers the value,
/// or the failure's message, through `deliver`.
pub type KvGet = unsafe extern "C" fn(
    user: *mut c_void,
    key: *const c_char,
    key_size: usize,
    timeout_ms: i64,
    sink: *mut c_void,
    deliver: KvDeliver,
) -> i32;
pub type KvTryGet = unsafe extern "C" fn(
    user: *mut c_void,
    key: *const c_char,
    key_size: usize,
    sink: *mut c_void,
    deliver: KvDeliver,
) -> i32;
pub type KvPut = unsafe extern "C" fn(
    user: *mut c_void,
    key: *const c_char,
    key_size: usize,
    value: *const c_char,
    value_size: usize,
    sink: *mut c_void,
    deliver: KvDeliver,
) -> i32;
/// The functions as arguments (NULL is `None`, refused).
pub type KvGetFn = Option<KvGet>;
pub type KvTryGetFn = Option<KvTryGet>;
pub type KvPutFn = Option<KvPut>;

/// One profiler activity (`etpu_trace_activity`): its kind
/// (`ETPU_TRACE_*`), device, wall-clock span in ns since the Unix epoch, and
/// its name, detail and user's line as C strings.
#[repr(C)]
pub struct TraceActivity {
    pub kind: i32,
    pub device: i32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub name: *const c_char,
    pub detail: *const c_char,
    pub origin: *const c_char,
}

/// The function `etpu_trace_stop` hands each activity to.
pub type TraceEach = unsafe extern "C" fn(user: *mut c_void, activity: *const TraceActivity);
pub type TraceEachFn = Option<TraceEach>;

/// `etpu_memory_counts` of include/eagertpu.h.
#[repr(C)]
pub struct MemoryCounts {
    pub allocations: i64,
    pub bytes: i64,
    pub peak_allocations: i64,
    pub peak_bytes: i64,
    pub allocated_count: i64,
    pub allocated_bytes: i64,
    pub freed_count: i64,
    pub freed_bytes: i64,
    pub device_bytes_in_use: i64,
    pub device_peak_bytes_in_use: i64,
    pub device_bytes_limit: i64,
}

/// A Rust type with a C spelling in `eagertpu.h`.
pub trait CType {
    const C_NAME: &'static str;
}

macro_rules! c_types {
    ($($t:ty => $c:literal),* $(,)?) => {$(
        impl CType for $t {
            const C_NAME: &'static str = $c;
        }
    )*};
}

c_types! {
    bool => "bool",
    i32 => "int32_t",
    i64 => "int64_t",
    u64 => "uint64_t",
    f64 => "double",
    usize => "size_t",
    TensorHandle => "etpu_tensor",
    StorageHandle => "etpu_storage",
    *mut StorageHandle => "etpu_storage*",
    *const StorageHandle => "const etpu_storage*",
    *mut MemoryCounts => "etpu_memory_counts*",
    GroupHandle => "etpu_group",
    EventHandle => "etpu_event",
    *mut EventHandle => "etpu_event*",
    *mut f64 => "double*",
    KvGetFn => "etpu_kv_get",
    KvTryGetFn => "etpu_kv_try_get",
    KvPutFn => "etpu_kv_put",
    TraceEachFn => "etpu_trace_each",
    *mut u64 => "uint64_t*",
    *mut GroupHandle => "etpu_group*",
    ScalarArg => "etpu_scalar",
    *const ScalarArg => "const etpu_scalar*",
    OperandArg => "etpu_operand",
    *const OperandArg => "const etpu_operand*",
    *const c_char => "const char*",
    *mut c_char => "char*",
    *const c_void => "const void*",
    *mut c_void => "void*",
    *const i64 => "const int64_t*",
    *const u64 => "const uint64_t*",
    *const *const i64 => "const int64_t* const*",
    *const f64 => "const double*",
    *mut i64 => "int64_t*",
    *mut i32 => "int32_t*",
    *mut bool => "bool*",
    *mut usize => "size_t*",
    *const usize => "const size_t*",
    *const TensorHandle => "const etpu_tensor*",
    *mut TensorHandle => "etpu_tensor*",
}

/// One entry point's C signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub name: &'static str,
    pub ret: &'static str,
    pub args: Vec<&'static str>,
}
