import math

import numpy as np
import pytest
import torch

from ssmrepro.tasks import build_task
from ssmrepro.tasks.base import IGNORE, VAL
from ssmrepro.theory.designed import designed_forward, designed_weights
from ssmrepro.theory.recall import (
    A_CONSTANTS,
    accuracy_grid,
    eq15_accuracy,
    frontier_product,
    jl_epsilons,
    jl_perfect_recall,
    m_V,
    phi,
    refined_accuracy,
)


def Phi(x):
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def test_phi_matches_erf_and_keeps_tails():
    for x in (-3.0, -0.5, 0.0, 0.7, 2.5):
        assert float(phi(x)) == pytest.approx(Phi(x), abs=1e-15)
    assert 0 < float(phi(-30.0)) < 1e-190  # no underflow to 0 through 1 - erfc
    assert float(eq15_accuracy(64, 64, 512, 16)) == pytest.approx(1.0)


def test_eq15_by_hand():
    # V = 512, N_f = 16: sqrt(2 N D / N_f) = sqrt(N D / 8)
    for N, D in ((4, 4), (8, 8), (16, 32), (2, 10)):
        want = Phi(math.sqrt(2 * N * D / 16)) ** (512 / 2)
        assert float(eq15_accuracy(N, D, 512, 16)) == pytest.approx(want, rel=1e-9)
    assert float(eq15_accuracy(8, 8, 512, 16)) == pytest.approx(0.549, abs=2e-3)


def test_m_V_and_refined_by_hand():
    lnV = math.log(512)
    mv = math.sqrt(2 * lnV) - (math.log(lnV) + math.log(4 * math.pi)) / (2 * math.sqrt(2 * lnV))
    assert float(m_V(512)) == pytest.approx(mv, rel=1e-12)
    assert float(m_V(512)) == pytest.approx(2.915, abs=1e-3)
    # V = 512, N_f = 16, D = 32, N = 16, MQAR trained linear (a = 5/4)
    sigma = math.sqrt(1.25 * 16 / (16 * 32) + 1 / 32)
    want = Phi(1 / sigma - mv)
    got = float(refined_accuracy(16, 32, 512, 16, A_CONSTANTS["mqar", "linear"]))
    assert got == pytest.approx(want, rel=1e-12)
    assert got == pytest.approx(0.804, abs=2e-3)
    # multi-layer: only Lambda * N matters
    assert float(refined_accuracy(4, 32, 512, 16, 1.25, n_layers=4)) == pytest.approx(got, rel=1e-12)


def test_a_constants():
    assert A_CONSTANTS == {
        ("ar", "linear"): 1,
        ("mqar", "linear"): 5 / 4,
        ("ar", "full"): 1 / 2,
        ("mqar", "full"): 5 / 8,
        ("ar", "designed"): 2,
        ("mqar", "designed"): 3,
    }


def test_jl_by_hand():
    c_log_v = 4 * math.log(512)  # natural log
    ev, ek = jl_epsilons(512, 32, 16)
    assert float(ev) == pytest.approx(math.sqrt(c_log_v / 32))
    assert float(ek) == pytest.approx(math.sqrt(c_log_v / 16))
    assert float(ek) > 1 and jl_perfect_recall(512, 32, 16, 16) is False
    # D = N = 2000: eps = 0.1117, 2 eps + 16 eps^2 = 0.423 < 1/2; D = N = 1000: 0.716 > 1/2
    eps = math.sqrt(c_log_v / 2000)
    assert 2 * eps + 16 * eps**2 < 0.5 and jl_perfect_recall(512, 2000, 2000, 16) is True
    assert jl_perfect_recall(512, 1000, 1000, 16) is False
    # natural log: V = e^2 -> c ln V = 8
    ev, ek = jl_epsilons(math.e**2, 8, 2)
    assert float(ev) == pytest.approx(1.0) and float(ek) == pytest.approx(2.0)
    grid = jl_perfect_recall(512, np.array([[1000], [2000]]), np.array([[1000, 2000]]), 16)
    assert grid.dtype == bool and grid.tolist() == [[False, False], [False, True]]


