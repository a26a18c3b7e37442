// torch.linalg's Cholesky factor and triangular solves, and what PyTorch
// builds of them (cholesky_solve, cholesky_inverse): the runtime's
// Tensor::cholesky_ex and Tensor::solve_triangular, StableHLO's own ops.
// LU with partial pivoting (the runtime's Tensor::lu_factor_ex, a loop of
// fusion's) and what is made of it: lu_solve, inv, solve, det, slogdet, lu,
// lu_unpack. Householder QR (geqrf, ormqr, a loop each) and what is made of
// it: householder_product, linalg.qr. The symmetric eigendecomposition and
// the SVD (the runtime's Tensor::eigh and Tensor::svd, made of XLA's Eigh):
// eigh, eigvalsh, svd, svdvals and so pinv, matrix_rank, norms of matrices,
// cond, the low-rank approximations; lstsq, polar and matrix_sqrth made of
// them, and matrix_exp (scaling and squaring of a Taylor polynomial). Their gradients are PyTorch's
// formulas, made of these and matmuls. And the cross product, elementwise.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string>
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

// x with a a^H x = b (lower factor a) or a^H a x = b (upper): two
// triangular solves, the one with a^H as a transposed solve of conj(a) (the
// runtime's solve transposes; for real factors a^H is a^T).
Handle cholesky_solved(const Handle& b, const Handle& factor, bool upper) {
  bool complex = at::isComplexType(scalar_type(dtype_of(factor)));
  Handle conjugated = complex ? unary("conj_physical", factor) : Handle();
  const Handle& adjoint_source = complex ? conjugated : factor;
  Handle y = solve_triangular(upper ? adjoint_source : factor, b, upper, /*left=*/true, /*unit_diagonal=*/false,
                              /*transpose=*/upper);
  return solve_triangular(upper ? factor : adjoint_source, y, upper, /*left=*/true, /*unit_diagonal=*/false,
                          /*transpose=*/!upper);
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

// ------------------------------------------------------------------ LDL ----
// Bunch-Kaufman LDL^T (LAPACK's sytrf, lower). `hermitian` only differs for
// complex matrices, which tpu does not have.

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_ldl_factor_ex_out(const at::Tensor& a, bool hermitian,
                                                                           bool check_errors, at::Tensor& factors,
                                                                           at::Tensor& pivots, at::Tensor& info) {
  {
    OpScope s;
    Handle f, p, i;
    check(etpu_ldl_factor(read(a).get(), origin(), f.out(), p.out(), i.out()));
    write(factors, f);
    write(pivots, p);
    write(info, i);
  }
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.ldl_factor_ex", a.dim() == 2);
  return {factors, pivots, info};
}

at::Tensor& linalg_ldl_solve_out(const at::Tensor& factors, const at::Tensor& pivots, const at::Tensor& b,
                                 bool hermitian, at::Tensor& out) {
  OpScope s;
  Handle x;
  check(etpu_ldl_solve(read(factors).get(), read(pivots).get(), read(b).get(), origin(), x.out()));
  write(out, x);
  return out;
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

// det and slogdet factor A^T when A is real and contiguous (PyTorch's CPU
// kernels do: LAPACK wants columns, and det(A^T) = det(A)); their backward
// formulas expect the factors of the same matrix. Of complex matrices they
// expect A's own factors (the solve they make is with A^H, and (A^T)^H is
// conj(A)): checked against the CPU's gradients.
Lu determinant_factors(const at::Tensor& a) {
  return lu_factor(read(a.is_contiguous() && !a.is_complex() ? a.mT() : a));
}

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
  // Of complex matrices, the sign is a unit complex number (sgn: z / |z|).
  Handle signs = unary(a.is_complex() ? "sgn" : "sign", diagonal);
  write(sign, mul(reduce("prod", signs, {-1}, false), permutation_sign));
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

// ------------------------------------------------------------------- QR ----

std::pair<Handle, Handle> geqrf(const Handle& a) {
  std::pair<Handle, Handle> r;
  check(etpu_geqrf(a.get(), origin(), r.first.out(), r.second.out()));
  return r;
}

Handle ormqr(const Handle& reflectors, const Handle& tau, const Handle& c, bool left, bool transpose) {
  Handle h;
  check(etpu_ormqr(reflectors.get(), tau.get(), c.get(), left, transpose, origin(), h.out()));
  return h;
}

std::tuple<at::Tensor&, at::Tensor&> geqrf_out(const at::Tensor& self, at::Tensor& a, at::Tensor& tau) {
  OpScope s;
  auto [factors, scales] = geqrf(read(self));
  at::native::resize_output(a, self.sizes());
  at::native::resize_output(tau, dims_of(scales));
  write(a, factors);
  write(tau, scales);
  return {a, tau};
}

std::tuple<at::Tensor, at::Tensor> geqrf_fn(const at::Tensor& self) {
  at::Tensor a = empty_tpu({0}, self.scalar_type(), self.device().index());
  at::Tensor tau = empty_tpu({0}, self.scalar_type(), self.device().index());
  geqrf_out(self, a, tau);
  return {a, tau};
}

at::Tensor& ormqr_out(const at::Tensor& self, const at::Tensor& tau, const at::Tensor& c, bool left, bool transpose,
                      at::Tensor& out) {
  OpScope s;
  Handle x = ormqr(read(self), read(tau), read(c), left, transpose);
  at::native::resize_output(out, c.sizes());
  write(out, x);
  return out;
}

at::Tensor ormqr_fn(const at::Tensor& self, const at::Tensor& tau, const at::Tensor& c, bool left, bool transpose) {
  at::Tensor out = empty_tpu({0}, c.scalar_type(), c.device().index());
  return ormqr_out(self, tau, c, left, transpose, out);
}

// q's first n columns: the reflectors applied to the m x n identity.
at::Tensor& householder_product_out(const at::Tensor& input, const at::Tensor& tau, at::Tensor& out) {
  OpScope s;
  TORCH_CHECK(input.dim() >= 2, "torch.linalg.householder_product: input must have at least 2 dimensions.");
  TORCH_CHECK(input.size(-2) >= input.size(-1),
              "torch.linalg.householder_product: input.shape[-2] must be greater than or equal to input.shape[-1]");
  TORCH_CHECK(input.size(-1) >= tau.size(-1),
              "torch.linalg.householder_product: input.shape[-1] must be greater than or equal to tau.shape[-1]");
  Handle eye = expand(identity(device_index(input), input.size(-2), input.size(-1), input.scalar_type()),
                      input.sizes());
  Handle q = ormqr(read(input), read(tau), eye, /*left=*/true, /*transpose=*/false);
  at::native::resize_output(out, input.sizes());
  write(out, q);
  return out;
}

at::Tensor householder_product(const at::Tensor& input, const at::Tensor& tau) {
  at::Tensor out = empty_tpu({0}, input.scalar_type(), input.device().index());
  return householder_product_out(input, tau, out);
}

// linalg.qr (PyTorch's meta function checked the mode and sized Q and R):
// q from the reflectors applied to an identity, r the factors' upper part.
std::tuple<at::Tensor&, at::Tensor&> linalg_qr_out(const at::Tensor& a, c10::string_view mode, at::Tensor& q,
                                                   at::Tensor& r) {
  OpScope s;
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n), rank = a.dim(), device = device_index(a);
  bool complete = mode == "complete";
  auto [factors, tau] = geqrf(read(a));
  if (mode != "r") {
    int64_t q_cols = complete ? m : k;
    std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end() - 2);
    shape.insert(shape.end(), {m, q_cols});
    Handle eye = expand(identity(device, m, q_cols, a.scalar_type()), shape);
    write(q, ormqr(slice(factors, rank - 1, 0, k, 1), tau, eye, /*left=*/true, /*transpose=*/false));
  }
  int64_t rows = complete ? m : k;
  Handle zero = full(device, {}, 0, a.scalar_type());
  write(r, where(index_compare(device, "le", rows, n), slice(factors, rank - 2, 0, rows, 1), zero));
  return {q, r};
}

