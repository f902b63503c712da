"""The pre-compressed 2:4 sparse A format: kept values plus metadata words laid out for wide loads.

A kernel that receives A this way (`tile.sparse_from`) runs `mma.sp` of the large 16-bit sparse
shape, m16n8k32 (.f16 / .bf16, selector 0, metadata from lanes 0 and 1 of each quad), and does no
compression of its own. For a dense A of shape [..., M, K] (any leading batch dimensions):

* K is padded with zero columns to Kp = K rounded up to a multiple of 32 (the instruction's K);
  M is not padded in `values`.
* `values` is [..., M, Kp/2], row-major, of A's own dtype: row r holds the kept elements of dense
  row r in order (chunk by chunk, increasing column within a chunk) — `sparse_fragments.compress`.
  Its m16n8k32 fragment is the dense m16n8k16 A fragment of this matrix, so it loads like a dense A.
* `meta` is [..., ceil(M / 16), ceil(Kp / 128) * 64] uint32. Row t describes rows 16t..16t+15 of A
  (rows past M count as zero rows). Its words come in groups of 64 per 128 columns of K (four k32
  steps): word `64 * (s // 4) + 4 * q + (s % 4)` is the `e` register of lane `4 * (q // 2) + q % 2`
  (q = 0..15: the lanes whose quad position is 0 or 1) for the mma.sp of k32 step s (dense columns
  32s..32s+31) of that 16-row tile, as `sparse_fragments.metadata_words(..., "m16n8k32", T, 0)`
  gives it. So one lane's words for four consecutive k32 steps are 16 contiguous, 16-byte
  aligned bytes: one `ld.global.v4.u32` (or `.v2` for two steps). Steps past Kp (the last group's
  padding) hold `FILLER`, a valid ordered metadata word (indices 0 and 1 in every chunk) whose
  values are zero anyway.

Indices always increase within a chunk, which both `mma.sp` and `mma.sp::ordered_metadata` accept.
"""

from __future__ import annotations

import numpy as np

from tilemma.compiler.core import elements
from tilemma.compiler.layouts import sparse_fragments as sf

SHAPE = "m16n8k32"  # the large 16-bit sparse mma shape this format feeds
TILE_M, TILE_K = 16, 32  # one instruction's A: rows x dense K columns
STEPS_PER_GROUP = 4  # k32 steps whose words a lane keeps contiguous (one 16-byte vector)
META_LANES = 16  # lanes that carry metadata with selector 0 (quad positions 0 and 1)
GROUP_WORDS = META_LANES * STEPS_PER_GROUP  # words per 16-row tile per 128 columns of K
FILLER = 0x44444444  # chunk indices (0, 1) everywhere: valid metadata for all-zero padding
# A's element types (f16, bf16), by the dtype of the arrays that hold them -> PTX spelling.
_PTX = {elements.ELEMENTS[t].dtype.name: elements.ELEMENTS[t].ptx for t in ("f16", "bf16")}
ELEMENTS = tuple(_PTX)  # dtypes of A: float16, bfloat16


