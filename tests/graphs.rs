//! Compiled graphs (`Device::graph_begin`/`graph_end`, what torch.compile's
//! backend calls): the ops of one call are one chunk however many there are,
//! compiled at the first call in strict and fused mode alike and replayed at
//! the next calls, with the values eager execution gives; debug mode opens no
//! graph. Counting runs in a child process with the on-disk cache off.

mod common;

use common::*;
use eagertpu::storage::{self, StorageId};
use eagertpu::{DType, Device, Mode, Tensor, metrics, wait_for_compiles};

/// `steps` rounds of `tanh(x * 1.01 + 0.5) - 0.25`: four ops a round.
fn chain(x: &Tensor, steps: usize) -> Tensor {
    let mut y = x.clone();
    for _ in 0..steps {
        y = (&y * 1.01).unwrap();
        y = (&y + 0.5).unwrap().tanh().unwrap();
        y = (&y - 0.25).unwrap();
    }
    y
}

fn chain_reference(x: &Host, steps: usize) -> Host {
    let f = |v: f64| round(DType::F32, v);
    x.map(DType::F32, |v| {
        let mut y = v;
        for _ in 0..steps {
            y = f(f(f(y * f(1.01)) + 0.5).tanh());
            y = f(y - 0.25);
        }
        y
    })
}

fn graph_chunks() -> u64 {
    let m = metrics().unwrap();
    m.chunks
        .iter()
        .find(|(r, _)| *r == "graph")
        .map_or(0, |c| c.1)
}

/// (graph chunks, compiles, replayed chunks, graph calls) so far.
fn counts() -> [u64; 4] {
    let m = metrics().unwrap();
    [
        graph_chunks(),
        m.compiles,
        m.replayed_chunks,
        m.compiled_graph_calls,
    ]
}

fn delta(before: [u64; 4]) -> [u64; 4] {
    let now = counts();
    std::array::from_fn(|i| now[i] - before[i])
}

#[test]
fn child_graph_calls() {
    if !is_child("child_graph_calls") {
        return;
    }
    let device = Device::get(0).unwrap();
    let host = Host::random(DType::F32, &[64], 3);
    let x = host.tensor();
    // Each a program of its own (the cache serves every mode: the same ops
    // in another mode would find their program); 200 rounds: 800 ops, past
    // the window's 512-op limit.
    for (mode, id, steps) in [
        (Mode::Strict, 1, 5),
        (Mode::Fused, 2, 6),
        (Mode::Fused, 3, 200),
    ] {
        let _m = in_mode(mode);
        let want = chain_reference(&host, steps);
        for call in 0..3 {
            let before = counts();
            assert!(device.graph_begin(id).unwrap());
            let y = chain(&x, steps);
            device.graph_end().unwrap();
            let [chunks, compiles, replayed, calls] = delta(before);
            assert_eq!((chunks, calls), (1, 1), "{mode:?} graph {id}, call {call}");
            // Compiled at the first call, whatever its hotness; bound to that
            // program by replay at the next ones.
            assert_eq!(
                (compiles, replayed),
                if call == 0 { (1, 0) } else { (0, 1) },
                "{mode:?} graph {id}, call {call}: {:?}",
                metrics().unwrap().report()
            );
            assert_close_tol(&format!("{mode:?} call {call}"), &y, &want, (1e-5, 1e-6));
        }
    }
    // Eager ops pending before a graph run first, as their own chunk; the
    // eager loop after it is untouched.
    let _m = in_mode(Mode::Fused);
    let pending = (&x * 2.0).unwrap();
    let before = counts();
    assert!(device.graph_begin(4).unwrap());
    let y = chain(&pending, 3);
    device.graph_end().unwrap();
    assert_eq!(
        delta(before)[0],
        2,
        "the eager op's chunk, then the graph's"
    );
    let doubled = host.map(DType::F32, |v| v * 2.0);
    assert_close_tol(
        "after eager ops",
        &y,
        &chain_reference(&doubled, 3),
        (1e-5, 1e-6),
    );
    direct_calls(&device);
    donated_updates(&device);
    println!("GRAPHS OK");
}

