//! EagerTPU's own bindings to the PJRT C API.
//!
//! Why our own: the `pjrt-sys` crate on crates.io binds PJRT C API 0.54, whose
//! `PJRT_Client_Create_Args` is smaller than what current plugins expect, and a
//! plugin refuses any argument struct smaller than its own. These bindings cover
//! exactly what EagerTPU calls, written from the PJRT C API's published layout.
//!
//! Invariants, checked by `tests/header_layout.rs` against the `pjrt_c_api.h`
//! shipped inside the installed `xla-cpu-pjrt` wheel:
//! - every field of a bound C struct sits at the same offset, with the same size,
//!   in ours; every bound struct is at least as large as the header's;
//! - every bound function-table entry sits at the same offset as in the header;
//! - enum constants have the header's values.
//!
//! The runtime additionally asks each loaded plugin (the XLA CPU plugin at API
//! 0.81 and libtpu at 0.117) which argument-struct size it expects, and checks
//! ours is not smaller (`runtime::pjrt::probe`).
//!
//! The function table (`PJRT_Api`) is bound as a prefix: entries a plugin does
//! not have are past its `struct_size`; callers must check
//! `offset_of!(PJRT_Api, entry) < api.struct_size` before reading one.
//! Nothing here is safe to call; `runtime/src/pjrt` wraps it.

#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};

/// The PJRT C API major version these bindings follow. A plugin with another
/// major version is refused.
pub const PJRT_API_MAJOR: i32 = 0;
/// The newest minor version checked against a real plugin (libtpu 0.0.52).
pub const PJRT_API_MINOR: i32 = 117;

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        /// Opaque handle owned by the plugin.
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    PJRT_Error,
    PJRT_Event,
    PJRT_Client,
    PJRT_Device,
    PJRT_Memory,
    PJRT_DeviceDescription,
    PJRT_Executable,
    PJRT_LoadedExecutable,
    PJRT_Buffer,
    PJRT_SerializedExecutable,
    PJRT_ExecuteContext,
    PJRT_SendCallbackInfo,
    PJRT_RecvCallbackInfo,
    PJRT_Buffer_MemoryLayout,
);

/// One field of a bound struct, as the layout check sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
}

/// A `#[repr(C)]` struct mirrored from the header.
pub trait Struct {
    /// The C name (`PJRT_Client_Create_Args`).
    const NAME: &'static str;
    /// The C `PJRT_STRUCT_SIZE(S, last_field)`: end of the last field, without
    /// trailing padding. This is what goes into `struct_size`.
    const STRUCT_SIZE: usize;
    fn fields() -> &'static [Field];
}

/// An argument struct: starts with `struct_size` and `extension_start`.
pub trait Args: Struct + Default {
    fn set_struct_size(&mut self);
}

/// End of the furthest field: the C `PJRT_STRUCT_SIZE` of a struct whose fields
/// are all listed.
pub const fn struct_end(fields: &[Field]) -> usize {
    let mut end = 0;
    let mut i = 0;
    while i < fields.len() {
        let e = fields[i].offset + fields[i].size;
        if e > end {
            end = e;
        }
        i += 1;
    }
    end
}

macro_rules! field_list {
    ($name:ident; $($field:ident : $ty:ty),*) => {
        &[$(Field {
            name: stringify!($field),
            offset: offset_of!($name, $field),
            size: size_of::<$ty>(),
        }),*]
    };
}

/// An argument struct: `struct_size`, `extension_start`, then the listed fields.
macro_rules! args {
    ($(#[$meta:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[repr(C)]
        pub struct $name {
            pub struct_size: usize,
            pub extension_start: *mut PJRT_Extension_Base,
            $(pub $field: $ty,)*
        }
        impl Struct for $name {
            const NAME: &'static str = stringify!($name);
            const STRUCT_SIZE: usize = struct_end($name::fields_const());
            fn fields() -> &'static [Field] {
                Self::fields_const()
            }
        }
        impl $name {
            const fn fields_const() -> &'static [Field] {
                field_list!($name; struct_size: usize, extension_start: *mut PJRT_Extension_Base
                    $(, $field: $ty)*)
            }
        }
        impl Default for $name {
            fn default() -> Self {
                // SAFETY: every field is an integer, a bool, a raw pointer, a union of
                // those, or an `Option` of a function pointer; all-zero bytes are a
                // valid value for each (0, false, null, None).
                unsafe { std::mem::zeroed() }
            }
        }
        impl Args for $name {
            fn set_struct_size(&mut self) {
                self.struct_size = <Self as Struct>::STRUCT_SIZE;
            }
        }
    };
}

