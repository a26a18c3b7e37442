"""The Cholesky factor and triangular solves (python/csrc/ops_linalg.cpp):
torch.linalg.cholesky(_ex), cholesky_solve, cholesky_inverse,
linalg.solve_triangular and triangular_solve against PyTorch CPU in every
mode, with gradients, and the errors PyTorch gives."""

import pytest
import torch
from helpers import assert_same, check, check_grad, next_op_works, rand

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")


def spd(*batch, n=4, dtype=torch.float32):
    """Symmetric positive-definite matrices [*batch, n, n], well conditioned."""
    a = rand(*batch, n, n, dtype=dtype)
    return a @ a.mT + n * torch.eye(n, dtype=dtype)


def triangular(*shape, dtype=torch.float32):
    """A matrix whose triangles both hold random numbers (a solve must read
    only one), its diagonal far from zero."""
    a = rand(*shape, dtype=dtype)
    d = torch.diagonal(a, 0, -2, -1)
    d += 3 * torch.sign(d)
    return a


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_matches_the_cpu(batch, upper):
    a = spd(*batch)
    check(lambda a: torch.linalg.cholesky(a, upper=upper), a)
    check(lambda a: torch.linalg.cholesky_ex(a, upper=upper), a)
    check(lambda a: torch.linalg.cholesky(a, upper=upper), spd(*batch, n=3, dtype=torch.float64))
    # Only the one triangle is read.
    check(lambda a: torch.linalg.cholesky((a.triu() if upper else a.tril()), upper=upper), a)
    check_grad(lambda a: torch.linalg.cholesky(a @ a.mT + 4 * torch.eye(4, device=a.device), upper=upper),
               rand(*batch, 4, 4), rtol=1e-4, atol=1e-4)


