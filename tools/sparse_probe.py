"""Raw-register probes of one `mma.sp` / `mma.sp::ordered_metadata`, to prove the sparse tables.

Like `mma_probe`, but with the two sparse operands: every lane also loads its metadata word `e`
(a .b32 from global memory, laid out [lane]) and the sparsity selector `f` is an immediate baked
into the PTX. The kernel indexes every buffer by block as well (thread ctaid.x * 32 + laneid), so
one launch can run many independent cases.

`sparse_probe_case` builds one test: a random dense A with the pattern (random kept positions),
its compressed form through `sparse_fragments.compress`, every lane's A/B/C/e registers through the
tables, and the expected D = dense A @ B + C from `reference.mma_reference`. Lanes the selector
leaves out get random `e` words, so a wrong idea of which lanes supply metadata fails the test.

`MetadataDiscovery` finds the metadata layout on the GPU instead of assuming it: with every chunk
keeping units 0 and 1 and B zero there, flipping one nibble of one lane to 0b1110 moves exactly one
chunk's kept values onto rows of B that encode the chunk's number, so the one nonzero D element
names (row, chunk). One launch does all 32 x 8 (lane, nibble) flips, one per block.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tilemma.compiler.layouts import fragments as frag
from tilemma.compiler.core import isa
from tilemma.compiler.core.elements import BY_PTX
from tools import mma_probe
from tilemma.compiler.verify import reference
from tilemma.compiler.layouts import sparse_fragments as sf

ENTRY = "mma_sp_probe"
OPERANDS = ("a", "b", "c", "e", "d")  # kernel parameter order


def parse_sparse(opcode: str) -> isa.MmaVariant:
    """The variant of a sparse opcode the probe handles (block-scaled forms are not probes)."""
    v = isa.parse_opcode(opcode)
    if not v.sparse:
        raise ValueError(f"{opcode!r} is not mma.sp / mma.sp::ordered_metadata")
    if v.block_scale:
        raise ValueError(f"{opcode!r}: block-scaled sparse mma is not a raw-register probe")
    return v


def opcode_layouts(v: isa.MmaVariant) -> dict[str, frag.FragmentLayout]:
    """Layouts of a (compressed), b, c (by .ctype) and d (by .dtype)."""
    return {
        "a": sf.compressed_a_layout(v.shape, v.atype),
        "b": sf.b_layout(v.shape, v.btype),
        "c": sf.accumulator_layout(v.shape, v.ctype),
        "d": sf.accumulator_layout(v.shape, v.dtype),
    }


def probe_registers(opcode: str) -> tuple[dict[str, int], dict[str, str]]:
    """(reg_counts, reg_types) for a, b, c, e, d, from the tables; checked against the counts
    `isa` derives independently, so a table that disagrees with the ISA's sizes fails here."""
    v = parse_sparse(opcode)
    lays = opcode_layouts(v)
    counts = {k: lay.regs for k, lay in lays.items()} | {"e": 1}
    for op in v.operands:
        if op.name in counts and op.count != counts[op.name]:
            raise AssertionError(
                f"{opcode}: {op.name} has {counts[op.name]} registers, isa says {op.count}"
            )
    types = {"a": "b32", "b": "b32", "e": "b32"}
    types |= {k: mma_probe.reg_type(t, k) for k, t in (("c", v.ctype), ("d", v.dtype))}
    return counts, types