// ------------------------------------------------- eigh and the SVD ----

// linalg.eigh and eigvalsh (PyTorch's meta function sized the outputs:
// eigenvectors empty without compute_v).
std::tuple<at::Tensor&, at::Tensor&> linalg_eigh_out(const at::Tensor& a, c10::string_view uplo, bool compute_v,
                                                     at::Tensor& eigenvalues, at::Tensor& eigenvectors) {
  OpScope s;
  bool upper = uplo == "U" || uplo == "u";
  Handle values, vectors;
  check(etpu_eigh(read(a).get(), upper, origin(), values.out(), compute_v ? vectors.out() : nullptr));
  write(eigenvalues, values);
  if (compute_v) write(eigenvectors, vectors);
  return {eigenvalues, eigenvectors};
}

// linalg.svd, svdvals and what is made of them (pinv, matrix_rank, the
// nuclear norm, cond). `driver` names a cuSOLVER routine; PyTorch refuses it
// on other devices, so it is ignored here.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_svd_out(const at::Tensor& a, bool full_matrices,
                                                                 bool compute_uv,
                                                                 std::optional<c10::string_view> driver,
                                                                 at::Tensor& u, at::Tensor& s, at::Tensor& vh) {
  OpScope scope;
  (void)driver;
  Handle left, values, right;
  check(etpu_svd(read(a).get(), full_matrices, origin(), compute_uv ? left.out() : nullptr, values.out(),
                 compute_uv ? right.out() : nullptr));
  write(s, values);
  if (compute_uv) {
    write(u, left);
    write(vh, right);
  }
  return {u, s, vh};
}

