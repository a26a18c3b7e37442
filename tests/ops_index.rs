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

/// An index tensor on the host: its shape and values.
type Ix<'a> = Option<(&'a [i64], &'a [i64])>;

/// PyTorch's advanced indexing on the host: for each position of the result
/// (its shape first), the position of `shape` it reads.
fn advanced_ref(shape: &[i64], indices: &[Ix]) -> (Vec<i64>, Vec<Vec<i64>>) {
    let dims: Vec<usize> = (0..indices.len())
        .filter(|&d| indices[d].is_some())
        .collect();
    let shapes = dims.iter().map(|&d| indices[d].unwrap().0);
    let batch = shapes.fold(None, |b: Option<Vec<i64>>, s| {
        Some(b.map_or(s.to_vec(), |b| broadcast(&b, s)))
    });
    let batch = batch.expect("an index tensor");
    let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
    let rest: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    let first = if adjacent { dims[0] } else { 0 };
    // The result's dims: the non-indexed dims, with the batch dims at `first`.
    let mut out_shape: Vec<i64> = rest.iter().map(|&d| shape[d]).collect();
    out_shape.splice(first..first, batch.iter().copied());
    let sources = (0..numel(&out_shape))
        .map(|k| {
            let o = unravel(k, &out_shape);
            let b = &o[first..first + batch.len()];
            let mut others = o[..first].iter().chain(&o[first + batch.len()..]);
            (0..shape.len())
                .map(|d| match indices.get(d).copied().flatten() {
                    Some((is, v)) => {
                        let i = v[broadcast_source(b, is)];
                        if i < 0 { i + shape[d] } else { i }
                    }
                    None => *others.next().unwrap(),
                })
                .collect()
        })
        .collect();
    (out_shape, sources)
}

/// The device index tensors of `indices`, alternately int64 and int32.
fn ix_tensors(indices: &[Ix]) -> Vec<Option<Tensor>> {
    let idts = [DType::I64, DType::I32];
    let tensors = indices.iter().enumerate();
    tensors
        .map(|(k, i)| i.map(|(s, v)| ix(idts[k % 2], s, v)))
        .collect()
}

fn refs(ts: &[Option<Tensor>]) -> Vec<Option<&Tensor>> {
    ts.iter().map(Option::as_ref).collect()
}

/// Indexing cases on a [4, 5, 6] tensor.
const CASES: [&[Ix]; 9] = [
    // One index tensor, with a negative index and a repeat.
    &[Some((&[3], &[3, 0, -1]))],
    // In the middle, 2-d.
    &[None, Some((&[2, 2], &[4, 0, -5, 2]))],
    // Two adjacent.
    &[Some((&[3], &[0, 2, 3])), Some((&[3], &[1, -1, 4]))],
    // Two adjacent, broadcast together, after a full slice.
    &[None, Some((&[1], &[2])), Some((&[2, 1], &[0, 5]))],
    // Not adjacent, broadcast: the batch dims go first.
    &[Some((&[2, 1], &[1, -4])), None, Some((&[3], &[0, 5, -6]))],
    // A 0-d index and a 1-d one, not adjacent.
    &[Some((&[], &[2])), None, Some((&[2], &[1, 3]))],
    // Every dim.
    &[
        Some((&[2], &[0, 3])),
        Some((&[2], &[4, -1])),
        Some((&[2], &[5, 0])),
    ],
    // Repeated positions across two index tensors.
    &[Some((&[4], &[1, 1, 2, 1])), Some((&[4], &[3, -2, 0, 3]))],
    // No indices at all.
    &[None, Some((&[0], &[]))],
];

all_modes! {
fn index_with_one_or_several_tensors_adjacent_or_not() {
    for dtype in ALL {
        let x = distinct(dtype, &[4, 5, 6]);
        for case in CASES {
            let (shape, sources) = advanced_ref(&x.shape, case);
            let want = Host::new(dtype, &shape, sources.iter().map(|s| x.at(s)).collect());
            let ts = ix_tensors(case);
            let got = x.tensor().index(&refs(&ts));
            check(&format!("index {case:?}"), got, &want);
        }
    }
    // A rank-1 tensor by a 2-d index.
    let x = vec1(DType::F32, &[10.0, 11.0, 12.0]);
    let got = x.tensor().index(&[Some(&ix(DType::I64, &[2, 2], &[2, -3, 1, 1]))]);
    let want = Host::new(DType::F32, &[2, 2], vec![12.0, 10.0, 11.0, 11.0]);
    check("index by hand", got, &want);
}
}

