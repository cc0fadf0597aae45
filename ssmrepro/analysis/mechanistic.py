"""Library (analysis): koren2026's mechanistic probes of a trained simplified linear Mamba (§3.2).

Everything is read off one single-head, one-layer ``linear_mamba`` model (E = 1, d_conv 2), in the
paper's COLUMN-vector notation (App. C; notes §2.5, ``theory/simplified_linear_mamba.py``):

    E      (D, V)   token embedding (tied read-out: logits = Eᵀ y)
    P_in   (Di, D)  in_proj;  W_p, W_c (Di,) the conv weights on the previous / current token
    S_B, S_C (N, Di) key / query projections;  P_out (D, Di) out_proj

    Ê_in  = [diag(W_p) P_in E | diag(W_c) P_in E]       (Di, 2V): x̂_t = Ê_in ξ_t, ξ_t = [x_{t-1}; x_t]
    Π_v,in = Ê_in,  Π_v,out = Eᵀ P_out (V, Di),  Π_k,in = S_B Ê_in,  Π_q,in = S_C Ê_in  (N, 2V)
    G_kq  = Π_k,inᵀ Π_q,in   (2V, 2V): rows = the stored pair ξ_τ, columns = the query pair ξ_t
    G_vv  = Π_v,out Π_v,in   (V, 2V):  rows = output tokens, columns = the stored pair ξ_τ

so the logits are exactly ``y_t = Σ_{τ≤t} G_vv ξ_τ (ξ_τᵀ G_kq ξ_t)`` (Eq. 9; :func:`operator_logits`
is the test oracle). Eq. 10 predicts ``G_vv ≈ (0 | I_V)`` (the value x_τ is read, the key x_{τ-1}
ignored) and ``G_kq`` ≈ I_V on its (x_{τ-1}, x_t) block (the query x_t meets the stored key
x_{τ-1}) and ≈ 0 elsewhere. Both operators are invariant to the rotations that leave the model
function unchanged; they are defined up to a common sign (flipping S_B and P_out together changes
nothing), fixed so that the predicted diagonals are positive.

The figures' quantities, each with the number that tests the claim (:func:`mechanistic_metrics`):

* Fig. 2 / 9 — ``gkq.*`` / ``gvv.*`` on the MQAR token sets (keys [1, V/2), values [V/2, V)):
  ``diag_hit`` = fraction of keys (values) whose column peaks on its own predicted diagonal entry,
  ``dominance`` = mean predicted-diagonal entry / RMS of every other entry of the key (value)
  sub-operator, both halves of ξ included (the "other blocks ≈ 0" part), ``block_share`` = share of
  that sub-operator's energy on the predicted block.
* Fig. 3 — hidden state at the end of the context (t = 2N_f): ``H''_t = Π_v,out h_t Π_q,in``
  (query half, V × V) against ``H_t = Σ_n v_n k_nᵀ`` on the value × key quadrant: ``hidden.hit`` =
  fraction of stored keys whose H'' column peaks at their value, ``hidden.snr`` = mean H'' on the
  N_f fact entries / RMS of the other entries, ``hidden.corr`` (Pearson) and ``hidden.rel_err`` =
  ‖c H'' − H‖ / ‖H‖ with the least-squares scale c (the model's logit scale is free).
* Fig. 4 — implicit attention α'_{τt} = B_τᵀ C_t against the ideal α_{τt} = [x_{τ-1} = x_t]:
  ``attn.hit`` = fraction of query positions whose row peaks at the ideal position (right after the
  key's occurrence), ``attn.corr`` = Pearson correlation over the causal entries of query rows.
* Fig. 5 — Conv1D copy & shift on a sequence: ``M_v[t, τ] = x_tᵀ G_vv ξ_τ`` (copy: main diagonal)
  and ``M_k[t, τ] = ξ_tᵀ G_kq ξ_τ`` (shift: the stored key x_{t-1} meets the query at τ = t − 1),
  on the context's value positions: ``conv.copy_hit`` / ``conv.shift_hit`` = fraction of rows whose
  peak is on that diagonal, ``conv.copy_dominance`` / ``conv.shift_dominance`` = mean diagonal entry
  / RMS of the row's other entries.

Values of one model are averaged over ``n_seq`` test sequences of the run's own task.

Figs. 14-15 (any model, :func:`output_metrics`): the spread of the output entries at the query
positions, over the value tokens. Per query, the signal is the correct value's logit minus the mean
of the other values' logits; ``out.noise_var`` = mean within-query variance of the other values'
logits / mean signal² (Lemma 5: the variance an MHA model's output shrinks with its heads);
``out.snr`` = mean signal / RMS within-query spread; ``out.wrong_var`` / ``out.empty_var`` = the
variance of the normalised entries (:func:`output_entries`: the correct entry averages 1, the
others 0) of the other values of the query's facts (Eq. 132's y^j) / of the values not in them
(y^l).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..tasks.base import IGNORE, TEST

MECH_SEQUENCES = 32


@dataclass
class Circuit:
    """The linear model's weights in column-vector notation (float64)."""

    E: torch.Tensor  # (D, V)
    P_in: torch.Tensor  # (Di, D)
    W_p: torch.Tensor  # (Di,)
    W_c: torch.Tensor  # (Di,)
    S_B: torch.Tensor  # (N, Di)
    S_C: torch.Tensor  # (N, Di)
    P_out: torch.Tensor  # (D, Di)

    @property
    def V(self) -> int:
        return self.E.shape[1]


