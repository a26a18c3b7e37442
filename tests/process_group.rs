//! Issue 11: a process group over the devices of one client, one thread per
//! rank. Ranks run different code between collectives (MPMD) in every mode
//! and get the host reference's values; a mismatched collective and a rank
//! that never comes fail every waiting rank with an error naming each rank's
//! call, and the process goes on. Each test runs in a child process with
//! four CPU devices (the runtime reads `EAGERTPU_DEVICE_COUNT` once).

mod common;

use std::time::{Duration, Instant};

use common::{child, is_child};
use eagertpu::{CollectiveReduce, Device, Mode, ProcessGroup, Subgroups, Tensor};

const RANKS: usize = 4;
const LEN: usize = 8;

fn four_devices(name: &str) {
    let (ok, out) = child(name, &[("EAGERTPU_DEVICE_COUNT", "4")]);
    assert!(ok, "{out}");
}

fn group() -> ProcessGroup {
    let devices: Vec<Device> = (0..RANKS).map(|r| Device::get(r).unwrap()).collect();
    ProcessGroup::new(&devices).unwrap()
}

/// Runs `body(pg, r)` on a thread of its own for each rank `r` in `0..ranks`;
/// each rank's result, in rank order.
fn on_ranks<T: Send>(
    pg: &ProcessGroup,
    ranks: usize,
    body: impl Fn(&ProcessGroup, usize) -> T + Sync,
) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..ranks)
            .map(|r| {
                let body = &body;
                s.spawn(move || body(pg, r))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Rank `r`'s operand at step `step`: distinct small values of both signs.
fn operand(r: usize, step: usize) -> Vec<f32> {
    (0..LEN)
        .map(|i| ((r * 7 + i * 3 + step) % 11) as f32 - 5.0)
        .collect()
}

/// What every rank computes from the collectives' results, on the host.
fn reference(r: usize, step: usize) -> Vec<f32> {
    let xs: Vec<Vec<f32>> = (0..RANKS).map(|k| operand(k, step)).collect();
    let column = |i: usize| xs.iter().map(move |x| x[i]);
    let sum: Vec<f32> = (0..LEN).map(|i| column(i).sum()).collect();
    let max: Vec<f32> = (0..LEN)
        .map(|i| column(i).fold(f32::MIN, f32::max))
        .collect();
    let gathered: Vec<f32> = xs.concat();
    let block = LEN / RANKS;
    let avg_block: Vec<f32> = sum[r * block..(r + 1) * block]
        .iter()
        .map(|s| s / RANKS as f32)
        .collect();
    let received: Vec<f32> = xs
        .iter()
        .flat_map(|x| x[r * block..(r + 1) * block].to_vec())
        .collect();
    // sum * 2 + max, then the gathered total, the averaged block, what
    // all-to-all delivered and rank 2's operand, concatenated.
    let mut out: Vec<f32> = sum.iter().zip(&max).map(|(s, m)| s * 2.0 + m).collect();
    out.push(gathered.iter().sum());
    out.extend(avg_block);
    out.extend(received);
    out.extend(operand(2, step));
    out
}

/// Rank `r`'s step: a different amount of work before and between the
/// collectives on every rank (rank 0 also reads a value on the host), then
/// the collectives, then work on their results.
fn rank_step(pg: &ProcessGroup, r: usize, step: usize) -> Vec<f32> {
    let d = pg.device(r).unwrap();
    let mut x = d.tensor(&operand(r, step), &[LEN as i64]).unwrap();
    for _ in 0..r * 3 {
        x = (&(&x * 2.0).unwrap() * 0.5).unwrap();
    }
    if r == 0 {
        assert_eq!(
            x.sum_all().unwrap().item::<f32>().unwrap(),
            operand(0, step).iter().sum::<f32>()
        );
    }
    let sum = pg.all_reduce(r, &x, CollectiveReduce::Sum).unwrap();
    let doubled = (&sum * 2.0).unwrap();
    let max = pg.all_reduce(r, &x, CollectiveReduce::Max).unwrap();
    let first = (&doubled + &max).unwrap();
    let gathered = pg.all_gather(r, &x, 0).unwrap().sum_all().unwrap();
    let avg = pg.reduce_scatter(r, &x, CollectiveReduce::Avg, 0).unwrap();
    let exchanged = pg.all_to_all(r, &x, 0, 0).unwrap();
    let from_two = pg.broadcast(r, &x, 2).unwrap();
    let mut out = first.to_vec::<f32>().unwrap();
    out.push(gathered.item::<f32>().unwrap());
    out.extend(avg.to_vec::<f32>().unwrap());
    out.extend(exchanged.to_vec::<f32>().unwrap());
    out.extend(from_two.to_vec::<f32>().unwrap());
    // A collective whose result and input are dropped unread: its rank's
    // stream keeps it (and the inputs it reads) until it is done.
    let scratch = d.tensor(&vec![r as f32; 1 << 16], &[1 << 16]).unwrap();
    drop(pg.all_reduce(r, &scratch, CollectiveReduce::Sum).unwrap());
    drop(scratch);
    eagertpu::sync().unwrap();
    pg.barrier(r).unwrap();
    out
}

#[test]
fn child_mpmd_ranks_get_the_collectives_values_in_every_mode() {
    if !is_child("child_mpmd_ranks_get_the_collectives_values_in_every_mode") {
        return;
    }
    let pg = group();
    for mode in [Mode::Debug, Mode::Strict, Mode::Fused] {
        eagertpu::set_mode(mode).unwrap();
        // Several steps: fused mode's chunks repeat and compile.
        for step in 0..4 {
            let results = on_ranks(&pg, RANKS, |pg, r| rank_step(pg, r, step));
            for (r, got) in results.iter().enumerate() {
                assert_eq!(got, &reference(r, step), "{mode:?}, step {step}, rank {r}");
            }
        }
    }
}

#[test]
fn mpmd_ranks_get_the_collectives_values_in_every_mode() {
    four_devices("child_mpmd_ranks_get_the_collectives_values_in_every_mode");
}

#[test]
fn child_mismatched_collectives_fail_every_rank_naming_each_call() {
    if !is_child("child_mismatched_collectives_fail_every_rank_naming_each_call") {
        return;
    }
    let pg = ProcessGroup::new(&[Device::get(0).unwrap(), Device::get(1).unwrap()]).unwrap();
    let errors = on_ranks(&pg, 2, |pg, r| {
        let x = pg.device(r).unwrap().tensor(&[1.0f32; 4], &[4]).unwrap();
        let result = if r == 0 {
            pg.all_reduce(r, &x, CollectiveReduce::Sum)
        } else {
            pg.all_gather(r, &x, 0)
        };
        result.unwrap_err().to_string()
    });
    for e in &errors {
        for words in [
            "the ranks called different collectives",
            "rank 0: all_reduce(Sum) float32[4] (collective #1) at tests/process_group.rs:",
            "rank 1: all_gather(dim 0) float32[4] (collective #1) at tests/process_group.rs:",
        ] {
            assert!(e.contains(words), "expected {words:?} in {e}");
        }
    }
    // The ranks go on: their next collective matches and runs.
    let sums = on_ranks(&pg, 2, |pg, r| {
        let x = pg
            .device(r)
            .unwrap()
            .tensor(&[r as f32 + 1.0; 4], &[4])
            .unwrap();
        let y = pg.all_reduce(r, &x, CollectiveReduce::Sum).unwrap();
        y.to_vec::<f32>().unwrap()
    });
    assert_eq!(sums, vec![vec![3.0; 4], vec![3.0; 4]]);
}

#[test]
fn mismatched_collectives_fail_every_rank_naming_each_call() {
    four_devices("child_mismatched_collectives_fail_every_rank_naming_each_call");
}

#[test]
fn child_a_rank_that_never_comes_fails_the_others_within_the_timeout() {
    if !is_child("child_a_rank_that_never_comes_fails_the_others_within_the_timeout") {
        return;
    }
    let devices: Vec<Device> = (0..3).map(|r| Device::get(r).unwrap()).collect();
    let pg = ProcessGroup::with_timeout(&devices, Duration::from_millis(500)).unwrap();
    let start = Instant::now();
    // Ranks 0 and 1 of three call; rank 2 never does.
    let errors = on_ranks(&pg, 2, |pg, r| {
        let x = pg.device(r).unwrap().tensor(&[1.0f32; 4], &[4]).unwrap();
        pg.all_reduce(r, &x, CollectiveReduce::Sum)
            .unwrap_err()
            .to_string()
    });
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    for e in &errors {
        for words in [
            "all_reduce: timed out after 500ms waiting for 1 of 3 ranks",
            "rank 2 (last finished: no collective)",
            "rank 0: all_reduce(Sum) float32[4] (collective #1) at tests/process_group.rs:",
            "rank 1: all_reduce(Sum)",
        ] {
            assert!(e.contains(words), "expected {words:?} in {e}");
        }
    }
    // Bad calls fail at once, naming the op; the runtime goes on.
    let x = Device::get(1).unwrap().tensor(&[1.0f32; 4], &[4]).unwrap();
    let e = pg
        .all_reduce(0, &x, CollectiveReduce::Sum)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rank 0 passed a tensor on device 1; expected one on its device 0"),
        "{e}"
    );
    let e = pg.all_gather(5, &x, 0).unwrap_err().to_string();
    assert!(
        e.contains("all_gather: got rank 5; expected a rank in 0..3"),
        "{e}"
    );
    let e = ProcessGroup::new(&[devices[0], devices[0]])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("ranks 0 and 1 are both on device 0"), "{e}");
    let t = Tensor::from_slice(&[2.0f32, 3.0], &[2]).unwrap();
    assert_eq!((&t * 2.0).unwrap().to_vec::<f32>().unwrap(), vec![4.0, 6.0]);
}