/// Allocation `id`'s contents, as an optimizer state's tensor is read.
fn contents(id: StorageId) -> Tensor {
    storage::read_contents(id, DType::F32).unwrap()
}

/// Writes `value` over the whole of allocation `id` (the caller's copy of a
/// graph's updated input back into it, as aot_autograd makes).
fn write_back(id: StorageId, value: &Tensor) {
    storage::write_view(id, 0, DType::F32, &[64], &[1], value.clone()).unwrap();
}

/// A graph updating its input (an optimizer's state: the caller writes its
/// output back into the input's allocation after each call): its direct
/// calls donate the input's buffer to the output, the allocation then
/// holding the new value, unless something else holds the old one, which
/// then keeps its values.
fn donated_updates(device: &Device) {
    let host = Host::random(DType::F32, &[64], 30);
    let id = storage::register(device.index(), 64 * 4).unwrap();
    write_back(id, &host.tensor());
    let x = contents(id);
    assert!(device.graph_begin(30).unwrap());
    let y = chain(&x, 2);
    device.graph_end().unwrap();
    assert!(
        device
            .graph_capture_updating(30, &[x], std::slice::from_ref(&y), &[(0, 0)])
            .unwrap()
    );
    write_back(id, &y);
    drop(y);
    // The donating variant of the program, compiled in the background.
    wait_for_compiles().unwrap();
    let donated = || metrics().unwrap().donated_buffers;
    let mut want = chain_reference(&host, 2);
    for call in 0..4 {
        // Call 2: a tensor still holds the input's value (its buffer is not
        // donated, and the tensor keeps its values).
        let kept = (call == 2).then(|| contents(id));
        let before = donated();
        // The caller holds each input once: in this call's slice.
        let out = device
            .graph_call_on_storages(30, &[contents(id)], &[], &[id], 1)
            .unwrap()
            .expect("a direct call");
        assert_eq!(donated() - before, u64::from(kept.is_none()), "call {call}");
        if let Some(kept) = kept {
            assert_close_tol("a tensor holding the old value", &kept, &want, (1e-5, 1e-6));
        }
        want = chain_reference(&want, 2);
        assert_close_tol(&format!("call {call}"), &out[0], &want, (1e-5, 1e-6));
        // The allocation holds the new value whether donated or not once
        // the caller wrote it back; donated, it held it already.
        write_back(id, &out[0]);
        assert_close_tol(
            &format!("allocation after call {call}"),
            &contents(id),
            &want,
            (1e-5, 1e-6),
        );
    }
    storage::release(id).unwrap();
}

/// (ops recorded, graph calls, direct graph calls) so far.
fn direct_counts() -> [u64; 3] {
    let m = metrics().unwrap();
    [m.ops_recorded, m.compiled_graph_calls, m.direct_graph_calls]
}

