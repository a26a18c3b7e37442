//! Profiler activities (`eagertpu::trace`) against the real plugin, in every
//! mode: each execution, host read and copy of a session is recorded once,
//! as the metrics count them, blamed on the caller's line, on the Unix clock.

mod common;

use eagertpu::trace::{self, Kind};
use eagertpu::{Mode, Tensor};

#[test]
fn a_session_records_what_the_metrics_count_at_the_callers_line() {
    for mode in [Mode::Debug, Mode::Strict, Mode::Fused] {
        let _m = eagertpu::with_mode(mode).unwrap();
        let before = eagertpu::metrics().unwrap();
        let started = trace::now_ns();
        trace::start();
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
        let y = x.exp().unwrap().matmul(&x).unwrap().tanh().unwrap();
        let read_line = line!() + 1;
        let values = y.to_vec::<f32>().unwrap();
        eagertpu::sync().unwrap();
        let (activities, dropped) = trace::stop();
        let after = eagertpu::metrics().unwrap();
        assert_eq!(dropped, 0);
        assert!(values.iter().all(|v| v.is_finite()));
        let count = |kind: Kind| activities.iter().filter(|a| a.kind == kind).count() as u64;
        assert_eq!(
            count(Kind::Execute),
            after.executions - before.executions,
            "{mode:?}: {activities:?}"
        );
        assert!(count(Kind::Execute) > 0);
        assert_eq!(count(Kind::HostRead), after.host_syncs - before.host_syncs);
        assert_eq!(
            count(Kind::ToDevice),
            after.transfers_to_device - before.transfers_to_device
        );
        assert_eq!(count(Kind::Compile), after.compiles - before.compiles);
        let read = activities
            .iter()
            .find(|a| a.kind == Kind::HostRead)
            .unwrap();
        assert_eq!(
            &*read.origin,
            format!("tests/trace.rs:{read_line}:24"),
            "{read:?}"
        );
        assert_eq!(read.detail, "float32[2, 2]");
        for a in &activities {
            assert!(
                started <= a.start_ns && a.start_ns <= a.end_ns && a.end_ns <= trace::now_ns(),
                "{a:?}"
            );
        }
        // Nothing between sessions.
        x.exp().unwrap().to_vec::<f32>().unwrap();
        trace::start();
        assert!(trace::stop().0.is_empty());
    }
}