mod enums;
pub use enums::*;

// ------------------------------------------------------ plain structs ----

args!(PJRT_Api_Version {
    major_version: c_int,
    minor_version: c_int,
});

/// The value of a `PJRT_NamedValue` (an anonymous union in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub union PJRT_NamedValue_Value {
    pub string_value: *const c_char,
    pub int64_value: i64,
    pub int64_array_value: *const i64,
    pub float_value: f32,
    pub bool_value: bool,
}

args!(PJRT_NamedValue {
    name: *const c_char,
    name_size: usize,
    type_: PJRT_NamedValue_Type,
    value: PJRT_NamedValue_Value,
    value_size: usize,
});

args!(PJRT_Program {
    code: *mut c_char,
    code_size: usize,
    format: *const c_char,
    format_size: usize,
});

args!(PJRT_ExecuteOptions {
    send_callbacks: *mut *mut PJRT_SendCallbackInfo,
    recv_callbacks: *mut *mut PJRT_RecvCallbackInfo,
    num_send_ops: usize,
    num_recv_ops: usize,
    launch_id: c_int,
    non_donatable_input_indices: *const i64,
    num_non_donatable_input_indices: usize,
    context: *mut PJRT_ExecuteContext,
    call_location: *const c_char,
    num_tasks: usize,
    task_ids: *mut c_int,
    incarnation_ids: *mut i64,
});

// ---------------------------------------------------------- arguments ----

args!(PJRT_Error_Destroy_Args { error: *mut PJRT_Error });
args!(PJRT_Error_Message_Args {
    error: *const PJRT_Error,
    message: *const c_char,
    message_size: usize,
});
args!(PJRT_Error_GetCode_Args {
    error: *const PJRT_Error,
    code: PJRT_Error_Code,
});

args!(PJRT_Plugin_Initialize_Args {});
args!(PJRT_Plugin_Attributes_Args {
    attributes: *const PJRT_NamedValue,
    num_attributes: usize,
});

/// Called by the plugin when an event completes; owns `error` (may be null).
pub type PJRT_Event_OnReadyCallback =
    Option<unsafe extern "C" fn(error: *mut PJRT_Error, user_arg: *mut c_void)>;

args!(PJRT_Event_Destroy_Args { event: *mut PJRT_Event });
args!(PJRT_Event_IsReady_Args {
    event: *mut PJRT_Event,
    is_ready: bool,
});
args!(PJRT_Event_Error_Args { event: *mut PJRT_Event });
args!(PJRT_Event_Await_Args { event: *mut PJRT_Event });
args!(PJRT_Event_OnReady_Args {
    event: *mut PJRT_Event,
    callback: PJRT_Event_OnReadyCallback,
    user_arg: *mut c_void,
});

/// A key-value store callback of `PJRT_Client_Create` (multi-process
/// clients: libtpu, the CUDA plugin); `args` is the callback's own
/// `PJRT_KeyValue*Callback_Args`.
pub type PJRT_KeyValueCallback = Option<unsafe extern "C" fn(args: *mut c_void) -> *mut PJRT_Error>;

/// Makes the `PJRT_Error` a failing key-value callback returns.
pub type PJRT_CallbackError = Option<
    unsafe extern "C" fn(
        code: PJRT_Error_Code,
        message: *const c_char,
        message_size: usize,
    ) -> *mut PJRT_Error,
>;

/// Frees a value a get callback returned.
pub type PJRT_KeyValueGetCallback_ValueDeleter = Option<unsafe extern "C" fn(value: *mut c_char)>;

