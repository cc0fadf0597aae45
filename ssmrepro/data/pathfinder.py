"""Library (data): Pathfinder / Path-X, a vectorised LRA "snakes" generator, plus readers.

The task: two circular markers sit on the ends of dashed curves ("snakes"); label 1 iff both
markers lie on the *same* snake. The generator follows the algorithm of ``drewlinsley/pathfinder``
(``snakes2.py``) as used by LRA, with the LRA parameters for 32/64/128/256 pixels (see
``LRA_PARAMS``). Our own implementation, written from the algorithm description:

1. Per image: ``label ~ U{0,1}``, paddle margin ``m ~ U(margins)``.
2. Two target snakes. Snake 1's seed paddle (a short segment of length ``paddle_length``) has an
   integer-degree orientation and lies inside the central square that leaves ``2*seed_distance``
   pixels on every side; snake 2's seed tail is exactly ``seed_distance`` away from snake 1's.
   Both snakes then grow ``contour_length - 1`` paddles, alternating 1, 2, 1, 2, ...
3. Growing one paddle: the pivot moves ``paddle_length + 2m`` ahead along the current
   orientation; candidate heads are points on the circle of radius ``paddle_length + m`` around
   it (one per pixel of arc length); each is weighted by
   ``max(cos(min(continuity * |dtheta|, pi/2)), 0)**2`` times "head is free"; one is sampled and
   the paddle is drawn from the head back towards the pivot (leaving a gap of about ``2m``).
   The paddle is rejected when its footprint overlaps any committed footprint (up to
   ``max_paddle_retrial`` resamples); a target snake that cannot grow discards the whole image
   (rejection sampling, like the original's "regenerate the pair" loop).
4. ``n_distractors`` distractor snakes of ``distractor_length`` paddles each, seeded at random
   free positions, each retried up to ``max_distractor_retrial`` times; incomplete sets allowed.
5. Markers (discs of ``marker_radius``): origin at the start of target snake ``i``, terminal at the
   end of snake ``i`` if label 1 else at the end of snake ``1 - i``. ``image = max(snakes,
   markers)``, then byte-scaled so the brightest pixel is 255 (as ``scipy.misc.imsave`` did).

Implementation choices (same family of images, not pixel-identical):

- Geometry is continuous; occupancy lives in two bit planes of one uint8 raster at
  ``occupancy_scale`` x resolution: ``G`` (centre-lines must stay ``thickness + 2m -
  separation_slack`` away from committed paddles and the gaps between them) and ``H`` (candidate
  heads must stay ``thickness/2 + 2m - head_slack`` away). These replace the original's float
  masks, ``cv2.dilate`` and the ``max(mask + footprint) >= 1.8`` overlap test. The newest
  paddle of a growing snake is kept out of the rasters ("pending") exactly as the original does,
  and the other target snake's pending paddle is checked with an exact segment distance (the
  original did not check it).
- Rendering: anti-aliasing is approximated by drawing each paddle at 2x with a soft edge and box
  downsampling (instead of a PIL line plus Lanczos resize).
- Everything is vectorised over a chunk of images; chunk ``c`` uses an RNG seeded from
  ``(seed, resolution, c)``, so the output does not depend on the number of worker processes.
- Single-paddle clutter (``use_single_paddles``) is not implemented: the LRA wrapper script turns it
  off for the Pathfinder datasets.

Most target pairs run into the border or each other and are rejected, as in the original: about
5% of attempts survive at 32 px, 2% at 128 px and only 0.2% at 64 px (the 64 px parameters make
~100 px long, fairly straight snakes in a 64 px image), which is what bounds the throughput.

Labels are checked by ``pathfinder_oracle``: a flood fill over a high-resolution raster of every
snake's centre-line (paddles plus the gaps between them) from the origin marker reaches the
terminal marker iff the label is 1.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..util import atomic_save_npy, atomic_write_bytes, atomic_write_text, load_array
from ._workers import iter_chunks
from .image import DamagedSource

GENERATOR_VERSION = 1
# S4 skips this file: it is empty in the official release.
BLACKLIST = {("pathfinder32", "curv_baseline", "imgs/0/sample_172.png")}


@dataclass(frozen=True)
class PathfinderParams:
    """Generator parameters. Defaults = LRA Pathfinder-32 (``curv_contour_length_14``)."""

    resolution: int = 32
    padding: int = 1
    antialias: int = 2
    occupancy_scale: int = 2  # resolution multiplier of the occupancy rasters (1 is ~20% faster)
    margins: tuple[int, ...] = (1,)
    seed_distance: int = 7
    marker_radius: float = 1.5
    contour_length: int = 14
    paddle_length: int = 2
    thickness: float = 0.5
    continuity: float = 1.0
    distractor_length: int = 4
    n_distractors: int = 5
    snake_contrasts: tuple[float, ...] = (2.0,)
    paddle_contrasts: tuple[float, ...] = (0.75,)
    max_paddle_retrial: int = 2
    max_distractor_retrial: int = 4
    stop_with_availability: float = 0.01
    separation_slack: float = 1.0
    head_slack: float = 0.5

    @property
    def difficulty(self) -> str:
        """LRA folder name: ``curv_baseline`` (6), ``curv_contour_length_9`` / ``_14``."""
        if self.contour_length == 6:
            return "curv_baseline"
        return f"curv_contour_length_{self.contour_length}"


# LRA `lra_benchmarks/data/pathfinder.py` docstrings + `snakes2_wrapper.py` (hard = contour 14).
LRA_PARAMS: dict[int, PathfinderParams] = {
    32: PathfinderParams(),
    64: PathfinderParams(
        resolution=64,
        margins=(1,),
        seed_distance=12,
        marker_radius=2.5,
        paddle_length=5,
        thickness=1.0,
        continuity=1.8,
        n_distractors=22 // 4,
        snake_contrasts=(0.8,),
        paddle_contrasts=(1.0,),
    ),
    128: PathfinderParams(
        resolution=128,
        margins=(2, 3),
        seed_distance=20,
        marker_radius=3.0,
        paddle_length=5,
        thickness=1.5,
        continuity=1.8,
        n_distractors=35 // 4,
        snake_contrasts=(0.9,),
        paddle_contrasts=(1.0,),
    ),
    256: PathfinderParams(
        resolution=256,
        padding=22,
        margins=(3,),
        seed_distance=27,
        marker_radius=5.0,
        paddle_length=5,
        thickness=2.0,
        continuity=1.8,
        n_distractors=30 // 4,
        snake_contrasts=(1.0,),
        paddle_contrasts=(1.0,),
    ),
}
# images per chunk (the unit of vectorisation and of seeding)
_CHUNK = {32: 4096, 64: 2048, 128: 256, 256: 64}


def lra_params(resolution: int, **overrides) -> PathfinderParams:
    """LRA parameters for ``resolution`` in {32, 64, 128, 256}, optionally overridden."""
    if resolution not in LRA_PARAMS:
        raise ValueError(f"resolution must be one of {sorted(LRA_PARAMS)}, got {resolution}")
    return dataclasses.replace(LRA_PARAMS[resolution], **overrides)


# ------------------------------------------------------------------------------------ geometry


def _unit(theta: np.ndarray) -> np.ndarray:
    """(...,) angles -> (..., 2) unit vectors in (y, x) order."""
    return np.stack([np.sin(theta), np.cos(theta)], axis=-1)


def _point_seg_d2(py, px, ay, ax, by, bx):
    """Squared distance from points (py, px) to segments a-b; all arguments broadcast."""
    dy, dx = by - ay, bx - ax
    den = np.maximum(dy * dy + dx * dx, 1e-12)
    t = np.clip(((py - ay) * dy + (px - ax) * dx) / den, 0.0, 1.0)
    ey, ex = py - ay - t * dy, px - ax - t * dx
    return ey * ey + ex * ex


def _grid_seg_d2(g: np.ndarray, a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Squared distances (k, W, W) from grid points (g[i], g[j]) to segments a-c (k, 2), float32."""
    ry = g[None, :] - a[:, 0:1]  # (k, W)
    rx = g[None, :] - a[:, 1:2]
    d = c - a  # (k, 2)
    inv = 1.0 / np.maximum((d * d).sum(1), np.float32(1e-12))  # (k,)
    t = (ry * (d[:, 0] * inv)[:, None])[:, :, None] + (rx * (d[:, 1] * inv)[:, None])[:, None, :]
    np.clip(t, 0.0, 1.0, out=t)  # (k, W, W) projection parameter
    dy, dx = d[:, 0, None, None], d[:, 1, None, None]
    ey = np.multiply(t, dy)
    np.subtract(ry[:, :, None], ey, out=ey)
    np.multiply(ey, ey, out=ey)
    np.multiply(t, dx, out=t)
    np.subtract(rx[:, None, :], t, out=t)
    np.multiply(t, t, out=t)
    ey += t
    return ey