#[test]
fn a_rank_that_never_comes_fails_the_others_within_the_timeout() {
    four_devices("child_a_rank_that_never_comes_fails_the_others_within_the_timeout");
}

#[test]
fn child_a_rank_that_leaves_fails_the_others_at_once() {
    if !is_child("child_a_rank_that_leaves_fails_the_others_at_once") {
        return;
    }
    let devices: Vec<Device> = (0..3).map(|r| Device::get(r).unwrap()).collect();
    // A timeout the test would notice: leaving must not wait for it.
    let pg = ProcessGroup::with_timeout(&devices, Duration::from_secs(600)).unwrap();
    let start = Instant::now();
    let errors = on_ranks(&pg, 3, |pg, r| {
        let x = pg.device(r).unwrap().tensor(&[1.0f32; 4], &[4]).unwrap();
        let first = pg.all_reduce(r, &x, CollectiveReduce::Sum).unwrap();
        assert_eq!(first.to_vec::<f32>().unwrap(), vec![3.0; 4]);
        if r == 2 {
            // Rank 2's thread is done; the others are (or soon will be)
            // waiting at their second collective.
            std::thread::sleep(Duration::from_millis(200));
            pg.leave(r).unwrap();
            return String::new();
        }
        pg.all_reduce(r, &x, CollectiveReduce::Max)
            .unwrap_err()
            .to_string()
    });
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
    for e in &errors[..2] {
        for words in [
            "all_reduce: rank 2 (last finished: all_reduce(Sum) float32[4] (collective #1)",
            "left the group",
            "waiting: rank 0: all_reduce(Max) float32[4] (collective #2)",
            "rank 1: all_reduce(Max) float32[4] (collective #2)",
        ] {
            assert!(e.contains(words), "{words:?} not in {e}");
        }
    }
    // A collective called after the rank left fails at once too.
    let x = pg.device(0).unwrap().tensor(&[1.0f32; 4], &[4]).unwrap();
    let late = pg.all_reduce(0, &x, CollectiveReduce::Sum).unwrap_err();
    assert!(late.to_string().contains("rank 2 (last finished"), "{late}");
    assert!(pg.leave(3).unwrap_err().to_string().contains("rank 3"));
}

