"""Library (models): the sequence mixers, one file per family, registered by decorator.

``MIXERS`` (name -> MixerEntry), ``parse_mixer`` / ``build_mixer``, and the mixer files:
s6, s4d (cores of huang2025's models), mamba1 (the Mamba-1 block with all its options: conv, gate,
core s6 | s4d | delta_t | b2s6, complex A, A = I), delta_t, s4d_zoh, b2s6, mamba2, mamba2_3conv,
attention, neox_attn, linear_mamba (koren2026). See mixers.base for the contract of a mixer file.
"""

from __future__ import annotations

from . import (  # noqa: F401  (importing a mixer file registers it)
    attention,
    b2s6,
    delta_t,
    linear_mamba,
    mamba1,
    mamba2,
    mamba2_3conv,
    neox_attn,
    s4d,
    s4d_zoh,
    s6,
)
from .base import MIXERS, MixerConfig, MixerEntry, MixerSpecError, build_mixer, parse_mixer, register

__all__ = ["MIXERS", "MixerConfig", "MixerEntry", "MixerSpecError", "build_mixer", "parse_mixer",
           "register"]