args!(PJRT_KeyValueGetCallback_Args {
    key: *const c_char,
    key_size: usize,
    timeout_in_ms: c_int,
    callback_error: *mut PJRT_CallbackError,
    user_arg: *mut c_void,
    value: *mut c_char,
    value_size: usize,
    value_deleter_callback: PJRT_KeyValueGetCallback_ValueDeleter,
});
args!(PJRT_KeyValueTryGetCallback_Args {
    key: *const c_char,
    key_size: usize,
    callback_error: *mut PJRT_CallbackError,
    user_arg: *mut c_void,
    value: *mut c_char,
    value_size: usize,
    value_deleter_callback: PJRT_KeyValueGetCallback_ValueDeleter,
});
args!(PJRT_KeyValuePutCallback_Args {
    key: *const c_char,
    key_size: usize,
    value: *const c_char,
    value_size: usize,
    callback_error: *mut PJRT_CallbackError,
    user_arg: *mut c_void,
});

args!(PJRT_Client_Create_Args {
    create_options: *const PJRT_NamedValue,
    num_options: usize,
    kv_get_callback: PJRT_KeyValueCallback,
    kv_get_user_arg: *mut c_void,
    kv_put_callback: PJRT_KeyValueCallback,
    kv_put_user_arg: *mut c_void,
    client: *mut PJRT_Client,
    kv_try_get_callback: PJRT_KeyValueCallback,
    kv_try_get_user_arg: *mut c_void,
});
args!(PJRT_Client_Destroy_Args { client: *mut PJRT_Client });
args!(PJRT_Client_PlatformName_Args {
    client: *mut PJRT_Client,
    platform_name: *const c_char,
    platform_name_size: usize,
});
args!(PJRT_Client_ProcessIndex_Args {
    client: *mut PJRT_Client,
    process_index: c_int,
});
args!(PJRT_Client_PlatformVersion_Args {
    client: *mut PJRT_Client,
    platform_version: *const c_char,
    platform_version_size: usize,
});
args!(PJRT_Client_Devices_Args {
    client: *mut PJRT_Client,
    devices: *const *mut PJRT_Device,
    num_devices: usize,
});
args!(PJRT_Client_AddressableDevices_Args {
    client: *mut PJRT_Client,
    addressable_devices: *const *mut PJRT_Device,
    num_addressable_devices: usize,
});
args!(PJRT_Client_Compile_Args {
    client: *mut PJRT_Client,
    program: *const PJRT_Program,
    compile_options: *const c_char,
    compile_options_size: usize,
    executable: *mut PJRT_LoadedExecutable,
});
args!(PJRT_Client_BufferFromHostBuffer_Args {
    client: *mut PJRT_Client,
    data: *const c_void,
    type_: PJRT_Buffer_Type,
    dims: *const i64,
    num_dims: usize,
    byte_strides: *const i64,
    num_byte_strides: usize,
    host_buffer_semantics: PJRT_HostBufferSemantics,
    device: *mut PJRT_Device,
    memory: *mut PJRT_Memory,
    device_layout: *mut PJRT_Buffer_MemoryLayout,
    done_with_host_buffer: *mut PJRT_Event,
    buffer: *mut PJRT_Buffer,
});

args!(PJRT_DeviceDescription_Id_Args {
    device_description: *mut PJRT_DeviceDescription,
    id: c_int,
});
args!(PJRT_DeviceDescription_ProcessIndex_Args {
    device_description: *mut PJRT_DeviceDescription,
    process_index: c_int,
});
args!(PJRT_DeviceDescription_Kind_Args {
    device_description: *mut PJRT_DeviceDescription,
    device_kind: *const c_char,
    device_kind_size: usize,
});
args!(PJRT_DeviceDescription_DebugString_Args {
    device_description: *mut PJRT_DeviceDescription,
    debug_string: *const c_char,
    debug_string_size: usize,
});