all_modes! {
fn index_put_writes_or_accumulates() {
    for dtype in ALL {
        let x = distinct(dtype, &[4, 5, 6]);
        for (k, case) in CASES.into_iter().enumerate() {
            let (shape, sources) = advanced_ref(&x.shape, case);
            let positions: Vec<usize> = sources.iter().map(|s| ravel(s, &x.shape)).collect();
            let mut unique = positions.clone();
            unique.sort();
            unique.dedup();
            let ts = ix_tensors(case);
            let v = Host::random(dtype, &shape, 40 + k as u64);
            // Values of the indexed shape, and one broadcast from its last dim.
            let last = shape.last().map_or(vec![], |&n| vec![n]);
            let row = Host::random(dtype, &last, 60 + k as u64);
            for (values, accumulate) in [(&v, true), (&row, true), (&v, false), (&row, false)] {
                if !accumulate && unique.len() != positions.len() {
                    continue; // which repeated write wins is unspecified
                }
                let mut want = x.data.clone();
                for (j, &at) in positions.iter().enumerate() {
                    let o = unravel(j, &shape);
                    let val = values.data[broadcast_source(&o, &values.shape)];
                    want[at] = val + if accumulate { want[at] } else { 0.0 };
                }
                let want = Host::new(dtype, &x.shape, want);
                let got = x.tensor().index_put(&refs(&ts), &values.tensor(), accumulate);
                let what = format!("index_put {case:?} values {:?} acc {accumulate}", values.shape);
                check(&what, got, &want);
            }
        }
    }
    // By hand, with accumulate: x[[0, 0, 2], [1, 1, 0]] += [1, 2, 3] on zeros(3, 2).
    let zeros = Tensor::zeros(&[3, 2], DType::F32).unwrap();
    let (i, j) = (ix(DType::I64, &[3], &[0, 0, 2]), ix(DType::I64, &[3], &[1, 1, 0]));
    let v = vec1(DType::F32, &[1.0, 2.0, 3.0]).tensor();
    let got = zeros.index_put(&[Some(&i), Some(&j)], &v, true);
    let want = Host::new(DType::F32, &[3, 2], vec![0.0, 3.0, 0.0, 0.0, 3.0, 0.0]);
    check("index_put accumulate by hand", got, &want);
    // Values are cast to the tensor's dtype.
    let v = vec1(DType::F64, &[1.5, 2.5]).tensor();
    let got = zeros.index_put(&[None, Some(&ix(DType::I32, &[2], &[1, 0]))], &v, false);
    let want = Host::new(DType::F32, &[3, 2], vec![2.5, 1.5, 2.5, 1.5, 2.5, 1.5]);
    check("index_put casts values", got, &want);
}
}

all_modes! {
fn index_add_with_alpha() {
    // (shape, dim, index with repeats and negative-free positions)
    let cases: [(&[i64], i64, &[i64]); 4] = [
        (&[4, 5], 0, &[3, 0, 3]),
        (&[4, 5], 1, &[4, 1, 1, 0, 2, 4]),
        (&[2, 3, 4], -1, &[2]),
        (&[3], 0, &[0, 2, 0, 0]),
    ];
    for dtype in ALL {
        for (k, (shape, dim, idx)) in cases.into_iter().enumerate() {
            let x = distinct(dtype, shape);
            let d = norm(dim, shape.len());
            let sshape = with_dim(shape, d, idx.len() as i64);
            let src = Host::random(dtype, &sshape, 70 + k as u64);
            let alphas: &[eagertpu::Scalar] = match dtype {
                DType::Bool => &[eagertpu::Scalar::Int(1)],
                d if d.is_float() => &[eagertpu::Scalar::Int(1), eagertpu::Scalar::Float(-0.5)],
                _ => &[eagertpu::Scalar::Int(1), eagertpu::Scalar::Int(3)],
            };
            for &alpha in alphas {
                let a = match alpha {
                    eagertpu::Scalar::Int(a) => a as f64,
                    eagertpu::Scalar::Float(a) => a,
                    eagertpu::Scalar::Bool(a) => a as u8 as f64,
                };
                let mut want = x.data.clone();
                for j in 0..src.numel() {
                    let o = unravel(j, &sshape);
                    let mut p = o.clone();
                    p[d] = idx[o[d] as usize];
                    let at = ravel(&p, shape);
                    want[at] += round(dtype, a * src.data[j]);
                }
                let want = Host::new(dtype, shape, want);
                let i = ix([DType::I64, DType::I32][k % 2], &[idx.len() as i64], idx);
                let got = x.tensor().index_add(dim, &i, &src.tensor(), alpha);
                check(&format!("index_add {shape:?} dim {dim} alpha {alpha:?}"), got, &want);
            }
        }
    }
    // A source of another dtype is cast.
    let x = Tensor::zeros(&[3], DType::F32).unwrap();
    let src = vec1(DType::I64, &[4.0, 5.0]).tensor();
    let got = x.index_add(0, &ix(DType::I64, &[2], &[2, 2]), &src, 2.0);
    check("index_add casts source", got, &vec1(DType::F32, &[0.0, 0.0, 18.0]));
}
}

