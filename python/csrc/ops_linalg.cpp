// torch.linalg's Cholesky factor and triangular solves, and what PyTorch
// builds of them (cholesky_solve, cholesky_inverse): the runtime's
// Tensor::cholesky_ex and Tensor::solve_triangular, StableHLO's own ops.
// Their gradients are PyTorch's formulas, made of these and matmuls. And
// the cross product, elementwise.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <tuple>

#include "backend.h"

namespace etpu {
namespace {

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
  int64_t n = self.size(-1), device = device_index(self);
  Handle index = arange(device, 0, n, 1, at::kLong);
  Handle eye = cast(binary("eq", reshape(index, {n, 1}), reshape(index, {1, n})), self.scalar_type());
  Handle x = cholesky_solved(expand(eye, self.sizes()), read(self), upper);
  at::native::resize_output(out, self.sizes());
  write(out, x);
  return out;
}

at::Tensor cholesky_inverse(const at::Tensor& self, bool upper) {
  at::Tensor out = empty_tpu({0}, self.scalar_type(), self.device().index());
  return cholesky_inverse_out(self, upper, out);
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
}