#[test]
fn a_rank_that_leaves_fails_the_others_at_once() {
    four_devices("child_a_rank_that_leaves_fails_the_others_at_once");
}

/// Rank `r`'s results of each collective within subgroups `[[0, 2], [1, 3]]`:
/// sum, max, gathered, the first half of the sum (reduce-scattered), what
/// all-to-all delivered and the broadcast of the subgroup's second rank.
fn subgroup_step(sub: &Subgroups, pg: &ProcessGroup, r: usize) -> Vec<Vec<f32>> {
    let d = pg.device(r).unwrap();
    let x = d.tensor(&operand(r, 0), &[LEN as i64]).unwrap();
    let results = [
        sub.all_reduce(r, &x, CollectiveReduce::Sum).unwrap(),
        sub.all_reduce(r, &x, CollectiveReduce::Max).unwrap(),
        sub.all_gather(r, &x, 0).unwrap(),
        sub.reduce_scatter(r, &x, CollectiveReduce::Sum, 0).unwrap(),
        sub.all_to_all(r, &x, 0, 0).unwrap(),
        sub.broadcast(r, &x, 1).unwrap(),
    ];
    results.iter().map(|t| t.to_vec::<f32>().unwrap()).collect()
}

/// The same, on the host: rank `r`'s subgroup is `[r % 2, r % 2 + 2]`.
fn subgroup_reference(r: usize) -> Vec<Vec<f32>> {
    let members = [r % 2, r % 2 + 2];
    let position = r / 2;
    let xs: Vec<Vec<f32>> = members.iter().map(|&k| operand(k, 0)).collect();
    let sum: Vec<f32> = (0..LEN).map(|i| xs[0][i] + xs[1][i]).collect();
    let max: Vec<f32> = (0..LEN).map(|i| xs[0][i].max(xs[1][i])).collect();
    let half = LEN / 2;
    let block = sum[position * half..(position + 1) * half].to_vec();
    let received: Vec<f32> = xs
        .iter()
        .flat_map(|x| x[position * half..(position + 1) * half].to_vec())
        .collect();
    vec![sum, max, xs.concat(), block, received, xs[1].clone()]
}