def test_monotone_in_N_and_D_and_vectorised():
    D = np.arange(2, 65, 2)
    N = np.arange(2, 33)
    for law in (
        lambda n, d: eq15_accuracy(n, d, 512, 16),
        lambda n, d: refined_accuracy(n, d, 512, 16, A_CONSTANTS["mqar", "linear"]),
    ):
        g = accuracy_grid(law, D, N)
        assert g.shape == (32, 31)
        assert (np.diff(g, axis=0) >= -1e-12).all() and (np.diff(g, axis=1) >= -1e-12).all()
        assert g.min() < 0.05 and g.max() > 0.99
    r = refined_accuracy(8, 16, 512, np.array([8, 16, 32]), 1.25)
    assert (np.diff(r) < 0).all()  # more facts -> lower accuracy
    assert float(refined_accuracy(8, 16, 512, 16, 3)) < float(refined_accuracy(8, 16, 512, 16, 0.5))


def test_frontier_product():
    D, N = np.arange(2, 65, 2), np.arange(2, 33)
    step = lambda n, d: (n * d >= 100).astype(float)
    assert frontier_product(step, D, N, 0.5) == 100.0  # D = 10, N = 10
    assert frontier_product(accuracy_grid(step, D, N), D, N, 0.5) == 100.0
    assert math.isnan(frontier_product(step, D, N, 2.0))
    law = lambda n, d: refined_accuracy(n, d, 512, 16, A_CONSTANTS["mqar", "linear"])
    p = frontier_product(law, D, N, 0.9)
    g = accuracy_grid(law, D, N)
    assert g[(D[:, None] * N[None, :]) == p].max() >= 0.9
    assert (g[(D[:, None] * N[None, :]) < p] < 0.9).all()
    with pytest.raises(ValueError, match="shape"):
        frontier_product(np.zeros((3, 3)), D, N)


# --- designed (Thm 2) model ---------------------------------------------------------------------


def test_designed_weights_layout():
    V, D, N = 64, 16, 8
    w = designed_weights(V, D, N, seed=3)
    shapes = {k: tuple(v.shape) for k, v in w.items()}
    assert shapes == {
        "embedding": (V, D), "in_proj": (D, 2 * D), "conv": (2 * D, 2),
        "B_proj": (2 * D, N), "C_proj": (2 * D, N), "out_proj": (2 * D, D),
    }  # fmt: skip
    eye = torch.eye(D)
    assert torch.allclose(w["embedding"].norm(dim=1), torch.ones(V), atol=1e-6)
    assert torch.equal(w["in_proj"], torch.cat([eye, eye], 1))
    assert w["conv"][:D, 0].eq(1).all() and w["conv"][D:, 0].eq(0).all()  # previous token -> first D
    assert w["conv"][:D, 1].eq(0).all() and w["conv"][D:, 1].eq(1).all()  # current token -> last D
    F = w["B_proj"][:D].T  # (N, D)
    assert w["B_proj"][D:].eq(0).all() and w["C_proj"][:D].eq(0).all()
    assert torch.equal(w["C_proj"][D:], w["B_proj"][:D])
    assert torch.allclose(F @ F.T, (D / N) * torch.eye(N), atol=1e-5)
    assert w["out_proj"][:D].eq(0).all() and torch.equal(w["out_proj"][D:], eye)
    again = designed_weights(V, D, N, seed=3)
    assert all(torch.equal(w[k], again[k]) for k in w)
    assert not torch.equal(w["embedding"], designed_weights(V, D, N, seed=4)["embedding"])
    for bad in ((8, 16, 8), (64, 8, 16), (64, 8, 1)):
        with pytest.raises(ValueError, match="V >= D >= N >= 2"):
            designed_weights(*bad, seed=0)