all_modes! {
fn index_fill_along_a_dim() {
    let cases: [(&[i64], i64, &[i64]); 4] = [
        (&[4, 5], 0, &[3, -4]),
        (&[4, 5], -1, &[4, 1, -1]),
        (&[2, 3, 4], 1, &[1]),
        (&[3], 0, &[]),
    ];
    for dtype in ALL {
        let v = fill(dtype);
        for (k, (shape, dim, idx)) in cases.into_iter().enumerate() {
            let x = distinct(dtype, shape);
            let d = norm(dim, shape.len());
            let hit: Vec<i64> = idx.iter().map(|&i| if i < 0 { i + shape[d] } else { i }).collect();
            let want = build(dtype, shape, |o| if hit.contains(&o[d]) { v } else { x.at(o) });
            let i = ix([DType::I64, DType::I32][k % 2], &[idx.len() as i64], idx);
            let got = x.tensor().index_fill(dim, &i, v);
            check(&format!("index_fill {shape:?} dim {dim} at {idx:?}"), got, &want);
        }
    }
    // A 0-d index; a 0-d tensor.
    let x = distinct(DType::I32, &[2, 3]);
    let got = x.tensor().index_fill(1, &ix(DType::I64, &[], &[-2]), 9);
    let want = build(DType::I32, &[2, 3], |o| if o[1] == 1 { 9.0 } else { x.at(o) });
    check("index_fill 0-d index", got, &want);
    let s = Tensor::scalar(4.0f32).unwrap();
    let got = s.index_fill(0, &ix(DType::I64, &[1], &[0]), 2.5);
    check("index_fill 0-d tensor", got, &Host::new(DType::F32, &[], vec![2.5]));
}
}

all_modes! {
fn take_and_put_use_flat_positions() {
    let idx = [7, -1, 0, 7, -12, 3];
    for dtype in ALL {
        let x = distinct(dtype, &[3, 4]);
        let wrap = |i: i64| (if i < 0 { i + 12 } else { i }) as usize;
        let want = Host::new(dtype, &[2, 3], idx.iter().map(|&i| x.data[wrap(i)]).collect());
        let got = x.tensor().take(&ix(DType::I64, &[2, 3], &idx));
        check("take", got, &want);
        let src = Host::random(dtype, &[6], 90);
        let mut want = x.data.clone();
        for (k, &i) in idx.iter().enumerate() {
            want[wrap(i)] += src.data[k];
        }
        let got = x.tensor().put(&ix(DType::I32, &[2, 3], &idx), &src.tensor(), true);
        check("put accumulate", got, &Host::new(dtype, &[3, 4], want));
        let unique = [5, -1, 0];
        let mut want = x.data.clone();
        for (k, &i) in unique.iter().enumerate() {
            want[wrap(i)] = src.data[k];
        }
        let src3 = Host::new(dtype, &[3], src.data[..3].to_vec());
        let got = x.tensor().put(&ix(DType::I64, &[3], &unique), &src3.tensor(), false);
        check("put", got, &Host::new(dtype, &[3, 4], want));
    }
}
}

