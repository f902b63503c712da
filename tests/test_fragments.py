"""The fragment table against the PTX ISA's formulas: coverage, ranges, linearity, packing, and
single facts read off the ISA's "Matrix Fragments for mma.*" sections."""

from __future__ import annotations

import numpy as np
import pytest
from tilemma.compiler.layouts import fragments as F

LAYOUTS = F.all_layouts()
IDS = [str(lay) for lay in LAYOUTS]

# (shape, operand, type) every dense mma.sync family of the ISA must define.
REQUIRED = [
    *[(s, o, t) for s in ("m16n8k8", "m16n8k16") for o in "ab" for t in ("f16", "bf16")],
    *[(s, "c", t) for s in ("m16n8k8", "m16n8k16") for t in ("f16", "f32")],
    *[(s, o, "tf32") for s in ("m16n8k4", "m16n8k8") for o in "ab"],
    *[(s, o, "f64") for s in ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16") for o in "abc"],
    *[(s, o, t) for s in ("m8n8k16", "m16n8k16", "m16n8k32") for o in "ab" for t in ("s8", "u8")],
    *[(s, o, t) for s in ("m8n8k32", "m16n8k32", "m16n8k64") for o in "ab" for t in ("s4", "u4")],
    *[(s, o, "b1") for s in ("m8n8k128", "m16n8k128", "m16n8k256") for o in "ab"],
    *[(s, "c", "s32") for s in ("m8n8k16", "m16n8k16", "m16n8k32", "m8n8k32", "m16n8k64")],
    *[(s, "c", "s32") for s in ("m8n8k128", "m16n8k128", "m16n8k256")],
    *[(s, o, t) for s in ("m16n8k16", "m16n8k32") for o in "ab" for t in ("e4m3", "e5m2")],
    *[(s, "c", t) for s in ("m16n8k16", "m16n8k32") for t in ("f16", "f32")],
    *[("m16n8k32", o, t) for o in "ab" for t in ("e3m2", "e2m3", "e2m1")],
    ("m16n8k64", "a", "e2m1"),
    ("m16n8k64", "b", "e2m1"),
    ("m16n8k64", "c", "f32"),
]


@pytest.mark.parametrize("shape,operand,elem_type", REQUIRED)
def test_required_family_is_defined(shape, operand, elem_type):
    lay = F.layout(shape, operand, elem_type)
    m, n, k = F.shape_mnk(shape)
    assert (lay.rows, lay.cols) == {"a": (m, k), "b": (k, n), "c": (m, n)}[operand]


def test_m8n8k4_f16_all_majors_and_views():
    for view, mult in (("quadpair", (4, 4, 4)), ("warp16", (2, 2, 1))):
        for major in ("row", "col"):
            a = F.layout("m8n8k4", "a", "f16", major=major, view=view)
            b = F.layout("m8n8k4", "b", "f16", major=major, view=view)
            assert (a.copies, b.copies) == mult[:2]
        for acc in ("f16", "f32"):
            assert F.layout("m8n8k4", "c", acc, view=view).copies == mult[2]
    w16 = F.layout("m8n8k4", "c", "f32", view="warp16")
    assert (w16.rows, w16.cols) == (16, 16)


@pytest.mark.parametrize("lay", LAYOUTS, ids=IDS)
def test_coverage_ranges_and_copies(lay):
    rows, cols = F.coords(lay)
    assert rows.shape == cols.shape == (32, lay.nvals)
    assert rows.min() >= 0 and cols.min() >= 0
    assert rows.max() < lay.rows and cols.max() < lay.cols
    count = np.zeros((lay.rows, lay.cols), int)
    np.add.at(count, (rows, cols), 1)
    # every element held, and held equally often: exactly once unless m8n8k4 .f16 replicates it
    assert (count == lay.copies).all()
    quad = lay.view in ("quadpair", "warp16")
    if not quad or (lay.view == "warp16" and lay.operand == "c"):
        assert lay.copies == 1
    # a lane never holds the same element twice
    flat = rows * lay.cols + cols
    assert all(len(set(r)) == lay.nvals for r in flat)
    assert lay.regs * lay.reg_bits == lay.nvals * lay.elem_bits


@pytest.mark.parametrize("lay", LAYOUTS, ids=IDS)
def test_linear_form_equals_table(lay):
    form = F.linear_form(lay)
    rows, cols = F.coords(lay)
    got_r, got_c = form.evaluate()
    assert np.array_equal(got_r, rows) and np.array_equal(got_c, cols)
    assert len(form.row_w) == len(form.col_w) == F.LANE_BITS


def test_fit_linear_rejects_nonlinear_coordinates():
    """The checker must notice coordinates that no lane-bit weights reproduce (g * t here)."""
    lane = np.arange(32)[:, None]
    rows = (lane >> 2) * (lane & 3) + np.zeros((1, 2), int)
    cols = np.zeros_like(rows)
    with pytest.raises(ValueError, match="not linear"):
        F.fit_linear(rows, cols)
    ok = F.fit_linear(lane + np.zeros((1, 2), int), cols)
    assert ok.row_w == (1, 2, 4, 8, 16)


@pytest.mark.parametrize("lay", LAYOUTS, ids=IDS)
def test_pack_unpack_round_trip(lay):
    rng = np.random.default_rng(lay.rows * 1000 + lay.cols + lay.elem_bits)
    bits = rng.integers(0, 1 << lay.elem_bits, (lay.rows, lay.cols), dtype=np.uint64)
    bits = bits.astype(lay.elem_dtype)
    words = F.pack(lay, bits)
    assert words.shape == (32, lay.regs) and words.dtype == lay.word_dtype
    assert np.array_equal(F.unpack(lay, words), bits)


def test_unpack_detects_disagreeing_copies():
    lay = F.layout("m8n8k4", "a", "f16", major="row", view="warp16")
    words = F.pack(lay, np.arange(64, dtype=np.uint16).reshape(16, 4))
    words[20, 0] ^= 1  # lane 20 now disagrees with its twin in the other quad-pair
    with pytest.raises(ValueError, match="disagree"):
        F.unpack(lay, words)


def test_pack_rejects_bad_input():
    lay = F.layout("m16n8k32", "a", "s4")
    with pytest.raises(ValueError, match="exceed 4 bits"):
        F.pack(lay, np.full((16, 32), 16, np.uint8))
    with pytest.raises(ValueError, match="16x32"):
        F.pack(lay, np.zeros((32, 16), np.uint8))
    with pytest.raises(ValueError, match="unsigned"):
        F.pack(lay, np.zeros((16, 32), np.int8))


def test_lookup_errors_name_the_problem():
    with pytest.raises(ValueError, match="no A fragment of 8-bit"):
        F.layout("m16n8k8", "a", "s8")
    with pytest.raises(ValueError, match="not an accumulator"):
        F.layout("m16n8k16", "c", "bf16")
    with pytest.raises(ValueError, match=r"\.row only"):
        F.layout("m16n8k16", "a", "f16", major="col")
    with pytest.raises(ValueError, match="view"):
        F.layout("m16n8k16", "a", "f16", view="warp16")


# (shape, operand, type, kwargs, lane, value index i, (row, col)) straight from the ISA formulas
# (g = lane >> 2, t = lane % 4).
ISA_FACTS = [
    # m16n8k16 .f16: a_i row g (+8 for i in 2,3,6,7), col 2t + (i&1) (+8 for i >= 4)
    ("m16n8k16", "a", "f16", {}, 5, 0, (1, 2)),
    ("m16n8k16", "a", "f16", {}, 5, 1, (1, 3)),
    ("m16n8k16", "a", "f16", {}, 5, 3, (9, 3)),
    ("m16n8k16", "a", "f16", {}, 5, 4, (1, 10)),
    ("m16n8k16", "a", "bf16", {}, 31, 7, (15, 15)),
    ("m16n8k16", "b", "f16", {}, 5, 0, (2, 1)),
    ("m16n8k16", "b", "f16", {}, 5, 3, (11, 1)),
    ("m16n8k16", "c", "f32", {}, 5, 2, (9, 2)),
    ("m16n8k16", "c", "f16", {}, 5, 3, (9, 3)),
    # m16n8k8 .f16: a2,a3 at row g+8
    ("m16n8k8", "a", "f16", {}, 6, 2, (9, 4)),
    ("m16n8k8", "b", "bf16", {}, 6, 1, (5, 1)),
    # .tf32: m16n8k8 a1 row g+8 col t, a2 row g col t+4; b1 row t+4
    ("m16n8k8", "a", "tf32", {}, 6, 1, (9, 2)),
    ("m16n8k8", "a", "tf32", {}, 6, 2, (1, 6)),
    ("m16n8k8", "b", "tf32", {}, 6, 1, (6, 1)),
    ("m16n8k4", "a", "tf32", {}, 31, 1, (15, 3)),
    ("m16n8k4", "b", "tf32", {}, 31, 0, (3, 7)),
    # .f64 m16n8k16: a_i row g (+8 odd i), col 2i + t (even) / 2i - 2 + t (odd); b_i row t + 4i
    ("m16n8k16", "a", "f64", {}, 7, 4, (1, 11)),
    ("m16n8k16", "a", "f64", {}, 7, 5, (9, 11)),
    ("m16n8k16", "b", "f64", {}, 7, 3, (15, 1)),
    ("m16n8k16", "c", "f64", {}, 7, 3, (9, 7)),
    ("m16n8k8", "a", "f64", {}, 6, 3, (9, 6)),
    ("m8n8k4", "a", "f64", {}, 13, 0, (3, 1)),
    ("m8n8k4", "b", "f64", {}, 13, 0, (1, 3)),
    ("m8n8k4", "c", "f64", {}, 13, 1, (3, 3)),
    # 8-bit: m8n8k16 a_i col 4t + i; m16n8k32 a_i row g (+8 for 4..7, 12..15), col +16 for i >= 8
    ("m8n8k16", "a", "s8", {}, 10, 3, (2, 11)),
    ("m8n8k16", "b", "u8", {}, 10, 3, (11, 2)),
    ("m8n8k16", "c", "s32", {}, 10, 1, (2, 5)),
    ("m16n8k16", "a", "e4m3", {}, 5, 5, (9, 5)),
    ("m16n8k32", "a", "s8", {}, 5, 9, (1, 21)),
    ("m16n8k32", "a", "e2m1", {}, 5, 13, (9, 21)),
    ("m16n8k32", "b", "e5m2", {}, 5, 5, (21, 1)),
    # 4-bit: m16n8k64 a_i row g (i in 0..7, 16..23), col 8t + (i&7) (+32 for i >= 16)
    ("m8n8k32", "a", "s4", {}, 3, 7, (0, 31)),
    ("m16n8k32", "a", "u4", {}, 5, 9, (9, 9)),
    ("m16n8k64", "a", "s4", {}, 5, 17, (1, 41)),
    ("m16n8k64", "a", "e2m1", {}, 5, 30, (9, 46)),
    ("m16n8k64", "b", "u4", {}, 5, 9, (41, 1)),
    # .b1: m16n8k256 a_i row g+8 for i in 32..63, 96..127; col 32t + (i&31) (+128 for i >= 64)
    ("m8n8k128", "b", "b1", {}, 30, 31, (95, 7)),
    ("m16n8k128", "a", "b1", {}, 5, 40, (9, 40)),
    ("m16n8k256", "a", "b1", {}, 5, 100, (9, 164)),
    ("m16n8k256", "b", "b1", {}, 5, 40, (168, 1)),
    # m8n8k4 .f16 per quad-pair: high group (lanes 16..31) adds 4 to the row (A .row, C) / col
    ("m8n8k4", "a", "f16", {"major": "row"}, 18, 3, (6, 3)),
    ("m8n8k4", "a", "f16", {"major": "col"}, 18, 3, (7, 2)),
    ("m8n8k4", "b", "f16", {"major": "row"}, 18, 1, (2, 5)),
    ("m8n8k4", "b", "f16", {"major": "col"}, 18, 1, (1, 6)),
    ("m8n8k4", "c", "f16", {}, 18, 5, (6, 5)),
    # .f32 C: row (lane&1) + (i&2) (+4 high), col (i&4) + (lane&2) + (i&1)
    ("m8n8k4", "c", "f32", {}, 19, 6, (7, 6)),
    # warp16 view: quad-pair 3 (lanes 12..15) owns D rows 8.., cols 8..
    ("m8n8k4", "c", "f32", {"view": "warp16"}, 15, 0, (9, 10)),
    ("m8n8k4", "a", "f16", {"major": "row", "view": "warp16"}, 15, 0, (11, 0)),
    ("m8n8k4", "b", "f16", {"major": "col", "view": "warp16"}, 15, 0, (0, 11)),
]


@pytest.mark.parametrize("shape,operand,elem_type,kw,lane,i,expected", ISA_FACTS)
def test_isa_fact(shape, operand, elem_type, kw, lane, i, expected):
    assert F.layout(shape, operand, elem_type, **kw).coord(lane, i) == expected


# (shape, operand, type, registers per lane): the register vectors of the ISA's tables/examples
REG_COUNTS = [
    ("m16n8k16", "a", "f16", 4), ("m16n8k16", "b", "f16", 2), ("m16n8k16", "c", "f16", 2),
    ("m16n8k16", "c", "f32", 4), ("m16n8k8", "a", "f16", 2), ("m16n8k8", "b", "bf16", 1),
    ("m16n8k8", "a", "tf32", 4), ("m16n8k8", "b", "tf32", 2), ("m16n8k4", "a", "tf32", 2),
    ("m16n8k16", "a", "f64", 8), ("m16n8k16", "b", "f64", 4), ("m8n8k4", "c", "f64", 2),
    ("m8n8k4", "a", "f16", 2), ("m8n8k4", "c", "f16", 4), ("m8n8k4", "c", "f32", 8),
    ("m16n8k16", "a", "e4m3", 2), ("m16n8k16", "b", "e5m2", 1), ("m16n8k32", "a", "e3m2", 4),
    ("m16n8k32", "b", "e2m1", 2), ("m16n8k64", "a", "e2m1", 4), ("m16n8k64", "a", "s4", 4),
    ("m8n8k32", "a", "u4", 1), ("m16n8k256", "a", "b1", 4), ("m16n8k256", "b", "b1", 2),
]  # fmt: skip


@pytest.mark.parametrize("shape,operand,elem_type,regs", REG_COUNTS)
def test_register_counts(shape, operand, elem_type, regs):
    assert F.layout(shape, operand, elem_type).regs == regs


def test_pack_puts_low_index_in_low_bits():
    # every element encodes (row, col): word = a1 << 16 | a0 for lane 5, reg 0 of m16n8k16 .f16
    lay = F.layout("m16n8k16", "a", "f16")
    r, c = np.indices((16, 16))
    words = F.pack(lay, (r * 256 + c).astype(np.uint16))
    assert int(words[5, 0]) == (0x0103 << 16) | 0x0102
    assert int(words[5, 2]) == (0x010B << 16) | 0x010A
    # .s4 m8n8k32 lane 1: nibble j of the word is A[0][8 + j]
    lay4 = F.layout("m8n8k32", "a", "s4")
    a = np.zeros((8, 32), np.uint8)
    a[0, 8:16] = np.arange(1, 9)
    assert int(F.pack(lay4, a)[1, 0]) == 0x87654321
    # .b1 m16n8k128 lane 0 reg 1 bit j is A[8][j]
    lay1 = F.layout("m16n8k128", "a", "b1")
    a1 = np.zeros((16, 128), np.uint8)
    a1[8, 31] = 1
    assert int(F.pack(lay1, a1)[0, 1]) == 1 << 31
    # f64 uses 64-bit words
    assert F.pack(F.layout("m16n8k4", "a", "f64"), np.zeros((16, 4), np.uint64)).dtype == np.uint64


def test_e2m1_width_follows_the_kind():
    """kind::f8f6f4 (m16n8k32) keeps e2m1 in 8-bit containers; mxf4 (m16n8k64) packs 4-bit."""
    assert F.layout("m16n8k32", "a", "e2m1").elem_bits == 8
    assert F.layout("m16n8k64", "a", "e2m1").elem_bits == 4
