//! The orthogonal polynomials of `torch.special` at an elementwise degree,
//! as PyTorch's kernels compute them: 0 for a negative degree, the values
//! at the ends of the interval, a closed trigonometric form inside it for
//! high degrees (Chebyshev kinds), and else the three-term recurrence from
//! degrees 0 and 1. The recurrence runs as one `stablehlo.while` up to the
//! largest degree of the tensor; each element stops at its own. Computed in
//! f32 for 16-bit floats.

use super::{Cmp, Emitter, V};
use crate::dtype::DType;
use crate::op::Polynomial;
use crate::scalar::Scalar;

/// How a Chebyshev kind behaves: its closed forms and their threshold.
struct Chebyshev {
    shifted: bool,
    /// The closed form is used above this degree, inside the interval.
    trig_above: i64,
    kind: char,
}

fn chebyshev(kind: Polynomial) -> Option<Chebyshev> {
    use Polynomial::*;
    let (shifted, trig_above, kind) = match kind {
        ChebyshevT => (false, 6, 't'),
        ChebyshevU => (false, 8, 'u'),
        ChebyshevV => (false, 8, 'v'),
        ChebyshevW => (false, 8, 'w'),
        ShiftedChebyshevT => (true, 6, 't'),
        ShiftedChebyshevU => (true, 6, 'u'),
        ShiftedChebyshevV => (true, 6, 'v'),
        ShiftedChebyshevW => (true, 4, 'w'),
        _ => return None,
    };
    Some(Chebyshev {
        shifted,
        trig_above,
        kind,
    })
}

pub(super) fn polynomial(e: &mut Emitter, kind: Polynomial, x: &V, n: &V) -> V {
    let d = x.ty.dtype;
    if x.ty.numel() == 0 {
        return x.clone();
    }
    let wide = matches!(d, DType::F16 | DType::BF16);
    let (x, n) = if wide {
        (e.convert(x, DType::F32), e.convert(n, DType::F32))
    } else {
        (x.clone(), n.clone())
    };
    let r = evaluate(e, kind, &x, &n);
    if wide { e.convert(&r, d) } else { r }
}

