//! A long loop of ops, errors included, leaves the number of live device
//! buffers, executables and events where it started: nothing leaks across
//! the PJRT boundary.

use eagertpu::internals::pjrt::live;
use eagertpu::{DType, Tensor};

/// One round of varied ops (valid and invalid); returns how many were called.
fn round(a: &Tensor, b: &Tensor, idx: &Tensor, bad_idx: &Tensor) -> usize {
    let c = (a + b).unwrap();
    let d = (&c * 0.5).unwrap();
    let e = d.matmul(&b.t().unwrap()).unwrap();
    let f = e.sum(&[1], false).unwrap();
    let g = a.index_select(0, idx).unwrap();
    let h = g.softmax(-1).unwrap();
    let _ = (f, h);
    // Errors: at record time, and in the debug-mode index check after upload.
    assert!(
        a.add(&idx.to_dtype(DType::F32).unwrap().reshape(&[1, 2]).unwrap())
            .is_err()
    );
    assert!(a.reshape(&[7]).is_err());
    assert!(a.index_select(0, bad_idx).is_err());
    assert!(a.to_vec::<i32>().is_err());
    // Ten calls, counting the two inside the first error line.
    11
}

#[test]
fn ten_thousand_ops_leak_nothing() {
    let a = Tensor::from_slice(&(0..12).map(|i| i as f32).collect::<Vec<_>>(), &[4, 3]).unwrap();
    let b = Tensor::ones(&[4, 3], DType::F32).unwrap();
    let idx = Tensor::from_slice(&[3i64, 0], &[2]).unwrap();
    let bad_idx = Tensor::from_slice(&[9i64], &[1]).unwrap();
    round(&a, &b, &idx, &bad_idx);
    let buffers = live::BUFFERS.get();
    let executables = live::EXECUTABLES.get();
    let events = live::EVENTS.get();
    let mut ops = 0;
    while ops < 10_000 {
        ops += round(&a, &b, &idx, &bad_idx);
    }
    assert_eq!(live::BUFFERS.get(), buffers, "device buffers leaked");
    assert_eq!(live::EXECUTABLES.get(), executables, "executables leaked");
    assert_eq!(live::EVENTS.get(), events, "events leaked");
    let m = eagertpu::metrics().unwrap();
    assert_eq!(m.live_buffers, buffers);
    // The values are still right after all that.
    let s = (&a + &b).unwrap().sum_all().unwrap().item::<f32>().unwrap();
    assert_eq!(s, (0..12).sum::<i32>() as f32 + 12.0);
}
