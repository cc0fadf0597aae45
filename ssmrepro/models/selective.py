"""The selective-SSM family, packed over E members: Mamba-Δᵀ, complex ZOH S4D, B2S6, Mamba-1 block.

Shape legend: E pack members, B batch, L length, d channels, N state size per channel,
h blocks (B2S6), p = d / h channels per block, R rank of the Δ projection.

Every core here has a fast path (the E members folded into the channel / group / state axes of a
scan from ``ssmrepro.kernels``, no Python loop over E or L outside the kernels) and a slow
reference ``forward(x, ref=True)`` written straight from the equations (Python loops over members
and time steps), tested equal in float64 (tests/test_selective_family.py).

1. ``DeltaTCore`` — Mamba-Δᵀ, huang2025 eq. (15):
       h_t = exp(Λ ⊙ (1_d ⊗ Δ(x̂_t))) ⊙ h_{t-1} + x̂_t ⊗ B_t,   y_t = h_t C_t (+ D ⊙ x̂_t)
   Δ(x̂_t) ∈ R^N varies along the state dimension and there is no Δ on the input term.
   [INFERRED] Δ(x̂) = softplus(W_Δ x̂ + b_Δ) with W_Δ a full d×N matrix by default (the Lemma 3
   construction, App. C.2 eq. 102a, uses Linear(x̂) = w_Δ[I | 0] x̂ ∈ R^N, i.e. rank N), or
   low-rank W_Δ = W↓W↑ (rank R) as Mamba's; softplus(b_Δ) log-uniform in [dt_min, dt_max] as
   Mamba's dt-bias init; B_t, C_t = Linear(x̂_t) as in S6; the D skip as in S6.

2. ``S4DZOH`` — the LTI complex diagonal S4D of the LRA baselines (Gu et al. 2022; yu2025 eqs 1-2,
   notes/paper-settings.md §4.1), per channel c:
       Ā = exp(Δ_c A_c),  B̄ = (Δ_c A_c)^{-1}(exp(Δ_c A_c) - I) Δ_c B_c,   Δ_c = exp(log_Δ_c)
       h_t = Ā h_{t-1} + B̄ u_t,   y_t = 2·Re(C_c h_t) + D_c u_t
   A_c ∈ C^N with S4D-lin init -1/2 + iπn, log Δ log-uniform in [dt_min, dt_max], B = 1 (or
   learnable complex), C complex ~ CN(0, 1), D ~ N(0, 1) (S4D's standalone initialisation). The
   2·Re is the conjugate-pair convention (N complex modes stand for 2N real states). Fast path:
   the causal convolution with the kernel K_k = 2·Re(Σ_n C_n B̄_n Ā_n^k) by FFT (S4D's own
   algorithm), or ``impl="scan"``: ``scan.selective_scan`` with constant Δ.

3. ``B2S6Core`` — Block-Biased S6, yu2025 eqs 7-8 (notes/paper-settings.md §4.1): d = h·p channels
   in h blocks ʲu ∈ R^p; for block j, channel i:
       ʲB_k^{(i)} = ʲB_weight ʲu_k + ʲB_bias^{(i)},   ʲC_k = ʲu_kᵀ ʲC,
       ʲΔ_k^{(i)} = softplus(ʲwᵀ ʲu_k + ʲb^{(i)}),    Ā = exp(ʲΔ_k^{(i)} A)
       ʲh_k^{(i)} = Ā ʲh_{k-1}^{(i)} + B̄ ʲu_k^{(i)},    ʲy_k^{(i)} = Re(ʲC_k ʲh_k^{(i)})
   A ∈ C^N diagonal shared by all blocks and channels; B_weight, B_bias complex (option real).
   [INFERRED] y = Re(·), not 2·Re (the paper: "we usually take its real part"); C real as listed
   (ʲC ∈ R^{p×n}); Euler input discretisation B̄ = Δ B (as Mamba's kernel, which the paper says it
   follows; ``discretization="zoh"`` gives B̄ = (ΔA)^{-1}(exp(ΔA) - I)ΔB); initialisations (paper:
   unknown): A S4D-lin (complex) / S4D-real (real), B_weight, ʲC, ʲw ~ U(±p^-1/2) (as nn.Linear),
   B_bias = 1 + 0i (S4D's B), softplus(b) log-uniform in [dt_min, dt_max]; no D skip by default.
   Fast paths: ``impl="direct"`` (default): one diagonal scan (``scan.diag_scan``) with the
   per-channel input term Δ u (ʲB_weight ʲu_k + B_bias^{(i)}); ``impl="split"`` (Euler only): by
   linearity in B, one grouped ``selective_scan`` with G = E·h groups for ʲB_weight ʲu_k plus one
   with the constant per-channel B_bias — the form mamba-ssm's CUDA kernel takes. On the 2-core CPU
   (float32, E=2, B=4, L=256, d=64, h=8, N=16, fwd+bwd) direct took ~0.21 s and split ~0.43 s.

4. ``Mamba1xMixer`` — a configurable Mamba-1 block (Gu & Dao 2023; huang2025 Table 2 / eq. 14):
       [x̂, z] = x W_in;  x̂ ← σ(conv(x̂));  y = core(x̂);  y ← y ⊙ SiLU(z);  out = y W_out
   with the conv, σ = SiLU and the gate each optional, and core ∈ {s6, s4d, delta_t} (real or
   complex A, S4D-real or S4D-lin init; ``discretize=False`` = koren2026's simplified A = I mode).
   "Mamba-S4D" (huang2025 §5.1) = this block with core s4d. With default options it is exactly
   ``mamba.MambaMixer`` (same parameters in the same order, same outputs).

Learning-rate groups (``ssm.lr_group``): every Δ parameter is tagged "delta", every Λ parameter "A";
``TrainConfig.lr_scale`` scales them (yu2025 lowers the lr of ʲw and ʲb on LRA).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.backend import note_kernel
from ..kernels.backend import selective_scan as scan_dispatch
from ..kernels.scan import diag_scan
from .layers import PackedLinear, PackedModule, _normal_, _uniform_, no_weight_decay
from .mamba import PackedCausalConv
from .ssm import (
    A_INITS,
    S4DCore,
    S6Core,
    _fold,
    _unfold,
    dt_bias_init,
    init_A_,
    lr_group,
    make_A,
)


def _A_params(E: int, shape: tuple[int, ...], complex_A: bool):
    """(A_log, A_im or None) parameters, tagged "A" and without weight decay."""
    A_log = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, *shape))), "A")
    A_im = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, *shape))), "A") if complex_A else None
    return A_log, A_im


def _cplx(x: torch.Tensor, N: int) -> torch.Tensor:
    """[re | im] on the last dim (2N) -> complex (N)."""
    return torch.complex(*x.split(N, dim=-1))


# --------------------------------------------------------------------------------------------
# 1. Mamba-Δᵀ (huang2025 eq. 15)
# --------------------------------------------------------------------------------------------


class DeltaTCore(PackedModule):
    """Mamba-Δᵀ SSM core on d channels: Δ(x̂_t) ∈ R^N along the state dimension (huang2025 eq. 15).

    dt_rank None = a full d×N Δ projection (the Δ columns of x_proj); an int R = low rank W↓W↑.
    """

    def __init__(self, E: int, d: int, N: int, dt_rank: int | None = None, dt_min: float = 1e-3,
                 dt_max: float = 1e-1, dt_init_floor: float = 1e-4, skip: bool = True,
                 complex_A: bool = False, A_init: str = "s4d_real"):
        super().__init__(E)
        if A_init not in A_INITS:
            raise ValueError(f"unknown A_init {A_init!r}; known: {A_INITS}")
        self.full = dt_rank is None
        R = N if self.full else dt_rank
        self.d, self.N, self.R = d, N, R
        self.dt_min, self.dt_max, self.dt_init_floor = dt_min, dt_max, dt_init_floor
        self.complex_A, self.A_init = complex_A, A_init
        self.nBC = 2 * N if complex_A else N
        self.x_proj = PackedLinear(E, d, R + 2 * self.nBC, bias=False)  # x̂ -> (Δ pre / Δ↓, B, C)
        lr_group(self.x_proj.weight, "delta", (0, R))
        self.dt_weight = None if self.full else lr_group(nn.Parameter(torch.empty(E, R, N)), "delta")
        self.dt_bias = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, N))), "delta")
        self.A_log, self.A_im = _A_params(E, (d, N), complex_A)
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if skip else None

    def init_weights(self) -> list[tuple[str, int]]:
        """Weight matrices for models.init's gamma scheme: (name, fan-in)."""
        return [] if self.dt_weight is None else [("dt_weight", self.R)]

    def init_biases(self) -> list[str]:
        return []  # dt_bias keeps its Δ-range init

    def reset_member(self, e: int, g: torch.Generator) -> None:
        if self.dt_weight is not None:
            _uniform_(self.dt_weight[e], self.R**-0.5, g)
        b = dt_bias_init(self.N, self.dt_min, self.dt_max, self.dt_init_floor, g)
        with torch.no_grad():
            self.dt_bias[e].copy_(b)
            if self.D is not None:
                self.D[e].fill_(1.0)
        init_A_(self.A_log[e], None if self.A_im is None else self.A_im[e], self.A_init)

    def params(self, x: torch.Tensor):
        """x (E,B,L,d) -> Δ (E,B,L,N), Λ (E,d,N), B, C (E,B,L,N) (complex with complex_A)."""
        dt, Bt, Ct = self.x_proj(x).split([self.R, self.nBC, self.nBC], dim=-1)
        if self.complex_A:
            Bt, Ct = _cplx(Bt, self.N), _cplx(Ct, self.N)
        if self.dt_weight is not None:
            E, Bsz, L, _ = dt.shape
            dt = torch.bmm(dt.reshape(E, -1, self.R), self.dt_weight).reshape(E, Bsz, L, self.N)
        delta = F.softplus(dt + self.dt_bias[:, None, None, :])  # (E, B, L, N)
        return delta, make_A(self.A_log, self.A_im), Bt, Ct

    def forward(self, x: torch.Tensor, ref: bool = False) -> torch.Tensor:  # (E,B,L,d) -> (E,B,L,d)
        delta, A, Bt, Ct = self.params(x)
        if ref:
            return self._ref(x, delta, A, Bt, Ct)
        # 1. log-decay Λ[d, n] Δ_t[n] and input x̂_t[d] B_t[n]; members on a state axis: (B, L, E, d, N)
        la = delta.permute(1, 2, 0, 3)[:, :, :, None, :] * A[None, None]
        b = x.permute(1, 2, 0, 3)[..., None] * Bt.permute(1, 2, 0, 3)[:, :, :, None, :]
        # 2. the diagonal scan over L
        note_kernel(type(self).__name__, "torch:diag_scan")
        h = diag_scan(la, b)  # (B, L, E, d, N)
        # 3. read-out y_t[d] = Σ_n C_t[n] h_t[d, n]
        y = (h * Ct.permute(1, 2, 0, 3)[:, :, :, None, :]).sum(-1)  # (B, L, E, d)
        if y.is_complex():
            y = 2.0 * y.real
        y = y.permute(2, 0, 1, 3)  # (E, B, L, d)
        return y if self.D is None else y + self.D[:, None, None, :] * x

    def _ref(self, x, delta, A, Bt, Ct) -> torch.Tensor:
        """Eq. (15) step by step, one member at a time."""
        E, Bsz, L, d = x.shape
        out = []
        for e in range(E):
            h = torch.zeros(Bsz, d, self.N, dtype=torch.promote_types(A.dtype, Bt.dtype))
            ys = []
            for t in range(L):
                h = torch.exp(A[e] * delta[e, :, t, None, :]) * h + x[e, :, t, :, None] * Bt[e, :, t, None, :]
                y = (h * Ct[e, :, t, None, :]).sum(-1)  # (B, d)
                y = 2.0 * y.real if y.is_complex() else y
                ys.append(y if self.D is None else y + self.D[e] * x[e, :, t])
            out.append(torch.stack(ys, 1))
        return torch.stack(out)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """exp(Λ ⊙ (1_d ⊗ Δ_t)): (E, B, L, d, N)."""
        delta, A, _, _ = self.params(x)
        return torch.exp(A[:, None, None] * delta[:, :, :, None, :])