def probe_ptx(
    opcode: str,
    reg_counts: dict[str, int],
    reg_types: dict[str, str],
    selector: int,
    sm: str,
    ptx_version: str,
) -> str:
    """A complete PTX module whose entry `mma_sp_probe(a, b, c, e, d)` runs `opcode` with sparsity
    selector `selector` once per warp. Thread i = ctaid.x * 32 + laneid reads a[i][..], b[i][..],
    c[i][..], e[i] (32-bit words) and writes d[i][..]. Launch blocks of 32 threads."""
    missing = [op for op in OPERANDS if op not in reg_counts or op not in reg_types]
    if missing:
        raise ValueError(f"reg_counts and reg_types need entries for {missing}")
    if reg_counts["e"] != 1:
        raise ValueError("the metadata operand e is a single .b32 register")
    lines = [
        f".version {ptx_version}",
        f".target {sm}",
        ".address_size 64",
        "",
        f".visible .entry {ENTRY}(",
        ",\n".join(f"\t.param .u64 {op}" for op in OPERANDS),
        ")",
        "{",
        "\t.reg .u32 %lane, %blk, %idx;",
        "\t.reg .u64 %off, " + ", ".join(f"%p{op}" for op in OPERANDS) + ";",
    ]
    lines += [f"\t.reg .{reg_types[op]} %r{op}<{reg_counts[op]}>;" for op in OPERANDS]
    lines += [
        "",
        "\tmov.u32 %lane, %laneid;",
        "\tmov.u32 %blk, %ctaid.x;",
        "\tmad.lo.u32 %idx, %blk, 32, %lane;",
    ]
    for op in OPERANDS:
        lines += [
            f"\tld.param.u64 %p{op}, [{op}];",
            f"\tcvta.to.global.u64 %p{op}, %p{op};",
            f"\tmul.wide.u32 %off, %idx, {4 * reg_counts[op]};",
            f"\tadd.u64 %p{op}, %p{op}, %off;",
        ]
    for op in "abce":
        lines += [
            f"\tld.global.{reg_types[op]} %r{op}{i}, [%p{op}+{4 * i}];"
            for i in range(reg_counts[op])
        ]

    def vec(op: str) -> str:
        return "{" + ", ".join(f"%r{op}{i}" for i in range(reg_counts[op])) + "}"

    lines.append(f"\t{opcode} {vec('d')}, {vec('a')}, {vec('b')}, {vec('c')}, %re0, {selector:#x};")
    lines += [
        f"\tst.global.{reg_types['d']} [%pd+{4 * i}], %rd{i};" for i in range(reg_counts["d"])
    ]
    lines += ["\tret;", "}", ""]
    return "\n".join(lines)


def opcode_ptx(opcode: str, selector: int, sm: str = "sm_90", ptx_version: str = "8.7") -> str:
    """`probe_ptx` with the registers the tables give (selector checked against the ISA)."""
    v = parse_sparse(opcode)
    sf.check_selector(sf.sparse_spec(v.shape, v.atype), selector)
    counts, types = probe_registers(opcode)
    return probe_ptx(opcode, counts, types, selector, sm, ptx_version)


