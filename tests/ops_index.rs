//! Indexing ops (index_select, gather, scatter, dynamic slices) against host
//! references computed with plain loops.

mod common;

use common::builders::*;
use common::*;
use eagertpu::{DType, Tensor};

all_modes! {
fn index_select_any_dim_with_repeats() {
    let cases: [(i64, &[i64]); 5] = [
        (0, &[3, 0, 3, 1]),
        (1, &[4, 4, 0]),
        (-1, &[2, 0, 1, 1, 2]),
        (1, &[2]),
        (0, &[]),
    ];
    for dtype in ALL {
        let x = distinct(dtype, &[4, 5, 3]);
        for idt in [DType::I32, DType::I64, DType::I16, DType::U8] {
            for (dim, idx) in cases {
                let d = norm(dim, 3);
                let shape = with_dim(&x.shape, d, idx.len() as i64);
                let want = build(dtype, &shape, |o| at_with(&x, o, d, idx[o[d] as usize]));
                let got = x.tensor().index_select(dim, &ix(idt, &[shape[d]], idx));
                check(&format!("index_select({dim}, {idx:?} {idt})"), got, &want);
            }
        }
    }
    // A 0-d index keeps the dim, with size 1.
    let x = distinct(DType::F32, &[3, 2]);
    let got = x.tensor().index_select(0, &ix(DType::I64, &[], &[2]));
    let want = build(DType::F32, &[1, 2], |o| x.at(&[2, o[1]]));
    check("index_select 0-d index", got, &want);
}
}

all_modes! {
fn gather_picks_along_a_dim() {
    let cases: [(&[i64], i64, &[i64]); 5] = [
        (&[3, 4], 0, &[2, 4]),
        (&[3, 4], 1, &[3, 6]),
        (&[3, 4], -1, &[2, 2]),
        (&[2, 3, 4], 1, &[2, 5, 3]),
        (&[5], 0, &[7]),
    ];
    for dtype in ALL {
        for (k, (xs, dim, is)) in cases.into_iter().enumerate() {
            let x = distinct(dtype, xs);
            let d = norm(dim, xs.len());
            let idt = [DType::I64, DType::I32][k % 2];
            let hi = (xs[d] - 1) as f64;
            let index = Host::random_in(idt, is, k as u64, 0.0, hi);
            let want = build(dtype, is, |o| at_with(&x, o, d, index.at(o) as i64));
            let got = x.tensor().gather(dim, &index.tensor());
            check(&format!("gather({dim}) {xs:?} by {idt}{is:?}"), got, &want);
        }
    }
    // By hand: torch.gather([[1, 2], [3, 4]], 1, [[0, 0], [1, 0]]).
    let x = Host::new(DType::I32, &[2, 2], vec![1.0, 2.0, 3.0, 4.0]).tensor();
    let got = x.gather(1, &ix(DType::I64, &[2, 2], &[0, 0, 1, 0]));
    let want = Host::new(DType::I32, &[2, 2], vec![1.0, 1.0, 4.0, 3.0]);
    check("gather by hand", got, &want);
}
}

/// `torch.scatter` / `scatter_add` on the host.
fn scatter_ref(x: &Host, dim: usize, index: &[i64], is: &[i64], src: &Host, add: bool) -> Host {
    let mut out = x.data.clone();
    for (k, &at) in index.iter().enumerate() {
        let o = unravel(k, is);
        let mut p = o.clone();
        p[dim] = at;
        let at = ravel(&p, &x.shape);
        out[at] = src.at(&o) + if add { out[at] } else { 0.0 };
    }
    Host::new(x.dtype, &x.shape, out)
}

all_modes! {
fn scatter_and_scatter_add() {
    // Unique positions per row (dim 1) and per column (dim 0).
    let (i1, i0) = ([4, 0, 1, 3, 2, 3], [2, 0, 1, 1, 0, 0, 2, 0, 2, 1]);
    // Repeated positions.
    let dup = [1, 1, 1, 4, 0, 0, 2, 0, 3, 3, 3, 3];
    let dup3 = [0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0];
    for dtype in ALL {
        let x = distinct(dtype, &[3, 5]);
        // src may be larger than index: only its leading block is read.
        let src = Host::random(dtype, &[3, 4], 21);
        let index = ix(DType::I64, &[3, 2], &i1);
        let got = x.tensor().scatter(1, &index, &src.tensor());
        let want = scatter_ref(&x, 1, &i1, &[3, 2], &src, false);
        check("scatter dim 1", got, &want);
        let src = Host::random(dtype, &[2, 5], 22);
        let index = ix(DType::I32, &[2, 5], &i0);
        let got = x.tensor().scatter(-2, &index, &src.tensor());
        let want = scatter_ref(&x, 0, &i0, &[2, 5], &src, false);
        check("scatter dim 0", got, &want);
        // Duplicates accumulate (for bool, add is or).
        let src = Host::random(dtype, &[3, 4], 23);
        let index = ix(DType::I32, &[3, 4], &dup);
        let got = x.tensor().scatter_add(1, &index, &src.tensor());
        let want = scatter_ref(&x, 1, &dup, &[3, 4], &src, true);
        check("scatter_add dim 1", got, &want);
        let y = distinct(dtype, &[2, 3, 4]);
        let src = Host::random(dtype, &[2, 3, 3], 24);
        let index = ix(DType::I64, &[2, 2, 3], &dup3);
        let got = y.tensor().scatter_add(0, &index, &src.tensor());
        let want = scatter_ref(&y, 0, &dup3, &[2, 2, 3], &src, true);
        check("scatter_add rank 3", got, &want);
    }
    // By hand: zeros(4).scatter_add(0, [0, 2, 0, 3], [1, 2, 3, 4]).
    let i = ix(DType::I64, &[4], &[0, 2, 0, 3]);
    let src = vec1(DType::F32, &[1.0, 2.0, 3.0, 4.0]).tensor();
    let zeros = Tensor::zeros(&[4], DType::F32).unwrap();
    let want = vec1(DType::F32, &[4.0, 0.0, 2.0, 4.0]);
    check("scatter_add by hand", zeros.scatter_add(0, &i, &src), &want);
    let half = Tensor::zeros(&[4], DType::F16).unwrap();
    let bad = half.scatter(0, &i, &src);
    check_err(bad, &["scatter", "float16", "float32"]);
}
}

