"""Fragments and metadata of `mma.sp` / `mma.sp::ordered_metadata` (2:4 structured sparse A).

One table (`_TABLE`) is the source of truth for every sparse shape/type of the PTX ISA ("Matrix
fragments for multiply-accumulate operation with sparse matrix A" and "Sparse matrix storage").
Each row holds the two numbers the ISA's rules depend on:

* `unit_bits`: the width of what one 2-bit metadata index selects. The hardware sees every row of A
  as 4-wide chunks of units and keeps 2 of each 4: 16-bit units for .f16/.bf16 and for .tf32 (a tf32
  element is two units, which is why its "4-bit index" may only be 0b0100 or 0b1110), 8-bit units for
  8-bit types and for .s4/.u4 (a unit is a pair of 4-bit elements: the ISA's "pair-wise 4:8").
* `threads`: how many lanes of each quad supply metadata (1: selector f in 0..3 picks the lane;
  2: f in 0..1 picks the pair T0,T1 or T2,T3; 4: all four, f must be 0).

Everything else follows from those and from the dense tables of `fragments.py`:

Compressed A. The stored A is M x K/2: row r holds the kept elements of dense row r in order (chunk
by chunk, and in a chunk in increasing column order, which is what `compress` produces). The ISA's
sparse A formulas (row = groupID / groupID+8, "col = firstcol..lastcol" of a chunk) are exactly the
dense A layout of the half-K shape applied to that compressed matrix (sparse m16n8k16 f16 A =
dense m16n8k8 f16 A on the 16x8 compressed A, and so on for every row of the table), so
`compressed_a_layout` is that dense layout. Compressed column j of a row belongs to chunk
j // kept_per_chunk.

B, C, D. B is the dense B of the same shape where `fragments.py` has it; the sparse-only B shapes
(f16 m16n8k32, tf32 m16n8k16, 8-bit m16n8k64, 4-bit m16n8k128) are the half-K dense B repeated at
row K/2 (one more value bit), as the ISA figures draw them. C/D are the m16n8 accumulators.

Metadata. A row has 8 * threads two-bit fields (K units / 2, one per kept unit, in order); the two
fields of a chunk form one nibble, the first kept unit in the low 2 bits. Like a fragment, the
metadata is a linear function (`_META`): bit field v (bits 2v+1..2v, v = 0..15) of the `e` register
of lane 4 * groupID + t holds field `field` of row `row`, where (row, field) = (groupID, 0) plus
one step per set bit of v and per set bit of t below `threads`; lanes with t // threads != f are
ignored. The steps depend only on the unit width:

* 16-bit units (.f16, .bf16, .tf32): a lane's low half-word is row g, its high half-word row g + 8
  (same 4 chunks); with a thread pair the second lane holds the next 4 chunks of both rows.
* 8-bit units (.s8/.u8, fp8, .s4/.u4): a lane's word is 8 chunks of one row; the pair's first lane
  holds row g, the second row g + 8; with four lanes, lanes 2 and 3 hold chunks 8..15 of both.

The ISA gives this only as figures. The GPU test (`tests/gpu/test_sparse_probe_gpu.py`) reads it
off the hardware by flipping one nibble of one lane at a time; the 8-bit rows were found that way
(a first guess that carried the 16-bit half-word split over failed on the H200).

`mma.sp::ordered_metadata` requires the two indices of every chunk to increase from the LSB (the
ISA's meaningful values 0b0100, 0b1000, 0b1001, 0b1100, 0b1101, 0b1110); anything else is undefined.
Plain `mma.sp` also accepts them in decreasing order (only equal indices, 0b0000/0b0101/0b1010/
0b1111, are invalid; decreasing pairs run right on the H200, 4-bit pairs included): the kept
value stored first then belongs to the higher column. `compress`
always produces increasing indices, which are right for both; `metadata_words(ordered=False)`
accepts any distinct pair. For .tf32 only 0b0100 and 0b1110 are meaningful in either form.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
from tilemma.compiler.core import isa_rows
from tilemma.compiler.core.elements import BY_PTX
from tilemma.compiler.layouts import fragments as frag

LANES = frag.LANES
FIELD_BITS = 2
FIELDS_PER_WORD = 32 // FIELD_BITS
UNITS_PER_CHUNK = 4  # every sparse granularity is "2 of 4 units"


# ------------------------------------------------------------------------------------------------
# Patterns: how dense elements group into chunks (in elements, which is what users see)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pattern:
    """A structured-sparsity granularity: in every `chunk` consecutive elements of a row at most
    `kept` are nonzero, and nonzeros come in aligned runs of `atom` elements (2 for the ISA's
    pair-wise 4:8 of .s4/.u4/packed .e2m1, else 1)."""

    name: str
    chunk: int
    kept: int
    atom: int = 1

    @property
    def atoms_per_chunk(self) -> int:
        return self.chunk // self.atom

    @property
    def kept_atoms(self) -> int:
        return self.kept // self.atom

    @property
    def what(self) -> str:
        return "elements" if self.atom == 1 else "pairs"


PATTERNS = {
    "2:4": Pattern("2:4", 4, 2),
    "1:2": Pattern("1:2", 2, 1),
    "4:8": Pattern("4:8", 8, 4, atom=2),
}

# Element width in registers of each A/B type of a sparse mma (those of the ISA's mma.sp rows).
# .e2m1 sits in an 8-bit container under .kind::f8f6f4 (m16n8k64) and is packed to 4 bits only
# for the block-scaled m16n8k128 forms.
_TYPE_BITS = {
    t: BY_PTX[t].register_bits
    for t in isa_rows.INPUT_TYPES
    if any(t in row.atypes for row in isa_rows.ROWS if row.forms != isa_rows.DENSE)
}
_PACKED_E2M1_SHAPES = ("m16n8k128",)


def elem_bits(shape: str, elem_type: str) -> int:
    """Register width of one A/B element of a sparse `mma`."""
    if elem_type not in _TYPE_BITS:
        raise ValueError(
            f"{elem_type!r} is not a sparse mma multiplicand type; known: {sorted(_TYPE_BITS)}"
        )
    if elem_type == "e2m1" and shape in _PACKED_E2M1_SHAPES:
        return 4
    return _TYPE_BITS[elem_type]


def pattern_for(pattern_type: str | Pattern) -> Pattern:
    """A `Pattern` from a pattern name ('2:4', '1:2', '4:8') or a PTX type name: 2:4 for 16- and
    8-bit types (and .e2m1 in its 8-bit container), 1:2 for .tf32, pair-wise 4:8 for .s4/.u4."""
    if isinstance(pattern_type, Pattern):
        return pattern_type
    if pattern_type in PATTERNS:
        return PATTERNS[pattern_type]
    if pattern_type in _TYPE_BITS:
        bits = _TYPE_BITS[pattern_type]
        return PATTERNS[{32: "1:2", 16: "2:4", 8: "2:4", 4: "4:8"}[bits]]
    raise ValueError(
        f"unknown sparsity pattern {pattern_type!r}: give one of {sorted(PATTERNS)} or a sparse "
        f"A type ({', '.join(sorted(_TYPE_BITS))})"
    )


# ------------------------------------------------------------------------------------------------
# The table
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SparseSpec:
    """One sparse (shape, element width): the ISA facts every layout below is computed from."""

    shape: str
    elem_bits: int
    unit_bits: int  # what one 2-bit metadata index selects (see module docstring)
    threads: int  # lanes per quad supplying metadata: 1, 2 or 4

    @property
    def mnk(self) -> tuple[int, int, int]:
        return frag.shape_mnk(self.shape)

    @property
    def compressed_shape(self) -> str:
        """The dense shape whose A layout the compressed M x K/2 A follows."""
        m, n, k = self.mnk
        return f"m{m}n{n}k{k // 2}"

    @property
    def pattern(self) -> Pattern:
        chunk = UNITS_PER_CHUNK * self.unit_bits // self.elem_bits
        return next(p for p in PATTERNS.values() if p.chunk == chunk)

    @property
    def selectors(self) -> tuple[int, ...]:
        """Values of the sparsity selector f the ISA allows (others are undefined)."""
        return tuple(range(4 // self.threads))

    @property
    def fields_per_row(self) -> int:
        """Two-bit metadata fields per row of A: one per kept unit."""
        return self.mnk[2] * self.elem_bits // self.unit_bits // 2

    def metadata_lanes(self, selector: int) -> tuple[int, ...]:
        """Lanes whose `e` register the instruction reads for this selector."""
        check_selector(self, selector)
        return tuple(lane for lane in range(LANES) if (lane & 3) // self.threads == selector)

    def __str__(self) -> str:
        return f"sparse {self.shape} ({self.elem_bits}-bit elements, {self.pattern.name})"


# (shape, element bits) -> (unit_bits, threads). The selector ranges are the ISA's "Sparse matrix
# storage" lists; unit widths follow from its granularities (tf32 index = two 16-bit units, 4-bit
# pairs = one byte). K/2 dense A and the B derivation come from SparseSpec / _B_BASE.
_TABLE: dict[tuple[str, int], tuple[int, int]] = {
    ("m16n8k16", 16): (16, 1),  # .f16/.bf16
    ("m16n8k32", 16): (16, 2),
    ("m16n8k8", 32): (16, 1),  # .tf32, 1:2
    ("m16n8k16", 32): (16, 2),
    ("m16n8k32", 8): (8, 2),  # .s8/.u8
    ("m16n8k64", 8): (8, 4),  # .s8/.u8, .e4m3/.e5m2, f8f6f4 containers
    ("m16n8k64", 4): (8, 2),  # .s4/.u4, pair-wise 4:8
    ("m16n8k128", 4): (8, 4),  # .s4/.u4, packed .e2m1
}

# B of the sparse shapes: (dense shape whose B layout is used, repeated at row K/2?)
_B_BASE: dict[tuple[str, int], tuple[str, bool]] = {
    ("m16n8k16", 16): ("m16n8k16", False),
    ("m16n8k32", 16): ("m16n8k16", True),
    ("m16n8k8", 32): ("m16n8k8", False),
    ("m16n8k16", 32): ("m16n8k8", True),
    ("m16n8k32", 8): ("m16n8k32", False),
    ("m16n8k64", 8): ("m16n8k32", True),
    ("m16n8k64", 4): ("m16n8k64", False),
    ("m16n8k128", 4): ("m16n8k64", True),
}


def all_specs() -> list[SparseSpec]:
    return [SparseSpec(s, b, *v) for (s, b), v in _TABLE.items()]


def sparse_spec(shape: str, elem_type: str) -> SparseSpec:
    """The table row of a sparse (shape, A type); ValueError names the shapes that exist."""
    bits = elem_bits(shape, elem_type)
    row = _TABLE.get((shape, bits))
    if row is None:
        have = sorted(s for (s, b) in _TABLE if b == bits)
        raise ValueError(
            f"mma.sp has no {shape} form with .{elem_type} ({bits}-bit) A; shapes for it: {have}"
        )
    return SparseSpec(shape, bits, *row)


def check_selector(spec: SparseSpec, selector: int) -> None:
    if selector not in spec.selectors:
        rule = {
            1: "one thread of each quad supplies metadata: f in {0, 1, 2, 3}",
            2: "a thread pair supplies metadata: f = 0 (T0, T1) or 1 (T2, T3)",
            4: "all four threads of each quad supply metadata: f must be 0",
        }[spec.threads]
        raise ValueError(f"sparsity selector {selector} is undefined for {spec}: {rule}")


# ------------------------------------------------------------------------------------------------
# Fragment layouts (reusing fragments.py)
# ------------------------------------------------------------------------------------------------
@functools.cache
def compressed_a_layout(shape: str, elem_type: str) -> frag.FragmentLayout:
    """Which (lane, value) holds which (row, compressed column) of the M x K/2 compressed A.

    `shape` on the result is the sparse shape; rows x cols is M x K/2."""
    spec = sparse_spec(shape, elem_type)
    dense = frag.layout(spec.compressed_shape, "a", elem_type)
    assert dense.elem_bits == spec.elem_bits, (dense, spec)
    return dataclasses.replace(dense, shape=shape)


@functools.cache
def b_layout(shape: str, elem_type: str) -> frag.FragmentLayout:
    """B (K x N) of a sparse shape: the dense B, or the half-K dense B repeated at row K/2."""
    spec = sparse_spec(shape, elem_type)
    base_shape, doubled = _B_BASE[(shape, spec.elem_bits)]
    base = frag.layout(base_shape, "b", elem_type)
    assert base.elem_bits == spec.elem_bits, (base, spec)
    if not doubled:
        return base
    k = spec.mnk[2]
    return dataclasses.replace(
        base, shape=shape, rows=k, regs=base.regs * 2, value_bits=base.value_bits + ((k // 2, 0),)
    )


@functools.cache
def accumulator_layout(shape: str, acc_type: str) -> frag.FragmentLayout:
    """C/D: the same m16n8 accumulator layout for every sparse shape (ISA 9.7.14.6.2)."""
    frag.shape_mnk(shape)
    return dataclasses.replace(frag.layout("m16n8k16", "c", acc_type), shape=shape)


def pack_a(shape: str, elem_type: str, compressed_bits: np.ndarray) -> np.ndarray:
    """Each lane's A register words [32, regs] from the M x K/2 compressed A's raw element bits."""
    return frag.pack(compressed_a_layout(shape, elem_type), compressed_bits)


def unpack_a(shape: str, elem_type: str, words: np.ndarray) -> np.ndarray:
    """The M x K/2 compressed A (raw bits) held by [32, regs] A register words."""
    return frag.unpack(compressed_a_layout(shape, elem_type), words)


# ------------------------------------------------------------------------------------------------
# compress / decompress / prune
# ------------------------------------------------------------------------------------------------
def _atoms(dense: np.ndarray, pat: Pattern) -> np.ndarray:
    """dense M x K as [M, groups, atoms_per_chunk, atom]."""
    m, k = dense.shape
    if k % pat.chunk:
        raise ValueError(f"{pat.name} sparsity needs K a multiple of {pat.chunk}, got K = {k}")
    return dense.reshape(m, k // pat.chunk, pat.atoms_per_chunk, pat.atom)


def _chosen_atoms(score: np.ndarray, pat: Pattern) -> np.ndarray:
    """Positions (increasing) of the kept atoms per group: highest score first, ties to the
    lower position; [M, groups, kept_atoms]."""
    order = np.argsort(-score, axis=-1, kind="stable")[..., : pat.kept_atoms]
    return np.sort(order, axis=-1)


def _gather(dense: np.ndarray, pat: Pattern, atom_pos: np.ndarray):
    m, k = dense.shape
    atoms = _atoms(dense, pat)
    values = np.take_along_axis(atoms, atom_pos[..., None], axis=2).reshape(m, k // 2)
    indices = (atom_pos[..., None] * pat.atom + np.arange(pat.atom)).reshape(m, k // 2)
    return values, indices.astype(np.uint8)


def compress(dense, pattern_type: str | Pattern = "2:4") -> tuple[np.ndarray, np.ndarray]:
    """(values, indices), both M x K/2: the kept elements of every row in order and each one's
    position in its chunk (0..3 for 2:4, 0..1 for 1:2, 0..7 for 4:8).

    Raises ValueError naming the first (row, group) in row-major order that has more nonzeros
    than the pattern keeps. Groups with fewer nonzeros keep zeros at their lowest free positions;
    indices always increase within a chunk (what `mma.sp::ordered_metadata` requires)."""
    dense = np.asarray(dense)
    if dense.ndim != 2:
        raise ValueError(f"compress takes an M x K matrix, got shape {dense.shape}")
    pat = pattern_for(pattern_type)
    nz = (_atoms(dense, pat) != 0).any(axis=-1)
    count = nz.sum(axis=-1)
    bad = np.argwhere(count > pat.kept_atoms)
    if bad.size:
        row, group = (int(x) for x in bad[0])
        lo = group * pat.chunk
        raise ValueError(
            f"A is not {pat.name} sparse: row {row}, group {group} (columns {lo}..{lo + pat.chunk - 1}) "
            f"has {int(count[row, group])} nonzero {pat.what}, at most {pat.kept_atoms} allowed"
        )
    return _gather(dense, pat, _chosen_atoms(nz.astype(np.int8), pat))


def prune(dense, pattern_type: str | Pattern = "2:4") -> np.ndarray:
    """Dense M x K with only the largest-magnitude elements of every group kept (two of four; one
    of two for 1:2; the two pairs of largest |x0| + |x1| for 4:8), others zeroed; ties keep the
    lower column. The result always passes `compress`."""
    dense = np.asarray(dense)
    pat = pattern_for(pattern_type)
    atoms = _atoms(dense, pat)
    mag = np.abs(atoms.astype(np.float64)).sum(axis=-1)
    keep = _chosen_atoms(mag, pat)
    mask = np.zeros(mag.shape, bool)
    np.put_along_axis(mask, keep, True, axis=-1)
    return np.where(mask[..., None], atoms, np.zeros((), dense.dtype)).reshape(dense.shape)


def decompress(values, indices, pattern_type: str | Pattern = "2:4") -> np.ndarray:
    """The dense M x K matrix of compressed (values, indices); indices need not be increasing
    (plain `mma.sp` allows either order) but must be distinct, in range, and atom-aligned."""
    values, indices = np.asarray(values), np.asarray(indices).astype(np.int64)
    pat = pattern_for(pattern_type)
    if values.shape != indices.shape or values.ndim != 2:
        raise ValueError(
            f"values {values.shape} and indices {indices.shape} must be equal, M x K/2"
        )
    m, half = values.shape
    if half % pat.kept:
        raise ValueError(f"{pat.name}: compressed width {half} is not a multiple of {pat.kept}")
    _check_indices(indices, pat)
    chunk = np.arange(half) // pat.kept
    cols = chunk * pat.chunk + indices
    dense = np.zeros((m, half * 2), values.dtype)
    np.put_along_axis(dense, cols, values, axis=1)
    return dense


def _check_indices(indices: np.ndarray, pat: Pattern, ordered: bool = False) -> None:
    m, half = indices.shape
    g = indices.reshape(m, half // pat.kept, pat.kept_atoms, pat.atom)
    first = g[..., 0]
    problems = [
        ((g < 0) | (g >= pat.chunk)).any(axis=(-1, -2)),
        (g != first[..., None] + np.arange(pat.atom)).any(axis=(-1, -2))
        | (first % pat.atom != 0).any(-1),
    ]
    srt = np.sort(first, axis=-1)
    problems.append((srt[..., 1:] == srt[..., :-1]).any(axis=-1))
    if ordered:
        problems.append((first[..., 1:] <= first[..., :-1]).any(axis=-1))
    what = ("out of range", f"not aligned runs of {pat.atom}", "repeated", "not increasing")
    for problem, text in zip(problems, what):
        bad = np.argwhere(problem)
        if bad.size:
            row, group = (int(x) for x in bad[0])
            span = g[row, group].reshape(-1).tolist()
            raise ValueError(f"{pat.name} indices of row {row}, group {group} are {text}: {span}")


# ------------------------------------------------------------------------------------------------
# Metadata
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetadataLayout:
    """Where each 2-bit metadata field lives: bit field v (bits 2v+1..2v) of lane l's `e` holds the
    index of kept unit `field[l, v]` of row `row[l, v]`; both are -1 where the lane is ignored."""

    spec: SparseSpec
    selector: int
    row: np.ndarray  # [32, 16]
    field: np.ndarray  # [32, 16]

    def compressed_cols(self, field: int) -> tuple[int, ...]:
        """Compressed A columns whose position the field's index gives (a tf32 element is two
        fields, a 4-bit pair one)."""
        eb, ub = self.spec.elem_bits, self.spec.unit_bits
        if eb >= ub:
            return (field // (eb // ub),)
        r = ub // eb
        return tuple(range(field * r, field * r + r))


# unit bits -> (row/field step of each bit of v, row/field step of each thread bit of the quad)
_META: dict[int, tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]] = {
    16: (((0, 1), (0, 2), (0, 4), (8, 0)), ((0, 8), (0, 16))),
    8: (((0, 1), (0, 2), (0, 4), (0, 8)), ((8, 0), (0, 16))),
}


@functools.cache
def metadata_layout(shape: str, elem_type: str, selector: int) -> MetadataLayout:
    """The metadata layout (module docstring, `_META`) for one selector value."""
    spec = sparse_spec(shape, elem_type)
    check_selector(spec, selector)
    v_steps, t_steps = _META[spec.unit_bits]
    t_bits = spec.threads.bit_length() - 1
    lane = np.arange(LANES)[:, None]
    v = np.arange(FIELDS_PER_WORD)[None, :]
    t = lane & 3
    row, field = (lane >> 2) + 0 * v, 0 * lane + 0 * v
    for bits, steps in ((v, v_steps), (t, t_steps[:t_bits])):
        for b, (dr, df) in enumerate(steps):
            row = row + dr * ((bits >> b) & 1)
            field = field + df * ((bits >> b) & 1)
    live = (t >> t_bits == selector) & np.ones_like(v, bool)
    row, field = np.where(live, row, -1), np.where(live, field, -1)
    assert spec.fields_per_row == 8 * spec.threads, spec
    for a in (row, field):
        a.setflags(write=False)
    return MetadataLayout(spec, selector, row, field)


def metadata_fields(indices, shape: str, elem_type: str, ordered: bool = True) -> np.ndarray:
    """M x fields_per_row two-bit unit indices (position of each kept unit in its 4-unit chunk)
    from the compressed A's element indices; checks the pattern (and, when `ordered`, that each
    chunk's indices increase)."""
    spec = sparse_spec(shape, elem_type)
    m, _, k = spec.mnk
    idx = np.asarray(indices).astype(np.int64)
    if idx.shape != (m, k // 2):
        raise ValueError(f"{spec}: indices must be {m} x {k // 2}, got {idx.shape}")
    pat = spec.pattern
    _check_indices(idx, pat, ordered=ordered)
    eb, ub = spec.elem_bits, spec.unit_bits
    if eb >= ub:  # one element spans eb // ub units (tf32: two)
        r = eb // ub
        units = (idx[..., None] * r + np.arange(r)).reshape(m, -1)
    else:  # ub // eb elements share a unit (4-bit pairs)
        units = idx.reshape(m, -1, ub // eb)[..., 0] // (ub // eb)
    assert units.shape == (m, spec.fields_per_row)
    return units


def metadata_words(
    indices, shape: str, elem_type: str, selector: int, ordered: bool = True
) -> np.ndarray:
    """Each lane's `e` register, [32] uint32, for the compressed A's indices (M x K/2, as from
    `compress`). Lanes the selector leaves out get 0 (the instruction ignores them). `ordered`
    (the default, right for both forms) rejects chunks whose indices do not increase; pass False
    for plain `mma.sp` with decreasing pairs."""
    units = metadata_fields(indices, shape, elem_type, ordered)
    lay = metadata_layout(shape, elem_type, selector)
    live = lay.row >= 0
    vals = np.where(live, units[np.maximum(lay.row, 0), np.maximum(lay.field, 0)], 0)
    shifts = (FIELD_BITS * np.arange(FIELDS_PER_WORD)).astype(np.uint32)
    return np.bitwise_or.reduce(vals.astype(np.uint32) << shifts, axis=1)


def metadata_indices(words, shape: str, elem_type: str, selector: int) -> np.ndarray:
    """Inverse of `metadata_words`: the compressed A's element indices (M x K/2) the instruction
    reads from the lanes' `e` registers. Raises where a tf32 element's two units or a 4-bit
    pair's unit disagree with the pattern (undefined behaviour on the GPU)."""
    spec = sparse_spec(shape, elem_type)
    lay = metadata_layout(shape, elem_type, selector)
    words = np.asarray(words, dtype=np.uint32).reshape(LANES)
    m = spec.mnk[0]
    shifts = (FIELD_BITS * np.arange(FIELDS_PER_WORD)).astype(np.uint32)
    vals = (words[:, None] >> shifts) & np.uint32(3)
    units = np.full((m, spec.fields_per_row), -1, np.int64)
    live = lay.row >= 0
    units[lay.row[live], lay.field[live]] = vals[live]
    eb, ub = spec.elem_bits, spec.unit_bits
    if eb >= ub:
        r = eb // ub
        u = units.reshape(m, -1, r)
        whole = (u == u[..., :1] + np.arange(r)).all(-1) & (u[..., 0] % r == 0)
        if not whole.all():
            row, col = (int(x) for x in np.argwhere(~whole)[0])
            raise ValueError(
                f"{spec}: metadata units {u[row, col].tolist()} of row {row}, compressed column "
                f"{col} do not select one whole element (tf32 allows only 0b0100 and 0b1110)"
            )
        idx = u[..., 0] // r
    else:
        r = ub // eb
        idx = (units[..., None] * r + np.arange(r)).reshape(m, -1)
    _check_indices(idx, spec.pattern)
    return idx.astype(np.uint8)
