//! The cut policy's tests: streams of signatures, cut with no device.

use super::*;

/// Feeds `stream` (signatures), cutting when the policy says, and reading
/// after every op `i` for which `reads(i)` names an op (a host read of the
/// value that op computed, or a CPU fallback): as the runtime does, the
/// read cuts if that value is pending (`HostRead`) or if the policy says
/// the period cuts there (`Period`). Returns the chunks as (start, length,
/// reason).
fn cuts_reading(
    limits: WindowLimits,
    stream: &[u64],
    reads: &dyn Fn(usize) -> Option<usize>,
) -> Vec<(usize, usize, CutReason)> {
    let mut w = Window::new(limits);
    let mut out = vec![];
    let mut start = 0;
    for (i, &s) in stream.iter().enumerate() {
        let ops = i + 1 - start;
        let mut reason = w.record(s, ops, 0);
        if let Some(k) = reads(i) {
            let period_cut = w.host_read(Some(k as u64 + 1));
            if reason.is_none() {
                if k >= start {
                    reason = Some(CutReason::HostRead);
                } else if period_cut {
                    reason = Some(CutReason::Period);
                }
            }
        }
        if let Some(r) = reason {
            out.push((start, ops, r));
            start = i + 1;
        }
    }
    out
}

/// As `cuts_reading`, each read reading the value of the op before it.
fn cuts_with_reads(
    limits: WindowLimits,
    stream: &[u64],
    reads: &dyn Fn(usize) -> bool,
) -> Vec<(usize, usize, CutReason)> {
    cuts_reading(limits, stream, &|i| reads(i).then_some(i))
}

fn cuts(limits: WindowLimits, stream: &[u64]) -> Vec<(usize, usize, CutReason)> {
    cuts_with_reads(limits, stream, &|_| false)
}

/// A pseudo-random signature (a step of distinct ops).
fn sig(i: u64) -> u64 {
    (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) | 1
}

/// `prologue` distinct ops, then `steps` repetitions of `step`.
fn loop_stream(prologue: u64, step: &[u64], steps: usize) -> Vec<u64> {
    let mut stream: Vec<u64> = (0..prologue).map(|i| sig(1_000_000 + i)).collect();
    for _ in 0..steps {
        stream.extend(step);
    }
    stream
}

/// The cuts of each step from `from` on: (offset in the step, length,
/// reason) of the chunks that start in it.
fn cuts_per_step(
    chunks: &[(usize, usize, CutReason)],
    prologue: usize,
    step: usize,
    from: usize,
) -> Vec<Vec<(usize, usize, CutReason)>> {
    let mut per_step: Vec<Vec<_>> = vec![];
    for &(start, len, reason) in chunks {
        if start < prologue + from * step {
            continue;
        }
        let k = (start - prologue) / step - from;
        per_step.resize(per_step.len().max(k + 1), vec![]);
        per_step[k].push(((start - prologue) % step, len, reason));
    }
    // The last step's last chunk is never cut.
    per_step.pop();
    per_step
}

/// Where the period cuts fell (the end of each chunk it cut).
fn period_cuts(c: &[(usize, usize, CutReason)]) -> Vec<usize> {
    c.iter()
        .filter(|&&(_, _, r)| r == CutReason::Period)
        .map(|&(start, len, _)| start + len)
        .collect()
}

fn limits(max_ops: usize) -> WindowLimits {
    WindowLimits {
        max_ops,
        max_params: 1000,
    }
}

#[test]
fn given_a_stream_without_repeats_when_the_window_fills_should_cut_at_the_limit() {
    let stream: Vec<u64> = (0..100).collect();
    let c = cuts(limits(32), &stream);
    assert_eq!(c.len(), 3);
    assert!(
        c.iter()
            .all(|&(_, len, r)| len == 32 && r == CutReason::WindowOps)
    );
}

#[test]
fn given_a_training_loop_when_it_repeats_should_cut_chunks_that_repeat_exactly() {
    // A 10-op prologue, then a 37-op step forever.
    let step: Vec<u64> = (100..137).collect();
    let mut stream: Vec<u64> = (0..10).collect();
    for _ in 0..40 {
        stream.extend(&step);
    }
    let c = cuts(limits(128), &stream);
    // After the first period cut, every chunk is one step long and starts
    // at the same phase of the step: the same program every time.
    let first_period = c
        .iter()
        .position(|&(_, _, r)| r == CutReason::Period)
        .unwrap();
    let steady = &c[first_period + 1..];
    assert!(steady.len() >= 10);
    for &(start, len, reason) in steady {
        assert_eq!((len, reason), (37, CutReason::Period));
        assert_eq!(
            stream[start..start + len],
            stream[steady[0].0..steady[0].0 + len]
        );
    }
}

