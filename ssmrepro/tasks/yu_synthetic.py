"""Library (tasks): yu2025's synthetic regression tasks (B2S6 paper, Figs. 3, 4 and 6 of arXiv v1).

All three have one continuous input channel (x is (E, B, L, 1)) and a regression target read at
the LAST position only (y is (E, B, L, C), NaN elsewhere), the paper's model class
``G̃(u) = Nᵀσ(Γ(Mu)_L + θ)`` (eq. 5: the output of the last step).

* ``cosine_operator`` (Fig. 3, width): ``u(t) = Σ_{i=1}^{10} g_i cos(p_i t)`` with p_i the ten
  smallest primes, sampled at t_k = 2πk/L (k = 0..L-1); target g ∈ R^10, g_i ~ N(0, 1)
  [INFERRED: the paper gives neither the grid nor the law of g].
* ``first_abs`` (Fig. 4, inductive bias): u_1 ~ N(0, σ1²), u_2..u_L ~ N(0, σ2²); target |u_1|/σ1
  (so the root mean squared error IS the paper's relative error |G − G̃|/σ1, as an RMS)
  [INFERRED distribution: the paper names only σ1, σ2].
* ``linear_functional`` (Fig. 6, stability): u_j ~ N(0, 1); target Σ_j θ_j u_j with a fixed θ
  (θ_j ~ N(0, 1/L), drawn once from ``theta_seed``, the same for every run and split).

Example (``first_abs``, L 4, σ1 2, σ2 1; '.' = NaN target):

    x: -3.0  0.4 -1.1  0.2
    y:    .    .    .  1.5      (|−3.0| / 2)
"""

from __future__ import annotations

import math

import torch
from pydantic import Field, model_validator

from . import rng
from .base import Batch, Task, TaskConfig, TaskInfo

PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29)
# the stds first_abs draws u with, by the run's dtype: 1e8 inside its smallest normal number
# and its largest (u is a standard normal, at most ~9, times the std)
SIGMA_RANGE = {"float32": (1e-30, 1e30), "float64": (1e-300, 1e300)}


def _normal(k: torch.Tensor, n: int) -> torch.Tensor:
    """n standard normals per key (Box-Muller on two counter-based uniforms): (...,) -> (..., n)."""
    u = rng.uniform(k, 2 * n)
    u1, u2 = u[..., :n], u[..., n:]
    return torch.sqrt(-2.0 * torch.log1p(-u1)) * torch.cos(2.0 * math.pi * u2)


