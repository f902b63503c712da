"""Where the scale factors of block-scaled `mma` live: `scale-a-data`, `scale-b-data` and their
`{byte-id, thread-id}` selectors (PTX ISA 9.7.14.3, "Block Scaling for mma.sync", file 004).

The ISA fixes the shapes (Table 35: scale_A is M x chunks, scale_B chunks x N, chunks = 1/2/4
for .scale_vec::1X/2X/4X, each chunk a contiguous K/chunks slice of a row of A or a column of B)
and which selector values are defined (Table 37), but gives the lane and byte of each scale only
as figures (43-45), which the excerpts do not hold. The positions used here were MEASURED BY
OTHERS, NOT BY US: a public sm_120 kernel whose author probed them on hardware; they agree with
CUTLASS's SFALayout/SFBLayout for SM120 (row (lane >> 2) + 8 * (lane & 1), lane bit 1 a don't-care;
column lane >> 2). No GPU we can reach runs these instructions (sm_120a/sm_121a only), so nothing
in this repository has confirmed them:

* scale_A of row m (0..15) is in the lane 4 * (m % 8) + 2 * thread_id + (m // 8): thread-id-a
  picks the lower (lanes 4g, 4g+1) or upper (4g+2, 4g+3) thread pair of each quad, as the ISA says;
* scale_B of column n (0..7) is in the lane 4 * n + thread_id: thread-id-b picks one lane per quad;
* in that lane's register, chunk j is byte byte_id + j: one byte (1X, byte-id 0..3), a byte pair
  (2X, byte-id 0 or 2), all four bytes (4X, byte-id 0).

Table 37's ranges, as read here (thread-id-a 0..1 and thread-id-b 0..3 for every size; our copy
of the table leaves those cells blank for 2X/4X), are exactly the immediates ptxas 13.0 accepts
(tests/test_scale_fragments.py). Chunks split the logical K, so the sparse forms (K doubled) have
blocks twice as long: 64 for sparse mxf8f6f4 1X, as CUTLASS's SM120 sparse atoms (SFVecSize 64).

Everything is data (`SCALE_VECS`, `_LANE`) plus one derivation (`scale_layout`), so emulator,
packing and code generation cannot disagree. Like the fragment tables, the canonical layout is
linear in the lane bits (`scale_linear`), which is the form code generation emits.

Scale values (`scale_values`): .ue8m0 is 2**(e - 127) with 0xFF NaN (ml_dtypes float8_e8m0fnu);
.ue4m3 is the float8_e4m3fn value of the byte with its sign bit cleared: a set sign bit is ignored
rather than refused, because the ISA gives .ue4m3 no sign and a public sm_120 kernel's notes report
exactly this behaviour (also measured by others; 0x7F is NaN, subnormals are values).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from tilemma.compiler.core.elements import BY_PTX, SCALES, ptx_names
from tilemma.compiler.layouts.linear_layout import LinearLayout

LANES = 32
LANE_BITS = 5
BYTES = 4  # a scale-a-data / scale-b-data register is one .b32: four 8-bit scales

__all__ = [
    "SCALE_VECS", "STYPES", "ScaleVec", "default_scale_vec", "extent", "pack_scales", "scale_lane",
    "scale_layout", "scale_linear", "scale_values", "unpack_scales", "valid_selectors",
]  # fmt: skip


@dataclass(frozen=True)
class ScaleVec:
    """One .scale_vec_size: scales per row of A / column of B (Table 35) and the byte-ids Table 37
    defines; chunk j of a row lives in byte byte_id + j."""

    name: str
    chunks: int
    byte_ids: tuple[int, ...]


SCALE_VECS: dict[str, ScaleVec] = {
    "1X": ScaleVec("1X", 1, (0, 1, 2, 3)),
    "2X": ScaleVec("2X", 2, (0, 2)),
    "4X": ScaleVec("4X", 4, (0,)),
}
# Default .scale_vec_size when the opcode omits it (000: mxf4 -> 2X, mxf8f6f4 -> 1X; mxf4nvf4 has
# no default).
_DEFAULT_SCALE_VEC = {"mxf4": "2X", "mxf8f6f4": "1X"}
STYPES = ptx_names(SCALES)  # ue8m0, ue4m3

# operand -> (extent: rows of scale_A / columns of scale_B, lane weight of each bit of the row or
# column index, lane weight of each bit of thread-id (Table 37: thread-id-a 0..1, thread-id-b
# 0..3; the 2X/4X rows of Table 37 leave these cells to the 1X row)).
_LANE: dict[str, tuple[int, tuple[int, ...], tuple[int, ...]]] = {
    "a": (16, (4, 8, 16, 1), (2,)),  # lane = 4 * (m % 8) + (m // 8) + 2 * tid
    "b": (8, (4, 8, 16), (1, 2)),  # lane = 4 * n + tid
}


def _operand(operand: str) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    if operand not in _LANE:
        raise ValueError(f"operand must be 'a' (scale_A) or 'b' (scale_B), not {operand!r}")
    return _LANE[operand]


def _scale_vec(scale_vec: str) -> ScaleVec:
    if scale_vec not in SCALE_VECS:
        raise ValueError(f"unknown .scale_vec_size {scale_vec!r} (known: {', '.join(SCALE_VECS)})")
    return SCALE_VECS[scale_vec]


def default_scale_vec(kind: str, scale_vec: str | None) -> str:
    """The .scale_vec_size an opcode means: its own, or the ISA's default for `kind`."""
    if scale_vec is not None:
        return _scale_vec(scale_vec).name
    if kind not in _DEFAULT_SCALE_VEC:
        raise ValueError(f".kind::{kind} has no default .scale_vec_size; it must be given")
    return _DEFAULT_SCALE_VEC[kind]


