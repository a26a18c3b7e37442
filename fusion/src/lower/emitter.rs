//! The `Emitter`: writes a function body's ops in MLIR's generic form and
//! knows every value's type, so a lowering says only which StableHLO ops to
//! emit (conversions and broadcasts to a type a value already has are
//! no-ops).

use std::fmt::{self, Write};

use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::shape::{Shape, TensorType};

/// The name of an SSA value.
#[derive(Clone, Copy, Debug)]
enum Name {
    /// `%7`
    Ssa(u32),
    /// `%7#1`: result 1 of a multi-result op.
    Result(u32, u8),
    /// `%arg2`: a function argument.
    Arg(u32),
}

/// An SSA value being emitted, with its type.
#[derive(Clone, Debug)]
pub struct V {
    name: Name,
    pub ty: TensorType,
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Name::Ssa(id) => write!(f, "%{id}"),
            Name::Result(id, i) => write!(f, "%{id}#{i}"),
            Name::Arg(n) => write!(f, "%arg{n}"),
        }
    }
}

impl fmt::Display for V {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.name.fmt(f)
    }
}

/// A value of an unsigned integer type `DType` has no name for (`ui32`,
/// `ui64`). Only `stablehlo.rng_bit_generator` needs them (its state and bits
/// are unsigned); such a value is bitcast to the signed type of its width
/// right away, so no other op ever sees one.
pub struct Unsigned {
    name: Name,
    /// The signed type of the same width and shape (`i64` for `ui64`).
    pub signed: TensorType,
}

impl Unsigned {
    /// `tensor<2xui64>`.
    fn mlir(&self) -> String {
        let mut s = String::from("tensor<");
        for d in &self.signed.shape {
            let _ = write!(s, "{d}x");
        }
        let _ = write!(s, "u{}>", self.signed.dtype.mlir());
        s
    }
}

/// `array<i64: 1, 2>`.
pub(crate) fn i64_array(values: impl IntoIterator<Item = i64>) -> String {
    let items: Vec<String> = values.into_iter().map(|v| v.to_string()).collect();
    if items.is_empty() {
        return "array<i64>".into();
    }
    format!("array<i64: {}>", items.join(", "))
}