all_modes! {
fn dynamic_slice_and_update_clamp_starts_to_fit() {
    let idts = [DType::I32, DType::I64, DType::I8, DType::I16, DType::U8];
    // (shape, starts, block sizes)
    let cases: [(&[i64], &[i64], &[i64]); 6] = [
        (&[5, 6], &[1, 2], &[2, 3]),
        (&[5, 6], &[4, 5], &[3, 2]),
        (&[5, 6], &[-3, 0], &[5, 1]),
        (&[5, 6], &[100, 0], &[0, 6]),
        (&[2, 3, 4], &[1, 1, 3], &[1, 2, 2]),
        (&[7], &[6], &[3]),
    ];
    for dtype in ALL {
        for (k, (shape, starts, sizes)) in cases.into_iter().enumerate() {
            let x = distinct(dtype, shape);
            let r = shape.len();
            // XLA clamps each start into [0, size - block].
            let fit: Vec<i64> = (0..r)
                .map(|d| starts[d].clamp(0, shape[d] - sizes[d]))
                .collect();
            let st: Vec<Tensor> = (0..r)
                .map(|d| match idts[(k + d) % idts.len()] {
                    DType::U8 if starts[d] < 0 => ix(DType::I8, &[], &starts[d..=d]),
                    idt => ix(idt, &[], &starts[d..=d]),
                })
                .collect();
            let st: Vec<&Tensor> = st.iter().collect();
            let want = build(dtype, sizes, |o| {
                x.at(&(0..r).map(|d| o[d] + fit[d]).collect::<Vec<_>>())
            });
            let what = format!("dynamic_slice {shape:?} at {starts:?}");
            check(&what, x.tensor().dynamic_slice(&st, sizes), &want);
            let upd = Host::random(dtype, sizes, 30 + k as u64);
            let want = build(dtype, shape, |o| {
                let i: Vec<i64> = (0..r).map(|d| o[d] - fit[d]).collect();
                let inside = (0..r).all(|d| i[d] >= 0 && i[d] < sizes[d]);
                if inside { upd.at(&i) } else { x.at(o) }
            });
            let got = x.tensor().dynamic_update_slice(&upd.tensor(), &st);
            let what = format!("dynamic_update_slice {shape:?} at {starts:?}");
            check(&what, got, &want);
        }
    }
    let x = distinct(DType::F32, &[4, 4]).tensor();
    let (z, f) = (ix(DType::I64, &[], &[0]), Tensor::scalar(1.0f32).unwrap());
    let bad = x.dynamic_slice(&[&z], &[2, 2]);
    check_err(bad, &["dynamic_slice", "2 inputs", "expected 3"]);
    let bad = x.dynamic_slice(&[&f, &f], &[2, 2]);
    check_err(bad, &["dynamic_slice", "0-d integer"]);
    let bad = x.dynamic_slice(&[&z, &z], &[5, 2]);
    check_err(bad, &["dynamic_slice", "at most"]);
    let big = Tensor::zeros(&[5, 1], DType::F32).unwrap();
    let bad = x.dynamic_update_slice(&big, &[&z, &z]);
    check_err(bad, &["dynamic_update_slice", "no larger"]);
}
}

all_modes! {
fn selecting_nothing_from_an_empty_tensor_gives_an_empty_result() {
    // A gather from an operand with no elements does not verify in
    // StableHLO; a result with no elements compiles to a constant instead.
    let empty = Host::new(DType::F32, &[0, 3], vec![]).tensor();
    let none = Host::new(DType::I64, &[0], vec![]).tensor();
    let got = empty.index_select(0, &none).unwrap();
    assert_eq!(Host::of(&got), Host::new(DType::F32, &[0, 3], vec![]));
    let got = empty.reshape(&[0]).unwrap().index_select(0, &none).unwrap().sum(&[], false).unwrap();
    assert_eq!(Host::of(&got), Host::new(DType::F32, &[], vec![0.0]));
}
}