# --------------------------------------------------------------------------------------------
# 2. complex ZOH S4D (LTI), the LRA baseline
# --------------------------------------------------------------------------------------------


class S4DZOH(PackedModule):
    """LTI diagonal complex SSM with ZOH and a learnable step per channel (S4D; yu2025 eqs 1-2).

    N = number of complex modes per channel (S4D's d_state = 2N real states).
    """

    def __init__(self, E: int, d: int, N: int, dt_min: float = 1e-3, dt_max: float = 1e-1,
                 learn_B: bool = False, skip: bool = True, A_init: str = "s4d_lin",
                 impl: str = "fft"):
        super().__init__(E)
        if A_init not in A_INITS:
            raise ValueError(f"unknown A_init {A_init!r}; known: {A_INITS}")
        if impl not in ("fft", "scan"):
            raise ValueError(f"impl must be 'fft' or 'scan', got {impl!r}")
        self.d, self.N, self.dt_min, self.dt_max = d, N, dt_min, dt_max
        self.A_init, self.impl = A_init, impl
        self.log_dt = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d))), "delta")
        self.A_log, self.A_im = _A_params(E, (d, N), True)
        self.C = nn.Parameter(torch.empty(E, d, 2 * N))  # [re | im]
        self.B = nn.Parameter(torch.empty(E, d, 2 * N)) if learn_B else None
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if skip else None

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
        """Δ (E,d), A, B̄/Δ, C (E,d,N) complex: Ā = exp(ΔA), B̄ = (exp(ΔA) - 1)/A · B."""
        dt = torch.exp(self.log_dt)  # (E, d)
        A = make_A(self.A_log, self.A_im)  # (E, d, N)
        B = _cplx(self.B, self.N) if self.B is not None else torch.ones_like(A)
        dtA = dt[..., None] * A
        B_over_dt = (torch.exp(dtA) - 1) / dtA * B  # B̄ / Δ: (ΔA)^{-1}(exp(ΔA) - I) B
        return dt, A, B_over_dt, _cplx(self.C, self.N)

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
            u = _fold(x)  # (B, L, E*d)
            y = scan_dispatch(
                u, dt.reshape(1, 1, E * d).expand(Bsz, L, E * d), A.reshape(E * d, self.N),
                B_over_dt.reshape(E * d, self.N), C.reshape(E * d, self.N),
                None if self.D is None else self.D.reshape(-1), complex_output_scale=2.0,
                who=type(self).__name__,
            )
            return _unfold(y, E)
        note_kernel(type(self).__name__, "torch:fft")
        # causal convolution y = K * u by FFT (zero-padded to 2L: no wrap-around)
        K = self.kernel(L)  # (E, d, L)
        n = 2 * L
        uf = torch.fft.rfft(x.permute(0, 1, 3, 2), n=n)  # (E, B, d, n/2+1)
        kf = torch.fft.rfft(K, n=n)[:, None]  # (E, 1, d, n/2+1)
        y = torch.fft.irfft(uf * kf, n=n)[..., :L].permute(0, 1, 3, 2)  # (E, B, L, d)
        return y if self.D is None else y + self.D[:, None, None, :] * x

    def _ref(self, x: torch.Tensor) -> torch.Tensor:
        """h_t = Ā h_{t-1} + B̄ u_t, y_t = 2·Re(C h_t) + D u_t, step by step, one member at a time."""
        E, Bsz, L, d = x.shape
        dt = torch.exp(self.log_dt)
        A = make_A(self.A_log, self.A_im)
        B = _cplx(self.B, self.N) if self.B is not None else torch.ones_like(A)
        C = _cplx(self.C, self.N)
        out = []
        for e in range(E):
            dA = dt[e, :, None] * A[e]  # (d, N)
            Abar = torch.exp(dA)
            rhs = ((Abar - 1) * dt[e, :, None] * B[e])[..., None]  # (e^{ΔA} - I) ΔB: (d, N, 1)
            Bbar = torch.linalg.solve(torch.diag_embed(dA), rhs)[..., 0]  # (ΔA)^{-1} (...)
            h = torch.zeros(Bsz, d, self.N, dtype=A.dtype)
            ys = []
            for t in range(L):
                h = Abar * h + Bbar * x[e, :, t, :, None]
                y = 2.0 * (h * C[e]).sum(-1).real
                ys.append(y if self.D is None else y + self.D[e] * x[e, :, t])
            out.append(torch.stack(ys, 1))
        return torch.stack(out)