#[test]
fn given_a_repeating_chain_when_a_read_comes_first_should_not_cut_early() {
    // 6-op period, window 512: a 200-op chain stays one chunk.
    let stream: Vec<u64> = (0..200).map(|i| i % 6).collect();
    let c = cuts(limits(512), &stream);
    assert!(c.is_empty(), "{c:?}");
}

#[test]
fn given_a_period_longer_than_the_window_should_fall_back_to_the_limit() {
    let stream: Vec<u64> = (0..400).map(|i| i % 100).collect();
    let c = cuts(limits(64), &stream);
    assert!(c.iter().all(|&(_, len, _)| len <= 100), "{c:?}");
}

#[test]
fn given_many_parameters_should_cut_on_the_parameter_limit() {
    let mut w = Window::new(WindowLimits {
        max_ops: 100,
        max_params: 4,
    });
    assert_eq!(w.record(1, 1, 3), None);
    assert_eq!(w.record(2, 2, 4), Some(CutReason::WindowParams));
}

#[test]
fn given_a_loop_with_host_reads_and_a_fallback_should_cut_every_iteration_the_same_way() {
    // A 234-op step (an MLP step with AdamW) whose body reads the loss
    // (op 120) and falls back to the CPU for one op (op 200): both cut.
    let step: Vec<u64> = (0..234).map(sig).collect();
    let stream = loop_stream(37, &step, 30);
    let reads = |i: usize| i >= 37 && matches!((i - 37) % 234, 120 | 200);
    let c = cuts_with_reads(limits(512), &stream, &reads);
    let per_step = cuts_per_step(&c, 37, 234, 3);
    assert!(per_step.len() >= 26, "{c:?}");
    for s in &per_step {
        assert_eq!(s, &per_step[0], "{c:?}");
    }
    // The phase starts at a read that recurs every step: the reads cut
    // (the period's cut is the read's), nothing else does.
    assert!(
        per_step[0]
            .iter()
            .all(|&(_, _, r)| r == CutReason::HostRead),
        "{c:?}"
    );
}

#[test]
fn given_a_read_at_the_same_place_every_step_should_cut_once_per_step_there() {
    // A 301-op step that reads its result at op 180 of the step (the
    // smallest rotation starts elsewhere): once the read has recurred,
    // the period's cut is the read's (the read cuts it), and each step is
    // one chunk.
    let step: Vec<u64> = (0..301).map(sig).collect();
    let stream = loop_stream(19, &step, 20);
    let reads = |i: usize| i >= 19 && (i - 19) % 301 == 180;
    let c = cuts_with_reads(limits(512), &stream, &reads);
    let per_step = cuts_per_step(&c, 19, 301, 4);
    assert!(per_step.len() >= 14, "{c:?}");
    for s in &per_step {
        assert_eq!(s, &[(181, 301, CutReason::HostRead)], "{c:?}");
    }
}

#[test]
fn given_a_second_loop_reading_every_step_should_align_to_its_own_reads() {
    // A 301-op step read at its end every step, run 12 times; 37 ops of
    // set-up (a new model and optimizer); the same loop again, now 37 ops
    // later in the period. The first loop's reads are at other offsets:
    // the second loop's phase must come from its own reads, within its
    // first four steps, so that each of its steps is one chunk ending at
    // its read.
    let step: Vec<u64> = (0..301).map(sig).collect();
    let first = loop_stream(19, &step, 12);
    let second_at = first.len() + 37;
    let mut stream = first.clone();
    stream.extend((0..37).map(|i| sig(2_000_000 + i)));
    stream.extend(step.iter().cycle().take(12 * 301));
    let reads = |i: usize| {
        let end = |start: usize| i >= start && (i - start) % 301 == 300;
        if i < first.len() {
            end(19)
        } else {
            end(second_at)
        }
    };
    let c = cuts_with_reads(limits(512), &stream, &reads);
    let settled: Vec<_> = c
        .iter()
        .filter(|&&(start, _, _)| start >= second_at + 4 * 301)
        .collect();
    assert!(settled.len() >= 7, "{settled:?}");
    for &&(start, len, reason) in &settled[..settled.len() - 1] {
        assert_eq!(
            ((start - second_at) % 301, len, reason),
            (0, 301, CutReason::HostRead),
            "{settled:?}"
        );
    }
}