args!(PJRT_Device_GetDescription_Args {
    device: *mut PJRT_Device,
    device_description: *mut PJRT_DeviceDescription,
});
args!(PJRT_Device_IsAddressable_Args {
    device: *mut PJRT_Device,
    is_addressable: bool,
});
args!(PJRT_Device_LocalHardwareId_Args {
    device: *mut PJRT_Device,
    local_hardware_id: c_int,
});
args!(PJRT_Device_MemoryStats_Args {
    device: *mut PJRT_Device,
    bytes_in_use: i64,
    peak_bytes_in_use: i64,
    peak_bytes_in_use_is_set: bool,
    num_allocs: i64,
    num_allocs_is_set: bool,
    largest_alloc_size: i64,
    largest_alloc_size_is_set: bool,
    bytes_limit: i64,
    bytes_limit_is_set: bool,
    bytes_reserved: i64,
    bytes_reserved_is_set: bool,
    peak_bytes_reserved: i64,
    peak_bytes_reserved_is_set: bool,
    bytes_reservable_limit: i64,
    bytes_reservable_limit_is_set: bool,
    largest_free_block_bytes: i64,
    largest_free_block_bytes_is_set: bool,
    pool_bytes: i64,
    pool_bytes_is_set: bool,
    peak_pool_bytes: i64,
    peak_pool_bytes_is_set: bool,
});

args!(PJRT_Executable_Destroy_Args {
    executable: *mut PJRT_Executable,
});
args!(PJRT_Executable_Name_Args {
    executable: *mut PJRT_Executable,
    executable_name: *const c_char,
    executable_name_size: usize,
});
args!(PJRT_Executable_NumOutputs_Args {
    executable: *mut PJRT_Executable,
    num_outputs: usize,
});
args!(PJRT_Executable_Fingerprint_Args {
    executable: *mut PJRT_Executable,
    executable_fingerprint: *const c_char,
    executable_fingerprint_size: usize,
});
/// Frees the memory behind `PJRT_Executable_Serialize_Args::serialized_bytes`.
pub type PJRT_SerializedExecutableDeleter =
    Option<unsafe extern "C" fn(exec: *mut PJRT_SerializedExecutable)>;
args!(PJRT_Executable_Serialize_Args {
    executable: *const PJRT_Executable,
    serialized_bytes: *const c_char,
    serialized_bytes_size: usize,
    serialized_executable: *mut PJRT_SerializedExecutable,
    serialized_executable_deleter: PJRT_SerializedExecutableDeleter,
});
args!(PJRT_Executable_DeserializeAndLoad_Args {
    client: *mut PJRT_Client,
    serialized_executable: *const c_char,
    serialized_executable_size: usize,
    loaded_executable: *mut PJRT_LoadedExecutable,
    overridden_serialized_compile_options: *const c_char,
    overridden_serialized_compile_options_size: usize,
});

args!(PJRT_LoadedExecutable_Destroy_Args {
    executable: *mut PJRT_LoadedExecutable,
});
args!(PJRT_LoadedExecutable_GetExecutable_Args {
    loaded_executable: *mut PJRT_LoadedExecutable,
    executable: *mut PJRT_Executable,
});
args!(PJRT_LoadedExecutable_Execute_Args {
    executable: *mut PJRT_LoadedExecutable,
    options: *mut PJRT_ExecuteOptions,
    argument_lists: *const *const *mut PJRT_Buffer,
    num_devices: usize,
    num_args: usize,
    output_lists: *const *mut *mut PJRT_Buffer,
    device_complete_events: *mut *mut PJRT_Event,
    execute_device: *mut PJRT_Device,
});