def extent(operand: str) -> int:
    """Rows of scale_A (M = 16) or columns of scale_B (N = 8)."""
    return _operand(operand)[0]


def valid_selectors(scale_vec: str, operand: str) -> tuple[tuple[int, int], ...]:
    """Every (byte_id, thread_id) Table 37 defines for this operand; others are undefined."""
    sv = _scale_vec(scale_vec)
    threads = 1 << len(_operand(operand)[2])
    return tuple((b, t) for b in sv.byte_ids for t in range(threads))


def _check(operand: str, scale_vec: str, byte_id: int, thread_id: int) -> None:
    ok = valid_selectors(scale_vec, operand)
    if (byte_id, thread_id) not in ok:
        bids = sorted({b for b, _ in ok})
        tids = sorted({t for _, t in ok})
        raise ValueError(
            f"{{byte-id-{operand}, thread-id-{operand}}} = {{{byte_id}, {thread_id}}} is undefined for "
            f".scale_vec::{scale_vec} (Table 37: byte-id in {bids}, thread-id in {tids})"
        )


def scale_lane(operand: str, index: int | np.ndarray, thread_id: int) -> int | np.ndarray:
    """The lane whose register holds the scales of row `index` of A / column `index` of B."""
    _, index_w, thread_w = _operand(operand)
    idx = np.asarray(index)
    lane = sum(((idx >> i) & 1) * w for i, w in enumerate(index_w))
    lane = lane + sum(((thread_id >> i) & 1) * w for i, w in enumerate(thread_w))
    return int(lane) if np.ndim(index) == 0 else lane


@functools.cache
def _layout(operand: str, scale_vec: str, byte_id: int, thread_id: int) -> tuple[np.ndarray, np.ndarray]:
    _check(operand, scale_vec, byte_id, thread_id)
    size = extent(operand)
    chunks = SCALE_VECS[scale_vec].chunks
    index = np.full((LANES, BYTES), -1, np.int64)
    chunk = np.full((LANES, BYTES), -1, np.int64)
    for i in range(size):
        lane = scale_lane(operand, i, thread_id)
        for j in range(chunks):
            assert index[lane, byte_id + j] < 0, (operand, scale_vec, byte_id, thread_id, i, j)
            index[lane, byte_id + j], chunk[lane, byte_id + j] = i, j
    for a in (index, chunk):
        a.setflags(write=False)
    return index, chunk


