"""The fused B2S6 scan (kernels.b2s6_scan) against its full-size twin and the mixer's references.

float64 throughout: outputs and every gradient (u, Δ, A, B_sel, B_bias, C) equal
``b2s6_scan_ref`` for complex / real A and B, with and without B_bias, Euler and ZOH, and for
plans that cut batch rows, groups and time blocks unevenly; torch.autograd.gradcheck on a tiny
case; the mixer's fused path equals its old ``direct`` path and ``forward_ref`` (eqs 7-8 with
plain loops), packs included.
"""

import itertools

import pytest
import torch

from ssmrepro.kernels.b2s6_scan import b2s6_plan, b2s6_scan, b2s6_scan_ref
from ssmrepro.kernels.inplace import ScanPlan
from ssmrepro.models.layers import reset_members
from ssmrepro.models.mixers import build_mixer

F64, C128 = torch.float64, torch.complex128


def _inputs(Bt, L, G, K, N, cA, cB, bias, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(Bt, L, G, K, dtype=F64, generator=g)
    dl = torch.rand(Bt, L, G, K, dtype=F64, generator=g) + 0.05
    Ar = -torch.rand(G, N, dtype=F64, generator=g) - 0.2
    A = torch.complex(Ar, 3 * torch.randn(G, N, dtype=F64, generator=g)) if cA else Ar
    bd = C128 if cB else F64
    Bs = torch.randn(Bt, L, G, N, dtype=bd, generator=g)
    Bb = torch.randn(G, K, N, dtype=bd, generator=g) if bias else None
    C = torch.randn(Bt, L, G, N, dtype=F64, generator=g)
    return [t if t is None else t.requires_grad_(True) for t in (u, dl, A, Bs, Bb, C)]


PLANS = [None, ScanPlan(2, 4, 3, False), ScanPlan(1, 3, 4, False), ScanPlan(3, 1, 20, False)]


@pytest.mark.parametrize("cA,cB,bias,disc", list(itertools.product(
    [True, False], [True, False], [True, False], ["euler", "zoh"])))
def test_fused_equals_reference(cA, cB, bias, disc):
    ins = _inputs(3, 11, 4, 2, 3, cA, cB, bias)
    req = [t for t in ins if t is not None]
    w = torch.randn(3, 11, 4, 2, dtype=F64)
    y0 = b2s6_scan_ref(*ins, disc)
    g0 = torch.autograd.grad((y0 * w).sum(), req)
    for plan in PLANS:
        y1 = b2s6_scan(*ins, disc, plan)
        torch.testing.assert_close(y1, y0, rtol=1e-11, atol=1e-12)
        g1 = torch.autograd.grad((y1 * w).sum(), req)
        for a, b in zip(g1, g0):
            assert a.dtype == b.dtype
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("disc", ["euler", "zoh"])
def test_gradcheck(disc):
    ins = _inputs(2, 5, 2, 2, 3, True, True, True, seed=1)
    assert torch.autograd.gradcheck(lambda *a: b2s6_scan(*a, disc, ScanPlan(1, 1, 2, False)), ins)


def test_plan_tiles_fit():
    p = b2s6_plan(32, 8, 8, 16, True, 64)  # the mqar-b2s6 bench layer
    assert p.groups == 8 and 1 <= p.rows <= 32 and 2 <= p.T <= 32
    p = b2s6_plan(2, 64, 16, 64, True, 1024)  # a pack of 8 LRA layers: groups are cut
    assert p.rows == 1 and p.groups < 64


@pytest.mark.parametrize("kw", [
    {}, {"discretization": "zoh"}, {"complex_A": False, "complex_B": False},
    {"complex_B": False, "bias": False}, {"complex_A": False, "discretization": "zoh"},
    {"skip": True}])
def test_mixer_fused_equals_direct_and_reference(kw):
    E, d = 2, 16
    ms = {}
    for impl in ("fused", "direct"):
        m = build_mixer({"name": "b2s6", "d_state": 4, "heads": 4, "impl": impl, **kw}, E, d)
        reset_members(m, [3, 8])
        ms[impl] = m.double()
    x = torch.randn(E, 3, 10, d, dtype=F64)
    w = torch.randn(E, 3, 10, d, dtype=F64)
    res = {}
    for name, fn in [("fused", ms["fused"]), ("direct", ms["direct"]),
                     ("ref", ms["fused"].forward_ref)]:
        xi = x.clone().requires_grad_(True)
        y = fn(xi)
        m = ms["direct" if name == "direct" else "fused"]
        params = [p for p in m.parameters()]
        res[name] = (y, torch.autograd.grad((y * w).sum(), [xi, *params]))
    for other in ("direct", "ref"):
        torch.testing.assert_close(res["fused"][0], res[other][0], rtol=1e-10, atol=1e-11)
        for a, b in zip(res["fused"][1], res[other][1]):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)
