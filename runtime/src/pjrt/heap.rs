//! The XLA CPU plugin's device memory is the host heap: every buffer and
//! every execution's scratch space is a `malloc`. glibc hands a freed block
//! at the top of a heap back to the kernel (`madvise`) and serves large
//! blocks from fresh `mmap`s, so a training step that frees and allocates
//! the same few megabytes each time pays page faults on all of them again
//! (measured here: a quarter of a compiled MLP step's CPU time). A device
//! allocator keeps freed memory for the next allocation (PyTorch's CUDA
//! caching allocator, XLA's BFC allocator); `keep_freed_memory` makes the
//! heap do the same for the CPU plugin. It is process-wide (PyTorch's CPU
//! tensors share the heap); `EAGERTPU_CPU_HEAP=system` leaves glibc's
//! defaults.

/// Blocks up to this size come from the heap, not from an `mmap` of their
/// own (glibc's ceiling for the setting).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;

/// Free memory at the top of a heap kept before any is given back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 256 << 20;

/// Keeps freed heap memory for reuse (see the module). False where the C
/// library has no such settings (not glibc) or refused them.
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets two of glibc's allocator parameters; it
        // is safe to call at any time, from any thread (it takes the arena
        // locks itself).
        let mmap = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        // SAFETY: as above.
        let trim = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) };
        mmap == 1 && trim == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Bytes the heap holds free for reuse, over all its arenas (`None` where
/// the C library does not say).
pub fn free_bytes() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 reads the arenas' statistics under their locks
        // and returns them by value.
        let info = unsafe { libc::mallinfo2() };
        Some(info.fordblks as u64)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}
