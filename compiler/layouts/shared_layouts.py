"""The fast path's shared-memory layouts as `LinearLayout`s: ldmatrix and XOR-swizzled tiles.

`ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16` (PTX ISA, "ldmatrix") loads one, two or
four 8x8 matrices of 16-bit elements. Each matrix row is 16 contiguous bytes whose address one
lane supplies: lane 8j + r gives row r of matrix j (.x1 reads lanes 0-7, .x2 lanes 0-15, .x4 all;
`ldmatrix_rows`). Register j of every lane receives matrix j: lane l holds row l / 4, columns
2 (l % 4) and 2 (l % 4) + 1 (low half, high half); .trans delivers the transpose, so lane l
holds column l / 4, rows 2 (l % 4) + h (`ldmatrix_layout`, in the stored matrix's coordinates).
`matrix_placement` puts matrix j at (8 (j & 1), 8 (j >> 1)) of a 16x16 tile, the order of the
mma A registers (a0/a1 rows 0-7, a2/a3 rows 8-15, a4-a7 columns 8-15) and of B's k halves.

Shared memory has 32 four-byte banks, so a 128-byte line spans them all once and its eight
16-byte vectors are eight bank groups. An ldmatrix phase (8 lanes, one matrix) reads 8 rows of
16 bytes; it is conflict-free when they fall in 8 distinct groups. Row-major tiles with 64- or
128-byte rows put rows 0..7 of a matrix in 2 resp. 1 group. The XOR swizzle (`xor_swizzle`, as
MLIR's nvgpu-optimize-shared-memory and Triton's Ampere swizzled shared layout) stores vector c of
row r at vector c ^ ((r / per_phase) % max_phase): a GF(2)-linear map of (row, col), so it
composes with the address layouts, and is its own inverse.
"""

from __future__ import annotations

import numpy as np

from tilemma.compiler.layouts.linear_layout import LinearLayout

VECTOR_BYTES = 16  # an ldmatrix row, a cp.async.cg chunk, one bank group
LINE_BYTES = 128  # 32 banks x 4 bytes
BANK_GROUPS = LINE_BYTES // VECTOR_BYTES
LDMATRIX_NUMS = (1, 2, 4)


def _num(num: int) -> int:
    if num not in LDMATRIX_NUMS:
        raise ValueError(f"ldmatrix .m8n8 loads .x1, .x2 or .x4 matrices, not {num!r}")
    return num


def ldmatrix_layout(num: int, trans: bool = False) -> LinearLayout:
    """(lane: 32, reg: num, half: 2) -> (matrix: num, row: 8, col: 8): the element of the stored
    8x8 b16 matrices that half `half` of register `reg` of `lane` receives."""
    m = _num(num).bit_length() - 1
    rc = lambda r, c: (r, c) if not trans else (c, r)  # noqa: E731 -- .trans swaps row and col
    lane = [(0, *rc(0, 2)), (0, *rc(0, 4)), (0, *rc(1, 0)), (0, *rc(2, 0)), (0, *rc(4, 0))]
    reg = [(1 << b, 0, 0) for b in range(m)]
    return LinearLayout.from_bases(
        {"lane": lane, "reg": reg, "half": [(0, *rc(0, 1))]}, {"matrix": num, "row": 8, "col": 8}
    )


def ldmatrix_rows(num: int) -> LinearLayout:
    """(lane: 8 num) -> (matrix: num, row: 8): the row whose address the lane supplies; lanes
    from 8 num on are not read (their addresses are ignored)."""
    m = _num(num).bit_length() - 1
    return LinearLayout.from_bases(
        {"lane": [(0, 1), (0, 2), (0, 4)] + [(1 << b, 0) for b in range(m)]}, {"matrix": num, "row": 8}
    )


