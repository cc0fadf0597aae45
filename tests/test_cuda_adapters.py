"""CPU checks of the CUDA-path adapters: adapter(emulated kernel API) == our torch path, float64.

The emulators (``tests/support/kernel_api_emulator.py``) implement the documented semantics and layouts of
``selective_scan_fn``, ``mamba_chunk_scan_combined`` and ``causal_conv1d_fn`` and enforce their
constraints (groups, dstate and launch-grid limits, dtype pairing), so these tests check the
adapters' folding of packs, layout conversions, complex interleaving / 2·Re convention and call
splitting. What they cannot check is that the compiled kernels match the emulators: that is
tests/test_gpu.py on a CUDA machine.
"""

from __future__ import annotations

import functools
import sys

import pytest
import torch
import torch.nn.functional as F
from support import kernel_api_emulator as emu

from ssmrepro.kernels import backend, cuda
from ssmrepro.kernels.inplace import selective_scan_fused
from ssmrepro.kernels.scan import selective_scan_ref
from ssmrepro.kernels.ssd import ssd_ref
from ssmrepro.models.layers import PackedCausalConv

EMULATOR = emu.emulated_kernels()

DT = torch.float64
CT = torch.complex128


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _leaves(*ts):
    return [t.detach().clone().requires_grad_(True) if t is not None else None for t in ts]


def _grads(out, leaves, seed=123):
    w = torch.randn(out.shape, generator=_gen(seed), dtype=out.dtype)
    live = [t for t in leaves if t is not None]
    return torch.autograd.grad((out * w).sum(), live, retain_graph=True)


def _assert_same(a, b, leaves_a, leaves_b, tol=1e-10):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    for ga, gb in zip(_grads(a, leaves_a), _grads(b, leaves_b)):
        torch.testing.assert_close(ga, gb, rtol=tol, atol=tol)


