"""Tests of the scan kernels: fast formulations against sequential references and closed forms.

float64 / complex128 comparisons are tight (forward and gradients w.r.t. every input); float32
is checked against a float64 reference with a loose tolerance. CPU only, a few seconds in all.
"""

from __future__ import annotations

import pytest
import torch

from ssmrepro.kernels.scan import (
    default_chunk,
    diag_scan,
    diag_scan_ref,
    selective_scan,
    selective_scan_ref,
)
from ssmrepro.kernels.ssd import segsum, ssd, ssd_ref

F64, C128 = torch.float64, torch.complex128
TIGHT = dict(rtol=1e-9, atol=1e-11)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def make_la(shape, dtype, g, scale=1.0, imag=3.0):
    """Log-decay with Re <= 0: real part -scale * U(0, 1), imaginary part N(0, imag^2)."""
    re = -scale * torch.rand(shape, generator=g, dtype=F64)
    if dtype.is_complex:
        return torch.complex(re, imag * torch.randn(shape, generator=g, dtype=F64)).to(dtype)
    return re.to(dtype)


def randn(shape, dtype, g):
    if dtype.is_complex:
        re = torch.randn(shape, generator=g, dtype=F64)
        return torch.complex(re, torch.randn(shape, generator=g, dtype=F64)).to(dtype)
    return torch.randn(shape, generator=g, dtype=F64).to(dtype)


def out_and_grads(fn, inputs, seed=123):
    """fn(*inputs) and the gradients of <out, w> (w random, fixed by seed) w.r.t. every input."""
    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*leaves)
    w = randn(out.shape, out.dtype, _gen(seed))
    grads = torch.autograd.grad(out, leaves, w, materialize_grads=True)  # unused -> 0
    return out.detach(), grads


def assert_match(fast, ref, inputs, **tol):
    tol = tol or TIGHT
    y1, g1 = out_and_grads(fast, inputs)
    y0, g0 = out_and_grads(ref, inputs)
    torch.testing.assert_close(y1, y0, **tol)
    for i, (a, b) in enumerate(zip(g1, g0)):
        assert torch.isfinite(a).all(), f"non-finite gradient for input {i}"
        torch.testing.assert_close(a, b, **tol, msg=lambda m, i=i: f"grad of input {i}: {m}")


# ----------------------------------------------------------------------------- diag_scan


@pytest.mark.parametrize("L", [1, 7, 64, 129, 1000])
@pytest.mark.parametrize("dtype", [F64, C128])
@pytest.mark.parametrize("S, chunk", [((), None), ((3,), 8), ((2, 3), 5), ((4,), 1), ((2, 2), 64)])
def test_diag_scan_matches_ref(L, dtype, S, chunk):
    g = _gen(L)
    la = make_la((2, L, *S), dtype, g)
    b = randn((2, L, *S), dtype, g)
    assert_match(lambda x, y: diag_scan(x, y, chunk=chunk), diag_scan_ref, [la, b])


def test_diag_scan_mixed_dtypes_and_broadcast():
    g = _gen(1)
    la = make_la((3, 50, 4, 1), F64, g)  # real decay, broadcast over the last axis
    b = randn((3, 50, 4, 5), C128, g)  # complex input
    h = diag_scan(la, b, chunk=6)
    assert h.dtype == C128 and h.shape == (3, 50, 4, 5)
    torch.testing.assert_close(h, diag_scan_ref(la, b), **TIGHT)


@pytest.mark.parametrize("dtype", [F64, C128])
def test_diag_scan_gradcheck(dtype):
    g = _gen(2)
    la = make_la((2, 9, 2), dtype, g).requires_grad_()
    b = randn((2, 9, 2), dtype, g).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, y: diag_scan(x, y, chunk=2), (la, b))
    assert torch.autograd.gradcheck(lambda x, y: diag_scan(x, y, chunk=4), (la, b))


