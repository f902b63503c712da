"""mma.sp's A operand: each warp's metadata words decoded into the positions of the kept elements
(refusing what the ISA leaves undefined), and the compressed A decompressed, so that the dense
arithmetic runs on it."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from tilemma.compiler.layouts import sparse_fragments
from tilemma.compiler.verify.emulator.machine import EmulationError


class _MetadataError(EmulationError):
    """Sparse metadata the ISA leaves undefined, found in warp `warp` of a call."""

    def __init__(self, warp: int, message: str):
        self.warp = warp
        super().__init__(message)


@functools.cache
def _metadata_gather(shape: str, atype: str, selector: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane, bit shift) of the `e` field holding each (row, field) of A's M x fields_per_row
    two-bit unit indices, inverted once from `sparse_fragments.metadata_layout` (the table the
    H200 confirmed), so decoding a call is one gather for all warps."""
    lay = sparse_fragments.metadata_layout(shape, atype, selector)
    m = lay.spec.mnk[0]
    lane = np.full((m, lay.spec.fields_per_row), -1, np.int64)
    shift = np.zeros(lane.shape, np.uint32)
    live = np.argwhere(lay.row >= 0)
    for ln, v in live:
        r, f = lay.row[ln, v], lay.field[ln, v]
        assert lane[r, f] < 0, (shape, atype, selector, r, f)
        lane[r, f], shift[r, f] = ln, sparse_fragments.FIELD_BITS * v
    assert (lane >= 0).all(), (shape, atype, selector)
    return lane, shift


@dataclass(frozen=True)
class _SparseA:
    """`mma.sp`'s A operand: the compressed M x K/2 values plus each warp's metadata give the
    dense M x K A that the shared arithmetic multiplies (`sparse_fragments` is the source of
    truth for the layouts; this only vectorizes its `metadata_indices` over warps)."""

    spec: sparse_fragments.SparseSpec
    shape: str
    atype: str
    ordered: bool  # ::ordered_metadata: decreasing pairs are undefined, so refused

    def check_selector(self, selector: int) -> None:
        try:
            sparse_fragments.check_selector(self.spec, selector)
        except ValueError as e:
            raise EmulationError(str(e)) from None

    def indices(self, e_words: np.ndarray, selector: int) -> np.ndarray:
        """[W, 32] metadata words -> [W, M, K/2] element indices of the compressed A (position
        of each kept element in its chunk); `_MetadataError` where the ISA leaves it undefined."""
        self.check_selector(selector)
        spec, pat = self.spec, self.spec.pattern
        lane, shift = _metadata_gather(self.shape, self.atype, selector)
        e = np.asarray(e_words).astype(np.uint32, copy=False)
        units = ((e[:, lane] >> shift) & np.uint32(3)).astype(np.int64)  # [W, M, fields]
        w, m = units.shape[:2]
        eb, ub = spec.elem_bits, spec.unit_bits
        if eb >= ub:  # an element is eb // ub units (tf32: two, which must form one element)
            r = eb // ub
            u = units.reshape(w, m, -1, r)
            whole = (u == u[..., :1] + np.arange(r)).all(-1) & (u[..., 0] % r == 0)
            if not whole.all():
                wi, row, col = (int(x) for x in np.argwhere(~whole)[0])
                raise _MetadataError(wi, f"metadata units {u[wi, row, col].tolist()} of A row {row}, compressed "
                                     f"column {col} do not select one whole .{self.atype} element (only "
                                     "0b0100 and 0b1110 are meaningful)")
            idx = u[..., 0] // r
        else:  # a unit is ub // eb elements (4-bit pairs)
            r = ub // eb
            idx = (units[..., None] * r + np.arange(r)).reshape(w, m, -1)
        if pat.kept_atoms == 2:
            first = idx.reshape(w, m, -1, 2, pat.atom)[..., 0]  # [W, M, chunks, 2]
            bad = first[..., 0] == first[..., 1]
            why = "the same index twice (0b0000, 0b0101, 0b1010, 0b1111 are invalid)"
            if self.ordered and not bad.any():
                bad = first[..., 1] < first[..., 0]
                why = ("decreasing indices, which mma.sp::ordered_metadata leaves undefined (plain mma.sp "
                       "accepts them)")
            if bad.any():
                wi, row, g = (int(x) for x in np.argwhere(bad)[0])
                fields = (2 * g, 2 * g + 1)  # a chunk's two kept units
                src = ", ".join(f"lane {int(lane[row, j])} bits {int(shift[row, j]) + 1}..{int(shift[row, j])}"
                                for j in fields)
                lo = g * pat.chunk
                raise _MetadataError(wi, f"metadata of A row {row}, chunk {g} (columns {lo}..{lo + pat.chunk - 1}) "
                                     f"is {[int(units[wi, row, j]) for j in fields]} ({src}): {why}")
        return idx

    def dense(self, values: np.ndarray, e_words: np.ndarray, selector: int) -> np.ndarray:
        """[W, 1, M, K/2] kept values -> [W, 1, M, K] dense A (`sparse_fragments.decompress`)."""
        idx = self.indices(e_words, selector)
        w, _, m, half = values.shape
        flat = sparse_fragments.decompress(values.reshape(w * m, half), idx.reshape(w * m, half), self.spec.pattern)
        return flat.reshape(w, 1, m, 2 * half)
