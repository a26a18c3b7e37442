//! Counter-based random numbers: `stablehlo.rng_bit_generator` with Threefry,
//! keyed by two 0-d int64 operands.
//!
//! The generator is a pure function of its state, so the key is the only
//! thing that varies between draws; as an operand (a lifted scalar) it never
//! changes the program. Bits become floats in `[0, 1)` by the mantissa trick:
//! the top mantissa-width bits under the exponent of 1.0 give a float in
//! `[1, 2)`, minus 1. Every value is a multiple of 2^-23 (f32) or 2^-52 (f64)
//! and all are equally likely.

use super::{Emitter, V};
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::shape::TensorType;

/// The largest value of a 16-bit float `dtype` below 1.
fn below_one(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => half::f16::from_bits(half::f16::ONE.to_bits() - 1).to_f64(),
        _ => half::bf16::from_bits(half::bf16::ONE.to_bits() - 1).to_f64(),
    }
}

pub(super) fn rand_uniform(e: &mut Emitter, key0: &V, key1: &V, out: TensorType) -> V {
    // (bits dtype, float of that width, mantissa shift, the bits of 1.0)
    let (bits_dtype, float, shift, one) = if out.dtype == DType::F64 {
        (DType::I64, DType::F64, 12, 0x3FF0_0000_0000_0000_i64)
    } else {
        (DType::I32, DType::F32, 9, 0x3F80_0000_i64)
    };
    let k0 = e.reshape(key0, &[1]);
    let k1 = e.reshape(key1, &[1]);
    let state = e.op(
        "stablehlo.concatenate",
        &[&k0, &k1],
        "dimension = 0 : i64",
        TensorType::new(DType::I64, &[2]),
    );
    let state = e.to_unsigned(&state);
    let generated = e.unsigned_op(
        "stablehlo.rng_bit_generator",
        &[&state],
        "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>",
        &[state.signed.clone(), out.with_dtype(bits_dtype)],
    );
    let bits = e.from_unsigned(&generated[1]);
    let mantissa = e.binary_const("stablehlo.shift_right_logical", &bits, shift);
    let in_one_two = e.binary_const("stablehlo.or", &mantissa, Scalar::Int(one));
    let f = e.op(
        "stablehlo.bitcast_convert",
        &[&in_one_two],
        "",
        out.with_dtype(float),
    );
    let u = e.binary_const("stablehlo.subtract", &f, 1.0);
    if out.dtype == float {
        return u;
    }
    // 16-bit floats: rounding can reach 1.0; keep the result below it.
    let narrow = e.convert(&u, out.dtype);
    e.binary_const("stablehlo.minimum", &narrow, below_one(out.dtype))
}

#[cfg(test)]
mod tests {
    use super::below_one;
    use crate::dtype::DType;

    #[test]
    fn the_largest_16_bit_values_below_one() {
        assert_eq!(below_one(DType::F16), 1.0 - 2f64.powi(-11));
        assert_eq!(below_one(DType::BF16), 1.0 - 2f64.powi(-8));
    }
}