def test_cholesky_ex_reports_the_first_failing_minor():
    good = spd(n=4)
    bad = good.clone()
    bad[2, 2] = -100.0  # the leading minor of order 3 is not positive-definite
    zero_pivot = torch.diag(torch.tensor([1.0, 0.0, 2.0]))
    a = torch.stack([good, bad])
    _, info = torch.linalg.cholesky_ex(a.to("tpu"))
    assert info.dtype == torch.int32
    assert info.cpu().tolist() == torch.linalg.cholesky_ex(a).info.tolist() == [0, 3]
    assert torch.linalg.cholesky_ex(zero_pivot.to("tpu")).info.item() == 2
    # Every order, each matrix of a batch its own (found by a search over
    # the leading minors: the plugin's factor is NaN everywhere on failure).
    many = spd(9, n=9)
    for b in range(9):
        many[b, b, b] = -50.0
    for upper in [False, True]:
        expected = torch.linalg.cholesky_ex(many, upper=upper).info
        assert expected.tolist() == list(range(1, 10))
        assert torch.linalg.cholesky_ex(many.to("tpu"), upper=upper).info.cpu().tolist() == expected.tolist()
    with pytest.raises(torch.linalg.LinAlgError, match="order 3 is not positive-definite"):
        torch.linalg.cholesky(bad.to("tpu"))
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 1\)"):
        torch.linalg.cholesky(a.to("tpu"))
    next_op_works()


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_solve_triangular_matches_the_cpu(upper, left, unitriangular):
    a = triangular(2, 4, 4)
    b = rand(2, 4, 3) if left else rand(2, 3, 4)
    kwargs = dict(upper=upper, left=left, unitriangular=unitriangular)
    check(lambda a, b: torch.linalg.solve_triangular(a, b, **kwargs), a, b, rtol=1e-4, atol=1e-5)
    # Batch dims broadcast.
    check(lambda a, b: torch.linalg.solve_triangular(a, b, **kwargs), a[0], b, rtol=1e-4, atol=1e-5)
    check(lambda a, b: torch.linalg.solve_triangular(a, b, **kwargs), a, b[:1], rtol=1e-4, atol=1e-5)
    # Only the one triangle is read: the other holds random numbers.
    a_tri = a.triu() if upper else a.tril()
    assert_same(torch.linalg.solve_triangular(a.to("tpu"), b.to("tpu"), **kwargs),
                torch.linalg.solve_triangular(a_tri, b, **kwargs), rtol=1e-4, atol=1e-5)
    out = torch.empty(0, device="tpu")
    torch.linalg.solve_triangular(a.to("tpu"), b.to("tpu"), out=out, **kwargs)
    assert_same(out, torch.linalg.solve_triangular(a, b, **kwargs), rtol=1e-4, atol=1e-5)
    check_grad(lambda a, b: torch.linalg.solve_triangular(a, b, **kwargs), a, b, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_triangular_solve_matches_the_cpu(upper, transpose):
    a = triangular(3, 3, dtype=torch.float64)
    b = rand(2, 3, 2, dtype=torch.float64)
    check(lambda b, a: torch.triangular_solve(b, a, upper=upper, transpose=transpose), b, a)
    check(lambda b, a: torch.triangular_solve(b, a, upper=upper, transpose=transpose, unitriangular=True), b, a)
    check_grad(lambda b, a: torch.triangular_solve(b, a, upper=upper, transpose=transpose)[0], b, a)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse_match_the_cpu(upper):
    a = spd(2, n=4)
    factor = torch.linalg.cholesky(a, upper=upper)
    b = rand(2, 4, 3)
    check(lambda b, f: torch.cholesky_solve(b, f, upper=upper), b, factor, rtol=1e-4, atol=1e-5)
    check(lambda b, f: torch.cholesky_solve(b, f, upper=upper), b[0], factor, rtol=1e-4, atol=1e-5)
    check(lambda f: torch.cholesky_inverse(f, upper=upper), factor, rtol=1e-4, atol=1e-5)
    check(lambda f: torch.cholesky_inverse(f, upper=upper), factor[0], rtol=1e-4, atol=1e-5)
    # The inverse is the inverse (computed independently, in float64).
    inv = torch.cholesky_inverse(factor.to("tpu"), upper=upper).cpu().double()
    assert torch.allclose(inv @ a.double(), torch.eye(4, dtype=torch.float64).expand(2, 4, 4), atol=1e-4)
    check_grad(lambda b, f: torch.cholesky_solve(b, f, upper=upper), b, factor, rtol=1e-3, atol=1e-4)
    check_grad(lambda f: torch.cholesky_inverse(f, upper=upper), factor, rtol=1e-3, atol=1e-4)


def test_empty_matrices_and_batches():
    check(torch.linalg.cholesky, torch.empty(0, 3, 3))
    check(torch.linalg.cholesky_ex, torch.empty(2, 0, 0))
    check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), torch.empty(0, 2, 2), torch.empty(0, 2, 1))
    check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), torch.eye(2), torch.empty(2, 0))


def test_bad_input_is_an_error_naming_the_op_and_the_next_op_works():
    with pytest.raises(Exception, match=r"must be batches of square matrices|square"):
        torch.linalg.cholesky(torch.ones(2, 3, device="tpu"))
    with pytest.raises(Exception, match="Int|int"):
        torch.linalg.cholesky(torch.ones(2, 2, dtype=torch.int64, device="tpu"))
    a = torch.eye(3, device="tpu")
    with pytest.raises(Exception, match="triangular_solve|solve_triangular|size"):
        torch.linalg.solve_triangular(a, torch.ones(4, 2, device="tpu"), upper=True)
    with pytest.raises(Exception, match="dtype|Float|Double"):
        torch.linalg.solve_triangular(a, torch.ones(3, 2, dtype=torch.float64, device="tpu"), upper=True)
    next_op_works()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_cross_matches_the_cpu(dtype):
    a, b = rand(4, 3, 2, dtype=dtype), rand(4, 3, 2, dtype=dtype)
    check(lambda a, b: torch.linalg.cross(a, b, dim=1), a, b)
    check(lambda a, b: torch.linalg.cross(a, b, dim=-2), a, b[:1])  # broadcast
    check(lambda a, b: torch.cross(a, b, dim=1), a, b)
    check(lambda a, b: torch.linalg.cross(a, b), rand(5, 3, dtype=dtype), rand(5, 3, dtype=dtype))
    if dtype.is_floating_point:
        check_grad(lambda a, b: torch.linalg.cross(a, b, dim=1), a, b)
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(a.to("tpu"), b.to("tpu"), dim=2)
    next_op_works()


