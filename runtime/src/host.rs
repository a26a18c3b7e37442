//! Host data: the Rust element types a tensor is built from and read into.

use fusion::{DType, TensorType};
use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use crate::error::{Error, Result};
use crate::pjrt::{Buffer, as_bytes, as_bytes_mut};

/// A Rust type that is the element type of a tensor.
pub trait Element: Copy + Send + Sync + std::fmt::Debug + 'static {
    const DTYPE: DType;

    /// Passes the elements to `f` as bytes in the device's layout.
    fn with_bytes<R>(data: &[Self], f: impl FnOnce(&[u8]) -> R) -> R;

    /// Builds `n` elements from bytes `fill` writes.
    fn read(n: usize, fill: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<Vec<Self>>;

    /// The value as f64 (a complex one's real part).
    fn to_f64(self) -> f64;
}

macro_rules! pod_element {
    ($($t:ty => $d:ident, $to:expr);* $(;)?) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn with_bytes<R>(data: &[Self], f: impl FnOnce(&[u8]) -> R) -> R {
                f(as_bytes(data))
            }
            fn read(n: usize, fill: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<Vec<Self>> {
                let mut out: Vec<$t> = vec![<$t>::default(); n];
                fill(as_bytes_mut(&mut out))?;
                Ok(out)
            }
            fn to_f64(self) -> f64 {
                let conv: fn($t) -> f64 = $to;
                conv(self)
            }
        }
    )*};
}

pod_element! {
    f32 => F32, |x| x as f64;
    f64 => F64, |x| x;
    f16 => F16, |x| x.to_f64();
    bf16 => BF16, |x| x.to_f64();
    i8 => I8, |x| x as f64;
    i16 => I16, |x| x as f64;
    i32 => I32, |x| x as f64;
    i64 => I64, |x| x as f64;
    u8 => U8, |x| x as f64;
    Complex32 => C64, |x| x.re as f64;
    Complex64 => C128, |x| x.re;
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn with_bytes<R>(data: &[Self], f: impl FnOnce(&[u8]) -> R) -> R {
        let bytes: Vec<u8> = data.iter().map(|&b| b as u8).collect();
        f(&bytes)
    }
    fn read(n: usize, fill: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<Vec<Self>> {
        let mut bytes = vec![0u8; n];
        fill(&mut bytes)?;
        Ok(bytes.into_iter().map(|b| b != 0).collect())
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
}

/// Reads a buffer of type `ty` into host elements of type `T` (which must be
/// the buffer's dtype).
pub(crate) fn read<T: Element>(buffer: &Buffer, ty: &TensorType) -> Result<Vec<T>> {
    if T::DTYPE != ty.dtype {
        return Err(Error::Internal(format!(
            "reading a {} buffer as {}",
            ty.dtype,
            T::DTYPE
        )));
    }
    T::read(ty.numel() as usize, |bytes| buffer.to_host(bytes))
}

/// A buffer of type `ty` as host bytes (its elements, dense, row-major).
pub(crate) fn read_bytes(buffer: &Buffer, ty: &TensorType) -> Result<Vec<u8>> {
    let mut bytes = vec![0u8; ty.numel() as usize * ty.dtype.size_in_bytes()];
    buffer.to_host(&mut bytes)?;
    Ok(bytes)
}

/// Reads any buffer, converting each element to f64 (a complex element to
/// its two parts, real then imaginary).
pub(crate) fn read_f64(buffer: &Buffer, ty: &TensorType) -> Result<Vec<f64>> {
    fn conv<T: Element>(b: &Buffer, ty: &TensorType) -> Result<Vec<f64>> {
        Ok(read::<T>(b, ty)?.into_iter().map(Element::to_f64).collect())
    }
    fn parts<T: Element + Into<f64>>(b: &Buffer, ty: &TensorType) -> Result<Vec<f64>> {
        let n = ty.numel() as usize * 2;
        let values = T::read(n, |bytes| b.to_host(bytes))?;
        Ok(values.into_iter().map(Into::into).collect())
    }
    match ty.dtype {
        DType::Bool => conv::<bool>(buffer, ty),
        DType::U8 => conv::<u8>(buffer, ty),
        DType::I8 => conv::<i8>(buffer, ty),
        DType::I16 => conv::<i16>(buffer, ty),
        DType::I32 => conv::<i32>(buffer, ty),
        DType::I64 => conv::<i64>(buffer, ty),
        DType::F16 => conv::<f16>(buffer, ty),
        DType::BF16 => conv::<bf16>(buffer, ty),
        DType::F32 => conv::<f32>(buffer, ty),
        DType::F64 => conv::<f64>(buffer, ty),
        DType::C64 => parts::<f32>(buffer, ty),
        DType::C128 => parts::<f64>(buffer, ty),
    }
}

/// Reads an integer buffer as i64 (exactly).
pub(crate) fn read_i64(buffer: &Buffer, ty: &TensorType) -> Result<Vec<i64>> {
    fn conv<T: Element + Into<i64>>(b: &Buffer, ty: &TensorType) -> Result<Vec<i64>> {
        Ok(read::<T>(b, ty)?.into_iter().map(Into::into).collect())
    }
    match ty.dtype {
        DType::U8 => conv::<u8>(buffer, ty),
        DType::I8 => conv::<i8>(buffer, ty),
        DType::I16 => conv::<i16>(buffer, ty),
        DType::I32 => conv::<i32>(buffer, ty),
        DType::I64 => conv::<i64>(buffer, ty),
        d => Err(Error::Internal(format!("reading a {d} buffer as integers"))),
    }
}

/// (NaN count, infinity count) of a float buffer.
pub(crate) fn count_non_finite(buffer: &Buffer, ty: &TensorType) -> Result<(usize, usize)> {
    let values = read_f64(buffer, ty)?;
    let nan = values.iter().filter(|v| v.is_nan()).count();
    let inf = values.iter().filter(|v| v.is_infinite()).count();
    Ok((nan, inf))
}

/// The bits of `value` stored as a 0-d `dtype` element (little-endian in
/// the low bytes; of a complex one, its real part: the imaginary part is
/// zero), and the element's size in bytes.
pub(crate) fn scalar_bits(value: fusion::Scalar, dtype: DType) -> (u64, usize) {
    let x = value.as_f64();
    let i = value.as_i64();
    let bits: u64 = match dtype {
        DType::Bool => (x != 0.0) as u64,
        DType::U8 => i as u8 as u64,
        DType::I8 => i as i8 as u8 as u64,
        DType::I16 => i as i16 as u16 as u64,
        DType::I32 => i as i32 as u32 as u64,
        DType::I64 => i as u64,
        DType::F16 => f16::from_f64(x).to_bits() as u64,
        DType::BF16 => bf16::from_f64(x).to_bits() as u64,
        DType::F32 => (x as f32).to_bits() as u64,
        DType::F64 | DType::C128 => x.to_bits(),
        DType::C64 => (x as f32).to_bits() as u64,
    };
    (bits, dtype.size_in_bytes())
}
