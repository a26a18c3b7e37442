//! Events on a device's op stream (`Device::record_event`, behind
//! `torch.tpu.Event`): recording launches what is pending; an event is
//! complete when the work before it is; timing events measure the time
//! between them on the device's timeline, which lies inside the host's.

mod common;

use std::time::Instant;

use common::*;
use eagertpu::{DType, default_device};

#[test]
fn an_event_follows_the_work_before_it_and_times_it_in_every_mode() {
    let x = Host::random(DType::F32, &[256, 256], 3);
    for mode in MODES {
        let _m = in_mode(mode);
        let device = default_device().unwrap();
        let xt = x.tensor();
        eagertpu::sync().unwrap();
        let t0 = Instant::now();
        let start = device.record_event(true).unwrap();
        let mut y = xt.clone();
        for _ in 0..20 {
            y = (&y.matmul(&xt).unwrap() * 0.001).unwrap();
        }
        let end = device.record_event(true).unwrap();
        end.wait().unwrap();
        let wall = t0.elapsed().as_secs_f64() * 1e3;
        assert!(start.query() && end.query(), "{mode}");
        let ms = start.elapsed_ms(&end).unwrap();
        assert!(
            ms > 0.0 && ms <= wall,
            "{mode}: {ms} ms between the events, {wall} ms on the host"
        );
        // The work was launched by the record: its values are there.
        assert!(y.to_vec::<f32>().unwrap().iter().all(|v| v.is_finite()));
        // An event without timing cannot be timed, and says why.
        let plain = device.record_event(false).unwrap();
        let e = start.elapsed_ms(&plain).unwrap_err().to_string();
        assert!(e.contains("enable_timing=True"), "{e}");
    }
}
