"""Library (models): parameter helpers shared by the SSM mixers (Λ / A and Δ initialisations).

Not a mixer. Λ = -exp(A_log) (+ i·A_im) with S4D-real (Λ_n = -(n+1)) or S4D-lin (Λ_n = -1/2 + iπn)
values (Gu et al. 2022); Δ's bias b_Δ with softplus(b_Δ) log-uniform in [dt_min, dt_max] (mamba-ssm's
dt init); Mamba-2's A_log = log U(A_min, A_max).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated

import torch
from pydantic import Field
from torch import nn

from ..layers import lr_group, no_weight_decay

A_INITS = ("s4d_real", "s4d_lin")
A_INIT_FIELD = Field("s4d_real", description="s4d_real: Λ_n = -(n+1); s4d_lin: Λ_n = -1/2 + iπn")
DT_INIT_FLOOR = 1e-4  # Δ init clamp (mamba-ssm's dt_init_floor)
# the meaning of dt_min / dt_max where they set the Δ bias (dt_bias_init)
DT_RANGE = "Δ init: softplus(Δ bias) log-uniform in [dt_min, dt_max] (mamba-ssm's)"
# an explicit rank of the Δ projection: 0 passed validation and failed the pack at its first
# step (ZeroDivisionError from the projection's init), a negative one likewise
DtRank = Annotated[int, Field(ge=1)]
# the largest Δ init: softplus⁻¹(Δ) ≈ Δ (and Δ itself, for s4d_zoh's exp(log Δ)) is held in a
# float32 parameter; beyond float32's largest number it is inf and the run diverged at step 0
DT_MAX_BOUND = float(torch.finfo(torch.float32).max)


_SCAN_ON_CPU: ContextVar[bool] = ContextVar("scan_on_cpu", default=False)
_PACK_MEMBERS: ContextVar[int] = ContextVar("pack_members", default=1)


@contextmanager
def scan_path(device: str, members: int = 1) -> Iterator[None]:
    """Memory estimates made inside count the fused selective scan's kept states for
    ``device`` (``block_states``); outside, for the shortest blocks of any device. ``members``:
    the estimates are one member's share of a pack of that many (the scan's work buffers are
    the pack's, one set per call: ``fused_scan_buffers``)."""
    token = _SCAN_ON_CPU.set(not str(device).startswith("cuda"))
    pack = _PACK_MEMBERS.set(max(1, members))
    try:
        yield
    finally:
        _PACK_MEMBERS.reset(pack)
        _SCAN_ON_CPU.reset(token)