args!(PJRT_Buffer_Destroy_Args { buffer: *mut PJRT_Buffer });
args!(PJRT_Buffer_ElementType_Args {
    buffer: *mut PJRT_Buffer,
    type_: PJRT_Buffer_Type,
});
args!(PJRT_Buffer_Dimensions_Args {
    buffer: *mut PJRT_Buffer,
    dims: *const i64,
    num_dims: usize,
});
args!(PJRT_Buffer_OnDeviceSizeInBytes_Args {
    buffer: *mut PJRT_Buffer,
    on_device_size_in_bytes: usize,
});
args!(PJRT_Buffer_Delete_Args { buffer: *mut PJRT_Buffer });
args!(PJRT_Buffer_IsDeleted_Args {
    buffer: *mut PJRT_Buffer,
    is_deleted: bool,
});
args!(PJRT_Buffer_ReadyEvent_Args {
    buffer: *mut PJRT_Buffer,
    event: *mut PJRT_Event,
});
args!(PJRT_Buffer_UnsafePointer_Args {
    buffer: *mut PJRT_Buffer,
    buffer_pointer: usize,
});
args!(PJRT_Buffer_Device_Args {
    buffer: *mut PJRT_Buffer,
    device: *mut PJRT_Device,
});
args!(PJRT_Buffer_ToHostBuffer_Args {
    src: *mut PJRT_Buffer,
    host_layout: *mut PJRT_Buffer_MemoryLayout,
    dst: *mut c_void,
    dst_size: usize,
    event: *mut PJRT_Event,
});

// ------------------------------------------------------ function table ----

/// A function-table entry taking argument struct `A`.
pub type Entry<A> = Option<unsafe extern "C" fn(args: *mut A) -> *mut PJRT_Error>;
/// An entry EagerTPU does not call; bound only to keep later offsets right.
pub type Unbound = Option<unsafe extern "C" fn(args: *mut c_void) -> *mut PJRT_Error>;

/// Describes one bound, callable entry of the table (for probes and checks).
#[derive(Clone, Copy, Debug)]
pub struct EntryInfo {
    pub name: &'static str,
    pub offset: usize,
    /// The C name and `STRUCT_SIZE` of its argument struct, when we call it.
    pub args: Option<(&'static str, usize)>,
}

macro_rules! api_table {
    ($($entry:ident : $kind:tt $(<$args:ty>)?),* $(,)?) => {
        /// `PJRT_Api`: the plugin's function table, bound up to the last entry of
        /// PJRT C API 0.81. Read an entry only if its offset is below `struct_size`.
        #[repr(C)]
        pub struct PJRT_Api {
            pub struct_size: usize,
            pub extension_start: *mut PJRT_Extension_Base,
            pub pjrt_api_version: PJRT_Api_Version,
            $(pub $entry: api_table!(@ty $kind $(<$args>)?),)*
        }
        impl Struct for PJRT_Api {
            const NAME: &'static str = "PJRT_Api";
            const STRUCT_SIZE: usize = size_of::<PJRT_Api>();
            fn fields() -> &'static [Field] {
                field_list!(PJRT_Api; struct_size: usize,
                    extension_start: *mut PJRT_Extension_Base,
                    pjrt_api_version: PJRT_Api_Version
                    $(, $entry: usize)*)
            }
        }
        /// Every entry of the bound table, in order.
        pub const API_ENTRIES: &[EntryInfo] = &[$(EntryInfo {
            name: stringify!($entry),
            offset: offset_of!(PJRT_Api, $entry),
            args: api_table!(@args $kind $(<$args>)?),
        }),*];
    };
    (@ty call<$args:ty>) => { Entry<$args> };
    (@ty void<$args:ty>) => { Option<unsafe extern "C" fn(args: *mut $args)> };
    (@ty unbound) => { Unbound };
    (@args call<$args:ty>) => { Some((<$args as Struct>::NAME, <$args as Struct>::STRUCT_SIZE)) };
    (@args void<$args:ty>) => { None };
    (@args unbound) => { None };
}