def test_vdot_matches_the_cpu():
    check(torch.vdot, rand(7), rand(7))
    check(torch.vdot, rand(5, dtype=torch.int64), rand(5, dtype=torch.int64))
    check_grad(torch.vdot, rand(7), rand(7))
    with pytest.raises(RuntimeError, match="vdot: expected 1-D"):
        torch.vdot(torch.ones(2, 2, device="tpu"), torch.ones(2, 2, device="tpu"))
    next_op_works()


def well_conditioned(*shape, dtype=torch.float32):
    """Random square matrices kept away from singular."""
    a = rand(*shape, dtype=dtype)
    return a + shape[-1] * torch.eye(shape[-1], dtype=dtype) * torch.sign(rand(*shape[:-1], dtype=dtype)).unsqueeze(-1)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (2, 2, 3, 3), (5, 3), (3, 5), (2, 4, 6)])
def test_lu_factor_and_lu_match_the_cpu(shape):
    a = rand(*shape)
    check(torch.linalg.lu_factor_ex, a, rtol=1e-4, atol=1e-5)
    check(torch.linalg.lu, a, rtol=1e-4, atol=1e-5)
    check(lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)), a, rtol=1e-4, atol=1e-5)
    check(lambda a: torch.linalg.lu_factor(a, pivot=True), a.double())
    p, l, u = torch.linalg.lu(a.to("tpu"))
    assert_same(p @ l @ u, a, rtol=1e-4, atol=1e-5)
    if shape[-1] == shape[-2]:
        check_grad(lambda a: torch.linalg.lu_factor(a)[0], a, rtol=1e-3, atol=1e-4)
    check_grad(lambda a: torch.linalg.lu(a)[1], a, rtol=1e-3, atol=1e-4)


def test_lu_of_a_singular_matrix_reports_the_zero_pivot():
    a = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])  # row 2 = 2 row 1
    batch = torch.stack([torch.eye(3), a])
    check(torch.linalg.lu_factor_ex, batch)
    assert torch.linalg.lu_factor_ex(batch.to("tpu")).info.cpu().tolist() == [0, 3]
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.linalg.inv(a.to("tpu"))
    with pytest.raises(RuntimeError, match="without pivoting"):
        torch.linalg.lu_factor(a.to("tpu"), pivot=False)
    check(torch.linalg.det, batch)  # 0 here, a rounding error from 0 on the CPU
    next_op_works()


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_matches_the_cpu(left, adjoint):
    a = well_conditioned(2, 4, 4)
    b = rand(2, 4, 3) if left else rand(2, 3, 4)
    factors, pivots = torch.linalg.lu_factor(a)
    check(lambda f, p, b: torch.linalg.lu_solve(f, p, b, left=left, adjoint=adjoint), factors, pivots, b,
          rtol=1e-4, atol=1e-5)
    check(lambda f, p, b: torch.linalg.lu_solve(f, p, b, left=left, adjoint=adjoint), factors, pivots, b[:1],
          rtol=1e-4, atol=1e-5)
    check_grad(lambda f, b: torch.linalg.lu_solve(f, pivots.to(f.device), b, left=left, adjoint=adjoint),
               factors, b, rtol=1e-3, atol=1e-4)


