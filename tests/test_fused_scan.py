"""The fused S6/S4D scan used by the models equals the reference selective scan (float64)."""

import pytest
import torch

from ssmrepro.kernels.inplace import scan_inplace, selective_scan_fused
from ssmrepro.kernels.scan import diag_scan_ref, selective_scan_ref


def _inputs(Bt=2, L=19, D=12, N=5, G=3, c_const=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    u = r(Bt, L, D)
    delta = torch.rand(Bt, L, D, generator=g, dtype=torch.float64) * 0.7
    A = -torch.rand(D, N, generator=g, dtype=torch.float64) * 3
    B = r(Bt, L, G, N)
    C = r(D, N) if c_const else r(Bt, L, G, N)
    return [x.requires_grad_() for x in (u, delta, A, B, C, r(D))]


@pytest.mark.parametrize("c_const", [False, True])
@pytest.mark.parametrize("L", [1, 2, 19])
def test_fused_equals_reference(c_const, L):
    xs = _inputs(L=L, c_const=c_const)
    w = torch.randn(2, L, 12, dtype=torch.float64)
    u, delta, A, B, C, D = xs
    # the reference takes grouped B and (for S4D) per-channel constant C directly
    y_ref = selective_scan_ref(u, delta, A, B, C, D)
    y = selective_scan_fused(u, delta, A, B, C, D)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    g_ref = torch.autograd.grad((y_ref * w).sum(), xs)
    g = torch.autograd.grad((y * w).sum(), xs)
    for a, b, name in zip(g, g_ref, "u delta A B C D".split()):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_inplace_scan_equals_reference(dtype):
    g = torch.Generator().manual_seed(1)
    la = -torch.rand(2, 23, 3, 4, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        la = la + 1j * torch.rand(2, 23, 3, 4, generator=g, dtype=torch.float64)
    b = torch.randn(2, 23, 3, 4, generator=g, dtype=dtype)
    la.requires_grad_()
    b.requires_grad_()
    w = torch.randn(2, 23, 3, 4, generator=g, dtype=dtype)
    y_ref = (diag_scan_ref(la, b) * w).real.sum()
    y = (scan_inplace(torch.exp(la), b) * w).real.sum()
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    for a, c in zip(torch.autograd.grad(y, (la, b)), torch.autograd.grad(y_ref, (la, b))):
        torch.testing.assert_close(a, c, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- time-blocked kernels


@pytest.mark.parametrize("block", [1, 4, 7, 128])
@pytest.mark.parametrize("c_const", [False, True])
def test_fused_blocks_equal_reference(monkeypatch, block, c_const):
    """Every block length (several blocks, a ragged last block, one block) gives the reference's
    outputs and all gradients in float64; also with G = 1 group (B, C shared by all channels)."""
    import ssmrepro.kernels.inplace as ip

    monkeypatch.setattr(ip, "scan_plan", lambda Bt, G, K, N, L=None: ip.ScanPlan(2, G, block))
    for G in (3, 1):
        xs = _inputs(L=23, G=G, c_const=c_const, seed=block)
        w = torch.randn(2, 23, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
        y_ref = selective_scan_ref(*xs)
        y = selective_scan_fused(*xs)
        torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
        g_ref = torch.autograd.grad((y_ref * w).sum(), xs)
        g = torch.autograd.grad((y * w).sum(), xs)
        for a, b, name in zip(g, g_ref, "u delta A B C D".split()):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)


def test_fused_strong_decay_and_causality():
    """Δ A down to -1e4 per step: finite outputs and gradients equal to the reference; outputs
    before t0 do not depend on inputs at t0."""
    u, delta, A, B, C, D = (x.detach() for x in _inputs(L=40, seed=3))
    delta = delta.clone()
    delta[:, 10:15] = 3e3
    xs = [x.clone().requires_grad_() for x in (u, delta, A, B, C, D)]
    y, y_ref = selective_scan_fused(*xs), selective_scan_ref(*xs)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad(y.sum(), xs), torch.autograd.grad(y_ref.sum(), xs)):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    u2 = u.clone()
    u2[:, 25] += 1.0
    y2 = selective_scan_fused(u2, delta, A, B, C, D)
    assert torch.equal(y2[:, :25], y[:, :25].detach())
    assert not torch.allclose(y2[:, 25], y[:, 25].detach())


@pytest.mark.parametrize("block", [1, 5, 64])
@pytest.mark.parametrize("dtypes", [(torch.float64, torch.float64), (torch.complex128, torch.complex128),
                                    (torch.float64, torch.complex128)])
def test_blocked_diag_scan_equals_reference(block, dtypes):
    """diag_scan_blocked (the CPU default of scan.diag_scan) == diag_scan_ref: outputs and both
    gradients, real / complex / real decay with complex input (gradient of la stays real)."""
    from ssmrepro.kernels.inplace import diag_scan_blocked
    from ssmrepro.kernels.scan import diag_scan

    g = torch.Generator().manual_seed(block)
    la = -torch.rand(2, 29, 3, 4, generator=g, dtype=torch.float64)
    if dtypes[0].is_complex:
        la = torch.complex(la, 3 * torch.randn(2, 29, 3, 4, generator=g, dtype=torch.float64))
    b = torch.randn(2, 29, 3, 4, generator=g, dtype=torch.float64).to(dtypes[1])
    if dtypes[1].is_complex:
        b = b + 1j * torch.randn(2, 29, 3, 4, generator=g, dtype=torch.float64)
    w = torch.randn(2, 29, 3, 4, generator=g, dtype=torch.float64)
    xs = [la.requires_grad_(), b.requires_grad_()]
    h_ref = diag_scan_ref(*xs)
    g_ref = torch.autograd.grad((h_ref * w).real.sum(), xs)
    for fn in (lambda x, y: diag_scan_blocked(x, y, block), diag_scan):
        h = fn(*xs)
        assert h.dtype == h_ref.dtype
        torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-12)
        for a, c in zip(torch.autograd.grad((h * w).real.sum(), xs), g_ref):
            assert a.dtype == c.dtype
            torch.testing.assert_close(a, c, rtol=1e-10, atol=1e-12)


def test_blocked_diag_scan_broadcast_and_gradcheck():
    from ssmrepro.kernels.inplace import diag_scan_blocked

    g = torch.Generator().manual_seed(4)
    la = (-torch.rand(2, 9, 3, 1, generator=g, dtype=torch.float64)).requires_grad_()
    b = torch.randn(2, 9, 3, 2, generator=g, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, y: diag_scan_blocked(x, y, 4), (la, b))
    torch.testing.assert_close(diag_scan_blocked(la, b, 2), diag_scan_ref(la, b), rtol=1e-12, atol=1e-12)
    assert diag_scan_blocked(la[:, :0], b[:, :0]).shape == (2, 0, 3, 2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_diag_scan_cpu_default_is_blocked_and_exact(dtype):
    """Bt * prod(S) = 512: scan.diag_scan(chunk=None) takes the blocked kernel on CPU; float64 /
    complex128 outputs and gradients equal the reference."""
    from ssmrepro.kernels.scan import diag_scan

    g = torch.Generator().manual_seed(11)
    la = -torch.rand(2, 70, 16, 16, generator=g, dtype=torch.float64)
    b = torch.randn(2, 70, 16, 16, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        la = torch.complex(la, torch.randn_like(la))
        b = torch.complex(b, torch.randn_like(b))
    xs = [la.requires_grad_(), b.requires_grad_()]
    h, h_ref = diag_scan(*xs), diag_scan_ref(*xs)
    assert "BlockedDiagScan" in type(h.grad_fn).__name__
    torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-12)
    w = torch.randn(h.shape, generator=g, dtype=torch.float64)
    grads = torch.autograd.grad((h * w).real.sum(), xs)
    for a, c in zip(grads, torch.autograd.grad((h_ref * w).real.sum(), xs)):
        torch.testing.assert_close(a, c, rtol=1e-10, atol=1e-12)
