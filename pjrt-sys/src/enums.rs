//! Enums of the PJRT C API (as `c_int` constants) and the one extension
//! struct, with every constant listed by its C name for the header check.

#![allow(non_camel_case_types, non_upper_case_globals)]

use std::ffi::c_int;

/// `PJRT_Extension_Type` (we only ever pass null extension chains).
pub type PJRT_Extension_Type = c_int;

#[repr(C)]
pub struct PJRT_Extension_Base {
    pub struct_size: usize,
    pub type_: PJRT_Extension_Type,
    pub next: *mut PJRT_Extension_Base,
}

pub type PJRT_Error_Code = c_int;
pub const PJRT_Error_Code_OK: PJRT_Error_Code = 0;
pub const PJRT_Error_Code_CANCELLED: PJRT_Error_Code = 1;
pub const PJRT_Error_Code_UNKNOWN: PJRT_Error_Code = 2;
pub const PJRT_Error_Code_INVALID_ARGUMENT: PJRT_Error_Code = 3;
pub const PJRT_Error_Code_DEADLINE_EXCEEDED: PJRT_Error_Code = 4;
pub const PJRT_Error_Code_NOT_FOUND: PJRT_Error_Code = 5;
pub const PJRT_Error_Code_ALREADY_EXISTS: PJRT_Error_Code = 6;
pub const PJRT_Error_Code_PERMISSION_DENIED: PJRT_Error_Code = 7;
pub const PJRT_Error_Code_RESOURCE_EXHAUSTED: PJRT_Error_Code = 8;
pub const PJRT_Error_Code_FAILED_PRECONDITION: PJRT_Error_Code = 9;
pub const PJRT_Error_Code_ABORTED: PJRT_Error_Code = 10;
pub const PJRT_Error_Code_OUT_OF_RANGE: PJRT_Error_Code = 11;
pub const PJRT_Error_Code_UNIMPLEMENTED: PJRT_Error_Code = 12;
pub const PJRT_Error_Code_INTERNAL: PJRT_Error_Code = 13;
pub const PJRT_Error_Code_UNAVAILABLE: PJRT_Error_Code = 14;
pub const PJRT_Error_Code_DATA_LOSS: PJRT_Error_Code = 15;
pub const PJRT_Error_Code_UNAUTHENTICATED: PJRT_Error_Code = 16;

pub type PJRT_NamedValue_Type = c_int;
pub const PJRT_NamedValue_kString: PJRT_NamedValue_Type = 0;
pub const PJRT_NamedValue_kInt64: PJRT_NamedValue_Type = 1;
pub const PJRT_NamedValue_kInt64List: PJRT_NamedValue_Type = 2;
pub const PJRT_NamedValue_kFloat: PJRT_NamedValue_Type = 3;
pub const PJRT_NamedValue_kBool: PJRT_NamedValue_Type = 4;

pub type PJRT_Buffer_Type = c_int;
pub const PJRT_Buffer_Type_INVALID: PJRT_Buffer_Type = 0;
pub const PJRT_Buffer_Type_PRED: PJRT_Buffer_Type = 1;
pub const PJRT_Buffer_Type_S8: PJRT_Buffer_Type = 2;
pub const PJRT_Buffer_Type_S16: PJRT_Buffer_Type = 3;
pub const PJRT_Buffer_Type_S32: PJRT_Buffer_Type = 4;
pub const PJRT_Buffer_Type_S64: PJRT_Buffer_Type = 5;
pub const PJRT_Buffer_Type_U8: PJRT_Buffer_Type = 6;
pub const PJRT_Buffer_Type_U16: PJRT_Buffer_Type = 7;
pub const PJRT_Buffer_Type_U32: PJRT_Buffer_Type = 8;
pub const PJRT_Buffer_Type_U64: PJRT_Buffer_Type = 9;
pub const PJRT_Buffer_Type_F16: PJRT_Buffer_Type = 10;
pub const PJRT_Buffer_Type_F32: PJRT_Buffer_Type = 11;
pub const PJRT_Buffer_Type_F64: PJRT_Buffer_Type = 12;
pub const PJRT_Buffer_Type_BF16: PJRT_Buffer_Type = 13;
pub const PJRT_Buffer_Type_C64: PJRT_Buffer_Type = 14;
pub const PJRT_Buffer_Type_C128: PJRT_Buffer_Type = 15;

pub type PJRT_HostBufferSemantics = c_int;
pub const PJRT_HostBufferSemantics_kImmutableOnlyDuringCall: PJRT_HostBufferSemantics = 0;
pub const PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes: PJRT_HostBufferSemantics = 1;
pub const PJRT_HostBufferSemantics_kImmutableZeroCopy: PJRT_HostBufferSemantics = 2;
pub const PJRT_HostBufferSemantics_kMutableZeroCopy: PJRT_HostBufferSemantics = 3;