def test_designed_forward_matches_recurrent_form():
    w = designed_weights(32, 8, 4, seed=0, dtype=torch.float64)
    ids = torch.randint(0, 32, (3, 10), generator=torch.Generator().manual_seed(0))
    logits = designed_forward(ids, w)
    assert logits.shape == (3, 10, 32)
    for b in range(3):  # h_t = h_{t-1} + c_t B_t^T, y_t = h_t C_t, step by step
        h = torch.zeros(16, 4, dtype=torch.float64)
        prev = torch.zeros(16, dtype=torch.float64)
        for t in range(10):
            cur = w["embedding"][ids[b, t]] @ w["in_proj"]
            c = prev * w["conv"][:, 0] + cur * w["conv"][:, 1]
            h = h + torch.outer(c, c @ w["B_proj"])
            out = (h @ (c @ w["C_proj"])) @ w["out_proj"] @ w["embedding"].T
            assert torch.allclose(out, logits[b, t], atol=1e-10)
            prev = cur


def test_exact_circuit_with_identity_embeddings_recalls_perfectly():
    # With E = I_V and F = I (D = N = V) the circuit is the non-compressive one: exact recall.
    V = 64
    w = designed_weights(V, V, V, seed=0)
    eye, z = torch.eye(V), torch.zeros(V, V)
    w.update(embedding=eye, B_proj=torch.cat([eye, z]), C_proj=torch.cat([z, eye]))
    t = build_task({"name": "mqar", "vocab": V, "L": 32, "kappa": 8, "random_non_queries": False})
    b = t.sample(torch.tensor([0]), VAL, torch.arange(64)[None])
    m = b.y[0] != IGNORE
    assert torch.equal(designed_forward(b.x[0], w).argmax(-1)[m], b.y[0][m])


def designed_accuracy(D, N, n=128, seed=0, swap_out=False):
    t = build_task({"name": "mqar", "vocab": 512, "L": 64, "kappa": 16, "power_a": 1.0,
                    "random_non_queries": True})  # fmt: skip
    b = t.sample(torch.tensor([0]), VAL, torch.arange(n)[None])
    w = designed_weights(512, D, N, seed)
    if swap_out:  # read the previous-token (key) half instead of the value half
        w["out_proj"] = torch.cat([w["out_proj"][D:], w["out_proj"][:D]])
    m = b.y[0] != IGNORE
    return float((designed_forward(b.x[0], w).argmax(-1)[m] == b.y[0][m]).double().mean())


def test_designed_model_recall_on_regime0():
    hi, lo = designed_accuracy(64, 64), designed_accuracy(4, 4)
    assert hi > 0.9 and lo < 0.3
    assert hi > designed_accuracy(32, 32) > designed_accuracy(16, 16) > designed_accuracy(8, 8) > lo
    assert designed_accuracy(64, 64, swap_out=True) < 0.05  # the value lives in the current half


@pytest.mark.parametrize("sid", ["yu2025-fig5", "huang2025-figA1"])
def test_committed_analytic_tables_are_what_the_code_computes(sid):
    """An analytic table is computed, not trained: the committed results.csv must be exactly
    what the code computes now. Its values are kept to 12 significant digits, so a numpy /
    torch build that changes a float's last digits (a fresh install rewrote yu2025-fig5's
    table in its 16th digit) leaves it as committed."""
    import pandas as pd

    from ssmrepro.report.analytic import ANALYTIC_DIGITS, analytic_table
    from ssmrepro.spec import find_spec
    from ssmrepro.util import repo_root

    spec = find_spec(sid)
    table = analytic_table(spec)
    for col in table.select_dtypes("float").columns:
        for v in table[col].dropna():
            assert float(f"{v:.{ANALYTIC_DIGITS}g}") == v, (col, v)
    committed = pd.read_csv(repo_root() / "results" / spec.paper / sid / "results.csv")
    fresh = pd.read_csv(__import__("io").StringIO(table.to_csv(index=False)))
    pd.testing.assert_frame_equal(committed, fresh, check_exact=True)
