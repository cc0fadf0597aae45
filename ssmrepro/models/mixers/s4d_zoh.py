"""Library (models): the LTI complex diagonal S4D with ZOH of the LRA baselines (Gu et al. 2022).

yu2025 eqs 1-2, notes/paper-settings.md §4.1, per channel c:

    Ā = exp(Δ_c A_c),  B̄ = (Δ_c A_c)^{-1}(exp(Δ_c A_c) - I) Δ_c B_c,   Δ_c = exp(log_Δ_c)
    h_t = Ā h_{t-1} + B̄ u_t,   y_t = 2·Re(C_c h_t) + D_c u_t

A_c ∈ C^N with S4D-lin init -1/2 + iπn, log Δ log-uniform in [dt_min, dt_max], B = 1 (or learnable
complex), C complex ~ CN(0, 1), D ~ N(0, 1) (S4D's standalone initialisation). The 2·Re is the
conjugate-pair convention (N = d_state complex modes stand for 2N real states). Fast path: the
causal convolution with the kernel K_k = 2·Re(Σ_n C_n B̄_n Ā_n^k) by FFT (S4D's own algorithm), or
``impl="scan"``: ``kernels.backend.selective_scan`` with constant Δ. ``forward_ref``: the
recurrence step by step with B̄ from an explicit linear solve.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field, model_validator
from torch import nn

from ...kernels.backend import note_kernel
from ...kernels.backend import selective_scan as scan_dispatch
from ..base import refuse_reversed_range
from ..layers import PackedModule, _normal_, fold, lr_group, no_weight_decay, unfold
from .base import MixerConfig, register
from .common import (
    A_INIT_FIELD,
    A_params,
    cplx,
    full_scan_eval_floats,
    init_A_,
    make_A,
    refuse_dt_overflow,
    scan_backward_floats,
    scan_kept_floats,
    zoh_phi,
)


class S4DZOHConfig(MixerConfig):
    """LTI complex diagonal S4D with ZOH and learnable log Δ per channel (the LRA S4D baseline)."""

    name: Literal["s4d_zoh"] = "s4d_zoh"
    d_state: int = Field(32, ge=1, le=256,
                         description="complex modes per channel (S4D's own d_state = 2 × this)")
    dt_min: float = Field(1e-3, gt=0, description="log Δ init: log-uniform in [dt_min, dt_max]")
    dt_max: float = Field(1e-1, gt=0, description="log Δ init: log-uniform in [dt_min, dt_max]")
    learn_B: bool = Field(False, description="learnable complex B (else B = 1)")
    skip: bool = Field(True, description="D ⊙ u skip term")
    A_init: Literal["s4d_real", "s4d_lin"] = Field("s4d_lin", description=A_INIT_FIELD.description)
    impl: Literal["fft", "scan"] = Field("fft", description="FFT convolution or the selective scan")

    @model_validator(mode="after")
    def _check(self) -> S4DZOHConfig:
        refuse_reversed_range(self)
        refuse_dt_overflow(self)
        return self

    def activation_floats(self, d_model: int, L: int) -> int:
        """fft: u, y, the zero-padded spectra (complex, 2L): ~10d per position. scan: the chunked
        complex scan of a complex S4D (``s4d.S4DConfig`` with complex_A, the same kernel with
        constant B and C): x, y, 2d, and the states and log-decays it keeps, 2·c·d·N per step
        with c = 2, and its backward's ``backward_floats`` (its kept states alone were counted,
        no backward: d 32, N 16, T 128 estimated 0.36x what a training step allocated, and
        0.36x the complex S4D of the same shapes, which allocates the same)."""
        if self.impl == "scan":
            return L * 2 * d_model + scan_kept_floats(d_model, self.d_state, L, 2)
        return L * 10 * d_model

    def eval_floats(self, d_model: int, L: int, batch: int) -> int:
        """No autograd. fft: the spectrum of u zero-padded to 2L ((B, d, L + 1) complex, 2d per
        position), its product with the kernel's (2d), the inverse transform (B, d, 2L) 2d and y
        d: 7d per position. scan: as the complex S4D's (``s4d.S4DConfig.eval_floats``)."""
        if self.impl == "scan":
            return batch * (L * 4 * d_model + full_scan_eval_floats(d_model, self.d_state, L, 2))
        return batch * L * 7 * d_model

    def backward_floats(self, d_model: int, L: int) -> int:
        """scan: ``common.scan_backward_floats`` (c = 2); fft: none at full state size."""
        return scan_backward_floats(d_model, self.d_state, L, 2) if self.impl == "scan" else 0

    def fixed_floats(self, d_model: int, L: int) -> int:
        """fft: the Vandermonde kernel's exp(k·ΔA) (d, N, L) complex, kept by exp and by the
        contraction with C·B̄: 4·d·N·L floats per layer, independent of the batch (measured
        1.6 GB at batch 1 for yu2025-tab2's ListOps S4D, which the per-sample estimate put at
        0.2 GB); the scan builds no kernel."""
        return 0 if self.impl == "scan" else 4 * d_model * self.d_state * L