def _pack_share(batch: int, d: int, N: int, L: int, floats) -> int:
    """One member's share (of the ``scan_path``'s members E) of the most that ``floats`` (of a
    ``kernels.inplace.scan_plan``) counts for the fused scan of any pack of 1..E members, whose d
    channels each are the scan's groups (one group a tile from 32 channels, so a tile is one
    member's; narrower groups share tiles, ``narrow_scan``). The most over the smaller packs:
    narrow tiles are balanced over the groups, so E + 1 members can take smaller tiles than E
    (S6 at d 4, N 1, batch 192: 86 members 6 MB less than 85), and a pack size's estimate that
    fell with the size stopped ``train.largest_pack``'s search short and sized packs whose
    leftover (fewer members, larger tiles) needed more than the full pack."""
    from ...kernels.inplace import scan_plans

    E = _PACK_MEMBERS.get()
    return -(-max(floats(p) for p in scan_plans(batch, E, d, N, L)) // E)


def block_states(d: int, N: int, L: int) -> int:
    """Floats per sample of the states a fused real selective scan of d channels with N states
    keeps for its backward over L steps: one entering each time block of at least
    ``kernels.inplace.min_time_block`` steps (the rest it recomputes)."""
    from ...kernels.inplace import min_time_block

    return d * N * (-(-L // min_time_block(N, d, _SCAN_ON_CPU.get())) + 1)


def fused_scan_buffers(batch: int, d: int, N: int, L: int, c_const: bool = False) -> int:
    """Floats of the work buffers of the fused real selective scan
    (``kernels.inplace._SelectiveScanFused.forward``, or ``narrow_scan``'s) over ``batch`` rows
    of d channels with N states, one member's share of them: the scan of a pack of E members
    (``scan_path``'s) allocates one set, which every tile reuses, so a member holds 1/E of it
    (each member's whole set was counted: a CPU pack of 16 S6 runs at d 32 estimated 2.6x its
    measured peak). A tile's state S = rows·N·groups·d (``scan_plan`` of E groups, rows <=
    batch) and time block T give hbuf (T + 1)·S, abuf T·S, wbuf T·S (constant C, or mul + sum
    instead of matmuls) and dbuf T·S / N. Bounded whatever the batch (2^19-element blocks on
    CPU). 0 on a GPU (``scan_path``): there a tile holds every member of the pack, whose buffers
    (2^27-element blocks, about 1 GB for the whole pack) are shared, not one member's each (a
    member's share shrinks with the pack; the GPU's pack budget is half its free memory), and
    mamba-ssm's kernel, where installed, has none."""
    if not _SCAN_ON_CPU.get():
        return 0

    def floats(p) -> int:
        S = p.rows * p.groups * d * N
        return (p.T + 1) * S + p.T * S * (2 if c_const or not p.matmul else 1) + p.T * S // N

    return _pack_share(batch, d, N, L, floats)


def fused_scan_work_floats(batch: int, d: int, N: int, L: int) -> int:
    """Floats of the work buffers of the fused real selective scan's backward
    (``kernels.inplace._SelectiveScanFused.backward``, the forward's plan): hbuf (T + 1)·S,
    abuf, gbuf and wbuf 3·T·S, cbuf S, dbuf and ebuf 2·T·S / N (``fused_scan_buffers``'s S and
    T; a mixer's ``work_floats``; one member's share of a pack's, as there). Not counted
    before: a training step of an S6 layer at d 32, N 16, T 128, batch 32 allocated 1.8x the
    estimate (4 block buffers of 2^19 floats). 0 on a GPU, as ``fused_scan_buffers``."""
    if not _SCAN_ON_CPU.get():
        return 0

    def floats(p) -> int:
        S = p.rows * p.groups * d * N
        return (p.T + 1) * S + 3 * p.T * S + S + 2 * (p.T * S // N)

    return _pack_share(batch, d, N, L, floats)


def fused_scan_eval_floats(batch: int, d: int, N: int, L: int, own: int,
                           c_const: bool = False) -> int:
    """What a layer with the fused real selective scan holds at its peak without autograd:
    ``own`` floats per position of the layer's (the scan's inputs, its contiguous copies of
    them and its output), the states entering each time block (``block_states``, (nb, B, N, d))
    and the scan's work buffers (``fused_scan_buffers``)."""
    return batch * (L * own + block_states(d, N, L)) + fused_scan_buffers(batch, d, N, L, c_const)


def full_scan_eval_floats(d: int, N: int, L: int, c: int, copies: int = 3) -> int:
    """Floats per sample of the full-size (B, L, d, N) tensors a chunked diagonal scan's forward
    holds at once (``kernels.scan.diag_scan`` and the products feeding it: the log-decays Δ·Λ,
    the input Δu ⊗ B and the states; c = 2 floats a complex number): ``copies``·c·d·N per step."""
    return copies * c * d * N * L


def scan_kept_floats(d: int, N: int, L: int, c: int) -> int:
    """Floats per sample a full-state diagonal scan (the chunked complex scan, Mamba-Δᵀ's core;
    c = 2 floats a complex number, else 1) keeps for its backward: its log-decays and states,
    2·c·d·N per step."""
    return 2 * c * d * N * L


def scan_backward_floats(d: int, N: int, L: int, c: int) -> int:
    """Floats per sample such a scan's backward builds at once beyond them (a mixer's
    ``backward_floats``): the states' incoming gradient, its adjoint copy, the log-decays'
    gradient and one product of the chain rule through Δ·Λ or the input, 4·c·d·N per step. Both
    were counted per layer as 5·c·d·N: a training step at d 32, N 16, T 128 (S4D, S6 and
    Mamba-Δᵀ, real or complex) allocated 1.12-1.19x the estimate for one layer and 0.67-0.69x
    for three (kept 2·c·d·N a layer, the backward's 4·c·d·N once)."""
    return 4 * c * d * N * L


def refuse_dt_overflow(cfg, key: str = "dt_max") -> None:
    """Raise ValueError when ``cfg.<key>`` is above ``DT_MAX_BOUND`` (``dt_min = dt_max = 1e300``
    passed validation and the run diverged at its first step: the Δ bias was inf in float32;
    Mamba-2's ``A_max`` likewise gave A = -exp(A_log) = -inf and NaN gradients at step 0)."""
    if getattr(cfg, key) > DT_MAX_BOUND:
        what = ("the initial Δ (its softplus⁻¹, the Δ bias)" if key == "dt_max"
                else "an initial A = -exp(A_log)")
        raise ValueError(f"{key} {getattr(cfg, key)!r} is above {DT_MAX_BOUND:.4g}, float32's "
                         f"largest number: {what} would be inf and the run diverge at its first "
                         f"step; use {key} <= {DT_MAX_BOUND:.4g}")


def refuse_dt_below_floor(cfg) -> None:
    """Raise ValueError when ``cfg.dt_max`` is below ``DT_INIT_FLOOR``: every initial Δ is then
    clamped to the floor, whatever dt_min and dt_max (two such ranges trained one model under two
    run ids). A range reaching above the floor is clamped below it only, as mamba-ssm's. A range
    above float32's largest number is refused too (``refuse_dt_overflow``)."""
    refuse_dt_overflow(cfg)
    if cfg.dt_max < DT_INIT_FLOOR:
        raise ValueError(f"dt_max {cfg.dt_max!r} is below the Δ init floor {DT_INIT_FLOOR} "
                         "(mamba-ssm's dt_init_floor): every initial Δ would be the floor "
                         f"whatever dt_min and dt_max; use dt_max >= {DT_INIT_FLOOR}")


def refuse_mamba2_ranges(cfg) -> None:
    """The A and Δ range checks of both Mamba-2 configs (mamba2, mamba2_3conv): reversed
    ranges, an ``A_max`` past float32 (A = -exp(A_log) = -inf), and a Δ range below the init
    floor (dt_bias = softplus⁻¹ of a Δ clamped there: every member Δ = 1e-4 whatever dt_min and
    dt_max, two such ranges one model under two run ids) or past float32."""
    from ..base import refuse_reversed_range

    refuse_reversed_range(cfg, "A_min", "A_max")
    refuse_dt_overflow(cfg, "A_max")
    refuse_reversed_range(cfg)
    refuse_dt_below_floor(cfg)


def init_A_(A_log: torch.Tensor, A_im: torch.Tensor | None, kind: str) -> None:
    """Fill one member's Λ = -exp(A_log) + i·A_im, both (..., N), with S4D-real or S4D-lin values."""
    N = A_log.shape[-1]
    n = torch.arange(N, dtype=torch.float64)
    with torch.no_grad():
        if kind == "s4d_real":  # Λ_n = -(n+1)
            A_log.copy_(torch.log(n + 1).expand(A_log.shape))
            if A_im is not None:
                A_im.zero_()
        elif kind == "s4d_lin":  # Λ_n = -1/2 + iπn
            A_log.fill_(math.log(0.5))
            if A_im is not None:
                A_im.copy_((math.pi * n).expand(A_im.shape))
        else:
            raise ValueError(f"unknown A_init {kind!r}; known: {A_INITS}")


def make_A(A_log: torch.Tensor, A_im: torch.Tensor | None) -> torch.Tensor:
    """Λ = -exp(A_log) (+ i·A_im): real or complex, same shape."""
    re = -torch.exp(A_log)
    return re if A_im is None else torch.complex(re, A_im)


def A_params(E: int, shape: tuple[int, ...], complex_A: bool):
    """(A_log, A_im or None) parameters, tagged "A" and without weight decay."""
    A_log = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, *shape))), "A")
    A_im = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, *shape))), "A") if complex_A else None
    return A_log, A_im