class Spy:
    """Wraps an emulated API to count calls and record argument shapes."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, *args, **kwargs):
        self.calls.append([getattr(a, "shape", a) for a in args])
        return self.fn(*args, **kwargs)


def _spied():
    ss, ssd, cc = Spy(emu.selective_scan_fn), Spy(emu.mamba_chunk_scan_combined), Spy(emu.causal_conv1d_fn)
    return cuda.Kernels(ss, ssd, cc, "spy"), ss, ssd, cc


# ------------------------------------------------------------------------------------------------
# inputs in the models' layouts
# ------------------------------------------------------------------------------------------------


def _s6_inputs(E, d, N, g, Bt=2, L=7, seed=0, complex_=False):
    """S6Core-style packed inputs: u, delta (Bt, L, E·d); A (E·d, N); B, C (Bt, L, E·g, N)."""
    G = torch.Generator().manual_seed(seed)
    D_ = E * d
    u = torch.randn(Bt, L, D_, generator=G, dtype=DT)
    delta = F.softplus(torch.randn(Bt, L, D_, generator=G, dtype=DT) - 1)
    A = -torch.exp(torch.randn(D_, N, generator=G, dtype=DT) * 0.5)
    B = torch.randn(Bt, L, E * g, N, generator=G, dtype=DT)
    C = torch.randn(Bt, L, E * g, N, generator=G, dtype=DT)
    D = torch.randn(D_, generator=G, dtype=DT)
    if complex_:
        A = torch.complex(A, torch.randn(D_, N, generator=G, dtype=DT) * 3)
        B = torch.complex(B, torch.randn(B.shape, generator=G, dtype=DT))
        C = torch.complex(C, torch.randn(C.shape, generator=G, dtype=DT))
    return u, delta, A, B, C, D


# ------------------------------------------------------------------------------------------------
# emulator semantics pinned by hand (so emulator and adapter cannot share a layout mistake)
# ------------------------------------------------------------------------------------------------


def test_emulator_selective_scan_by_hand():
    # one batch, one channel, N = 1, L = 2, real: h0 = d0 B0 u0; h1 = e^{d1 A} h0 + d1 B1 u1
    u = torch.tensor([[[1.0, 2.0]]], dtype=DT)
    dl = torch.tensor([[[0.5, 0.25]]], dtype=DT)
    A = torch.tensor([[-1.0]], dtype=DT)
    B = torch.tensor([[[[3.0, 5.0]]]], dtype=DT)  # (b, G, N, L)
    C = torch.tensor([[[[7.0, 11.0]]]], dtype=DT)
    h0 = 0.5 * 3 * 1
    h1 = torch.exp(torch.tensor(-0.25, dtype=DT)) * h0 + 0.25 * 5 * 2
    y = emu.selective_scan_fn(u, dl, A, B, C)
    torch.testing.assert_close(y[0, 0], torch.stack([7 * torch.tensor(h0, dtype=DT), 11 * h1]))
    # complex A: B, C (L two)-interleaved: [re_0, im_0, re_1, im_1]; output 2·Re
    Ac = torch.tensor([[complex(-1.0, 2.0)]], dtype=CT)
    Bi = torch.tensor([[[[3.0, 1.0, 5.0, -1.0]]]], dtype=DT)
    Ci = torch.tensor([[[[7.0, 2.0, 11.0, 0.5]]]], dtype=DT)
    b0, b1, c0, c1 = complex(3, 1), complex(5, -1), complex(7, 2), complex(11, 0.5)
    g0 = 0.5 * b0 * 1
    g1 = complex(torch.exp(torch.tensor(0.25 * complex(-1, 2), dtype=CT))) * g0 + 0.25 * b1 * 2
    want = torch.tensor([2 * (c0 * g0).real, 2 * (c1 * g1).real], dtype=DT)
    torch.testing.assert_close(emu.selective_scan_fn(u, dl, Ac, Bi, Ci)[0, 0], want)
    # delta_bias + thresholded softplus, D skip, z gate
    db = torch.tensor([0.1], dtype=DT)
    z = torch.tensor([[[0.3, -0.7]]], dtype=DT)
    Dk = torch.tensor([0.9], dtype=DT)
    dsp = F.softplus(dl + 0.1)
    y2 = emu.selective_scan_fn(u, dl, A, B, C, Dk, z, db, True)
    ref = selective_scan_ref(
        u.transpose(1, 2), dsp.transpose(1, 2), A, B.permute(0, 3, 1, 2), C.permute(0, 3, 1, 2), Dk
    ).transpose(1, 2) * F.silu(z)
    torch.testing.assert_close(y2, ref)
    big = torch.tensor([[[25.0, 19.0]]], dtype=DT)  # above the threshold softplus(x) = x
    torch.testing.assert_close(
        emu._softplus(big), torch.tensor([[[25.0, float(F.softplus(big)[0, 0, 1])]]], dtype=DT)
    )


def test_emulator_conv_and_ssd_by_hand():
    x = torch.tensor([[[1.0, 2.0, 3.0]]], dtype=DT)  # (b, dim, L)
    w = torch.tensor([[10.0, 100.0]], dtype=DT)  # tap 1 multiplies x_t, tap 0 x_{t-1}
    torch.testing.assert_close(
        emu.causal_conv1d_fn(x, w, torch.tensor([0.5], dtype=DT)),
        torch.tensor([[[100.5, 210.5, 320.5]]], dtype=DT),
    )
    # SSD, 1 head, P = N = 1: h_t = e^{dt A} h + dt x B, y = C h + D x
    xs = torch.tensor([1.0, 2.0], dtype=DT).view(1, 2, 1, 1)
    dt = torch.tensor([0.5, 0.25], dtype=DT).view(1, 2, 1)
    A = torch.tensor([-2.0], dtype=DT)
    Bs = torch.tensor([3.0, 5.0], dtype=DT).view(1, 2, 1, 1)
    Cs = torch.tensor([7.0, 11.0], dtype=DT).view(1, 2, 1, 1)
    h0 = 0.5 * 1 * 3
    h1 = float(torch.exp(torch.tensor(-0.5))) * h0 + 0.25 * 2 * 5
    y = emu.mamba_chunk_scan_combined(xs, dt, A, Bs, Cs, 16, D=torch.tensor([0.1], dtype=DT))
    torch.testing.assert_close(y.flatten(), torch.tensor([7 * h0 + 0.1, 11 * h1 + 0.2], dtype=DT))
    # default dt_limit (0, inf) clamps a negative dt to 0 (kernel behaviour)
    y0 = emu.mamba_chunk_scan_combined(xs, -dt, A, Bs, Cs, 16)
    assert torch.count_nonzero(y0) == 0


def test_emulator_enforces_kernel_contracts(monkeypatch):
    u, delta, A, B, C, D = _s6_inputs(1, 6, 3, 1)
    uk, dk = u.transpose(1, 2).contiguous(), delta.transpose(1, 2).contiguous()
    Bk = B.permute(0, 2, 3, 1).contiguous()  # (b, 1, N, L)
    with pytest.raises(emu.KernelContractError, match="divisible"):
        emu.selective_scan_fn(uk, dk, A, Bk.repeat(1, 4, 1, 1), Bk.repeat(1, 4, 1, 1))  # 6 % 4
    with pytest.raises(emu.KernelContractError, match="D must"):
        emu.selective_scan_fn(uk.float(), dk.float(), A.float(), Bk.float(), Bk.float(), D)  # D float64
    with pytest.raises(emu.KernelContractError, match="n_groups"):
        emu.selective_scan_fn(uk, dk, A, A, Bk.repeat(1, 2, 1, 1))  # constant B, 2-group C
    monkeypatch.setattr(emu, "MAX_GRID_DIM", 4)
    with pytest.raises(emu.KernelContractError, match="grid"):
        emu.selective_scan_fn(uk, dk, A, Bk, Bk)
    monkeypatch.setattr(emu, "MAX_DSTATE", 2)
    monkeypatch.setattr(emu, "MAX_GRID_DIM", 65535)
    with pytest.raises(emu.KernelContractError, match="state dimension"):
        emu.selective_scan_fn(uk, dk, A, Bk, Bk)
    with pytest.raises(emu.KernelContractError, match="width"):
        emu.causal_conv1d_fn(uk, torch.ones(6, 5, dtype=DT))


# ------------------------------------------------------------------------------------------------
# selective scan adapter
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("E,g", [(1, 1), (1, 2), (3, 1), (3, 2)])
def test_selective_scan_real_matches_fused(E, g):
    k, ss, _, _ = _spied()
    args = _s6_inputs(E, 4, 3, g, seed=E * 10 + g)
    a = _leaves(*args)
    b = _leaves(*args)
    y = cuda.selective_scan(*a, kernels=k)
    y_ref = selective_scan_fused(*b)
    _assert_same(y, y_ref, a, b)
    assert len(ss.calls) == 1 and tuple(ss.calls[0][3]) == (2, E * g, 3, 7)  # B: (Bt, G, N, L)


@pytest.mark.parametrize("E", [1, 3])
def test_selective_scan_gate_bias_softplus(E):
    u, delta, A, B, C, D = _s6_inputs(E, 4, 3, 1, seed=5)
    z = torch.randn(u.shape, generator=_gen(9), dtype=DT)
    db = torch.randn(u.shape[-1], generator=_gen(8), dtype=DT)
    a = _leaves(u, delta, A, B, C, D, z, db)
    b = _leaves(u, delta, A, B, C, D, z, db)
    y = cuda.selective_scan(*a[:6], z=a[6], delta_bias=a[7], delta_softplus=True, kernels=EMULATOR)
    y_ref = selective_scan_ref(b[0], F.softplus(b[1] + b[7]), *b[2:6]) * F.silu(b[6])
    _assert_same(y, y_ref, a, b)
    # the backend dispatch's torch path computes the same thing
    c = _leaves(u, delta, A, B, C, D, z, db)
    y_be = backend.selective_scan(*c[:6], z=c[6], delta_bias=c[7], delta_softplus=True, backend="torch")
    _assert_same(y_be, y_ref, c, b)


@pytest.mark.parametrize("E,g", [(1, 1), (3, 2)])
@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_selective_scan_complex_matches_ref(E, g, scale):
    k, ss, _, _ = _spied()
    args = _s6_inputs(E, 2, 3, g, L=6, seed=3, complex_=True)
    a = _leaves(*args)
    b = _leaves(*args)
    y = cuda.selective_scan(*a, complex_output_scale=scale, kernels=k)
    y_ref = selective_scan_ref(*b, complex_output_scale=scale)
    _assert_same(y, y_ref, a, b)
    Bk = ss.calls[0][3]
    assert tuple(Bk) == (2, E * g, 3, 12)  # (L two) interleaved real B


def test_selective_scan_complex_A_real_BC_and_constant_BC():
    u, delta, A, B, C, D = _s6_inputs(3, 2, 4, 1, L=5, seed=4, complex_=True)
    Br, Cr = B.real.contiguous(), C.real.contiguous()
    a = _leaves(u, delta, A, Br, Cr, D)
    b = _leaves(u, delta, A, Br, Cr, D)
    _assert_same(
        cuda.selective_scan(*a, complex_output_scale=2.0, kernels=EMULATOR),
        selective_scan_ref(*b, complex_output_scale=2.0),
        a,
        b,
    )
    # S4D-style: constant complex B and C (D_, N)
    Bc, Cc = B[0, 0].repeat_interleave(2, 0), C[1, 2].repeat_interleave(2, 0)  # (D_, N)
    a = _leaves(u, delta, A, Bc, Cc)
    b = _leaves(u, delta, A, Bc, Cc)
    _assert_same(cuda.selective_scan(*a, kernels=EMULATOR), selective_scan_ref(*b), a, b)


@pytest.mark.parametrize("E", [1, 3])
def test_selective_scan_s4d_layout_uses_constant_B(E):
    """S4DCore passes B expanded over (Bt, L) (stride 0) and C (D_, N): both go in as constants."""
    k, ss, _, _ = _spied()
    d, N, Bt, L = 4, 3, 2, 6
    u = torch.randn(Bt, L, E * d, generator=_gen(1), dtype=DT)
    A = -torch.rand(E * d, N, generator=_gen(2), dtype=DT) - 0.1
    Bp = torch.randn(E, N, generator=_gen(3), dtype=DT)
    C = torch.randn(E * d, N, generator=_gen(4), dtype=DT)
    a = _leaves(u, A, Bp, C)
    b = _leaves(u, A, Bp, C)
    y = cuda.selective_scan(
        a[0], torch.ones_like(a[0]), a[1], a[2][None, None].expand(Bt, L, E, N), a[3], kernels=k
    )
    y_ref = selective_scan_fused(
        b[0], torch.ones_like(b[0]), b[1], b[2][None, None].expand(Bt, L, E, N), b[3]
    )
    _assert_same(y, y_ref, a, b)
    assert tuple(ss.calls[0][3]) == (E * d, N) and tuple(ss.calls[0][4]) == (E * d, N)


def test_selective_scan_mixed_groups_and_const_var():
    u, delta, A, B, C, D = _s6_inputs(1, 12, 3, 2, seed=6)
    C4 = torch.randn(2, 7, 4, 3, generator=_gen(7), dtype=DT)  # B: 2 groups, C: 4 groups
    a = _leaves(u, delta, A, B, C4, D)
    b = _leaves(u, delta, A, B, C4, D)
    _assert_same(cuda.selective_scan(*a, kernels=EMULATOR), selective_scan_ref(*b), a, b)
    # constant B with 4-group C: the kernel takes n_groups from B (= 1), so one call per group
    k, ss, _, _ = _spied()
    Bc = torch.randn(12, 3, generator=_gen(8), dtype=DT)
    a = _leaves(u, delta, A, Bc, C4, D)
    b = _leaves(u, delta, A, Bc, C4, D)
    _assert_same(cuda.selective_scan(*a, kernels=k), selective_scan_ref(*b), a, b)
    assert len(ss.calls) == 4


@pytest.mark.parametrize(
    "E,g,limit,n_calls", [(3, 1, 8, 2), (3, 2, 4, 3), (3, 1, 3, 6), (1, 1, 3, 2), (3, 1, 12, 1)]
)
def test_selective_scan_dim_limit_split(monkeypatch, E, g, limit, n_calls):
    """Packs wider than the launch grid are split on group boundaries (or inside a group)."""
    monkeypatch.setattr(cuda, "MAX_GRID_DIM", limit)
    monkeypatch.setattr(emu, "MAX_GRID_DIM", limit)  # the emulated kernel rejects dim > limit
    k, ss, _, _ = _spied()
    u, delta, A, B, C, D = _s6_inputs(E, 4, 3, g, seed=11)
    z = torch.randn(u.shape, generator=_gen(12), dtype=DT)
    db = torch.randn(u.shape[-1], generator=_gen(13), dtype=DT)
    a = _leaves(u, delta, A, B, C, D, z, db)
    b = _leaves(u, delta, A, B, C, D, z, db)
    y = cuda.selective_scan(*a[:6], z=a[6], delta_bias=a[7], delta_softplus=True, kernels=k)
    y_ref = selective_scan_ref(b[0], F.softplus(b[1] + b[7]), *b[2:6]) * F.silu(b[6])
    _assert_same(y, y_ref, a, b)
    assert len(ss.calls) == n_calls
    assert all(c[0][1] <= limit for c in ss.calls)


def test_selective_scan_dstate_split(monkeypatch):
    monkeypatch.setattr(cuda, "MAX_DSTATE", 3)
    monkeypatch.setattr(emu, "MAX_DSTATE", 3)
    k, ss, _, _ = _spied()
    u, delta, A, B, C, D = _s6_inputs(3, 2, 7, 1, seed=14)
    z = torch.randn(u.shape, generator=_gen(15), dtype=DT)
    a = _leaves(u, delta, A, B, C, D, z)
    b = _leaves(u, delta, A, B, C, D, z)
    _assert_same(
        cuda.selective_scan(*a[:6], z=a[6], kernels=k), selective_scan_ref(*b[:6]) * F.silu(b[6]), a, b
    )
    assert [tuple(c[2]) for c in ss.calls] == [(6, 3), (6, 3), (6, 1)]


def test_selective_scan_fp32_dtypes_reach_kernel_as_documented():
    """fp32 activations: A, D, delta_bias fp32 (complex64 A), variable B/C in u's dtype."""
    k, ss, _, _ = _spied()
    u, delta, A, B, C, D = (
        t.to(torch.complex64) if t.is_complex() else t.float()
        for t in _s6_inputs(2, 2, 3, 1, L=4, seed=16, complex_=True)
    )
    y = cuda.selective_scan(u, delta, A, B, C, D, delta_bias=torch.zeros(4), kernels=k)
    assert y.dtype == torch.float32 and y.shape == u.shape