all_modes! {
fn indexing_errors_name_the_op_and_shapes() {
    let x = distinct(DType::F32, &[3, 4]).tensor();
    let i = ix(DType::I64, &[2], &[0, 1]);
    let bad = x.index(&[Some(&i), None, Some(&i)]);
    check_err(bad, &["index", "too many indices (3)", "[3, 4]"]);
    let f = Tensor::zeros(&[2], DType::F32).unwrap();
    check_err(x.index(&[Some(&f)]), &["index", "float32[2]", "integer"]);
    let mask = Tensor::zeros(&[3], DType::Bool).unwrap();
    check_err(x.index(&[Some(&mask)]), &["index", "bool[3]", "mask"]);
    check_err(x.index(&[None, None]), &["index", "at least one index tensor"]);
    let j = ix(DType::I64, &[3], &[0, 1, 2]);
    check_err(x.index(&[Some(&i), Some(&j)]), &["index", "[2]", "[3]", "broadcast"]);
    let v = Tensor::zeros(&[3], DType::F32).unwrap();
    let bad = x.index_put(&[Some(&i)], &v, false);
    check_err(bad, &["index_put", "values of shape [3]", "[2, 4]"]);
    let src = Tensor::zeros(&[2, 3], DType::F32).unwrap();
    let bad = x.index_add(0, &i, &src, 1);
    check_err(bad, &["index_add", "[2, 3]", "[3, 4]", "[2, 4]"]);
    let ints = Tensor::zeros(&[3, 4], DType::I32).unwrap();
    let bad = ints.index_add(0, &i, &Tensor::zeros(&[2, 4], DType::I32).unwrap(), 0.5);
    check_err(bad, &["index_add", "int32", "alpha"]);
    let bad = x.index_fill(0, &ix(DType::I64, &[1, 2], &[0, 1]), 1.0);
    check_err(bad, &["index_fill", "0-d or 1-d", "[1, 2]"]);
    let empty = Tensor::zeros(&[0], DType::F32).unwrap();
    check_err(empty.take(&i), &["take", "empty", "[0]"]);
    let bad = x.put(&i, &v, false);
    check_err(bad, &["put", "[3]", "[2]"]);
    // Several index tensors: one out of range in its own dim is refused
    // (at the op in debug mode, at the next read otherwise).
    let (r, c) = (ix(DType::I64, &[1], &[0]), ix(DType::I64, &[1], &[4]));
    let bad = x.index(&[Some(&r), Some(&c)]).and_then(|t| t.to_f64_vec());
    check_err(bad, &["out of range"]);
    eagertpu::sync().unwrap();
    // The next op works.
    let got = x.index(&[Some(&r), Some(&ix(DType::I64, &[1], &[3]))]);
    check("index after an error", got, &Host::new(DType::F32, &[1], vec![distinct(DType::F32, &[3, 4]).at(&[0, 3])]));
}
}

all_modes! {
fn scatter_reduce_matches_the_host() {
    use eagertpu::ScatterReduction;
    // Along dim 0 of a [4] vector: places 0 and 3 get two elements each,
    // place 2 one, place 1 none.
    let x = vec1(DType::F32, &[1.0, -2.0, 3.0, 0.5]);
    let src = vec1(DType::F32, &[4.0, -1.0, 2.0, 6.0, -3.0]);
    let i = ix(DType::I64, &[5], &[0, 0, 2, 3, 3]);
    let cases: [(ScatterReduction, bool, [f64; 4]); 10] = [
        (ScatterReduction::Sum, true, [4.0, -2.0, 5.0, 3.5]),
        (ScatterReduction::Sum, false, [3.0, -2.0, 2.0, 3.0]),
        (ScatterReduction::Prod, true, [-4.0, -2.0, 6.0, -9.0]),
        (ScatterReduction::Prod, false, [-4.0, -2.0, 2.0, -18.0]),
        (ScatterReduction::Mean, true, [4.0 / 3.0, -2.0, 2.5, 3.5 / 3.0]),
        (ScatterReduction::Mean, false, [1.5, -2.0, 2.0, 1.5]),
        (ScatterReduction::Amax, true, [4.0, -2.0, 3.0, 6.0]),
        (ScatterReduction::Amax, false, [4.0, -2.0, 2.0, 6.0]),
        (ScatterReduction::Amin, true, [-1.0, -2.0, 2.0, -3.0]),
        (ScatterReduction::Amin, false, [-1.0, -2.0, 2.0, -3.0]),
    ];
    for (reduce, include_self, want) in cases {
        let got = x.tensor().scatter_reduce(0, &i, &src.tensor(), reduce, include_self);
        check(&format!("{reduce:?} include_self={include_self}"), got, &vec1(DType::F32, &want));
    }
    // Integers: the mean rounds down.
    let xi = vec1(DType::I64, &[1.0, 5.0]);
    let si = vec1(DType::I64, &[-2.0, 2.0, 7.0]);
    let got = xi.tensor().scatter_reduce(0, &ix(DType::I64, &[3], &[0, 0, 1]), &si.tensor(), ScatterReduction::Mean, true);
    check("int mean", got, &vec1(DType::I64, &[0.0, 6.0]));
    let got = xi.tensor().scatter_reduce(0, &ix(DType::I64, &[3], &[1, 1, 1]), &si.tensor(), ScatterReduction::Mean, false);
    check("int mean without self", got, &vec1(DType::I64, &[1.0, 2.0]));
}
}