#[test]
fn child_collectives_within_subgroups_exchange_only_with_the_subgroup() {
    if !is_child("child_collectives_within_subgroups_exchange_only_with_the_subgroup") {
        return;
    }
    let pg = group();
    let sub = pg.split(&[vec![0, 2], vec![1, 3]]).unwrap();
    assert_eq!(sub.size(), 2);
    for mode in [Mode::Debug, Mode::Fused] {
        eagertpu::set_mode(mode).unwrap();
        let results = on_ranks(&pg, RANKS, |pg, r| subgroup_step(&sub, pg, r));
        for (r, got) in results.iter().enumerate() {
            assert_eq!(got, &subgroup_reference(r), "{mode:?}, rank {r}");
        }
    }
    // A mismatch names the subgroups.
    let errors = on_ranks(&pg, RANKS, |pg, r| {
        let x = pg.device(r).unwrap().tensor(&[1.0f32; 4], &[4]).unwrap();
        let result = if r == 3 {
            pg.all_reduce(r, &x, CollectiveReduce::Sum)
        } else {
            sub.all_reduce(r, &x, CollectiveReduce::Sum)
        };
        result.unwrap_err().to_string()
    });
    for e in &errors {
        assert!(
            e.contains("rank 0: all_reduce(Sum) within subgroups [[0, 2], [1, 3]] float32[4]")
                && e.contains("rank 3: all_reduce(Sum) float32[4]"),
            "{e}"
        );
    }
    // Partitions that are not one.
    for (partition, words) in [
        (vec![vec![0, 1], vec![2]], "groups of one size"),
        (vec![vec![0, 1], vec![1, 3]], "each replica"),
        (vec![vec![0, 1]], "expected every rank of the group's 4"),
    ] {
        let e = pg
            .split(&partition)
            .err()
            .expect("not a partition")
            .to_string();
        assert!(
            e.contains("split") && e.contains(words),
            "{partition:?}: {e}"
        );
    }
}

#[test]
fn collectives_within_subgroups_exchange_only_with_the_subgroup() {
    four_devices("child_collectives_within_subgroups_exchange_only_with_the_subgroup");
}

/// Each rank's `k`th small operand in the queue test.
fn queued_operand(r: usize, k: usize) -> Vec<f32> {
    (0..4).map(|i| (r * 5 + k * 3 + i) as f32).collect()
}

/// Collectives queued far ahead of a slow rank. Rank 0's first input comes
/// from a long matmul chain; every rank then issues `QUEUED` all-reduces
/// without reading anything. The XLA CPU plugin runs one collective at a
/// time, each replica on its thread pool (as many threads as devices), and
/// admits a bounded number of executions per device: queued past that
/// bound, a launch blocks pool threads the running collective needs, and
/// the plugin aborts the process after 40 s. The runtime launches a
/// collective only once its inputs are computed and each device's queue is
/// short, so every rank gets the host reference's sums.
#[test]
fn child_collectives_queued_behind_a_slow_rank_all_complete() {
    if !is_child("child_collectives_queued_behind_a_slow_rank_all_complete") {
        return;
    }
    const QUEUED: usize = 400;
    // A power of two: every product and partial sum below is exact.
    const SIDE: usize = 1024;
    let pg = group();
    let results = on_ranks(&pg, RANKS, |pg, r| {
        let d = pg.device(r).unwrap();
        let mut first = d.tensor(&queued_operand(r, 0), &[4]).unwrap();
        if r == 0 {
            // Keeps device 0 busy: a matrix of 1/SIDE is its own square.
            let side = SIDE as i64;
            let entries = vec![1.0 / SIDE as f32; SIDE * SIDE];
            let mut m = d.tensor(&entries, &[side, side]).unwrap();
            for _ in 0..40 {
                m = m.matmul(&m).unwrap();
            }
            // It sums to SIDE, so `first` is multiplied by exactly 1.
            let one = m.sum_all().unwrap();
            first = (&first * &(&one / SIDE as f64).unwrap()).unwrap();
        }
        let mut sums = vec![pg.all_reduce(r, &first, CollectiveReduce::Sum).unwrap()];
        for k in 1..QUEUED {
            let x = d.tensor(&queued_operand(r, k), &[4]).unwrap();
            sums.push(pg.all_reduce(r, &x, CollectiveReduce::Sum).unwrap());
        }
        sums.iter()
            .map(|s| s.to_vec::<f32>().unwrap())
            .collect::<Vec<_>>()
    });
    for (r, got) in results.iter().enumerate() {
        for (k, sum) in got.iter().enumerate() {
            let want: Vec<f32> = (0..4)
                .map(|i| (0..RANKS).map(|q| queued_operand(q, k)[i]).sum())
                .collect();
            assert_eq!(sum, &want, "rank {r}, all-reduce {k}");
        }
    }
}

#[test]
fn collectives_queued_behind_a_slow_rank_all_complete() {
    four_devices("child_collectives_queued_behind_a_slow_rank_all_complete");
}