def symmetric_indefinite(*shape, dtype=torch.float32):
    """Symmetric matrices with a small diagonal: Bunch-Kaufman pivoting takes
    2x2 blocks and row swaps on them. Their upper triangle holds other
    numbers (LDL reads only the lower one)."""
    a = rand(*shape, dtype=dtype)
    a = a.tril(-1) + a.tril(-1).mT + 0.1 * torch.diag_embed(torch.diagonal(a, 0, -2, -1))
    return a + 100 * torch.ones_like(a).triu(1)


@pytest.mark.parametrize("shape", [(5, 5), (4, 6, 6), (2, 2, 3, 3), (1, 1), (0, 0), (0, 2, 2)])
def test_ldl_factor_matches_lapack_pivots_and_all(shape):
    a = symmetric_indefinite(*shape)
    for dtype in [torch.float32, torch.float64]:
        ld, pivots, info = check(torch.linalg.ldl_factor_ex, a.to(dtype), rtol=1e-4, atol=1e-5)
        assert pivots.dtype == info.dtype == torch.int32
        check(lambda a: torch.linalg.ldl_factor(a, hermitian=True), a.to(dtype), rtol=1e-4, atol=1e-5)
    if shape[-1] >= 5:
        # Both kinds of pivot were taken (else this test checks too little).
        pivots = torch.linalg.ldl_factor_ex(a).pivots
        steps = torch.arange(1, shape[-1] + 1, dtype=torch.int32)
        assert (pivots < 0).any() and ((pivots > 0) & (pivots != steps)).any(), pivots


def test_ldl_factor_ex_reports_a_zero_column():
    a = torch.stack([torch.eye(3), torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 2.0], [0.0, 2.0, 1.0]])])
    check(torch.linalg.ldl_factor_ex, a)
    assert torch.linalg.ldl_factor_ex(a.to("tpu")).info.cpu().tolist() == [0, 1]
    next_op_works()


