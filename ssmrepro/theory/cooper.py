"""Library (theory): cooper2026's constructed (not trained) hybrid for selective copy (Thm 4.3,
App. D.2), written into the weights of the ``cooper_hybrid`` SSM→TF model.

The proof's idea, kept: a Mamba layer whose Δ is (almost exactly) the indicator of a number token
resets its state at every number and holds it elsewhere, so after it every position carries the
most recent number n; an attention layer then looks back n positions and copies the token there;
a read-out decodes that token's binary code. The proof's idealised layers (Δ ∈ {0, 1},
exp(-ΔA) ≈ I - ΔA, constant B and C, an attention bias, absolute binary positions) are realised
inside the real blocks — RMSNorm → Mamba-1 (in_proj, causal conv, SiLU, x_proj, softplus Δ,
A = -exp(A_log), D, SiLU gate, out_proj), then the GPT-NeoX layer (LayerNorm, attention with
partial RoPE and a window, parallel MLP), final LayerNorm, linear head — as follows:

* embedding (rows of ``embed``, d ≥ 4b + 5 + N; b = ⌈log2 V⌉ bits; every row has the same
  norm and the same sum, so both norms act as fixed affine maps):
  ``T = [c(v), -c(v)]`` the ±1 binary code of the token, ``G = [g, -g]`` with g = +1 for a
  number token and -1 otherwise, ``K = [1, -1]`` constant, ``O = [1, 0, ..., 0]`` (1 + N slots),
  ``R = 0`` (2b slots the attention writes), zeros after;
* Mamba: SiLU(±Z) with Z = 20 is an on/off switch (SiLU(-20) ≈ -4e-8). Channels: ``ind`` =
  SiLU(Z g) (on at numbers), ``const`` = SiLU(Z) (B_t = C_t = 1 read from it), ``seen`` =
  SiLU(Z) and, for each number #k, ``num_k`` = SiLU(Z (c(#k)·c(v) - b + 1)) (on only at #k).
  The conv is the identity (current tap 1). Δ = softplus(2K r_t - K), r_t = ind / SiLU(Z), K = 30:
  softplus(30) ≈ 30 at numbers (exp(-30) resets the state, A = -1), softplus(-30) ≈ 1e-13
  elsewhere (the state is held). D = 0, the gate is the constant SiLU(Z). out_proj writes
  ``O = [1 - seen, 1[n = #1], ..., 1[n = #N]]`` (the embedding's 1 in slot 0 cancelled once a
  number was seen): a one-hot of the most recent number, or of "none yet";
* attention (one head, head size s = d, RoPE on the first r channels, pairs (k, k + r/2),
  frequencies θ_k = base^(-2k/r)): the key is the constant (1, 0) in every rotary pair (its
  bias), the query of a position whose slot says n is ``M (cos nθ_k, -sin nθ_k)``, so the score
  of key j at query i is ``M Σ_k cos((i - j - n) θ_k) / √s``: largest exactly at i - j = n — the
  proof's relative look-up, done by RoPE instead of absolute binary positions. M is chosen so
  the best wrong offset in the window scores ≥ 30 below it. The value is the code c(x_j), the
  dense layer writes ``R = [c, -c]``; the MLP is off (fc2 = 0);
* head (untied, no bias): logit_v = λ (R · [c(v), -c(v)]) / σ — largest for the copied token.

Because RoPE is relative, the construction is exact at every supervised position whose offset n
lies in the window, not only at the last one (the paper's absolute-position version is exact at
the last position; its Fig. 9 notebook shows the last position). ``selective_copy_margin`` gives
the score gap; ``selective_copy_weights`` raises if the rotary channels cannot separate the
offsets (too small d) or the layout does not fit.

All matrices are in row-vector convention (``y = x @ W``), as the packed layers store them.
"""

from __future__ import annotations

import math

import torch

Z = 20.0  # SiLU switch: SiLU(20) ≈ 20, SiLU(-20) ≈ -4e-8
K_DT = 30.0  # softplus(±30): Δ ≈ 30 (reset) or ≈ 1e-13 (hold)
GAP = 30.0  # attention score gap (in logits) between the right offset and any other
LAMBDA = 5.0  # head scale


def n_bits(V: int) -> int:
    return max(1, math.ceil(math.log2(V)))


def codes(V: int) -> torch.Tensor:
    """(V, b) ±1 binary codes of the token ids (bit k of v -> column k)."""
    b = n_bits(V)
    v = torch.arange(V)[:, None]
    return ((v >> torch.arange(b)[None]) & 1).double() * 2 - 1


def stream_layout(blocks: list[tuple[str, int]]) -> dict[str, slice]:
    """Consecutive stream slices for (name, width) blocks."""
    out, i = {}, 0
    for name, n in blocks:
        out[name] = slice(i, i + n)
        i += n
    return out


def layout(V: int, numbers: int) -> dict[str, slice]:
    """Stream blocks of the construction (see the module docstring)."""
    b = n_bits(V)
    return stream_layout([("T", 2 * b), ("G", 2), ("K", 2), ("O", 1 + numbers), ("R", 2 * b)])