api_table! {
    PJRT_Error_Destroy: void<PJRT_Error_Destroy_Args>,
    PJRT_Error_Message: void<PJRT_Error_Message_Args>,
    PJRT_Error_GetCode: call<PJRT_Error_GetCode_Args>,
    PJRT_Plugin_Initialize: call<PJRT_Plugin_Initialize_Args>,
    PJRT_Plugin_Attributes: call<PJRT_Plugin_Attributes_Args>,
    PJRT_Event_Destroy: call<PJRT_Event_Destroy_Args>,
    PJRT_Event_IsReady: call<PJRT_Event_IsReady_Args>,
    PJRT_Event_Error: call<PJRT_Event_Error_Args>,
    PJRT_Event_Await: call<PJRT_Event_Await_Args>,
    PJRT_Event_OnReady: call<PJRT_Event_OnReady_Args>,
    PJRT_Client_Create: call<PJRT_Client_Create_Args>,
    PJRT_Client_Destroy: call<PJRT_Client_Destroy_Args>,
    PJRT_Client_PlatformName: call<PJRT_Client_PlatformName_Args>,
    PJRT_Client_ProcessIndex: call<PJRT_Client_ProcessIndex_Args>,
    PJRT_Client_PlatformVersion: call<PJRT_Client_PlatformVersion_Args>,
    PJRT_Client_Devices: call<PJRT_Client_Devices_Args>,
    PJRT_Client_AddressableDevices: call<PJRT_Client_AddressableDevices_Args>,
    PJRT_Client_LookupDevice: unbound,
    PJRT_Client_LookupAddressableDevice: unbound,
    PJRT_Client_AddressableMemories: unbound,
    PJRT_Client_Compile: call<PJRT_Client_Compile_Args>,
    PJRT_Client_DefaultDeviceAssignment: unbound,
    PJRT_Client_BufferFromHostBuffer: call<PJRT_Client_BufferFromHostBuffer_Args>,
    PJRT_DeviceDescription_Id: call<PJRT_DeviceDescription_Id_Args>,
    PJRT_DeviceDescription_ProcessIndex: call<PJRT_DeviceDescription_ProcessIndex_Args>,
    PJRT_DeviceDescription_Attributes: unbound,
    PJRT_DeviceDescription_Kind: call<PJRT_DeviceDescription_Kind_Args>,
    PJRT_DeviceDescription_DebugString: call<PJRT_DeviceDescription_DebugString_Args>,
    PJRT_DeviceDescription_ToString: unbound,
    PJRT_Device_GetDescription: call<PJRT_Device_GetDescription_Args>,
    PJRT_Device_IsAddressable: call<PJRT_Device_IsAddressable_Args>,
    PJRT_Device_LocalHardwareId: call<PJRT_Device_LocalHardwareId_Args>,
    PJRT_Device_AddressableMemories: unbound,
    PJRT_Device_DefaultMemory: unbound,
    PJRT_Device_MemoryStats: call<PJRT_Device_MemoryStats_Args>,
    PJRT_Memory_Id: unbound,
    PJRT_Memory_Kind: unbound,
    PJRT_Memory_DebugString: unbound,
    PJRT_Memory_ToString: unbound,
    PJRT_Memory_AddressableByDevices: unbound,
    PJRT_Executable_Destroy: call<PJRT_Executable_Destroy_Args>,
    PJRT_Executable_Name: call<PJRT_Executable_Name_Args>,
    PJRT_Executable_NumReplicas: unbound,
    PJRT_Executable_NumPartitions: unbound,
    PJRT_Executable_NumOutputs: call<PJRT_Executable_NumOutputs_Args>,
    PJRT_Executable_SizeOfGeneratedCodeInBytes: unbound,
    PJRT_Executable_GetCostAnalysis: unbound,
    PJRT_Executable_OutputMemoryKinds: unbound,
    PJRT_Executable_OptimizedProgram: unbound,
    PJRT_Executable_Serialize: call<PJRT_Executable_Serialize_Args>,
    PJRT_LoadedExecutable_Destroy: call<PJRT_LoadedExecutable_Destroy_Args>,
    PJRT_LoadedExecutable_GetExecutable: call<PJRT_LoadedExecutable_GetExecutable_Args>,
    PJRT_LoadedExecutable_AddressableDevices: unbound,
    PJRT_LoadedExecutable_Delete: unbound,
    PJRT_LoadedExecutable_IsDeleted: unbound,
    PJRT_LoadedExecutable_Execute: call<PJRT_LoadedExecutable_Execute_Args>,
    PJRT_Executable_DeserializeAndLoad: call<PJRT_Executable_DeserializeAndLoad_Args>,
    PJRT_LoadedExecutable_Fingerprint: unbound,
    PJRT_Buffer_Destroy: call<PJRT_Buffer_Destroy_Args>,
    PJRT_Buffer_ElementType: call<PJRT_Buffer_ElementType_Args>,
    PJRT_Buffer_Dimensions: call<PJRT_Buffer_Dimensions_Args>,
    PJRT_Buffer_UnpaddedDimensions: unbound,
    PJRT_Buffer_DynamicDimensionIndices: unbound,
    PJRT_Buffer_GetMemoryLayout: unbound,
    PJRT_Buffer_OnDeviceSizeInBytes: call<PJRT_Buffer_OnDeviceSizeInBytes_Args>,
    PJRT_Buffer_Device: call<PJRT_Buffer_Device_Args>,
    PJRT_Buffer_Memory: unbound,
    PJRT_Buffer_Delete: call<PJRT_Buffer_Delete_Args>,
    PJRT_Buffer_IsDeleted: call<PJRT_Buffer_IsDeleted_Args>,
    PJRT_Buffer_CopyToDevice: unbound,
    PJRT_Buffer_ToHostBuffer: call<PJRT_Buffer_ToHostBuffer_Args>,
    PJRT_Buffer_IsOnCpu: unbound,
    PJRT_Buffer_ReadyEvent: call<PJRT_Buffer_ReadyEvent_Args>,
    PJRT_Buffer_UnsafePointer: call<PJRT_Buffer_UnsafePointer_Args>,
    PJRT_Buffer_IncreaseExternalReferenceCount: unbound,
    PJRT_Buffer_DecreaseExternalReferenceCount: unbound,
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer: unbound,
    PJRT_CopyToDeviceStream_Destroy: unbound,
    PJRT_CopyToDeviceStream_AddChunk: unbound,
    PJRT_CopyToDeviceStream_TotalBytes: unbound,
    PJRT_CopyToDeviceStream_GranuleSize: unbound,
    PJRT_CopyToDeviceStream_CurrentBytes: unbound,
    PJRT_TopologyDescription_Create: unbound,
    PJRT_TopologyDescription_Destroy: unbound,
    PJRT_TopologyDescription_PlatformName: unbound,
    PJRT_TopologyDescription_PlatformVersion: unbound,
    PJRT_TopologyDescription_GetDeviceDescriptions: unbound,
    PJRT_TopologyDescription_Serialize: unbound,
    PJRT_TopologyDescription_Attributes: unbound,
    PJRT_Compile: unbound,
    PJRT_Executable_OutputElementTypes: unbound,
    PJRT_Executable_OutputDimensions: unbound,
    PJRT_Buffer_CopyToMemory: unbound,
    PJRT_Client_CreateViewOfDeviceBuffer: unbound,
    PJRT_Executable_Fingerprint: call<PJRT_Executable_Fingerprint_Args>,
    PJRT_Client_TopologyDescription: unbound,
    PJRT_Executable_GetCompiledMemoryStats: unbound,
    PJRT_Memory_Kind_Id: unbound,
    PJRT_ExecuteContext_Create: unbound,
    PJRT_ExecuteContext_Destroy: unbound,
    PJRT_Buffer_CopyRawToHost: unbound,
    PJRT_AsyncHostToDeviceTransferManager_Destroy: unbound,
    PJRT_AsyncHostToDeviceTransferManager_TransferData: unbound,
    PJRT_Client_CreateBuffersForAsyncHostToDevice: unbound,
    PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer: unbound,
    PJRT_AsyncHostToDeviceTransferManager_Device: unbound,
    PJRT_AsyncHostToDeviceTransferManager_BufferCount: unbound,
    PJRT_AsyncHostToDeviceTransferManager_BufferSize: unbound,
    PJRT_AsyncHostToDeviceTransferManager_SetBufferError: unbound,
    PJRT_AsyncHostToDeviceTransferManager_AddMetadata: unbound,
    PJRT_Client_DmaMap: unbound,
    PJRT_Client_DmaUnmap: unbound,
    PJRT_Client_CreateUninitializedBuffer: unbound,
    PJRT_Client_UpdateGlobalProcessInfo: unbound,
    PJRT_TopologyDescription_Deserialize: unbound,
    PJRT_Client_CreateAliasBuffer: unbound,
    PJRT_Client_FulfillAliasBuffer: unbound,
    PJRT_LoadedExecutable_GetDeviceAssignment: unbound,
}