@pytest.mark.parametrize("shape, rhs", [((5, 5), (5, 2)), ((3, 4, 4), (3, 4, 3)), ((4, 4), (2, 4, 1)), ((0, 0), (0, 2))])
def test_ldl_solve_matches_the_cpu(shape, rhs):
    a, b = symmetric_indefinite(*shape, dtype=torch.float64), rand(*rhs, dtype=torch.float64)
    ld, pivots = torch.linalg.ldl_factor(a)
    x = check(torch.linalg.ldl_solve, ld, pivots, b)
    symmetric = a.tril() + a.tril(-1).mT
    torch.testing.assert_close(symmetric @ x.cpu(), b)
    check(torch.linalg.ldl_solve, ld.float(), pivots, b.float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_inv_solve_det_slogdet_match_the_cpu(batch):
    a = well_conditioned(*batch, 4, 4)
    check(torch.linalg.inv, a, rtol=1e-4, atol=1e-5)
    check(torch.linalg.inv_ex, a, rtol=1e-4, atol=1e-5)
    check(torch.inverse, a.double())
    check(torch.linalg.det, a, rtol=1e-4, atol=1e-5)
    check(torch.det, a.double())
    check(torch.linalg.slogdet, a, rtol=1e-4, atol=1e-5)
    check(torch.logdet, a @ a.mT, rtol=1e-4, atol=1e-5)
    b = rand(*batch, 4, 2)
    check(torch.linalg.solve, a, b, rtol=1e-4, atol=1e-5)
    check(lambda a, b: torch.linalg.solve(a, b, left=False), a, b.mT, rtol=1e-4, atol=1e-5)
    check(torch.linalg.solve, a, rand(*batch, 4), rtol=1e-4, atol=1e-5)  # one vector per matrix
    check(torch.linalg.solve, a, rand(4), rtol=1e-4, atol=1e-5)  # one vector for all
    check(torch.linalg.solve_ex, a, b, rtol=1e-4, atol=1e-5)
    # The inverse is the inverse (checked in float64 on the host).
    inv = torch.linalg.inv(a.to("tpu")).cpu().double()
    assert torch.allclose(inv @ a.double(), torch.eye(4, dtype=torch.float64).expand(*batch, 4, 4), atol=1e-4)
    for fn in [torch.linalg.inv, torch.linalg.det, lambda a: torch.linalg.slogdet(a).logabsdet]:
        check_grad(fn, a, rtol=1e-3, atol=1e-4)
    check_grad(torch.linalg.solve, a, b, rtol=1e-3, atol=1e-4)


def test_lu_family_on_empty_input():
    check(torch.linalg.lu_factor_ex, torch.empty(0, 3, 3))
    check(torch.linalg.inv, torch.empty(2, 0, 0))
    check(torch.linalg.det, torch.empty(0, 2, 2))
    check(torch.linalg.det, torch.empty(0, 0))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
def test_qr_family_matches_the_cpu(shape):
    a = rand(*shape)
    check(torch.geqrf, a, rtol=1e-4, atol=1e-5)
    for mode in ["reduced", "complete", "r"]:
        check(lambda a: torch.linalg.qr(a, mode=mode), a, rtol=1e-4, atol=1e-5)
    check(torch.linalg.qr, a.double())
    q, r = torch.linalg.qr(a.to("tpu"))
    assert_same(q @ r, a, rtol=1e-4, atol=1e-5)
    if shape[-2] >= shape[-1]:
        check_grad(lambda a: torch.linalg.qr(a)[0], a, rtol=1e-3, atol=1e-4)
        check_grad(lambda a: torch.linalg.qr(a)[1], a, rtol=1e-3, atol=1e-4)
        factors, tau = torch.geqrf(a)
        check(torch.linalg.householder_product, factors, tau, rtol=1e-4, atol=1e-5)
        check_grad(torch.linalg.householder_product, factors, tau, rtol=1e-3, atol=1e-4)
        m = shape[-2]
        for left in [True, False]:
            for transpose in [False, True]:
                c = rand(*shape[:-2], m, 2) if left else rand(*shape[:-2], 2, m)
                check(lambda f, t, c: torch.ormqr(f, t, c, left, transpose), factors, tau, c, rtol=1e-4, atol=1e-5)


def test_orthogonal_init_runs_on_the_device():
    w = torch.empty(6, 4, device="tpu")
    torch.nn.init.orthogonal_(w)
    assert_same(w.T @ w, torch.eye(4), rtol=1e-4, atol=1e-5)


def symmetric(*batch, n=4, dtype=torch.float32):
    a = rand(*batch, n, n, dtype=dtype)
    return a + a.mT


def sign_free(vectors):
    """Eigen or singular vectors with each column's sign fixed (its largest
    entry positive): they are unique only up to sign."""
    pick = vectors.abs().argmax(dim=-2, keepdim=True)
    return vectors * torch.gather(vectors, -2, pick).sign()


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_and_eigvalsh_match_the_cpu(batch, uplo):
    a = symmetric(*batch, n=5)
    # Only the one triangle is read: the other holds random numbers.
    a_read = a + (rand(*batch, 5, 5).triu(1) if uplo == "L" else rand(*batch, 5, 5).tril(-1))
    check(lambda a: torch.linalg.eigvalsh(a, UPLO=uplo), a_read, rtol=1e-4, atol=1e-5)
    check(lambda a: torch.linalg.eigh(a, UPLO=uplo)[0], a_read, rtol=1e-4, atol=1e-5)
    check(lambda a: sign_free(torch.linalg.eigh(a, UPLO=uplo)[1]), a_read, rtol=1e-4, atol=1e-5)
    check(lambda a: sign_free(torch.linalg.eigh(a)[1]), symmetric(*batch, n=3, dtype=torch.float64))
    # Gradients of the values, and of sign-free uses of the vectors.
    check_grad(lambda a: torch.linalg.eigvalsh(a + a.mT), rand(*batch, 4, 4), rtol=1e-4, atol=1e-4)
    check_grad(lambda a: torch.linalg.eigh(a + a.mT)[1].abs(), rand(*batch, 4, 4), rtol=1e-3, atol=1e-4)


def test_eigh_of_repeated_eigenvalues_gives_an_orthonormal_basis():
    # Eigenvalues 2, 2, 2, 5: any basis of the repeated ones is right, so
    # the check is a = v diag(w) v^T with v orthonormal.
    q, _ = torch.linalg.qr(rand(4, 4, dtype=torch.float64))
    for dtype in [torch.float32, torch.float64]:
        a = (q @ torch.diag(torch.tensor([2.0, 2.0, 2.0, 5.0], dtype=torch.float64)) @ q.T).to(dtype)
        w, v = torch.linalg.eigh(a.to("tpu"))
        assert_same(w, torch.tensor([2.0, 2.0, 2.0, 5.0], dtype=dtype), rtol=1e-5, atol=1e-5)
        assert_same(v.mT @ v, torch.eye(4, dtype=dtype), rtol=1e-5, atol=1e-5)
        assert_same(v @ torch.diag_embed(w) @ v.mT, a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 2, 3, 3)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_matches_the_cpu(shape, full_matrices):
    a = rand(*shape)
    k = min(shape[-2:])
    check(torch.linalg.svdvals, a, rtol=1e-4, atol=1e-5)
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=full_matrices)
    cu, cs, cvh = torch.linalg.svd(a, full_matrices=full_matrices)
    assert (u.shape, s.shape, vh.shape) == (cu.shape, cs.shape, cvh.shape)
    assert_same(s, cs, rtol=1e-4, atol=1e-5)
    # The first k singular vectors are unique up to a sign shared by u's and
    # v's column; the completions of full_matrices only need be orthonormal.
    signs = (u[..., :k] * cu[..., :k].to("tpu")).sum(-2, keepdim=True).sign()
    assert_same(u[..., :k] * signs, cu[..., :k], rtol=1e-4, atol=1e-5)
    assert_same(vh[..., :k, :] * signs.mT, cvh[..., :k, :], rtol=1e-4, atol=1e-5)
    assert_same(u.mT @ u, torch.eye(u.shape[-1]).expand(u.mT.shape[:-1] + (u.shape[-1],)), rtol=1e-4, atol=1e-5)
    assert_same(vh @ vh.mT, torch.eye(vh.shape[-2]).expand(vh.shape[:-1] + (vh.shape[-2],)), rtol=1e-4, atol=1e-5)
    assert_same(u[..., :k] @ torch.diag_embed(s) @ vh[..., :k, :], a, rtol=1e-4, atol=1e-5)
    check(lambda a: sign_free(torch.linalg.svd(a.double(), full_matrices=False)[0]), a)
    # Gradients: of the values, and of u diag(s) vh (sign-free).
    check_grad(torch.linalg.svdvals, a, rtol=1e-3, atol=1e-4)
    check_grad(lambda a: (lambda u, s, vh: u @ torch.diag_embed(s) @ vh)(*torch.linalg.svd(a, full_matrices=False)),
               a, rtol=1e-3, atol=1e-4)


