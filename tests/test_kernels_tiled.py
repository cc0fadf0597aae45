"""The tiled CPU kernels equal the formulas they replace (float64, outputs and all gradients):
kernels/conv.py against the pad + shifted-slices conv, the tiled fused selective scan against the
sequential reference for every tile / block shape class, and the backend's kernel override."""

import pytest
import torch
import torch.nn.functional as F

from ssmrepro.bench.legacy import causal_conv1d_slices, selective_scan_fused_v1
from ssmrepro.kernels import backend
from ssmrepro.kernels import inplace as ip
from ssmrepro.kernels.conv import _chunks, _reference, causal_conv1d_cpu
from ssmrepro.kernels.cuda import causal_conv1d_torch
from ssmrepro.kernels.scan import selective_scan_ref

DT = torch.float64


def _close(a, b, what=""):
    torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-12, msg=what)


# ------------------------------------------------------------------------------------- conv


@pytest.mark.parametrize("W", range(1, 9))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [None, "silu"])
def test_conv_equals_slices_formula(W, bias, act):
    """Widths 1..8, packs of 3, bias on/off, SiLU on/off; tiles inside one member (chunk 1 row),
    spanning members (whole packs), ragged last tiles, and one tile; L < W included."""
    g = torch.Generator().manual_seed(10 * W + bias)
    for E, Bt, L, C in ((3, 5, 11, 6), (2, 3, 2, 4)):
        x = torch.randn(E, Bt, L, C, dtype=DT, generator=g)
        w = torch.randn(E, C, W, dtype=DT, generator=g)
        b = torch.randn(E, C, dtype=DT, generator=g) if bias else None
        gy = torch.randn(E, Bt, L, C, dtype=DT, generator=g)
        xs = [t.requires_grad_() for t in (x, w, b) if t is not None]
        y0 = causal_conv1d_slices(x, w, b, act)
        g0 = torch.autograd.grad(y0, xs, gy)
        for chunk in (1, 2 * L * C, 3 * L * C, Bt * L * C + 1, 10**9):
            y = causal_conv1d_cpu(x, w, b, act, chunk_elems=chunk)
            _close(y, y0, f"out W={W} chunk={chunk}")
            for a, c, name in zip(torch.autograd.grad(y, xs, gy), g0, "x weight bias".split()):
                _close(a, c, f"d{name} W={W} chunk={chunk}")


