"""Library (theory): the designed (non-trained) recall circuit of koren2026 Thm 2, for a
simplified linear Mamba.

Paper notation (column vectors, seed App. Eqs. 38-48): ``E`` (D x V) embedding with unit-norm
Gaussian token columns, tied output ``E^T``; ``P_in = (I_D | I_D)^T`` duplicates the embedded token;
the width-2 depthwise conv has ``W_p = (1_D, 0_D)`` on the previous token and ``W_c = (0_D, 1_D)`` on
the current one, so ``x_hat_t = (E x_{t-1} ; E x_t)``; ``S_B = (F | 0)`` gives the key
``B_t = F E x_{t-1}``, ``S_C = (0 | F)`` the query ``C_t = F E x_t``; ``P_out = (0 | I_D)`` reads the
current-token half; ``F`` (N x D) = first N rows of a random orthogonal matrix times sqrt(D/N), so
``F F^T = (D/N) I_N`` and ``F E`` has ~unit-norm columns (a JL map R^V -> R^N).

Why the *current* half carries the value: with A = I and D = 0 the output at a query position t is
``y_t = sum_{s<=t} (C_t . B_s) x_hat_s``. ``C_t . B_s = (F E x_t) . (F E x_{s-1}) ~ [x_{s-1} = x_t]``,
so the sum picks the position s right AFTER the earlier occurrence of the query key, i.e. the
value token of the fact; its current half is ``E v``. Hence ``P_out = (0 | I_D)`` and the logits
``E^T E v ~ v`` peak at the value.

Here everything is in ROW-VECTOR convention (``y = x @ W``), matching ``nn.Linear`` weights
transposed:

=============  ===========  ==================================================================
key            shape        content
=============  ===========  ==================================================================
embedding      (V, D)       row v = E[:, v] (unit norm); logits = h @ embedding.T (tied)
in_proj        (D, 2D)      [I_D | I_D]  (= P_in^T)
conv           (2D, 2)      column 0 multiplies the PREVIOUS token, column 1 the CURRENT token
                            (PyTorch Conv1d weight[:, 0, :] with padding 1, truncated to L);
                            column 0 = [1]*D + [0]*D, column 1 = [0]*D + [1]*D
B_proj         (2D, N)      S_B^T = [F^T ; 0]  (keys from the previous-token channels 0..D-1)
C_proj         (2D, N)      S_C^T = [0 ; F^T]  (queries from the current-token channels D..2D-1)
out_proj       (2D, D)      P_out^T = [0 ; I_D] (reads the current-token half = the value)
=============  ===========  ==================================================================
"""

from __future__ import annotations

import math

import torch


def check_designed_shape(V: int, D: int, N: int) -> None:
    """Raise ValueError unless Thm 2's construction exists for these sizes (``V >= D >= N >= 2``)."""
    if not (V >= D >= N >= 2):
        raise ValueError(f"designed weights need V >= D >= N >= 2, got V={V}, D={D}, N={N}")


def designed_weights(
    V: int, D: int, N: int, seed: int, dtype: torch.dtype = torch.float32
) -> dict[str, torch.Tensor]:
    """Thm 2 weights (row-vector convention, see the module docstring). Requires ``V >= D >= N >= 2``.

    Randomness (E and the orthogonal matrix behind F) comes from a CPU ``torch.Generator`` seeded
    with ``seed``; computed in float64, returned in ``dtype``.
    """
    check_designed_shape(V, D, N)
    g = torch.Generator().manual_seed(int(seed))
    f64 = torch.float64
    E = torch.randn(D, V, generator=g, dtype=f64)
    E = E / E.norm(dim=0, keepdim=True)  # unit-norm token columns
    q, r = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=f64))
    q = q * torch.sign(torch.diagonal(r))[None, :]  # Haar-distributed orthogonal matrix
    F = q[:N, :] * math.sqrt(D / N)  # (N, D), F F^T = (D/N) I_N
    eye, zD, zN = torch.eye(D, dtype=f64), torch.zeros(D, D, dtype=f64), torch.zeros(D, N, dtype=f64)
    ones, zeros = torch.ones(D, dtype=f64), torch.zeros(D, dtype=f64)
    w = {
        "embedding": E.T.contiguous(),
        "in_proj": torch.cat([eye, eye], dim=1),
        "conv": torch.stack([torch.cat([ones, zeros]), torch.cat([zeros, ones])], dim=1),
        "B_proj": torch.cat([F.T, zN], dim=0),
        "C_proj": torch.cat([zN, F.T], dim=0),
        "out_proj": torch.cat([zD, eye], dim=0),
    }
    return {k: v.to(dtype) for k, v in w.items()}


def designed_forward(ids: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """Plain single-layer simplified linear Mamba (koren2026 §2.1, "attention" SSM mode): test oracle.

    ids (..., L) int64 -> logits (..., L, V). Steps: ``x = embedding[ids]``; ``x_in = x @ in_proj``;
    causal depthwise conv of width 2, ``c_t = x_in_{t-1} * conv[:, 0] + x_in_t * conv[:, 1]``
    (``x_in_{-1} = 0``); ``B_t = c_t @ B_proj``, ``C_t = c_t @ C_proj``;
    ``y_t = sum_{s <= t} (C_t . B_s) c_s`` (A = I, D = 0, no decay, no discretisation, no gate,
    no norm, no residual); ``logits = (y @ out_proj) @ embedding.T``.
    """
    x = w["embedding"][ids]  # (..., L, D)
    x_in = x @ w["in_proj"]  # (..., L, 2D)
    prev = torch.cat([torch.zeros_like(x_in[..., :1, :]), x_in[..., :-1, :]], dim=-2)
    c = prev * w["conv"][:, 0] + x_in * w["conv"][:, 1]
    B = c @ w["B_proj"]  # (..., L, N)
    C = c @ w["C_proj"]
    L = ids.shape[-1]
    causal = torch.ones(L, L, dtype=torch.bool, device=ids.device).tril()  # [t, s]: s <= t
    scores = (C @ B.transpose(-1, -2)).masked_fill(~causal, 0.0)  # (..., L, L)
    y = scores @ c  # (..., L, 2D)
    return (y @ w["out_proj"]) @ w["embedding"].T