def rotary_width(d_model: int, rotary_pct: float) -> int:
    r = int(d_model * rotary_pct)
    return r - r % 2


def neox_rotary_pairs(r: int, base: float) -> torch.Tensor:
    """θ_k = base^(-2k/r) of the r/2 rotary pairs (k, k + r/2) (float64)."""
    return base ** (-2.0 * torch.arange(r // 2, dtype=torch.float64) / r)


def rope_query(M: float, n: int, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos part, sin part) of a query that scores M Σ_k cos((i - j - n) θ_k) against the key
    (1, 0) in every pair: the relative look-up n positions back (n < 0: a phase for recency)."""
    return M * torch.cos(n * theta), -M * torch.sin(n * theta)


def selective_copy_margin(d_model: int, rotary_pct: float, base: float, offsets: list[int],
                          max_offset: int) -> float:
    """min over n in offsets and m in [0, max_offset], m != n, of Σ_k [1 - cos((m - n) θ_k)]."""
    r = rotary_width(d_model, rotary_pct)
    if r < 2:
        return 0.0
    theta = neox_rotary_pairs(r, base)
    worst = math.inf
    for n in offsets:
        for m in range(0, max_offset + 1):
            if m != n:
                worst = min(worst, float((1 - torch.cos((m - n) * theta)).sum()))
    return worst


def silu(x: float) -> float:
    return x / (1.0 + math.exp(-x))


def softplus(x: float) -> float:
    return math.log1p(math.exp(-abs(x))) + max(x, 0.0)


def selective_copy_weights(*, words: int, numbers: int, offset: int, d_model: int, d_inner: int,
                           d_state: int, d_conv: int, dt_rank: int, heads: int, rotary_pct: float,
                           rope_base: float, window: int | None, L: int, mlp_hidden: int,
                           eps: float = 1e-5) -> dict[str, torch.Tensor]:
    """Every parameter of the SSM→TF ``cooper_hybrid`` for selective copy (float64, E = 1 slices,
    row-vector convention). Keys: ``embed`` (V, d); ``ssm.norm`` (d); ``ssm.in_proj`` (d, 2Di);
    ``ssm.conv_w`` (Di, d_conv), ``ssm.conv_b`` (Di); ``ssm.x_proj`` (Di, R + 2N);
    ``ssm.dt_weight`` (R, Di); ``ssm.dt_bias`` (Di); ``ssm.A_log`` (Di, N); ``ssm.D`` (Di);
    ``ssm.out_proj`` (Di, d); ``tf.norm1.{w,b}``, ``tf.norm2.{w,b}`` (d); ``tf.qkv.{w,b}``
    (d, 3d), (3d); ``tf.dense.{w,b}`` (d, d), (d); ``tf.fc1.{w,b}``, ``tf.fc2.{w,b}``;
    ``norm_f.{w,b}`` (d); ``head`` (d, V). ``L`` bounds the look-back when ``window`` is None.
    """
    V = words + numbers + 3
    b = n_bits(V)
    lay = layout(V, numbers)
    need = lay["R"].stop
    d, Di = d_model, d_inner
    if d < need:
        raise ValueError(f"the selective-copy construction needs d_model >= {need} for V={V} and "
                         f"{numbers} numbers (got {d})")
    if heads != 1:
        raise ValueError("the selective-copy construction uses one attention head")
    if Di < 3 + numbers or d_state < 1 or dt_rank < 1 or d_conv < 1:
        raise ValueError(f"d_inner={Di} must be >= {3 + numbers} (and d_state, dt_rank, d_conv >= 1)")
    n_vals = [offset + j for j in range(numbers)]
    max_off = (window - 1) if window is not None else L - 1
    if max(n_vals) > max_off:
        raise ValueError(f"the window ({window}) cannot reach an offset of {max(n_vals)}")
    margin = selective_copy_margin(d, rotary_pct, rope_base, n_vals, max_off)
    if not margin > 1e-6:
        raise ValueError(f"with d_model={d} the rotary channels cannot tell the offsets "
                         f"{n_vals} apart within {max_off} positions")
    f64 = torch.float64
    c = codes(V)  # (V, b)
    is_num = torch.zeros(V, dtype=torch.bool)
    is_num[words:words + numbers] = True
    g = is_num.double() * 2 - 1
    T, G, Kb, O, R = (lay[k] for k in ("T", "G", "K", "O", "R"))

    # ---- embedding
    emb = torch.zeros(V, d, dtype=f64)
    emb[:, T] = torch.cat([c, -c], 1)
    emb[:, G] = torch.stack([g, -g], 1)
    emb[:, Kb] = torch.tensor([1.0, -1.0], dtype=f64)
    emb[:, O.start] = 1.0
    sq = float((emb[0] ** 2).sum())  # every row: 2b + 5
    rho = 1.0 / math.sqrt(sq / d + eps)  # RMSNorm scale (weight 1)

    # ---- Mamba: channels ind, const, seen, num_1..num_N
    IND, CONST, SEEN, NUM0 = 0, 1, 2, 3
    w_in = torch.zeros(d, 2 * Di, dtype=f64)
    a = Z / rho  # pre-activations ±Z after the RMSNorm scale
    w_in[G.start, IND] = a  # Z g
    w_in[Kb.start, CONST] = a  # Z
    w_in[Kb.start, SEEN] = a
    for j in range(numbers):
        ch = NUM0 + j
        w_in[T.start:T.start + b, ch] = a * c[words + j]
        w_in[Kb.start, ch] = -a * (b - 1)  # Z (c(#k)·c(v) - b + 1): Z at #k, <= -Z elsewhere
    w_in[Kb.start, Di + torch.arange(Di)] = a  # gate z = Z on every channel
    on = silu(Z)
    conv_w = torch.zeros(Di, d_conv, dtype=f64)
    conv_w[:, d_conv - 1] = 1.0  # identity: the current tap
    conv_b = torch.zeros(Di, dtype=f64)
    N = d_state
    x_proj = torch.zeros(Di, dt_rank + 2 * N, dtype=f64)
    x_proj[IND, 0] = 1.0 / on  # r_t = 1 at numbers, ≈ 0 elsewhere
    x_proj[CONST, dt_rank] = 1.0 / on  # B_t[0] = 1
    x_proj[CONST, dt_rank + N] = 1.0 / on  # C_t[0] = 1
    dt_weight = torch.zeros(dt_rank, Di, dtype=f64)
    dt_weight[0, :] = 2 * K_DT
    dt_bias = torch.full((Di,), -K_DT, dtype=f64)
    A_log = torch.zeros(Di, N, dtype=f64)  # A = -1
    Dskip = torch.zeros(Di, dtype=f64)
    held = softplus(K_DT) * on * on  # y = Δ u B C · SiLU(z) for an "on" channel
    out_proj = torch.zeros(Di, d, dtype=f64)
    out_proj[SEEN, O.start] = -1.0 / held
    for j in range(numbers):
        out_proj[NUM0 + j, O.start + 1 + j] = 1.0 / held

    # ---- attention: LayerNorm of a stream with sum 1 and sum of squares 2b + 5
    mu = 1.0 / d
    sigma = math.sqrt(sq / d - mu * mu + eps)
    s = d
    r = rotary_width(s, rotary_pct)
    theta = neox_rotary_pairs(r, rope_base)
    M = GAP * math.sqrt(s) / margin
    qkv_w = torch.zeros(d, 3 * s, dtype=f64)
    qkv_b = torch.zeros(3 * s, dtype=f64)
    for j, n in enumerate(n_vals):
        qc, qs = rope_query(M, n, theta)
        qkv_w[O.start + 1 + j, : r // 2] = sigma * qc
        qkv_w[O.start + 1 + j, r // 2 : r] = sigma * qs
        qkv_b[: r // 2] += mu * qc  # cancels the LayerNorm's mean shift
        qkv_b[r // 2 : r] += mu * qs
    qkv_b[s : s + r // 2] = 1.0  # key: (1, 0) in every rotary pair
    for k in range(b):  # value: the token code c(x_j)
        qkv_w[T.start + k, 2 * s + k] = sigma
        qkv_b[2 * s + k] = mu
    dense_w = torch.zeros(s, d, dtype=f64)
    for k in range(b):
        dense_w[k, R.start + k] = 1.0
        dense_w[k, R.start + b + k] = -1.0
    # ---- head: the final LayerNorm's σ (stream sum 1, squares 4b + 5)
    sigma_f = math.sqrt((sq + 2 * b) / d - mu * mu + eps)
    head = torch.zeros(d, V, dtype=f64)
    head[R.start:R.start + b] = (LAMBDA * sigma_f / 2) * c.T
    head[R.start + b:R.stop] = -(LAMBDA * sigma_f / 2) * c.T
    ones, zeros = torch.ones(d, dtype=f64), torch.zeros(d, dtype=f64)
    return {
        "embed": emb, "ssm.norm": ones.clone(), "ssm.in_proj": w_in, "ssm.conv_w": conv_w,
        "ssm.conv_b": conv_b, "ssm.x_proj": x_proj, "ssm.dt_weight": dt_weight,
        "ssm.dt_bias": dt_bias, "ssm.A_log": A_log, "ssm.D": Dskip, "ssm.out_proj": out_proj,
        "tf.norm1.w": ones.clone(), "tf.norm1.b": zeros.clone(), "tf.qkv.w": qkv_w,
        "tf.qkv.b": qkv_b, "tf.dense.w": dense_w, "tf.dense.b": zeros.clone(),
        "tf.norm2.w": ones.clone(), "tf.norm2.b": zeros.clone(),
        "tf.fc1.w": torch.zeros(d, mlp_hidden, dtype=f64),
        "tf.fc1.b": torch.zeros(mlp_hidden, dtype=f64),
        "tf.fc2.w": torch.zeros(mlp_hidden, d, dtype=f64), "tf.fc2.b": zeros.clone(),
        "norm_f.w": ones.clone(), "norm_f.b": zeros.clone(), "head": head,
    }
