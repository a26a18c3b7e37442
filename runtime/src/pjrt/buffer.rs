//! `Buffer`: an array in device memory, destroyed on drop.

use std::sync::Arc;

use fusion::DType;
use pjrt_sys::*;

use super::api::pjrt_call;
use super::client::{ClientInner, Device};
use super::event::Event;
use super::live;
use crate::error::{Error, Result};

/// The PJRT element type of a dtype.
pub(super) fn buffer_type(dtype: DType) -> PJRT_Buffer_Type {
    match dtype {
        DType::Bool => PJRT_Buffer_Type_PRED,
        DType::I8 => PJRT_Buffer_Type_S8,
        DType::I16 => PJRT_Buffer_Type_S16,
        DType::I32 => PJRT_Buffer_Type_S32,
        DType::I64 => PJRT_Buffer_Type_S64,
        DType::U8 => PJRT_Buffer_Type_U8,
        DType::F16 => PJRT_Buffer_Type_F16,
        DType::BF16 => PJRT_Buffer_Type_BF16,
        DType::F32 => PJRT_Buffer_Type_F32,
        DType::F64 => PJRT_Buffer_Type_F64,
        DType::C64 => PJRT_Buffer_Type_C64,
        DType::C128 => PJRT_Buffer_Type_C128,
    }
}

fn dtype_of(t: PJRT_Buffer_Type) -> Option<DType> {
    DType::ALL.into_iter().find(|d| buffer_type(*d) == t)
}

/// An owned `PJRT_Buffer`.
pub struct Buffer {
    client: Arc<ClientInner>,
    raw: *mut PJRT_Buffer,
}