def circuit(model) -> Circuit:
    """The weights of a one-layer, single-head ``linear_mamba`` model with d_conv 2 (E = 1)."""
    blocks = getattr(model, "blocks", None)
    mixer = getattr(blocks[0], "mixer", None) if blocks is not None and len(blocks) == 1 else None
    if mixer is None or type(mixer).__name__ != "LinearMambaMixer" or mixer.pattern is not None:
        raise ValueError("mechanistic probes need a one-layer, single-head linear_mamba model")
    if mixer.d_conv != 2:
        raise ValueError(f"mechanistic probes need d_conv 2 (copy & shift), got {mixer.d_conv}")
    if model.embed.weight.shape[0] != 1:
        raise ValueError("mechanistic probes read one model (E = 1): use train.build_member")
    f = lambda t: t.detach()[0].double()  # noqa: E731
    conv = f(mixer.conv.weight)  # (Di, 2): column 0 multiplies the previous token
    return Circuit(E=f(model.embed.weight).T, P_in=f(mixer.in_proj.weight).T, W_p=conv[:, 0],
                   W_c=conv[:, 1], S_B=f(mixer.B_proj.weight).T, S_C=f(mixer.C_proj.weight).T,
                   P_out=f(mixer.out_proj.weight).T)


@dataclass
class Operators:
    """Ê_in, Π_v,out, Π_k,in, Π_q,in, G_kq and G_vv (sign fixed: predicted diagonals positive)."""

    E_in: torch.Tensor  # (Di, 2V)
    Pi_v_out: torch.Tensor  # (V, Di)
    Pi_k_in: torch.Tensor  # (N, 2V)
    Pi_q_in: torch.Tensor  # (N, 2V)
    G_kq: torch.Tensor  # (2V, 2V)
    G_vv: torch.Tensor  # (V, 2V)
    sign: float  # the common sign applied to Π_v,out and Π_k,in (so to G_vv and G_kq)