#[test]
fn given_a_value_read_long_after_it_is_computed_should_cut_the_step_once_where_it_is_computed() {
    // A 234-op training step computes its loss at op 40 and reads it at
    // its end, every step: once settled, each step is one 234-op chunk
    // from one loss to the next, launched at the loss (it computes while
    // the backward pass records), and the read, whose value is launched
    // already, cuts nothing: one launch a step, the same every step.
    let step: Vec<u64> = (0..234).map(sig).collect();
    let stream = loop_stream(37, &step, 30);
    let reads = |i: usize| (i >= 37 && (i - 37) % 234 == 233).then(|| i - 193);
    let c = cuts_reading(limits(512), &stream, &reads);
    let steps = cuts_per_step(&c, 37, 234, 5);
    assert!(steps.len() >= 20, "{c:?}");
    for s in &steps {
        assert_eq!(s, &vec![(41, 234, CutReason::Period)], "{c:?}");
    }
}

#[test]
fn given_a_short_step_reading_its_loss_should_launch_at_the_loss_until_the_reads_stop() {
    // A 52-op SGD step (short: up to nine fit a 512-op window) computes its
    // loss at op 20 and reads it at its end for 12 steps: each step is one
    // chunk launched at the loss, as a long step's is (the read finds it
    // launched). Then the reads stop: the steps are grouped again, several
    // to a chunk, each chunk cut at a step's end.
    let step: Vec<u64> = (0..52).map(sig).collect();
    let stream = loop_stream(13, &step, 40);
    let reading = 13 + 12 * 52;
    let reads = |i: usize| (i < reading && i >= 13 && (i - 13) % 52 == 51).then(|| i - 31);
    let c = cuts_reading(limits(512), &stream, &reads);
    let steps = cuts_per_step(&c, 13, 52, 5);
    for s in &steps[..6] {
        assert_eq!(s, &vec![(21, 52, CutReason::Period)], "{c:?}");
    }
    let grouped: Vec<_> = c
        .iter()
        .filter(|&&(start, _, _)| start >= reading + 52)
        .collect();
    assert!(grouped.len() >= 2, "{c:?}");
    for &&(start, len, reason) in &grouped {
        assert_eq!(
            (reason, (start + len - 13) % 52),
            (CutReason::Period, 0),
            "{c:?}"
        );
        assert!(len > 8 * 52 && len <= 512, "{c:?}");
    }
}

#[test]
fn given_a_short_step_reading_a_value_computed_just_before_should_cut_at_the_read() {
    // A 12-op update read 3 ops after its value is computed: not worth
    // moving the cut; each step is one chunk, cut by the read at its end.
    let step: Vec<u64> = (0..12).map(sig).collect();
    let stream = loop_stream(5, &step, 30);
    let reads = |i: usize| (i >= 5 && (i - 5) % 12 == 11).then(|| i - 3);
    let c = cuts_reading(limits(512), &stream, &reads);
    for s in cuts_per_step(&c, 5, 12, 5) {
        assert_eq!(s, vec![(0, 12, CutReason::HostRead)], "{c:?}");
    }
}

#[test]
fn given_reads_at_the_period_cut_that_stop_should_cut_at_the_period_again() {
    // A 301-op step read at its end for 10 steps, then never: while it
    // reads, the reads cut (the period waits for them); once the reads
    // stop, the period cuts at the same place again within three steps.
    let step: Vec<u64> = (0..301).map(sig).collect();
    let stream = loop_stream(19, &step, 24);
    let reads = |i: usize| (19..19 + 10 * 301).contains(&i) && (i - 19) % 301 == 300;
    let c = cuts_with_reads(limits(512), &stream, &reads);
    let steps = cuts_per_step(&c, 19, 301, 4);
    for s in &steps[..5] {
        assert_eq!(s, &vec![(0, 301, CutReason::HostRead)], "{c:?}");
    }
    for s in &steps[10..] {
        assert_eq!(s, &vec![(0, 301, CutReason::Period)], "{c:?}");
    }
}