def test_conv_noncontiguous_input_float32_and_dispatch():
    """x as the model passes it (one half of in_proj's output: a strided view); float32 within
    rounding of the old formula; the torch dispatch and cuda.causal_conv1d_torch route here."""
    g = torch.Generator().manual_seed(3)
    xz = torch.randn(2, 4, 9, 10, generator=g)
    x = xz[..., :5]  # (E, Bt, L, C) with row stride 10
    w, b = torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, generator=g)
    y = causal_conv1d_cpu(x, w, b, "silu", chunk_elems=20)
    torch.testing.assert_close(y, causal_conv1d_slices(x, w, b, "silu"), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(causal_conv1d_torch(x, w, b, "silu"), y, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(backend.causal_conv(x, w, b, "silu", backend="torch"), y,
                               rtol=1e-6, atol=1e-7)


def test_conv_gradcheck_and_edge_cases():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 2, 5, 3, dtype=DT, generator=g, requires_grad=True)
    w = torch.randn(2, 3, 3, dtype=DT, generator=g, requires_grad=True)
    b = torch.randn(2, 3, dtype=DT, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: causal_conv1d_cpu(*a, "silu", chunk_elems=7), (x, w, b))
    assert causal_conv1d_cpu(x[:, :, :0], w, b).shape == (2, 2, 0, 3)
    with pytest.raises(ValueError):
        causal_conv1d_cpu(x, w[:, :2], b)
    with pytest.raises(ValueError):
        causal_conv1d_cpu(x, w, b, "relu")
    # only x needs a gradient: weight / bias gradients are skipped, x's is unchanged
    gx = torch.autograd.grad(causal_conv1d_cpu(x, w.detach(), None, "silu").sum(), x)[0]
    _close(gx, torch.autograd.grad(causal_conv1d_slices(x, w.detach(), None, "silu").sum(), x)[0])


def test_conv_tiles_cover_rows_once():
    for E, Bt, row, target in ((3, 5, 10, 25), (4, 2, 10, 45), (1, 7, 3, 1), (2, 3, 4, 10**6)):
        seen = torch.zeros(E, Bt, dtype=torch.int64)
        for e0, e1, b0, b1 in _chunks(E, Bt, row, target):
            seen[e0:e1, b0:b1] += 1
        assert bool((seen == 1).all())


# ---------------------------------------------------------------------------- tiled fused scan


def _scan_inputs(Bt, L, G, K, N, c_const=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=DT)  # noqa: E731
    D = G * K
    u = r(Bt, L, D)
    delta = torch.rand(Bt, L, D, generator=g, dtype=DT) * 0.7
    A = -torch.rand(D, N, generator=g, dtype=DT) * 3
    B = r(Bt, L, G, N)
    C = r(D, N) if c_const else r(Bt, L, G, N)
    return [x.requires_grad_() for x in (u, delta, A, B, C, r(D))]


PLANS = [
    # (Bt, L, G, K, N, plan): rows not dividing Bt, T not dividing L, one-group tiles of a
    # multi-group pack (matmul contractions), all-group tiles (mul + sum), single tile, T > L
    (5, 23, 1, 6, 3, ip.ScanPlan(2, 1, 4)),
    (5, 23, 3, 4, 3, ip.ScanPlan(2, 1, 5)),
    (5, 23, 3, 4, 3, ip.ScanPlan(3, 3, 7)),
    (4, 17, 2, 5, 4, ip.ScanPlan(4, 2, 17)),
    (3, 9, 2, 3, 2, ip.ScanPlan(1, 1, 2)),
    (2, 5, 2, 3, 2, ip.ScanPlan(2, 2, 64)),
    (3, 1, 2, 3, 2, ip.ScanPlan(2, 1, 4)),
    # one-group tiles contracting by mul + sum (small N·K)
    (5, 23, 1, 6, 3, ip.ScanPlan(2, 1, 4, matmul=False)),
    (5, 23, 3, 4, 3, ip.ScanPlan(2, 1, 5, matmul=False)),
    # narrow_scan (rows and groups innermost): group tiles not dividing G, one group per tile,
    # all groups, one block longer than L, L = 1
    (5, 23, 3, 4, 3, ip.ScanPlan(5, 2, 5, False, narrow=True)),
    (4, 17, 5, 3, 4, ip.ScanPlan(4, 1, 4, False, narrow=True)),
    (3, 9, 4, 5, 2, ip.ScanPlan(3, 4, 2, False, narrow=True)),
    (2, 5, 2, 3, 2, ip.ScanPlan(2, 2, 64, False, narrow=True)),
    (3, 1, 2, 3, 2, ip.ScanPlan(3, 1, 4, False, narrow=True)),
]


@pytest.mark.parametrize("case", range(len(PLANS)))
@pytest.mark.parametrize("c_const", [False, True])
def test_tiled_scan_equals_reference(case, c_const):
    Bt, L, G, K, N, plan = PLANS[case]
    xs = _scan_inputs(Bt, L, G, K, N, c_const, seed=case)
    w = torch.randn(Bt, L, G * K, dtype=DT, generator=torch.Generator().manual_seed(99))
    y_ref = selective_scan_ref(*xs)
    y = ip.selective_scan_fused(*xs, plan=plan)
    _close(y, y_ref, "y")
    g_ref = torch.autograd.grad((y_ref * w).sum(), xs)
    for a, b, name in zip(torch.autograd.grad((y * w).sum(), xs), g_ref, "u delta A B C D".split()):
        _close(a, b, f"d{name} plan={plan}")


def test_narrow_scan_gradcheck():
    xs = _scan_inputs(2, 7, 3, 2, 2, seed=5)[:5]
    plan = ip.ScanPlan(2, 2, 3, False, narrow=True)
    assert torch.autograd.gradcheck(lambda *a: ip.selective_scan_fused(*a, plan=plan), xs)


def test_tiled_scan_default_plan_matches_old_kernel_float32():
    """The issue's shape class (one group of 128 channels, N = 16; and a pack of 4 such groups)
    at a small batch: the default plan's tiles give the old kernel's result to float32 rounding."""
    for G in (1, 4):
        xs = [x.detach().float().requires_grad_() for x in _scan_inputs(6, 40, G, 128, 16, seed=G)]
        plan = ip.scan_plan(6, G, 128, 16, state=2 * 16 * 128, block=8 * 2 * 16 * 128)
        assert (plan.rows, plan.groups, plan.T) == (2, 1, 8)
        y, y1 = ip.selective_scan_fused(*xs, plan=plan), selective_scan_fused_v1(*xs)
        torch.testing.assert_close(y, y1, rtol=1e-4, atol=1e-4)
        g_new = torch.autograd.grad(y.square().sum(), xs)
        for a, b in zip(g_new, torch.autograd.grad(y1.square().sum(), xs)):
            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)


