"""The fused, chunked linear read-out + cross entropy equals the textbook one (float64)."""

import pytest
import torch

from ssmrepro.kernels import xent
from ssmrepro.kernels.xent import IGNORE, linear_xent, linear_xent_ref


def _inputs(E=3, B=4, L=7, d=5, C=11, bias=True, tied=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    h = (3 * r(E, B, L, d)).requires_grad_()
    if tied:  # the head is the embedding (E, C, d), transposed
        emb = r(E, C, d).requires_grad_()
        W = emb.transpose(1, 2)
        leaves = [h, emb]
    else:
        W = r(E, d, C).requires_grad_()
        leaves = [h, W]
    b = r(E, C).requires_grad_() if bias else None
    if b is not None:
        leaves.append(b)
    y = torch.randint(0, C, (E, B, L), generator=g)
    y[:, :, :2] = IGNORE  # unsupervised positions
    y[1, 0] = IGNORE
    return h, W, b, y, leaves


@pytest.mark.parametrize("chunk", [1, 11, 30, 77, 1 << 20])
@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("bias,tied", [(True, False), (False, False), (False, True)])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("narrow_dh", [True, False])
def test_linear_xent_equals_reference(chunk, smooth, bias, tied, keep, narrow_dh, monkeypatch):
    """Every chunking (one row, part of a member's rows, whole members, everything), with the
    logits recomputed in the backward or their exponentials kept; dh by W pᵀ (narrow features)
    or by p Wᵀ."""
    monkeypatch.setattr(xent, "NARROW_DH", 10**9 if narrow_dh else 0)
    h, W, b, y, leaves = _inputs(bias=bias, tied=tied)
    eps = torch.tensor([0.0, 0.1, 0.3], dtype=torch.float64) if smooth else None
    wl = torch.tensor([1.0, -0.7, 2.5], dtype=torch.float64)  # per-member loss weights
    ref, cref = linear_xent_ref(h, W, b, y, eps)
    out, cnt = linear_xent(h, W, b, y, eps, chunk=chunk, keep=keep)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(cnt, cref)
    g_ref = torch.autograd.grad((ref * wl).sum(), leaves)
    g = torch.autograd.grad((out * wl).sum(), leaves)
    for a, c in zip(g, g_ref):
        torch.testing.assert_close(a, c, rtol=1e-10, atol=1e-12)


def test_linear_xent_member_without_targets_and_large_logits():
    """A member with no supervised position has loss 0 and zero gradients; logits of ±1e3 (the
    index positional channel makes such) stay finite."""
    h, W, b, y, leaves = _inputs()
    y[2] = IGNORE
    with torch.no_grad():
        h.mul_(300.0)
    ref, _ = linear_xent_ref(h, W, b, y)
    out, cnt = linear_xent(h, W, b, y, chunk=13)
    assert cnt[2] == 0 and out[2] == 0 and torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    g = torch.autograd.grad(out.sum(), leaves)
    for a, c in zip(g, torch.autograd.grad(ref.sum(), leaves)):
        torch.testing.assert_close(a, c, rtol=1e-10, atol=1e-10)
    assert g[0][2].abs().max() == 0


def test_linear_xent_keep_refuses_a_second_backward():
    """keep=True turns the kept buffer into the gradient in place: autograd's version check
    refuses a second backward through the same graph instead of returning a wrong gradient."""
    h, W, b, y, leaves = _inputs()
    out, _ = linear_xent(h, W, b, y, keep=True)
    torch.autograd.grad(out.sum(), leaves, retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(out.sum(), leaves)


def test_linear_xent_float32_close_to_reference():
    h, W, b, y, _ = _inputs(E=2, B=3, L=50, d=8, C=128)
    h32, W32, b32 = (t.detach().float() for t in (h, W, b))
    out, _ = linear_xent(h32, W32, b32, y, chunk=1000)
    ref, _ = linear_xent_ref(h, W, b, y)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model,task", [
    ({"name": "ssm_lm", "mixer": "s6", "d_model": 6, "d_state": 3, "pe": "index"},
     {"name": "keep_nth", "n": 3, "T": 9, "vocab": 7}),  # plain head with bias, most positions
    ({"name": "mamba_lm", "d_model": 8, "d_state": 4, "n_layers": 1},
     {"name": "mqar", "vocab": 24, "L": 16, "kappa": 2}),  # tied head, few supervised positions
])
def test_training_loss_equals_logits_path(model, task):
    """The training loop's fused read-out + loss gives the logits path's losses and gradients
    (float64, label smoothing per member, a pack of 3)."""
    from ssmrepro.models import MODELS, build_model
    from ssmrepro.tasks import build_task
    from ssmrepro.tasks.base import TRAIN
    from ssmrepro.train import member_losses, supervised_logits, training_loss

    t = build_task(task)
    m = build_model(MODELS[model["name"]].Config(**model), t.info, 3, [1, 2, 3]).double()
    assert m.linear_readout() is not None
    b = t.sample(torch.tensor([4, 5, 6]), TRAIN, torch.arange(5).expand(3, -1))
    eps = torch.tensor([0.0, 0.1, 0.2], dtype=torch.float64)
    params = [p for p in m.parameters() if p.requires_grad]
    ref, _, cref = member_losses(*supervised_logits(m, b.x, b.y), eps, score=False)
    out, cnt = training_loss(m, b, torch.float64, eps)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(cnt, cref)
    wl = torch.tensor([1.0, 2.0, -0.5], dtype=torch.float64)
    for a, c in zip(torch.autograd.grad((out * wl).sum(), params),
                    torch.autograd.grad((ref * wl).sum(), params)):
        torch.testing.assert_close(a, c, rtol=1e-10, atol=1e-12)
