"""The scale-factor layout of block-scaled mma (`compiler/scale_fragments.py`).

The positions themselves were measured by others on sm_120 (no GPU we can reach runs these
instructions); these tests pin the table to those facts as written in the brief, check that every
scale is held exactly once for every selector, that the linear form code generation uses
reproduces the table, and (with ptxas) that the selector values the table calls valid are exactly
the immediates ptxas accepts.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from tilemma.compiler.core import isa
from tilemma.compiler.verify import reference
from tilemma.compiler.layouts import scale_fragments as S
from tilemma.compiler.runtime.ptxas import find_ptxas, run_ptxas

CHUNKS = {"1X": 1, "2X": 2, "4X": 4}
EXTENT = {"a": 16, "b": 8}
CASES = [(op, sv, bid, tid) for op in "ab" for sv in CHUNKS for bid, tid in S.valid_selectors(sv, op)]


def _fact_lane(operand: str, index: int, tid: int) -> int:
    """The measured positions, written out as the brief states them."""
    if operand == "a":
        return 4 * (index % 8) + 2 * tid + (index // 8)
    return 4 * index + tid


def test_table_37():
    """Table 37 (thread-id-a 0..1 and thread-id-b 0..3 for every .scale_vec_size)."""
    assert S.valid_selectors("1X", "a") == tuple((b, t) for b in range(4) for t in range(2))
    assert S.valid_selectors("1X", "b") == tuple((b, t) for b in range(4) for t in range(4))
    assert S.valid_selectors("2X", "a") == tuple((b, t) for b in (0, 2) for t in range(2))
    assert S.valid_selectors("2X", "b") == tuple((b, t) for b in (0, 2) for t in range(4))
    assert S.valid_selectors("4X", "a") == ((0, 0), (0, 1))
    assert S.valid_selectors("4X", "b") == ((0, 0), (0, 1), (0, 2), (0, 3))


@pytest.mark.parametrize("operand,scale_vec,bid,tid", CASES, ids=[f"{o}-{s}-b{b}t{t}" for o, s, b, t in CASES])
def test_every_scale_held_exactly_once(operand, scale_vec, bid, tid):
    index, chunk = S.scale_layout(operand, scale_vec, bid, tid)
    assert index.shape == chunk.shape == (32, 4)
    assert np.array_equal(index < 0, chunk < 0)  # ignored bytes are ignored in both
    live = index >= 0
    held = index[live] * CHUNKS[scale_vec] + chunk[live]
    assert sorted(held.tolist()) == list(range(EXTENT[operand] * CHUNKS[scale_vec]))
    # and exactly where the measured facts put them
    for i in range(EXTENT[operand]):
        for j in range(CHUNKS[scale_vec]):
            lane, byte = _fact_lane(operand, i, tid), bid + j
            assert (index[lane, byte], chunk[lane, byte]) == (i, j)


@pytest.mark.parametrize("scale_vec", CHUNKS)
def test_thread_id_picks_lanes_as_the_isa_says(scale_vec):
    """ISA text: thread-id-a 0 -> lanes with %laneid % 4 in {0, 1}, 1 -> {2, 3}; thread-id-b t ->
    %laneid % 4 == t. byte-id: one byte (1X), the pair byte-id, byte-id + 1 (2X), all four (4X)."""
    for tid in range(2):
        index, _ = S.scale_layout("a", scale_vec, 0, tid)
        assert {int(x) % 4 for x in np.flatnonzero((index >= 0).any(1))} == {2 * tid, 2 * tid + 1}
    for tid in range(4):
        index, _ = S.scale_layout("b", scale_vec, 0, tid)
        assert {int(x) % 4 for x in np.flatnonzero((index >= 0).any(1))} == {tid}
    for bid, _ in S.valid_selectors(scale_vec, "b"):
        index, _ = S.scale_layout("b", scale_vec, bid, 0)
        assert np.flatnonzero((index >= 0).any(0)).tolist() == list(range(bid, bid + CHUNKS[scale_vec]))


@pytest.mark.parametrize("operand,scale_vec,bid,tid", [
    ("a", "1X", 4, 0), ("a", "1X", 0, 2), ("a", "2X", 1, 0), ("a", "2X", 0, 2), ("a", "4X", 2, 0),
    ("a", "4X", 0, 2), ("b", "1X", 0, 4), ("b", "2X", 3, 0), ("b", "4X", 1, 0), ("b", "4X", 0, 4),
])  # fmt: skip
def test_undefined_selectors_raise(operand, scale_vec, bid, tid):
    with pytest.raises(ValueError, match=f"undefined for .scale_vec::{scale_vec}.*Table 37"):
        S.scale_layout(operand, scale_vec, bid, tid)
    with pytest.raises(ValueError):
        S.pack_scales(operand, scale_vec, np.zeros((EXTENT[operand], CHUNKS[scale_vec]), np.uint8), bid, tid)


@pytest.mark.parametrize("operand", "ab")
@pytest.mark.parametrize("scale_vec", CHUNKS)
def test_linear_form(operand, scale_vec):
    """Canonical selectors {0, 0}: row = 8*bit0 + bit2 + 2*bit3 + 4*bit4 (A), column = lane >> 2
    (B), chunk = byte; it reproduces the table on every live lane and every byte, and gives every
    lane an in-range index."""
    weights, nbytes = S.scale_linear(operand, scale_vec)
    assert weights == ((8, 0, 1, 2, 4) if operand == "a" else (0, 0, 1, 2, 4))
    assert nbytes == CHUNKS[scale_vec]
    index, chunk = S.scale_layout(operand, scale_vec, 0, 0)
    lane = np.arange(32)
    rows = sum(((lane >> i) & 1) * w for i, w in enumerate(weights))
    live = index[:, 0] >= 0
    for b in range(4):
        want_index = np.where(live & (b < nbytes), rows, -1)
        assert np.array_equal(index[:, b], want_index)
        assert np.array_equal(chunk[:, b], np.where(want_index >= 0, b, -1))
    assert rows.min() >= 0 and rows.max() < EXTENT[operand]


@pytest.mark.parametrize("operand,scale_vec,bid,tid", CASES, ids=[f"{o}-{s}-b{b}t{t}" for o, s, b, t in CASES])
def test_pack_unpack(operand, scale_vec, bid, tid):
    rng = np.random.default_rng(bid * 8 + tid)
    bits = rng.integers(0, 256, (EXTENT[operand], CHUNKS[scale_vec]), dtype=np.uint8)
    background = rng.integers(0, 2**32, 32, dtype=np.uint32)
    words = S.pack_scales(operand, scale_vec, bits, bid, tid, background=background)
    np.testing.assert_array_equal(S.unpack_scales(operand, scale_vec, words, bid, tid), bits)
    index, _ = S.scale_layout(operand, scale_vec, bid, tid)
    unread = np.repeat((index < 0)[:, :, None], 8, 2).reshape(32, 32)  # [lane, bit]
    bit = (words[:, None] >> np.arange(32, dtype=np.uint32)) & 1
    keep = (background[:, None] >> np.arange(32, dtype=np.uint32)) & 1
    assert np.array_equal(bit[unread], keep[unread])  # bytes the instruction ignores keep the background
    i, j = EXTENT[operand] - 1, CHUNKS[scale_vec] - 1  # one element, placed by the facts directly
    assert (words[_fact_lane(operand, i, tid)] >> (8 * (bid + j))) & 0xFF == bits[i, j]


def test_pack_checks_the_matrix():
    with pytest.raises(ValueError, match=r"\[N, chunks\] \(scale_B transposed\) = \(8, 2\)"):
        S.pack_scales("b", "2X", np.zeros((2, 8), np.uint8))
    with pytest.raises(ValueError, match="0..255"):
        S.pack_scales("a", "1X", np.full((16, 1), 256, np.uint16))


def _ue4m3(code: int) -> float:
    """An unsigned e4m3 byte written out from the format (sign bit ignored, 0x7F NaN)."""
    x = code & 0x7F
    if x == 0x7F:
        return float("nan")
    e, m = x >> 3, x & 7
    return m * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


def test_scale_values_every_code():
    codes = np.arange(256)
    e8 = S.scale_values(codes, "ue8m0")
    assert np.array_equal(e8[:255], np.ldexp(1.0, codes[:255] - 127)) and np.isnan(e8[255])
    e4 = S.scale_values(codes, "ue4m3")
    want = np.array([_ue4m3(int(c)) for c in codes])
    assert np.array_equal(e4, want, equal_nan=True)
    assert np.array_equal(e4[:128], e4[128:], equal_nan=True)  # the sign bit is ignored
    # the reference reads the same bytes the same way
    assert np.array_equal(reference.from_bits(codes.astype(np.uint8), "ue4m3").astype(np.float64), e4, equal_nan=True)
    assert np.array_equal(reference.from_bits(codes.astype(np.uint8), "f8E8M0FNU").astype(np.float64), e8,
                          equal_nan=True)
    with pytest.raises(ValueError, match="unknown scale type"):
        S.scale_values(codes, "e4m3")


def test_default_scale_vec():
    assert S.default_scale_vec("mxf4", None) == "2X"
    assert S.default_scale_vec("mxf8f6f4", None) == "1X"
    assert S.default_scale_vec("mxf4nvf4", "4X") == "4X"
    with pytest.raises(ValueError, match="no default"):
        S.default_scale_vec("mxf4nvf4", None)
    # every block-scaled variant of the ISA table resolves to a size Table 36 allows for its kind
    allowed = {(k, st): set(sizes) for k, _, st, sizes in isa.TABLE_36}
    for v in isa.all_variants():
        if v.block_scale:
            allowed_here = {s or S.default_scale_vec(v.kind, None) for s in allowed[(v.kind, v.stype)]}
            assert S.default_scale_vec(v.kind, v.scale_vec) in allowed_here


# ---------------------------------------------------------------------------------------------
# ptxas: the selector immediates it accepts are exactly Table 37 as read here
# ---------------------------------------------------------------------------------------------

_PROBE = {  # one block-scaled opcode per .scale_vec_size, at PTX 9.0
    "1X": "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1.f32.ue8m0",
    "2X": "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
    "4X": "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
}


@pytest.mark.ptxas
@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (PATH, $PTXAS, nvcc wheel)")
@pytest.mark.parametrize("scale_vec", CHUNKS)
def test_ptxas_accepts_exactly_the_valid_selectors(scale_vec):
    """Every (byte-id, thread-id) in 0..4 x 0..4 for A and for B, one line each: ptxas 13.0
    refuses exactly the immediates `valid_selectors` leaves out (it names the operand and range)."""
    v = isa.parse_opcode(_PROBE[scale_vec])
    na, nb = v.operand("a").count, v.operand("b").count

    def vec(p, n):
        return "{" + ", ".join(f"{p}{i}" for i in range(n)) + "}"

    head = (".version 9.0\n.target sm_120a\n.address_size 64\n.visible .entry k()\n{\n"
            f"    .reg .b32 %a<{na}>;\n    .reg .b32 %b<{nb}>;\n    .reg .f32 %c<4>;\n    .reg .b32 %s<2>;\n")
    lines, cands = [], []
    for operand in "ab":
        for bid in range(5):
            for tid in range(5):
                sel = {"a": "{0, 0}", "b": "{0, 0}"} | {operand: f"{{{bid}, {tid}}}"}
                lines.append(f"    {v.opcode} {vec('%c', 4)}, {vec('%a', na)}, {vec('%b', nb)}, {vec('%c', 4)}, "
                             f"%s0, {sel['a']}, %s1, {sel['b']};")
                cands.append((operand, bid, tid))
    text = head + "\n".join(lines) + "\n    ret;\n}\n"
    result = run_ptxas(text, "sm_120a")
    first = head.count("\n") + 1
    refused = result.failing_lines()
    assert refused and all(re.search(r"Argument \d+ of instruction 'mma'", l) for l in result.log.splitlines()
                           if "; error" in l)
    accepted = {c for i, c in enumerate(cands) if first + i not in refused}
    want = {(op, b, t) for op in "ab" for b, t in S.valid_selectors(scale_vec, op)}
    assert accepted == want