def test_scan_plan_rules():
    p = ip.scan_plan(64, 1, 128, 16)  # the workload: 512 KB state per step before
    assert p.groups == 1 and p.rows * 16 * 128 <= ip._TILE_STATE and 2 <= p.T <= 128
    assert p.rows * p.T * 16 * 128 <= ip._TILE_BLOCK
    assert p.matmul and not ip.scan_plan(16, 1, 32, 8).matmul  # (1, 8) @ (8, 32) loses to mul + sum
    assert ip.scan_plan(16, 1, 32, 8).T == 32 and ip.scan_plan(16, 1, 32, 8, L=20).T == 20
    assert ip.scan_plan(16, 64, 8, 8).groups == 64  # narrow groups (KEEP n-TH packs) stay together
    assert ip.scan_plan(16, 64, 8, 8).narrow and not ip.scan_plan(16, 1, 8, 8).narrow
    n = ip.scan_plan(16, 200, 8, 8, L=50)  # tiles of groups, balanced: 200 -> 4 tiles of 50
    assert n.narrow and n.groups == 50 and ip._NARROW_MIN_T <= n.T <= ip._NARROW_MAX_T
    assert ip.scan_plan(64, 4, 128, 16).groups == 1  # Mamba packs: one member per tile
    big = ip.scan_plan(3, 1, 4096, 64)  # one row exceeds the state budget: one row per tile
    assert big.rows == 1 and big.T == 2
    p = ip.scan_plan(10, 1, 64, 16, state=3 * 64 * 16)  # balanced: 10 rows -> 4 tiles of <= 3
    assert p.rows == 3
    tiles = ip._tiles(10, 3, ip.ScanPlan(4, 1, 8))
    assert len(tiles) == 9 and tiles[-1] == (8, 10, 2, 3)


def test_torch_kernels_override_restores():
    calls = []

    def fake_conv(x, w, b=None, act=None):
        calls.append("conv")
        return causal_conv1d_slices(x, w, b, act)

    x, w = torch.randn(1, 2, 5, 3), torch.randn(1, 3, 2)
    with backend.torch_kernels(conv=fake_conv):
        backend.causal_conv(x, w, backend="torch")
    backend.causal_conv(x, w, backend="torch")
    assert calls == ["conv"]
    xs = [t.detach() for t in _scan_inputs(2, 6, 1, 3, 2)]
    with backend.torch_kernels(scan=selective_scan_fused_v1):
        y1 = backend.selective_scan(*xs, backend="torch")
    _close(y1, backend.selective_scan(*xs, backend="torch"))
    assert backend._TORCH_SCAN is ip.selective_scan_fused


def test_model_gradients_unchanged_with_new_kernels():
    """A packed 2-layer Mamba LM (float64): the new conv and scan give the old kernels' loss and
    parameter gradients."""
    from ssmrepro.models import MODELS, build_model
    from ssmrepro.tasks.base import TaskInfo

    cfg = MODELS["mamba_lm"].Config(d_model=8, d_state=4, n_layers=2, d_conv=3, expand=2)
    info = TaskInfo(vocab_size=11, n_classes=11, seq_len=7)
    model = build_model(cfg, info, 2, [0, 1]).double()
    ids = torch.randint(0, 11, (2, 3, 7), generator=torch.Generator().manual_seed(0))

    def grads():
        loss = F.cross_entropy(model(ids).reshape(-1, 11), ids.reshape(-1))
        return [loss] + list(torch.autograd.grad(loss, list(model.parameters())))

    new = grads()
    with backend.torch_kernels(conv=causal_conv1d_slices, scan=selective_scan_fused_v1):
        old = grads()
    for a, b in zip(new, old):
        _close(a, b)