def dt_bias_init(n: int, dt_min: float, dt_max: float, floor: float, g: torch.Generator) -> torch.Tensor:
    """b_Δ with softplus(b_Δ) log-uniform in [dt_min, dt_max] (mamba-ssm's dt init), (n,) float64.

    softplus⁻¹ of dt ~ exp(U(log dt_min, log dt_max)) clamped at ``floor``.
    """
    u = torch.rand(n, generator=g, dtype=torch.float64)
    dt = torch.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
    dt = dt.clamp(min=floor)
    return dt + torch.log(-torch.expm1(-dt))  # inverse softplus


def A_log_uniform(n: int, A_min: float, A_max: float, g: torch.Generator) -> torch.Tensor:
    """log of A_init ~ U(A_min, A_max) (Mamba-2, chen2025 App. B), (n,) float64."""
    return torch.log(A_min + (A_max - A_min) * torch.rand(n, generator=g, dtype=torch.float64))


def zoh_phi(z: torch.Tensor) -> torch.Tensor:
    """(exp(z) - 1) / z, elementwise, real or complex, 1 at z = 0: the ZOH input coefficient
    B̄ = (ΔA)^{-1}(exp(ΔA) - I) ΔB = φ(ΔA) ΔB. By ``expm1``: ``exp(z) - 1`` loses all digits
    below |z| ~ 1e-7 in float32 (φ was 1.19 at z = 1e-7, ~4e-4 off at Δ = 1e-4, A = -1/2)."""
    zero = z == 0
    return torch.where(zero, torch.ones_like(z), torch.expm1(z) / torch.where(zero, torch.ones_like(z), z))


def cplx(x: torch.Tensor, N: int) -> torch.Tensor:
    """[re | im] on the last dim (2N) -> complex (N)."""
    return torch.complex(*x.split(N, dim=-1))