def test_what_is_made_of_the_svd_and_eigh_matches_the_cpu():
    a = rand(4, 3)
    rank_two = rand(5, 2) @ rand(2, 4)
    for m in [a, rank_two]:
        check(torch.linalg.pinv, m, rtol=1e-3, atol=1e-4)
        check(torch.linalg.matrix_rank, m)
        check(lambda m: torch.linalg.matrix_norm(m, "nuc"), m, rtol=1e-4, atol=1e-5)
        check(lambda m: torch.linalg.matrix_norm(m, 2), m, rtol=1e-4, atol=1e-5)
    check(torch.linalg.cond, a, rtol=1e-3, atol=1e-4)  # a singular matrix's is rounding noise
    s = rank_two @ rank_two.T  # symmetric, rank 2
    check(lambda s: torch.linalg.matrix_rank(s, hermitian=True), s)
    check(lambda s: torch.linalg.pinv(s, hermitian=True), s, rtol=1e-3, atol=1e-4)
    check_grad(torch.linalg.pinv, a, rtol=1e-3, atol=1e-4)


def test_svd_and_eigh_of_empty_input_and_bad_input():
    check(torch.linalg.svdvals, rand(0, 3, 2))
    check(torch.linalg.eigvalsh, rand(2, 0, 0))
    with pytest.raises(RuntimeError, match=r"eigh: the input is int64\[3, 3\], expected float32 or float64"):
        torch.linalg.eigvalsh(torch.ones(3, 3, dtype=torch.int64, device="tpu"))
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.eigh(rand(3, 4).to("tpu"))
    next_op_works()