// ------------------------------------ made of the SVD and eigh (at:: calls) ----

// linalg.lstsq as the CPU computes it (its default driver, gelsy, and gelsd,
// gelss, gels): the minimum-norm least-squares solution from the SVD,
// singular values below rcond * the largest cut (rcond defaults to eps *
// max(m, n), as the CPU's); the rank for every driver but gels; the singular
// values for gelsd and gelss; the residuals (squared, per column of b) when
// m > n from gels, and from gelsd and gelss when every matrix has full rank.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> linalg_lstsq_out(
    const at::Tensor& a, const at::Tensor& b, std::optional<double> rcond, std::optional<c10::string_view> driver,
    at::Tensor& solution, at::Tensor& residuals, at::Tensor& rank, at::Tensor& singular_values) {
  OpScope scope;
  std::string name = driver.has_value() ? std::string(*driver) : "gelsy";
  TORCH_CHECK(name == "gels" || name == "gelsy" || name == "gelsd" || name == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  TORCH_CHECK(a.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK((at::isFloatingType(a.scalar_type()) || a.is_complex()) && a.scalar_type() == b.scalar_type(),
              "torch.linalg.lstsq: Expected input and b to have the same dtype, a float or complex one, but got ",
              a.scalar_type(), " and ", b.scalar_type());
  const bool vector = b.dim() == a.dim() - 1;
  at::Tensor rhs = vector ? b.unsqueeze(-1) : b;
  int64_t m = a.size(-2), n = a.size(-1);
  TORCH_CHECK(rhs.size(-2) == m, "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
  bool wide = a.scalar_type() == at::kDouble || a.scalar_type() == at::kComplexDouble;
  double eps = wide ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
  double cut = rcond.has_value() && *rcond > 0 ? *rcond : eps * std::max(m, n);
  auto [u, sv, vh] = at::linalg_svd(a, /*full_matrices=*/false);
  at::Tensor largest = std::get<0>(at::max(sv, -1, /*keepdim=*/true));
  at::Tensor kept = sv > largest * cut;
  at::Tensor inverse = at::where(kept, sv.reciprocal(), at::zeros({}, sv.options()));
  at::Tensor x = at::matmul(vh.mH(), inverse.unsqueeze(-1) * at::matmul(u.mH(), rhs));
  at::Tensor r = kept.sum(-1);
  at::native::resize_output(solution, vector ? x.squeeze(-1).sizes() : x.sizes());
  solution.copy_(vector ? x.squeeze(-1) : x);
  if (name != "gels") {
    at::native::resize_output(rank, r.sizes());
    rank.copy_(r);
  } else {
    at::native::resize_output(rank, {0});
  }
  if (name == "gelsd" || name == "gelss") {
    at::native::resize_output(singular_values, sv.sizes());
    singular_values.copy_(sv);
  } else {
    at::native::resize_output(singular_values, {0});
  }
  // As the CPU: residuals when m > n, not from gelsy, and from gelsd and
  // gelss only when every matrix has full rank (one host read, as the CPU's).
  bool full = m > n && name != "gelsy" && (name == "gels" || (r == n).all().item<bool>());
  if (full) {
    at::Tensor res = (at::matmul(a, x) - rhs).abs().pow(2).sum(-2);
    // A vector b keeps its one column here, as on the CPU.
    at::native::resize_output(residuals, res.sizes());
    residuals.copy_(res);
  } else {
    at::native::resize_output(residuals, {0});
  }
  return {solution, residuals, rank, singular_values};
}

// linalg.polar (m >= n): a = u h with u = w vh and h = vh^H diag(s) vh from
// the reduced SVD a = w diag(s) vh.
std::tuple<at::Tensor&, at::Tensor&> linalg_polar_out(const at::Tensor& a, at::Tensor& u, at::Tensor& h) {
  OpScope scope;
  TORCH_CHECK(a.dim() >= 2 && a.size(-2) >= a.size(-1),
              "torch.linalg.polar: expected a matrix of shape (*, m, n) with m >= n, but got ", a.sizes());
  auto [w, sv, vh] = at::linalg_svd(a, /*full_matrices=*/false);
  at::Tensor unitary = at::matmul(w, vh), positive = at::matmul(vh.mH() * sv.unsqueeze(-2), vh);
  at::native::resize_output(u, unitary.sizes());
  at::native::resize_output(h, positive.sizes());
  u.copy_(unitary);
  h.copy_(positive);
  return {u, h};
}

// linalg.matrix_sqrth: v diag(sqrt(w)) v^H from eigh of the lower triangle.
at::Tensor& linalg_matrix_sqrth_out(const at::Tensor& a, at::Tensor& out) {
  OpScope scope;
  auto [w, v] = at::linalg_eigh(a, "L");
  at::Tensor root = at::matmul(v * w.sqrt().unsqueeze(-2), v.mH());
  at::native::resize_output(out, root.sizes());
  return out.copy_(root);
}

at::Tensor linalg_matrix_sqrth(const at::Tensor& a) {
  at::Tensor out = at::empty({0}, a.options());
  return linalg_matrix_sqrth_out(a, out);
}

// linalg.matrix_exp by scaling and squaring, in float64: a / 2^s with its
// 1-norm at most 1/2 (s from the largest norm of the batch, one host read),
// its Taylor polynomial of degree 16 by Horner's rule (the remainder is below
// 1e-19), then s squarings.
at::Tensor linalg_matrix_exp(const at::Tensor& a) {
  OpScope scope;
  TORCH_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2),
              "linalg.matrix_exp: Expected a square matrix or a batch of square matrices, but got ", a.sizes());
  TORCH_CHECK(at::isFloatingType(a.scalar_type()) || a.is_complex(),
              "linalg.matrix_exp: Expected a floating point or complex tensor, got ", a.scalar_type());
  if (a.numel() == 0) return a.clone();
  // Narrower floats compute in float64 (complex numbers in complex128): the
  // squarings multiply the rounding errors of the polynomial by up to 2^s.
  at::Tensor wide = a.to(a.is_complex() ? at::kComplexDouble : at::kDouble);
  at::Tensor eye = at::eye(a.size(-1), wide.options()).expand(a.sizes());
  double norm = wide.abs().sum(-2).amax().item<double>();
  int squarings = 0;
  if (std::isfinite(norm) && norm > 0.5) squarings = static_cast<int>(std::ceil(std::log2(norm / 0.5)));
  at::Tensor x = squarings > 0 ? wide / std::ldexp(1.0, squarings) : wide;
  at::Tensor t = eye;
  for (int k = 16; k >= 1; --k) t = eye + at::matmul(x, t) / static_cast<double>(k);
  for (int i = 0; i < squarings; ++i) t = at::matmul(t, t);
  return t.to(a.scalar_type());
}

at::Tensor& linalg_matrix_exp_out(const at::Tensor& a, at::Tensor& out) {
  at::Tensor r = etpu::linalg_matrix_exp(a);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
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
  m.impl("linalg_ldl_factor_ex.out", linalg_ldl_factor_ex_out);
  m.impl("linalg_ldl_solve.out", linalg_ldl_solve_out);
  m.impl("geqrf", geqrf_fn);
  m.impl("geqrf.a", geqrf_out);
  m.impl("ormqr", ormqr_fn);
  m.impl("ormqr.out", ormqr_out);
  m.impl("linalg_householder_product", householder_product);
  m.impl("linalg_householder_product.out", householder_product_out);
  m.impl("linalg_qr.out", linalg_qr_out);
  m.impl("_linalg_eigh.eigenvalues", linalg_eigh_out);
  m.impl("_linalg_svd.U", linalg_svd_out);
  m.impl("linalg_lstsq.out", linalg_lstsq_out);
  m.impl("linalg_polar.out", linalg_polar_out);
  m.impl("linalg_matrix_sqrth", linalg_matrix_sqrth);
  m.impl("linalg_matrix_sqrth.out", linalg_matrix_sqrth_out);
  m.impl("linalg_matrix_exp", linalg_matrix_exp);
  m.impl("linalg_matrix_exp.out", linalg_matrix_exp_out);
}