@pytest.mark.parametrize("dtype", [torch.float32, F64, torch.complex64, C128])
def test_diag_scan_strong_decay(dtype):
    """la ~ -50 per step (and -1e4): exp underflows, nothing may overflow or turn NaN."""
    g = _gen(3)
    L = 300
    la = make_la((2, L, 3), dtype, g, scale=1.0) - 50.0  # Re in [-51, -50]
    la[:, 100:110] = la[:, 100:110] - 1e4  # extreme decays
    la[:, 200:] = la[:, 200:] * 0.001  # and a slowly decaying tail
    b = randn((2, L, 3), dtype, g)
    y1, g1 = out_and_grads(lambda x, y: diag_scan(x, y, chunk=16), [la, b])
    for t in (y1, *g1):
        assert torch.isfinite(t).all()
    if dtype in (F64, C128):
        assert_match(lambda x, y: diag_scan(x, y, chunk=16), diag_scan_ref, [la, b])
    else:
        y0, g0 = out_and_grads(
            diag_scan_ref,
            [la.to(C128 if dtype.is_complex else F64), b.to(C128 if dtype.is_complex else F64)],
        )
        torch.testing.assert_close(y1, y0.to(dtype), rtol=1e-4, atol=1e-5)
        for a, r in zip(g1, g0):
            torch.testing.assert_close(a, r.to(dtype), rtol=1e-4, atol=1e-4)


def test_diag_scan_long_sequence_float64():
    g = _gen(4)
    L = 4096
    la = make_la((2, L, 4), F64, g, scale=0.05)
    b = randn((2, L, 4), F64, g)
    assert_match(diag_scan, diag_scan_ref, [la, b])


def test_diag_scan_long_sequence_float32_precision():
    """float32 at L=4096 with long memory (|la| <= 0.01) against a float64 reference."""
    g = _gen(5)
    L = 4096
    la = make_la((2, L, 8), F64, g, scale=0.01)
    b = randn((2, L, 8), F64, g)
    h64 = diag_scan_ref(la, b)
    h32 = diag_scan(la.float(), b.float())
    assert torch.isfinite(h32).all()
    rel = (h32.double() - h64).norm() / h64.norm()
    assert rel < 1e-5, rel


def test_diag_scan_causality():
    g = _gen(6)
    L, t0 = 100, 37
    la = make_la((2, L, 3), C128, g)
    b = randn((2, L, 3), C128, g)
    h = diag_scan(la, b, chunk=8)
    la2, b2 = la.clone(), b.clone()
    la2[:, t0] -= 0.7
    b2[:, t0] += 1.0
    h2 = diag_scan(la2, b2, chunk=8)
    assert torch.equal(h[:, :t0], h2[:, :t0])
    assert not torch.allclose(h[:, t0], h2[:, t0])


def test_default_chunk():
    assert default_chunk(10, 100) == 10  # short: sequential
    for L in (33, 100, 1000, 1009, 4096, 16384):
        q = default_chunk(L, 4096, threads=1)
        assert 1 <= q < L
        assert 1 <= default_chunk(L, 1 << 20, cpu=False) < L  # GPU: always chunked
    assert 1000 % default_chunk(1000, 4096, threads=1) == 0  # prefers a divisor
    assert default_chunk(1024, 1 << 16, threads=2) == 1024  # big CPU state: sequential


def test_diag_scan_large_state_default_path():
    g = _gen(15)
    la = make_la((2, 40, 128, 64), F64, g)  # Bt * prod(S) = 16384: sequential default on CPU
    b = randn((2, 40, 128, 64), F64, g)
    torch.testing.assert_close(diag_scan(la, b), diag_scan_ref(la, b), **TIGHT)


# ----------------------------------------------------------------------------- selective_scan


