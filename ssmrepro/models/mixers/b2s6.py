"""Library (models): B2S6, the block-biased selective SSM of yu2025 (eqs 7-8).

notes/paper-settings.md §4.1: d = h·p channels in h blocks ʲu ∈ R^p; for block j, channel i:

    ʲB_k^{(i)} = ʲB_weight ʲu_k + ʲB_bias^{(i)},   ʲC_k = ʲu_kᵀ ʲC,
    ʲΔ_k^{(i)} = softplus(ʲwᵀ ʲu_k + ʲb^{(i)}),    Ā = exp(ʲΔ_k^{(i)} A)
    ʲh_k^{(i)} = Ā ʲh_{k-1}^{(i)} + B̄ ʲu_k^{(i)},    ʲy_k^{(i)} = Re(ʲC_k ʲh_k^{(i)})

A ∈ C^N diagonal shared by all blocks and channels (N = d_state); B_weight, B_bias complex (option
real). [INFERRED] y = Re(·), not 2·Re (the paper: "we usually take its real part"); C real as listed
(ʲC ∈ R^{p×n}); Euler input discretisation B̄ = Δ B (as Mamba's kernel, which the paper says it
follows; ``discretization="zoh"`` gives B̄ = (ΔA)^{-1}(exp(ΔA) - I)ΔB); initialisations (paper:
unknown): A S4D-lin (complex) / S4D-real (real), B_weight, ʲC, ʲw ~ U(±p^-1/2) (as nn.Linear),
B_bias = 1 + 0i (S4D's B), softplus(b) log-uniform in [dt_min, dt_max]; no D skip by default.

Shape legend: E pack, B batch, L length, d channels, N state size, h blocks, p = d / h.
Fast paths: ``impl="fused"`` (default): ``kernels.b2s6_scan`` (one autograd Function, tiled over
batch rows, time-blocked, states recomputed in the backward pass, no (B, L, E·d, N) tensor);
``impl="direct"``: one diagonal scan (``kernels.scan.diag_scan``) over full-size (B, L, E·d, N)
log-decays and inputs Δ u (ʲB_weight ʲu_k + B_bias^{(i)}); ``impl="split"`` (Euler only): by
linearity in B, one grouped ``selective_scan`` with G = E·h groups for ʲB_weight ʲu_k plus one with
the constant per-channel B_bias — the form mamba-ssm's CUDA kernel takes. On the 2-core CPU
(float32, E=2, B=4, L=256, d=64, h=8, N=16, fwd+bwd) direct took ~0.21 s and split ~0.43 s.
``forward_ref``: eqs 7-8 with plain loops over members, blocks, channels and steps.
Learning-rate groups: ʲw and ʲb are tagged "delta" (yu2025 lowers their lr on LRA), A "A".
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from ...kernels.b2s6_scan import b2s6_scan
from ...kernels.backend import note_kernel
from ...kernels.backend import selective_scan as scan_dispatch
from ...kernels.scan import diag_scan
from ..base import refuse_reversed_range
from ..layers import PackedModule, _uniform_, fold, lr_group, no_weight_decay, unfold
from .base import MixerConfig, register
from .common import (
    DT_INIT_FLOOR,
    DT_RANGE,
    A_params,
    cplx,
    dt_bias_init,
    full_scan_eval_floats,
    init_A_,
    make_A,
    refuse_dt_below_floor,
    scan_backward_floats,
    scan_kept_floats,
)


class B2S6Config(MixerConfig):
    """B2S6 (yu2025 eqs 7-8): h blocks with block-wise selective B, C, Δ, channel-specific B bias
    and a shared complex diagonal A."""

    name: Literal["b2s6"] = "b2s6"
    d_state: int = Field(16, ge=1, le=256, description="state size n")
    heads: int = Field(8, ge=1, description="number of blocks h (d must be divisible by h)")
    complex_A: bool = Field(True, description="complex diagonal A (false: real)")
    complex_B: bool = Field(True, description="complex B_weight and B_bias")
    bias: bool = Field(True, description="channel-specific B_bias")
    skip: bool = Field(False, description="D ⊙ u skip term (not in the paper's equations)")
    A_init: Literal["s4d_real", "s4d_lin"] | None = Field(
        None, description="default: s4d_lin for complex A, s4d_real for real A")
    dt_min: float = Field(1e-3, gt=0, description=DT_RANGE)
    dt_max: float = Field(1e-1, gt=0, description=DT_RANGE)
    discretization: Literal["euler", "zoh"] = Field("euler", description="input term Δ·B or ZOH B̄")
    impl: Literal["fused", "split", "direct"] | None = Field(
        None, description="fused (default): the fused B2S6 scan kernel; direct: one full-size "
        "diagonal scan; split: grouped scan + bias scan (euler only; the mamba-ssm kernel form)")

    @model_validator(mode="after")
    def _check(self) -> B2S6Config:
        if self.impl == "split" and self.discretization == "zoh":
            raise ValueError("impl 'split' needs discretization 'euler'")
        refuse_reversed_range(self)
        refuse_dt_below_floor(self)
        return self

    def activation_floats(self, d_model: int, L: int) -> int:
        """u, Δ, y: 3d; B, C per block; fused (default): the states entering each time block
        (T >= 2): c·d·N per 2 steps; direct: the full-size log-decays, B and states, 3·c·d·N per
        step; split: two full-state scans (the grouped B and the bias B), each keeping its
        log-decays and states (``common.scan_kept_floats``), 4·c·d·N per step (3·c·d·N were
        counted: a step at d 32, N 16, h 4, T 128 peaked at 2.2x the estimate)."""
        c = 2 if self.complex_A or self.complex_B else 1
        N = self.d_state
        own = L * (3 * d_model + 3 * self.heads * N * c)
        if self.impl in (None, "fused"):
            return own + c * d_model * N * (L // 2 + 1)
        if self.impl == "split":
            return own + 2 * scan_kept_floats(d_model, N, L, c)
        return own + L * 3 * c * d_model * N

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd: u, Δ, y 3d and the per-head B (selected, bias) and C 3·h·N·c per
        position (the training estimate's ``own``); fused: the states entering each time block
        ((nb, B, h, d/h, N), c·d·N per block of ``kernels.b2s6_scan.b2s6_plan``'s T steps) and
        the kernel's work buffers (hbuf c·(T + 1)·S, abuf c·T·S, scratch and wr 4·T·S, cbuf c·T·S
        with zoh; S = rows·groups·(d/h)·N a tile's state); direct: four full-size (B, L, d, N)
        tensors at once (log-decays, inputs, their product and the states); split: two
        full-state scans one after the other, each holding three."""
        c = 2 if self.complex_A or self.complex_B else 1
        N, G = self.d_state, self.heads
        own = batch * L * (3 * d_model + 3 * G * N * c)
        if self.impl == "direct":
            return own + batch * full_scan_eval_floats(d_model, N, L, c, copies=4)
        if self.impl == "split":
            return own + batch * (L * c * d_model * N + full_scan_eval_floats(d_model, N, L, c))
        p, S, _ = self._plan(d_model, L, batch)
        buffers = (c * (p.T + 1) * S + c * p.T * S + 4 * p.T * S
                   + (c * p.T * S if self.discretization == "zoh" else 0))
        return own + batch * c * d_model * N * (-(-L // p.T) + 1) + buffers

    def work_floats(self, d_model: int, L: int, batch: int) -> int:
        """fused: the kernel's backward's block buffers (``kernels.b2s6_scan``: hbuf
        c·(T + 1)·S, abuf, fbuf, gbuf and wbuf 4·c·T·S, carry c·S, scratch 3·T·S, and cbuf and
        zbuf 2·c·T·S with zoh; S and T of ``b2s6_plan``); direct and split: none beyond their
        full-size states."""
        if self.impl not in (None, "fused"):
            return 0
        p, S, c = self._plan(d_model, L, batch)
        return (c * (p.T + 1) * S + 4 * c * p.T * S + c * S + 3 * p.T * S
                + (2 * c * p.T * S if self.discretization == "zoh" else 0))

    def _plan(self, d_model: int, L: int, batch: int):
        """(``b2s6_plan`` of the fused kernel for ``batch`` rows of one member, a tile's state S
        in elements, c floats an element)."""
        from ...kernels.b2s6_scan import b2s6_plan

        c = 2 if self.complex_A or self.complex_B else 1
        G = self.heads
        p = b2s6_plan(batch, G, d_model // G, self.d_state, c == 2, L)
        return p, p.rows * p.groups * (d_model // G) * self.d_state, c

    def backward_floats(self, d_model: int, L: int) -> int:
        """direct and split: the full-size gradients a diagonal scan's backward builds
        (``common.scan_backward_floats``; none were counted: a direct step at d 32, N 16, h 4,
        T 128 peaked at 1.8x (complex) and 1.7x (real) the estimate); the fused scan recomputes
        its states in time blocks and builds none at full size."""
        if self.impl in (None, "fused"):
            return 0
        c = 2 if self.complex_A or self.complex_B else 1
        return scan_backward_floats(d_model, self.d_state, L, c)


@register(B2S6Config)
class B2S6Core(PackedModule):
    """Block-biased selective SSM on d = h·p channels (yu2025 eqs 7-8)."""

    def __init__(self, E: int, d_model: int, cfg: B2S6Config):
        super().__init__(E)
        d, N, heads = d_model, cfg.d_state, cfg.heads
        if d % heads:
            raise ValueError(f"B2S6: d={d} is not divisible by heads={heads}")
        A_init = cfg.A_init or ("s4d_lin" if cfg.complex_A else "s4d_real")
        self.d, self.N, self.h, self.p = d, N, heads, d // heads
        self.complex_A, self.complex_B, self.A_init = cfg.complex_A, cfg.complex_B, A_init
        self.dt_min, self.dt_max, self.dt_init_floor = cfg.dt_min, cfg.dt_max, DT_INIT_FLOOR
        self.discretization, self.impl = cfg.discretization, cfg.impl or "fused"
        self.nB = 2 * N if cfg.complex_B else N
        h, p = heads, self.p
        self.B_weight = nn.Parameter(torch.empty(E, h, p, self.nB))  # ʲB_weight (transposed), [re | im]
        self.B_bias = nn.Parameter(torch.empty(E, d, self.nB)) if cfg.bias else None  # ʲB_bias^{(i)}
        self.C_weight = nn.Parameter(torch.empty(E, h, p, N))  # ʲC
        self.w = lr_group(nn.Parameter(torch.empty(E, h, p)), "delta")  # ʲw
        self.b = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d))), "delta")  # ʲb^{(i)}
        self.A_log, self.A_im = A_params(E, (N,), cfg.complex_A)  # shared by all blocks and channels
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if cfg.skip else None

    def init_weights(self) -> list[tuple[str, int]]:
        """Weight matrices for models.init's gamma scheme: every block map reads p channels."""
        return [("B_weight", self.p), ("C_weight", self.p), ("w", self.p)]

    def init_biases(self) -> list[str]:
        return []  # B_bias is B2S6's mechanism (1 + 0i), not a bias to zero; b is the Δ range

    def reset_member(self, e: int, g: torch.Generator) -> None:
        bound = self.p**-0.5
        _uniform_(self.B_weight[e], bound, g)
        _uniform_(self.C_weight[e], bound, g)
        _uniform_(self.w[e], bound, g)
        bb = dt_bias_init(self.d, self.dt_min, self.dt_max, self.dt_init_floor, g)
        with torch.no_grad():
            self.b[e].copy_(bb)
            if self.B_bias is not None:
                self.B_bias[e].zero_()
                self.B_bias[e, :, : self.N].fill_(1.0)  # 1 + 0i
            if self.D is not None:
                self.D[e].fill_(1.0)
        init_A_(self.A_log[e], None if self.A_im is None else self.A_im[e], self.A_init)

    def _maybe_cplx(self, X: torch.Tensor) -> torch.Tensor:
        return cplx(X, self.N) if self.complex_B else X

    def params(self, x: torch.Tensor):
        """x (E,B,L,d) -> Δ (E,B,L,d), A (E,N), B_sel, C (E,B,L,h,N), B_bias (E,d,N) or None."""
        E, Bsz, L, d = x.shape
        ub = x.reshape(E, Bsz, L, self.h, self.p)  # ʲu_k
        Bsel = self._maybe_cplx(torch.einsum("eblhp,ehpk->eblhk", ub, self.B_weight))  # ʲB_weight ʲu_k
        Ct = torch.einsum("eblhp,ehpn->eblhn", ub, self.C_weight)  # ʲu_kᵀ ʲC
        dpre = torch.einsum("eblhp,ehp->eblh", ub, self.w)  # ʲwᵀ ʲu_k
        delta = F.softplus(dpre[..., None] + self.b.view(E, 1, 1, self.h, self.p))  # (E,B,L,h,p)
        Bb = None if self.B_bias is None else self._maybe_cplx(self.B_bias)
        return delta.reshape(E, Bsz, L, d), make_A(self.A_log, self.A_im), Bsel, Ct, Bb

    def forward(self, x: torch.Tensor, ref: bool = False) -> torch.Tensor:  # (E,B,L,d) -> (E,B,L,d)
        E, Bsz, L, d = x.shape
        delta, A, Bsel, Ct, Bb = self.params(x)
        if ref:
            return self._ref(x, delta, A, Bsel, Ct, Bb)
        N, G = self.N, E * self.h
        u, dl = fold(x), fold(delta)  # (B, L, E*d), channel e*d + j*p + i
        Af = A[:, None, :].expand(E, d, N).reshape(E * d, N)
        Cg = Ct.permute(1, 2, 0, 3, 4).reshape(Bsz, L, G, N)  # group e*h + j
        Bg = Bsel.permute(1, 2, 0, 3, 4).reshape(Bsz, L, G, N)
        if self.impl == "fused":
            note_kernel(type(self).__name__, "torch:b2s6_scan")
            p = self.p
            y = b2s6_scan(u.view(Bsz, L, G, p), dl.view(Bsz, L, G, p),  # (B, L, G, p)
                          A[:, None, :].expand(E, self.h, N).reshape(G, N),  # (G, N)
                          Bg, None if Bb is None else Bb.reshape(G, p, N), Cg,
                          self.discretization).reshape(Bsz, L, E * d)
        elif self.impl == "split":
            # by linearity in B: grouped scan for ʲB_weight ʲu_k + constant per-channel scan for B_bias
            # (torch scans or selective_scan_fn, kernels.backend)
            who = type(self).__name__
            y = scan_dispatch(u, dl, Af, Bg, Cg, None, complex_output_scale=1.0, who=who)
            if Bb is not None:
                y = y + scan_dispatch(u, dl, Af, Bb.reshape(E * d, N), Cg, None,
                                      complex_output_scale=1.0, who=who)
        else:
            note_kernel(type(self).__name__, "torch:diag_scan")
            la = dl[..., None] * Af  # (B, L, E*d, N)
            Bfull = Bg.reshape(Bsz, L, G, 1, N).expand(Bsz, L, G, self.p, N).reshape(Bsz, L, E * d, N)
            if Bb is not None:
                Bfull = Bfull + Bb.reshape(E * d, N)
            coef = dl[..., None] if self.discretization == "euler" else torch.expm1(la) / Af
            hs = diag_scan(la, coef * u[..., None] * Bfull)  # (B, L, E*d, N)
            hs = hs.reshape(Bsz, L, G, self.p, N)
            y = (hs * Cg[:, :, :, None, :]).sum(-1).reshape(Bsz, L, E * d)
            y = y.real if y.is_complex() else y
        y = unfold(y, E)
        return y if self.D is None else y + self.D[:, None, None, :] * x

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x, ref=True)

    def _ref(self, x, delta, A, Bsel, Ct, Bb) -> torch.Tensor:
        """Eqs 7-8 per member, block j, channel i and step k (plain loops)."""
        E, Bsz, L, d = x.shape
        cols = []
        for e in range(E):
            for j in range(self.h):
                for i in range(self.p):
                    c = j * self.p + i
                    hk = torch.zeros(Bsz, self.N, dtype=torch.promote_types(A.dtype, Bsel.dtype))
                    outs = []
                    for k in range(L):
                        Bk = Bsel[e, :, k, j] + (0 if Bb is None else Bb[e, c])  # (B, N)
                        dk = delta[e, :, k, c, None]  # (B, 1)
                        Abar = torch.exp(dk * A[e])
                        Bbar = (dk * Bk if self.discretization == "euler"
                                else torch.expm1(dk * A[e]) / A[e] * Bk)
                        hk = Abar * hk + Bbar * x[e, :, k, c, None]
                        y = (Ct[e, :, k, j] * hk).sum(-1)
                        y = y.real if y.is_complex() else y
                        outs.append(y if self.D is None else y + self.D[e, c] * x[e, :, k, c])
                    cols.append(torch.stack(outs, 1))  # (B, L)
        return torch.stack(cols, -1).reshape(Bsz, L, E, d).permute(2, 0, 1, 3)