fn evaluate(e: &mut Emitter, kind: Polynomial, x: &V, n_float: &V) -> V {
    use Polynomial::*;
    // The degree, truncated toward zero (PyTorch's cast to int64), as x's
    // float type for the arithmetic.
    let n_int = e.convert(n_float, DType::I64);
    let n = e.convert(&n_int, x.ty.dtype);
    let one = e.splat(1.0, x);
    let two = e.splat(2.0, x);
    let zero = e.splat(0.0, x);
    let cheb = chebyshev(kind);
    // y: the Chebyshev variable (2x - 1 when shifted).
    let y = match &cheb {
        Some(c) if c.shifted => {
            let twice = e.add(x, x);
            e.sub(&twice, &one)
        }
        _ => x.clone(),
    };
    let y2 = e.add(&y, &y);
    let first = match kind {
        ChebyshevT | ShiftedChebyshevT | HermiteHe | Legendre => y.clone(),
        ChebyshevU | ShiftedChebyshevU => y2.clone(),
        ChebyshevV | ShiftedChebyshevV => e.sub(&y2, &one),
        ChebyshevW | ShiftedChebyshevW => e.add(&y2, &one),
        HermiteH => e.add(x, x),
        Laguerre => e.sub(&one, x),
    };
    let recurred = recurrence(e, kind, x, &y2, &n_int, &first);
    let mut result = {
        let is_zero = e.compare(Cmp::Eq, &n, &zero);
        let is_one = e.compare(Cmp::Eq, &n, &one);
        let low = e.select(&is_one, &first, &recurred);
        e.select(&is_zero, &one, &low)
    };
    // Even degree: n - 2 trunc(n / 2) == 0.
    let half = e.div(&n, &two);
    let half_int = e.unary("stablehlo.floor", &half);
    let twice_half = e.mul(&half_int, &two);
    let even = e.compare(Cmp::Eq, &twice_half, &n);
    let n1 = e.add(&n, &one);
    let n2 = e.add(&n, &n);
    let n21 = e.add(&n2, &one);
    let minus = |e: &mut Emitter, v: &V| e.unary("stablehlo.negate", v);
    let signed = |e: &mut Emitter, v: &V| {
        let negative = minus(e, v);
        e.select(&even, v, &negative)
    };
    if let Some(c) = &cheb {
        // The closed forms inside (-1, 1), theta = acos(y).
        let abs_y = e.unary("stablehlo.abs", &y);
        let inside = e.compare(Cmp::Lt, &abs_y, &one);
        let threshold = e.splat(c.trig_above as f64, x);
        let high = e.compare(Cmp::Gt, &n, &threshold);
        let trig = e.binary("stablehlo.and", &inside, &high);
        let theta = e.unary("chlo.acos", &y);
        let half_theta = e.binary_const("stablehlo.divide", &theta, 2.0);
        let n_half = e.binary_const("stablehlo.add", &n, 0.5);
        let closed = match c.kind {
            't' => {
                let a = e.mul(&n, &theta);
                e.unary("stablehlo.cosine", &a)
            }
            'u' => {
                let a = e.mul(&n1, &theta);
                let s = e.unary("stablehlo.sine", &theta);
                let num = e.unary("stablehlo.sine", &a);
                let ratio = e.div(&num, &s);
                let cos_a = e.unary("stablehlo.cosine", &a);
                let scaled = e.mul(&n1, &cos_a);
                let limit = e.div(&scaled, &y);
                let s_zero = e.compare(Cmp::Eq, &s, &zero);
                e.select(&s_zero, &limit, &ratio)
            }
            'v' => {
                let a = e.mul(&n_half, &theta);
                let num = e.unary("stablehlo.cosine", &a);
                let den = e.unary("stablehlo.cosine", &half_theta);
                let ratio = e.div(&num, &den);
                let s = e.unary("stablehlo.sine", &half_theta);
                let s_one = e.compare(Cmp::Eq, &s, &one);
                let limit = signed(e, &n21);
                e.select(&s_one, &limit, &ratio)
            }
            _ => {
                let a = e.mul(&n_half, &theta);
                let num = e.unary("stablehlo.sine", &a);
                let den = e.unary("stablehlo.sine", &half_theta);
                let ratio = e.div(&num, &den);
                let cos_half = e.unary("stablehlo.cosine", &half_theta);
                let c_one = e.compare(Cmp::Eq, &cos_half, &one);
                let alternating = signed(e, &one);
                let limit = if c.shifted {
                    alternating
                } else {
                    let positive = e.compare(Cmp::Gt, x, &zero);
                    e.select(&positive, &n21, &alternating)
                };
                e.select(&c_one, &limit, &ratio)
            }
        };
        result = e.select(&trig, &closed, &result);
        // The ends: y = 1 and y = -1 (x = 1 and x = 0 when shifted).
        let (plus_end, minus_end) = if c.shifted {
            (e.compare(Cmp::Eq, x, &one), e.compare(Cmp::Eq, x, &zero))
        } else {
            let minus_one = e.splat(-1.0, x);
            (
                e.compare(Cmp::Eq, x, &one),
                e.compare(Cmp::Eq, x, &minus_one),
            )
        };
        let (at_plus, at_minus) = match c.kind {
            't' => (one.clone(), signed(e, &one)),
            'u' => (n1.clone(), signed(e, &n1)),
            'v' => (one.clone(), signed(e, &n21)),
            _ => (n21.clone(), signed(e, &one)),
        };
        result = e.select(&minus_end, &at_minus, &result);
        result = e.select(&plus_end, &at_plus, &result);
    }
    match kind {
        Laguerre => {
            let at_zero = e.compare(Cmp::Eq, x, &zero);
            result = e.select(&at_zero, &one, &result);
        }
        Legendre => {
            let abs_x = e.unary("stablehlo.abs", x);
            let at_end = e.compare(Cmp::Eq, &abs_x, &one);
            let positive = e.compare(Cmp::Gt, x, &zero);
            let alternating = signed(e, &one);
            let end = e.select(&positive, &one, &alternating);
            result = e.select(&at_end, &end, &result);
        }
        _ => {}
    }
    let negative = e.compare(Cmp::Lt, &n, &zero);
    e.select(&negative, &zero, &result)
}

