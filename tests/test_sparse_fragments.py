"""The sparse tables against the PTX ISA text: compressed A coverage and formulas, the 2:4 / 1:2 /
pair-wise 4:8 patterns (compress, prune, decompress, the first-offending-group error), metadata
bit positions worked out by hand from "Sparse matrix storage", and the raw-register probe harness
(self-consistent on the CPU, and every probe accepted by ptxas). The GPU proof is in
tests/gpu/test_sparse_probe_gpu.py."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from tilemma.compiler.layouts import fragments as F
from tilemma.compiler.core import isa
from tilemma.compiler.layouts import sparse_fragments as S
from tools import sparse_probe as P
from tilemma.compiler.runtime.ptxas import find_ptxas, run_ptxas
from tilemma.compiler.core.targets import parse_ptx_version

# (shape, A types, selector values) of every sparse family in the ISA's storage section.
FAMILIES = [
    ("m16n8k16", ("f16", "bf16"), 4),
    ("m16n8k32", ("f16", "bf16"), 2),
    ("m16n8k8", ("tf32",), 4),
    ("m16n8k16", ("tf32",), 2),
    ("m16n8k32", ("s8", "u8"), 2),
    ("m16n8k64", ("s8", "u8", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1"), 1),
    ("m16n8k64", ("s4", "u4"), 2),
    ("m16n8k128", ("s4", "u4", "e2m1"), 1),
]
SHAPE_TYPES = [(s, t) for s, types, _ in FAMILIES for t in types]
SPARSE_VARIANTS = [v for v in isa.all_variants() if v.sparse and not v.block_scale]


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


@pytest.mark.parametrize("shape,types,n_selectors", FAMILIES)
def test_selector_ranges_are_the_isa_lists(shape, types, n_selectors):
    for t in types:
        spec = S.sparse_spec(shape, t)
        assert spec.selectors == tuple(range(n_selectors))
        with pytest.raises(ValueError, match=f"sparsity selector {n_selectors} is undefined"):
            S.metadata_layout(shape, t, n_selectors)


def test_every_sparse_variant_has_a_table_row():
    for v in SPARSE_VARIANTS:
        counts, _ = P.probe_registers(v.opcode)  # raises if counts disagree with isa.py
        assert counts == {o.name: o.count for o in v.operands if o.name in counts}


def test_unknown_shape_type_names_the_shapes_that_exist():
    with pytest.raises(ValueError, match=r"no m16n8k8 form with \.f16.*\['m16n8k16', 'm16n8k32'\]"):
        S.sparse_spec("m16n8k8", "f16")


@pytest.mark.parametrize("shape,elem_type", SHAPE_TYPES)
def test_compressed_a_covers_m_by_half_k_once(shape, elem_type):
    lay = S.compressed_a_layout(shape, elem_type)
    m, _, k = F.shape_mnk(shape)
    assert (lay.rows, lay.cols) == (m, k // 2)
    rows, cols = F.coords(lay)
    count = np.zeros((m, k // 2), int)
    np.add.at(count, (rows, cols), 1)
    assert (count == 1).all()


# The ISA's sparse A formulas, per section: (row offset of value i, firstcol(t, i), span of
# firstcol..lastcol). Independent of the table, which derives A from the half-K dense layout.
_ISA_A = {
    ("m16n8k16", 16): (lambda i: 8 * (i >= 2), lambda t, i: 4 * t, 4),
    ("m16n8k32", 16): (lambda i: 8 * (i % 4 >= 2), lambda t, i: 4 * t + 16 * (i >= 4), 4),
    ("m16n8k16", 32): (lambda i: 8 * (i % 2), lambda t, i: 2 * t + 8 * (i >= 2), 2),
    ("m16n8k8", 32): (lambda i: 8 * i, lambda t, i: 2 * t, 2),
    ("m16n8k32", 8): (lambda i: 8 * (i >= 4), lambda t, i: 8 * t, 8),
    ("m16n8k64", 8): (lambda i: 8 * (i % 8 >= 4), lambda t, i: 8 * t + 32 * (i >= 8), 8),
    ("m16n8k64", 4): (lambda i: 8 * (i >= 8), lambda t, i: 16 * t, 16),
    ("m16n8k128", 4): (lambda i: 8 * (i % 16 >= 8), lambda t, i: 16 * t + 64 * (i >= 16), 16),
}


@pytest.mark.parametrize("shape,elem_type", SHAPE_TYPES)
def test_compressed_a_matches_isa_row_and_column_range(shape, elem_type):
    spec = S.sparse_spec(shape, elem_type)
    row_of, firstcol, span = _ISA_A[(shape, spec.elem_bits)]
    lay = S.compressed_a_layout(shape, elem_type)
    rows, cols = F.coords(lay)
    pat = spec.pattern
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(lay.nvals):
            assert rows[lane, i] == g + row_of(i), (lane, i)
            dense_lo = cols[lane, i] // pat.kept * pat.chunk  # start of the value's chunk
            assert firstcol(t, i) <= dense_lo <= firstcol(t, i) + span - pat.chunk, (lane, i)


def test_b_of_sparse_only_shapes_doubles_the_half_k_b():
    b = S.b_layout("m16n8k32", "f16")
    rows, cols = F.coords(b)
    # lane 5 (g=1, t=1): b0..b7 at rows 2t + (i&1) + 8 * (i>>1), col g
    assert rows[5].tolist() == [2, 3, 10, 11, 18, 19, 26, 27] and set(cols[5]) == {1}
    for shape, t, k in (("m16n8k16", "tf32", 16), ("m16n8k64", "s8", 64), ("m16n8k128", "u4", 128)):
        lay = S.b_layout(shape, t)
        r, c = F.coords(lay)
        count = np.zeros((k, 8), int)
        np.add.at(count, (r, c), 1)
        assert (lay.rows, (count == 1).all()) == (k, True)
    assert S.b_layout("m16n8k16", "f16") == F.layout("m16n8k16", "b", "f16")


def test_e2m1_is_a_container_at_k64_and_packed_at_k128():
    assert S.sparse_spec("m16n8k64", "e2m1").elem_bits == 8
    assert S.sparse_spec("m16n8k128", "e2m1").pattern.name == "4:8"
    assert S.compressed_a_layout("m16n8k64", "e2m1").regs == 4


# ------------------------------------------------------------------------------------------------
# compress / prune / decompress
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", ["2:4", "1:2", "4:8"])
def test_prune_compress_decompress_round_trip(pattern):
    rng = _rng("rt", pattern)
    dense = rng.integers(-9, 10, (16, 64)).astype(np.float32)
    pruned = S.prune(dense, pattern)
    values, indices = S.compress(pruned, pattern)
    assert values.shape == indices.shape == (16, 32)
    assert np.array_equal(S.decompress(values, indices, pattern), pruned)
    pat = S.PATTERNS[pattern]
    # kept ones are the largest of each group; every group keeps exactly pat.kept columns
    kept_mask = S.decompress(np.ones_like(values), indices, pattern) != 0
    groups = np.abs(dense).reshape(16, -1, pat.atoms_per_chunk, pat.atom).sum(-1)
    kept_atoms = kept_mask.reshape(16, -1, pat.atoms_per_chunk, pat.atom).all(-1)
    assert (kept_atoms.sum(-1) == pat.kept_atoms).all()
    worst_kept = np.where(kept_atoms, groups, np.inf).min(-1)
    best_dropped = np.where(kept_atoms, -np.inf, groups).max(-1)
    assert (worst_kept >= best_dropped).all()


def test_prune_keeps_the_two_largest_magnitudes_ties_to_the_left():
    dense = np.array([[1.0, -5.0, 3.0, 0.5, 2.0, 2.0, 2.0, 2.0]])
    assert S.prune(dense).tolist() == [[0.0, -5.0, 3.0, 0.0, 2.0, 2.0, 0.0, 0.0]]
    # 4:8 keeps the two pairs with the largest |x0| + |x1|
    dense = np.array([[1, 1, 0, 5, 3, 3, 0, 0]])
    assert S.prune(dense, "4:8").tolist() == [[0, 0, 0, 5, 3, 3, 0, 0]]


def test_compress_fills_sparse_groups_with_increasing_indices():
    dense = np.array([[0, 0, 0, 7, 0, 0, 0, 0, 4, 0, 0, 0]])
    values, indices = S.compress(dense)
    assert values.tolist() == [[0, 7, 0, 0, 4, 0]]
    assert indices.tolist() == [[0, 3, 0, 1, 0, 1]]


def test_compress_names_the_first_offending_group():
    dense = np.zeros((4, 16))
    dense[3, 0:3] = 1  # later in row-major order
    dense[2, 4:7] = [1, 2, 3]  # row 2, group 1: three nonzeros
    with pytest.raises(
        ValueError,
        match=r"not 2:4 sparse: row 2, group 1 \(columns 4\.\.7\) has 3 nonzero elements, at most 2",
    ):
        S.compress(dense, "f16")
    tf = np.zeros((2, 8))
    tf[1, 6:8] = 1
    with pytest.raises(
        ValueError, match=r"not 1:2 sparse: row 1, group 3 \(columns 6\.\.7\) has 2"
    ):
        S.compress(tf, "tf32")


def test_four_bit_pattern_is_pairwise():
    ok = np.zeros((1, 16), np.int8)
    ok[0, [0, 1, 6, 7]] = [1, -2, 3, 4]  # pairs 0 and 3
    values, indices = S.compress(ok, "s4")
    assert values.tolist() == [[1, -2, 3, 4, 0, 0, 0, 0]]
    assert indices.tolist() == [[0, 1, 6, 7, 0, 1, 2, 3]]
    bad = np.zeros((1, 16), np.int8)
    bad[0, [1, 2, 4]] = 1  # two elements, but in three different pairs
    with pytest.raises(ValueError, match=r"row 0, group 0 \(columns 0\.\.7\) has 3 nonzero pairs"):
        S.compress(bad, "u4")


def test_decompress_rejects_invalid_indices():
    with pytest.raises(ValueError, match="repeated"):
        S.decompress(np.ones((1, 2)), np.array([[1, 1]]))
    with pytest.raises(ValueError, match="out of range"):
        S.decompress(np.ones((1, 2)), np.array([[1, 4]]))
    with pytest.raises(ValueError, match="not aligned runs of 2"):
        S.decompress(np.ones((1, 4)), np.array([[1, 2, 4, 5]]), "4:8")
    # decreasing order is a valid (plain mma.sp) encoding of the same matrix
    assert S.decompress(np.array([[5, 6]]), np.array([[3, 0]])).tolist() == [[6, 0, 0, 5]]


# ------------------------------------------------------------------------------------------------
# Metadata
# ------------------------------------------------------------------------------------------------
def _indices(shape, elem_type, chunk_positions):
    """M x K/2 indices with every chunk keeping its lowest atoms, overridden per (row, chunk)."""
    spec = S.sparse_spec(shape, elem_type)
    m, _, k = spec.mnk
    pat = spec.pattern
    base = np.tile(np.arange(pat.kept), (m, k // pat.chunk))
    for (row, chunk), pos in chunk_positions.items():
        base[row, chunk * pat.kept : (chunk + 1) * pat.kept] = pos
    return base


def test_metadata_f16_k16_one_lane_per_quad_rows_g_and_g_plus_8():
    # selector 2: lanes 2, 6, ..., 30. Chunk c of row g is nibble c of the low half, of row g+8
    # nibble c of the high half; a nibble holds (first index) | (second index) << 2.
    idx = _indices("m16n8k16", "f16", {(0, 2): [1, 3], (8, 0): [2, 3]})
    words = S.metadata_words(idx, "m16n8k16", "f16", 2)
    assert words[2] == 0x444E_4D44
    assert words[6] == words[30] == 0x4444_4444
    assert not words[[0, 1, 3, 4, 5, 7]].any()


def test_metadata_f16_k32_thread_pair_splits_the_row():
    # selector 1: lanes 2 (chunks 0..3) and 3 (chunks 4..7) of quad 0; 0b1100 = indices (0, 3)
    idx = _indices("m16n8k32", "bf16", {(0, 5): [0, 3], (8, 3): [1, 2]})
    words = S.metadata_words(idx, "m16n8k32", "bf16", 1)
    assert words[3] == 0x4444_44C4
    assert words[2] == 0x9444_4444
    assert not words[[0, 1, 4, 5]].any()


def test_metadata_tf32_uses_the_two_meaningful_nibbles():
    # 1:2: element 0 of a chunk -> 0b0100, element 1 -> 0b1110 (two 16-bit units each)
    idx = np.ones((16, 4), int)
    idx[5, 0] = 0
    words = S.metadata_words(idx, "m16n8k8", "tf32", 0)
    assert words[20] == 0xEEEE_EEE4  # lane 4*5 + 0: row 5 low half, row 13 high half
    idx16 = np.zeros((16, 8), int)
    words16 = S.metadata_words(idx16, "m16n8k16", "tf32", 1)
    assert words16[2] == words16[3] == 0x4444_4444 and not words16[[0, 1]].any()


def test_metadata_four_bit_indices_name_pairs():
    # s4 pair-wise 4:8: pairs 1 and 3 of group 0 (elements 2, 3, 6, 7) -> 0b1101
    idx = _indices("m16n8k64", "s4", {(0, 0): [2, 3, 6, 7], (8, 7): [0, 1, 4, 5]})
    words = S.metadata_words(idx, "m16n8k64", "s4", 0)
    # 8-bit units: a lane's word is one row (lane 0 row 0, lane 1 row 8), chunk c = nibble c
    assert (words[0], words[1]) == (0x4444_444D, 0x8444_4444)
    idx = _indices("m16n8k128", "u4", {(1, 4): [0, 1, 4, 5], (9, 9): [2, 3, 4, 5]})
    words = S.metadata_words(idx, "m16n8k128", "u4", 0)
    # four lanes: 4 (row 1, chunks 0..7), 5 (row 9, 0..7), 6 (row 1, 8..15), 7 (row 9, 8..15)
    assert words[4:8].tolist() == [0x4448_4444, 0x4444_4444, 0x4444_4444, 0x4444_4494]


def test_metadata_k64_eight_bit_all_four_lanes():
    idx = _indices("m16n8k64", "s8", {(3, 13): [2, 3], (11, 2): [0, 2]})
    words = S.metadata_words(idx, "m16n8k64", "s8", 0)
    assert words[14] == 0x44E4_4444  # row 3 = g, chunk 13 = lane t=2 (chunks 8..15), nibble 5
    assert words[13] == 0x4444_4844  # row 11 = g + 8, chunk 2 = lane t=1, nibble 2
    assert (np.delete(words, [13, 14]) == 0x4444_4444).all()


def test_metadata_s8_k32_pair_is_row_g_then_row_g_plus_8():
    idx = _indices("m16n8k32", "u8", {(2, 7): [1, 2], (10, 0): [0, 3]})
    words = S.metadata_words(idx, "m16n8k32", "u8", 1)
    assert (words[10], words[11]) == (0x9444_4444, 0x4444_444C)
    assert not words[[8, 9]].any()


def test_ordered_metadata_needs_increasing_indices():
    idx = _indices("m16n8k16", "f16", {(4, 1): [3, 0]})
    with pytest.raises(ValueError, match=r"row 4, group 1 are not increasing: \[3, 0\]"):
        S.metadata_words(idx, "m16n8k16", "f16", 0)
    words = S.metadata_words(idx, "m16n8k16", "f16", 0, ordered=False)
    assert words[16] & 0xF0 == 0x30  # 0b0011: first kept at column 3, second at column 0
    with pytest.raises(ValueError, match="repeated"):
        S.metadata_words(
            _indices("m16n8k16", "f16", {(0, 0): [2, 2]}), "m16n8k16", "f16", 0, ordered=False
        )


@pytest.mark.parametrize("shape,elem_type", SHAPE_TYPES)
def test_metadata_layout_covers_every_field_once_and_round_trips(shape, elem_type):
    spec = S.sparse_spec(shape, elem_type)
    rng = _rng("meta", shape, elem_type)
    idx = P.random_kept_positions(spec, rng)
    for f in spec.selectors:
        lay = S.metadata_layout(shape, elem_type, f)
        live = lay.row >= 0
        assert sorted(np.flatnonzero(live.any(1))) == list(spec.metadata_lanes(f))
        count = np.zeros((spec.mnk[0], spec.fields_per_row), int)
        np.add.at(count, (lay.row[live], lay.field[live]), 1)
        assert (count == 1).all()
        words = S.metadata_words(idx, shape, elem_type, f)
        assert np.array_equal(S.metadata_indices(words, shape, elem_type, f), idx)


def test_compressed_cols_of_a_field():
    assert S.metadata_layout("m16n8k8", "tf32", 0).compressed_cols(5) == (2,)
    assert S.metadata_layout("m16n8k64", "s4", 0).compressed_cols(5) == (10, 11)
    assert S.metadata_layout("m16n8k32", "f16", 0).compressed_cols(5) == (5,)


# ------------------------------------------------------------------------------------------------
# Probe harness
# ------------------------------------------------------------------------------------------------
SM90 = [v.opcode for v in isa.legal_variants("sm_90") if v.sparse]
HARNESS = [
    "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    "mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "mma.sp.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.u8.s32",
    "mma.sp.sync.aligned.m16n8k128.row.col.s32.u4.s4.s32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e5m2.e4m3.f32",
]


@pytest.mark.parametrize("opcode", HARNESS)
def test_probe_case_is_self_consistent_and_can_fail(opcode):
    v = isa.parse_opcode(opcode)
    spec = S.sparse_spec(v.shape, v.atype)
    changed_somewhere = False
    for f in spec.selectors:
        case = P.sparse_probe_case(opcode, f, _rng("case", opcode, f))
        values, indices = S.compress(case.dense_a, spec.pattern)  # the dense A has the pattern
        assert np.array_equal(S.decompress(values, indices, spec.pattern), case.dense_a)
        assert np.array_equal(P.emulate(case), case.expected)
        good = P.encode_d(opcode, case.expected)
        assert case.mismatches(good) == []
        wrong = good.copy()
        wrong[7, 1] ^= np.uint32(0x4000_0000)
        assert case.mismatches(wrong)
        # ignored lanes carry noise; a lane that supplies metadata, changed, changes D
        lane = spec.metadata_lanes(f)[0]
        other = dict(case.words, e=case.words["e"].copy())
        low = int(other["e"][lane]) & 0xF
        other["e"][lane] = (int(other["e"][lane]) & ~0xF) | (0b1110 if low == 0b0100 else 0b0100)
        changed = P.emulate_registers(opcode, f, other)
        if not np.array_equal(changed, case.expected):
            changed_somewhere = True
            assert case.mismatches(P.encode_d(opcode, changed))
    assert changed_somewhere


def test_unordered_case_swaps_chunks_and_stays_equivalent():
    op = "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
    case = P.sparse_probe_case(op, 1, _rng("unordered"), unordered=True)
    first = case.indices.reshape(16, -1, 2)
    assert (first[..., 0] > first[..., 1]).any() and (first[..., 0] < first[..., 1]).any()
    assert np.array_equal(P.emulate(case), case.expected)
    with pytest.raises(ValueError, match="only plain mma.sp"):
        P.sparse_probe_case(
            op.replace("mma.sp.", "mma.sp::ordered_metadata."), 0, _rng(), unordered=True
        )


@pytest.mark.parametrize(
    "opcode", [op for op in SM90 if "ordered" in op and ".satfinite" not in op][::3]
)
def test_discovery_decodes_the_table_on_a_cpu_stand_in(opcode):
    v = isa.parse_opcode(opcode)
    f = S.sparse_spec(v.shape, v.atype).selectors[-1]
    disc = P.MetadataDiscovery(opcode, f)
    a, b, c, e, d = disc.args()
    per = lambda x, i: x.reshape(disc.blocks, 32, -1)[i]
    d = d.reshape(disc.blocks, 32, -1)
    for i in range(disc.blocks):
        words = {"a": per(a, i), "b": per(b, i), "c": per(c, i), "e": per(e, i).reshape(32)}
        d[i] = P.encode_d(opcode, P.emulate_registers(opcode, f, words))
    assert disc.decode(d) == disc.expected_map()
    live = sum(x is not None for x in disc.expected_map().values())
    assert live == 8 * S.sparse_spec(v.shape, v.atype).threads * P.NIBBLES


@pytest.mark.ptxas
@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not on PATH")
def test_every_sparse_probe_assembles():
    """Every sparse variant the table defines, every selector value, on a target that has it."""
    failures, n = [], 0
    for v in SPARSE_VARIANTS:
        target = "sm_90" if v.supported_on("sm_90") else "sm_120a"
        ptx = max(v.min_ptx_on(target), parse_ptx_version("8.7" if target == "sm_90" else "0.0"))
        for f in S.sparse_spec(v.shape, v.atype).selectors:
            result = run_ptxas(P.opcode_ptx(v.opcode, f, target, str(ptx)), target)
            n += 1
            if not result.ok:
                failures.append(f"{v.opcode} f={f} on {target}: {result.log.strip()[:300]}")
    assert n == 206 and not failures, "\n".join(failures)
