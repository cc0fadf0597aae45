"""Library (theory): cooper2026's constructed (not trained) hybrid for associative recall with
decoding (Thm 4.6, App. D.4), written into the weights of an SSM→TF→TF ``cooper_hybrid``.

The proof's plan, kept: a Mamba layer turns the bit tokens into the state s (the last K bits, the
newest least significant), a first attention layer puts the previous token's code beside each
token, and a second attention layer looks up, with query ψ'(s), the most recent position whose
previous token is the word V_s, and copies the token there. The proof's idealised layers are
realised inside the real blocks (as ``theory.cooper`` does for selective copy, with the same
saturating switches Z, K_DT and the same RoPE offset look-up):

* embedding (d ≥ 6b + 4K + 2; b = ⌈log2 V⌉ token bits, K = log2 W state bits; every block is a
  pair [x, -x], so every stream vector has sum 0 and both LayerNorms are pure scalings):
  ``T = [c(v), -c(v)]`` (±1 binary code of the token), ``K = [1, -1]``, zeros in the blocks the
  layers write: ``P`` (previous token's code, 2b), ``E`` (the SSM's bit read-out, 2K), ``Q``
  (ψ'(s), 2K), ``R`` (the recalled token's code, 2b). Stream order T, P, K, E, Q, R — the
  paper's (x_i, x_{i-1}, bits, ϕ(n_i), output).
* Mamba (one layer, d_state 1, K + 2 of its channels): the proof's state update is a shift
  register H ← S H + bit (W_A = I - S), which a diagonal Mamba A cannot hold. We keep K decayed
  bit sums instead: Δ = softplus(±30) switches the scan on at bit tokens only (as theory.cooper),
  and channel m has decay λ_m = m·min(1/20, 1/(K(K-1))) per bit (m = 0..K-1; λ_0 = exp(-30)),
  input 1 at ``#1``, so
  its state is T(λ_m) = Σ_i b_i λ_m^i over the bits, newest first (i = 0). Reading the bits as
  β = 2b - 1 and the bits before the first one as 0 (β = -1, the task's s starts at 0),
  S(λ) = 2 T(λ) - 1/(1 - λ) = Σ_i β_i λ^i, and the j-th Newton divided difference of S over
  λ_0..λ_j is ``u_j = β_j + Σ_{i>j} β_i h_{i-j}(λ_0..λ_j)`` (h = complete homogeneous symmetric
  polynomial, all ≥ 0), whose tail is at most ``R_j = Π_{m≤j} 1/(1 - λ_m) - 1`` (0.72 for j = 4)
  < 1: sign(u_j) = β_j, the j-th newest bit. out_proj writes ε·(2 DD_j[T]) (ε = EPS_E, small so
  that the stream's norm, hence every LayerNorm scale, stays constant to 2e-5 at K = 5).
* first NeoX layer: its MLP (the proof's "MLP layer to combine the output with the input")
  takes the signs, Q_j = SiLU(P_j + 1) - SiLU(P_j - 1) - 1 ∈ ±1 with P_j ∝ u_j (u_j from E and
  the constant Π 1/(1 - λ_m) read off K): Q = [ψ'(s), -ψ'(s)]. Its attention is the proof's
  previous-token head: constant query and key (biases) whose RoPE score Σ_k cos((i-j-1)θ_k) peaks
  at j = i - 1 (theory.cooper's relative look-up with offset 1); the value is the code c(x_j),
  written to P. (The proof's second, identity head is the residual connection.)
* second NeoX layer: attention with query (ψ'(s), -1) and key (the previous token's code read
  from P), scaled by M: the score is M·(K + 1) for a position whose previous token is V_s, at
  most M·(K - 1) otherwise (a word differs in ≥ 1 bit; a non-word token has code bit K = 1).
  The proof's position bias B ("argmax at the last recall token") is RoPE again: a constant
  query/key pair on one rotary frequency θ* scores γ cos((i - j + m0) θ*), decreasing in the
  distance over the whole window; γ makes one step of recency worth ≥ GAP logits and M makes a
  match beat any recency. The value is the code c(x_j), written to R; the MLP is off.
* head (untied, no bias): logit_v = λ (R · [c(v), -c(v)]) / σ — largest for the recalled token.

Exact wherever the recalled pair (V_s, x_{j+1}) lies inside the attention window (j + 1 > t -
window): with ``window ≥ L`` that is every supervised position. ``decode_recall_plan`` gives the
margins; ``decode_recall_weights`` raises when the layout does not fit d, the rotary channels
cannot tell the offsets apart, or the node sums' tails leave no margin.
"""

