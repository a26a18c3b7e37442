//! The storage table (`eagertpu::storage`: how PyTorch's `tpu` allocations
//! are read and written) and the bit reinterpretation it rests on
//! (`Tensor::bitcast`, `Tensor.view(dtype)`), in every mode, against bytes
//! computed on the host.

mod common;

use common::*;
use eagertpu::{DType, Tensor, metrics, storage};

/// Raw little-endian bytes of a tensor.
fn bytes_of(t: &Tensor) -> Vec<u8> {
    let mut out = vec![0u8; t.numel() as usize * t.dtype().size_in_bytes()];
    t.read_bytes(&mut out).unwrap();
    out
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Values whose bytes differ in every position (and a NaN, a -0.0).
const FLOATS: [f32; 6] = [1.0, -2.5, 3.0e-39, f32::NAN, -0.0, 123456.78];

all_modes! {
fn bitcast_keeps_every_byte_and_reshapes_by_the_size_ratio() {
    let x = Tensor::from_slice(&FLOATS, &[2, 3]).unwrap();
    let want = f32_bytes(&FLOATS);
    let as_u8 = x.bitcast(DType::U8).unwrap();
    assert_eq!((as_u8.dtype(), as_u8.shape()), (DType::U8, &[2, 3, 4][..]));
    assert_eq!(as_u8.to_vec::<u8>().unwrap(), want);
    let as_i32 = x.bitcast(DType::I32).unwrap();
    let ints: Vec<i32> = FLOATS.iter().map(|v| v.to_bits() as i32).collect();
    assert_eq!(as_i32.to_vec::<i32>().unwrap(), ints);
    let as_f16 = x.bitcast(DType::F16).unwrap();
    assert_eq!((as_f16.shape(), bytes_of(&as_f16)), (&[2, 3, 2][..], want.clone()));
    // Growing: the last dim (the ratio) goes.
    let pairs = Tensor::from_slice(&FLOATS, &[3, 2]).unwrap();
    let wide = pairs.bitcast(DType::I64).unwrap();
    let longs: Vec<i64> = want
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!((wide.shape(), wide.to_vec::<i64>().unwrap()), (&[3][..], longs));
    let back = as_u8.bitcast(DType::F32).unwrap();
    assert_eq!((back.shape(), bytes_of(&back)), (&[2, 3][..], want));
}
}

#[test]
fn bitcast_refuses_bool_and_a_last_dim_that_is_not_the_ratio() {
    // Its host reads would count in another test's host syncs.
    let _serial = one_at_a_time();
    let x = Tensor::from_slice(&FLOATS, &[2, 3]).unwrap();
    assert_err(
        x.bitcast(DType::F64),
        "view_dtype",
        &["float32[2, 3]", "last dim of 2"],
    );
    assert_err(x.bitcast(DType::Bool), "view_dtype", &["bool"]);
    let b = Tensor::from_slice(&[true, false], &[2]).unwrap();
    assert_err(b.bitcast(DType::U8), "view_dtype", &["bool"]);
}

all_modes! {
fn a_storage_read_as_another_dtype_reinterprets_on_the_device() {
    let at = storage::register(0, 24).unwrap();
    let x = Tensor::from_slice(&FLOATS, &[2, 3]).unwrap();
    storage::write_view(at, 0, DType::F32, &[2, 3], &[3, 1], x).unwrap();
    eagertpu::sync().unwrap();
    let syncs = metrics().unwrap().host_syncs;
    let want = f32_bytes(&FLOATS);
    // As bytes (torch.save), as int16 at an offset, as int64 pairs.
    let bytes = storage::read_view(at, 0, DType::U8, &[24], &[1]).unwrap();
    let halves = storage::read_view(at, 4, DType::I16, &[4], &[1]).unwrap();
    let longs = storage::read_view(at, 0, DType::I64, &[3], &[1]).unwrap();
    let flags = storage::read_view(at, 0, DType::Bool, &[24], &[1]).unwrap();
    assert_eq!(metrics().unwrap().host_syncs, syncs, "reinterpreting read nothing on the host");
    assert_eq!(bytes.to_vec::<u8>().unwrap(), want);
    let shorts: Vec<i16> = want[4..12]
        .chunks(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(halves.to_vec::<i16>().unwrap(), shorts);
    assert_eq!(bytes_of(&longs), want);
    let nonzero: Vec<bool> = want.iter().map(|b| *b != 0).collect();
    assert_eq!(flags.to_vec::<bool>().unwrap(), nonzero);
    // Writing bytes back changes the floats, bit for bit.
    let mut edited = want.clone();
    edited[0..4].copy_from_slice(&7.5f32.to_le_bytes());
    let patch = Tensor::from_slice(&edited[0..4], &[4]).unwrap();
    storage::write_view(at, 0, DType::U8, &[4], &[1], patch).unwrap();
    let floats = storage::read_view(at, 0, DType::F32, &[6], &[1]).unwrap();
    assert_eq!(bytes_of(&floats), edited);
    storage::release(at).unwrap();
}
}

all_modes! {
fn resizing_copies_a_prefix_and_zero_fills() {
    let small = storage::register(0, 12).unwrap();
    let large = storage::register(0, 20).unwrap();
    let x = Tensor::from_slice(&[1i32, -2, 3], &[3]).unwrap();
    storage::write_view(small, 0, DType::I32, &[3], &[1], x).unwrap();
    storage::copy_prefix(large, small, 8).unwrap();
    let grown = storage::read_view(large, 0, DType::I32, &[5], &[1]).unwrap();
    assert_eq!(grown.to_vec::<i32>().unwrap(), vec![1, -2, 0, 0, 0]);
    assert_eq!(storage::contents_dtype(large).unwrap(), Some(DType::I32));
    storage::release(small).unwrap();
    storage::release(large).unwrap();
}
}

#[test]
fn bad_ids_offsets_and_sizes_are_errors_naming_them() {
    // Its host reads would count in another test's host syncs.
    let _serial = one_at_a_time();
    let at = storage::register(0, 16).unwrap();
    let text = |r: eagertpu::Result<()>| r.unwrap_err().to_string();
    let e = err_text(storage::read_view(at, 2, DType::F32, &[1], &[1]));
    assert!(e.contains("byte offset 2") && e.contains("4-byte"), "{e}");
    let e = err_text(storage::read_view(at, 64, DType::F32, &[1], &[1]));
    assert!(e.contains("past the end") && e.contains("16 bytes"), "{e}");
    let v = Tensor::zeros(&[3], DType::F32).unwrap();
    let e = text(storage::write_view(at, 0, DType::F32, &[2], &[1], v));
    assert!(e.contains("float32[3]") && e.contains("[2]"), "{e}");
    let (count, bytes) = storage::stats(Some(0));
    assert!(count >= 1 && bytes >= 16, "{count} {bytes}");
    storage::release(at).unwrap();
    let e = text(storage::release(at));
    assert!(e.contains("freed already"), "{e}");
    // A freed id never finds the allocation that takes its slot next.
    let next = storage::register(0, 8).unwrap();
    let e = err_text(storage::read_view(at, 0, DType::F32, &[1], &[1]));
    assert!(
        e.contains(&at.to_string()) && e.contains("freed already"),
        "{e}"
    );
    storage::read_view(next, 0, DType::F32, &[2], &[1]).unwrap();
    storage::release(next).unwrap();
    let e = err_text(storage::read_view(
        storage::StorageId(0),
        0,
        DType::F32,
        &[1],
        &[1],
    ));
    assert!(e.contains("unknown"), "{e}");
}

#[test]
fn stats_count_live_allocations_by_device() {
    let _serial = in_mode(eagertpu::Mode::Fused);
    let (count, bytes) = storage::stats(Some(0));
    let ids: Vec<_> = [8u64, 24, 40]
        .iter()
        .map(|n| storage::register(0, *n).unwrap())
        .collect();
    assert_eq!(storage::stats(Some(0)), (count + 3, bytes + 72));
    assert_eq!(storage::stats(None).0, storage::stats(Some(0)).0);
    for id in ids {
        storage::release(id).unwrap();
    }
    assert_eq!(storage::stats(Some(0)), (count, bytes));
    assert_eq!(storage::stats(Some(7)), (0, 0));
}

#[test]
fn usage_keeps_peaks_and_counts_until_reset() {
    let _serial = in_mode(eagertpu::Mode::Fused);
    storage::reset_peak(0);
    storage::reset_accumulated(0);
    let start = storage::usage(0);
    assert_eq!((start.peak_bytes, start.allocated_count), (start.bytes, 0));
    let a = storage::register(0, 1000).unwrap();
    let b = storage::register(0, 500).unwrap();
    storage::release(a).unwrap();
    let u = storage::usage(0);
    assert_eq!(u.bytes, start.bytes + 500);
    assert_eq!(u.peak_bytes, start.bytes + 1500);
    assert_eq!(u.peak_allocations, start.allocations + 2);
    assert_eq!((u.allocated_count, u.allocated_bytes), (2, 1500));
    assert_eq!((u.freed_count, u.freed_bytes), (1, 1000));
    // Peaks start again from what is live; the counts from zero.
    storage::reset_peak(0);
    assert_eq!(storage::usage(0).peak_bytes, start.bytes + 500);
    storage::reset_accumulated(0);
    let u = storage::usage(0);
    assert_eq!((u.allocated_count, u.freed_bytes), (0, 0));
    storage::release(b).unwrap();
    assert_eq!(storage::usage(0).peak_bytes, start.bytes + 500);
    assert_eq!(storage::usage(7), storage::Usage::default());
}