def naive_selective_scan(u, delta, A, B, C, D, scale=1.0):
    """Channel-by-channel loop straight from the equations (independent of the kernels)."""
    Bt, L, D_ = u.shape
    N = A.shape[1]
    ys = torch.zeros(Bt, L, D_, dtype=F64)
    for d in range(D_):
        if B.dim() == 2:
            Bd = B[d].expand(Bt, L, N)
        elif B.dim() == 3:
            Bd = B
        else:
            Bd = B[:, :, d // (D_ // B.shape[2])]
        if C.dim() == 2:
            Cd = C[d].expand(Bt, L, N)
        elif C.dim() == 3:
            Cd = C
        else:
            Cd = C[:, :, d // (D_ // C.shape[2])]
        h = torch.zeros(Bt, N, dtype=torch.promote_types(A.dtype, B.dtype))
        for t in range(L):
            dt = delta[:, t, d, None]  # (Bt, 1)
            h = torch.exp(dt * A[d]) * h + dt * Bd[:, t] * u[:, t, d, None]
            y = (h * Cd[:, t]).sum(-1)
            ys[:, t, d] = scale * y.real if y.is_complex() else y
    if D is not None:
        ys = ys + D * u
    return ys


def make_ss_inputs(Bt, L, D_, N, b_layout, c_layout, complex_, g, with_D=True):
    u = torch.randn(Bt, L, D_, generator=g, dtype=F64)
    delta = 0.05 + 0.5 * torch.rand(Bt, L, D_, generator=g, dtype=F64)
    A = make_la((D_, N), C128 if complex_ else F64, g, scale=2.0)
    cdt = C128 if complex_ else F64

    def bc(layout):
        kind, G = layout
        if kind == "const":
            return randn((D_, N), cdt, g)
        if kind == "shared":
            return randn((Bt, L, N), F64, g)  # input-dependent B/C are real (as in mamba-ssm)
        return randn((Bt, L, G, N), cdt if complex_ else F64, g)

    Dskip = torch.randn(D_, generator=g, dtype=F64) if with_D else None
    return u, delta, A, bc(b_layout), bc(c_layout), Dskip


LAYOUTS = [
    (("shared", 1), ("shared", 1)),
    (("const", 1), ("const", 1)),
    (("group", 2), ("group", 2)),
    (("group", 4), ("shared", 1)),
    (("const", 1), ("group", 1)),
]


@pytest.mark.parametrize("layouts", LAYOUTS, ids=lambda x: f"{x[0][0]}{x[0][1]}-{x[1][0]}{x[1][1]}")
@pytest.mark.parametrize("complex_", [False, True])
def test_selective_scan_vs_naive(layouts, complex_):
    g = _gen(7)
    inputs = make_ss_inputs(2, 13, 4, 3, *layouts, complex_, g)
    for scale in (1.0, 2.0):
        want = naive_selective_scan(*inputs, scale=scale)
        got_ref = selective_scan_ref(*inputs, complex_output_scale=scale)
        got = selective_scan(*inputs, chunk=4, complex_output_scale=scale)
        torch.testing.assert_close(got_ref, want, **TIGHT)
        torch.testing.assert_close(got, want, **TIGHT)


@pytest.mark.parametrize("layouts", LAYOUTS, ids=lambda x: f"{x[0][0]}{x[0][1]}-{x[1][0]}{x[1][1]}")
@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("L, chunk", [(7, None), (129, None), (129, 10)])
def test_selective_scan_matches_ref(layouts, complex_, L, chunk):
    g = _gen(8)
    inputs = list(make_ss_inputs(2, L, 8, 4, *layouts, complex_, g))
    assert_match(
        lambda *t: selective_scan(*t, chunk=chunk, complex_output_scale=2.0),
        lambda *t: selective_scan_ref(*t, complex_output_scale=2.0),
        inputs,
    )


def test_selective_scan_real_state_complex_C():
    """Real A and B with a complex constant C: y = scale * Re(sum_n C h), h real."""
    g = _gen(14)
    u, delta, A, B, _, Dskip = make_ss_inputs(2, 30, 4, 3, ("shared", 1), ("shared", 1), False, g)
    C = randn((4, 3), C128, g)
    want = naive_selective_scan(u, delta, A, B, C, Dskip, scale=2.0)
    for fn in (selective_scan_ref, selective_scan):
        torch.testing.assert_close(fn(u, delta, A, B, C, Dskip, complex_output_scale=2.0), want, **TIGHT)


def test_selective_scan_no_D_and_return_state():
    g = _gen(9)
    u, delta, A, B, C, _ = make_ss_inputs(2, 40, 4, 3, ("shared", 1), ("shared", 1), True, g)
    y, h = selective_scan(u, delta, A, B, C, return_state=True, chunk=6)
    assert y.shape == (2, 40, 4) and y.dtype == F64
    assert h.shape == (2, 40, 4, 3) and h.dtype == C128
    la = delta[..., None] * A
    b = (delta * u)[..., None] * B[:, :, None, :]
    torch.testing.assert_close(h, diag_scan_ref(la, b), **TIGHT)
    y_h = torch.einsum("bldn,bln->bld", h, C.to(C128)).real
    torch.testing.assert_close(y, y_h, **TIGHT)
    y_ref, h_ref = selective_scan_ref(u, delta, A, B, C, return_state=True)
    torch.testing.assert_close(y, y_ref, **TIGHT)
    torch.testing.assert_close(h, h_ref, **TIGHT)


@pytest.mark.parametrize("complex_", [False, True])
def test_selective_scan_s4d_convolution(complex_):
    """Constant delta, B, C (S4D): y = causal conv of u with K_k = sum_n C exp(k dt A) dt B."""
    g = _gen(10)
    Bt, L, D_, N = 2, 60, 3, 4
    dt = 0.02 + 0.2 * torch.rand(D_, generator=g, dtype=F64)  # (D_,)
    if complex_:  # S4D-Lin: -1/2 + i pi n
        A = torch.complex(
            -0.5 * torch.ones(D_, N, dtype=F64), torch.pi * torch.arange(N, dtype=F64).expand(D_, N)
        )
    else:  # S4D-Real: -(n + 1)
        A = -torch.arange(1, N + 1, dtype=F64).expand(D_, N).clone()
    cdt = A.dtype
    B = randn((D_, N), cdt, g)
    C = randn((D_, N), cdt, g)
    Dskip = torch.randn(D_, generator=g, dtype=F64)
    u = torch.randn(Bt, L, D_, generator=g, dtype=F64)
    delta = dt.expand(Bt, L, D_)

    k = torch.arange(L, dtype=F64)
    K = torch.einsum(
        "dn,dnk->dk",
        C * dt[:, None] * B,
        torch.exp(k[None, None, :] * (dt[:, None] * A)[..., None]),
    )  # (D_, L)
    K = 2.0 * K.real if complex_ else K
    lag = torch.arange(L)[:, None] - torch.arange(L)[None, :]  # t - s
    T = torch.where(lag >= 0, K[:, lag.clamp(min=0)], torch.zeros((), dtype=F64))  # (D_, L, L)
    y_conv = torch.einsum("dts,bsd->btd", T, u) + Dskip * u

    scale = 2.0 if complex_ else 1.0
    y = selective_scan(u, delta, A, B, C, Dskip, chunk=7, complex_output_scale=scale)
    torch.testing.assert_close(y, y_conv, **TIGHT)


def test_selective_scan_causality():
    g = _gen(11)
    u, delta, A, B, C, Dskip = make_ss_inputs(2, 90, 4, 3, ("group", 2), ("shared", 1), True, g)
    y = selective_scan(u, delta, A, B, C, Dskip, chunk=8)
    t0 = 41
    u2, delta2, B2, C2 = u.clone(), delta.clone(), B.clone(), C.clone()
    u2[:, t0] += 1.0
    delta2[:, t0] *= 2.0
    B2[:, t0] += 1.0
    C2[:, t0] += 1.0
    y2 = selective_scan(u2, delta2, A, B2, C2, Dskip, chunk=8)
    assert torch.equal(y[:, :t0], y2[:, :t0])
    assert not torch.allclose(y[:, t0], y2[:, t0])


def test_selective_scan_rejects_bad_groups():
    g = _gen(12)
    u, delta, A, B, C, _ = make_ss_inputs(1, 5, 6, 2, ("shared", 1), ("shared", 1), False, g)
    with pytest.raises(ValueError, match="divisible"):
        selective_scan(u, delta, A, torch.randn(1, 5, 4, 2, dtype=F64), C)
    with pytest.raises(ValueError):
        selective_scan(u, delta, A, torch.randn(5, 2, dtype=F64), C)


def test_selective_scan_float32_strong_decay():
    g = _gen(13)
    Bt, L, D_, N = 2, 500, 4, 16
    u = torch.randn(Bt, L, D_, generator=g)
    delta = 1.0 + torch.rand(Bt, L, D_, generator=g)
    A = -torch.arange(1, N + 1, dtype=torch.float32).expand(D_, N) * 25  # down to -800 per step
    B, C = torch.randn(Bt, L, N, generator=g), torch.randn(Bt, L, N, generator=g)
    y1, g1 = out_and_grads(selective_scan, [u, delta, A, B, C])
    for t in (y1, *g1):
        assert torch.isfinite(t).all()
    y0 = selective_scan_ref(*(t.double() for t in (u, delta, A, B, C)))
    torch.testing.assert_close(y1, y0.float(), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- SSD


def make_ssd_inputs(Bt, L, H, P, N, g, scale=1.0):
    x = torch.randn(Bt, L, H, P, generator=g, dtype=F64)
    a = -scale * torch.rand(Bt, L, H, generator=g, dtype=F64)
    B = torch.randn(Bt, L, H, N, generator=g, dtype=F64)
    C = torch.randn(Bt, L, H, N, generator=g, dtype=F64)
    return x, a, B, C


@pytest.mark.parametrize("L", [1, 7, 64, 129, 1000])
@pytest.mark.parametrize("chunk", [None, 5, 16])
def test_ssd_matches_ref(L, chunk):
    g = _gen(20 + L)
    inputs = make_ssd_inputs(2, L, 3, 4, 5, g)
    assert_match(lambda *t: ssd(*t, chunk=chunk), ssd_ref, list(inputs))


def test_ssd_gradcheck():
    g = _gen(21)
    inputs = [t.requires_grad_() for t in make_ssd_inputs(1, 11, 2, 2, 3, g)]
    assert torch.autograd.gradcheck(lambda *t: ssd(*t, chunk=4), inputs)


def test_ssd_attention_mode_is_exact_linear_attention():
    """a == 0: y_t = sum_{s <= t} (C_t . B_s) x_s, an explicit masked (C B^T) x."""
    g = _gen(22)
    x, _, B, C = make_ssd_inputs(2, 77, 3, 4, 5, g)
    a = torch.zeros(2, 77, 3, dtype=F64)
    scores = torch.einsum("bthn,bshn->bhts", C, B)
    mask = torch.ones(77, 77, dtype=torch.bool).tril()
    y_att = torch.einsum("bhts,bshp->bthp", scores.masked_fill(~mask, 0), x)
    for chunk in (None, 8, 77, 100):
        torch.testing.assert_close(ssd(x, a, B, C, chunk=chunk), y_att, **TIGHT)
    torch.testing.assert_close(ssd_ref(x, a, B, C), y_att, **TIGHT)


def test_ssd_equals_diag_scan_formulation():
    """SSD = a diagonal scan with the head decay broadcast over (P, N), read out with C."""
    g = _gen(23)
    x, a, B, C = make_ssd_inputs(2, 150, 2, 3, 4, g)
    la = a[:, :, :, None, None].expand(2, 150, 2, 3, 4)  # (Bt, L, H, P, N)
    b = x[..., None] * B[:, :, :, None, :]  # (Bt, L, H, P, N)
    y = torch.einsum("blhpn,blhn->blhp", diag_scan(la, b), C)
    torch.testing.assert_close(ssd(x, a, B, C, chunk=16), y, **TIGHT)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_ssd_strong_decay(dtype):
    g = _gen(24)
    x, a, B, C = make_ssd_inputs(2, 200, 2, 3, 4, g)
    a = a - 50.0
    a[:, 50:60] -= 1e4
    inputs = [t.to(dtype) for t in (x, a, B, C)]
    y1, g1 = out_and_grads(lambda *t: ssd(*t, chunk=32), inputs)
    for t in (y1, *g1):
        assert torch.isfinite(t).all()
    if dtype == F64:
        assert_match(lambda *t: ssd(*t, chunk=32), ssd_ref, inputs)
    else:
        y0 = ssd_ref(x, a, B, C)
        torch.testing.assert_close(y1, y0.float(), rtol=1e-4, atol=1e-4)


def test_ssd_causality():
    g = _gen(25)
    x, a, B, C = make_ssd_inputs(2, 100, 2, 3, 4, g)
    y = ssd(x, a, B, C, chunk=16)
    t0 = 42
    x2, a2, B2, C2 = x.clone(), a.clone(), B.clone(), C.clone()
    x2[:, t0] += 1.0
    a2[:, t0] -= 1.0
    B2[:, t0] += 1.0
    C2[:, t0] += 1.0
    y2 = ssd(x2, a2, B2, C2, chunk=16)
    assert torch.equal(y[:, :t0], y2[:, :t0])
    assert not torch.allclose(y[:, t0], y2[:, t0])


def test_segsum():
    g = _gen(26)
    z = -torch.rand(3, 6, generator=g, dtype=F64)
    s = segsum(z)
    for i in range(6):
        for j in range(6):
            if i >= j:
                torch.testing.assert_close(s[:, i, j], z[:, j + 1 : i + 1].sum(-1), **TIGHT)
            else:
                assert torch.isneginf(s[:, i, j]).all()
    assert (s.diagonal(dim1=-2, dim2=-1) == 0).all()
