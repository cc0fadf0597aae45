"""Library (tasks): cooper2026's token layout and random sequences (shared by its four tasks).

The fork's tokenizer (notes/paper-settings.md §5.3) lists the words ``V0 .. V{W-1}``, then the
task's special tokens (selective copy: the number tokens; AR with decoding: the two bits; needle:
the two markers), then ``<bos>``, ``<eos>``, ``<null>``. So with W words and S specials::

    id:   0 .. W-1     W .. W+S-1     W+S     W+S+1    W+S+2
          words        specials       <bos>   <eos>    <null>

``<bos>`` and ``<eos>`` are in the vocabulary (they count in the embedding, e.g. selective copy's
26 + 5 + 3 = 34 ids) but never appear in our inputs or targets; ``<null>`` pads variable-length
sequences (inputs) and is never a supervised target (the fork masks targets in {<bos>, <eos>,
<null>}; we write IGNORE there).

``random_tokens``: every position independently is a special token with probability ``p`` (each
of the S specials equally likely) and otherwise a word (each of the W equally likely) — the fork's
``rand_seq`` with P(word) = (1-p)/W and P(special) = p/S. ``pad_to_lengths``: per-sequence lengths
uniform in [L_min, L]; positions at or after the length become ``<null>`` inputs with IGNORE
targets (a causal model's outputs before the length are unaffected by the padding).
"""

from __future__ import annotations

import torch

from . import rng
from .base import IGNORE

# sub-stream tags shared by the cooper2026 tasks (folded into the per-example key)
S_KIND, S_LEN, S_MIX, S_LAST, S_POS = 11, 14, 15, 16, 17


def special_ids(words: int, specials: int) -> dict[str, int]:
    """Ids of the three trailing tokens for W words and S task specials."""
    return {"bos": words + specials, "eos": words + specials + 1, "null": words + specials + 2}


def vocab_size(words: int, specials: int) -> int:
    return words + specials + 3


def random_tokens(k: torch.Tensor, L: int, words: int, specials: int,
                  p: torch.Tensor | float) -> torch.Tensor:
    """(E, B) keys -> (E, B, L) ids: specials with probability p (per sequence if a tensor
    (E, B)), words otherwise, each uniform within its kind."""
    draws = rng.bits(rng.combine(k, S_KIND), 2 * L)  # (E, B, 2L) uint32 values
    u = draws[..., :L].to(torch.float64) * (1.0 / 4294967296.0)  # kind: uniform in [0, 1)
    if isinstance(p, torch.Tensor):
        p = p.to(torch.float64)[..., None]
    is_special = u < p
    pick = draws[..., L:]  # an independent draw picks the token within its kind
    word = (pick * words) >> 32
    special = words + ((pick * specials) >> 32) if specials else word
    return torch.where(is_special, special, word)


def lengths(k: torch.Tensor, L: int, L_min: int | None) -> torch.Tensor:
    """Per-sequence lengths (E, B): L, or uniform in [L_min, L] when L_min is set."""
    if L_min is None or L_min == L:
        return torch.full(k.shape, L, dtype=torch.int64, device=k.device)
    return rng.randint(rng.combine(k, S_LEN), 1, L_min, L + 1)[..., 0]


def pad_to_lengths(x: torch.Tensor, y: torch.Tensor, n: torch.Tensor, null: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions t >= n (per sequence) become <null> inputs with IGNORE targets."""
    pad = torch.arange(x.shape[-1], device=x.device) >= n[..., None]
    return x.masked_fill(pad, null), y.masked_fill(pad, IGNORE)


def last_only(y: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Targets kept at the last real position n-1 of each sequence only (IGNORE elsewhere)."""
    keep = torch.arange(y.shape[-1], device=y.device) == (n[..., None] - 1)
    return torch.where(keep, y, torch.full_like(y, IGNORE))


def last_position_before(x: torch.Tensor, match: torch.Tensor) -> torch.Tensor:
    """For each position t, the last position j <= t with match[j] (-1 if none): (E, B, L)."""
    pos = torch.arange(x.shape[-1], device=x.device).expand_as(x)
    return torch.where(match, pos, torch.full_like(pos, -1)).cummax(dim=-1).values
