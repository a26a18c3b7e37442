//! The C spelling of every type that crosses the ABI, so the header can be
//! checked against the Rust declarations.

use std::ffi::{c_char, c_void};

/// A tensor handle (`etpu_tensor`): an index into the handle table; 0 is none.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TensorHandle(pub u64);

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
    *const c_char => "const char*",
    *mut c_char => "char*",
    *const c_void => "const void*",
    *mut c_void => "void*",
    *const i64 => "const int64_t*",
    *mut i64 => "int64_t*",
    *mut i32 => "int32_t*",
    *mut usize => "size_t*",
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