/// The recurrence from (p, q) = (1, degree 1's value): after step j, q is
/// the value of degree j + 1. Steps j = 1, 2, ... up to the largest degree,
/// each element taking only the steps below its own degree.
fn recurrence(e: &mut Emitter, kind: Polynomial, x: &V, y2: &V, n_int: &V, first: &V) -> V {
    use Polynomial::*;
    let largest = if n_int.ty.rank() == 0 {
        n_int.clone()
    } else {
        let all: Vec<usize> = (0..n_int.ty.rank()).collect();
        e.reduce(n_int, Scalar::Int(i64::MIN), "stablehlo.maximum", &all)
    };
    let step0 = e.scalar(1, DType::I64);
    let p0 = e.splat(1.0, x);
    let finals = e.while_op(
        &[&step0, &p0, first],
        |e, s| e.compare(Cmp::Lt, &s[0], &largest),
        |e, s| {
            let (j, p, q) = (&s[0], &s[1], &s[2]);
            let k = e.convert(j, x.ty.dtype);
            let k_full = e.broadcast_in_dim(&k, &x.ty.shape, []);
            let r = match kind {
                HermiteH => {
                    // k runs 2, 4, ...: r = 2x q - 2j p.
                    let twice = e.add(&k_full, &k_full);
                    let xx = e.add(x, x);
                    let a = e.mul(&xx, q);
                    let b = e.mul(&twice, p);
                    e.sub(&a, &b)
                }
                HermiteHe => {
                    let a = e.mul(x, q);
                    let b = e.mul(&k_full, p);
                    e.sub(&a, &b)
                }
                Laguerre => {
                    let one = e.splat(1.0, x);
                    let twice = e.add(&k_full, &k_full);
                    let one_minus = e.sub(&one, x);
                    let c = e.add(&twice, &one_minus);
                    let a = e.mul(&c, q);
                    let b = e.mul(&k_full, p);
                    let num = e.sub(&a, &b);
                    let k1 = e.add(&k_full, &one);
                    e.div(&num, &k1)
                }
                Legendre => {
                    let one = e.splat(1.0, x);
                    let twice = e.add(&k_full, &k_full);
                    let c = e.add(&twice, &one);
                    let cx = e.mul(&c, x);
                    let a = e.mul(&cx, q);
                    let b = e.mul(&k_full, p);
                    let num = e.sub(&a, &b);
                    let k1 = e.add(&k_full, &one);
                    e.div(&num, &k1)
                }
                _ => {
                    let a = e.mul(y2, q);
                    e.sub(&a, p)
                }
            };
            let j_full = e.broadcast_in_dim(j, &n_int.ty.shape, []);
            let active = e.compare(Cmp::Lt, &j_full, n_int);
            let next_p = e.select(&active, q, p);
            let next_q = e.select(&active, &r, q);
            let one_step = e.scalar(1, DType::I64);
            vec![e.add(j, &one_step), next_p, next_q]
        },
    );
    finals[2].clone()
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::graph::Graph;
    use crate::lower::lower;
    use crate::op::{Op, Polynomial};
    use crate::shape::TensorType;

    fn lowered(kind: Polynomial, ty: TensorType) -> String {
        let mut g = Graph::new();
        let (x, n) = (g.param(ty.clone()), g.param(ty));
        let v = g.push(Op::Polynomial(kind), &[x, n]).unwrap();
        g.output(v);
        lower(&g)
    }

    #[test]
    fn the_recurrence_is_one_loop_and_chebyshev_has_its_closed_form() {
        let text = lowered(Polynomial::ChebyshevU, TensorType::new(DType::F32, &[3, 4]));
        assert_eq!(text.matches("\"stablehlo.while\"").count(), 1, "{text}");
        assert!(text.contains("chlo.acos"), "{text}");
        let text = lowered(Polynomial::HermiteH, TensorType::new(DType::BF16, &[5]));
        assert!(!text.contains("chlo.acos"), "{text}");
        // Computed in f32, returned in bf16.
        assert!(
            text.contains("tensor<5xf32>") && text.contains("-> tensor<5xbf16>"),
            "{text}"
        );
        let e = Op::Polynomial(Polynomial::Legendre)
            .infer(&[
                TensorType::new(DType::I32, &[2]),
                TensorType::new(DType::I32, &[2]),
            ])
            .unwrap_err()
            .to_string();
        assert!(e.contains("legendre_polynomial_p"), "{e}");
    }
}