#[test]
fn given_a_value_read_right_after_it_is_computed_should_not_add_a_chunk() {
    // A decode step reads the token it computes last: one chunk a step.
    let step: Vec<u64> = (0..300).map(sig).collect();
    let stream = loop_stream(11, &step, 20);
    let reads = |i: usize| (i >= 11 && (i - 11) % 300 == 299).then(|| i - 3);
    let c = cuts_reading(limits(512), &stream, &reads);
    for s in cuts_per_step(&c, 11, 300, 5) {
        assert_eq!(s, vec![(0, 300, CutReason::HostRead)], "{c:?}");
    }
}

#[test]
fn given_a_long_step_reading_a_value_computed_early_should_cut_every_step_the_same_way() {
    // A 1,500-op step (three segments) computes its loss at op 400 and
    // reads it at op 1,499: segments and the loss's chunk end at the same
    // offsets every step, one of them at the loss.
    let step: Vec<u64> = (0..1500).map(sig).collect();
    let stream = loop_stream(23, &step, 14);
    let reads = |i: usize| (i >= 23 && (i - 23) % 1500 == 1499).then(|| i - 1099);
    let c = cuts_reading(limits(512), &stream, &reads);
    let steps = cuts_per_step(&c, 23, 1500, 5);
    assert!(steps.len() >= 7, "{c:?}");
    assert!(
        steps[0].iter().any(|&(at, len, _)| at + len == 401),
        "{:?}",
        steps[0]
    );
    assert!(
        steps[0].iter().all(|&(_, len, _)| len <= 512),
        "{:?}",
        steps[0]
    );
    for s in &steps[1..] {
        assert_eq!(s, &steps[0], "{c:?}");
    }
}

#[test]
fn given_reads_that_start_after_the_period_settled_should_not_move_it() {
    // A 301-op step run 10 times without a read, then read every step at
    // op 180: the chunks compiled by then keep their cuts.
    let step: Vec<u64> = (0..301).map(sig).collect();
    let stream = loop_stream(19, &step, 30);
    let reads = |i: usize| i >= 19 + 10 * 301 && (i - 19) % 301 == 180;
    let plain = cuts(limits(512), &stream);
    let read = cuts_with_reads(limits(512), &stream, &reads);
    assert_eq!(period_cuts(&plain), period_cuts(&read));
}

#[test]
fn given_two_reads_every_step_should_keep_one_of_them_as_the_phase() {
    // The loss and an accuracy read at ops 60 and 200 of a 234-op step:
    // two chunks a step, at the same places every step.
    let step: Vec<u64> = (0..234).map(sig).collect();
    let stream = loop_stream(5, &step, 30);
    let reads = |i: usize| i >= 5 && matches!((i - 5) % 234, 60 | 200);
    let c = cuts_with_reads(limits(512), &stream, &reads);
    let per_step = cuts_per_step(&c, 5, 234, 4);
    assert!(per_step.len() >= 24, "{c:?}");
    for s in &per_step {
        assert_eq!(s, &per_step[0], "{c:?}");
        assert_eq!(s.len(), 2, "{c:?}");
    }
}

#[test]
fn given_a_read_every_step_of_a_long_step_should_end_a_segment_at_the_read() {
    // A 1,500-op step (three segments) reading at op 700.
    let step: Vec<u64> = (0..1500).map(sig).collect();
    let stream = loop_stream(3, &step, 12);
    let reads = |i: usize| i >= 3 && (i - 3) % 1500 == 700;
    let c = cuts_with_reads(limits(512), &stream, &reads);
    let per_step = cuts_per_step(&c, 3, 1500, 4);
    assert!(per_step.len() >= 6, "{c:?}");
    for s in &per_step {
        assert_eq!(s, &per_step[0], "{c:?}");
        assert_eq!(s.len(), 3, "{c:?}");
        assert!(s.iter().any(|&(start, _, _)| start == 701), "{c:?}");
    }
}