/// A graph called once through a scope, then captured: its next calls run
/// its program on new inputs (and new keys for its random draws) with
/// nothing recorded; other input types, keys not one per draw or an output
/// that is no result of the chunk keep it on scopes.
fn direct_calls(device: &Device) {
    // (In fused mode: the caller holds it.)
    let host = Host::random(DType::F32, &[64], 7);
    let x = host.tensor();
    assert!(device.graph_begin(20).unwrap());
    let y = chain(&x, 4);
    device.graph_end().unwrap();
    assert!(
        device
            .graph_capture(20, std::slice::from_ref(&x), std::slice::from_ref(&y))
            .unwrap()
    );
    assert_close_tol("scope call", &y, &chain_reference(&host, 4), (1e-5, 1e-6));
    for seed in 8..11 {
        let other = Host::random(DType::F32, &[64], seed);
        let before = direct_counts();
        let out = device
            .graph_call(20, &[other.tensor()], &[])
            .unwrap()
            .expect("a direct call");
        let now = direct_counts();
        assert_eq!(
            [now[0] - before[0], now[1] - before[1], now[2] - before[2]],
            [0, 1, 1]
        );
        assert_eq!(out.len(), 1);
        assert_close_tol(
            &format!("direct call {seed}"),
            &out[0],
            &chain_reference(&other, 4),
            (1e-5, 1e-6),
        );
    }
    // An input still pending runs first.
    let pending = (&x * 2.0).unwrap();
    let out = device
        .graph_call(20, &[pending], &[])
        .unwrap()
        .expect("a direct call");
    let doubled = host.map(DType::F32, |v| v * 2.0);
    assert_close_tol(
        "pending input",
        &out[0],
        &chain_reference(&doubled, 4),
        (1e-5, 1e-6),
    );
    // Another input type: no direct call (the caller goes through a scope).
    let wide = Host::random(DType::F32, &[32], 9).tensor();
    assert!(device.graph_call(20, &[wide], &[]).unwrap().is_none());
    assert!(
        device
            .graph_call(21, std::slice::from_ref(&x), &[])
            .unwrap()
            .is_none(),
        "never captured"
    );

    // Index checks: the graph's program computes its own flag, read with the
    // next host read; a bad index in a direct call is an error naming the op.
    let table_host = Host::random(DType::F32, &[10, 4], 11);
    let table = table_host.tensor();
    let rows = |ids: &[i64]| device.tensor(ids, &[ids.len() as i64]).unwrap();
    let lookup = |t: &Tensor, ids: &Tensor| (&t.index_select(0, ids).unwrap() * 2.0).unwrap();
    let first = rows(&[1, 2]);
    assert!(device.graph_begin(24).unwrap());
    let looked = lookup(&table, &first);
    device.graph_end().unwrap();
    assert!(
        device
            .graph_capture(24, &[table.clone(), first], std::slice::from_ref(&looked))
            .unwrap(),
        "a graph with index checks is capturable"
    );
    let want = |ids: &[i64]| -> Vec<f32> {
        let table_host = &table_host;
        ids.iter()
            .flat_map(|&i| (0..4).map(move |j| (table_host.at(&[i, j]) * 2.0) as f32))
            .collect()
    };
    let before = direct_counts();
    let out = device
        .graph_call(24, &[table.clone(), rows(&[9, 0])], &[])
        .unwrap()
        .expect("a direct call");
    assert_eq!(direct_counts()[2] - before[2], 1);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), want(&[9, 0]));
    let bad = device
        .graph_call(24, &[table.clone(), rows(&[3, 12])], &[])
        .unwrap()
        .expect("a direct call");
    let e = bad[0].to_vec::<f32>().unwrap_err().to_string();
    assert!(
        e.contains("index_select") && e.contains("out of range") && e.contains("size 10"),
        "{e}"
    );
    // A bad index followed by many calls with no read between: its error
    // comes at a later call or at the read, never lost.
    let mut surfaced = None;
    let mut last = None;
    for k in 0..200 {
        let ids = if k == 0 {
            rows(&[0, 10])
        } else {
            rows(&[k % 10, 1])
        };
        match device.graph_call(24, &[table.clone(), ids], &[]) {
            Ok(out) => last = out,
            Err(e) => {
                surfaced = Some(e.to_string());
                break;
            }
        }
    }
    let e = surfaced.unwrap_or_else(|| last.unwrap()[0].to_vec::<f32>().unwrap_err().to_string());
    assert!(
        e.contains("index_select") && e.contains("out of range"),
        "{e}"
    );
    let out = device
        .graph_call(24, &[table.clone(), rows(&[4, 4])], &[])
        .unwrap()
        .expect("a direct call");
    assert_eq!(
        out[0].to_vec::<f32>().unwrap(),
        want(&[4, 4]),
        "after the error"
    );

    // Random draws: each direct call takes a key per draw, in the order the
    // captured call drew them, and samples what an eager draw with that key
    // samples.
    assert!(device.graph_begin(22).unwrap());
    let r = device.rand_uniform((1, 2), &[64], DType::F32).unwrap();
    let s = device.rand_uniform((3, 4), &[64], DType::F32).unwrap();
    let noisy = (&(&chain(&x, 2) + &r).unwrap() - &s).unwrap();
    device.graph_end().unwrap();
    assert!(
        device
            .graph_capture(22, std::slice::from_ref(&x), &[noisy])
            .unwrap()
    );
    assert_eq!(device.graph_draws(22).unwrap(), Some(2));
    assert_eq!(device.graph_draws(21).unwrap(), None, "never captured");
    assert_eq!(device.graph_draws(20).unwrap(), Some(0));
    let eager = |k0: (u64, u64), k1: (u64, u64)| {
        let r = device.rand_uniform(k0, &[64], DType::F32).unwrap();
        let s = device.rand_uniform(k1, &[64], DType::F32).unwrap();
        (&(&chain(&x, 2) + &r).unwrap() - &s)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    let mut seen: Vec<Vec<f32>> = vec![];
    for keys in [[(5, 6), (7, 8)], [(7, 8), (5, 6)], [(9, 10), (11, 12)]] {
        let before = direct_counts();
        let out = device
            .graph_call(22, std::slice::from_ref(&x), &keys)
            .unwrap()
            .expect("a direct call");
        assert_eq!(direct_counts()[2] - before[2], 1);
        let got = out[0].to_vec::<f32>().unwrap();
        // (The last bits may differ: the fused program contracts ops.)
        let apart = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f32::max)
        };
        assert!(
            apart(&got, &eager(keys[0], keys[1])) < 1e-5,
            "keys {keys:?}"
        );
        for other in &seen {
            assert!(
                apart(&got, other) > 0.1,
                "keys {keys:?} sampled what other keys did"
            );
        }
        seen.push(got);
    }
    // Not one key per draw: no direct call.
    for keys in [&[(5, 6)][..], &[], &[(1, 2), (3, 4), (5, 6)]] {
        assert!(
            device
                .graph_call(22, std::slice::from_ref(&x), keys)
                .unwrap()
                .is_none(),
            "{} keys",
            keys.len()
        );
    }
    // An output that is not one of the chunk's results (a view made after
    // the call) is not capturable either.
    assert!(device.graph_begin(23).unwrap());
    let z = chain(&x, 2);
    device.graph_end().unwrap();
    let other_value = (&z + 1.0).unwrap();
    assert!(
        !device
            .graph_capture(23, std::slice::from_ref(&x), &[other_value])
            .unwrap()
    );
}