@pytest.mark.parametrize("how", ["tiled", "narrow", "backend", "backend-override"])
def test_grouped_views_equal_the_flat_layout(how):
    """u, Δ given as (Bt, L, G, K) views of a pack's (G, Bt, L, K) activations (as S6Core passes
    them): the fused kernel reads them in place (tiled and narrow plans, and through the backend
    dispatch), another kernel swapped in gets a flat copy; all equal the reference on the folded
    (Bt, L, G·K) inputs (float64, values and all gradients)."""
    g = torch.Generator().manual_seed(7)
    G, Bt, L, K, N = 3, 4, 11, 5, 3
    r = lambda *s: torch.randn(*s, generator=g, dtype=DT)  # noqa: E731
    x, dl = r(G, Bt, L, K), torch.rand(G, Bt, L, K, generator=g, dtype=DT) * 0.7
    A = -torch.rand(G * K, N, generator=g, dtype=DT) * 3
    B, C, D = r(Bt, L, G, N), r(Bt, L, G, N), r(G * K)
    leaves = [t.requires_grad_() for t in (x, dl, A, B, C, D)]
    fold = lambda t: t.permute(1, 2, 0, 3).reshape(Bt, L, G * K)  # noqa: E731
    y_ref = selective_scan_ref(fold(x), fold(dl), A, B, C, D)
    args = (x.permute(1, 2, 0, 3), dl.permute(1, 2, 0, 3), A, B, C, D)
    if how == "tiled":
        y = ip.selective_scan_fused(*args, plan=ip.ScanPlan(3, 1, 4))
    elif how == "narrow":
        y = ip.selective_scan_fused(*args, plan=ip.ScanPlan(Bt, 2, 4, False, narrow=True))
    elif how == "backend":  # the default plan (narrow_scan for K = 5)
        y = backend.selective_scan(*args, backend="torch")
    else:
        with backend.torch_kernels(scan=selective_scan_fused_v1):
            y = backend.selective_scan(*args, backend="torch")
    assert y.shape == (Bt, L, G, K)
    _close(y.reshape(Bt, L, G * K), y_ref, "y")
    w = torch.randn(Bt, L, G * K, dtype=DT, generator=g)
    g_ref = torch.autograd.grad((y_ref * w).sum(), leaves)
    for a, b, name in zip(torch.autograd.grad((y.reshape(Bt, L, -1) * w).sum(), leaves), g_ref,
                          "x delta A B C D".split()):
        _close(a, b, f"d{name}")


def test_narrow_scan_results_keep_the_members_layout():
    """With a pack's member-major views (as S6Core passes u, Δ and the x_proj slices B, C) the
    narrow scan returns y and dL/du, dL/dΔ, dL/dB, dL/dC in member-major memory (the layout of
    the members' activations), with the values of contiguous inputs (float64); contiguous
    inputs keep contiguous results."""
    g = torch.Generator().manual_seed(11)
    G, Bt, L, K, N = 5, 3, 9, 4, 3
    r = lambda *s: torch.randn(*s, generator=g, dtype=DT)  # noqa: E731
    x, dl = r(G, Bt, L, K), torch.rand(G, Bt, L, K, generator=g, dtype=DT) * 0.7
    dbl = r(G, Bt, L, 1 + 2 * N)  # like x_proj's output: (Δ↓, B, C) columns
    A, D = -torch.rand(G * K, N, generator=g, dtype=DT) * 3, r(G * K)
    for t in (x, dl, dbl, A, D):
        t.requires_grad_()
    plan = ip.ScanPlan(Bt, 2, 4, False, narrow=True)
    mm = lambda t: t.permute(1, 2, 0, 3)  # noqa: E731  (G, Bt, L, n) memory as (Bt, L, G, n)
    views = (mm(x), mm(dl), A, mm(dbl[..., 1:1 + N]), mm(dbl[..., 1 + N:]), D)
    y = ip.selective_scan_fused(*views, plan=plan)
    assert y.permute(2, 0, 1, 3).is_contiguous()
    flat = [v.detach().contiguous().requires_grad_() for v in views]
    y0 = ip.selective_scan_fused(*flat, plan=plan)
    assert y0.is_contiguous()
    _close(y, y0, "y")
    w = mm(r(G, Bt, L, K))  # an incoming gradient in the members' layout, as in a model
    gv = torch.autograd.grad((y * w).sum(), views)  # grads w.r.t. the views themselves
    for a, b, name in zip(gv, torch.autograd.grad((y0 * w).sum(), flat), "u delta A B C D".split()):
        _close(a, b, f"d{name}")
    raw = {}  # what the scan's backward hands to autograd for the views
    views = (mm(x), mm(dl), A, mm(dbl[..., 1:1 + N]), mm(dbl[..., 1 + N:]), D)
    for name, v in zip("u delta A B C".split(), views):
        v.register_hook(lambda t, name=name: raw.__setitem__(name, t))
    (ip.selective_scan_fused(*views, plan=plan) * w).sum().backward()
    for name in ("u", "delta", "B", "C"):
        assert raw[name].permute(2, 0, 1, 3).is_contiguous(), name