# ------------------------------------------------------------------------------------------------
# SSD adapter
# ------------------------------------------------------------------------------------------------


def _ssd_inputs(E, H, G, P=3, N=4, Bt=2, L=9, seed=0):
    gen = _gen(seed)
    x = torch.randn(E, Bt, L, H, P, generator=gen, dtype=DT)
    dt = torch.randn(E, Bt, L, H, generator=gen, dtype=DT) - 1
    A = -torch.rand(E, H, generator=gen, dtype=DT) - 0.2
    B = torch.randn(E, Bt, L, G, N, generator=gen, dtype=DT)
    C = torch.randn(E, Bt, L, G, N, generator=gen, dtype=DT)
    return x, dt, A, B, C


def _ssd_reference(x, dt, A, B, C, D=None, z=None, dt_bias=None):
    """Per member: Δ = softplus(dt + bias); ssd_ref(x·Δ, Δ·A, B→heads, C→heads) + D x, gate."""
    E, H, G = x.shape[0], x.shape[3], B.shape[3]
    ys = []
    for e in range(E):
        d = F.softplus(dt[e] + (0 if dt_bias is None else dt_bias[e]))  # (Bt, L, H)
        Bh = B[e].repeat_interleave(H // G, dim=2)
        Ch = C[e].repeat_interleave(H // G, dim=2)
        y = ssd_ref(x[e] * d[..., None], d * A[e], Bh, Ch)
        if D is not None:
            y = y + (D[e] if D.dim() == 3 else D[e][:, None]) * x[e]
        if z is not None:
            y = y * F.silu(z[e])
        ys.append(y)
    return torch.stack(ys)


@pytest.mark.parametrize("E,H,G,Dshape", [(1, 4, 1, "h"), (3, 4, 2, "hp"), (3, 2, 2, None), (1, 4, 4, "h")])
def test_ssd_matches_ssd_ref(E, H, G, Dshape):
    k, _, spy, _ = _spied()
    x, dt, A, B, C = _ssd_inputs(E, H, G, seed=E + H + G)
    P = x.shape[-1]
    D = (
        None
        if Dshape is None
        else torch.randn((E, H) if Dshape == "h" else (E, H, P), generator=_gen(1), dtype=DT)
    )
    z = torch.randn(x.shape, generator=_gen(2), dtype=DT)
    bias = torch.randn(E, H, generator=_gen(3), dtype=DT)
    a = _leaves(x, dt, A, B, C, D, z, bias)
    b = _leaves(x, dt, A, B, C, D, z, bias)
    y = cuda.ssd_scan(*a[:5], D=a[5], z=a[6], dt_bias=a[7], dt_softplus=True, kernels=k)
    _assert_same(y, _ssd_reference(*b), a, b)
    assert len(spy.calls) == 1 and tuple(spy.calls[0][3]) == (2, 9, E * G, 4)  # B: (b, L, E·G, N)


def test_ssd_linear_attention_case():
    """dt = 1, A = 0 is causal linear attention y_t = Σ_{s≤t} (C_t·B_s) x_s (LinearMamba's core)."""
    x, _, _, B, C = _ssd_inputs(2, 1, 1, P=3, N=4, seed=21)
    y = cuda.ssd_scan(
        x, torch.ones(x.shape[:4], dtype=DT), torch.zeros(2, 1, dtype=DT), B, C, kernels=EMULATOR
    )
    L = x.shape[2]
    scores = torch.einsum("ebtn,ebsn->ebts", C[..., 0, :], B[..., 0, :]).masked_fill(
        ~torch.ones(L, L, dtype=torch.bool).tril(), 0
    )
    torch.testing.assert_close(y[..., 0, :], scores @ x[..., 0, :])


def test_ssd_head_and_batch_split(monkeypatch):
    monkeypatch.setattr(cuda, "MAX_GRID_DIM", 4)
    monkeypatch.setattr(emu, "MAX_GRID_DIM", 4)
    k, _, spy, _ = _spied()
    x, dt, A, B, C = _ssd_inputs(3, 4, 2, Bt=3, L=20, seed=31)  # 12 heads; chunk 16 -> 2 chunks
    a = _leaves(x, dt, A, B, C)
    b = _leaves(x, dt, A, B, C)
    _assert_same(cuda.ssd_scan(*a, dt_softplus=True, chunk_size=16, kernels=k), _ssd_reference(*b), a, b)
    # heads: 3 calls of 4 heads (2 whole groups); batch: 2 rows per call (2 * 2 chunks <= 4)
    assert len(spy.calls) == 6
    assert all(c[0][2] <= 4 and c[0][0] * 2 <= 4 for c in spy.calls)


# ------------------------------------------------------------------------------------------------
# causal conv adapter
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("E", [1, 3])
@pytest.mark.parametrize("W", [2, 3, 4, 5])
@pytest.mark.parametrize("bias,act", [(True, "silu"), (False, None)])
def test_causal_conv_matches_packed_conv(E, W, bias, act):
    torch.manual_seed(0)
    conv = PackedCausalConv(E, 5, W, bias=bias).double()
    from ssmrepro.models.layers import reset_members

    reset_members(conv, list(range(E)))
    x = torch.randn(E, 2, 9, 5, generator=_gen(E * W), dtype=DT)
    k, _, _, cc = _spied()
    xa, xb = _leaves(x, x)
    y = cuda.causal_conv1d(xa, conv.weight, conv.bias, activation=act, kernels=k)
    y_ref = conv(xb)
    y_ref = F.silu(y_ref) if act else y_ref
    params = [p for p in (conv.weight, conv.bias) if p is not None]
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    g1 = _grads(y, [xa, *params])
    g2 = _grads(y_ref, [xb, *params])
    for p, q in zip(g1, g2):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)
    assert len(cc.calls) == (1 if W <= 4 else 0)  # width 5: our torch conv, no kernel call
    if W <= 4:
        assert tuple(cc.calls[0][0]) == (2, E * 5, 9)


def test_causal_conv_channel_split(monkeypatch):
    monkeypatch.setattr(cuda, "MAX_GRID_DIM", 4)
    monkeypatch.setattr(emu, "MAX_GRID_DIM", 4)
    k, _, _, cc = _spied()
    x = torch.randn(3, 2, 6, 3, generator=_gen(1), dtype=DT)
    w = torch.randn(3, 3, 4, generator=_gen(2), dtype=DT)
    bb = torch.randn(3, 3, generator=_gen(3), dtype=DT)
    a, b = _leaves(x, w, bb), _leaves(x, w, bb)
    _assert_same(
        cuda.causal_conv1d(*a, activation="silu", kernels=k), F.silu(cuda.causal_conv1d_torch(*b)), a, b
    )
    assert [c[0][1] for c in cc.calls] == [3, 3, 3]  # 9 channels, limit 4: equal pieces


# ------------------------------------------------------------------------------------------------
# backend selection, dispatch and the import shim
# ------------------------------------------------------------------------------------------------


def test_backend_dispatch_and_selection(monkeypatch):
    args = _s6_inputs(3, 4, 3, 1, seed=40)
    torch.testing.assert_close(backend.selective_scan(*args), selective_scan_fused(*args), rtol=0, atol=0)
    with backend.scan_backend("cuda"):
        assert backend.get_scan_backend() == "cuda"
        with pytest.raises(backend.BackendError, match="CUDA tensors"):
            backend.selective_scan(*args)
    assert backend.get_scan_backend() == "torch"
    with pytest.raises(backend.BackendError):
        backend.set_scan_backend("triton")
    if not torch.cuda.is_available():
        assert backend.cuda_kernels_importable() == (False, "no CUDA device")
        with pytest.raises(backend.BackendError, match="--backend cuda"):
            backend.select_backend("cuda", "cpu")
    # with a CUDA device and importable kernels, cuda / auto select the kernels
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "load_kernels", lambda: EMULATOR)
    assert backend.select_backend("cuda", "cuda")[0] == "cuda"
    assert backend.select_backend("auto", "cuda")[0] == "cuda"
    assert backend.select_backend("auto", "cpu")[0] == "torch"
    with pytest.raises(backend.BackendError, match="needs --device cuda"):
        backend.select_backend("cuda", "cpu")

    def fail():
        raise cuda.KernelImportError("importing selective_scan_cuda failed")

    monkeypatch.setattr(cuda, "load_kernels", fail)
    ok, why = backend.cuda_kernels_importable()
    assert not ok and "selective_scan_cuda" in why
    assert backend.select_backend("auto", "cuda")[0] == "torch"