// SAFETY: PJRT buffers may be used and destroyed from any thread.
unsafe impl Send for Buffer {}
// SAFETY: as above; `&Buffer` exposes only thread-safe PJRT calls.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Takes ownership of `raw` (non-null).
    pub(super) fn from_raw(client: Arc<ClientInner>, raw: *mut PJRT_Buffer) -> Buffer {
        live::BUFFERS.inc();
        Buffer { client, raw }
    }

    pub(super) fn raw(&self) -> *mut PJRT_Buffer {
        self.raw
    }

    /// Copies `bytes` (row-major, `dtype` elements of shape `dims`) to `device`.
    /// Returns once the plugin no longer needs `bytes`.
    pub fn from_host(device: &Device, dtype: DType, dims: &[i64], bytes: &[u8]) -> Result<Buffer> {
        let numel: i64 = dims.iter().product();
        let expected = numel as usize * dtype.size_in_bytes();
        if bytes.len() != expected {
            return Err(Error::Internal(format!(
                "host buffer of {} bytes for a {dtype:?}{dims:?} array of {expected} bytes",
                bytes.len()
            )));
        }
        let client = &device.client;
        let mut args = PJRT_Client_BufferFromHostBuffer_Args {
            client: client.raw,
            data: bytes.as_ptr().cast(),
            type_: buffer_type(dtype),
            dims: dims.as_ptr(),
            num_dims: dims.len(),
            host_buffer_semantics: PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
            device: device.raw(),
            ..Default::default()
        };
        pjrt_call!(client.plugin, PJRT_Client_BufferFromHostBuffer, &mut args)?;
        let buffer = Buffer::from_raw(client.clone(), args.buffer);
        if !args.done_with_host_buffer.is_null() {
            // `bytes` is borrowed only for this call: wait until the plugin is done.
            Event::from_raw(client.plugin.clone(), args.done_with_host_buffer).wait()?;
        }
        Ok(buffer)
    }

    /// Copies the array into `dst` (exactly its size in bytes), waiting for it.
    ///
    /// On a plugin whose device memory is host memory (the XLA CPU plugin),
    /// the buffer is copied directly once its ready event completes:
    /// `PJRT_Buffer_ToHostBuffer` there hands the copy to the plugin's worker
    /// threads and back, two thread wake-ups that cost 20-50 us on a 2-core
    /// VM, where the copy of a small array takes well under 1 us.
    pub fn to_host(&self, dst: &mut [u8]) -> Result<()> {
        if self.client.memory_is_host() && self.on_device_size()? == dst.len() {
            return self.copy_from_host_memory(dst);
        }
        self.to_host_by_plugin(dst)
    }

    /// [`Buffer::to_host`] through `PJRT_Buffer_ToHostBuffer`, whatever the
    /// plugin: the path of a TPU or a GPU.
    pub fn to_host_by_plugin(&self, dst: &mut [u8]) -> Result<()> {
        let mut args = PJRT_Buffer_ToHostBuffer_Args {
            src: self.raw,
            dst: dst.as_mut_ptr().cast(),
            dst_size: dst.len(),
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Buffer_ToHostBuffer, &mut args)?;
        if !args.event.is_null() {
            Event::from_raw(self.client.plugin.clone(), args.event).wait()?;
        }
        Ok(())
    }

    /// [`Buffer::to_host`] on a plugin whose device memory is host memory.
    fn copy_from_host_memory(&self, dst: &mut [u8]) -> Result<()> {
        // Also the computation's error: a failed one leaves the memory unwritten.
        self.ready_event()?.wait()?;
        let mut args = PJRT_Buffer_UnsafePointer_Args {
            buffer: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Buffer_UnsafePointer, &mut args)?;
        let src = args.buffer_pointer as *const u8;
        if src.is_null() && !dst.is_empty() {
            return Err(Error::Internal(
                "the plugin gave a null buffer pointer".into(),
            ));
        }
        if !dst.is_empty() {
            // SAFETY: the plugin's device memory is host memory; the buffer is
            // ready (its ready event completed without error) and holds
            // `on_device_size() == dst.len()` bytes at `src`, which stay valid
            // and unwritten while `self` is alive (a buffer is written only by
            // the execution that defines it; donation consumes the value that
            // owns `self`, so no reader holds it then).
            unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
        }
        Ok(())
    }

    /// The element type, as the plugin reports it.
    pub fn dtype(&self) -> Result<DType> {
        let mut args = PJRT_Buffer_ElementType_Args {
            buffer: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Buffer_ElementType, &mut args)?;
        dtype_of(args.type_).ok_or_else(|| {
            Error::Internal(format!(
                "buffer has PJRT element type {} (not supported)",
                args.type_
            ))
        })
    }

    /// The dimensions, as the plugin reports them.
    pub fn dims(&self) -> Result<Vec<i64>> {
        let mut args = PJRT_Buffer_Dimensions_Args {
            buffer: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Buffer_Dimensions, &mut args)?;
        if args.num_dims == 0 {
            return Ok(vec![]);
        }
        // SAFETY: the buffer owns `num_dims` dimensions for its lifetime.
        Ok(unsafe { std::slice::from_raw_parts(args.dims, args.num_dims) }.to_vec())
    }

    /// Bytes the array occupies on the device.
    pub fn on_device_size(&self) -> Result<usize> {
        let mut args = PJRT_Buffer_OnDeviceSizeInBytes_Args {
            buffer: self.raw,
            ..Default::default()
        };
        pjrt_call!(
            self.client.plugin,
            PJRT_Buffer_OnDeviceSizeInBytes,
            &mut args
        )?;
        Ok(args.on_device_size_in_bytes)
    }

    /// The buffer's address in device memory (`PJRT_Buffer_UnsafePointer`),
    /// to tell whether two buffers share memory (an update donated in
    /// place); never dereferenced.
    pub fn device_address(&self) -> Result<usize> {
        let mut args = PJRT_Buffer_UnsafePointer_Args {
            buffer: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Buffer_UnsafePointer, &mut args)?;
        Ok(args.buffer_pointer)
    }

    /// Whether the device memory was released (e.g. donated to an execution).
    pub fn is_deleted(&self) -> Result<bool> {
        let mut args = PJRT_Buffer_IsDeleted_Args {
            buffer: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Buffer_IsDeleted, &mut args)?;
        Ok(args.is_deleted)
    }

    /// An event that completes when the buffer's contents are computed.
    pub fn ready_event(&self) -> Result<Event> {
        let mut args = PJRT_Buffer_ReadyEvent_Args {
            buffer: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Buffer_ReadyEvent, &mut args)?;
        Ok(Event::from_raw(self.client.plugin.clone(), args.event))
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let mut args = PJRT_Buffer_Destroy_Args {
            buffer: self.raw,
            ..Default::default()
        };
        if let Err(e) = pjrt_call!(self.client.plugin, PJRT_Buffer_Destroy, &mut args) {
            tracing::warn!("destroying a PJRT buffer: {e}");
        }
        live::BUFFERS.dec();
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({:p})", self.raw)
    }
}

/// Plain-old-data element types whose memory can be handed to PJRT as bytes.
///
/// # Safety
/// Implementors must have no padding and accept every bit pattern.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => {$(
        // SAFETY: a primitive numeric type: no padding, every bit pattern valid.
        unsafe impl Pod for $t {}
    )*};
}
pod!(u8, i8, i16, i32, i64, f32, f64, half::f16, half::bf16);
// SAFETY: `Complex<T>` is `repr(C)`, two `T`s (real, imaginary) with no
// padding between or after them; every bit pattern of two floats is valid.
unsafe impl Pod for num_complex::Complex<f32> {}
// SAFETY: as above, two f64s.
unsafe impl Pod for num_complex::Complex<f64> {}

/// Views a slice of plain-old-data as bytes.
pub fn as_bytes<T: Pod>(xs: &[T]) -> &[u8] {
    // SAFETY: `T: Pod` has no padding, so every byte of the slice is initialized;
    // the length is the slice's size in bytes and the lifetime is the slice's.
    unsafe { std::slice::from_raw_parts(xs.as_ptr().cast::<u8>(), std::mem::size_of_val(xs)) }
}

/// Views a mutable slice of plain-old-data as bytes.
pub fn as_bytes_mut<T: Pod>(xs: &mut [T]) -> &mut [u8] {
    // SAFETY: as `as_bytes`; and since every bit pattern is a valid `T`, any
    // bytes written through the view leave valid `T`s.
    unsafe {
        std::slice::from_raw_parts_mut(xs.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(xs))
    }
}