def test_gpu_tiles_are_whole_packs_and_exact():
    """On a GPU the CPU-cache tiles only multiplied kernel launches (a pack of 256 mqar-linear
    members: ~7,700 per step, run-steps/s flat from 256 to 4096 members): there the fused
    scan takes every group and up to 2^24 state elements per tile, and the conv one tile. Both
    are the same computation: equal to the references in float64 (checked here on the CPU with
    the GPU's plan and tile size; on an H200 the same to 1e-15)."""
    g = torch.Generator().manual_seed(3)
    r = lambda *z: torch.randn(*z, generator=g, dtype=torch.float64)  # noqa: E731
    Bt, L, G, K, N = 6, 23, 4, 32, 16  # wide groups: one member per tile on a CPU
    assert ip.scan_plan(Bt, G, K, N).groups == 1
    plan = ip.scan_plan(Bt, G, K, N, state=ip._GPU_TILE_STATE, block=ip._GPU_TILE_BLOCK, L=L,
                        gpu=True)
    assert (plan.rows, plan.groups) == (Bt, G) and len(ip._tiles(Bt, G, plan)) == 1
    xs = [r(Bt, L, G * K), torch.rand(Bt, L, G * K, generator=g, dtype=torch.float64),
          -torch.rand(G * K, N, generator=g, dtype=torch.float64) - 0.1, r(Bt, L, G, N),
          r(Bt, L, G, N), r(G * K)]
    xs = [t.requires_grad_() for t in xs]
    y, ref = ip.selective_scan_fused(*xs, plan=plan), selective_scan_ref(*xs)
    torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad(y.square().sum(), xs),
                    torch.autograd.grad(ref.square().sum(), xs)):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11)
    x, w, b = r(5, 3, 17, 8).requires_grad_(), r(5, 8, 4).requires_grad_(), r(5, 8).requires_grad_()
    y = causal_conv1d_cpu(x, w, b, "silu", chunk_elems=x.numel())  # the GPU's one tile
    ref = _reference(x, w, b, "silu")
    torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-12)
    for a, c in zip(torch.autograd.grad(y.square().sum(), (x, w, b)),
                    torch.autograd.grad(ref.square().sum(), (x, w, b))):
        torch.testing.assert_close(a, c, rtol=1e-11, atol=1e-11)


def test_r59m_scan_plans_are_every_pack_sizes_plans():
    """``scan_plans`` (what the planner's ``_pack_share`` takes its maximum over) gives the same
    set of plans as ``scan_plan`` of every group count 1..E, narrow and wide groups, at the
    edges of the narrow tile's state (c = 1, 2 and past E)."""
    cases = [(Bt, E, K, N, L) for Bt in (1, 3, 8, 64, 4096) for E in (1, 2, 3, 7, 130)
             for K in (1, 4, 8, 31, 32, 48) for N in (1, 4, 16) for L in (None, 1, 5, 1000)]
    for Bt, E, K, N, L in cases:
        want = {ip.scan_plan(Bt, G, K, N, L=L) for G in range(1, E + 1)}
        got = ip.scan_plans(Bt, E, K, N, L)
        assert set(got) == want and len(got) == len(want), (Bt, E, K, N, L)
