"""Raw-register probes of one `mma.sync` instruction, to prove the fragment tables on a GPU.

`probe_ptx` emits a kernel in which every lane loads its own A/B/C register words from buffers laid
out [lane][reg], runs the one instruction and stores its D words to d[lane][reg]. Nothing but the
instruction decides where an element goes, so comparing the GPU's D (decoded with
`fragments.unpack`) with a NumPy A @ B + C checks the layouts of A, B, C and D at once.
`probe_case` builds such a test from random matrices: inputs packed with `fragments.pack`, the
reference and its tolerance, and the decoder for the returned words.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from tilemma.compiler.layouts import fragments as frag
from tilemma.compiler.core import isa
from tilemma.compiler.core.elements import BY_PTX

ENTRY = "mma_probe"
_OPERANDS = ("a", "b", "c", "d")
_WIDE_REG_TYPES = {"f64", "b64", "u64", "s64"}
_PACKED_REG_TYPES = {"f16x2", "bf16x2"}  # loaded/stored as .b32 words


def parse_mma(opcode: str) -> isa.MmaVariant:
    """The qualifiers of a dense `mma.sync` opcode (the ISA table's parser), refusing the forms a
    dense probe does not cover: mma.sp and block scaling."""
    v = isa.parse_opcode(opcode)
    if v.sparse or v.block_scale:
        raise ValueError(f"not a dense mma.sync opcode without block scaling: {opcode!r}")
    return v


def _quadpair(op: isa.MmaVariant) -> bool:
    """m8n8k4 .f16: four 8x8x4 MMAs per warp, one per quad-pair."""
    return op.shape == "m8n8k4" and op.atype == "f16"


def reg_type(elem_type: str, operand: str) -> str:
    """PTX register type for one operand: .b32 words for packed/narrow multiplicands and f16
    accumulators (ptxas 13.0 takes .b32 or .f16x2 for those), .f32/.s32/.f64 otherwise."""
    if elem_type == "f64":
        return "f64"
    if operand in ("c", "d"):
        return {"f32": "f32", "s32": "s32"}.get(elem_type, "b32")
    return "b32"


def _mem_type(rtype: str) -> str:
    return "b32" if rtype in _PACKED_REG_TYPES else rtype


def _word_bytes(rtype: str) -> int:
    return 8 if rtype in _WIDE_REG_TYPES else 4


def probe_ptx(
    opcode: str,
    reg_counts: dict[str, int],
    reg_types: dict[str, str],
    sm: str,
    ptx_version: str,
) -> str:
    """A complete PTX module whose entry `mma_probe(a, b, c, d)` runs `opcode` once per warp.

    Lane l reads a[l][0..na), b[l][..], c[l][..] (32-bit words, 64-bit for .f64 registers),
    executes the instruction and writes d[l][0..nd). Launch with one block of 32 threads.
    `reg_counts` / `reg_types` map 'a','b','c','d' to the register count and PTX type (no dot).
    """
    missing = [op for op in _OPERANDS if op not in reg_counts or op not in reg_types]
    if missing:
        raise ValueError(f"reg_counts and reg_types need entries for {missing}")
    lines = [
        f".version {ptx_version}",
        f".target {sm}",
        ".address_size 64",
        "",
        f".visible .entry {ENTRY}(",
        ",\n".join(f"\t.param .u64 {op}" for op in _OPERANDS),
        ")",
        "{",
        "\t.reg .u32 %lane;",
        "\t.reg .u64 %off, %pa, %pb, %pc, %pd;",
    ]
    lines += [f"\t.reg .{reg_types[op]} %r{op}<{reg_counts[op]}>;" for op in _OPERANDS]
    lines += ["", "\tmov.u32 %lane, %laneid;"]
    for op in _OPERANDS:
        row_bytes = reg_counts[op] * _word_bytes(reg_types[op])
        lines += [
            f"\tld.param.u64 %p{op}, [{op}];",
            f"\tcvta.to.global.u64 %p{op}, %p{op};",
            f"\tmul.wide.u32 %off, %lane, {row_bytes};",
            f"\tadd.u64 %p{op}, %p{op}, %off;",
        ]
    for op in "abc":
        wb, mt = _word_bytes(reg_types[op]), _mem_type(reg_types[op])
        lines += [f"\tld.global.{mt} %r{op}{i}, [%p{op}+{i * wb}];" for i in range(reg_counts[op])]

    def vec(op: str) -> str:
        return "{" + ", ".join(f"%r{op}{i}" for i in range(reg_counts[op])) + "}"

    lines.append(f"\t{opcode} {vec('d')}, {vec('a')}, {vec('b')}, {vec('c')};")
    wb, mt = _word_bytes(reg_types["d"]), _mem_type(reg_types["d"])
    lines += [f"\tst.global.{mt} [%pd+{i * wb}], %rd{i};" for i in range(reg_counts["d"])]
    lines += ["\tret;", "}", ""]
    return "\n".join(lines)


def opcode_layouts(op: isa.MmaVariant, view: str = "warp16") -> dict[str, frag.FragmentLayout]:
    """Fragment layouts of a, b, c, d for an opcode (C by .ctype, D by .dtype)."""
    v = view if _quadpair(op) else None
    quad = _quadpair(op)  # only m8n8k4 .f16 has a choice of .alayout/.blayout
    return {
        "a": frag.layout(op.shape, "a", op.atype, major=op.alayout if quad else None, view=v),
        "b": frag.layout(op.shape, "b", op.btype, major=op.blayout if quad else None, view=v),
        "c": frag.layout(op.shape, "c", op.ctype, view=v),
        "d": frag.layout(op.shape, "d", op.dtype, view=v),
    }


def probe_registers(opcode: str, view: str = "warp16") -> tuple[dict[str, int], dict[str, str]]:
    """(reg_counts, reg_types) of an opcode, straight from its fragment layouts."""
    op = parse_mma(opcode)
    lays = opcode_layouts(op, view)
    types = {"a": op.atype, "b": op.btype, "c": op.ctype, "d": op.dtype}
    return (
        {k: lay.regs for k, lay in lays.items()},
        {k: reg_type(types[k], k) for k in _OPERANDS},
    )


# ---------------------------------------------------------------- element encodings

def _native_bits(bits: np.ndarray, elem_type: str, width: int) -> np.ndarray:
    """Strip the f8f6f4 container padding (an 8-bit slot holds e2m1 in its middle 4 bits, e3m2 /
    e2m3 in the low 6): the element's own bit pattern."""
    e = BY_PTX[elem_type]
    if e.container_shift is not None and width == 8:
        return (bits >> e.container_shift) & ((1 << e.bits) - 1)
    return bits


@np.errstate(invalid="ignore")
def decode(bits: np.ndarray, elem_type: str, width: int) -> np.ndarray:
    """Element values (float64, or int64 for integers) of raw register bit patterns of `width`
    bits (the layout's elem_bits: 8 for f8f6f4 containers, 4 for packed e2m1)."""
    bits = np.asarray(bits)
    e = BY_PTX[elem_type]
    if not e.is_float:
        n = e.bits
        v = bits.astype(np.int64) & ((1 << n) - 1)
        if e.signed:
            v = np.where(v >= 1 << (n - 1), v - (1 << n), v)
        return v
    dt = e.dtype
    raw = _native_bits(bits.astype(np.uint64), elem_type, width)
    storage = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    return raw.astype(storage).view(dt).astype(np.float64)


def encode(values: np.ndarray, elem_type: str, width: int) -> np.ndarray:
    """Raw bit patterns (uint of `width`) of element values, the inverse of `decode`: floats
    round to nearest via ml_dtypes (tf32 truncates to its 10 mantissa bits), ints wrap."""
    e = BY_PTX[elem_type]
    if not e.is_float:
        v = np.asarray(values).astype(np.int64) & ((1 << e.bits) - 1)
        return v.astype(frag.uint_dtype(width))
    if elem_type == "tf32":
        bits = np.asarray(values).astype(np.float32).view(np.uint32)
        return bits & np.uint32(0xFFFFE000)
    dt = e.dtype
    storage = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    bits = np.asarray(values).astype(dt).view(storage)
    if e.container_shift is not None and width == 8:
        bits = (bits & ((1 << e.bits) - 1)) << e.container_shift
    return bits.astype(frag.uint_dtype(width))


_MAG = (2.0**-4, 16.0)  # input magnitudes: normal, far from overflow even for f16 sums


@np.errstate(over="ignore", invalid="ignore")
def _pattern_pool(
    elem_type: str, width: int, grid: tuple[float, float] | None = None
) -> np.ndarray:
    """All bit patterns of a narrow float type that are zero or normal with magnitude in _MAG
    (subnormal handling and overflow are unspecified by the ISA, so probes avoid them); with
    grid=(quantum, max_abs) only multiples of quantum up to max_abs."""
    e = BY_PTX[elem_type]
    raw = np.arange(1 << e.bits, dtype=np.uint64)
    shift = e.container_shift if e.container_shift is not None and width == 8 else 0
    pats = raw << np.uint64(shift)
    vals = decode(pats, elem_type, width)
    mag = np.abs(vals)
    ok = np.isfinite(vals) & ((mag == 0) | ((mag >= _MAG[0]) & (mag <= _MAG[1])))
    smallest_normal = float(ml_dtypes.finfo(e.dtype).smallest_normal)
    ok &= (mag == 0) | (mag >= smallest_normal)
    if grid is not None:
        quantum, max_abs = grid
        ok &= (np.mod(vals, quantum) == 0) & (mag <= max_abs)
    return pats[ok]


def random_elements(
    elem_type: str,
    width: int,
    shape: tuple[int, int],
    rng: np.random.Generator,
    grid: tuple[float, float] | None = None,
) -> np.ndarray:
    """Random raw bit patterns for a matrix (uint dtype of `width`); see `decode` for values.

    Floats are zero or normal in [2^-4, 16] (or, with grid=(quantum, max_abs), multiples of
    quantum up to max_abs); tf32 has its low 13 mantissa bits zero; integers use their full range;
    an s32 accumulator C puts a quarter of its elements near each int32 bound so that wrap-around
    and .satfinite are exercised.
    """
    ut = frag.uint_dtype(width)
    if elem_type == "s32":
        n = int(np.prod(shape))
        pick = rng.integers(0, 4, n)
        small = rng.integers(-(1 << 20), 1 << 20, n)
        near_max = (2**31 - 1) - rng.integers(0, 1 << 19, n)
        near_min = -(2**31) + rng.integers(0, 1 << 19, n)
        v = np.where(pick == 0, near_max, np.where(pick == 1, near_min, small))
        return v.astype(np.int64).astype(np.int32).view(np.uint32).reshape(shape)
    if not BY_PTX[elem_type].is_float:
        return rng.integers(0, 1 << BY_PTX[elem_type].bits, shape, dtype=np.uint64).astype(ut)
    if elem_type in ("tf32", "f32", "f64") and grid is None:
        mag = np.exp2(rng.uniform(np.log2(_MAG[0]), np.log2(_MAG[1]), shape))
        v = np.where(rng.random(shape) < 0.5, -mag, mag)
        if elem_type == "f64":
            return v.view(np.uint64)
        bits = v.astype(np.float32).view(np.uint32)
        return bits & np.uint32(0xFFFFE000) if elem_type == "tf32" else bits
    if elem_type in ("tf32", "f32", "f64"):
        raise ValueError(f"no grid sampling for 32/64-bit {elem_type}")
    pool = _pattern_pool(elem_type, width, grid)
    return rng.choice(pool, size=shape).astype(ut)


# Unit round-off granted per accumulation step (ISA: order and rounding unspecified; accumulation
# in "at least" the accumulator's precision). Loose enough for truncating hardware adders, yet a
# misplaced element moves a result by about scale / K, orders of magnitude above these bounds.
_ACC_EPS = {"f16": 2.0**-9, "f32": 2.0**-17, "f64": 2.0**-50}


def reference(op: isa.MmaVariant, a: np.ndarray, b: np.ndarray, c: np.ndarray, exact: bool = False):
    """(expected D, tolerance) from element values: exact for integers (int32 wrap, or clamp
    with .satfinite; .b1 is popc of xor/and); float64 A @ B + C for floats, with a K-scaled bound,
    or zero tolerance when `exact` (inputs chosen so that no partial sum rounds)."""
    k = a.shape[1]
    if op.dtype == "s32":
        a, b, c = (x.astype(np.int64) for x in (a, b, c))
        # popc(a xor b) over k = sum a(1-b) + (1-a)b; .and and plain integer mma are a @ b
        prod = a @ (1 - b) + (1 - a) @ b if op.bitop == "xor" else a @ b
        exact = prod + c
        if op.satfinite:
            d = np.clip(exact, -(2**31), 2**31 - 1)
        else:
            d = (exact + 2**31) % 2**32 - 2**31
        return d, np.zeros(d.shape)
    d = a @ b + c
    if exact:
        return d, np.zeros(d.shape)
    scale = np.abs(a) @ np.abs(b) + np.abs(c)
    return d, (k + 2) * _ACC_EPS[op.dtype] * scale


def _exact_f16_grids(k: int) -> dict[str, tuple[float, float]]:
    """Input grids that make an f16-accumulator MMA exact: A, B multiples of 1/2 up to m and C of
    1/4 up to 8, so every product and partial sum is a multiple of 1/4 below 2^11 / 4 in size
    (f16 holds those exactly). A K-scaled bound at f16 precision would exceed the effect of a
    misplaced element; exact inputs let every element be compared exactly."""
    c_max = 8.0
    m = max(x for x in range(1, 9) if (k * x * x + c_max) * 4 <= 2**11)
    return {"a": (0.5, float(m)), "b": (0.5, float(m)), "c": (0.25, c_max)}


@dataclass
class ProbeCase:
    """Random inputs for one opcode, the packed register words, and how to judge the GPU's D."""

    opcode: str
    op: isa.MmaVariant
    layouts: dict[str, frag.FragmentLayout]
    values: dict[str, np.ndarray]  # 'a', 'b', 'c': element values (float64 / int64)
    words: dict[str, np.ndarray]  # 'a', 'b', 'c': [32, regs] register words
    expected: np.ndarray
    tolerance: np.ndarray  # all zero for integer ops
    reg_counts: dict[str, int]
    reg_types: dict[str, str]

    def ptx(self, sm: str = "sm_90", ptx_version: str = "8.7") -> str:
        return probe_ptx(self.opcode, self.reg_counts, self.reg_types, sm, ptx_version)

    def args(self) -> list[np.ndarray]:
        """Kernel arguments a, b, c, d (d zero-filled, same word type as the D registers)."""
        d = np.zeros((frag.LANES, self.layouts["d"].regs), self.layouts["d"].word_dtype)
        return [self.words["a"].copy(), self.words["b"].copy(), self.words["c"].copy(), d]

    def decode(self, d_words: np.ndarray) -> np.ndarray:
        """D element values from the [32, regs] words the kernel wrote."""
        lay = self.layouts["d"]
        return decode(frag.unpack(lay, d_words), self.op.dtype, lay.elem_bits)

    def mismatches(self, d_words: np.ndarray, limit: int = 8) -> list[str]:
        """Human-readable list of D elements outside tolerance (empty when all agree)."""
        got = self.decode(d_words)
        with np.errstate(invalid="ignore"):  # NaN/inf from a broken kernel counts as wrong
            bad = ~(np.abs(got - self.expected) <= self.tolerance)
        out = []
        lay = self.layouts["d"]
        rows, cols = frag.coords(lay)
        for r, c in np.argwhere(bad)[:limit]:
            lane, v = np.argwhere((rows == r) & (cols == c))[0]
            out.append(
                f"D[{r}][{c}] (lane {lane} value {v}) = {got[r, c]!r}, expected "
                f"{self.expected[r, c]!r} +- {self.tolerance[r, c]:.3g}"
            )
        if bad.sum() > limit:
            out.append(f"... {int(bad.sum())} of {bad.size} elements wrong")
        return out


def probe_case(opcode: str, rng: np.random.Generator, view: str = "warp16") -> ProbeCase:
    """Random A, B, C for `opcode`, packed per lane, with the reference D and its tolerance.

    m8n8k4 .f16 is tested as the warp-level 16x16x4 op by default (`view='warp16'`), which checks
    all four quad-pair MMAs on different data; `view='quadpair'` gives all four the same 8x8x4.
    With an f16 D the inputs sit on a grid that keeps the MMA exact (tolerance zero); otherwise
    they span the types' bit patterns and the tolerance grows with K.
    """
    op = parse_mma(opcode)
    lays = opcode_layouts(op, view)
    types = {"a": op.atype, "b": op.btype, "c": op.ctype}
    exact = op.dtype == "f16"
    grids = _exact_f16_grids(op.k) if exact else {}
    values, words = {}, {}
    for k in "abc":
        lay = lays[k]
        shape = (lay.rows, lay.cols)
        bits = random_elements(types[k], lay.elem_bits, shape, rng, grids.get(k))
        values[k] = decode(bits, types[k], lay.elem_bits)
        words[k] = frag.pack(lay, bits)
    expected, tol = reference(op, values["a"], values["b"], values["c"], exact)
    counts, rtypes = probe_registers(opcode, view)
    return ProbeCase(opcode, op, lays, values, words, expected, tol, counts, rtypes)