def test_causal_conv_dispatch_torch():
    x = torch.randn(2, 2, 5, 3, generator=_gen(1), dtype=DT)
    w = torch.randn(2, 3, 4, generator=_gen(2), dtype=DT)
    torch.testing.assert_close(
        backend.causal_conv(x, w, activation="silu"),
        cuda.causal_conv1d(x, w, activation="silu", kernels=EMULATOR),
    )


def test_import_shim_skips_mamba_ssm_init(tmp_path, monkeypatch):
    """load order of notes §3.4 on a fake package tree: mamba_ssm/__init__.py must never run."""
    files = {
        "selective_scan_cuda.py": "",
        "causal_conv1d_cuda.py": "",
        "causal_conv1d/__init__.py": "__version__ = '1.7.0'\ndef causal_conv1d_fn(*a, **k): return 'cc'\n",
        "mamba_ssm/__init__.py": "__version__ = '2.3.2.post1'\nraise ImportError('package __init__ ran')\n",
        "mamba_ssm/ops/__init__.py": "",
        "mamba_ssm/ops/selective_scan_interface.py": (
            "import selective_scan_cuda\ndef selective_scan_fn(*a, **k): return 'ss'\n"
        ),
        "mamba_ssm/ops/triton/__init__.py": "",
        "mamba_ssm/ops/triton/ssd_combined.py": "def mamba_chunk_scan_combined(*a, **k): return 'ssd'\n",
    }
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    names = [
        "selective_scan_cuda",
        "causal_conv1d_cuda",
        "causal_conv1d",
        "mamba_ssm",
        "mamba_ssm.ops",
        "mamba_ssm.ops.selective_scan_interface",
        "mamba_ssm.ops.triton",
        "mamba_ssm.ops.triton.ssd_combined",
    ]
    for n in names:
        monkeypatch.delitem(sys.modules, n, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv(cuda.KERNEL_PATHS_ENV, str(tmp_path))
    try:
        k = cuda.import_kernel_modules()
        assert (k.selective_scan_fn(), k.mamba_chunk_scan_combined(), k.causal_conv1d_fn()) == (
            "ss",
            "ssd",
            "cc",
        )
        assert k.source == "mamba_ssm 2.3.2.post1, causal_conv1d 1.7.0"
        assert "mamba_ssm" not in sys.modules  # the stub is gone again, the op modules stay
        assert "mamba_ssm.ops.selective_scan_interface" in sys.modules
    finally:
        for n in names:
            sys.modules.pop(n, None)
    # a missing compiled extension is reported by name
    (tmp_path / "selective_scan_cuda.py").unlink()
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    try:
        with pytest.raises(cuda.KernelImportError, match="selective_scan_cuda"):
            cuda.import_kernel_modules(paths=[str(tmp_path / "nowhere")])
    finally:
        for n in names:
            sys.modules.pop(n, None)


def test_real_mamba_ssm_imports_after_the_stub(tmp_path, monkeypatch):
    """After the kernels load through the stub, ``from mamba_ssm import ...`` in the same process
    runs the real package ``__init__`` and gets the same op functions."""
    files = {
        "selective_scan_cuda.py": "",
        "causal_conv1d_cuda.py": "",
        "causal_conv1d/__init__.py": "__version__ = '1.7.0'\ndef causal_conv1d_fn(*a, **k): return 'cc'\n",
        "mamba_ssm/__init__.py": (
            "__version__ = '2.3.2.post1'\n"
            "from mamba_ssm.ops.selective_scan_interface import selective_scan_fn\n"
            "from mamba_ssm.modules.mamba_simple import Mamba\n"),
        "mamba_ssm/ops/__init__.py": "",
        "mamba_ssm/ops/selective_scan_interface.py": "def selective_scan_fn(*a, **k): return 'ss'\n",
        "mamba_ssm/ops/triton/__init__.py": "",
        "mamba_ssm/ops/triton/ssd_combined.py": (
            "def mamba_chunk_scan_combined(*a, **k):\n"
            "    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn\n"
            "    return 'ssd+' + selective_scan_fn()\n"),
        "mamba_ssm/modules/__init__.py": "",
        "mamba_ssm/modules/mamba_simple.py": "class Mamba:\n    real = True\n",
    }
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    prefixes = ("selective_scan_cuda", "causal_conv1d", "mamba_ssm")
    for n in [n for n in sys.modules if n.startswith(prefixes)]:
        monkeypatch.delitem(sys.modules, n)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        k = cuda.import_kernel_modules(paths=[str(tmp_path)])
        assert k.mamba_chunk_scan_combined() == "ssd+ss"  # call-time imports still resolve
        import mamba_ssm
        from mamba_ssm import Mamba, selective_scan_fn

        assert Mamba.real and not getattr(mamba_ssm, "__ssmrepro_stub__", False)
        assert selective_scan_fn is k.selective_scan_fn  # one copy of the op module
    finally:
        for n in [n for n in sys.modules if n.startswith(prefixes)]:
            sys.modules.pop(n, None)


@pytest.mark.parametrize("which", ["s6", "s4d", "mamba1", "mamba2", "mamba2_3conv", "b2s6_split",
                                   "s4d_zoh_scan"])
def test_models_through_adapters(monkeypatch, which):
    """A pack (E = 3) whose scans and convs take the backend's cuda branch (adapters over the
    emulated kernels) equals the model's own torch path, and the kernel log names, per mixer, the
    path each one took (what a run record stores)."""
    from ssmrepro.kernels import backend as be
    from ssmrepro.models.layers import reset_members
    from ssmrepro.models.mixers import build_mixer

    E, d, N = 3, 8, 4
    build = {
        "s6": lambda: build_mixer({"name": "s6", "d_state": N}, E, d),
        "s4d": lambda: build_mixer({"name": "s4d", "d_state": N, "skip": True}, E, d),
        "mamba1": lambda: build_mixer({"name": "mamba1", "d_state": N, "d_conv": 4}, E, d),
        "mamba2": lambda: build_mixer({"name": "mamba2", "d_state": N, "heads": 2}, E, d),
        "mamba2_3conv": lambda: build_mixer({"name": "mamba2_3conv", "d_state": N}, E, d),
        "b2s6_split": lambda: build_mixer({"name": "b2s6", "d_state": N, "heads": 2, "impl": "split"},
                                          E, d),
        "s4d_zoh_scan": lambda: build_mixer({"name": "s4d_zoh", "d_state": N, "impl": "scan"}, E, d),
    }[which]
    torch.manual_seed(0)
    model = build().double()
    reset_members(model, [5, 6, 7])
    x = torch.randn(E, 2, 6, d, generator=_gen(1), dtype=DT)
    be.reset_kernel_usage()
    y_ref = model(x)
    torch_paths = be.kernel_usage()
    assert torch_paths and all(v.startswith("torch:") for v in torch_paths.values()), torch_paths
    g_ref = torch.autograd.grad(y_ref.square().sum(), list(model.parameters()))
    k, ss, ssd_spy, cc = _spied()
    monkeypatch.setattr(be, "_resolve", lambda backend, *t: "cuda")  # CPU tensors, cuda branch
    monkeypatch.setattr(be._cuda, "selective_scan",
                        functools.partial(cuda.selective_scan, kernels=k))
    monkeypatch.setattr(be._cuda, "ssd_scan", functools.partial(cuda.ssd_scan, kernels=k))
    monkeypatch.setattr(be._cuda, "causal_conv1d", functools.partial(cuda.causal_conv1d, kernels=k))
    be.reset_kernel_usage()
    y = model(x)
    usage = be.kernel_usage()
    g = torch.autograd.grad(y.square().sum(), list(model.parameters()))
    torch.testing.assert_close(y, y_ref, rtol=1e-10, atol=1e-10)
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    n_conv = {"mamba1": 1, "mamba2": 1, "mamba2_3conv": 3}.get(which, 0)
    n_ssd = 1 if which.startswith("mamba2") else 0
    n_scan = {"mamba2": 0, "mamba2_3conv": 0, "b2s6_split": None}.get(which, 1)
    if n_scan is None:  # B2S6: grouped scan + bias scan (constant B, grouped C: a call per group)
        assert len(ss.calls) >= 2
    else:
        assert len(ss.calls) == n_scan
    assert len(ssd_spy.calls) == n_ssd and len(cc.calls) == n_conv
    assert set(usage) == set(torch_paths) and all(v.startswith("cuda:") for v in usage.values())