/// `[1, 2]` (dimension lists inside `#stablehlo.*` attributes).
pub(crate) fn dim_list(values: impl IntoIterator<Item = usize>) -> String {
    let items: Vec<String> = values.into_iter().map(|v| v.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// Comparison directions of `stablehlo.compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Writes one function body.
pub struct Emitter {
    out: String,
    next: u32,
    indent: usize,
}

impl Emitter {
    pub(super) fn new() -> Emitter {
        Emitter {
            out: String::with_capacity(1024),
            next: 0,
            indent: 4,
        }
    }

    /// `%argN`: the function's argument `n`, of type `ty`.
    pub(super) fn argument(n: u32, ty: TensorType) -> V {
        V {
            name: Name::Arg(n),
            ty,
        }
    }

    /// The ops written so far.
    pub(super) fn body(&self) -> &str {
        &self.out
    }

    fn fresh(&mut self) -> u32 {
        let id = self.next;
        self.next += 1;
        id
    }

    fn line_start(&mut self) {
        for _ in 0..self.indent {
            self.out.push(' ');
        }
    }

    fn write_types<'a>(&mut self, tys: impl IntoIterator<Item = &'a TensorType>) {
        for (i, t) in tys.into_iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            t.write_mlir(&mut self.out);
        }
    }

    fn write_operands(&mut self, operands: &[&V]) {
        for (i, v) in operands.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            let _ = write!(self.out, "{v}");
        }
    }

    /// Emits a single-result op in generic form.
    pub fn op(&mut self, name: &str, operands: &[&V], attrs: &str, ty: TensorType) -> V {
        let id = self.fresh();
        self.line_start();
        let _ = write!(self.out, "%{id} = \"{name}\"(");
        self.write_operands(operands);
        self.out.push(')');
        if !attrs.is_empty() {
            let _ = write!(self.out, " {{{attrs}}}");
        }
        self.out.push_str(" : (");
        self.write_types(operands.iter().map(|v| &v.ty));
        self.out.push_str(") -> ");
        ty.write_mlir(&mut self.out);
        self.out.push('\n');
        V {
            name: Name::Ssa(id),
            ty,
        }
    }

    /// Writes a region `{ ^bb0(args): ... return }` whose block takes
    /// `arg_types` (none: a block of no arguments) and returns what `body`
    /// gives.
    fn region(
        &mut self,
        arg_types: &[TensorType],
        body: impl FnOnce(&mut Emitter, &[V]) -> Vec<V>,
    ) {
        self.out.push_str("{\n");
        let args: Vec<V> = arg_types
            .iter()
            .map(|t| V {
                name: Name::Ssa(self.fresh()),
                ty: t.clone(),
            })
            .collect();
        self.line_start();
        self.out.push_str("^bb0");
        if !args.is_empty() {
            self.out.push('(');
            for (i, a) in args.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                let _ = write!(self.out, "{a}: ");
                a.ty.write_mlir(&mut self.out);
            }
            self.out.push(')');
        }
        self.out.push_str(":\n");
        self.indent += 2;
        let rets = body(self, &args);
        self.line_start();
        self.out.push_str("\"stablehlo.return\"(");
        self.write_operands(&rets.iter().collect::<Vec<_>>());
        self.out.push_str(") : (");
        self.write_types(rets.iter().map(|v| &v.ty));
        self.out.push_str(") -> ()\n");
        self.indent -= 2;
        self.line_start();
        self.out.push('}');
    }

    /// Starts an op line of `n` results: `%id = "name"(` or `%id:n = ...`.
    fn op_start(&mut self, name: &str, n: usize) -> u32 {
        let id = self.fresh();
        self.line_start();
        if n == 1 {
            let _ = write!(self.out, "%{id} = \"{name}\"(");
        } else {
            let _ = write!(self.out, "%{id}:{n} = \"{name}\"(");
        }
        id
    }

    /// Ends an op line: ` : (operand types) -> result types`, and names its
    /// results.
    fn op_end(&mut self, id: u32, operands: &[&V], results: &[TensorType]) -> Vec<V> {
        self.out.push_str(" : (");
        self.write_types(operands.iter().map(|v| &v.ty));
        self.out.push_str(") -> ");
        if results.len() == 1 {
            results[0].write_mlir(&mut self.out);
        } else {
            self.out.push('(');
            self.write_types(results);
            self.out.push(')');
        }
        self.out.push('\n');
        results
            .iter()
            .enumerate()
            .map(|(i, t)| V {
                name: if results.len() > 1 {
                    Name::Result(id, i as u8)
                } else {
                    Name::Ssa(id)
                },
                ty: t.clone(),
            })
            .collect()
    }

    /// Emits an op of several results (no regions).
    pub fn multi_op(
        &mut self,
        name: &str,
        operands: &[&V],
        attrs: &str,
        results: &[TensorType],
    ) -> Vec<V> {
        let id = self.op_start(name, results.len());
        self.write_operands(operands);
        self.out.push(')');
        if !attrs.is_empty() {
            let _ = write!(self.out, " {{{attrs}}}");
        }
        self.op_end(id, operands, results)
    }

    /// Emits an op with one region whose block takes `arg_types` and returns
    /// what `body` gives.
    pub fn region_op(
        &mut self,
        name: &str,
        operands: &[&V],
        arg_types: &[TensorType],
        body: impl FnOnce(&mut Emitter, &[V]) -> Vec<V>,
        attrs: &str,
        results: &[TensorType],
    ) -> Vec<V> {
        let id = self.op_start(name, results.len());
        self.write_operands(operands);
        self.out.push_str(") (");
        self.region(arg_types, body);
        self.out.push(')');
        if !attrs.is_empty() {
            let _ = write!(self.out, " {{{attrs}}}");
        }
        self.op_end(id, operands, results)
    }

    /// `stablehlo.if`: the values `then` gives where `pred` (0-d bool) holds,
    /// else those `otherwise` gives, each of types `results`. The branches
    /// take no arguments and read the enclosing values; what they define
    /// stays inside them.
    pub fn if_op(
        &mut self,
        pred: &V,
        results: &[TensorType],
        then: impl FnOnce(&mut Emitter) -> Vec<V>,
        otherwise: impl FnOnce(&mut Emitter) -> Vec<V>,
    ) -> Vec<V> {
        let id = self.op_start("stablehlo.if", results.len());
        self.write_operands(&[pred]);
        self.out.push_str(") (");
        self.region(&[], |e, _| then(e));
        self.out.push_str(", ");
        self.region(&[], |e, _| otherwise(e));
        self.out.push(')');
        self.op_end(id, &[pred], results)
    }

    /// `stablehlo.while`: from `init`, `body` (the values -> the next
    /// values, of the same types) while `cond` (the values -> 0-d bool)
    /// holds; the final values.
    pub fn while_op(
        &mut self,
        init: &[&V],
        cond: impl FnOnce(&mut Emitter, &[V]) -> V,
        body: impl FnOnce(&mut Emitter, &[V]) -> Vec<V>,
    ) -> Vec<V> {
        let types: Vec<TensorType> = init.iter().map(|v| v.ty.clone()).collect();
        let id = self.op_start("stablehlo.while", types.len());
        self.write_operands(init);
        self.out.push_str(") (");
        self.region(&types, |e, args| vec![cond(e, args)]);
        self.out.push_str(", ");
        self.region(&types, body);
        self.out.push(')');
        self.op_end(id, init, &types)
    }

    /// Writes one op line from MLIR text: operands as (name, type), results
    /// as types. Returns the id its results are named by.
    fn raw_line(
        &mut self,
        name: &str,
        operands: &[(String, String)],
        attrs: &str,
        results: &[String],
    ) -> u32 {
        let id = self.fresh();
        self.line_start();
        if results.len() == 1 {
            let _ = write!(self.out, "%{id} = \"{name}\"(");
        } else {
            let _ = write!(self.out, "%{id}:{} = \"{name}\"(", results.len());
        }
        let names: Vec<&str> = operands.iter().map(|(n, _)| n.as_str()).collect();
        let types: Vec<&str> = operands.iter().map(|(_, t)| t.as_str()).collect();
        self.out.push_str(&names.join(", "));
        self.out.push(')');
        if !attrs.is_empty() {
            let _ = write!(self.out, " {{{attrs}}}");
        }
        let _ = write!(self.out, " : ({}) -> ", types.join(", "));
        if results.len() == 1 {
            self.out.push_str(&results[0]);
        } else {
            let _ = write!(self.out, "({})", results.join(", "));
        }
        self.out.push('\n');
        id
    }

    /// Emits an op over unsigned values; each result is given by the signed
    /// type of its width and shape.
    pub fn unsigned_op(
        &mut self,
        name: &str,
        operands: &[&Unsigned],
        attrs: &str,
        results: &[TensorType],
    ) -> Vec<Unsigned> {
        let ops: Vec<(String, String)> = operands
            .iter()
            .map(|u| (u.name.to_string(), u.mlir()))
            .collect();
        let mut out: Vec<Unsigned> = results
            .iter()
            .map(|t| Unsigned {
                name: Name::Ssa(0),
                signed: t.clone(),
            })
            .collect();
        let types: Vec<String> = out.iter().map(Unsigned::mlir).collect();
        let id = self.raw_line(name, &ops, attrs, &types);
        let many = out.len() > 1;
        for (i, u) in out.iter_mut().enumerate() {
            u.name = if many {
                Name::Result(id, i as u8)
            } else {
                Name::Ssa(id)
            };
        }
        out
    }

    /// `x`, a signed integer value, reinterpreted as the unsigned type of its
    /// width (`stablehlo.bitcast_convert`).
    pub fn to_unsigned(&mut self, x: &V) -> Unsigned {
        debug_assert!(x.ty.dtype.is_int() && x.ty.dtype.is_signed());
        let u = Unsigned {
            name: Name::Ssa(0),
            signed: x.ty.clone(),
        };
        let id = self.raw_line(
            "stablehlo.bitcast_convert",
            &[(x.to_string(), x.ty.mlir())],
            "",
            &[u.mlir()],
        );
        Unsigned {
            name: Name::Ssa(id),
            ..u
        }
    }

    /// `x` reinterpreted as the signed type of its width.
    pub fn from_unsigned(&mut self, x: &Unsigned) -> V {
        let id = self.raw_line(
            "stablehlo.bitcast_convert",
            &[(x.name.to_string(), x.mlir())],
            "",
            &[x.signed.mlir()],
        );
        V {
            name: Name::Ssa(id),
            ty: x.signed.clone(),
        }
    }

    // ------------------------------------------------------------- helpers

    /// A constant of type `ty` filled with `value`.
    pub fn constant(&mut self, value: Scalar, ty: TensorType) -> V {
        let attrs = format!(
            "value = dense<{}> : {}",
            value.mlir_literal(ty.dtype),
            ty.mlir()
        );
        self.op("stablehlo.constant", &[], &attrs, ty)
    }

    /// A 0-d constant.
    pub fn scalar(&mut self, value: impl Into<Scalar>, dtype: DType) -> V {
        self.constant(value.into(), TensorType::scalar(dtype))
    }

    /// A constant shaped and typed like `like`.
    pub fn splat(&mut self, value: impl Into<Scalar>, like: &V) -> V {
        self.constant(value.into(), like.ty.clone())
    }

    /// `x` converted to `dtype` (no-op if it already is). To bool means `!= 0`;
    /// a complex value to a real dtype is its real part (as PyTorch casts,
    /// XLA having no such convert).
    pub fn convert(&mut self, x: &V, dtype: DType) -> V {
        if x.ty.dtype == dtype {
            return x.clone();
        }
        if dtype == DType::Bool {
            let zero = self.splat(0, x);
            return self.compare(Cmp::Ne, x, &zero);
        }
        if x.ty.dtype.is_complex() && !dtype.is_complex() {
            let re = self.real_part(x);
            return self.convert(&re, dtype);
        }
        self.op("stablehlo.convert", &[x], "", x.ty.with_dtype(dtype))
    }

    /// The real part of a complex `x` (`stablehlo.real`).
    pub fn real_part(&mut self, x: &V) -> V {
        let ty = x.ty.with_dtype(x.ty.dtype.real_part());
        self.op("stablehlo.real", &[x], "", ty)
    }

    /// The imaginary part of a complex `x` (`stablehlo.imag`).
    pub fn imag_part(&mut self, x: &V) -> V {
        let ty = x.ty.with_dtype(x.ty.dtype.real_part());
        self.op("stablehlo.imag", &[x], "", ty)
    }

    /// The complex number `re + i im` of two real values of one dtype.
    pub fn complex(&mut self, re: &V, im: &V) -> V {
        let ty = re.ty.with_dtype(re.ty.dtype.to_complex());
        self.op("stablehlo.complex", &[re, im], "", ty)
    }

    /// `conj(x)` of a complex `x`; `x` itself otherwise.
    pub fn conj(&mut self, x: &V) -> V {
        if !x.ty.dtype.is_complex() {
            return x.clone();
        }
        let (re, im) = (self.real_part(x), self.imag_part(x));
        let minus_im = self.unary("stablehlo.negate", &im);
        self.complex(&re, &minus_im)
    }

    /// `x` broadcast to `shape`, aligning trailing dims (NumPy rules).
    pub fn broadcast_to(&mut self, x: &V, shape: &[i64]) -> V {
        if x.ty.shape.as_slice() == shape {
            return x.clone();
        }
        let lead = shape.len() - x.ty.rank();
        self.broadcast_in_dim(x, shape, (lead..shape.len()).map(|d| d as i64))
    }

    /// `stablehlo.broadcast_in_dim`: input dim i becomes output dim `dims[i]`.
    pub fn broadcast_in_dim(
        &mut self,
        x: &V,
        shape: &[i64],
        dims: impl IntoIterator<Item = i64>,
    ) -> V {
        let attrs = format!("broadcast_dimensions = {}", i64_array(dims));
        self.op(
            "stablehlo.broadcast_in_dim",
            &[x],
            &attrs,
            x.ty.with_shape(Shape::from_slice(shape)),
        )
    }

    pub fn reshape(&mut self, x: &V, shape: &[i64]) -> V {
        if x.ty.shape.as_slice() == shape {
            return x.clone();
        }
        self.op(
            "stablehlo.reshape",
            &[x],
            "",
            x.ty.with_shape(Shape::from_slice(shape)),
        )
    }

    /// A same-type elementwise op (`stablehlo.exponential`).
    pub fn unary(&mut self, name: &str, x: &V) -> V {
        self.op(name, &[x], "", x.ty.clone())
    }

    /// A same-type binary op; operands must already agree in type.
    pub fn binary(&mut self, name: &str, a: &V, b: &V) -> V {
        self.op(name, &[a, b], "", a.ty.clone())
    }

    pub fn add(&mut self, a: &V, b: &V) -> V {
        self.binary("stablehlo.add", a, b)
    }

    pub fn sub(&mut self, a: &V, b: &V) -> V {
        self.binary("stablehlo.subtract", a, b)
    }

    pub fn mul(&mut self, a: &V, b: &V) -> V {
        self.binary("stablehlo.multiply", a, b)
    }

    pub fn div(&mut self, a: &V, b: &V) -> V {
        self.binary("stablehlo.divide", a, b)
    }

    /// `a op c` where `c` is a constant splat like `a`.
    pub fn binary_const(&mut self, name: &str, a: &V, c: impl Into<Scalar>) -> V {
        let k = self.splat(c, a);
        self.binary(name, a, &k)
    }

    pub fn compare(&mut self, dir: Cmp, a: &V, b: &V) -> V {
        let d = match dir {
            Cmp::Eq => "EQ",
            Cmp::Ne => "NE",
            Cmp::Lt => "LT",
            Cmp::Le => "LE",
            Cmp::Gt => "GT",
            Cmp::Ge => "GE",
        };
        let kind = match a.ty.dtype {
            t if t.is_inexact() => "FLOAT",
            DType::Bool | DType::U8 => "UNSIGNED",
            _ => "SIGNED",
        };
        let attrs = format!(
            "comparison_direction = #stablehlo<comparison_direction {d}>, compare_type = #stablehlo<comparison_type {kind}>"
        );
        self.op(
            "stablehlo.compare",
            &[a, b],
            &attrs,
            a.ty.with_dtype(DType::Bool),
        )
    }

    pub fn select(&mut self, pred: &V, a: &V, b: &V) -> V {
        self.op("stablehlo.select", &[pred, a, b], "", a.ty.clone())
    }

    /// `x != x`: true where `x` is NaN.
    pub fn is_nan(&mut self, x: &V) -> V {
        self.compare(Cmp::Ne, x, x)
    }

    /// Reduces `x` over `dims` with the binary op `body` and initial value `init`.
    pub fn reduce(&mut self, x: &V, init: Scalar, body: &str, dims: &[usize]) -> V {
        let body = body.to_string();
        self.reduce_with(x, init, dims, move |e, a, b| e.binary(&body, a, b))
    }

    /// Reduces `x` over `dims` with the combiner `body` emitted by a closure.
    pub fn reduce_with(
        &mut self,
        x: &V,
        init: Scalar,
        dims: &[usize],
        body: impl FnOnce(&mut Emitter, &V, &V) -> V,
    ) -> V {
        let init = self.scalar(init, x.ty.dtype);
        let elem = TensorType::scalar(x.ty.dtype);
        let shape: Shape = (0..x.ty.rank())
            .filter(|d| !dims.contains(d))
            .map(|d| x.ty.shape[d])
            .collect();
        let attrs = format!("dimensions = {}", i64_array(dims.iter().map(|&d| d as i64)));
        self.region_op(
            "stablehlo.reduce",
            &[x, &init],
            &[elem.clone(), elem],
            |e, args| vec![body(e, &args[0], &args[1])],
            &attrs,
            &[x.ty.with_shape(shape)],
        )
        .remove(0)
    }

    /// `max(a, b)`, NaN if either is NaN (as PyTorch; the CPU backend's
    /// `stablehlo.maximum` returns the non-NaN operand when only `b` is NaN).
    pub fn maximum(&mut self, a: &V, b: &V) -> V {
        self.nan_propagating("stablehlo.maximum", a, b)
    }

    /// `min(a, b)`, NaN if either is NaN.
    pub fn minimum(&mut self, a: &V, b: &V) -> V {
        self.nan_propagating("stablehlo.minimum", a, b)
    }

    fn nan_propagating(&mut self, name: &str, a: &V, b: &V) -> V {
        let m = self.binary(name, a, b);
        if !a.ty.dtype.is_float() {
            return m;
        }
        let b_nan = self.is_nan(b);
        let m = self.select(&b_nan, b, &m);
        let a_nan = self.is_nan(a);
        self.select(&a_nan, a, &m)
    }

    pub fn transpose(&mut self, x: &V, perm: &[usize]) -> V {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return x.clone();
        }
        let shape: Shape = perm.iter().map(|&p| x.ty.shape[p]).collect();
        let attrs = format!(
            "permutation = {}",
            i64_array(perm.iter().map(|&p| p as i64))
        );
        self.op("stablehlo.transpose", &[x], &attrs, x.ty.with_shape(shape))
    }

    pub fn iota(&mut self, ty: TensorType, dim: usize) -> V {
        let attrs = format!("iota_dimension = {dim} : i64");
        self.op("stablehlo.iota", &[], &attrs, ty)
    }

    /// Every element `>= lo` and `< hi`, and finite: `is_finite`.
    pub fn is_finite(&mut self, x: &V) -> V {
        self.op(
            "stablehlo.is_finite",
            &[x],
            "",
            x.ty.with_dtype(DType::Bool),
        )
    }
}