/// Every enum constant above, by its C name, for the header check.
pub const ENUM_CONSTANTS: &[(&str, c_int)] = &[
    ("PJRT_Error_Code_OK", PJRT_Error_Code_OK),
    ("PJRT_Error_Code_CANCELLED", PJRT_Error_Code_CANCELLED),
    ("PJRT_Error_Code_UNKNOWN", PJRT_Error_Code_UNKNOWN),
    (
        "PJRT_Error_Code_INVALID_ARGUMENT",
        PJRT_Error_Code_INVALID_ARGUMENT,
    ),
    (
        "PJRT_Error_Code_DEADLINE_EXCEEDED",
        PJRT_Error_Code_DEADLINE_EXCEEDED,
    ),
    ("PJRT_Error_Code_NOT_FOUND", PJRT_Error_Code_NOT_FOUND),
    (
        "PJRT_Error_Code_ALREADY_EXISTS",
        PJRT_Error_Code_ALREADY_EXISTS,
    ),
    (
        "PJRT_Error_Code_PERMISSION_DENIED",
        PJRT_Error_Code_PERMISSION_DENIED,
    ),
    (
        "PJRT_Error_Code_RESOURCE_EXHAUSTED",
        PJRT_Error_Code_RESOURCE_EXHAUSTED,
    ),
    (
        "PJRT_Error_Code_FAILED_PRECONDITION",
        PJRT_Error_Code_FAILED_PRECONDITION,
    ),
    ("PJRT_Error_Code_ABORTED", PJRT_Error_Code_ABORTED),
    ("PJRT_Error_Code_OUT_OF_RANGE", PJRT_Error_Code_OUT_OF_RANGE),
    (
        "PJRT_Error_Code_UNIMPLEMENTED",
        PJRT_Error_Code_UNIMPLEMENTED,
    ),
    ("PJRT_Error_Code_INTERNAL", PJRT_Error_Code_INTERNAL),
    ("PJRT_Error_Code_UNAVAILABLE", PJRT_Error_Code_UNAVAILABLE),
    ("PJRT_Error_Code_DATA_LOSS", PJRT_Error_Code_DATA_LOSS),
    (
        "PJRT_Error_Code_UNAUTHENTICATED",
        PJRT_Error_Code_UNAUTHENTICATED,
    ),
    ("PJRT_NamedValue_kString", PJRT_NamedValue_kString),
    ("PJRT_NamedValue_kInt64", PJRT_NamedValue_kInt64),
    ("PJRT_NamedValue_kInt64List", PJRT_NamedValue_kInt64List),
    ("PJRT_NamedValue_kFloat", PJRT_NamedValue_kFloat),
    ("PJRT_NamedValue_kBool", PJRT_NamedValue_kBool),
    ("PJRT_Buffer_Type_INVALID", PJRT_Buffer_Type_INVALID),
    ("PJRT_Buffer_Type_PRED", PJRT_Buffer_Type_PRED),
    ("PJRT_Buffer_Type_S8", PJRT_Buffer_Type_S8),
    ("PJRT_Buffer_Type_S16", PJRT_Buffer_Type_S16),
    ("PJRT_Buffer_Type_S32", PJRT_Buffer_Type_S32),
    ("PJRT_Buffer_Type_S64", PJRT_Buffer_Type_S64),
    ("PJRT_Buffer_Type_U8", PJRT_Buffer_Type_U8),
    ("PJRT_Buffer_Type_U16", PJRT_Buffer_Type_U16),
    ("PJRT_Buffer_Type_U32", PJRT_Buffer_Type_U32),
    ("PJRT_Buffer_Type_U64", PJRT_Buffer_Type_U64),
    ("PJRT_Buffer_Type_F16", PJRT_Buffer_Type_F16),
    ("PJRT_Buffer_Type_F32", PJRT_Buffer_Type_F32),
    ("PJRT_Buffer_Type_F64", PJRT_Buffer_Type_F64),
    ("PJRT_Buffer_Type_BF16", PJRT_Buffer_Type_BF16),
    ("PJRT_Buffer_Type_C64", PJRT_Buffer_Type_C64),
    ("PJRT_Buffer_Type_C128", PJRT_Buffer_Type_C128),
    (
        "PJRT_HostBufferSemantics_kImmutableOnlyDuringCall",
        PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
    ),
    (
        "PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes",
        PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes,
    ),
    (
        "PJRT_HostBufferSemantics_kImmutableZeroCopy",
        PJRT_HostBufferSemantics_kImmutableZeroCopy,
    ),
    (
        "PJRT_HostBufferSemantics_kMutableZeroCopy",
        PJRT_HostBufferSemantics_kMutableZeroCopy,
    ),
];