def _last_only(target: torch.Tensor, L: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(E, B, C) -> (E, B, L, C), NaN at every position but the last. Targets and inputs stay
    float64, as drawn: training casts both to the run's dtype (``train.batch_fields``), where a
    float32 copy here gave a float64 run targets 1e-8 off the inputs it saw (a loss floor)."""
    E, B, C = target.shape
    y = torch.full((E, B, L, C), math.nan, dtype=dtype)
    y[:, :, -1] = target.to(dtype)
    return y


class CosineOperatorConfig(TaskConfig):
    name: str = "cosine_operator"
    L: int = Field(64, ge=2, description="samples of u on [0, 2π)")
    n_terms: int = Field(10, ge=1, le=10, description="number of cosines (primes 2, 3, 5, ...)")

    @model_validator(mode="after")
    def _resolved(self) -> CosineOperatorConfig:
        # on the grid t_k = 2πk/L, cos(p t) and cos(q t) are the same samples when p ≡ ±q
        # (mod L): their coefficients g_p, g_q cannot be told apart from u, and the target g
        # could not be reached by any model (L 16 folds 11 onto 5, 13 and 19 onto 3)
        seen: dict[int, int] = {}
        for p in PRIMES[: self.n_terms]:
            r = min(p % self.L, -p % self.L)
            if r in seen:
                top = PRIMES[self.n_terms - 1]
                raise ValueError(f"L={self.L} samples cos({seen[r]}t) and cos({p}t) identically "
                                 f"(t = 2πk/L): their coefficients cannot be told apart from u, "
                                 f"so no model can reach the target; use L >= {2 * top + 1} "
                                 f"(2 x the largest prime {top} + 1) or fewer n_terms")
            seen[r] = p
        return self


class CosineOperator(Task):
    """yu2025's cosine operator regression: read the ten cosine coefficients of a signal."""

    Config = CosineOperatorConfig
    name = "cosine_operator"

    @property
    def info(self) -> TaskInfo:
        c = self.config
        return TaskInfo(vocab_size=1, n_classes=c.n_terms, seq_len=c.L, input_dim=1, loss="mse")

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        g = _normal(rng.key(seeds[:, None], split, index), c.n_terms)  # (E, B, n)
        t = 2.0 * math.pi * torch.arange(c.L, dtype=torch.float64) / c.L
        p = torch.tensor(PRIMES[: c.n_terms], dtype=torch.float64)
        basis = torch.cos(t[:, None] * p[None, :])  # (L, n)
        # u = g @ basis.T, summed term by term: a matmul's float64 rows differed in their last
        # bit with the batch a sample was drawn in, so inputs and targets were rounded to
        # float32, in float64 runs too. Elementwise, a sample is the same float64 numbers in
        # any batch; float32 runs round them as before (the committed fig3 inputs are those
        # of any float64 summation order: no sample lies within its error of a float32 boundary)
        u = torch.zeros(g.shape[:-1] + (c.L,), dtype=torch.float64)
        for i in range(c.n_terms):
            u = u + g[..., i, None] * basis[:, i]
        return Batch(x=u.unsqueeze(-1), y=_last_only(g, c.L))


class FirstAbsConfig(TaskConfig):
    name: str = "first_abs"
    L: int = Field(32, ge=2, description="sequence length: u_1..u_L, target |u_1| / sigma1 "
                   "read at the last position")
    sigma1: float = Field(1.0, gt=0, description="std of u_1")
    sigma2: float = Field(1.0, gt=0, description="std of u_2..u_L")

    @model_validator(mode="after")
    def _float64(self) -> FirstAbsConfig:
        problem = self.dtype_problem("float64")  # the widest inputs a run has
        if problem:
            raise ValueError(problem)
        return self

    def dtype_problem(self, dtype: str) -> str | None:
        """Why u cannot hold these stds in the run's dtype (its inputs are fed in it): in
        float32 1e39 read inf and 1e-50 read 0 (u_1, hence the target |z_1|, could not be read);
        float64 runs were held to float32's bounds."""
        low, high = SIGMA_RANGE[dtype]
        for key in ("sigma1", "sigma2"):
            if not low <= getattr(self, key) <= high:
                bounds = ", ".join(f"{b:.0e}".replace("e+", "e") for b in (low, high))
                return (f"{key}={getattr(self, key):g} is outside [{bounds}]: the inputs are "
                        f"{dtype}, where it makes them infinite or 0")
        return None


class FirstAbs(Task):
    """yu2025's first-token regression: output |u_1|/σ1 at the last position."""

    Config = FirstAbsConfig
    name = "first_abs"
    question = {"sigma1": "the target |u_1| / sigma1"}

    @property
    def info(self) -> TaskInfo:
        return TaskInfo(vocab_size=1, n_classes=1, seq_len=self.config.L, input_dim=1, loss="mse")

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        z = _normal(rng.key(seeds[:, None], split, index), c.L)  # (E, B, L)
        scale = torch.full((c.L,), c.sigma2, dtype=torch.float64)
        scale[0] = c.sigma1
        u = z * scale
        return Batch(x=u.unsqueeze(-1), y=_last_only(z[..., :1].abs(), c.L))


class LinearFunctionalConfig(TaskConfig):
    name: str = "linear_functional"
    L: int = Field(64, ge=1, description="sequence length: u_1..u_L, target Σ θ_j u_j read "
                   "at the last position")
    theta_seed: int = Field(0, ge=0, le=rng.MASK32, description="seed of the fixed θ (shared by "
                            "all runs; 32 bits: the stream is keyed by them, so 2**32 drew seed "
                            "0's θ again and 2**64 failed mid-run)")


class LinearFunctional(Task):
    """yu2025's linear functional regression: output Σ θ_j u_j at the last position."""

    Config = LinearFunctionalConfig
    name = "linear_functional"

    @property
    def info(self) -> TaskInfo:
        return TaskInfo(vocab_size=1, n_classes=1, seq_len=self.config.L, input_dim=1, loss="mse")

    def eval_problem(self, other: Task) -> str | None:
        changed = [k for k in ("L", "theta_seed")
                   if getattr(other.config, k) != getattr(self.config, k)]
        if changed:  # θ is drawn for (L, theta_seed): another L or seed is another functional
            verb = "differ" if len(changed) > 1 else "differs"
            return (f"{' and '.join(changed)} {verb} from the run's task: θ is drawn for (L, "
                    "theta_seed), so this set would score the model on a functional it never saw")
        return None

    def theta(self) -> torch.Tensor:
        c = self.config
        k = rng.key(torch.tensor([c.theta_seed]), 7919)  # a stream no split uses
        return _normal(k, c.L)[0] / math.sqrt(c.L)  # (L,)

    def sample(self, seeds: torch.Tensor, split: int, index: torch.Tensor) -> Batch:
        c = self.config
        u = _normal(rng.key(seeds[:, None], split, index), c.L)  # (E, B, L)
        target = (u * self.theta()).sum(-1, keepdim=True)
        return Batch(x=u.unsqueeze(-1), y=_last_only(target, c.L))


__all__ = ["CosineOperator", "FirstAbs", "LinearFunctional", "PRIMES"]