def matrix_placement(num: int) -> LinearLayout:
    """(matrix: num, row: 8, col: 8) -> (row, col) of the tile the matrices make: matrix j at
    row 8 (j & 1), col 8 (j >> 1), so .x4 is a 16x16 tile, .x2 16x8, .x1 8x8."""
    m = _num(num).bit_length() - 1
    blocks = LinearLayout.from_bases(
        {"matrix": [(1, 0), (0, 1)][:m]}, {"row": min(num, 2), "col": max(num // 2, 1)}
    )
    return LinearLayout.identity({"row": 8, "col": 8}) * blocks


def xor_swizzle(rows: int, row_bytes: int, elem_bytes: int, per_phase: int, max_phase: int) -> LinearLayout:
    """(row, col) -> (row, col) of a row-major shared tile in elements: the 16-byte vector
    col / vec of row `row` is stored at vector (col / vec) ^ ((row / per_phase) % max_phase),
    vec = 16 / elem_bytes (per_phase, max_phase as Triton's; MLIR's permuteEveryN is per_phase).
    max_phase 1 is the plain row-major tile."""
    cols = row_bytes // elem_bytes
    vec = VECTOR_BYTES // elem_bytes
    for what, v in (("rows", rows), ("row_bytes", row_bytes), ("elem_bytes", elem_bytes),
                    ("per_phase", per_phase), ("max_phase", max_phase)):  # fmt: skip
        if v < 1 or v & (v - 1):
            raise ValueError(f"xor_swizzle: {what} must be a power of two, got {v}")
    if elem_bytes > VECTOR_BYTES or row_bytes < VECTOR_BYTES:
        raise ValueError(f"xor_swizzle: rows of {row_bytes} bytes of {elem_bytes}-byte elements hold no 16-byte vector")
    if max_phase > cols // vec:
        raise ValueError(f"xor_swizzle: max_phase {max_phase} exceeds the {cols // vec} vectors of a {row_bytes}-byte row")
    row_bases = []
    for i in range(rows.bit_length() - 1):
        phase_bit = (1 << i) // per_phase
        row_bases.append((1 << i, vec * phase_bit if 0 < phase_bit < max_phase else 0))
    col_bases = [(0, 1 << j) for j in range(cols.bit_length() - 1)]
    return LinearLayout.from_bases({"row": row_bases, "col": col_bases}, {"row": rows, "col": cols})


def ampere_swizzle(rows: int, row_bytes: int, elem_bytes: int) -> LinearLayout:
    """The swizzle Triton's Ampere builder picks for ldmatrix operands: per_phase rows share a
    phase so that 8 phases span 128 bytes (per_phase = max(1, 128 / row_bytes)), max_phase =
    8 / per_phase; conflict-free for 8-row phases of 16-byte rows at every row length."""
    per_phase = max(1, LINE_BYTES // row_bytes)
    return xor_swizzle(rows, row_bytes, elem_bytes, per_phase, BANK_GROUPS // per_phase)


def row_major_bytes(rows: int, row_bytes: int, elem_bytes: int) -> LinearLayout:
    """(row, col) -> (byte) of a row-major tile, split as (in16: 16, group: 8, line) when the
    tile spans whole 128-byte lines, so `group` is the bank group."""
    cols = row_bytes // elem_bytes
    lay = LinearLayout.from_bases(
        {"row": [(row_bytes << i,) for i in range(rows.bit_length() - 1)],
         "col": [(elem_bytes << j,) for j in range(cols.bit_length() - 1)]},
        {"byte": rows * row_bytes},
        in_sizes={"row": rows, "col": cols},
    )  # fmt: skip
    if rows * row_bytes < LINE_BYTES:
        return lay
    return lay.reshape_outs({"in16": VECTOR_BYTES, "group": BANK_GROUPS, "line": rows * row_bytes // LINE_BYTES})


def ldmatrix_conflicts(lane_to_bytes: LinearLayout) -> int:
    """The most rows of one 8-lane phase that share a bank group (1 = conflict-free; ldmatrix
    replays the phase that many times), for a layout lane -> (in16, group, line) of the row
    addresses. ValueError if an address is not 16-byte aligned, as ldmatrix requires."""
    lanes = lane_to_bytes.in_sizes["lane"]
    out = lane_to_bytes.apply(lane=np.arange(lanes))
    if out["in16"].any():
        bad = int(np.flatnonzero(out["in16"])[0])
        raise ValueError(f"lane {bad}'s row address is not 16-byte aligned ({out['in16'][bad]} past)")
    groups = out["group"].reshape(-1, 8)
    return int(max(np.bincount(g, minlength=BANK_GROUPS).max() for g in groups))