#[test]
fn given_reads_every_n_steps_should_not_move_the_period_cuts() {
    // Logging every 7 steps, at two different points of the step.
    let step: Vec<u64> = (0..234).map(sig).collect();
    let stream = loop_stream(11, &step, 60);
    let reads = |i: usize| {
        let (n, at) = ((i.max(11) - 11) / 234, (i.max(11) - 11) % 234);
        i >= 11 && ((n % 7 == 3 && at == 50) || (n % 7 == 5 && at == 180))
    };
    let plain = cuts(limits(512), &stream);
    let read = cuts_with_reads(limits(512), &stream, &reads);
    assert_eq!(period_cuts(&plain), period_cuts(&read));
    // A few kinds of chunk, whatever the reads: each compiles once.
    let kinds: std::collections::HashSet<&[u64]> = read
        .iter()
        .filter(|&&(start, _, _)| start > 11 + 3 * 234)
        .map(|&(start, len, _)| &stream[start..start + len])
        .collect();
    assert!(kinds.len() <= 5, "{} kinds of chunk", kinds.len());
}

#[test]
fn given_a_2000_op_loop_without_reads_should_cut_every_iteration_the_same_way() {
    let step: Vec<u64> = (0..2000).map(sig).collect();
    let stream = loop_stream(123, &step, 12);
    let c = cuts(limits(512), &stream);
    let per_step = cuts_per_step(&c, 123, 2000, 3);
    assert!(per_step.len() >= 8);
    for s in &per_step {
        assert_eq!(s, &per_step[0], "{c:?}");
    }
    // Four segments of 500 ops, at the same offsets each time.
    assert_eq!(per_step[0].len(), 4, "{:?}", per_step[0]);
    assert!(
        per_step[0]
            .iter()
            .all(|&(_, len, r)| len == 500 && r == CutReason::Period)
    );
}

#[test]
fn given_repeated_layers_in_a_step_should_find_the_step_not_the_layer() {
    // Embedding, four identical 40-op layers, a loss, an optimizer.
    let layer: Vec<u64> = (0..40).map(|i| sig(500 + i)).collect();
    let mut step: Vec<u64> = (0..10).map(sig).collect();
    for _ in 0..4 {
        step.extend(&layer);
    }
    step.extend((0..30).map(|i| sig(900 + i)));
    let mut w = Window::new(limits(4096));
    for &s in &loop_stream(5, &step, 6) {
        w.record(s, 1, 0);
    }
    assert_eq!(w.period(), Some(step.len()));
}

#[test]
fn given_the_same_loop_started_at_another_point_should_cut_at_the_same_phase() {
    // The phase is a property of the ops: a loop entered one way or
    // another (another prologue, a read first) cuts at the same op.
    let step: Vec<u64> = (0..300).map(sig).collect();
    let offsets = |prologue: u64| {
        let c = cuts(limits(512), &loop_stream(prologue, &step, 8));
        c.iter()
            .filter(|&&(_, _, r)| r == CutReason::Period)
            .map(|&(start, len, _)| (start + len - prologue as usize) % 300)
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(offsets(0), offsets(77));
    assert_eq!(offsets(0).len(), 1);
}

#[test]
fn given_a_stream_that_stops_repeating_should_drop_the_period() {
    let step: Vec<u64> = (0..50).map(sig).collect();
    let mut w = Window::new(limits(512));
    for &s in &loop_stream(0, &step, 4) {
        w.record(s, 1, 0);
    }
    assert_eq!(w.period(), Some(50));
    w.record(sig(99_999), 1, 0);
    assert_eq!(w.period(), None);
}

#[test]
fn given_a_decode_loop_called_again_and_again_should_keep_the_step_period() {
    // generate(): a 40-op prefill, then 150 decode steps of 20 ops, called
    // five times. The whole call (3,040 ops) repeats too, and from the
    // third call on it has matched longer than the step, which restarts
    // at every prefill; the step, which fits in one chunk, still wins.
    let prefill: Vec<u64> = (1000..1040).map(sig).collect();
    let step: Vec<u64> = (0..20).map(sig).collect();
    let mut w = Window::new(limits(512));
    for _ in 0..5 {
        for &s in &prefill {
            w.record(s, 1, 0);
        }
        for _ in 0..150 {
            for &s in &step {
                w.record(s, 1, 0);
            }
        }
        assert_eq!(w.period(), Some(20));
    }
}

#[test]
fn reasons_have_stable_indices_and_names() {
    for (i, r) in CutReason::ALL.iter().enumerate() {
        assert_eq!(r.index(), i);
        assert!(!r.name().is_empty());
    }
}
