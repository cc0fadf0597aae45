"""Backbones: token embedding -> sequence mixer layers -> per-position readout.

``SSMLM`` (huang2025 KEEP n-TH models): embedding -> [norm -> SSM core (+ residual)] x n_layers ->
final norm -> linear head. With ``pe="index"`` the last embedding channel carries the raw position
index t = 1..T instead of a learned value ("PE encodes the position in the last element of the
embedding, resulting in |V| fewer parameters").

``TransformerLM``: embedding + learned positions -> pre-norm Transformer blocks -> final norm -> head.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import TransformerBlock
from .layers import PackedEmbedding, PackedLinear, PackedModule, _normal_, make_norm
from .ssm import S4DCore, S6Core


def append_index(h: torch.Tensor) -> torch.Tensor:
    """huang2025's PE: the raw position t = 1..L as one extra last channel. (E,B,L,d-1) -> (E,B,L,d)."""
    E, B, L, _ = h.shape
    t = torch.arange(1, L + 1, device=h.device, dtype=h.dtype)
    return torch.cat([h, t.view(1, 1, L, 1).expand(E, B, L, 1)], dim=-1)


class SSMLM(nn.Module):
    def __init__(self, cfg, info, E: int):
        super().__init__()
        self.pe = cfg.pe
        d = cfg.d
        self.embed = PackedEmbedding(E, info.vocab_size, d - 1 if cfg.pe == "index" else d)
        self.norms = nn.ModuleList(make_norm(E, d, cfg.norm) for _ in range(cfg.n_layers))
        if cfg.mixer == "s6":
            dt_rank = None if cfg.dt_rank == "auto" else cfg.dt_rank
            self.mixers = nn.ModuleList(
                S6Core(E, d, cfg.N, dt_rank, cfg.dt_min, cfg.dt_max) for _ in range(cfg.n_layers)
            )
        else:
            self.mixers = nn.ModuleList(S4DCore(E, d, cfg.N) for _ in range(cfg.n_layers))
        self.residual = cfg.residual
        self.norm_f = make_norm(E, d, cfg.norm)
        self.head = PackedLinear(E, d, info.n_classes, bias=cfg.head_bias)

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, d)
        h = self.embed(ids)
        return append_index(h) if self.pe == "index" else h

    def features(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, d)
        h = self.embed_tokens(ids)
        for norm, mixer in zip(self.norms, self.mixers):
            y = mixer(norm(h))
            h = h + y if self.residual else y
        return h

    def readout(self, h: torch.Tensor) -> torch.Tensor:  # (E, ..., d) -> (E, ..., C)
        return self.head(self.norm_f(h))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, C)
        return self.readout(self.features(ids))

    @torch.no_grad()
    def decay(self, ids: torch.Tensor, layer: int = 0) -> torch.Tensor:
        """exp(Δ_t Λ) of one layer on inputs ids: (E, B, L, d, N)."""
        h = self.embed_tokens(ids)
        for i, (norm, mixer) in enumerate(zip(self.norms, self.mixers)):
            if i == layer:
                return mixer.decay(norm(h))
            y = mixer(norm(h))
            h = h + y if self.residual else y
        raise IndexError(layer)


class LearnedPositions(PackedModule):
    def __init__(self, E: int, L: int, d: int):
        super().__init__(E)
        self.weight = nn.Parameter(torch.empty(E, L, d))

    def reset_member(self, e: int, g: torch.Generator) -> None:
        _normal_(self.weight[e], 0.02, g)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (E, B, L, d)
        return h + self.weight[:, None, : h.shape[2]]


class TransformerLM(nn.Module):
    def __init__(self, cfg, info, E: int):
        super().__init__()
        d = cfg.d
        hidden = d * cfg.mlp_ratio if cfg.mlp_hidden is None else cfg.mlp_hidden
        self.embed = PackedEmbedding(E, info.vocab_size, d)
        self.pos = LearnedPositions(E, info.seq_len, d) if cfg.pos == "learned" else None
        self.blocks = nn.ModuleList(
            TransformerBlock(E, d, cfg.heads, hidden, cfg.norm) for _ in range(cfg.n_layers)
        )
        self.norm_f = make_norm(E, d, cfg.norm)
        self.head = PackedLinear(E, d, info.n_classes, bias=cfg.head_bias)

    def features(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, d)
        h = self.embed(ids)
        if self.pos is not None:
            h = self.pos(h)
        for blk in self.blocks:
            h = blk(h)
        return h

    def readout(self, h: torch.Tensor) -> torch.Tensor:  # (E, ..., d) -> (E, ..., C)
        return self.head(self.norm_f(h))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (E, B, L) -> (E, B, L, C)
        return self.readout(self.features(ids))