from __future__ import annotations

import math

import torch

from .cooper import (
    GAP,
    K_DT,
    LAMBDA,
    Z,
    codes,
    n_bits,
    neox_rotary_pairs,
    rope_query,
    rotary_width,
    selective_copy_margin,
    silu,
    softplus,
    stream_layout,
)

EPS_E = 3e-3  # scale of the SSM's read-out in the stream (its norm moves the LayerNorms by ~ε²)


BLOCK_NAMES = {"T": "token code", "P": "previous token's code", "K": "constant",
               "E": "SSM bit read-out (×ε, faint)", "Q": "state ψ'(s)",
               "R": "recalled token's code"}


def layout(V: int, words: int) -> dict[str, slice]:
    """Stream blocks of the construction (see the module docstring)."""
    b, K = n_bits(V), state_bits(words)
    return stream_layout([("T", 2 * b), ("P", 2 * b), ("K", 2), ("E", 2 * K), ("Q", 2 * K),
                          ("R", 2 * b)])


def state_bits(words: int) -> int:
    K = words.bit_length() - 1
    if words < 8 or words != 1 << K:
        raise ValueError(f"the decode-recall construction needs words = 2^K >= 8 (got {words}): "
                         "then the non-word tokens are exactly those with token bit K set")
    return K


def node_decays(K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(λ, a): the per-bit decays λ_m = m·step, step = min(1/20, 1/(K(K - 1))) (Σ λ <= 1/2, so
    every tail bound R_j stays below 0.72; λ_0 = exp(-30) as the scan realises 0) and
    a_m = -A_m = -ln λ_m / softplus(K_DT)."""
    dt = softplus(K_DT)
    step = min(0.05, 1.0 / (K * (K - 1)))
    lam = torch.tensor([m * step for m in range(K)], dtype=torch.float64)
    a = torch.ones(K, dtype=torch.float64)
    a[1:] = -torch.log(lam[1:]) / dt
    return torch.exp(-dt * a), a


def divided_difference_weights(lam: torch.Tensor) -> torch.Tensor:
    """(K, K) w with DD_j[f] = Σ_l w[j, l] f(λ_l) over the nodes λ_0..λ_j (Newton's form)."""
    K = len(lam)
    w = torch.zeros(K, K, dtype=torch.float64)
    for j in range(K):
        for l in range(j + 1):
            others = torch.cat([lam[:l], lam[l + 1:j + 1]])
            w[j, l] = 1.0 / torch.prod(lam[l] - others)
    return w


def tail_bounds(lam: torch.Tensor) -> torch.Tensor:
    """R_j = Π_{m≤j} 1/(1 - λ_m) - 1: the largest |u_j - β_j| (j-th divided difference of Σ β λ^i)."""
    return torch.cumprod(1.0 / (1.0 - lam), 0) - 1.0


def recency_plan(r: int, base: float, window: int) -> tuple[int, int, float, float]:
    """(pair k, phase m0, smallest one-step drop, total drop) of the recency score
    cos((dist + m0) θ_k) over dist = 0..window-1, for the rotary pair that needs the smallest
    score scale; raises if no pair is monotone over the window."""
    best = None
    for k, th in enumerate(neox_rotary_pairs(r, base)):
        top = int(math.floor(math.pi / th)) - (window - 1)
        for m0 in range(0, max(top, -1) + 1):
            dist = torch.arange(window, dtype=torch.float64)
            rec = torch.cos((dist + m0) * th)
            drop = float((rec[:-1] - rec[1:]).min()) if window > 1 else 1.0
            if drop <= 0:
                continue
            span = float(rec[0] - rec[-1])
            cost = (1.0 + span) / drop
            if best is None or cost < best[0]:
                best = (cost, k, m0, drop, span)
    if best is None:
        raise ValueError(f"no rotary frequency of the {r} rotary channels is monotone over a "
                         f"window of {window} (a larger d_model adds slower frequencies)")
    return best[1], best[2], best[3], best[4]


def decode_recall_plan(*, words: int, d_model: int, rotary_pct: float, rope_base: float,
                       window: int, eps: float = 1e-5) -> dict[str, float]:
    """The construction's constants and margins (see the module docstring)."""
    V = words + 2 + 3
    b, K = n_bits(V), state_bits(words)
    lay = layout(V, words)
    d = d_model
    if d < lay["R"].stop:
        raise ValueError(f"the decode-recall construction needs d_model >= {lay['R'].stop} for "
                         f"V={V} (6·{b} + 4·{K} + 2), got {d}")
    lam, _ = node_decays(K)
    tails = tail_bounds(lam)
    if not float(tails.max()) < 1.0:
        raise ValueError(f"the node sums' tails reach {float(tails.max()):.3f} >= 1 for K={K}")
    r = rotary_width(d, rotary_pct)
    m1 = selective_copy_margin(d, rotary_pct, rope_base, [1], window - 1)
    if not m1 > 1e-6:
        raise ValueError(f"with d_model={d} the rotary channels cannot single out the previous "
                         f"token within {window} positions")
    if r + b > d:
        raise ValueError(f"d_model={d} leaves fewer than {b} channels beside the rotary ones")
    k_rec, m0, drop, span = recency_plan(r, rope_base, window)
    # ---- stream norms (sum 0 everywhere): squares of the constant blocks, and the SSM's part
    sq1 = 2 * b + 2  # T, K (embedding; stream after the SSM but for its ε-block)
    sq2 = sq1 + 2 * b + 2 * K  # + P, Q
    sq_f = sq2 + 2 * b  # + R
    v_max = 2.0 * (1.0 + tails)  # |2 DD_j[T]| <= |u_j| + Π 1/(1-λ) <= 2 (1 + R_j)
    delta = EPS_E ** 2 * float((v_max ** 2).sum()) / sq1  # relative rise of any σ (≥ 2x bound)
    gamma = GAP / drop
    M = (GAP + gamma * span) / 2
    slack = 6 * delta * (K + 1) * M  # the σ's scatter of the match scores, in logits
    if slack > GAP / 2:
        raise ValueError(f"EPS_E={EPS_E} moves the LayerNorms too much ({slack:.2f} logits)")
    return {
        "b": b, "K": K, "r": r, "sigma1": math.sqrt(sq1 / d + eps),
        "sigma2": math.sqrt(sq2 / d + eps), "sigma_f": math.sqrt(sq_f / d + eps),
        "prev_margin": m1, "rec_pair": k_rec, "rec_phase": m0, "rec_drop": drop,
        "rec_span": span, "gamma": gamma, "M": M, "norm_slack": slack,
        "min_bit_margin": float(1.0 - tails.max()),
    }


def decode_recall_weights(*, words: int, d_model: int, d_inner: int, d_state: int, d_conv: int,
                          dt_rank: int, heads: int, rotary_pct: float, rope_base: float,
                          window: int | None, mlp_hidden: int, eps: float = 1e-5
                          ) -> dict[str, torch.Tensor]:
    """Every parameter of the SSM→TF→TF ``cooper_hybrid`` for associative recall with decoding
    (float64, E = 1 slices, row-vector convention). Keys as ``theory.cooper``'s
    ``selective_copy_weights`` with the two NeoX layers under ``tf1.`` and ``tf2.``."""
    if window is None:
        raise ValueError("the decode-recall construction needs an attention window (the RoPE "
                         "margins hold over window positions)")
    if heads != 1:
        raise ValueError("the decode-recall construction uses one attention head")
    V = words + 2 + 3
    plan = decode_recall_plan(words=words, d_model=d_model, rotary_pct=rotary_pct,
                              rope_base=rope_base, window=window, eps=eps)
    b, K, r = plan["b"], plan["K"], plan["r"]
    d, Di, s = d_model, d_inner, d_model
    if Di < K + 2 or d_state < 1 or dt_rank < 1 or d_conv < 1 or mlp_hidden < 2 * K:
        raise ValueError(f"d_inner={Di} must be >= {K + 2}, the MLP width >= {2 * K} (and "
                         "d_state, dt_rank, d_conv >= 1)")
    lay = layout(V, words)
    T, P, Kb, Eb, Q, R = (lay[k] for k in ("T", "P", "K", "E", "Q", "R"))
    f64 = torch.float64
    c = codes(V)  # (V, b)
    bit0, bit1 = words, words + 1

    # ---- embedding: T and K (sum 0, norm² 2b + 2 in every row)
    emb = torch.zeros(V, d, dtype=f64)
    emb[:, T] = torch.cat([c, -c], 1)
    emb[:, Kb] = torch.tensor([1.0, -1.0], dtype=f64)
    rho = 1.0 / math.sqrt((2 * b + 2) / d + eps)  # RMSNorm scale

    # ---- Mamba: channels ind (on at bits), const (B = C = 1), node_0..node_{K-1} (on at #1)
    IND, CONST, NODE0 = 0, 1, 2
    a = Z / rho
    w_in = torch.zeros(d, 2 * Di, dtype=f64)
    w_in[T.start + 1:T.start + b, IND] = a * c[bit0, 1:]  # bits share all code bits but bit 0
    w_in[Kb.start, IND] = -a * (b - 2)
    w_in[Kb.start, CONST] = a
    for m in range(K):
        w_in[T.start:T.start + b, NODE0 + m] = a * c[bit1]
        w_in[Kb.start, NODE0 + m] = -a * (b - 1)  # Z at #1, <= -Z elsewhere
    w_in[Kb.start, Di + torch.arange(Di)] = a  # gate z = Z on every channel
    on = silu(Z)
    conv_w = torch.zeros(Di, d_conv, dtype=f64)
    conv_w[:, d_conv - 1] = 1.0
    N = d_state
    x_proj = torch.zeros(Di, dt_rank + 2 * N, dtype=f64)
    x_proj[IND, 0] = 1.0 / on
    x_proj[CONST, dt_rank] = 1.0 / on
    x_proj[CONST, dt_rank + N] = 1.0 / on
    dt_weight = torch.zeros(dt_rank, Di, dtype=f64)
    dt_weight[0, :] = 2 * K_DT
    lam, a_node = node_decays(K)
    A_log = torch.zeros(Di, N, dtype=f64)
    A_log[NODE0:NODE0 + K, 0] = torch.log(a_node)
    held = softplus(K_DT) * on * on  # y_m = held · T(λ_m)
    dd = divided_difference_weights(lam)
    out_proj = torch.zeros(Di, d, dtype=f64)
    for j in range(K):
        for l in range(j + 1):
            out_proj[NODE0 + l, Eb.start + j] = 2 * EPS_E * dd[j, l] / held
            out_proj[NODE0 + l, Eb.start + K + j] = -2 * EPS_E * dd[j, l] / held

    # ---- first NeoX layer: previous-token head (biases only) and the sign MLP
    sig1 = plan["sigma1"]
    theta = neox_rotary_pairs(r, rope_base)
    tf1 = neox_zero(d, s, mlp_hidden)
    qc, qs = rope_query(GAP * math.sqrt(s) / plan["prev_margin"], 1, theta)
    tf1["qkv.b"][: r // 2], tf1["qkv.b"][r // 2: r] = qc, qs
    tf1["qkv.b"][s: s + r // 2] = 1.0  # key (1, 0) in every rotary pair
    copy_code(tf1, T, P, b, 2 * s, sig1)
    c_thr = torch.cumprod(1.0 / (1.0 - lam), 0)  # DD_j[1/(1-λ)]
    tails = c_thr - 1.0
    for j in range(K):
        gain = 2 * Z / (EPS_E * (1.0 - float(tails[j]))) * sig1  # |P_j| >= 2Z at the worst tail
        for u, bias in ((2 * j, 1.0), (2 * j + 1, -1.0)):
            tf1["fc1.w"][Eb.start + j, u] = gain / 2
            tf1["fc1.w"][Eb.start + K + j, u] = -gain / 2
            tf1["fc1.w"][Kb.start, u] = -gain * EPS_E * float(c_thr[j]) / 2
            tf1["fc1.w"][Kb.start + 1, u] = gain * EPS_E * float(c_thr[j]) / 2
            tf1["fc1.b"][u] = bias
            tf1["fc2.w"][u, Q.start + j] = bias
            tf1["fc2.w"][u, Q.start + K + j] = -bias
        tf1["fc2.b"][Q.start + j], tf1["fc2.b"][Q.start + K + j] = -1.0, 1.0

    # ---- second NeoX layer: the recall head
    sig2 = plan["sigma2"]
    tf2 = neox_zero(d, s, mlp_hidden)
    M = plan["M"] * math.sqrt(s)
    for k in range(K):  # query ψ'(s), from Q
        tf2["qkv.w"][Q.start + k, r + k] = M * sig2 / 2
        tf2["qkv.w"][Q.start + K + k, r + k] = -M * sig2 / 2
    tf2["qkv.w"][Kb.start, r + K] = -M * sig2 / 2  # -1: a word's code bit K is -1
    tf2["qkv.w"][Kb.start + 1, r + K] = M * sig2 / 2
    for k in range(b):  # key: the previous token's code, from P
        tf2["qkv.w"][P.start + k, s + r + k] = sig2 / 2
        tf2["qkv.w"][P.start + b + k, s + r + k] = -sig2 / 2
    kr, m0 = int(plan["rec_pair"]), int(plan["rec_phase"])
    qc, qs = rope_query(plan["gamma"] * math.sqrt(s), -m0, theta[kr:kr + 1])
    tf2["qkv.b"][kr], tf2["qkv.b"][r // 2 + kr] = float(qc[0]), float(qs[0])
    tf2["qkv.b"][s + kr] = 1.0
    copy_code(tf2, T, R, b, 2 * s, sig2)

    head = torch.zeros(d, V, dtype=f64)
    head[R.start:R.start + b] = (LAMBDA * plan["sigma_f"] / 2) * c.T
    head[R.start + b:R.stop] = -(LAMBDA * plan["sigma_f"] / 2) * c.T
    ones, zeros = torch.ones(d, dtype=f64), torch.zeros(d, dtype=f64)
    out = {
        "embed": emb, "ssm.norm": ones.clone(), "ssm.in_proj": w_in, "ssm.conv_w": conv_w,
        "ssm.conv_b": torch.zeros(Di, dtype=f64), "ssm.x_proj": x_proj,
        "ssm.dt_weight": dt_weight, "ssm.dt_bias": torch.full((Di,), -K_DT, dtype=f64),
        "ssm.A_log": A_log, "ssm.D": torch.zeros(Di, dtype=f64), "ssm.out_proj": out_proj,
        "norm_f.w": ones.clone(), "norm_f.b": zeros.clone(), "head": head,
    }
    out.update({f"tf1.{k}": v for k, v in tf1.items()})
    out.update({f"tf2.{k}": v for k, v in tf2.items()})
    return out


def neox_zero(d: int, s: int, hidden: int) -> dict[str, torch.Tensor]:
    """A NeoX layer's parameters, all zero but the norms' weights (one head of size s)."""
    f64 = torch.float64
    z = lambda *shape: torch.zeros(*shape, dtype=f64)  # noqa: E731
    return {"norm1.w": torch.ones(d, dtype=f64), "norm1.b": z(d), "qkv.w": z(d, 3 * s),
            "qkv.b": z(3 * s), "dense.w": z(s, d), "dense.b": z(d),
            "norm2.w": torch.ones(d, dtype=f64), "norm2.b": z(d), "fc1.w": z(d, hidden),
            "fc1.b": z(hidden), "fc2.w": z(hidden, d), "fc2.b": z(d)}


def copy_code(tf: dict[str, torch.Tensor], src: slice, dst: slice, b: int, v0: int,
              sigma: float) -> None:
    """Value = the b-bit code of pair block ``src`` (read as (x - x')/2 after the LayerNorm of
    scale σ, so the stream's mean never enters), in value channels v0.., written by the dense
    layer into pair block ``dst``."""
    for k in range(b):
        tf["qkv.w"][src.start + k, v0 + k] = sigma / 2
        tf["qkv.w"][src.start + b + k, v0 + k] = -sigma / 2
        tf["dense.w"][k, dst.start + k] = 1.0
        tf["dense.w"][k, dst.start + b + k] = -1.0