@pytest.mark.parametrize("shape_a,shape_b", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 4, 4), (2, 4, 1)),
                                             ((6, 2), (6,))])
@pytest.mark.parametrize("driver", [None, "gelsd", "gels"])
def test_lstsq_matches_the_cpu(shape_a, shape_b, driver):
    a, b = rand(*shape_a), rand(*shape_b)
    if driver == "gels" and shape_a[-2] < shape_a[-1]:
        return  # the CPU's gels needs full column rank for a wide matrix's minimum norm
    check(lambda a, b: torch.linalg.lstsq(a, b, driver=driver), a, b, rtol=1e-4, atol=1e-5)
    check_grad(lambda a, b: torch.linalg.lstsq(a, b, driver=driver).solution, a, b, rtol=1e-3, atol=1e-4)


def test_lstsq_of_a_rank_deficient_matrix_is_the_minimum_norm_solution():
    a = rand(6, 2) @ rand(2, 4)  # rank 2
    b = rand(6, 3)
    check(lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd"), a, b, rtol=1e-3, atol=1e-4)
    x = torch.linalg.lstsq(a.to("tpu"), b.to("tpu")).solution
    assert_same(x, torch.linalg.pinv(a) @ b, rtol=1e-3, atol=1e-4)
    assert torch.linalg.lstsq(a.to("tpu"), b.to("tpu")).rank.item() == 2


def test_polar_matrix_sqrth_and_matrix_exp_match_the_cpu():
    for shape in [(4, 4), (5, 3), (2, 3, 3)]:
        check(torch.linalg.polar, rand(*shape), rtol=1e-4, atol=1e-5)
    check_grad(lambda a: torch.linalg.polar(a)[0], rand(4, 3), rtol=1e-3, atol=1e-4)
    spd_batch = spd(2, n=4)
    check(torch.linalg.matrix_sqrth, spd_batch, rtol=1e-4, atol=1e-5)
    root = torch.linalg.matrix_sqrth(spd_batch.to("tpu"))
    assert_same(root @ root, spd_batch, rtol=1e-4, atol=1e-4)
    check_grad(lambda a: torch.linalg.matrix_sqrth(a @ a.mT + 4 * torch.eye(4, device=a.device)), rand(4, 4),
               rtol=1e-3, atol=1e-4)
    # matrix_exp against the CPU's float64 (its float32 squarings are the
    # less accurate ones at larger norms), and at small norms in float32.
    for scale in [0.1, 1.0, 8.0]:
        a = rand(3, 4, 4) * scale
        assert_same(torch.linalg.matrix_exp(a.to("tpu")), torch.linalg.matrix_exp(a.double()).float(),
                    rtol=1e-4, atol=1e-4)
    check(torch.linalg.matrix_exp, rand(4, 4) * 0.1, rtol=1e-5, atol=1e-6)
    check(torch.linalg.matrix_exp, rand(3, 3, dtype=torch.float64))
    check_grad(torch.linalg.matrix_exp, rand(3, 3) * 0.5, rtol=1e-3, atol=1e-4)
