"""Library (theory): yu2025 Thm 3 — how the gradients of S6's Δ parameters scale with the input.

A one-channel (d = 1) S4D and S6 with the same random diagonal A (open left half-plane), B, C
(complex, n states) read the input u_1..u_L (i.i.d. N(0, c²)) and output the last step
y = Re(·) (eqs 1-4 of the paper, ZOH discretisation):

    S4D  y = Re Σ_k C exp(Δ A (L − k)) (ΔA)⁻¹(exp(ΔA) − 1) ΔB u_k,          Δ = exp(b)
    S6   y = Re Σ_k (C u_L) exp(A (S_L − S_k)) (Δ_k A)⁻¹(exp(Δ_k A) − 1) Δ_k (B u_k) u_k,
         Δ_k = softplus(w u_k + b),  S_k = Δ_1 + … + Δ_k.

With diagonal A the products of exp(Δ_j A) are exponentials of the cumulative sums S_k, so both
outputs are closed-form in u and their gradients are exact (autograd of the closed form). The
length scaling holds L·Δ fixed (Δ = κ/L: b = log(κ/L) for S4D, softplus(b) = κ/L for S6), the
paper's "fix the ratio L/exp(b(L))^{-1}".

:func:`gradient_ratios` averages |∂y/∂·| over ``trials`` independent draws (system and input)
and returns r_w = E|∂_w y_S6| / E|∂_b y_S4D| and r_b = E|∂_b y_S6| / E|∂_b y_S4D|. Thm 3 (as the
figure's reference slopes read): r_w ∝ c³ and r_b ∝ c² at fixed L, r_b ∝ √L at c = 1 [INFERRED:
the theorem's formulas are not decoded in our copy; the slopes 3, 2, 1/2 are the figure's].
"""

from __future__ import annotations

import math
import sys

import torch

# the smallest mean |gradient| trusted: below it the terms averaged are subnormal
TINY = sys.float_info.min / sys.float_info.epsilon  # ~1e-292


def _draw(gen: torch.Generator, trials: int, n: int) -> tuple[torch.Tensor, ...]:
    def cplx(*shape):
        return torch.complex(torch.randn(*shape, generator=gen, dtype=torch.float64),
                             torch.randn(*shape, generator=gen, dtype=torch.float64))
    re = -torch.rand(trials, n, generator=gen, dtype=torch.float64) - 0.1  # Re A in (-1.1, -0.1]
    im = math.pi * torch.randn(trials, n, generator=gen, dtype=torch.float64)
    A = torch.complex(re, im)
    B, C = cplx(trials, n) / math.sqrt(n), cplx(trials, n) / math.sqrt(n)
    w = torch.randn(trials, generator=gen, dtype=torch.float64)
    return A, B, C, w


def _phi(z: torch.Tensor) -> torch.Tensor:
    """(exp(z) − 1) / z, the ZOH input factor (z ≠ 0 here: Re A < 0, Δ > 0)."""
    return torch.expm1(z) / z


def s4d_out(u: torch.Tensor, A, B, C, b: torch.Tensor) -> torch.Tensor:
    """u (T, L), A/B/C (T, n), b (T,) -> y (T,)."""
    L = u.shape[1]
    dt = torch.exp(b)[:, None, None]  # (T, 1, 1)
    lag = torch.arange(L - 1, -1, -1, dtype=torch.float64)[None, :, None]  # L - k
    Az = A[:, None, :]
    k = torch.exp(dt * Az * lag) * _phi(dt * Az) * dt * B[:, None, :] * C[:, None, :]  # (T, L, n)
    return (k.sum(-1).real * u).sum(-1)


def s6_out(u: torch.Tensor, A, B, C, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """u (T, L), A/B/C (T, n), w/b (T,) -> y (T,)."""
    dt = torch.nn.functional.softplus(w[:, None] * u + b[:, None])  # (T, L)
    S = torch.cumsum(dt, 1)
    Az = A[:, None, :]
    decay = torch.exp(Az * (S[:, -1:, None] - S[:, :, None]))  # (T, L, n)
    inp = _phi(dt[..., None] * Az) * dt[..., None] * B[:, None, :] * (u * u)[..., None]
    x_L = (decay * inp).sum(1)  # (T, n)
    return ((C * x_L).sum(-1) * u[:, -1]).real


def gradient_ratios(c: float, L: int, n: int = 4, trials: int = 30, kappa: float = 1.0,
                    seed: int = 0) -> dict[str, float]:
    """E|∂_w y_S6| / E|∂_b y_S4D| and E|∂_b y_S6| / E|∂_b y_S4D| over ``trials`` draws."""
    gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + int(L))
    L, trials = int(L), int(trials)
    A, B, C, w = _draw(gen, trials, int(n))
    u = float(c) * torch.randn(trials, L, generator=gen, dtype=torch.float64)
    dt = float(kappa) / L
    b4 = torch.full((trials,), math.log(dt), dtype=torch.float64, requires_grad=True)
    b6 = torch.full((trials,), math.log(math.expm1(dt)), dtype=torch.float64, requires_grad=True)
    w6 = w.clone().requires_grad_(True)
    (g4,) = torch.autograd.grad(s4d_out(u, A, B, C, b4).sum(), [b4])
    gw, gb = torch.autograd.grad(s6_out(u, A, B, C, w6, b6).sum(), [w6, b6])
    base = g4.abs().mean().item()
    means = {"S4D's |db|": base, "S6's |dw|": gw.abs().mean().item(),
             "S6's |db|": gb.abs().mean().item()}
    # a mean |gradient| of random draws is positive; below TINY its terms are subnormal (a few
    # digits: c = 1e-80 gave ratio_w / c^3 = 1.37028 for 1.36968) or 0 (c = 1e-100: ratio_w
    # = 0.0, where c^3 scaling says ~1e-300); NaN at c = 1e3 (inf - inf). The claims FAILed
    # with "no positive ratio_w (diverged or zero)": the arithmetic's verdict, not Thm 3's.
    bad = [k for k, v in means.items() if not (math.isfinite(v) and v >= TINY)]
    if bad:
        raise ArithmeticError(f"mean {bad[0]} = {means[bad[0]]:g}: the gradients under- or "
                              "overflow float64 here (a positive mean above "
                              f"{TINY:.0e} is expected); use an input scale c or a kappa nearer 1")
    out = {"ratio_w": means["S6's |dw|"] / base, "ratio_b": means["S6's |db|"] / base,
           "s4d_grad_b": base}
    return out


__all__ = ["gradient_ratios", "s4d_out", "s6_out"]
