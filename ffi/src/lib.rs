//! The C ABI of EagerTPU (`include/eagertpu.h`).
//!
//! This is the shell the PyTorch backend will load: for now it reports the
//! library and ABI versions. Every entry point is `extern "C"`, never unwinds
//! across the boundary, and returns status codes rather than panicking.

use std::ffi::c_char;

/// Version of the C ABI; bumped on any incompatible change to `eagertpu.h`.
pub const EAGERTPU_ABI_VERSION: u32 = 1;

/// The library version, a NUL-terminated static string.
#[unsafe(no_mangle)]
pub extern "C" fn eagertpu_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The C ABI version (`EAGERTPU_ABI_VERSION`).
#[unsafe(no_mangle)]
pub extern "C" fn eagertpu_abi_version() -> u32 {
    EAGERTPU_ABI_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_a_c_string() {
        let p = eagertpu_version();
        // SAFETY: `eagertpu_version` returns a static NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(p) };
        assert_eq!(s.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
        assert_eq!(eagertpu_abi_version(), 1);
    }
}