#[test]
fn a_graph_call_is_one_chunk_compiled_once_and_replayed() {
    let (ok, out) = child("child_graph_calls", &[]);
    assert!(ok && out.contains("GRAPHS OK"), "{out}");
}

#[test]
fn debug_mode_opens_no_graph_and_runs_its_ops_one_by_one() {
    let _m = in_mode(Mode::Debug);
    let device = Device::get(0).unwrap();
    let host = Host::random(DType::F32, &[16], 5);
    let calls = metrics().unwrap().compiled_graph_calls;
    assert!(!device.graph_begin(9).unwrap());
    let y = chain(&host.tensor(), 4);
    device.graph_end().unwrap();
    assert_eq!(metrics().unwrap().compiled_graph_calls, calls);
    assert_close_tol("debug", &y, &chain_reference(&host, 4), (1e-5, 1e-6));
}

#[test]
fn a_graph_open_twice_on_one_thread_is_an_error_and_the_thread_goes_on() {
    let _m = in_mode(Mode::Strict);
    let device = Device::get(0).unwrap();
    assert!(device.graph_begin(11).unwrap());
    let e = err_text(device.graph_begin(12));
    assert!(e.contains("graph 12") && e.contains("graph 11"), "{e}");
    device.graph_end().unwrap();
    let host = Host::random(DType::F32, &[8], 6);
    assert_close_tol(
        "after",
        &chain(&host.tensor(), 2),
        &chain_reference(&host, 2),
        (1e-5, 1e-6),
    );
}