def key_ids(V: int) -> torch.Tensor:
    return torch.arange(1, V // 2)


def value_ids(V: int) -> torch.Tensor:
    return torch.arange(V // 2, V)


def operators(c: Circuit) -> Operators:
    """The invariant operators of Eqs. 8-10 (module docstring)."""
    V = c.V
    PE = c.P_in @ c.E  # (Di, V)
    E_in = torch.cat([c.W_p[:, None] * PE, c.W_c[:, None] * PE], dim=1)  # (Di, 2V)
    Pi_v_out = c.E.T @ c.P_out  # (V, Di)
    Pi_k_in, Pi_q_in = c.S_B @ E_in, c.S_C @ E_in
    G_kq = Pi_k_in.T @ Pi_q_in
    G_vv = Pi_v_out @ E_in
    # the logits depend on the product G_vv (ξᵀ G_kq ξ) only, so (G_vv, G_kq) -> (-G_vv, -G_kq)
    # (S_B and P_out negated) is the same model: fix the sign that makes G_kq's key diagonal
    # positive; G_vv's value diagonal is then positive in any circuit that recalls
    ki = key_ids(V)
    s = 1.0 if float(G_kq[ki, V + ki].mean()) >= 0 else -1.0
    return Operators(E_in, s * Pi_v_out, s * Pi_k_in, Pi_q_in, s * G_kq, s * G_vv, s)


def operator_logits(ops: Operators, ids: torch.Tensor) -> torch.Tensor:
    """Eq. 9 from the operators: ``y_t = Σ_{τ≤t} G_vv ξ_τ (ξ_τᵀ G_kq ξ_t)``, ids (B, L) -> (B, L, V)
    (the sign fix cancels in the product: equal to the linear model's logits)."""
    V = ops.G_vv.shape[0]
    xi = pair_onehot(ids, V)  # (B, L, 2V)
    att = xi @ ops.G_kq @ xi.transpose(1, 2)  # (B, L_τ, L_t): ξ_τᵀ G_kq ξ_t
    L = ids.shape[1]
    att = att * torch.ones(L, L, dtype=torch.bool).triu()  # τ <= t
    vals = xi @ ops.G_vv.T  # (B, L_τ, V)
    return att.transpose(1, 2) @ vals  # (B, L_t, V)


def pair_onehot(ids: torch.Tensor, V: int) -> torch.Tensor:
    """ξ_t = [x_{t-1}; x_t] one-hot (x_{-1} = 0 vector): (B, L) -> (B, L, 2V) float64."""
    cur = torch.nn.functional.one_hot(ids, V).double()
    prev = torch.cat([torch.zeros_like(cur[:, :1]), cur[:, :-1]], dim=1)
    return torch.cat([prev, cur], dim=-1)


def _dominance(diag: torch.Tensor, other: torch.Tensor) -> float:
    rms = float(other.pow(2).mean().sqrt())
    return float(diag.mean()) / rms if rms > 0 else float("inf")


def operator_metrics(ops: Operators) -> dict[str, float]:
    """Fig. 2 / 9 numbers: diag_hit, dominance and block_share of G_kq (keys) and G_vv (values)."""
    V = ops.G_vv.shape[0]
    ki, vi = key_ids(V), value_ids(V)
    nk, nv = len(ki), len(vi)
    # G_kq on the key tokens of both halves: rows [prev keys | cur keys], cols [prev keys | cur keys]
    both = torch.cat([ki, V + ki])
    g = ops.G_kq[both][:, both]  # (2nk, 2nk); the predicted block is rows 0..nk (prev), cols nk.. (cur)
    pred = g[:nk, nk:]
    diag = torch.diagonal(pred)
    off = torch.ones_like(g, dtype=torch.bool)
    off[torch.arange(nk), nk + torch.arange(nk)] = False
    out = {
        "gkq.diag_hit": float((g[:, nk:].argmax(0) == torch.arange(nk)).double().mean()),
        "gkq.dominance": _dominance(diag, g[off]),
        "gkq.block_share": float(pred.pow(2).sum() / g.pow(2).sum()),
    }
    # G_vv on the value tokens: rows = output values, cols [prev values | cur values]
    h = ops.G_vv[vi][:, torch.cat([vi, V + vi])]  # (nv, 2nv)
    predv = h[:, nv:]
    offv = torch.ones_like(h, dtype=torch.bool)
    offv[torch.arange(nv), nv + torch.arange(nv)] = False
    out.update({
        "gvv.diag_hit": float((predv.argmax(0) == torch.arange(nv)).double().mean()),
        "gvv.dominance": _dominance(torch.diagonal(predv), h[offv]),
        "gvv.block_share": float(predv.pow(2).sum() / h.pow(2).sum()),
    })
    return out


def _pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.flatten() - a.mean(), b.flatten() - b.mean()
    den = float(a.norm() * b.norm())
    return float(a @ b) / den if den > 0 else float("nan")


def context_facts(ids: torch.Tensor, kappa: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values of the context block ``k_1 v_1 ... k_κ v_κ``: (B, κ) each."""
    return ids[:, 0 : 2 * kappa : 2], ids[:, 1 : 2 * kappa : 2]


def hidden_states(c: Circuit, ops: Operators, ids: torch.Tensor, t: int) -> tuple[torch.Tensor, ...]:
    """Fig. 3 at position t (inclusive): the state h_t = Σ_{τ≤t} x̂_τ B_τᵀ (B, Di, N), its projection
    H'_t = P_out h_t (B, D, N) and the decompressed H''_t = Π_v,out h_t Π_q,in on the query half
    (B, V, V)."""
    V = c.V
    xi = pair_onehot(ids[:, : t + 1], V)  # (B, t+1, 2V)
    xh = xi @ ops.E_in.T  # (B, t+1, Di)
    Bk = xi @ ops.Pi_k_in.T  # (B, t+1, N): B_τ = S_B x̂_τ (times the sign, undone by Π_v,out's)
    h = xh.transpose(1, 2) @ Bk  # (B, Di, N)
    Hp = ops.sign * c.P_out @ h
    H2 = ops.Pi_v_out @ h @ ops.Pi_q_in[:, V:]  # (B, V, V): rows output tokens, cols query tokens
    return h, Hp, H2


def ideal_hidden(ids: torch.Tensor, kappa: int, V: int) -> torch.Tensor:
    """H_t = Σ_n v_n k_nᵀ at the end of the context: (B, V, V), rows values, columns keys."""
    k, v = context_facts(ids, kappa)
    H = torch.zeros(ids.shape[0], V, V, dtype=torch.float64)
    H[torch.arange(ids.shape[0])[:, None], v, k] = 1.0
    return H


def hidden_metrics(c: Circuit, ops: Operators, ids: torch.Tensor, kappa: int) -> dict[str, float]:
    """Fig. 3 numbers on the value × key quadrant at t = 2N_f (module docstring)."""
    V = c.V
    _, _, H2 = hidden_states(c, ops, ids, 2 * kappa - 1)
    H = ideal_hidden(ids, kappa, V)
    ki, vi = key_ids(V), value_ids(V)
    A, I_ = H2[:, vi][:, :, ki], H[:, vi][:, :, ki]  # (B, nv, nk)
    k, v = context_facts(ids, kappa)
    rows = torch.arange(ids.shape[0])[:, None]
    col = H2[rows, :, k][..., vi]  # (B, κ, nv): H'' column of each stored key, value rows
    hit = (col.argmax(-1) + V // 2 == v).double().mean()
    fact = I_.bool()
    snr = [_dominance(a[f], a[~f]) for a, f in zip(A, fact)]
    corr = [_pearson(a, i) for a, i in zip(A, I_)]
    rel = []
    for a, i in zip(A, I_):
        scale = float((a * i).sum() / (a * a).sum()) if float((a * a).sum()) > 0 else 0.0
        rel.append(float((scale * a - i).norm() / i.norm()))
    mean = lambda xs: float(torch.tensor(xs, dtype=torch.float64).mean())  # noqa: E731
    return {"hidden.hit": float(hit), "hidden.snr": mean(snr), "hidden.corr": mean(corr),
            "hidden.rel_err": mean(rel)}


def attention_maps(c: Circuit, ops: Operators, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Fig. 4: trained α'[t, τ] = C_tᵀ B_τ and ideal α[t, τ] = [x_{τ-1} = x_t] (rows = query t,
    causal τ <= t, else 0): (B, L, L) each."""
    V = c.V
    xi = pair_onehot(ids, V)
    Bk, Cq = xi @ ops.Pi_k_in.T, xi @ ops.Pi_q_in.T  # (B, L, N)
    L = ids.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    trained = (Cq @ Bk.transpose(1, 2)) * causal
    prev = torch.cat([torch.full_like(ids[:, :1], -1), ids[:, :-1]], dim=1)  # x_{τ-1}
    ideal = (prev[:, None, :] == ids[:, :, None]).double() * causal
    return trained, ideal


def attention_metrics(c: Circuit, ops: Operators, ids: torch.Tensor, y: torch.Tensor,
                      kappa: int) -> dict[str, float]:
    """Fig. 4 numbers on the supervised query rows (module docstring)."""
    trained, ideal = attention_maps(c, ops, ids)
    q = y != IGNORE  # (B, L) query positions
    tr, idl = trained[q], ideal[q]  # (Q, L)
    # the ideal target: the position right after the key's occurrence in the context
    target = idl[:, : 2 * kappa].argmax(-1)
    ok = idl[:, : 2 * kappa].sum(-1) > 0
    causal_rows = torch.ones_like(tr, dtype=torch.bool)
    pos = q.nonzero()[:, 1]
    causal_rows &= torch.arange(tr.shape[1])[None, :] <= pos[:, None]
    # the peak of a row among the positions the query can see: its future entries are 0, not
    # attention, and a row whose every causal entry was negative peaked at one of them (a miss)
    peak = tr.masked_fill(~causal_rows, -torch.inf).argmax(-1)
    hit = (peak == target)[ok].double().mean()
    return {"attn.hit": float(hit), "attn.corr": _pearson(tr[causal_rows], idl[causal_rows])}


def copy_shift_maps(ops: Operators, ids: torch.Tensor, kappa: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fig. 5 on the context (first 2N_f tokens): M_v[t, τ] = x_tᵀ G_vv ξ_τ (copy) and
    M_k[t, τ] = ξ_tᵀ G_kq ξ_τ (shift): (B, 2κ, 2κ) each."""
    V = ops.G_vv.shape[0]
    ctx = ids[:, : 2 * kappa]
    xi = pair_onehot(ctx, V)
    x = torch.nn.functional.one_hot(ctx, V).double()
    Mv = x @ ops.G_vv @ xi.transpose(1, 2)
    Mk = xi @ ops.G_kq @ xi.transpose(1, 2)
    return Mv, Mk


def copy_shift_metrics(ops: Operators, ids: torch.Tensor, kappa: int) -> dict[str, float]:
    """Fig. 5 numbers on the context's value positions t = 1, 3, ..., 2κ-1 (module docstring)."""
    Mv, Mk = copy_shift_maps(ops, ids, kappa)
    rows = torch.arange(1, 2 * kappa, 2)
    out = {}
    for name, M, offset in (("copy", Mv, 0), ("shift", Mk, -1)):
        R = M[:, rows]  # (B, κ, 2κ)
        want = rows + offset
        hit = (R.argmax(-1) == want[None, :]).double().mean()
        diag = R[:, torch.arange(len(rows)), want]  # (B, κ)
        mask = torch.ones_like(R, dtype=torch.bool)
        mask[:, torch.arange(len(rows)), want] = False
        out[f"conv.{name}_hit"] = float(hit)
        out[f"conv.{name}_dominance"] = _dominance(diag, R[mask])
    return out


OUT_METRICS = ("out.noise_var", "out.snr", "out.wrong_var", "out.empty_var")
OUT_SEQUENCES = 256


@torch.no_grad()
def output_logits(model, task, seed: int, n_seq: int = OUT_SEQUENCES) -> tuple[torch.Tensor, ...]:
    """Value-token logits at the query positions of ``n_seq`` test sequences: (Q, V/2) float64,
    the index of the correct value in them (Q,) and the values of each query's own sequence's
    facts (Q, V/2) bool: the values of its canonical key-value block (the last of
    ``key_repeats`` chunks, the one queries ask), read from the context, not from the targets
    (``reduce_to_ar`` asks one key of κ: the other κ - 1 facts' values were counted as 'empty'
    and ``out.wrong_var`` was NaN)."""
    ids, y = probe_batch(task, seed, n_seq)
    q = y != IGNORE  # (n, L)
    out = model(ids[None])[0].double()  # (n, L, V)
    h = out.shape[-1] // 2
    tgt = y[q] - h  # (Q,)
    kappa = task.config.kappa
    start = 2 * kappa * (task.config.key_repeats - 1)  # the canonical block
    _, vals = context_facts(ids[:, start:], kappa)  # (n, κ)
    facts = torch.zeros(ids.shape[0], h, dtype=torch.bool)  # (n, V/2)
    facts[torch.arange(ids.shape[0])[:, None], vals - h] = True
    return out[q][:, h:], tgt, facts[torch.nonzero(q)[:, 0]]


def _entries(z: torch.Tensor, tgt: torch.Tensor, facts: torch.Tensor) -> dict[str, torch.Tensor]:
    """:func:`output_entries` of the logits of :func:`output_logits`."""
    rows = torch.arange(len(tgt))
    correct = z[rows, tgt]
    others = torch.ones_like(z, dtype=torch.bool)
    others[rows, tgt] = False
    zo = z[others].view(len(tgt), -1)  # (Q, V/2 - 1)
    base = zo.mean(1)  # (Q,)
    signal = (correct - base).mean()
    zn = (z - base[:, None]) / signal  # (Q, V/2)
    return {"correct": zn[rows, tgt], "wrong": zn[facts & others], "empty": zn[~facts],
            "signal": signal, "spread": zo.var(1).mean()}


def output_entries(model, task, seed: int, n_seq: int = OUT_SEQUENCES) -> dict[str, torch.Tensor]:
    """Lemma 5's output entries (Eq. 132), normalised: per query the value logits minus the mean
    of the other values' logits, divided by the mean signal (correct logit − that mean) over all
    queries, so the correct entries average exactly 1 and the others 0, whatever the model's logit
    scale. ``correct`` (Q,); ``wrong`` the other values of the query's own facts (y^j); ``empty``
    the values not in its facts (y^l); ``signal`` the mean signal and ``spread`` the mean
    within-query variance of the other values' logits (0-d tensors, raw logit units)."""
    return _entries(*output_logits(model, task, seed, n_seq))


def output_metrics(model, task, seed: int, n_seq: int = OUT_SEQUENCES) -> dict[str, float]:
    """Figs. 14-15 numbers (module docstring) for one model (E = 1)."""
    e = output_entries(model, task, seed, n_seq)
    signal, var = float(e["signal"]), float(e["spread"])
    part = {k: float(e[k].var()) if e[k].numel() > 1 else float("nan") for k in ("wrong", "empty")}
    return {"out.noise_var": var / signal**2 if signal else float("inf"),
            "out.snr": signal / var**0.5 if var > 0 else float("inf"),
            "out.wrong_var": part["wrong"], "out.empty_var": part["empty"]}


MECH_METRICS = (
    "gkq.diag_hit", "gkq.dominance", "gkq.block_share",
    "gvv.diag_hit", "gvv.dominance", "gvv.block_share",
    "hidden.hit", "hidden.snr", "hidden.corr", "hidden.rel_err",
    "attn.hit", "attn.corr",
    "conv.copy_hit", "conv.copy_dominance", "conv.shift_hit", "conv.shift_dominance",
)


def probe_batch(task, seed: int, n_seq: int = MECH_SEQUENCES):
    """``n_seq`` test sequences of the run's task (ids (n, L), targets (n, L))."""
    seeds = torch.tensor([int(seed)])
    b = task.sample(seeds, TEST, torch.arange(n_seq)[None, :])
    return b.x[0], b.y[0]


@torch.no_grad()
def mechanistic_metrics(model, task, seed: int, n_seq: int = MECH_SEQUENCES) -> dict[str, float]:
    """Every number of Figs. 2-5 for one trained model (E = 1) on its task's test sequences."""
    kappa = task.config.kappa
    c = circuit(model)
    ops = operators(c)
    ids, y = probe_batch(task, seed, n_seq)
    out = operator_metrics(ops)
    out.update(hidden_metrics(c, ops, ids, kappa))
    out.update(attention_metrics(c, ops, ids, y, kappa))
    out.update(copy_shift_metrics(ops, ids, kappa))
    return out