def scale_layout(operand: str, scale_vec: str, byte_id: int = 0, thread_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(index, chunk), each int [32, 4]: byte `b` of lane `l`'s scale register must hold the scale
    of row index[l, b] of A (operand 'a') or column index[l, b] of B ('b'), K-chunk chunk[l, b];
    -1 where the instruction ignores the byte. ValueError for selectors Table 37 leaves undefined."""
    return _layout(operand, scale_vec, int(byte_id), int(thread_id))


@functools.cache
def scale_linear(operand: str, scale_vec: str) -> tuple[tuple[int, ...], int]:
    """(weights, nbytes) for the canonical selectors {0, 0}: lane l's register holds, in bytes
    0..nbytes-1, chunks 0..nbytes-1 of row/column sum_i bit_i(l) * weights[i] (offset 0).

    The (lane, byte) -> (index, chunk) layout is fitted on the bytes the instruction reads
    (`LinearLayout.fit`, checked on every one) and must be the product of a lane part (index)
    and a byte part (chunk = byte). Lane bits that only select ignored lanes get weight 0, so
    every lane computes an in-range index (a copy of a live lane's) and a load through the form
    is always in bounds."""
    index, chunk = scale_layout(operand, scale_vec, 0, 0)
    nbytes = SCALE_VECS[scale_vec].chunks
    what = f"scale_{operand} layout of .scale_vec::{scale_vec}"
    lay = LinearLayout.fit_table({"index": index, "chunk": chunk}, ("lane", "byte"), what=what)
    split = lay.additive_split()
    live = index >= 0
    ok = split is not None and split.const == {"index": 0, "chunk": 0}
    ok = ok and split.weights["index"]["byte"] == (0, 0) and not any(split.weights["chunk"]["lane"])
    ok = ok and split.weights["chunk"]["byte"] == (1, 2)[: nbytes.bit_length() - 1] + (0, 0)[nbytes.bit_length() - 1 :]
    ok = ok and (live[:, :nbytes] == live[:, :1]).all() and not live[:, nbytes:].any()
    if not ok:
        raise ValueError(f"{what} is not linear in the lane bits with chunk = byte: {lay}")
    return split.weights["index"]["lane"], nbytes


def _bits_matrix(operand: str, scale_vec: str, scales_bits) -> np.ndarray:
    shape = (extent(operand), _scale_vec(scale_vec).chunks)
    s = np.asarray(scales_bits)
    if s.shape != shape:
        what = "[M, chunks] (scale_A)" if operand == "a" else "[N, chunks] (scale_B transposed)"
        raise ValueError(f"scale_{operand} bits must be {what} = {shape}, got {s.shape}")
    if s.dtype.kind not in "ui" or (s.size and (int(s.min()) < 0 or int(s.max()) > 0xFF)):
        raise ValueError("scale bits must be integers 0..255 (raw .ue8m0 / .ue4m3 bytes)")
    return s.astype(np.uint32)


def pack_scales(operand: str, scale_vec: str, scales_bits, byte_id: int = 0, thread_id: int = 0,
                background=None) -> np.ndarray:
    """The [32] uint32 scale registers holding `scales_bits`: raw bytes [M, chunks] of scale_A for
    'a', [N, chunks] (scale_B transposed, indexed [column, chunk]) for 'b'. Bytes the selectors
    leave unread keep `background` ([32] words; zero by default)."""
    index, chunk = scale_layout(operand, scale_vec, byte_id, thread_id)
    bits = _bits_matrix(operand, scale_vec, scales_bits)
    words = np.zeros(LANES, np.uint32) if background is None else np.array(background, np.uint32).reshape(LANES)
    for b in range(BYTES):
        live = index[:, b] >= 0
        shift = np.uint32(8 * b)
        words[live] = (words[live] & ~(np.uint32(0xFF) << shift)) | (bits[index[live, b], chunk[live, b]] << shift)
    return words


def unpack_scales(operand: str, scale_vec: str, words, byte_id: int = 0, thread_id: int = 0) -> np.ndarray:
    """Inverse of `pack_scales`: the raw scale bytes [M or N, chunks] (uint8) the instruction reads
    from the lanes' [32] scale registers with these selectors."""
    index, chunk = scale_layout(operand, scale_vec, byte_id, thread_id)
    w = np.asarray(words).astype(np.uint32).reshape(LANES)
    out = np.zeros((extent(operand), SCALE_VECS[scale_vec].chunks), np.uint8)
    for b in range(BYTES):
        live = index[:, b] >= 0
        out[index[live, b], chunk[live, b]] = (w[live] >> np.uint32(8 * b)) & np.uint32(0xFF)
    return out


def scale_values(bits, stype: str) -> np.ndarray:
    """float64 values of raw scale bytes: .ue8m0 2**(e - 127) (0xFF NaN); .ue4m3 the e4m3 value of
    the byte with the sign bit ignored (see the module docstring: measured by others)."""
    b = np.asarray(bits).astype(np.uint8)
    if stype not in STYPES:
        raise ValueError(f"unknown scale type {stype!r} (known: {', '.join(STYPES)})")
    if stype == "ue4m3":  # held in e4m3, whose sign bit it does not have
        b = b & np.uint8(0x7F)
    return b.view(BY_PTX[stype].dtype).astype(np.float64)
