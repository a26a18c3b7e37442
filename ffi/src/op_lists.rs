//! The header's elementwise op lists, rendered from fusion's op tables
//! (`fusion/src/elementwise.rs`): X-macros a C or C++ caller expands (the
//! PyTorch backend defines and registers its kernels from them).
//! `tests/header.rs` checks that `include/eagertpu.h` holds exactly this text.

use std::fmt::{Debug, Write};

use eagertpu::{BinaryOp, UnaryOp};

/// First and last line of the generated block in the header.
pub const BEGIN: &str =
    "/* BEGIN elementwise op lists: generated from fusion/src/elementwise.rs. */";
pub const END: &str = "/* END elementwise op lists */";

/// `FloatOfNumeric` -> `FLOAT_OF_NUMERIC`.
fn rule_token(rule: impl Debug) -> String {
    let mut out = String::new();
    for (i, c) in format!("{rule:?}").chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// An op's `X(...)` arguments: name, rule, ATen overloads.
fn row(name: &str, rule: impl Debug, overloads: &[&str]) -> Vec<String> {
    let mut row = vec![name.to_string(), rule_token(rule)];
    row.extend(overloads.iter().map(|s| s.to_string()));
    row
}

/// One `#define NAME(X)` with an `X(...)` line per op.
fn x_macro(out: &mut String, name: &str, rows: impl Iterator<Item = Vec<String>>) {
    let _ = write!(out, "#define {name}(X)");
    for row in rows {
        let _ = write!(out, " \\\n  X({})", row.join(", "));
    }
    out.push('\n');
}

/// The block, from `BEGIN` to `END` inclusive, with a trailing newline.
pub fn elementwise_op_lists() -> String {
    let mut out = format!("{BEGIN}\n");
    out.push_str(
        "/* X(name, rule, aten_out) for each op of etpu_unary, and X(name, rule, aten_tensor_out,\n \
         * aten_scalar_out) for each op of etpu_binary and etpu_binary_scalar (broadcasting and type\n \
         * promotion as in PyTorch). rule: how the result dtype follows the operands' (FLOAT: integers\n \
         * compute in the default float dtype; NUMERIC: bool is an error; PROMOTED: the operands'\n \
         * promoted dtype; ...). aten_*: the ATen overload the PyTorch backend registers a kernel\n \
         * for, or none. */\n",
    );
    let unary = UnaryOp::ALL
        .iter()
        .map(|u| row(u.name(), u.result(), u.aten_overloads()));
    x_macro(&mut out, "ETPU_UNARY_OPS", unary);
    let binary = BinaryOp::ALL
        .iter()
        .map(|b| row(b.name(), b.result(), b.aten_overloads()));
    x_macro(&mut out, "ETPU_BINARY_OPS", binary);
    out.push_str(END);
    out.push('\n');
    out
}