# ------------------------------------------------------------------------------------------------
# Random cases
# ------------------------------------------------------------------------------------------------
def random_kept_positions(spec: sf.SparseSpec, rng: np.random.Generator) -> np.ndarray:
    """Random increasing element indices (M x K/2) of a pattern-respecting A."""
    m, _, k = spec.mnk
    pat = spec.pattern
    keys = rng.random((m, k // pat.chunk, pat.atoms_per_chunk))
    atoms = np.sort(np.argsort(keys, axis=-1)[..., : pat.kept_atoms], axis=-1)
    return (atoms[..., None] * pat.atom + np.arange(pat.atom)).reshape(m, k // 2).astype(np.uint8)


def swap_chunks(values, indices, pattern: sf.Pattern, mask) -> tuple[np.ndarray, np.ndarray]:
    """Reverse the order of the two kept atoms in the chunks where `mask` (M x groups) is set: the
    decreasing metadata that plain `mma.sp` accepts and the ordered form does not."""
    if pattern.kept_atoms != 2:
        raise ValueError(f"{pattern.name} keeps one value per chunk: there is no order to swap")
    m, half = values.shape
    shape = (m, half // pattern.kept, 2, pattern.atom)
    out = []
    for x in (values, indices):
        g = np.asarray(x).reshape(shape)
        out.append(np.where(np.asarray(mask)[..., None, None], g[:, :, ::-1], g).reshape(m, half))
    return out[0], out[1]


def _f16_grid(x: np.ndarray, quantum: float) -> np.ndarray:
    """Values on a grid that keeps an f16-accumulator MMA exact (see sparse_probe_case)."""
    return np.round(np.asarray(x, np.float64) / quantum) * quantum


@dataclass
class SparseProbeCase:
    """Random 2:4-sparse inputs for one opcode and selector, the registers of every lane, and how
    to judge the D words the GPU writes."""

    opcode: str
    variant: isa.MmaVariant
    selector: int
    spec: sf.SparseSpec
    layouts: dict[str, frag.FragmentLayout]
    dense_a: np.ndarray  # M x K values with the pattern
    values: np.ndarray  # M x K/2 kept values (in register order)
    indices: np.ndarray  # M x K/2 position of each kept value in its chunk
    b: np.ndarray
    c: np.ndarray
    words: dict[str, np.ndarray]  # a, b, c: [32, regs] uint32; e: [32] uint32
    expected: np.ndarray
    exact: bool  # f16 D: inputs on a grid that makes the result exact
    reg_counts: dict[str, int] = field(repr=False)
    reg_types: dict[str, str] = field(repr=False)

    def ptx(self, sm: str = "sm_90", ptx_version: str = "8.7") -> str:
        return probe_ptx(
            self.opcode, self.reg_counts, self.reg_types, self.selector, sm, ptx_version
        )

    def args(self) -> list[np.ndarray]:
        """Kernel arguments a, b, c, e, d (d zero-filled)."""
        d = np.zeros((frag.LANES, self.layouts["d"].regs), np.uint32)
        return [self.words[k].copy() for k in "abce"] + [d]

    def decode(self, d_words: np.ndarray) -> np.ndarray:
        lay = self.layouts["d"]
        return mma_probe.decode(frag.unpack(lay, d_words), self.variant.dtype, lay.elem_bits)

    def bad_elements(self, d_words: np.ndarray) -> np.ndarray:
        """M x N mask of D elements that disagree with the reference: exactly for integers and
        grid inputs, within `reference.error_bound` (built from sum |a*b|) otherwise."""
        got = self.decode(d_words)
        want = np.asarray(self.expected, np.float64)
        if self.exact or self.variant.dtype == "s32":
            return ~(got == want)
        v = self.variant
        bound = reference.error_bound(
            self.dense_a, self.b, self.c, a_type=BY_PTX[v.atype].name, b_type=BY_PTX[v.btype].name,
            acc_type=BY_PTX[v.ctype].name,
        )  # fmt: skip
        with np.errstate(invalid="ignore"):
            return ~(np.abs(got - want) <= bound)

    def mismatches(self, d_words: np.ndarray, limit: int = 8) -> list[str]:
        """Readable list of wrong D elements (empty when every element agrees)."""
        bad = self.bad_elements(d_words)
        got = self.decode(d_words)
        rows, cols = frag.coords(self.layouts["d"])
        out = []
        for r, c in np.argwhere(bad)[:limit]:
            lane, v = np.argwhere((rows == r) & (cols == c))[0]
            out.append(
                f"D[{r}][{c}] (lane {lane} value {v}) = {got[r, c]!r}, expected {self.expected[r, c]!r}"
            )
        if bad.sum() > limit:
            out.append(f"... {int(bad.sum())} of {bad.size} elements wrong")
        return out


def sparse_probe_case(
    opcode: str, selector: int, rng: np.random.Generator, unordered: bool = False
) -> SparseProbeCase:
    """Random A with the pattern at random positions, B and C for `opcode`, packed for every lane.

    With `unordered` (plain `mma.sp` only) the two kept values of a random half of the chunks are
    stored in decreasing column order with matching metadata. With an f16 D the inputs are
    multiples of 1/2 (A, B, |x| <= 2) and 1/4 (C, |x| <= 2), so every partial sum is exact in f16
    and D is compared exactly; other float results are compared within `reference.error_bound`,
    integers exactly (wrap-around or .satfinite as the opcode says)."""
    v = parse_sparse(opcode)
    if unordered and v.sparse != "sp":
        raise ValueError(f"{opcode}: only plain mma.sp accepts decreasing metadata")
    spec = sf.sparse_spec(v.shape, v.atype)
    sf.check_selector(spec, selector)
    lays = opcode_layouts(v)
    m, n, k = spec.mnk
    pat = spec.pattern
    exact = v.dtype == "f16"
    at, bt, ct = BY_PTX[v.atype].name, BY_PTX[v.btype].name, BY_PTX[v.ctype].name

    kept = reference.random_matrix(at, (m, k // 2), rng)
    b = reference.random_matrix(bt, (k, n), rng)
    c = reference.random_matrix(ct, (m, n), rng)
    if exact:
        kept, b, c = _f16_grid(kept, 0.5), _f16_grid(b, 0.5), _f16_grid(c, 0.25)
    dense_a = sf.decompress(kept, random_kept_positions(spec, rng), pat)
    values, indices = sf.compress(dense_a, pat)
    if unordered:
        values, indices = swap_chunks(values, indices, pat, rng.random((m, k // pat.chunk)) < 0.5)

    words = {
        "a": sf.pack_a(v.shape, v.atype, mma_probe.encode(values, v.atype, lays["a"].elem_bits)),
        "b": frag.pack(lays["b"], mma_probe.encode(b, v.btype, lays["b"].elem_bits)),
        "c": frag.pack(lays["c"], mma_probe.encode(c, v.ctype, lays["c"].elem_bits)),
    }
    e = sf.metadata_words(indices, v.shape, v.atype, selector, ordered=not unordered)
    ignored = np.ones(frag.LANES, bool)
    ignored[list(spec.metadata_lanes(selector))] = False
    noise = rng.integers(0, 1 << 32, frag.LANES, dtype=np.uint64).astype(np.uint32)
    words["e"] = np.where(ignored, noise, e)

    expected = reference.mma_reference(
        dense_a, b, c, a_type=at, b_type=bt, acc_type=ct, satfinite=v.satfinite
    )
    counts, types = probe_registers(opcode)
    return SparseProbeCase(
        opcode, v, selector, spec, lays, dense_a, values, indices, b, c, words, expected, exact,
        counts, types,
    )  # fmt: skip


def emulate_registers(opcode: str, selector: int, words: dict[str, np.ndarray]) -> np.ndarray:
    """D (values) that one warp's registers mean under the tables: compressed A from the A words,
    indices from the contributing lanes' e words, dense A rebuilt, then `reference.mma_reference`.
    A CPU stand-in for the instruction, used to show the harness is self-consistent."""
    v = parse_sparse(opcode)
    lays = opcode_layouts(v)
    vals = mma_probe.decode(sf.unpack_a(v.shape, v.atype, words["a"]), v.atype, lays["a"].elem_bits)
    idx = sf.metadata_indices(words["e"], v.shape, v.atype, selector)
    dense_a = sf.decompress(vals, idx, sf.sparse_spec(v.shape, v.atype).pattern)
    b = mma_probe.decode(frag.unpack(lays["b"], words["b"]), v.btype, lays["b"].elem_bits)
    c = mma_probe.decode(frag.unpack(lays["c"], words["c"]), v.ctype, lays["c"].elem_bits)
    return reference.mma_reference(
        dense_a, b, c, a_type=BY_PTX[v.atype].name, b_type=BY_PTX[v.btype].name, acc_type=BY_PTX[v.ctype].name,
        satfinite=v.satfinite,
    )  # fmt: skip


def emulate(case: SparseProbeCase) -> np.ndarray:
    """`emulate_registers` on a case's own words."""
    return emulate_registers(case.opcode, case.selector, case.words)


def encode_d(opcode: str, d_values: np.ndarray) -> np.ndarray:
    """[32, regs] D words holding `d_values` (what a correct GPU writes)."""
    v = parse_sparse(opcode)
    lay = opcode_layouts(v)["d"]
    return frag.pack(lay, mma_probe.encode(d_values, v.dtype, lay.elem_bits))


# ------------------------------------------------------------------------------------------------
# Finding the metadata layout on the GPU
# ------------------------------------------------------------------------------------------------
_BASE_NIBBLE, _FLIP_NIBBLE = (
    0b0100,
    0b1110,
)  # keep units (0, 1) / units (2, 3): valid for every form
NIBBLES = 8


@dataclass
class MetadataDiscovery:
    """One launch of 32 * 8 blocks; block 8 * lane + p flips nibble p of that lane's e word."""

    opcode: str
    selector: int

    def __post_init__(self) -> None:
        self.variant = v = parse_sparse(self.opcode)
        self.spec = spec = sf.sparse_spec(v.shape, v.atype)
        sf.check_selector(spec, self.selector)
        self.layouts = lays = opcode_layouts(v)
        m, n, k = spec.mnk
        # B row kk is nonzero only at units 2, 3 of its chunk: column chunk % 8, value 1 + chunk // 8
        unit = np.arange(k) * spec.elem_bits // spec.unit_bits
        chunk, pos = unit // sf.UNITS_PER_CHUNK, unit % sf.UNITS_PER_CHUNK
        b = np.zeros((k, n))
        on = pos >= 2
        b[np.arange(k)[on], chunk[on] % n] = 1 + chunk[on] // n
        ones = np.ones((m, k // 2))
        a_words = sf.pack_a(v.shape, v.atype, mma_probe.encode(ones, v.atype, lays["a"].elem_bits))
        b_words = frag.pack(lays["b"], mma_probe.encode(b, v.btype, lays["b"].elem_bits))
        c_words = frag.pack(
            lays["c"], mma_probe.encode(np.zeros((m, n)), v.ctype, lays["c"].elem_bits)
        )
        blocks = frag.LANES * NIBBLES
        e = np.full((blocks, frag.LANES), int("4" * 8, 16), np.uint32)  # every nibble 0b0100
        for lane in range(frag.LANES):
            for p in range(NIBBLES):
                word = e[NIBBLES * lane + p, lane]
                e[NIBBLES * lane + p, lane] = (word & ~np.uint32(0xF << 4 * p)) | np.uint32(
                    _FLIP_NIBBLE << 4 * p
                )
        self.blocks = blocks
        self._args = [np.tile(w, (blocks, 1)) for w in (a_words, b_words, c_words)]
        self._args += [e.reshape(-1, 1), np.zeros((blocks * frag.LANES, lays["d"].regs), np.uint32)]
        self._per_chunk = spec.pattern.kept  # kept elements of a chunk, each times 1

    def ptx(self, sm: str = "sm_90", ptx_version: str = "8.7") -> str:
        return opcode_ptx(self.opcode, self.selector, sm, ptx_version)

    def args(self) -> list[np.ndarray]:
        return [x.copy() for x in self._args]

    def expected_map(self) -> dict[tuple[int, int], tuple[int, int] | None]:
        """(lane, nibble) -> (row, chunk) the tables predict, None for ignored lanes."""
        lay = sf.metadata_layout(self.variant.shape, self.variant.atype, self.selector)
        out = {}
        for lane in range(frag.LANES):
            for p in range(NIBBLES):
                r, f = int(lay.row[lane, 2 * p]), int(lay.field[lane, 2 * p])
                out[(lane, p)] = None if r < 0 else (r, f // 2)
        return out

    def decode(self, d_words: np.ndarray):
        """(lane, nibble) -> (row, chunk) read off the GPU's D, None where D stayed zero, or a
        string describing anything else (several elements moved, an unexpected value)."""
        lay, n = self.layouts["d"], self.spec.mnk[1]
        words = np.asarray(d_words).reshape(self.blocks, frag.LANES, lay.regs)
        out = {}
        for lane in range(frag.LANES):
            for p in range(NIBBLES):
                d = mma_probe.decode(
                    frag.unpack(lay, words[NIBBLES * lane + p]), self.variant.dtype, lay.elem_bits
                )
                nz = np.argwhere(d != 0)
                if len(nz) == 0:
                    out[(lane, p)] = None
                    continue
                level = d[tuple(nz[0])] / self._per_chunk
                if len(nz) != 1 or level not in (1, 2):
                    out[(lane, p)] = (
                        f"D nonzero at {[tuple(map(int, x)) for x in nz[:6]]}: {d[tuple(nz.T)][:6].tolist()}"
                    )
                    continue
                r, col = (int(x) for x in nz[0])
                out[(lane, p)] = (r, int(col + n * (level - 1)))
        return out