# --------------------------------------------------------------------------------------------
# 3. B2S6 (yu2025 eqs 7-8)
# --------------------------------------------------------------------------------------------


class B2S6Core(PackedModule):
    """Block-biased selective SSM on d = h·p channels (yu2025 eqs 7-8)."""

    def __init__(self, E: int, d: int, N: int, heads: int, complex_A: bool = True,
                 complex_B: bool = True, bias: bool = True, skip: bool = False,
                 A_init: str | None = None, dt_min: float = 1e-3, dt_max: float = 1e-1,
                 dt_init_floor: float = 1e-4, discretization: str = "euler", impl: str | None = None):
        super().__init__(E)
        if d % heads:
            raise ValueError(f"B2S6: d={d} is not divisible by heads={heads}")
        A_init = A_init or ("s4d_lin" if complex_A else "s4d_real")
        if A_init not in A_INITS:
            raise ValueError(f"unknown A_init {A_init!r}; known: {A_INITS}")
        if discretization not in ("euler", "zoh"):
            raise ValueError(f"discretization must be 'euler' or 'zoh', got {discretization!r}")
        impl = impl or "direct"
        if impl not in ("split", "direct") or (impl == "split" and discretization == "zoh"):
            raise ValueError(f"impl {impl!r} does not fit discretization {discretization!r}")
        self.d, self.N, self.h, self.p = d, N, heads, d // heads
        self.complex_A, self.complex_B, self.A_init = complex_A, complex_B, A_init
        self.dt_min, self.dt_max, self.dt_init_floor = dt_min, dt_max, dt_init_floor
        self.discretization, self.impl = discretization, impl
        self.nB = 2 * N if complex_B else N
        h, p = heads, self.p
        self.B_weight = nn.Parameter(torch.empty(E, h, p, self.nB))  # ʲB_weight (transposed), [re | im]
        self.B_bias = nn.Parameter(torch.empty(E, d, self.nB)) if bias else None  # ʲB_bias^{(i)}
        self.C_weight = nn.Parameter(torch.empty(E, h, p, N))  # ʲC
        self.w = lr_group(nn.Parameter(torch.empty(E, h, p)), "delta")  # ʲw
        self.b = lr_group(no_weight_decay(nn.Parameter(torch.empty(E, d))), "delta")  # ʲb^{(i)}
        self.A_log, self.A_im = _A_params(E, (N,), complex_A)  # shared by all blocks and channels
        self.D = no_weight_decay(nn.Parameter(torch.empty(E, d))) if skip else None

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
        return _cplx(X, self.N) if self.complex_B else X

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
        u, dl = _fold(x), _fold(delta)  # (B, L, E*d), channel e*d + j*p + i
        Af = A[:, None, :].expand(E, d, N).reshape(E * d, N)
        Cg = Ct.permute(1, 2, 0, 3, 4).reshape(Bsz, L, G, N)  # group e*h + j
        Bg = Bsel.permute(1, 2, 0, 3, 4).reshape(Bsz, L, G, N)
        if self.impl == "split":
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
            coef = dl[..., None] if self.discretization == "euler" else (torch.exp(la) - 1) / Af
            hs = diag_scan(la, coef * u[..., None] * Bfull)  # (B, L, E*d, N)
            hs = hs.reshape(Bsz, L, G, self.p, N)
            y = (hs * Cg[:, :, :, None, :]).sum(-1).reshape(Bsz, L, E * d)
            y = y.real if y.is_complex() else y
        y = _unfold(y, E)
        return y if self.D is None else y + self.D[:, None, None, :] * x

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
                        Bbar = dk * Bk if self.discretization == "euler" else (Abar - 1) / A[e] * Bk
                        hk = Abar * hk + Bbar * x[e, :, k, c, None]
                        y = (Ct[e, :, k, j] * hk).sum(-1)
                        y = y.real if y.is_complex() else y
                        outs.append(y if self.D is None else y + self.D[e, c] * x[e, :, k, c])
                    cols.append(torch.stack(outs, 1))  # (B, L)
        return torch.stack(cols, -1).reshape(Bsz, L, E, d).permute(2, 0, 1, 3)