@register(S4DZOHConfig)
class S4DZOH(PackedModule):
    """LTI diagonal complex SSM with ZOH and a learnable step per channel (S4D; yu2025 eqs 1-2).

    N = number of complex modes per channel (S4D's d_state = 2N real states).
    """

    def __init__(self, E: int, d_model: int, cfg: S4DZOHConfig):
        super().__init__(E)
        d, N = d_model, cfg.d_state
        self.d, self.N, self.dt_min, self.dt_max = d, N, cfg.dt_min, cfg.dt_max
        self.A_init, self.impl = cfg.A_init, cfg.impl
        self.log_dt = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d))), "delta")
        self.A_log, self.A_im = A_params(E, (d, N), True)
        self.C = nn.Parameter(torch.empty(E, d, 2 * N))  # [re | im]
        self.B = nn.Parameter(torch.empty(E, d, 2 * N)) if cfg.learn_B else None
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if cfg.skip else None

    def init_weights(self) -> list[tuple[str, int]]:
        """Weight matrices for models.init's gamma scheme: C reads the N modes (fan-in N)."""
        return [("C", self.N)]

    def init_biases(self) -> list[str]:
        return []

    def reset_member(self, e: int, g: torch.Generator) -> None:
        u = torch.rand(self.d, generator=g, dtype=torch.float64)
        with torch.no_grad():
            self.log_dt[e].copy_(u * (math.log(self.dt_max) - math.log(self.dt_min)) + math.log(self.dt_min))
        init_A_(self.A_log[e], self.A_im[e], self.A_init)
        _normal_(self.C[e], math.sqrt(0.5), g)  # C ~ CN(0, 1): re, im ~ N(0, 1/2)
        if self.B is not None:
            with torch.no_grad():
                self.B[e].zero_()
                self.B[e, :, : self.N].fill_(1.0)
        if self.D is not None:
            _normal_(self.D[e], 1.0, g)

    def params(self):
        """Δ (E,d), A, B̄/Δ, C (E,d,N) complex: Ā = exp(ΔA), B̄ = expm1(ΔA)/A · B (``zoh_phi``)."""
        dt = torch.exp(self.log_dt)  # (E, d)
        A = make_A(self.A_log, self.A_im)  # (E, d, N)
        B = cplx(self.B, self.N) if self.B is not None else torch.ones_like(A)
        B_over_dt = zoh_phi(dt[..., None] * A) * B  # B̄ / Δ: (ΔA)^{-1}(exp(ΔA) - I) B
        return dt, A, B_over_dt, cplx(self.C, self.N)

    def kernel(self, L: int) -> torch.Tensor:
        """K_k = 2·Re Σ_n C_n B̄_n exp(k Δ A_n), k < L: (E, d, L) (S4D's Vandermonde kernel)."""
        dt, A, B_over_dt, C = self.params()
        dtA = dt[..., None] * A  # (E, d, N)
        k = torch.arange(L, device=A.device, dtype=dt.dtype)
        V = torch.exp(dtA[..., None] * k)  # (E, d, N, L)
        return 2.0 * torch.einsum("edn,ednl->edl", C * B_over_dt * dt[..., None], V).real

    def forward(self, x: torch.Tensor, ref: bool = False) -> torch.Tensor:  # (E,B,L,d) -> (E,B,L,d)
        E, Bsz, L, d = x.shape
        if ref:
            return self._ref(x)
        if self.impl == "scan":  # torch scan or selective_scan_fn (kernels.backend)
            dt, A, B_over_dt, C = self.params()
            u = fold(x)  # (B, L, E*d)
            y = scan_dispatch(
                u, dt.reshape(1, 1, E * d).expand(Bsz, L, E * d), A.reshape(E * d, self.N),
                B_over_dt.reshape(E * d, self.N), C.reshape(E * d, self.N),
                None if self.D is None else self.D.reshape(-1), complex_output_scale=2.0,
                who=type(self).__name__,
            )
            return unfold(y, E)
        note_kernel(type(self).__name__, "torch:fft")
        # causal convolution y = K * u by FFT (zero-padded to 2L: no wrap-around)
        K = self.kernel(L)  # (E, d, L)
        n = 2 * L
        uf = torch.fft.rfft(x.permute(0, 1, 3, 2), n=n)  # (E, B, d, n/2+1)
        kf = torch.fft.rfft(K, n=n)[:, None]  # (E, 1, d, n/2+1)
        y = torch.fft.irfft(uf * kf, n=n)[..., :L].permute(0, 1, 3, 2)  # (E, B, L, d)
        return y if self.D is None else y + self.D[:, None, None, :] * x

    def forward_ref(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x, ref=True)

    def _ref(self, x: torch.Tensor) -> torch.Tensor:
        """h_t = Ā h_{t-1} + B̄ u_t, y_t = 2·Re(C h_t) + D u_t, step by step, one member at a time."""
        E, Bsz, L, d = x.shape
        dt = torch.exp(self.log_dt)
        A = make_A(self.A_log, self.A_im)
        B = cplx(self.B, self.N) if self.B is not None else torch.ones_like(A)
        C = cplx(self.C, self.N)
        out = []
        for e in range(E):
            dA = dt[e, :, None] * A[e]  # (d, N)
            Abar = torch.exp(dA)
            rhs = (torch.expm1(dA) * dt[e, :, None] * B[e])[..., None]  # (e^{ΔA} - I) ΔB: (d, N, 1)
            Bbar = torch.linalg.solve(torch.diag_embed(dA), rhs)[..., 0]  # (ΔA)^{-1} (...)
            h = torch.zeros(Bsz, d, self.N, dtype=A.dtype)
            ys = []
            for t in range(L):
                h = Abar * h + Bbar * x[e, :, t, :, None]
                y = 2.0 * (h * C[e]).sum(-1).real
                ys.append(y if self.D is None else y + self.D[e] * x[e, :, t])
            out.append(torch.stack(ys, 1))
        return torch.stack(out)
