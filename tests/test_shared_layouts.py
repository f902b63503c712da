"""ldmatrix and swizzled shared layouts: each against an element-by-element model of the PTX ISA
text, composed into the mma fragments they feed, and the swizzle's bank-conflict freedom."""

from __future__ import annotations

import numpy as np
import pytest

from tilemma.compiler.layouts import fragments as F
from tilemma.compiler.layouts import shared_layouts as S
from tilemma.compiler.layouts.linear_layout import LinearLayout as L


@pytest.mark.parametrize("num", S.LDMATRIX_NUMS)
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_layout_matches_the_isa(num, trans):
    """PTX ISA ldmatrix: lane l receives, in each register j, the elements of matrix j at row
    l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 (low half first); .trans gives row and column
    swapped."""
    lay = S.ldmatrix_layout(num, trans)
    assert lay.in_sizes == {"lane": 32, "reg": num, "half": 2} and lay.is_injective() and lay.is_surjective()
    for lane in range(32):
        for j in range(num):
            for h in range(2):
                row, col = lane // 4, 2 * (lane % 4) + h
                want = (j, col, row) if trans else (j, row, col)
                assert lay(lane=lane, reg=j, half=h) == want


@pytest.mark.parametrize("num", S.LDMATRIX_NUMS)
def test_ldmatrix_row_addresses(num):
    """Lanes 8j..8j+7 give the addresses of rows 0..7 of matrix j; .x1/.x2 read lanes 0-7/0-15."""
    lay = S.ldmatrix_rows(num)
    assert lay.in_sizes == {"lane": 8 * num}
    for lane in range(8 * num):
        assert lay(lane=lane) == (lane // 8, lane % 8)
    with pytest.raises(ValueError, match="outside"):
        lay.apply(lane=8 * num)
    with pytest.raises(ValueError, match=r"\.x1, \.x2 or \.x4"):
        S.ldmatrix_rows(3)


def _as_fragment(lay: L, *value_parts: str) -> L:
    """(lane, reg, half, ...) -> (lane, value) with value's bits taken from value_parts, low first."""
    order = ["lane", *value_parts]
    t = lay.transpose(ins=order)
    bits = sum(t.in_sizes[p].bit_length() - 1 for p in value_parts)
    return t.reshape_ins([("lane", 32), ("value", 1 << bits)])


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_ldmatrix_x4_is_the_mma_a_fragment(t):
    a = S.ldmatrix_layout(4).compose(S.matrix_placement(4))
    assert _as_fragment(a, "half", "reg") == F.linear_layout(F.layout("m16n8k16", "a", t))


def test_ldmatrix_x2_trans_is_the_mma_b_fragment():
    """B (K x N) stored k-rows: .trans hands each lane two consecutive k of one n."""
    b = S.ldmatrix_layout(2, trans=True).compose(S.matrix_placement(2))
    assert _as_fragment(b, "half", "reg") == F.linear_layout(F.layout("m16n8k16", "b", "f16"))
    # .x4.trans covers two n8 B fragments side by side: the product of B with an n-block bit
    b4 = S.ldmatrix_layout(4, trans=True).compose(S.matrix_placement(4)).transpose(ins=["lane", "half", "reg"])
    b4 = b4.reshape_ins([("lane", 32), ("value", 4), ("ntile", 2)])
    frag = F.linear_layout(F.layout("m16n8k16", "b", "f16")) * L.from_bases({"ntile": [(0, 1)]}, {"row": 1, "col": 2})
    assert b4 == frag


def test_ldmatrix_x4_of_bytes_is_the_s8_a_fragment():
    """Two 8-bit elements per b16: the byte index below ldmatrix's columns gives m16n8k32 .s8 A."""
    a16 = S.ldmatrix_layout(4).compose(S.matrix_placement(4))
    a8 = L.from_bases({"byte": [(1,)]}, {"col": 2}) * a16
    assert _as_fragment(a8, "byte", "half", "reg") == F.linear_layout(F.layout("m16n8k32", "a", "s8"))
    assert _as_fragment(a8, "byte", "half", "reg") != F.linear_layout(F.layout("m16n8k32", "b", "s8"))


SWIZZLES = [(rows, rb, eb, pp, mp) for rows in (8, 64) for rb in (32, 64, 128, 256) for eb in (1, 2, 4, 8)
            for pp in (1, 2, 4) for mp in (1, 2, 4, 8) if mp <= rb // 16]  # fmt: skip


@pytest.mark.parametrize("rows,row_bytes,eb,pp,mp", SWIZZLES)
def test_xor_swizzle_matches_the_formula(rows, row_bytes, eb, pp, mp):
    """Element (r, c) lands at byte r R + ((c / vec) ^ ((r / pp) % mp)) 16 + (c % vec) eb."""
    sw = S.xor_swizzle(rows, row_bytes, eb, pp, mp)
    cols, vec = row_bytes // eb, 16 // eb
    r, c = np.indices((rows, cols))
    want = r * row_bytes + ((c // vec) ^ ((r // pp) % mp)) * 16 + (c % vec) * eb
    addr = sw.compose(S.row_major_bytes(rows, row_bytes, eb).reshape_outs({"byte": rows * row_bytes}))
    assert np.array_equal(addr.apply(row=r, col=c)["byte"], want)
    assert sw.inverse() == sw  # an XOR of row bits into col bits undoes itself
    assert sw.additive_split() is None or mp == 1 or rows <= pp


def test_swizzle_errors():
    with pytest.raises(ValueError, match="max_phase 8 exceeds the 4 vectors of a 64-byte row"):
        S.xor_swizzle(64, 64, 2, 1, 8)
    with pytest.raises(ValueError, match="per_phase must be a power of two"):
        S.xor_swizzle(64, 64, 2, 3, 2)


def _lane_bytes(num, rows, row_bytes, eb, origin, swizzle):
    """ldmatrix row addresses of a tile at `origin` of a [rows, row_bytes] shared block, as one
    composed layout lane -> (in16, group, line): rows -> tile -> block -> swizzle -> bytes."""
    place = S.matrix_placement(num)  # in b16 columns
    if eb == 1:  # 8-bit elements: a b16 column is two element columns
        r, c = place.out_sizes["row"], place.out_sizes["col"]
        place = place.compose(L.identity({"row": r}) * L.from_bases({"col": [(2 << j,) for j in range(c.bit_length() - 1)]}, {"col": 2 * c}))
    block = L.identity({"row": rows, "col": row_bytes // eb}, {"row": origin[0], "col": origin[1]})
    return S.ldmatrix_rows(num).compose(place).compose(block).compose(swizzle).compose(S.row_major_bytes(rows, row_bytes, eb))


def _plain_bytes(num, row_bytes, eb, origin, pp, mp):
    """Independent model: lane 8j + r -> byte address of that row, straight from the formulas."""
    lane = np.arange(8 * num)
    j, r = lane // 8, lane % 8
    vec = 16 // eb  # elements of one 16-byte matrix row
    row = origin[0] + 8 * (j & 1) + r
    col = origin[1] + vec * (j >> 1)
    return row * row_bytes + ((col // vec) ^ ((row // pp) % mp)) * 16 + (col % vec) * eb


@pytest.mark.parametrize("row_bytes", [32, 64, 128, 256])
@pytest.mark.parametrize("num", S.LDMATRIX_NUMS)
@pytest.mark.parametrize("eb", [2, 1])
def test_swizzled_ldmatrix_is_conflict_free(row_bytes, num, eb):
    """Every aligned 16x16 (f16; 16x32 for 8-bit) tile of a 64-row block, read by ldmatrix
    (A row-major, or B k-rows with .trans: the same row addresses), touches 8 distinct bank groups
    in every 8-lane phase with the Ampere swizzle; the unswizzled block does not for 64- and
    128-byte rows."""
    rows, cols = 64, row_bytes // eb
    tile_cols = 16 if eb == 2 else 32
    if cols < tile_cols:
        pytest.skip("row narrower than the tile")
    pp = max(1, 128 // row_bytes)
    mp = 8 // pp
    swz, plain = S.ampere_swizzle(rows, row_bytes, eb), S.xor_swizzle(rows, row_bytes, eb, 1, 1)
    assert swz == S.xor_swizzle(rows, row_bytes, eb, pp, mp)
    worst_swz = worst_plain = 0
    for r0 in range(0, rows, 16):
        for c0 in range(0, cols, tile_cols):
            for sw, (p, m) in ((swz, (pp, mp)), (plain, (1, 1))):
                lay = _lane_bytes(num, rows, row_bytes, eb, (r0, c0), sw)
                out = lay.apply(lane=np.arange(8 * num))
                byte = out["in16"] + 16 * out["group"] + 128 * out["line"]
                assert np.array_equal(byte, _plain_bytes(num, row_bytes, eb, (r0, c0), p, m))
            worst_swz = max(worst_swz, S.ldmatrix_conflicts(_lane_bytes(num, rows, row_bytes, eb, (r0, c0), swz)))
            worst_plain = max(worst_plain, S.ldmatrix_conflicts(_lane_bytes(num, rows, row_bytes, eb, (r0, c0), plain)))
    assert worst_swz == 1
    assert worst_plain == {32: 2, 64: 4, 128: 8, 256: 8}[row_bytes]


def test_ldmatrix_conflicts_rejects_misaligned_rows():
    lay = S.ldmatrix_rows(1).compose(S.matrix_placement(1)).compose(L.identity({"row": 8, "col": 64}, {"row": 0, "col": 4}))
    lay = lay.compose(S.row_major_bytes(8, 128, 2))
    with pytest.raises(ValueError, match="lane 0's row address is not 16-byte aligned"):
        S.ldmatrix_conflicts(lay)


def test_row_mod_phase_alone_conflicts_on_64_byte_rows():
    """Why per_phase: with 64-byte rows two rows share a 128-byte line, so XOR with row % 4
    (per_phase 1) repeats bank groups within a phase; per_phase 2 (Ampere) does not."""
    naive = S.xor_swizzle(64, 64, 2, 1, 4)
    assert S.ldmatrix_conflicts(_lane_bytes(4, 64, 64, 2, (0, 0), naive)) == 2
    assert S.ldmatrix_conflicts(_lane_bytes(4, 64, 64, 2, (0, 0), S.ampere_swizzle(64, 64, 2))) == 1