# --------------------------------------------------------------------------------------------
# 4. the configurable Mamba-1 block
# --------------------------------------------------------------------------------------------


class Mamba1xMixer(nn.Module):
    """in_proj -> [causal depthwise conv] -> [SiLU] -> core -> [⊙ SiLU(z)] -> out_proj (packed).

    core: "s6" (S6Core), "s4d" (S4DCore; the block is then huang2025's Mamba-S4D), "delta_t"
    (DeltaTCore) or "b2s6" (B2S6Core with ``blocks`` blocks; yu2025 App. G). dt_rank: int, or
    None = ceil(d / 16) for s6 (mamba-ssm's default, d = the block's
    input width) and a full d_inner×N Δ projection for delta_t.
    """

    def __init__(self, E: int, d: int, N: int, d_conv: int = 4, expand: int = 2,
                 conv_bias: bool = True, bias: bool = False, conv: bool = True,
                 conv_act: bool = True, gate: bool = True, core: str = "s6",
                 complex_A: bool = False, A_init: str = "s4d_real", discretize: bool = True,
                 dt_rank: int | None = None, dt_min: float = 1e-3, dt_max: float = 1e-1,
                 skip: bool = True, blocks: int = 8):
        super().__init__()
        self.d_inner, self.gate, self.conv_act = expand * d, gate, conv_act
        Di = self.d_inner
        self.in_proj = PackedLinear(E, d, (2 if gate else 1) * Di, bias=bias)
        self.conv = PackedCausalConv(E, Di, d_conv, bias=conv_bias) if conv else None
        if core == "s6":
            self.ssm = S6Core(E, Di, N, dt_rank or math.ceil(d / 16), dt_min, dt_max, skip=skip,
                              complex_A=complex_A, A_init=A_init, discretize=discretize)
        elif core == "s4d":
            self.ssm = S4DCore(E, Di, N, skip=skip, complex_A=complex_A, A_init=A_init,
                               discretize=discretize)
        elif core == "delta_t":
            if not discretize:
                raise ValueError("delta_t without discretization is s6 with discretize=False")
            self.ssm = DeltaTCore(E, Di, N, dt_rank, dt_min, dt_max, skip=skip,
                                  complex_A=complex_A, A_init=A_init)
        elif core == "b2s6":  # yu2025 App. G: the Mamba block with B2S6 in place of S6
            self.ssm = B2S6Core(E, Di, N, blocks, complex_A=complex_A, complex_B=complex_A,
                                skip=skip, A_init=A_init, dt_min=dt_min, dt_max=dt_max)
        else:
            raise ValueError(f"unknown core {core!r}; known: s6, s4d, delta_t, b2s6")
        self.out_proj = PackedLinear(E, Di, d, bias=bias)

    def forward(self, x: torch.Tensor, ref: bool = False) -> torch.Tensor:  # (E, B, L, d)
        """ref=True runs the core's sequential reference."""
        xz = self.in_proj(x)  # (E, B, L, (1 or 2) d_inner)
        xs, z = xz.split(self.d_inner, dim=-1) if self.gate else (xz, None)
        if self.conv is not None:
            xs = self.conv(xs)
        if self.conv_act:
            xs = F.silu(xs)
        y = self.ssm(xs, ref=ref)  # (E, B, L, d_inner)
        if z is not None:
            y = y * F.silu(z)
        return self.out_proj(y)


__all__ = ["B2S6Core", "DeltaTCore", "Mamba1xMixer", "S4DZOH"]
