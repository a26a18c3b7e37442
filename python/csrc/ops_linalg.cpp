// torch.linalg's Cholesky factor and triangular solves, and what PyTorch
// builds of them (cholesky_solve, cholesky_inverse): the runtime's
// Tensor::cholesky_ex and Tensor::solve_triangular, StableHLO's own ops.
// LU with partial pivoting (the runtime's Tensor::lu_factor_ex, a loop of
// fusion's) and what is made of it: lu_solve, inv, solve, det, slogdet, lu,
// lu_unpack. Their gradients are PyTorch's formulas, made of these and
// matmuls. And the cross product, elementwise.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <tuple>

#include "backend.h"

namespace etpu {
namespace {

// bool [rows, cols]: `op` ("eq", "gt", "le", ...) of each element's row and
// column index.
Handle index_compare(int64_t device, const char* op, int64_t rows, int64_t cols) {
  Handle r = reshape(arange(device, 0, rows, 1, at::kLong), {rows, 1});
  Handle c = reshape(arange(device, 0, cols, 1, at::kLong), {1, cols});
  return binary(op, r, c);
}

// The rows x cols identity of dtype `t`.
Handle identity(int64_t device, int64_t rows, int64_t cols, at::ScalarType t) {
  return cast(index_compare(device, "eq", rows, cols), t);
}

// x with op(a) x = b (left) or x op(a) = b; batch dims broadcast.
Handle solve_triangular(const Handle& a, const Handle& b, bool upper, bool left, bool unit_diagonal,
                        bool transpose) {
  Handle h;
  check(etpu_solve_triangular(a.get(), b.get(), upper, left, unit_diagonal, transpose, origin(), h.out()));
  return h;
}

std::tuple<at::Tensor&, at::Tensor&> linalg_cholesky_ex_out(const at::Tensor& self, bool upper, bool check_errors,
                                                            at::Tensor& factor, at::Tensor& info) {
  {
    OpScope s;
    Handle l, i;
    check(etpu_cholesky(read(self).get(), upper, origin(), l.out(), i.out()));
    write(factor, l);
    write(info, i);
  }
  // A host read of `info`, as on CUDA.
  if (check_errors) at::_linalg_check_errors(info, "linalg.cholesky_ex", self.dim() == 2);
  return {factor, info};
}

// torch.triangular_solve(b, A, upper, transpose, unitriangular): the
// solution and A broadcast to the batch (its "cloned coefficient").
std::tuple<at::Tensor&, at::Tensor&> triangular_solve_out(const at::Tensor& self, const at::Tensor& a, bool upper,
                                                          bool transpose, bool unitriangular, at::Tensor& solution,
                                                          at::Tensor& coefficient) {
  OpScope s;
  Handle m = read(a);
  write(solution, solve_triangular(m, read(self), upper, /*left=*/true, unitriangular, transpose));
  write(coefficient, expand(m, coefficient.sizes()));
  return {solution, coefficient};
}

at::Tensor& linalg_solve_triangular_out(const at::Tensor& a, const at::Tensor& b, bool upper, bool left,
                                        bool unitriangular, at::Tensor& out) {
  OpScope s;
  Handle x = solve_triangular(read(a), read(b), upper, left, unitriangular, /*transpose=*/false);
  at::native::resize_output(out, dims_of(x));
  write(out, x);
  return out;
}

at::Tensor linalg_solve_triangular(const at::Tensor& a, const at::Tensor& b, bool upper, bool left,
                                   bool unitriangular) {
  at::Tensor out = empty_tpu({0}, b.scalar_type(), b.device().index());
  return linalg_solve_triangular_out(a, b, upper, left, unitriangular, out);
}

// x with a a^T x = b (lower factor a) or a^T a x = b (upper): two
// triangular solves.
Handle cholesky_solved(const Handle& b, const Handle& factor, bool upper) {
  Handle y = solve_triangular(factor, b, upper, /*left=*/true, /*unit_diagonal=*/false, /*transpose=*/upper);
  return solve_triangular(factor, y, upper, /*left=*/true, /*unit_diagonal=*/false, /*transpose=*/!upper);
}

// cholesky_solve's kernel: PyTorch broadcast b and the factor already.
at::Tensor cholesky_solve_helper(const at::Tensor& self, const at::Tensor& factor, bool upper) {
  OpScope s;
  Handle x = cholesky_solved(read(self), read(factor), upper);
  at::Tensor out = empty_tpu(dims_of(x), self.scalar_type(), self.device().index());
  write(out, x);
  return out;
}

// The inverse of a a^T (a^T a with `upper`) from the factor a: the
// identity solved for.
at::Tensor& cholesky_inverse_out(const at::Tensor& self, bool upper, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(self.dim() >= 2 && self.size(-1) == self.size(-2),
              "cholesky_inverse: expected a batch of square matrices [..., n, n], got ", self.sizes());
  Handle eye = identity(device_index(self), self.size(-1), self.size(-1), self.scalar_type());
  Handle x = cholesky_solved(expand(eye, self.sizes()), read(self), upper);
  at::native::resize_output(out, self.sizes());
  write(out, x);
  return out;
}

at::Tensor cholesky_inverse(const at::Tensor& self, bool upper) {
  at::Tensor out = empty_tpu({0}, self.scalar_type(), self.device().index());
  return cholesky_inverse_out(self, upper, out);
}

// ------------------------------------------------------------------- LU ----

struct Lu {
  Handle factors, pivots, info;
};

Lu lu_factor(const Handle& a) {
  Lu r;
  check(etpu_lu_factor(a.get(), origin(), r.factors.out(), r.pivots.out(), r.info.out()));
  return r;
}

Handle lu_solve(const Handle& factors, const Handle& pivots, const Handle& b, bool left, bool adjoint) {
  Handle h;
  check(etpu_lu_solve(factors.get(), pivots.get(), b.get(), left, adjoint, origin(), h.out()));
  return h;
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_lu_factor_ex_out(const at::Tensor& a, bool pivot,
                                                                          bool check_errors, at::Tensor& factors,
                                                                          at::Tensor& pivots, at::Tensor& info) {
  TORCH_CHECK(pivot, "linalg.lu_factor: LU without pivoting is not implemented on tpu");
  {
    OpScope s;
    Lu r = lu_factor(read(a));
    write(factors, r.factors);
    write(pivots, r.pivots);
    write(info, r.info);
  }
  if (check_errors) at::_linalg_check_errors(info, "linalg.lu_factor_ex", a.dim() == 2);
  return {factors, pivots, info};
}

at::Tensor& linalg_lu_solve_out(const at::Tensor& factors, const at::Tensor& pivots, const at::Tensor& b, bool left,
                                bool adjoint, at::Tensor& out) {
  OpScope s;
  write(out, lu_solve(read(factors), read(pivots), read(b), left, adjoint));
  return out;
}

std::tuple<at::Tensor&, at::Tensor&> linalg_inv_ex_out(const at::Tensor& a, bool check_errors, at::Tensor& inverse,
                                                       at::Tensor& info) {
  {
    OpScope s;
    Lu r = lu_factor(read(a));
    Handle eye = expand(identity(device_index(a), a.size(-1), a.size(-1), a.scalar_type()), a.sizes());
    write(inverse, lu_solve(r.factors, r.pivots, eye, /*left=*/true, /*adjoint=*/false));
    write(info, r.info);
  }
  if (check_errors) at::_linalg_check_errors(info, "linalg.inv_ex", a.dim() == 2);
  return {inverse, info};
}

// linalg.solve's kernel: b [..., n] (a vector per matrix) or [..., n, k].
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> linalg_solve_ex_out(
    const at::Tensor& a, const at::Tensor& b, bool left, bool check_errors, at::Tensor& result,
    at::Tensor& factors, at::Tensor& pivots, at::Tensor& info) {
  {
    OpScope s;
    bool vector = b.dim() == 1 || (b.dim() == a.dim() - 1 && b.sizes() == a.sizes().slice(0, a.dim() - 1));
    Handle rhs = read(b);
    if (vector) {
      std::vector<int64_t> shape = b.sizes().vec();
      shape.insert(left ? shape.end() : shape.end() - 1, 1);
      rhs = reshape(rhs, shape);
    }
    Lu r = lu_factor(read(a));
    write(result, reshape(lu_solve(r.factors, r.pivots, rhs, left, /*adjoint=*/false), result.sizes()));
    write(factors, r.factors);
    write(pivots, r.pivots);
    write(info, r.info);
  }
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", a.dim() == 2);
  return {result, factors, pivots, info};
}

// The diagonal of U [..., n] and the permutation's sign [...] (-1 for an odd
// number of swaps), from a square matrix's factorization.
std::pair<Handle, Handle> lu_diagonal_and_sign(const at::Tensor& a, const Lu& r) {
  int64_t n = a.size(-1), device = device_index(a);
  Handle zero = full(device, {}, 0, a.scalar_type());
  Handle diagonal = reduce("sum", where(index_compare(device, "eq", n, n), r.factors, zero), {-1}, false);
  Handle swapped = binary("ne", cast(r.pivots, at::kLong), arange(device, 1, n + 1, 1, at::kLong));
  Handle odd = binary_scalar("remainder", reduce("sum", swapped, {-1}, false), 2);
  Handle sign = cast(binary_scalar("add", mul(odd, -2), 1), a.scalar_type());
  return {std::move(diagonal), std::move(sign)};
}

// det and slogdet factor A^T when A is contiguous (PyTorch's CPU kernels do:
// LAPACK wants columns, and det(A^T) = det(A)); their backward formulas
// expect the factors of the same matrix.
Lu determinant_factors(const at::Tensor& a) { return lu_factor(read(a.is_contiguous() ? a.mT() : a)); }

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_det_out(const at::Tensor& a, at::Tensor& result,
                                                                 at::Tensor& factors, at::Tensor& pivots) {
  OpScope s;
  Lu r = determinant_factors(a);
  auto [diagonal, sign] = lu_diagonal_and_sign(a, r);
  write(result, mul(reduce("prod", diagonal, {-1}, false), sign));
  write(factors, r.factors);
  write(pivots, r.pivots);
  return {result, factors, pivots};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> linalg_slogdet_out(const at::Tensor& a,
                                                                                  at::Tensor& sign,
                                                                                  at::Tensor& logabsdet,
                                                                                  at::Tensor& factors,
                                                                                  at::Tensor& pivots) {
  OpScope s;
  Lu r = determinant_factors(a);
  auto [diagonal, permutation_sign] = lu_diagonal_and_sign(a, r);
  write(sign, mul(reduce("prod", unary("sign", diagonal), {-1}, false), permutation_sign));
  write(logabsdet, reduce("sum", unary("log", unary("abs", diagonal)), {-1}, false));
  write(factors, r.factors);
  write(pivots, r.pivots);
  return {sign, logabsdet, factors, pivots};
}

// P, L, U of a factorization of [..., m, n]: a = P L U, L [..., m, k] unit
// lower, U [..., k, n] upper, k = min(m, n). Each only when asked for.
void unpack(const at::Tensor& factors, const Handle& lu, const Handle& pivots, bool data, bool permutation,
            at::Tensor& p, at::Tensor& l, at::Tensor& u) {
  int64_t m = factors.size(-2), n = factors.size(-1), k = std::min(m, n), device = device_index(factors);
  int64_t r = factors.dim();
  if (data) {
    Handle zero = full(device, {}, 0, factors.scalar_type());
    Handle left = slice(lu, r - 1, 0, k, 1);
    Handle strictly_lower = where(index_compare(device, "gt", m, k), left, zero);
    write(l, add(strictly_lower, identity(device, m, k, factors.scalar_type())));
    write(u, where(index_compare(device, "le", k, n), slice(lu, r - 2, 0, k, 1), zero));
  }
  if (permutation) {
    Handle perm;
    check(etpu_lu_permutation(pivots.get(), m, origin(), perm.out()));
    // P[r, i] = (r == perm[i]).
    std::vector<int64_t> columns = dims_of(perm);
    columns.insert(columns.end() - 1, 1);
    Handle rows = reshape(arange(device, 0, m, 1, at::kInt), {m, 1});
    write(p, cast(binary("eq", rows, reshape(perm, columns)), p.scalar_type()));
  }
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_lu_out(const at::Tensor& a, bool pivot, at::Tensor& p,
                                                                at::Tensor& l, at::Tensor& u) {
  TORCH_CHECK(pivot, "linalg.lu: LU without pivoting is not implemented on tpu");
  OpScope s;
  Lu r = lu_factor(read(a));
  unpack(a, r.factors, r.pivots, /*data=*/true, /*permutation=*/true, p, l, u);
  return {p, l, u};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> lu_unpack_out(const at::Tensor& factors,
                                                                const at::Tensor& pivots, bool unpack_data,
                                                                bool unpack_pivots, at::Tensor& p, at::Tensor& l,
                                                                at::Tensor& u) {
  OpScope s;
  unpack(factors, read(factors), read(pivots), unpack_data, unpack_pivots, p, l, u);
  return {p, l, u};
}

// The cross product of 3-vectors along `dim` (PyTorch's structured meta
// function broadcast the shapes into `out` and checked the size 3).
at::Tensor& linalg_cross_out(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& out) {
  OpScope s;
  int64_t d = at::maybe_wrap_dim(dim, out.dim());
  Handle a = expand(cast(read(self), out.scalar_type()), out.sizes());
  Handle b = expand(cast(read(other), out.scalar_type()), out.sizes());
  Handle ai[3], bi[3];
  for (int64_t i = 0; i < 3; ++i) {
    ai[i] = slice(a, d, i, i + 1, 1);
    bi[i] = slice(b, d, i, i + 1, 1);
  }
  Handle c[3];
  for (int i = 0; i < 3; ++i) {
    int j = (i + 1) % 3, k = (i + 2) % 3;
    c[i] = sub(mul(ai[j], bi[k]), mul(ai[k], bi[j]));
  }
  write(out, cat({c[0].get(), c[1].get(), c[2].get()}, d));
  return out;
}

}  // namespace
}  // namespace etpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace etpu;
  m.impl("linalg_cholesky_ex.L", linalg_cholesky_ex_out);
  m.impl("triangular_solve.X", triangular_solve_out);
  m.impl("linalg_solve_triangular", linalg_solve_triangular);
  m.impl("linalg_solve_triangular.out", linalg_solve_triangular_out);
  m.impl("_cholesky_solve_helper", cholesky_solve_helper);
  m.impl("cholesky_inverse", cholesky_inverse);
  m.impl("cholesky_inverse.out", cholesky_inverse_out);
  m.impl("linalg_cross.out", linalg_cross_out);
  m.impl("linalg_lu_factor_ex.out", linalg_lu_factor_ex_out);
  m.impl("linalg_lu_solve.out", linalg_lu_solve_out);
  m.impl("linalg_inv_ex.inverse", linalg_inv_ex_out);
  m.impl("_linalg_solve_ex.result", linalg_solve_ex_out);
  m.impl("_linalg_det.result", linalg_det_out);
  m.impl("_linalg_slogdet.sign", linalg_slogdet_out);
  m.impl("linalg_lu.out", linalg_lu_out);
  m.impl("lu_unpack.out", lu_unpack_out);
}