def _seg_seg_dist(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """Distance between segments a0-a1 and b0-b1, arrays (..., 2), broadcasting."""

    def pd(p, s0, s1):
        return _point_seg_d2(p[..., 0], p[..., 1], s0[..., 0], s0[..., 1], s1[..., 0], s1[..., 1])

    d2 = np.minimum(np.minimum(pd(a0, b0, b1), pd(a1, b0, b1)), np.minimum(pd(b0, a0, a1), pd(b1, a0, a1)))

    def cross(o, p, q):
        return (p[..., 0] - o[..., 0]) * (q[..., 1] - o[..., 1]) - (p[..., 1] - o[..., 1]) * (
            q[..., 0] - o[..., 0]
        )

    crossing = (cross(b0, b1, a0) * cross(b0, b1, a1) < 0) & (cross(a0, a1, b0) * cross(a0, a1, b1) < 0)
    return np.where(crossing, 0.0, np.sqrt(d2))


@dataclass
class PathfinderGeometry:
    """What the generator drew for one image (1x pixel units, (y, x) order), for the oracle.

    pieces: (K, 2, 2) centre-line pieces: every paddle and every gap between consecutive paddles.
    snake: (K,) snake id of each piece (0, 1 = targets; 2.. = distractors).
    """

    resolution: int
    thickness: float
    margin: float
    pieces: np.ndarray
    snake: np.ndarray
    origin: np.ndarray  # (2,) origin-marker centre
    terminal: np.ndarray  # (2,) terminal-marker centre
    label: int


class _Snake:
    """State of one snake in each image of a group (arrays aligned with ``self.b``)."""

    def __init__(self, b: np.ndarray, n_paddles: int):
        k = len(b)
        self.b = b
        self.pivot = np.zeros((k, 2))
        self.theta = np.zeros(k)
        self.head = np.zeros((k, 2))
        self.hist = np.zeros((k, n_paddles, 3, 2))  # per paddle: previous head, tail, head
        self.contrast = np.zeros((k, n_paddles), dtype=np.float32)

    def pending(self, pos: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Pieces of paddle ``step`` (segment tail-head and gap prev-tail): (k, 2, 2, 2)."""
        h = self.hist[pos, step]  # (k, 3, 2)
        return np.stack([h[:, [1, 2]], h[:, [0, 1]]], axis=1), h


class _Chunk:
    """Generate one chunk of images, vectorised over the images."""

    def __init__(self, p: PathfinderParams, rng: np.random.Generator, n: int):
        self.p, self.rng, self.n = p, rng, n
        aa, res = p.occupancy_scale, p.resolution
        self.S = S = res * aa  # occupancy raster size (without the ring)
        self.m = np.asarray(p.margins, dtype=float)[rng.integers(len(p.margins), size=n)]  # (n,)
        self.d_sep = p.thickness + 2 * self.m - p.separation_slack  # (n,)
        self.d_head = p.thickness / 2 + 2 * self.m - p.head_slack  # (n,)
        # Occupancy rasters at occupancy_scale x resolution with a one-pixel ring of "occupied"
        # around them, so that any point outside the image (indices clipped onto the ring) is
        # occupied without bounds checks.
        centre = (np.arange(S) + 0.5) / aa
        edge = np.minimum(centre, res - centre)
        edge2 = np.minimum(edge[:, None], edge[None, :])  # (S, S) distance to the image border
        # bit 1 (G): centre-lines must stay off; bit 2 (H): candidate heads must stay off.
        # One template per margin value, copied per image.
        ring = np.full((S + 2, S + 2), 3, dtype=np.uint8)
        margins = np.asarray(p.margins, dtype=float)
        templates = np.repeat(ring[None], len(margins), axis=0)
        for i, m in enumerate(margins):
            templates[i, 1:-1, 1:-1] = (edge2 < p.padding + p.thickness / 2) | (
                (edge2 < p.padding + m).astype(np.uint8) << 1
            )
        self.occ = (
            templates[np.searchsorted(margins, self.m)]
            if len(margins) > 1
            else np.repeat(templates, n, axis=0)
        )
        self._flat = self.occ.reshape(-1)  # view: indexing one flat array is cheaper than 3 axes
        # stamping box (aa pixels) big enough for a paddle plus the gap before it plus the radius
        max_piece = p.paddle_length + 2 * max(p.margins)
        rmax = float(max(self.d_sep.max(), self.d_head.max()))
        self.W = int(math.ceil((max_piece + 2 * rmax) * aa)) + 2
        # points checked along a paddle / a gap: spacing <= 1/4 pixel whatever the raster scale
        self.n_samp = int(math.ceil(p.paddle_length * 4)) + 1
        self.n_gap = int(math.ceil(2 * max(p.margins) * 4)) + 1
        n_paddles = 2 * p.contour_length + p.n_distractors * p.distractor_length
        self.rec = np.zeros((n, n_paddles, 3, 2))
        self.rec_snake = np.full((n, n_paddles), -1, dtype=np.int16)
        self.rec_val = np.zeros((n, n_paddles), dtype=np.float32)
        self.n_rec = np.zeros(n, dtype=np.int64)

    # ---- rasters
    def _lookup(self, bit: int, b: np.ndarray, pts: np.ndarray) -> np.ndarray:
        """Occupancy ``bit`` at points pts (..., 2) of images b (broadcast); outside = True."""
        Sp = self.S + 2
        ij = np.clip(np.floor(pts * self.p.occupancy_scale).astype(np.int64) + 1, 0, Sp - 1)
        flat = (b * Sp + ij[..., 0]) * Sp + ij[..., 1]
        return (self._flat[flat] & bit) != 0

    def _blocked(
        self, b: np.ndarray, prev: np.ndarray | None, tail: np.ndarray, head: np.ndarray
    ) -> np.ndarray:
        """Does the polyline prev-tail-head (..., 2) touch G? b broadcasts to tail[..., 0].
        ``prev=None``: the paddle tail-head only."""
        s1 = np.linspace(0.0, 1.0, self.n_samp)[:, None]  # (ns, 1)
        pts = tail[..., None, :] + s1 * (head - tail)[..., None, :]
        if prev is not None:
            s0 = np.linspace(0.0, 1.0, self.n_gap)[:, None]
            pts = np.concatenate([pts, prev[..., None, :] + s0 * (tail - prev)[..., None, :]], axis=-2)
        return self._lookup(1, np.asarray(b)[..., None], pts).any(-1)  # pts: (..., ns [+ ng], 2)

    def _stamp(self, b: np.ndarray, prev: np.ndarray, tail: np.ndarray, head: np.ndarray) -> None:
        """Commit paddles tail-head and the gaps prev-tail (k, 2) of images b (k,) to G and H.

        Each image must appear at most once in ``b`` (boxes of one image would overwrite each
        other).
        """
        if len(b) == 0:
            return
        aa, S, W = self.p.occupancy_scale, self.S, self.W
        r_g, r_h = self.d_sep[b], self.d_head[b]
        r = np.maximum(r_g, r_h)
        lo = np.floor((np.minimum(np.minimum(prev, tail), head) - r[:, None]) * aa).astype(np.int64)
        ar = np.arange(W)
        rows, cols = lo[:, 0, None] + ar, lo[:, 1, None] + ar  # (k, W) in aa pixels
        # float32 distances in raster-pixel units relative to the box corner
        g = np.arange(W, dtype=np.float32) + np.float32(0.5)  # (W,) pixel centres
        lo32 = lo.astype(np.float32)
        pts = [(np.asarray(q, dtype=np.float32) * aa - lo32) for q in (prev, tail, head)]
        dist2 = _grid_seg_d2(g, pts[1], pts[2])  # paddle, (k, W, W)
        np.minimum(dist2, _grid_seg_d2(g, pts[0], pts[1]), out=dist2)  # and the gap before it
        bits = (dist2 <= ((r_g * aa) ** 2).astype(np.float32)[:, None, None]).view(np.uint8)
        bits |= (dist2 <= ((r_h * aa) ** 2).astype(np.float32)[:, None, None]).view(np.uint8) << 1
        Sp = S + 2
        ri = np.clip(rows + 1, 0, Sp - 1)  # out-of-image pixels land on the ring
        ci = np.clip(cols + 1, 0, Sp - 1)
        flat = ((b[:, None] * Sp + ri) * Sp)[:, :, None] + ci[:, None, :]  # (k, W, W), unique off-ring
        self._flat[flat] = self._flat[flat] | bits

    def _commit(self, b: np.ndarray, hist: np.ndarray) -> None:
        """Commit paddles hist (k, n, 3, 2) (previous head, tail, head) of images b (k,)."""
        for j in range(hist.shape[1]):
            self._stamp(b, hist[:, j, 0], hist[:, j, 1], hist[:, j, 2])

    # ---- snakes
    def _seed(
        self, sn: _Snake, pos: np.ndarray, lo: int, hi: int, contrast: np.ndarray, draws: int = 24
    ) -> np.ndarray:
        """Seed paddles for sn[pos]: tail uniform over free pixels of [lo, hi)^2 (the whole paddle
        must stay inside the square and off G). Returns ok (len(pos),)."""
        p, rng = self.p, self.rng
        ok = np.zeros(len(pos), dtype=bool)
        todo = np.arange(len(pos))
        for _ in range(1 + p.max_paddle_retrial):
            if todo.size == 0:
                break
            k = todo.size
            b = sn.b[pos[todo]]
            theta = np.deg2rad(rng.integers(-180, 180, size=k)).astype(float)
            u = _unit(theta)  # (k, 2)
            tail = rng.integers(lo, hi, size=(k, draws, 2)) + 0.5  # pixel centres
            head = tail + p.paddle_length * u[:, None, :]
            pivot = tail - self.m[b, None, None] * u[:, None, :]
            inside = ((head >= lo) & (head < hi)).all(-1) & ((pivot >= 0) & (pivot < p.resolution)).all(-1)
            # rejection sampling of "uniform over the available pixels": first good draw wins
            good = inside & ~self._blocked(b[:, None], None, tail, head)  # (k, draws)
            found = good.any(1)
            first = good.argmax(1)
            idx = np.flatnonzero(found)
            sel = pos[todo[idx]]
            t_sel, h_sel = tail[idx, first[idx]], head[idx, first[idx]]
            sn.theta[sel] = theta[idx]
            sn.head[sel] = h_sel
            sn.pivot[sel] = pivot[idx, first[idx]]
            sn.hist[sel, 0] = np.stack([t_sel, t_sel, h_sel], axis=1)
            sn.contrast[sel, 0] = contrast[todo[idx]]
            ok[todo[idx]] = True
            todo = todo[~found]
        return ok

    def _seed_partner(self, s2: _Snake, s1: _Snake, pos: np.ndarray, contrast: np.ndarray) -> np.ndarray:
        """Snake 2's seed: tail exactly seed_distance from snake 1's tail (integer-degree angle)."""
        p, rng = self.p, self.rng
        ok = np.zeros(len(pos), dtype=bool)
        todo = np.arange(len(pos))
        for _ in range(1 + p.max_paddle_retrial):
            if todo.size == 0:
                break
            k = todo.size
            ps = pos[todo]
            b = s2.b[ps]
            theta = np.deg2rad(rng.integers(-180, 180, size=k)).astype(float)
            phi = np.deg2rad(rng.integers(0, 360, size=k)).astype(float)
            u = _unit(theta)
            tail = np.floor(s1.hist[ps, 0, 1] + p.seed_distance * _unit(phi)) + 0.5
            head = tail + p.paddle_length * u
            pivot = tail - self.m[b, None] * u
            inside = ((head >= 0) & (head < p.resolution)).all(-1) & (
                (pivot >= 0) & (pivot < p.resolution)
            ).all(-1)
            sep = _seg_seg_dist(tail, head, s1.hist[ps, 0, 1], s1.hist[ps, 0, 2])
            good = inside & ~self._blocked(b, None, tail, head) & (sep >= self.d_sep[b])
            sel = ps[good]
            s2.theta[sel] = theta[good]
            s2.head[sel] = head[good]
            s2.pivot[sel] = pivot[good]
            s2.hist[sel, 0] = np.stack([tail[good], tail[good], head[good]], axis=1)
            s2.contrast[sel, 0] = contrast[todo[good]]
            ok[todo[good]] = True
            todo = todo[~good]
        return ok

    def _extend(
        self,
        sn: _Snake,
        pos: np.ndarray,
        step: int,
        contrast: np.ndarray,
        other: _Snake | None = None,
        other_step: int = 0,
        check_own: bool = False,
    ) -> np.ndarray:
        """Grow paddle ``step`` of sn[pos]. Returns ok (len(pos),); fills sn for successes."""
        p, rng = self.p, self.rng
        k = len(pos)
        if k == 0:
            return np.zeros(0, dtype=bool)
        b = sn.b[pos]
        m = self.m[b]
        radius = p.paddle_length + m  # (k,)
        theta = sn.theta[pos]
        pivot = sn.pivot[pos] + (p.paddle_length + 2 * m)[:, None] * _unit(theta)  # (k, 2)
        # 1. candidate heads: one per pixel of arc length on the circle around the pivot
        n_c = np.ceil(2 * np.pi * radius).astype(np.int64)
        j = np.arange(int(n_c.max()))
        if n_c.min() == n_c.max():  # one margin: the same circle for every image
            phi = np.broadcast_to(2 * np.pi * j / n_c[0], (k, len(j)))  # (k, nc)
            unit = self._circle(int(n_c[0]))[None]
        else:
            phi = 2 * np.pi * j[None, :] / n_c[:, None]
            unit = _unit(phi)
        cand = pivot[:, None, :] + radius[:, None, None] * unit  # (k, nc, 2)
        # 2. weights: continuity prior times "head is free"
        dth = np.abs((phi - theta[:, None] + np.pi) % (2 * np.pi) - np.pi)
        w = np.maximum(np.cos(np.minimum(p.continuity * dth, np.pi / 2)), 0.0) ** 2
        w = w * (j[None, :] < n_c[:, None]) * ~self._lookup(2, b[:, None], cand)
        total = w.sum(1)
        cdf = np.cumsum(w, axis=1)
        ok = np.zeros(k, dtype=bool)
        todo = np.flatnonzero(total > 1e-4)
        # 3. sample, reject overlapping paddles, resample up to max_paddle_retrial times
        for _ in range(1 + p.max_paddle_retrial):
            if todo.size == 0:
                break
            u = rng.random(todo.size) * total[todo]
            jj = np.minimum((cdf[todo] < u[:, None]).sum(1), n_c[todo] - 1)
            ph = phi[todo, jj]
            head = cand[todo, jj]
            tail = pivot[todo] + m[todo, None] * _unit(ph)
            prev = sn.head[pos[todo]]
            bt = b[todo]
            bad = self._blocked(bt, prev, tail, head)
            new = np.stack([np.stack([tail, head], 1), np.stack([prev, tail], 1)], 1)  # (t, 2, 2, 2)
            if other is not None:
                oth, oh = other.pending(pos[todo], other_step)  # (t, 2, 2, 2)
                # both polylines lie within L + 2m of their tails: only near pairs need the
                # exact test
                reach = 2 * (p.paddle_length + 2 * m[todo]) + self.d_sep[bt]
                near = np.flatnonzero(((tail - oh[:, 1]) ** 2).sum(-1) < reach**2)
                if near.size:
                    nw, ot = new[near], oth[near]
                    d = _seg_seg_dist(
                        nw[:, :, None, 0], nw[:, :, None, 1], ot[:, None, :, 0], ot[:, None, :, 1]
                    )
                    bad[near] |= d.min((1, 2)) < self.d_sep[bt[near]]
            if check_own and step >= 2:
                h = sn.hist[pos[todo], : step - 1]  # (t, s, 3, 2): all but the last paddle
                own = np.concatenate([h[:, :, [1, 2]], h[:, :, [0, 1]]], axis=1)  # (t, 2s, 2, 2)
                d = _seg_seg_dist(
                    new[:, :, None, 0], new[:, :, None, 1], own[:, None, :, 0], own[:, None, :, 1]
                )
                bad |= d.min((1, 2)) < self.d_sep[bt]
            good = ~bad
            g = todo[good]
            sel = pos[g]
            sn.pivot[sel] = pivot[g]
            sn.theta[sel] = ph[good]
            sn.head[sel] = head[good]
            sn.hist[sel, step] = np.stack([prev[good], tail[good], head[good]], axis=1)
            sn.contrast[sel, step] = contrast[g]
            ok[g] = True
            todo = todo[bad]
        return ok

    @functools.lru_cache(maxsize=8)  # noqa: B019 - a handful of circle sizes per chunk
    def _circle(self, n: int) -> np.ndarray:
        return _unit(2 * np.pi * np.arange(n) / n)  # (n, 2)

    def _record(self, b: np.ndarray, sn: _Snake, pos: np.ndarray, n_paddles: int, snake_id: int) -> None:
        """Copy the paddles of sn[pos] into the per-image drawing list."""
        if len(b) == 0:
            return
        start = self.n_rec[b]
        idx = start[:, None] + np.arange(n_paddles)[None, :]
        self.rec[b[:, None], idx] = sn.hist[pos, :n_paddles]
        self.rec_val[b[:, None], idx] = sn.contrast[pos, :n_paddles]
        self.rec_snake[b[:, None], idx] = snake_id
        self.n_rec[b] += n_paddles

    def _pick(self, values: tuple[float, ...], size: int) -> np.ndarray:
        v = np.asarray(values, dtype=np.float32)
        return v[self.rng.integers(len(v), size=size)] if len(v) > 1 else np.full(size, v[0], np.float32)

    # ---- the whole image
    def run(self, with_geometry: bool = False):
        p, rng, n = self.p, self.rng, self.n
        res = p.resolution
        label = rng.integers(0, 2, size=n)
        origin_idx = rng.integers(0, 2, size=n)
        cl = p.contour_length
        all_b = np.arange(n)
        s1, s2 = _Snake(all_b, cl), _Snake(all_b, cl)
        snake_c = np.stack([self._pick(p.snake_contrasts, n), self._pick(p.snake_contrasts, n)])
        alive = np.ones(n, dtype=bool)

        # --- two target snakes (seed, partner seed, then alternate growth)
        lo, hi = 2 * p.seed_distance, res - 2 * p.seed_distance
        if hi - lo < 2:
            lo, hi = p.padding, res - p.padding
        paddle_c = self._pick(p.paddle_contrasts, n)
        alive &= self._seed(s1, all_b, lo, hi, snake_c[0] * paddle_c, draws=8)
        pos = np.flatnonzero(alive)
        alive[pos] &= self._seed_partner(s2, s1, pos, snake_c[1, pos] * paddle_c[pos])
        for step in range(1, cl):
            paddle_c = self._pick(p.paddle_contrasts, n)
            for me, other in ((0, 1), (1, 0)):
                sn, ot = (s1, s2)[me], (s1, s2)[other]
                pos = np.flatnonzero(alive)
                # the other snake's newest paddle is pending: step for snake 2 is one behind
                other_step = step if me == 1 else step - 1
                ok = self._extend(sn, pos, step, snake_c[me, pos] * paddle_c[pos], ot, other_step)
                alive[pos[~ok]] = False
                good = pos[ok]
                # commit this snake's previous paddle (no longer the newest one)
                self._commit(good, sn.hist[good, step - 1 : step])
        good = np.flatnonzero(alive)
        for sn in (s1, s2):
            self._commit(good, sn.hist[good, cl - 1 : cl])
            self._record(good, sn, good, cl, 0 if sn is s1 else 1)

        # --- distractor snakes
        dl = p.distractor_length
        for d in range(p.n_distractors):
            todo = np.flatnonzero(alive)
            if p.stop_with_availability > 0 and todo.size:
                o = p.occupancy_scale
                sub = self.occ[todo][:, 1 + o // 2 : -1 : o, 1 + o // 2 : -1 : o]
                free = 1.0 - (sub & 1).mean((1, 2))
                todo = todo[free >= p.stop_with_availability]
            for _ in range(1 + p.max_distractor_retrial):
                if todo.size == 0:
                    break
                sn = _Snake(todo, dl)
                contrast = self._pick(p.snake_contrasts, len(todo))
                ok = self._seed(sn, np.arange(len(todo)), 1, res - 1, contrast)
                for step in range(1, dl):
                    pos = np.flatnonzero(ok)
                    if pos.size == 0:
                        break
                    contrast = self._pick(p.snake_contrasts, len(todo))
                    ok[pos] = self._extend(sn, pos, step, contrast[pos], check_own=True)
                pos = np.flatnonzero(ok)
                self._commit(todo[pos], sn.hist[pos])
                self._record(todo[pos], sn, pos, dl, 2 + d)
                todo = todo[~ok]

        # --- markers and rendering
        keep = np.flatnonzero(alive)
        oi = origin_idx[keep]
        ti = np.where(label[keep] == 1, oi, 1 - oi)
        tails = np.stack([s1.hist[keep, 0, 1], s2.hist[keep, 0, 1]], 1)  # (k, 2, 2)
        ends = np.stack([s1.head[keep], s2.head[keep]], 1)
        ar = np.arange(len(keep))
        origin, terminal = tails[ar, oi], ends[ar, ti]
        images = self._render(keep, origin, terminal)
        labels = label[keep].astype(np.uint8)
        geoms = None
        if with_geometry:
            geoms = [
                self._geometry(int(b), origin[i], terminal[i], int(labels[i])) for i, b in enumerate(keep)
            ]
        return images, labels, geoms

    def _render(self, keep: np.ndarray, origin: np.ndarray, terminal: np.ndarray) -> np.ndarray:
        """uint8 images (k, res, res): paddles and markers drawn at aa x with soft edges,
        then box-downsampled."""
        p = self.p
        aa, res = p.antialias, p.resolution
        S = res * aa
        k = len(keep)
        if k == 0:
            return np.zeros((0, res, res), dtype=np.uint8)
        canvas = np.zeros((k, S, S), dtype=np.float32)
        marks = np.zeros((k, S, S), dtype=np.float32)
        # paddles: a PIL line of width round(thickness * aa) at aa x resolution
        r_line = round(p.thickness * aa) / 2
        valid = self.rec_snake[keep] >= 0  # (k, P)
        bi, pi = np.nonzero(valid)
        a = self.rec[keep[bi], pi, 1] * aa  # tails (m, 2) in aa px
        c = self.rec[keep[bi], pi, 2] * aa
        val = self.rec_val[keep[bi], pi]
        self._soft_stamp(canvas, bi, a, c, r_line, val)
        # markers: discs of marker_radius, value 1
        both = np.concatenate([origin, terminal]) * aa
        mb = np.concatenate([np.arange(k), np.arange(k)])
        self._soft_stamp(marks, mb, both, both, p.marker_radius * aa, np.ones(2 * k, np.float32))
        img = np.maximum(
            canvas.reshape(k, res, aa, res, aa).mean((2, 4)),
            marks.reshape(k, res, aa, res, aa).mean((2, 4)),
        )
        top = img.reshape(k, -1).max(1)
        img = img * (255.0 / np.maximum(top, 1e-6))[:, None, None]
        return np.clip(np.rint(img), 0, 255).astype(np.uint8)

    @staticmethod
    def _soft_stamp(canvas, bi, a, c, r, val) -> None:
        """max-composite capsules a-c (aa px) with radius r and a 1-px soft edge into canvas."""
        if len(bi) == 0:
            return
        S = canvas.shape[1]
        ext = np.abs(c - a).max() if len(a) else 0.0
        W = int(math.ceil(ext + 2 * (r + 1))) + 2
        lo = np.floor(np.minimum(a, c) - r - 1).astype(np.int64)
        ar = np.arange(W)
        rows, cols = lo[:, 0, None] + ar, lo[:, 1, None] + ar  # (m, W)
        d2 = _point_seg_d2(
            (rows + 0.5)[:, :, None],
            (cols + 0.5)[:, None, :],
            a[:, 0, None, None],
            a[:, 1, None, None],
            c[:, 0, None, None],
            c[:, 1, None, None],
        )
        cov = np.clip(r + 0.5 - np.sqrt(d2), 0.0, 1.0).astype(np.float32) * val[:, None, None]
        ok = ((rows >= 0) & (rows < S))[:, :, None] & ((cols >= 0) & (cols < S))[:, None, :] & (cov > 0)
        m, ri, ci = np.nonzero(ok)
        np.maximum.at(canvas, (bi[m], rows[m, ri], cols[m, ci]), cov[m, ri, ci])

    def _geometry(self, b: int, origin: np.ndarray, terminal: np.ndarray, label: int) -> PathfinderGeometry:
        n = int(self.n_rec[b])
        h = self.rec[b, :n]  # (n, 3, 2)
        pieces = np.concatenate([h[:, [1, 2]], h[:, [0, 1]]])  # paddles, then the gaps before them
        snake = np.concatenate([self.rec_snake[b, :n], self.rec_snake[b, :n]]).astype(np.int64)
        return PathfinderGeometry(
            resolution=self.p.resolution,
            thickness=self.p.thickness,
            margin=float(self.m[b]),
            pieces=pieces.copy(),
            snake=snake,
            origin=origin.copy(),
            terminal=terminal.copy(),
            label=label,
        )


def _chunk_rng(seed: int, resolution: int, chunk: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(resolution), int(chunk), 0x5A7E]))


def _generate_chunk(
    chunk: int, *, params: PathfinderParams, seed: int, size: int, with_geometry: bool = False
):
    rng = _chunk_rng(seed, params.resolution, chunk)
    return _Chunk(params, rng, size).run(with_geometry)


def iter_pathfinder(
    n: int,
    resolution: int = 32,
    seed: int = 0,
    *,
    params: PathfinderParams | None = None,
    workers: int = 1,
    chunk_size: int | None = None,
    with_geometry: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray, list[PathfinderGeometry] | None]]:
    """Yield (images uint8 (k, R, R), labels uint8 (k,), geometries) blocks, ``n`` images
    in total."""
    params = params or lra_params(resolution)
    size = chunk_size or _CHUNK.get(params.resolution, 16)
    fn = functools.partial(_generate_chunk, params=params, seed=seed, size=size, with_geometry=with_geometry)
    done = 0
    if n <= 0:
        return
    with closing(iter_chunks(fn, workers, ahead=workers)) as chunks:
        for imgs, labels, geoms in chunks:
            take = min(len(labels), n - done)
            if take:
                yield imgs[:take], labels[:take], (geoms[:take] if geoms is not None else None)
            done += take
            if done >= n:
                return


def generate_pathfinder(
    n: int,
    resolution: int = 32,
    seed: int = 0,
    *,
    params: PathfinderParams | None = None,
    workers: int = 1,
    chunk_size: int | None = None,
    with_geometry: bool = False,
):
    """Generate ``n`` Pathfinder images with the LRA parameters for ``resolution``.

    Deterministic given (seed, params, chunk_size), independent of ``workers``.

    Example:
        >>> images, labels, geoms = generate_pathfinder(4, 32, seed=0, with_geometry=True)
        >>> images.shape, images.dtype, labels.tolist()
        ((4, 32, 32), dtype('uint8'), [0, 0, 1, 1])
        >>> [pathfinder_oracle(g) for g in geoms]
        [0, 0, 1, 1]

        Rows 14-29 of ``images[0]`` (``.`` 0, ``-`` < 110, ``+`` < 200, ``#`` >= 200): dashed
        paddles, the origin marker near (17, 24) and the terminal marker near (26, 4), which sit
        on different snakes (label 0)::

            ....--....-.-................-..
            ....-+.....-++-.............++..
            .....-...-+....-+-.....+#+---...
            ......-...#-....-+.....###-.....
            .....-+...--...........+#+......
            ......-+....+-..................
            .......-....-#-..............+..
            ......--.......-.............#..
            .....-+........#............-+..
            .....-.........+-...............
            ...-+.....-#.#-..............+..
            ..-##-...-#-.-#-+-...........+-.
            ..+##-..-......--+...........--.
            ..-++-.-#.....-+.+...........--.
            .......+-.....#-.............#-.
            ..............-..........++-++..

    Returns:
        ``(images (n, R, R) uint8, labels (n,) uint8)``, plus a list of ``PathfinderGeometry``
        as third element when ``with_geometry`` (used by ``pathfinder_oracle``).
    """
    params = params or lra_params(resolution)
    R = params.resolution
    images = np.zeros((n, R, R), dtype=np.uint8)
    labels = np.zeros(n, dtype=np.uint8)
    geoms: list[PathfinderGeometry] = []
    i = 0
    for imgs, labs, gs in iter_pathfinder(
        n,
        R,
        seed,
        params=params,
        workers=workers,
        chunk_size=chunk_size,
        with_geometry=with_geometry,
    ):
        images[i : i + len(labs)] = imgs
        labels[i : i + len(labs)] = labs
        if gs is not None:
            geoms.extend(gs)
        i += len(labs)
    if with_geometry:
        return images, labels, geoms
    return images, labels


# ---------------------------------------------------------------------------------------- oracle


def _flood(mask: np.ndarray, start: tuple[int, int]) -> np.ndarray:
    """4-connected flood fill of ``mask`` from ``start``; returns the visited mask."""
    H, W = mask.shape
    flat = mask.ravel()
    seen = np.zeros(H * W, dtype=bool)
    s = start[0] * W + start[1]
    if not flat[s]:
        return seen.reshape(H, W)
    stack = [s]
    seen[s] = True
    while stack:
        q = stack.pop()
        r, c = divmod(q, W)
        for nb, okb in ((q - W, r > 0), (q + W, r < H - 1), (q - 1, c > 0), (q + 1, c < W - 1)):
            if okb and flat[nb] and not seen[nb]:
                seen[nb] = True
                stack.append(nb)
    return seen.reshape(H, W)


def pathfinder_layers(geom: PathfinderGeometry, scale: int = 8) -> np.ndarray:
    """Boolean raster (R*scale, R*scale) of every snake's centre-line (paddles and gaps), drawn
    as a band of one fine pixel around the line (always 4-connected)."""
    N = geom.resolution * scale
    c = (np.arange(N) + 0.5) / scale
    radius = 1.0 / scale
    layer = np.zeros((N, N), dtype=bool)
    for a, b in geom.pieces:
        lo = np.clip(np.floor((np.minimum(a, b) - radius - 1) * scale).astype(int), 0, N)
        hi = np.clip(np.ceil((np.maximum(a, b) + radius + 1) * scale).astype(int), 0, N)
        if lo[0] >= hi[0] or lo[1] >= hi[1]:
            continue
        d2 = _point_seg_d2(c[lo[0] : hi[0], None], c[None, lo[1] : hi[1]], a[0], a[1], b[0], b[1])
        layer[lo[0] : hi[0], lo[1] : hi[1]] |= d2 <= radius * radius
    return layer


def pathfinder_oracle(geom: PathfinderGeometry, scale: int = 8) -> int:
    """1 iff a flood fill over the snakes' centre-lines connects the two markers, else 0.

    The generator keeps centre-lines of different snakes at least ``thickness + 2 * margin -
    separation_slack`` apart up to the raster error (under one pixel); at ``scale`` 8 the bands
    of different snakes are then never 4-adjacent, so a fill started at the origin marker reaches
    the terminal marker iff both lie on the same snake.
    """
    layer = pathfinder_layers(geom, scale)
    N = layer.shape[0]

    def px(pt):
        return tuple(np.clip(np.floor(np.asarray(pt) * scale).astype(int), 0, N - 1))

    seen = _flood(layer, px(geom.origin))
    return int(seen[px(geom.terminal)])


# ------------------------------------------------------------------------------- writing / reading


def _png_bytes(img: np.ndarray) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img, mode="L").save(buf, format="PNG")
    return buf.getvalue()


class PathfinderWriter:
    """Write generated images in our shard layout (``fmt="npy"``) or LRA's PNG layout (``"lra"``).

    npy layout::

        <dir>/shards/imgs_00000.npy    (k, R, R) uint8
        <dir>/shards/labels_00000.npy  (k,) uint8
        <dir>/meta.json                written last: its presence marks a complete dataset

    lra layout (what the official release contains)::

        <dir>/imgs/<b>/sample_<i>.png                     (b = i // 1000)
        <dir>/metadata/<b>.npy    text lines "imgs/<b> sample_<i>.png <i> <label> ..."
        <dir>/meta.json
    """

    def __init__(self, directory: Path, params: PathfinderParams, fmt: str = "npy", shard_size: int = 10_000):
        if fmt not in ("npy", "lra"):
            raise ValueError(f"fmt must be 'npy' or 'lra', got {fmt!r}")
        self.dir, self.params, self.fmt, self.shard_size = Path(directory), params, fmt, shard_size
        if (self.dir / "meta.json").exists():
            raise FileExistsError(f"{self.dir} already holds a dataset (meta.json); remove it first")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.n = 0
        self.n_shards = 0
        self._sha256: list[list[str]] = []  # [imgs, labels] of each shard, for meta.json
        self._imgs: list[np.ndarray] = []
        self._labels: list[np.ndarray] = []
        self._buffered = 0
        self._meta_lines: dict[int, list[str]] = {}

    def add(self, images: np.ndarray, labels: np.ndarray) -> None:
        if self.fmt == "npy":
            self._imgs.append(images)
            self._labels.append(labels)
            self._buffered += len(labels)
            while self._buffered >= self.shard_size:
                self._flush(self.shard_size)
        else:
            p = self.params
            for img, y in zip(images, labels):
                i = self.n
                batch = i // 1000
                atomic_write_bytes(self.dir / "imgs" / str(batch) / f"sample_{i}.png", _png_bytes(img))
                self._meta_lines.setdefault(batch, []).append(
                    f"imgs/{batch} sample_{i}.png {i} {int(y)} {p.continuity} {p.contour_length} "
                    f"{p.distractor_length} {p.paddle_length} {p.thickness} {p.margins[0]} "
                    f"{len(p.paddle_contrasts)}"
                )
                self.n += 1
                if (i + 1) % 1000 == 0:
                    self._write_meta(batch)
            return
        self.n += len(labels)

    def _flush(self, count: int) -> None:
        imgs = np.concatenate(self._imgs) if self._imgs else np.zeros((0,), np.uint8)
        labels = np.concatenate(self._labels) if self._labels else np.zeros((0,), np.uint8)
        atomic_save_npy(self.dir / "shards" / f"imgs_{self.n_shards:05d}.npy", imgs[:count])
        atomic_save_npy(self.dir / "shards" / f"labels_{self.n_shards:05d}.npy", labels[:count])
        self._sha256.append([array_sha256(imgs[:count]), array_sha256(labels[:count])])
        self.n_shards += 1
        self._imgs, self._labels = [imgs[count:]], [labels[count:]]
        self._buffered = len(labels) - count

    def _write_meta(self, batch: int) -> None:
        lines = self._meta_lines.pop(batch, [])
        if lines:
            atomic_write_text(self.dir / "metadata" / f"{batch}.npy", "\n".join(lines) + "\n")

    def close(self, info: dict) -> Path:
        if self.fmt == "npy":
            if self._buffered:
                self._flush(self._buffered)
        else:
            for batch in list(self._meta_lines):
                self._write_meta(batch)
        meta = {
            "generator": "ssmrepro.data.pathfinder",
            "version": GENERATOR_VERSION,
            "format": self.fmt,
            "n": self.n,
            "shards": self.n_shards,
            **({"shard_sha256": self._sha256} if self.fmt == "npy" else {}),
            "params": dataclasses.asdict(self.params),
            **info,
        }
        atomic_write_text(self.dir / "meta.json", json.dumps(meta, indent=1, sort_keys=True))
        return self.dir


def write_pathfinder(
    directory: Path,
    n: int,
    resolution: int = 32,
    seed: int = 0,
    *,
    params: PathfinderParams | None = None,
    workers: int = 1,
    fmt: str = "npy",
    shard_size: int = 10_000,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Generate ``n`` images and write them to ``directory`` (see PathfinderWriter for layouts)."""
    params = params or lra_params(resolution)
    w = PathfinderWriter(directory, params, fmt=fmt, shard_size=shard_size)
    for imgs, labels, _ in iter_pathfinder(n, params.resolution, seed, params=params, workers=workers):
        w.add(imgs, labels)
        if progress is not None:
            progress(w.n)
    return w.close({"seed": seed, "resolution": params.resolution})


MAX_METADATA_BYTES = 1 << 24  # (parsed, 60 MB of lines took 1.1 GB)


def _read_metadata_file(path: Path) -> list[tuple[int, list[str]]]:
    """``(line number, fields)`` of each non-blank line (row of a numpy array) of a metadata
    file; the numbers count blank lines too (an error after one named the line above it). A file
    over ``MAX_METADATA_BYTES`` is refused (one of 300 MB was read whole and split into
    gigabytes of Python strings; the LRA's hold about 60 kB)."""
    import io

    from ..util import NotSmallFile, read_small

    try:
        raw = read_small(path, MAX_METADATA_BYTES, follow_links=True)
    except NotSmallFile as err:
        raise ValueError(f"{path}: not a Pathfinder metadata file ({err})") from None
    if raw.startswith(b"\x93NUMPY"):
        try:
            arr = load_array(io.BytesIO(raw), allow_pickle=False)
        except ValueError as err:  # (damaged: numpy's words named no file)
            raise ValueError(f"{path}: a damaged numpy metadata file ({err})") from None
        return [(i, [str(v) for v in row]) for i, row in enumerate(np.atleast_2d(arr), start=1)]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:  # it failed with the bare message 'utf-8'
        line = raw.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text (byte {raw[err.start]:#04x})") from None
    return [(i, line.split()) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _metadata_files(directory: Path) -> list[Path]:
    files = [f for f in (directory / "metadata").iterdir() if f.is_file() and not f.name.startswith(".")]

    def key(f: Path):
        # ASCII digits: a file '²' (str.isdigit, not int()-readable) raised 'invalid literal for int()'
        digits = f.stem.isascii() and f.stem.isdigit()
        return (0, int(f.stem), "") if digits else (1, 0, f.stem)

    return sorted(files, key=key)


def _lra_entries(directory: Path) -> list[tuple[Path, int]]:
    """(image path, label) for every metadata line, in metadata order, minus the blacklist."""
    res_name, diff_name = directory.parent.name, directory.name
    out = []
    for mf in _metadata_files(directory):
        for lineno, fields in _read_metadata_file(mf):
            if len(fields) < 4:
                raise ValueError(f"{mf}:{lineno}: expected >= 4 fields, got {fields!r}")
            rel = f"{fields[0]}/{fields[1]}"
            if Path(rel).is_absolute() or ".." in Path(rel).parts:  # an image read from
                # outside the dataset's folder (any PNG there, under this line's label)
                raise ValueError(f"{mf}:{lineno}: image path {rel!r} leaves the folder "
                                 f"{directory}")
            if (res_name, diff_name, rel) in BLACKLIST:
                continue
            try:
                label = float(fields[3])
            except ValueError:
                raise ValueError(f"{mf}:{lineno}: label {fields[3]!r} is not a number") from None
            if not (math.isfinite(label) and label == int(label)):  # 'inf' raised OverflowError
                # (a traceback), 0.5 was cut to class 0 without a word
                raise ValueError(f"{mf}:{lineno}: label {fields[3]!r} is not a whole number")
            out.append((directory / fields[0] / fields[1], int(label)))
    return out


def pathfinder_files(directory: Path) -> list[Path]:
    """Files whose identity defines the dataset in ``directory`` (for the cache key)."""
    directory = Path(directory)
    if (directory / "shards").is_dir() and (directory / "meta.json").exists():
        return [directory / "meta.json", *sorted((directory / "shards").glob("*.npy"))]
    entries = _lra_entries(directory)
    return [*_metadata_files(directory), *(p for p, _ in entries)]


MAX_PNG_PIXELS = 1 << 20  # (the release's largest images, Path-X's, have 16,384 pixels)


def _read_png(path: Path) -> np.ndarray | None:
    """One image of the LRA layout, gray levels (R, R); None for the release's empty files.
    DamagedSource naming the file when it is no image PIL reads (cut short, garbage: PIL's
    UnidentifiedImageError was a traceback) or is larger than any Pathfinder image."""
    from PIL import Image

    if os.path.getsize(path) == 0:
        return None
    try:
        with Image.open(path) as im:
            if im.size[0] * im.size[1] > MAX_PNG_PIXELS:  # (decoded whole before: a PNG of
                # 30,000 x 30,000 pixels took 900 MB a file)
                raise DamagedSource(f"{path}: an image of {im.size[0]} x {im.size[1]} pixels, "
                                    "larger than any Pathfinder image")
            return np.asarray(im.convert("L"), dtype=np.uint8)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        if isinstance(err, DamagedSource):
            raise
        raise DamagedSource(f"{path}: not an image PIL can read ({type(err).__name__}: "
                            f"{err})") from None


def array_sha256(a: np.ndarray) -> str:
    """SHA-256 of an array's values (C order), as the generator wrote them."""
    return hashlib.sha256(np.ascontiguousarray(a).data).hexdigest()


def _check_shards(directory: Path, imgs: list[np.ndarray], labels: list[np.ndarray]) -> None:
    """ValueError naming ``directory`` unless its shards are what the generator writes: pairs
    of uint8 images (k, R, R) and integer labels (k,), as many images and labels as meta.json's
    ``n`` and ``shards`` say. A labels shard cut short failed with numpy's 'cannot reshape array
    of size 12288 into shape (5,newaxis)', and a stray labels shard made the images be read at
    half their size; float images (x1000) were trained on without a word."""
    import json

    try:  # an unreadable meta.json is the provenance's warning (lra.data_info), not fatal
        meta = json.loads((directory / "meta.json").read_text())
    except (OSError, ValueError, RecursionError):
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    what = f"{directory}: damaged generated Pathfinder shards"
    if len(imgs) != len(labels):
        raise DamagedSource(f"{what}: {len(imgs)} image shards but {len(labels)} label shards")
    for i, (x, y) in enumerate(zip(imgs, labels)):
        if x.dtype != np.uint8 or x.ndim != 3 or x.shape[1] != x.shape[2]:
            raise DamagedSource(f"{what}: imgs_{i:05d}.npy is {x.dtype} {list(x.shape)}, not uint8 "
                             "(k, R, R) images")
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer) or len(y) != len(x):
            raise DamagedSource(f"{what}: labels_{i:05d}.npy is {y.dtype} {list(y.shape)}, not "
                             f"{len(x)} integer labels (one per image of imgs_{i:05d}.npy)")
    n, shards = meta.get("n"), meta.get("shards")
    total = sum(len(x) for x in imgs)
    if isinstance(shards, int) and shards != len(imgs):
        raise DamagedSource(f"{what}: {len(imgs)} shards, meta.json says {shards}")
    if isinstance(n, int) and n != total:
        raise DamagedSource(f"{what}: {total} images, meta.json says {n}")
    sums = meta.get("shard_sha256")  # what the generator wrote (folders before it have none):
    # two image shards swapped (or one from another generation) were read beside the other
    # shard's labels, half the labels wrong, without a word
    if isinstance(sums, list) and len(sums) == len(imgs):
        for i, (x, y, want) in enumerate(zip(imgs, labels, sums)):
            for name, arr, digest in (("imgs", x, want[0]), ("labels", y, want[1])):
                if array_sha256(arr) != digest:
                    raise DamagedSource(f"{what}: {name}_{i:05d}.npy is not the shard the generator "
                                     "wrote there (its SHA-256 is not meta.json's: swapped, "
                                     "edited or from another generation)")


def _load_shard(directory: Path, path: Path) -> np.ndarray:
    """One generated shard, or a ValueError naming it: numpy's own words named no file (a text
    file: 'This file contains pickled (object) data ...', a shard cut short: 'Failed to read all
    data for array ... (file seems not fully written?)', an object array: 'Object arrays cannot
    be loaded when allow_pickle=False')."""
    import pickle

    try:
        return load_array(path)
    except (ValueError, OSError, EOFError, pickle.UnpicklingError) as err:
        raise DamagedSource(f"{directory}: damaged generated Pathfinder shards: {path.name} is not "
                         f"a numpy array file the generator wrote ({err})") from None


def read_pathfinder_dir(directory: Path, threads: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Read a Pathfinder difficulty folder in either layout.

    Returns (images (N, R, R) uint8, labels (N,)).

    LRA layout: ``metadata/<k>.npy`` are text files (one line per image: field 0 the sub-folder,
    field 1 the file name, field 3 the label) next to ``imgs/<k>/sample_<i>.png``; the known empty
    file is skipped. Our layout: ``shards/imgs_*.npy`` + ``shards/labels_*.npy`` + ``meta.json``.
    """
    directory = Path(directory)
    if (directory / "shards").is_dir() and (directory / "meta.json").exists():
        imgs = [_load_shard(directory, f) for f in sorted((directory / "shards").glob("imgs_*.npy"))]
        labels = [_load_shard(directory, f)
                  for f in sorted((directory / "shards").glob("labels_*.npy"))]
        if not imgs:  # a FileNotFoundError here was 'cannot use: FileNotFoundError', no file named
            raise DamagedSource(f"{directory}: damaged generated Pathfinder shards: no imgs_*.npy "
                             "in shards/ beside its meta.json (a partial copy?)")
        _check_shards(directory, imgs, labels)
        return np.concatenate(imgs), np.concatenate(labels).astype(np.int64)
    if not (directory / "metadata").is_dir():
        raise FileNotFoundError(f"{directory} has neither metadata/ (LRA layout) nor shards/ (ours)")
    entries = _lra_entries(directory)
    with ThreadPoolExecutor(max(1, threads)) as ex:
        decoded = list(ex.map(_read_png, [p for p, _ in entries], chunksize=256))
    keep = [i for i, im in enumerate(decoded) if im is not None]  # empty files are skipped
    if not keep:
        raise DamagedSource(f"no readable images in {directory}")
    shapes = {decoded[i].shape for i in keep}
    if len(shapes) != 1:  # (named: a traceback's ValueError before)
        count = Counter(decoded[i].shape for i in keep)
        (common, n_common), = count.most_common(1)
        odd = min(count, key=count.__getitem__)  # an image of the rarest shape (one of the
        # others named a whole image where the folder's first was the odd one)
        first = next(entries[i][0] for i in keep if decoded[i].shape == odd)
        raise DamagedSource(f"{directory}: images of different shapes {sorted(shapes)} (e.g. "
                            f"{first}, {odd}, where {n_common:,} are {common})")
    images = np.stack([decoded[i] for i in keep])
    labels = np.array([entries[i][1] for i in keep], dtype=np.int64)
    return images, labels
