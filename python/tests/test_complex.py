"""Complex tensors on tpu (complex64, complex128) against PyTorch's CPU, in
every mode and with no fallback: construction and copies, the lazy conjugate
and negative bits, view_as_real / view_as_complex, elementwise math with
complex Python numbers, matmul, reductions, every torch.fft function
(including stft), gradients through them, and the rotary embedding of the
original Llama code, forward and backward."""

import io

import pytest
import torch

import eagertpu

pytestmark = pytest.mark.usefixtures("mode", "no_fallbacks")

COMPLEX = [torch.complex64, torch.complex128]


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype in (torch.complex64, torch.float32) else dict(rtol=1e-12, atol=1e-12)


def same(f, *args, **kw):
    """f on tpu against f on the CPU: values, dtype and shape."""
    want = f(*args)
    got = f(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    assert got.device.type == "tpu"
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    torch.testing.assert_close(got.cpu(), want, **(kw or tol(want.dtype)))


def randc(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_tensors_round_trip_and_build(dtype):
    z = randc(3, 4, dtype=dtype)
    assert torch.equal(z.to("tpu").cpu(), z)
    t = torch.zeros(2, 3, dtype=dtype, device="tpu")
    assert t.dtype == dtype and torch.equal(t.cpu(), torch.zeros(2, 3, dtype=dtype))
    same(lambda r, i: torch.complex(r, i), z.real.contiguous(), z.imag.contiguous())
    same(lambda a, b: torch.polar(a.abs(), b), z.real.contiguous(), z.imag.contiguous())
    # Full, arange-free factories and a fill with a complex number.
    f = torch.full((2, 2), 1 - 2j, dtype=dtype, device="tpu")
    assert torch.equal(f.cpu(), torch.full((2, 2), 1 - 2j, dtype=dtype))


@pytest.mark.filterwarnings("ignore:Casting complex values to real")
@pytest.mark.parametrize("dtype", COMPLEX)
def test_elementwise_math_and_complex_numbers(dtype):
    a, b = randc(4, 5, dtype=dtype, seed=1), randc(4, 5, dtype=dtype, seed=2)
    r = torch.randn(4, 5, dtype=torch.float64 if dtype == torch.complex128 else torch.float32)
    for f in [
        torch.add, torch.sub, torch.mul, torch.div,
        lambda x, y: x * 1j + y / (2 - 0.5j),
        lambda x, y: torch.pow(x, 2) + y**0.5,
        lambda x, y: x == y.conj(),
    ]:
        same(f, a, b)
    for f in [torch.exp, torch.log, torch.sqrt, torch.rsqrt, torch.sin, torch.cos, torch.tanh, torch.sigmoid,
              torch.log1p, torch.abs, torch.angle, torch.sgn, torch.neg, torch.conj_physical, torch.isnan,
              torch.asinh, torch.acosh, torch.atanh, torch.expm1, torch.exp2, torch.log10, torch.sinh,
              torch.real, torch.imag, lambda x: x.conj().imag, lambda x: torch.reciprocal(x)]:
        same(lambda x: f(x).clone(), a)
    same(lambda x, y: x + y, a, r)  # real operands promote
    same(lambda x: x.to(torch.float32), a, rtol=0, atol=0)  # a cast keeps the real part


@pytest.mark.parametrize("dtype", COMPLEX)
def test_silu_sinc_nan_to_num_lerp_and_addcdiv_take_complex_tensors(dtype):
    a, b, c = (randc(3, 4, dtype=dtype, seed=s) for s in (11, 12, 13))
    a[0, 0] = 0  # sinc's removable singularity: 1 there, as on the CPU
    same(torch.nn.functional.silu, a)
    same(torch.sinc, a)
    same(lambda x, y, z: torch.addcdiv(x, y, z, value=0.5), a, b, c)
    same(lambda x, y: torch.lerp(x, y, 0.25), a, b)  # both of PyTorch's forms:
    same(lambda x, y: torch.lerp(x, y, 0.75), a, b)  # weight < 0.5 and >= 0.5
    same(lambda x, y, w: torch.lerp(x, y, w), a, b, c)  # a complex weight tensor
    inf, nan = float("inf"), float("nan")
    edges = torch.tensor([complex(nan, 1), complex(2, nan), complex(inf, -inf), complex(-inf, nan), 3 - 4j],
                         dtype=dtype)
    same(torch.nan_to_num, edges)  # each part replaced on its own
    same(lambda x: torch.nan_to_num(x, nan=0.5, posinf=7.0, neginf=-7.0), edges)
    # index_fill with a complex number, of a matrix and of a 0-d tensor.
    same(lambda x: x.clone().index_fill_(1, torch.tensor([0, 2], device=x.device), 2 - 1j), a)
    same(lambda x: x[1, 1].clone().index_fill_(0, torch.tensor(0, device=x.device), -1j), a)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_logsumexp_and_logaddexp_take_complex_tensors(dtype):
    a, b = (randc(3, 5, dtype=dtype, seed=s) * 4 for s in (21, 22))
    same(lambda x: torch.logsumexp(x, 1), a)
    same(lambda x: torch.logsumexp(x, (0, 1), keepdim=True), a)
    same(lambda x: torch.logsumexp(x * 30, 0), a)  # exp of the raw values overflows float32
    same(torch.logaddexp, a, b)
    # Operands far apart: exp(lo - hi) is subnormal in float32, where the
    # CPU's complex64 log1p gives NaN; complex128 is the reference.
    far = torch.logaddexp(a.to("tpu") * 40, b.to("tpu")).cpu()
    want = torch.logaddexp(a.to(torch.complex128) * 40, b.to(torch.complex128)).to(dtype)
    torch.testing.assert_close(far, want, **tol(dtype))
    same(lambda x, y: torch.logaddexp(x, y[0]), a, b)  # broadcast
    inf, nan = float("inf"), float("nan")
    # Equal infinite real parts (-inf: the smaller operand; +inf: log of the
    # sum of the exponentials), NaN in either part, a tie of real parts.
    x = torch.tensor([complex(-inf, 1), complex(inf, 0.5), complex(nan, 1), complex(1, nan), 2 + 1j,
                      complex(-inf, 0), 3 - 1j], dtype=dtype)
    y = torch.tensor([complex(-inf, 2), complex(inf, 0.25), 1 + 1j, 0j, 2 - 3j, 1 + 2j, complex(-inf, 0)],
                     dtype=dtype)
    same(torch.logaddexp, x, y, equal_nan=True, **tol(dtype))
    same(torch.logaddexp, y, x, equal_nan=True, **tol(dtype))
    rows = torch.tensor([[complex(-inf, 0), complex(-inf, 0)], [complex(inf, 0), 1 + 1j], [2 - 1j, 1 + 3j]],
                        dtype=dtype)
    same(lambda r: torch.logsumexp(r, 1), rows, equal_nan=True, **tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_inverse_trigonometric_functions_of_complex_numbers_keep_their_digits(dtype):
    """asin, acos and atan against the CPU in complex128, part by part,
    relative to each value's size: near 0 and at large |z| (where the log
    formulas lose every digit), on both sides of each branch cut (the sign
    of a zero part picks the side), and with infinite and NaN parts."""
    inf, nan = float("inf"), float("nan")
    values = [1e-20 + 1e-20j, 1e-8 + 2e-8j, 3e-30 - 1e-25j, 1e20 + 1e20j, -3e30 + 2e25j, 1e-3 + 1e3j,
              0.5 + 0.5j, -0.3 - 0.7j, 5 - 3j, 1 + 0j, 0j, 2 + 1e-10j, -1e-7 + 1j, 1.0000001 + 0j,
              complex(0.5, -0.0), 2 + 0j, complex(2, -0.0), -2 + 0j, complex(-2, -0.0),  # asin, acos cuts
              2j, complex(-0.0, 2), complex(-0.0, -2), complex(0, -2),  # atan's cuts
              complex(inf, 1), complex(1, inf), complex(-inf, -inf), complex(nan, 1), complex(1, nan),
              complex(nan, inf), complex(inf, nan), complex(0, nan), complex(-0.0, nan), complex(nan, 0)]
    z = torch.tensor(values, dtype=dtype)
    digits = 1e-6 if dtype == torch.complex64 else 1e-14
    for f in (torch.asin, torch.acos, torch.atan):
        got = f(z.to("tpu")).cpu().to(torch.complex128)
        want = f(z.to(torch.complex128))
        for v, g, w in zip(values, got.tolist(), want.tolist()):
            size = max([abs(p) for p in (w.real, w.imag) if abs(p) < inf] or [0.0])
            for part, gp, wp in (("real", g.real, w.real), ("imag", g.imag, w.imag)):
                ok = (gp != gp and wp != wp) or gp == wp or abs(gp - wp) <= digits * size
                assert ok, f"{f.__name__}({v}) {part}: got {g}, expected {w}"


@pytest.mark.parametrize("dtype", COMPLEX)
def test_matrix_exp_of_complex_matrices(dtype):
    wide = lambda f, *xs: f(*[x.to(torch.complex128) for x in xs]).to(dtype)  # noqa: E731
    a = randc(2, 4, 4, dtype=dtype, seed=31)
    digits = 2e-5 if dtype == torch.complex64 else 1e-10
    for m in (a * 0.1, a, a * 6):  # no squaring, a few, many
        got = torch.linalg.matrix_exp(m.to("tpu")).cpu()
        want = wide(torch.linalg.matrix_exp, m)
        torch.testing.assert_close(got, want, rtol=digits, atol=digits * want.abs().max().item())
    # exp of a skew-Hermitian matrix is unitary.
    skew = (a - a.mH) * 2
    u = torch.linalg.matrix_exp(skew.to("tpu"))
    eye = torch.eye(4, dtype=dtype).expand(2, 4, 4)
    torch.testing.assert_close((u @ u.mH).cpu(), eye, **tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_lu_and_what_is_made_of_it_take_complex_matrices(dtype):
    """LU with LAPACK's pivots (|re| + |im|), det, slogdet, inv, solve and
    lu_solve against the CPU, and the gradients of det, slogdet and solve."""
    a = randc(3, 4, 4, dtype=dtype, seed=41) + 2 * torch.eye(4, dtype=dtype)
    b = randc(3, 4, 2, dtype=dtype, seed=42)
    same(lambda x: torch.linalg.lu_factor(x)[0], a)
    same(lambda x: torch.linalg.lu_factor(x)[1], a)
    for part in range(3):
        same(lambda x: torch.linalg.lu(x)[part], a)
    same(torch.linalg.det, a)
    same(lambda x: torch.linalg.slogdet(x)[0], a)
    same(lambda x: torch.linalg.slogdet(x)[1], a)
    same(torch.linalg.inv, a)
    same(torch.linalg.solve, a, b)
    same(lambda x, y: torch.linalg.lu_solve(*torch.linalg.lu_factor(x), y, adjoint=True), a, b)

    def grads(x, y):
        x, y = x.clone().requires_grad_(), y.clone().requires_grad_()
        (torch.linalg.det(x) * (1 - 2j)).real.sum().backward()
        first = x.grad.clone()
        x.grad = None
        loss = torch.linalg.slogdet(x)[1].sum() + torch.linalg.solve(x, y).abs().sum()
        loss.backward()
        return torch.cat([first, x.grad, torch.cat([y.grad, y.grad], -1)], -1)

    same(grads, a, b, **(dict(rtol=1e-4, atol=1e-4) if dtype == torch.complex64 else {}))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_eigh_of_hermitian_matrices_and_what_is_made_of_it(dtype):
    """eigh reads one triangle of a complex matrix (the diagonal's imaginary
    parts ignored, as LAPACK's heevd), eigenvalues real; the vectors are
    unique up to a phase per column, so they are checked by A V = V diag(w)
    and V^H V = I; svdvals, matrix_rank, cond and matrix_sqrth against the
    CPU."""
    a = randc(3, 6, 6, dtype=dtype, seed=51)  # not Hermitian, complex diagonal
    close = tol(dtype)
    for uplo in "LU":
        same(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a)
        w, v = torch.linalg.eigh(a.to("tpu"), UPLO=uplo)
        assert w.dtype == a.real.dtype
        half = a.tril() if uplo == "L" else a.triu()
        hermitian = half + half.mH - torch.diag_embed(half.diagonal(dim1=-2, dim2=-1).real).to(dtype)
        w, v = w.cpu(), v.cpu()
        torch.testing.assert_close(hermitian @ v, v * w.unsqueeze(-2).to(dtype), **close)
        torch.testing.assert_close(v.mH @ v, torch.eye(6, dtype=dtype).expand(3, 6, 6), **close)
    same(torch.linalg.svdvals, a)
    same(torch.linalg.svdvals, a[..., :4])  # wide and tall
    same(torch.linalg.svdvals, a[..., :4, :].mT)
    same(lambda x: torch.linalg.matrix_rank(x[..., :3] @ x[..., :3, :]), a)
    same(torch.linalg.cond, a, rtol=1e-3, atol=1e-3)
    spd = a @ a.mH + torch.eye(6, dtype=dtype)
    same(torch.linalg.matrix_sqrth, spd)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_householder_qr_svd_and_what_is_made_of_them_take_complex_matrices(dtype):
    """geqrf, ormqr (each side, with and without the adjoint), the
    householder product and QR against the CPU (LAPACK's zgeqrf: a real
    diagonal, complex tau); the SVD reconstructs and has unitary factors;
    pinv, lstsq and polar against the CPU."""
    a = randc(2, 6, 4, dtype=dtype, seed=61)
    c = randc(2, 6, 3, dtype=dtype, seed=62)
    close = tol(dtype) if dtype == torch.complex128 else dict(rtol=1e-4, atol=1e-4)
    same(lambda x: torch.geqrf(x)[0], a, **close)
    same(lambda x: torch.geqrf(x)[1], a, **close)
    for left in (True, False):
        for transpose in (False, True):
            same(lambda x, y: torch.ormqr(*torch.geqrf(x), y if left else y.mT, left=left, transpose=transpose),
                 a, c, **close)
    same(lambda x: torch.linalg.householder_product(*torch.geqrf(x)), a, **close)
    for mode in ("reduced", "complete"):
        for part in range(2):
            same(lambda x: torch.linalg.qr(x, mode=mode)[part], a, **close)
    u, sv, vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu"), full_matrices=False))
    torch.testing.assert_close(u @ torch.diag_embed(sv).to(dtype) @ vh, a, **close)
    torch.testing.assert_close(u.mH @ u, torch.eye(4, dtype=dtype).expand(2, 4, 4), **close)
    torch.testing.assert_close(vh @ vh.mH, torch.eye(4, dtype=dtype).expand(2, 4, 4), **close)
    same(torch.linalg.svdvals, a, **close)
    same(torch.linalg.pinv, a, **close)
    same(lambda x, y: torch.linalg.lstsq(x, y, driver="gelsd").solution, a, c, **close)
    same(lambda x, y: torch.linalg.lstsq(x, y, driver="gels").residuals, a, c, **close)
    for part in range(2):
        same(lambda x: torch.linalg.polar(x)[part], a, **close)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_sigmoid_and_tanh_have_complex_gradients(dtype):
    """The output's gradient times the derivative's conjugate, as PyTorch."""
    z = randc(3, 4, dtype=dtype, seed=71)

    def grads(x):
        x = x.clone().requires_grad_()
        loss = (torch.sigmoid(x) * (1 + 2j)).real.sum() + (torch.tanh(x) * (2 - 1j)).imag.sum()
        loss = loss + torch.nn.functional.tanhshrink(x).abs().sum()
        loss.backward()
        return x.grad

    same(grads, z)


def test_complex_promotion_matches_the_cpu():
    z = randc(3)
    for other in [torch.ones(3, dtype=torch.float64), torch.arange(3), torch.tensor(2.0, dtype=torch.float64),
                  torch.ones(3, dtype=torch.bfloat16)]:
        same(lambda x, y: x * y, z, other)
    same(lambda x: x * (0.1 + 0.2j), torch.ones(3, dtype=torch.float64))
    same(lambda x: x + 1j, torch.arange(3))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_lazy_conjugates_and_views(dtype):
    z = randc(4, 3, dtype=dtype, seed=3)
    same(lambda x: x.conj().clone(), z)
    same(lambda x: x.mH @ x, z)  # mm reads the conjugate bit itself
    same(lambda x: x.conj() @ x.T, z)
    same(lambda x: torch.view_as_real(x).clone(), z)
    same(lambda x: torch.view_as_real(x)[..., 1] * 2, z)
    same(lambda x: torch.view_as_complex(x).clone(), torch.randn(5, 2, dtype=torch.float64 if dtype == torch.complex128
                                                                 else torch.float32))
    same(lambda x: x.conj().resolve_conj(), z)
    same(lambda x: x.real.clone(), z)
    # Writes through views of a complex tensor's storage.
    def write_parts(x):
        y = x.clone()
        torch.view_as_real(y)[:, 0, 1] = 7
        y.imag[1:] *= -1
        return y
    same(write_parts, z)
    # A copy to a lazily conjugated CPU tensor keeps the bit's meaning.
    out = torch.zeros(4, 3, dtype=dtype).conj()
    out.copy_(z.to("tpu"))
    torch.testing.assert_close(out.resolve_conj(), z)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_matmul_and_reductions(dtype):
    a, b = randc(2, 3, 4, dtype=dtype, seed=4), randc(2, 4, 5, dtype=dtype, seed=5)
    same(torch.matmul, a, b)
    same(lambda x: x.sum(), a)
    same(lambda x: x.mean(dim=(0, 2)), a)
    same(lambda x: x.prod(dim=1), a)
    same(lambda x: x.cumsum(1), a)
    same(lambda x: torch.linalg.vector_norm(x, dim=-1), a)
    same(lambda x: x.var(dim=1), a)
    for f in [lambda x: torch.std_mean(x, dim=(0, 2))[0], lambda x: torch.var_mean(x, dim=0)[1]]:
        same(f, a)
    out = torch.empty(0, device="tpu", dtype=a.real.dtype)
    torch.var(a.to("tpu"), dim=1, out=out)  # out= of a complex input's variance
    torch.testing.assert_close(out.cpu(), a.var(dim=1), **tol(a.dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_every_fft_function_matches_the_cpu(dtype, norm):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    z = randc(3, 6, 10, dtype=dtype, seed=6)
    x = torch.randn(3, 6, 10, dtype=real)
    for f in [torch.fft.fft, torch.fft.ifft, torch.fft.hfft, torch.fft.fft2, torch.fft.ifft2, torch.fft.fftn,
              torch.fft.ifftn, lambda t, norm: torch.fft.fft(t, n=13, dim=1, norm=norm),
              lambda t, norm: torch.fft.irfft(t, n=9, norm=norm), lambda t, norm: torch.fft.irfftn(t, norm=norm),
              lambda t, norm: torch.fft.ihfft2(t.real.contiguous(), norm=norm)]:
        same(lambda t: f(t, norm=norm), z)
    for f in [torch.fft.rfft, torch.fft.rfft2, torch.fft.rfftn, torch.fft.ihfft,
              lambda t, norm: torch.fft.rfft(t, n=7, dim=0, norm=norm)]:
        same(lambda t: f(t, norm=norm), x)
    same(lambda t: torch.fft.fftshift(torch.fft.fft(t, norm=norm), dim=-1), z)


def test_fft_out_forms_and_stft():
    z = randc(8)
    out = torch.empty(8, dtype=torch.complex64, device="tpu")
    torch.fft.fft(z.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), torch.fft.fft(z), rtol=1e-5, atol=1e-5)
    signal = torch.randn(2, 200)
    window = torch.hann_window(32)
    same(lambda s, w: torch.stft(s, 32, hop_length=8, window=w, return_complex=True), signal, window)
    spec = torch.stft(signal, 32, hop_length=8, window=window, return_complex=True)
    same(lambda s, w: torch.istft(s, 32, hop_length=8, window=w, length=200), spec, window)


def test_gradients_through_complex_ops():
    z = randc(6, seed=7)
    x = torch.randn(8)

    def grads(f, leaf, device):
        t = leaf.clone().to(device).requires_grad_()
        f(t).backward()
        return t.grad.cpu()

    for f, leaf in [
        (lambda t: t.abs().sum(), z),
        (lambda t: t.angle().sum(), z),
        (lambda t: (t * t.conj()).real.sum(), z),
        (lambda t: torch.view_as_real(t.exp() / (1 + 1j)).sum(), z),
        (lambda t: torch.fft.fft(t).abs().sum(), z),
        (lambda t: torch.fft.ifft(t, norm="ortho").imag.sum(), z),
        (lambda t: torch.fft.rfft(t).abs().pow(2).sum(), x),
        (lambda t: torch.fft.irfft(torch.fft.rfft(t) * 1j, n=8).sum(), x),
        (lambda t: torch.polar(t.abs(), t).real.sum(), x),
    ]:
        torch.testing.assert_close(grads(f, leaf, "tpu"), grads(f, leaf, "cpu"), rtol=1e-5, atol=1e-5)


# The original Llama code's rotary embedding (complex multiplication).
def precompute_freqs_cis(dim, end, theta=10000.0, device=None):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def reshape_for_broadcast(freqs_cis, x):
    shape = [d if i == 1 or i == x.ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_llama_complex_rotary_embedding_trains_on_the_device(dtype):
    g = torch.Generator().manual_seed(8)
    q, k = torch.randn(2, 8, 4, 16, generator=g), torch.randn(2, 8, 4, 16, generator=g)

    def run(device):
        qq = q.clone().to(device, dtype).requires_grad_()
        kk = k.clone().to(device, dtype).requires_grad_()
        a, b = apply_rotary_emb(qq, kk, precompute_freqs_cis(16, 8, device=device))
        ((a * b).float().sum() + a.float().pow(2).mean()).backward()
        return a.detach().cpu(), qq.grad.cpu(), kk.grad.cpu()

    for got, want in zip(run("tpu"), run("cpu")):
        assert got.dtype == dtype
        torch.testing.assert_close(got, want, **(dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}))


def test_ops_without_a_complex_form_raise_at_the_line():
    z = randc(4).to("tpu")
    with pytest.raises(RuntimeError, match="lt.*complex64"):
        z < z
    with pytest.raises(RuntimeError, match="clamp is not supported for complex"):  # the CPU's own words
        torch.clamp(z, min=0)
    with pytest.raises(RuntimeError, match="lgamma.*complex64"):
        torch.lgamma(z)  # the runtime's error, raised at this line
    torch.testing.assert_close((z + z).cpu(), 2 * z.cpu())  # the next op works


def test_random_complex_tensors_sample_their_parts():
    # torch.randn's complex normal: each part N(0, 1/2), so E|z|^2 = 1; rand:
    # each part uniform in [0, 1).
    z = torch.randn(200_000, dtype=torch.complex64, device="tpu").cpu()
    parts = torch.view_as_real(z)
    assert abs(parts.mean().item()) < 0.01
    assert abs(parts.var().item() - 0.5) < 0.01
    assert abs((z.abs() ** 2).mean().item() - 1.0) < 0.02
    u = torch.view_as_real(torch.rand(100_000, dtype=torch.complex128, device="tpu").cpu())
    assert u.min().item() >= 0 and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.01


def test_complex_fills_and_saves():
    z = randc(4, 3, seed=9)
    same(lambda x: (lambda y: (y.__setitem__(torch.tensor([0, 2], device=x.device), 1j), y)[1])(x.clone()), z)
    same(lambda x: x.masked_fill(x.real > 0, 2 - 1j), z)
    same(lambda x: torch.full_like(x, 0.5j) + x, z)
    buffer = io.BytesIO()
    torch.save(z.to("tpu"), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert loaded.device.type == "tpu" and torch.equal(loaded.cpu(), z)


class SpectralConv1d(torch.nn.Module):
    """A Fourier neural operator's layer: complex weights on the lowest modes."""

    def __init__(self, channels, modes):
        super().__init__()
        self.modes = modes
        self.weights = torch.nn.Parameter(torch.rand(channels, channels, modes, dtype=torch.cfloat) / channels**2)

    def forward(self, x):
        x_ft = torch.fft.rfft(x)
        out_ft = torch.zeros(x.shape[0], x.shape[1], x.size(-1) // 2 + 1, device=x.device, dtype=torch.cfloat)
        out_ft[:, :, : self.modes] = torch.einsum("bix,iox->box", x_ft[:, :, : self.modes], self.weights)
        return torch.fft.irfft(out_ft, n=x.size(-1))


@pytest.mark.parametrize("foreach", [True, False])
def test_a_fourier_neural_operator_with_complex_weights_trains_as_on_the_cpu(foreach):
    def train(device):
        torch.manual_seed(0)
        lift, spectral, proj = torch.nn.Conv1d(1, 8, 1), SpectralConv1d(8, 6), torch.nn.Conv1d(8, 1, 1)
        model = torch.nn.Sequential(lift, spectral, torch.nn.GELU(), proj).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=foreach)
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(4, 1, 32, generator=g).to(device), torch.randn(4, 1, 32, generator=g).to(device)
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        return loss.item(), spectral.weights.detach().cpu()

    (loss, weights), (want_loss, want_weights) = train("tpu"), train("cpu")
    assert weights.dtype == torch.complex64
    assert abs(loss - want_loss) < 1e-5
    torch.testing.assert_close(weights, want_weights, rtol=1e-5, atol=1e-5)


def test_complex_functions_compile_into_one_graph(mode):
    torch._dynamo.reset()
    q, k = torch.randn(2, 8, 4, 16), torch.randn(2, 8, 4, 16)
    freqs = precompute_freqs_cis(16, 8)
    rope = torch.compile(apply_rotary_emb, backend="tpu")
    spectrum = torch.compile(lambda x: torch.fft.rfft(x, norm="ortho").abs().sum(-1), backend="tpu")
    calls = eagertpu.metrics()["compiled_graph_calls"]
    for got, want in zip(rope(q.to("tpu"), k.to("tpu"), freqs.to("tpu")), apply_rotary_emb(q, k, freqs)):
        torch.testing.assert_close(got.cpu(), want)
    x = torch.randn(4, 16)
    torch.testing.assert_close(spectrum(x.to("tpu")).cpu(), torch.fft.rfft(x, norm="ortho").abs().sum(-1))
    # Debug mode runs a compiled graph's ops one by one, synchronously.
    assert eagertpu.metrics()["compiled_graph_calls"] == calls + (0 if mode == "debug" else 2)
    torch._dynamo.reset()


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("dtype", COMPLEX)
def test_cholesky_lu_solve_and_triangular_solves_of_complex_matrices(dtype):
    g = torch.Generator().manual_seed(10)
    m = torch.randn(3, 4, 4, dtype=dtype, generator=g)
    a = m @ m.mH + 4 * torch.eye(4, dtype=dtype)  # Hermitian positive-definite
    b = torch.randn(3, 4, 2, dtype=dtype, generator=g)
    factor = torch.linalg.cholesky(a)
    same(torch.linalg.cholesky, a)
    same(lambda x: torch.linalg.cholesky(x, upper=True), a)
    same(lambda l, y: torch.linalg.solve_triangular(l, y, upper=False), factor, b)
    same(lambda l, y: torch.linalg.solve_triangular(l.mH, y.mT, upper=True, left=False), factor, b)
    same(lambda y, l: torch.cholesky_solve(y, l), b, factor)
    same(lambda y, l: torch.cholesky_solve(y, l.mH, upper=True), b, factor)  # a^H a with the upper factor
    same(torch.cholesky_inverse, factor)
    same(lambda y, l: torch.triangular_solve(y, l, upper=False, transpose=True).solution, b, factor)
    # lu_solve of LU factors (computed on the CPU: tpu's LU is real only),
    # with a and with its adjoint a^H.
    lu, pivots = torch.linalg.lu_factor(m)
    for adjoint in (False, True):
        same(lambda f, p, y: torch.linalg.lu_solve(f, p, y, adjoint=adjoint), lu, pivots, b)
    # cholesky_ex's info: the order of the first minor that is not positive-definite.
    bad = a.clone()
    bad[1, 2, 2] = -100
    assert torch.equal(torch.linalg.cholesky_ex(bad.to("tpu")).info.cpu(), torch.linalg.cholesky_ex(bad).info)

    def grad(device):
        x = a.clone().to(device).requires_grad_()
        torch.linalg.cholesky(x).abs().sum().backward()
        return x.grad.cpu()

    torch.testing.assert_close(grad("tpu"), grad("cpu"), **tol(dtype))
