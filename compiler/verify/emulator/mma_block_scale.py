"""The scale operands of block-scaled mma (`.block_scale` with .kind::mxf8f6f4, mxf4, mxf4nvf4):
which register bytes hold SF_A and SF_B for given selectors, their values, and the scale of
every element of A and B."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from tilemma.compiler.layouts import scale_fragments
from tilemma.compiler.verify.emulator.machine import EmulationError


@functools.cache
def _scale_gather(operand: str, scale_vec: str, byte_id: int, thread_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane, bit shift) of the byte holding each (row or column, chunk) scale, inverted once from
    `scale_fragments.scale_layout` (the source of truth), so decoding a call is one gather."""
    index, chunk = scale_fragments.scale_layout(operand, scale_vec, byte_id, thread_id)
    size, chunks = scale_fragments.extent(operand), scale_fragments.SCALE_VECS[scale_vec].chunks
    lane = np.full((size, chunks), -1, np.int64)
    shift = np.zeros((size, chunks), np.uint32)
    for ln, byte in np.argwhere(index >= 0):
        i, j = index[ln, byte], chunk[ln, byte]
        assert lane[i, j] < 0, (operand, scale_vec, byte_id, thread_id, i, j)
        lane[i, j], shift[i, j] = ln, 8 * byte
    assert (lane >= 0).all(), (operand, scale_vec, byte_id, thread_id)
    return lane, shift


@dataclass(frozen=True)
class _BlockScale:
    """The scale operands of a `.block_scale` variant: which bytes hold SF_A / SF_B for given
    selectors, what they mean, and how many K elements each one scales."""

    scale_vec: str  # "1X" / "2X" / "4X" (the ISA default filled in)
    stype: str  # "ue8m0" / "ue4m3"
    block: int  # K elements per scale: the logical K (dense A's) / chunks

    def check(self, operand: str, ids) -> tuple[int, int]:
        """(byte_id, thread_id) as ints; EmulationError where Table 37 leaves them undefined."""
        try:
            bid, tid = (int(x) for x in np.ravel(ids))
        except (TypeError, ValueError):
            raise EmulationError(f"scale selectors of {operand.upper()} must be (byte_id, thread_id), "
                                 f"got {ids!r}") from None
        try:
            scale_fragments.scale_layout(operand, self.scale_vec, bid, tid)
        except ValueError as e:
            raise EmulationError(str(e)) from None
        return bid, tid

    def factors(self, operand: str, words: np.ndarray, ids) -> np.ndarray:
        """[W, 32] scale words and the selectors ((byte_id, thread_id), or [W, 2] per warp) ->
        [W, M or N, chunks] scale values (float64)."""
        words = np.asarray(words).astype(np.uint32, copy=False)
        ids = np.asarray(ids, dtype=np.int64)
        per_warp = ids.reshape(-1, 2) if ids.ndim == 2 else np.broadcast_to(ids, (words.shape[0], 2))
        size, chunks = scale_fragments.extent(operand), scale_fragments.SCALE_VECS[self.scale_vec].chunks
        out = np.empty((words.shape[0], size, chunks))
        for sel in np.unique(per_warp, axis=0):
            bid, tid = self.check(operand, sel)
            lane, shift = _scale_gather(operand, self.scale_vec, bid, tid)
            warps = np.flatnonzero((per_warp == sel).all(1))
            raw = (words[warps][:, lane] >> shift) & np.uint32(0xFF)
            out[warps] = scale_fragments.scale_values(raw, self.stype)
        return out

    def per_element(self, sa: np.ndarray, sb: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
        """The scale of every element of A and B: [W, 1, M, K], [W, 1, K, N], and their type."""
        sa_k = np.repeat(sa, self.block, axis=-1)[:, None]
        sb_k = np.repeat(sb.transpose(0, 2, 1), self.block, axis=-2)[:, None]
        return sa_k, sb_k, self.stype