def padded_k(k: int) -> int:
    """Kp: K rounded up to the instruction's K (32); `values` has Kp/2 columns."""
    return -(-k // TILE_K) * TILE_K


def values_shape(m: int, k: int) -> tuple[int, int]:
    return m, padded_k(k) // 2


def meta_shape(m: int, k: int) -> tuple[int, int]:
    """(16-row tiles, words per tile) of the metadata of an M x K A."""
    return -(-m // TILE_M), -(-padded_k(k) // (TILE_K * STEPS_PER_GROUP)) * GROUP_WORDS


def meta_word(step: int, lane: int) -> int:
    """Position in a metadata row of lane `lane`'s word for k32 step `step` (lane's quad position
    must be 0 or 1: the others carry no metadata with selector 0)."""
    if lane & 3 >= 2 or not 0 <= lane < 32:
        raise ValueError(f"lane {lane} carries no metadata (selector 0 reads lanes 4g and 4g + 1)")
    q = 2 * (lane >> 2) + (lane & 1)
    return GROUP_WORDS * (step // STEPS_PER_GROUP) + STEPS_PER_GROUP * q + step % STEPS_PER_GROUP


def _lane_table(ptx: str) -> tuple[np.ndarray, np.ndarray]:
    """(row, field) of each 2-bit field of the 16 metadata lanes' words, [16, 16] each (q order)."""
    lay = sf.metadata_layout(SHAPE, ptx, 0)
    lanes = [4 * (q // 2) + q % 2 for q in range(META_LANES)]
    assert (lay.row[lanes] >= 0).all()
    return lay.row[lanes], lay.field[lanes]


def _ptx_type(dtype: np.dtype, what: str) -> str:
    if dtype.name not in ELEMENTS:
        raise ValueError(
            f"{what}: the pre-compressed sparse format holds 16-bit floats ({', '.join(ELEMENTS)}), "
            f"got {dtype.name}"
        )
    return _PTX[dtype.name]


def _group(words: np.ndarray) -> np.ndarray:
    """[tiles, steps, 16 lanes] words -> metadata rows (each lane's 4 steps contiguous)."""
    t, steps, q = words.shape
    return words.reshape(t, steps // STEPS_PER_GROUP, STEPS_PER_GROUP, q).transpose(0, 1, 3, 2).reshape(t, -1)


def _ungroup(meta: np.ndarray) -> np.ndarray:
    """Inverse of `_group`."""
    t = meta.shape[0]
    return meta.reshape(t, -1, META_LANES, STEPS_PER_GROUP).transpose(0, 1, 3, 2).reshape(t, -1, META_LANES)


def compress_a(dense, pattern: str = "2:4", prune: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(values, meta) of a 2:4 sparse A [..., M, K] (layout: the module docstring).

    Raises ValueError naming the first offending group (batch index, row, group, columns) when A
    is not 2:4 sparse; with `prune=True` the two largest magnitudes of every group are kept instead
    (ties to the lower column), as `sparse_fragments.prune`."""
    dense = np.asarray(dense)
    if pattern != "2:4":
        raise ValueError(f"the pre-compressed format is 2:4 (16-bit m16n8k32), not {pattern!r}")
    if dense.ndim < 2:
        raise ValueError(f"compress_a takes a matrix [..., M, K], got shape {dense.shape}")
    ptx = _ptx_type(dense.dtype, "compress_a")
    *lead, m, k = dense.shape
    kp = padded_k(k)
    mt, width = meta_shape(m, k)
    values = np.zeros((*lead, m, kp // 2), dense.dtype)
    meta = np.full((*lead, mt, width), FILLER, np.uint32)
    rows, fields = _lane_table(ptx)
    shifts = (sf.FIELD_BITS * np.arange(sf.FIELDS_PER_WORD)).astype(np.uint32)
    for at in np.ndindex(*lead):
        a = np.zeros((mt * TILE_M, kp), dense.dtype)
        a[:m, :k] = dense[at]
        if prune:
            a = sf.prune(a, pattern)
        try:
            vals, idx = sf.compress(a, pattern)
        except ValueError as e:
            where = f"batch {at}, " if lead else ""
            raise ValueError(f"{where}{e}") from None
        values[at] = vals[:m]
        # 16-bit units: a kept element's 2-bit field is its index in the chunk
        steps = kp // TILE_K
        units = idx.reshape(mt, TILE_M, steps, TILE_K // 2).transpose(0, 2, 1, 3).astype(np.uint32)
        fields_of = units[:, :, rows, fields]  # [mt, steps, q, v]: field v of lane q's word
        words = np.full((mt, width // META_LANES, META_LANES), FILLER, np.uint32)  # [mt, step, q]
        words[:, :steps] = np.bitwise_or.reduce(fields_of << shifts, axis=-1)
        meta[at] = _group(words)
    return values, meta


def decompress_a(values, meta, k: int | None = None) -> np.ndarray:
    """The dense A [..., M, K] of (values, meta); K = Kp (values' width x 2) unless `k` is given
    (then the padding columns, which must be zero, are dropped). Checks the metadata (every chunk
    two distinct increasing indices; filler past Kp) and the shapes against each other."""
    values, meta = np.asarray(values), np.asarray(meta)
    ptx = _ptx_type(values.dtype, "decompress_a")
    if values.ndim < 2 or meta.shape[:-2] != values.shape[:-2] or meta.dtype != np.uint32:
        raise ValueError(
            f"values [..., M, Kp/2] and uint32 meta [..., M/16, W] must share their leading "
            f"dimensions; got {values.shape} and {meta.shape} {meta.dtype}"
        )
    *lead, m, half = values.shape
    kp = 2 * half
    if kp % TILE_K:
        raise ValueError(f"values has {half} columns: Kp/2 must be a multiple of {TILE_K // 2}")
    if meta.shape[-2:] != meta_shape(m, kp):
        raise ValueError(f"meta for a {m} x {kp} A must be {meta_shape(m, kp)}, got {meta.shape[-2:]}")
    if k is not None and padded_k(k) != kp:
        raise ValueError(f"K = {k} pads to {padded_k(k)}, but values holds Kp = {kp}")
    mt, steps = meta.shape[-2], kp // TILE_K
    rows, fields = _lane_table(ptx)
    shifts = (sf.FIELD_BITS * np.arange(sf.FIELDS_PER_WORD)).astype(np.uint32)
    dense = np.zeros((*lead, m, kp), values.dtype)
    for at in np.ndindex(*lead):
        words = _ungroup(meta[at])  # [mt, step, q]
        if (words[:, steps:] != FILLER).any():
            raise ValueError(f"meta words past Kp = {kp} must be the filler {FILLER:#x}")
        units = np.zeros((mt, steps, TILE_M, TILE_K // 2), np.uint8)
        units[:, :, rows, fields] = (words[:, :steps, :, None] >> shifts) & np.uint32(3)
        units = units.transpose(0, 2, 1, 3)
        idx = units.reshape(mt * TILE_M, kp // 2)
        vals = np.zeros((mt * TILE_M, kp // 2), values.dtype)
        vals[:m] = values[at]
        try:
            sf._check_indices(idx.astype(np.int64), sf.PATTERNS["2:4"], ordered=True)
        except ValueError as e:
            where = f"batch {at}, " if lead else ""
            raise ValueError(f"{where}metadata: {e}") from None
        dense[at] = sf.decompress(vals, idx, "2:4")[:m]
    if k is not None:
        if dense[..., k:].any():
            raise ValueError(f"columns {k}..{kp - 1} (the padding of K) must be zero")
        dense = dense[..., :k]
    return dense