/// Every bound struct's name, `STRUCT_SIZE` and fields, for the header check.
pub fn bound_structs() -> Vec<(&'static str, usize, &'static [Field])> {
    macro_rules! all {
        ($($s:ty),* $(,)?) => {
            vec![$((<$s as Struct>::NAME, <$s as Struct>::STRUCT_SIZE, <$s as Struct>::fields())),*]
        };
    }
    all!(
        PJRT_Api_Version,
        PJRT_NamedValue,
        PJRT_Program,
        PJRT_ExecuteOptions,
        PJRT_Error_Destroy_Args,
        PJRT_Error_Message_Args,
        PJRT_Error_GetCode_Args,
        PJRT_Plugin_Initialize_Args,
        PJRT_Plugin_Attributes_Args,
        PJRT_Event_Destroy_Args,
        PJRT_Event_IsReady_Args,
        PJRT_Event_Error_Args,
        PJRT_Event_Await_Args,
        PJRT_Event_OnReady_Args,
        PJRT_KeyValueGetCallback_Args,
        PJRT_KeyValueTryGetCallback_Args,
        PJRT_KeyValuePutCallback_Args,
        PJRT_Client_Create_Args,
        PJRT_Client_Destroy_Args,
        PJRT_Client_PlatformName_Args,
        PJRT_Client_ProcessIndex_Args,
        PJRT_Client_PlatformVersion_Args,
        PJRT_Client_Devices_Args,
        PJRT_Client_AddressableDevices_Args,
        PJRT_Client_Compile_Args,
        PJRT_Client_BufferFromHostBuffer_Args,
        PJRT_DeviceDescription_Id_Args,
        PJRT_DeviceDescription_ProcessIndex_Args,
        PJRT_DeviceDescription_Kind_Args,
        PJRT_DeviceDescription_DebugString_Args,
        PJRT_Device_GetDescription_Args,
        PJRT_Device_IsAddressable_Args,
        PJRT_Device_LocalHardwareId_Args,
        PJRT_Device_MemoryStats_Args,
        PJRT_Executable_Destroy_Args,
        PJRT_Executable_Name_Args,
        PJRT_Executable_NumOutputs_Args,
        PJRT_Executable_Fingerprint_Args,
        PJRT_Executable_Serialize_Args,
        PJRT_Executable_DeserializeAndLoad_Args,
        PJRT_LoadedExecutable_Destroy_Args,
        PJRT_LoadedExecutable_GetExecutable_Args,
        PJRT_LoadedExecutable_Execute_Args,
        PJRT_Buffer_Destroy_Args,
        PJRT_Buffer_ElementType_Args,
        PJRT_Buffer_Dimensions_Args,
        PJRT_Buffer_OnDeviceSizeInBytes_Args,
        PJRT_Buffer_Delete_Args,
        PJRT_Buffer_IsDeleted_Args,
        PJRT_Buffer_ReadyEvent_Args,
        PJRT_Buffer_UnsafePointer_Args,
        PJRT_Buffer_Device_Args,
        PJRT_Buffer_ToHostBuffer_Args,
        PJRT_Api,
    )
}

/// The signature of the plugin's exported `GetPjrtApi`.
pub type GetPjrtApiFn = unsafe extern "C" fn() -> *const PJRT_Api;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_size_excludes_trailing_padding() {
        // `is_ready` is a bool after a pointer: 24 + 1, not the padded 32.
        assert_eq!(PJRT_Event_IsReady_Args::STRUCT_SIZE, 25);
        assert_eq!(std::mem::size_of::<PJRT_Event_IsReady_Args>(), 32);
    }

    #[test]
    fn entries_are_consecutive_pointers() {
        for pair in API_ENTRIES.windows(2) {
            assert_eq!(
                pair[1].offset,
                pair[0].offset + size_of::<usize>(),
                "{}",
                pair[1].name
            );
        }
    }
}
