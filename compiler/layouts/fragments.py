"""Which lane and register holds which element of A, B and C/D for every dense `mma.sync`.

One table (`_TABLE`) is the single source of truth, written in the PTX ISA's own terms
("Matrix Fragments for mma.mXnYkZ"): for each (shape, operand, element width) the row and the
column of value `i` of a lane are

    row = sum(coef * term(lane)) + sum over the bits b of i of value_bits[b].row
    col = sum(coef * term(lane)) + sum over the bits b of i of value_bits[b].col

where the lane terms are the ISA's `groupID` (g = lane >> 2) and `threadID_in_group`
(t = lane % 4) plus, for the quad-pair shape m8n8k4, the high-group bit and single lane bits.
Value `i` is the ISA's element index a_i / b_i / c_i: register `i // elems_per_reg`, slot
`i % elems_per_reg`, slot 0 in the lowest bits. The table is keyed by the element *width*, not
the type, because the ISA gives one layout per width (s8, u8, e4m3, ... share one; tf32 and f64
share positions on m16n8k4/k8).

Every layout is then a CuTe-style function (lane, value) -> (row, col) (`coords`), and because every
ISA formula is a sum of bit fields it is also linear over GF(2) in the lane and value bits
(`linear_layout`, a `LinearLayout`), with bits that do not overlap, so additive (`linear_form`),
the form code generation uses. Matrices are in math orientation: A is M x K, B is K x N (indexed [k][n]),
C/D is M x N.

m8n8k4 with .f16 is four independent 8x8x4 MMAs, one per quad-pair q (lanes 4q..4q+3 and
4q+16..4q+19). `view="quadpair"` gives the ISA's 8x8x4 picture (every element is held by 4 lanes, one
per quad-pair). `view="warp16"` is the effective warp-level 16x16x4 op: quad-pair q computes the D
block at rows 8*(q%2).., cols 8*(q//2).. from A rows 8*(q%2).. and B cols 8*(q//2)..; there each A and
B element is held by two lanes (two quad-pairs share it) and each C/D element by exactly one.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace

import numpy as np

from tilemma.compiler.core import isa_rows
from tilemma.compiler.core.elements import BY_PTX
from tilemma.compiler.layouts.linear_layout import LinearLayout

LANES = 32
LANE_BITS = 5

# Lane terms of the ISA formulas, each a function of %laneid.
_LANE_TERMS = {
    "g": lambda lane: lane >> 2,  # groupID
    "t": lambda lane: lane & 3,  # threadID_in_group (= %laneid % 4)
    "hi": lambda lane: lane >> 4,  # m8n8k4: 1 for the high group (lanes 16..31)
    "t0": lambda lane: lane & 1,  # m8n8k4 f32 accumulator: %laneid & 0b1
    "t1": lambda lane: (lane >> 1) & 1,  # m8n8k4 f32 accumulator: (%laneid & 0b10) >> 1
    "qr": lambda lane: (lane >> 2) & 1,  # m8n8k4 warp16 view: quad-pair q % 2 (row block)
    "qc": lambda lane: (lane >> 3) & 1,  # m8n8k4 warp16 view: quad-pair q // 2 (col block)
}

_TERM_RE = re.compile(r"^(\d*)([a-z]\w*)$")


def _terms(expr: str) -> tuple[tuple[str, int], ...]:
    """'t+4hi' -> (('t', 1), ('hi', 4)): the ISA formula's lane part, kept readable in the table."""
    out = []
    for part in filter(None, expr.replace(" ", "").split("+")):
        m = _TERM_RE.match(part)
        if not m or m.group(2) not in _LANE_TERMS:
            raise ValueError(f"bad lane term {part!r} in {expr!r}")
        out.append((m.group(2), int(m.group(1) or 1)))
    return tuple(out)


@dataclass(frozen=True)
class _Spec:
    row: tuple[tuple[str, int], ...]
    col: tuple[tuple[str, int], ...]
    value_bits: tuple[tuple[int, int], ...]  # (row, col) step of each bit of the value index


def _spec(row: str, col: str, value_bits) -> _Spec:
    return _Spec(_terms(row), _terms(col), tuple(tuple(b) for b in value_bits))


def _cols(n: int) -> list[tuple[int, int]]:
    """Value bits for n consecutive columns (n a power of two): (0,1), (0,2), ..."""
    return [(0, 1 << b) for b in range(n.bit_length() - 1)]


def _rows(n: int) -> list[tuple[int, int]]:
    return [(1 << b, 0) for b in range(n.bit_length() - 1)]


# Accumulators of every m16n8kK shape: c0,c1 at row g, c2,c3 at g+8; col 2t + (i & 1).
_C_M16 = _spec("g", "2t", _cols(2) + [(8, 0)])
# Single-MMA m8n8kK accumulators (s32, and f64 m8n8k4): c0,c1 at row g, col 2t + i.
_C_M8 = _spec("g", "2t", _cols(2))

# (shape, operand, element bits, major) -> layout; major only for m8n8k4 .f16 A/B.
_TABLE: dict[tuple[str, str, int, str | None], _Spec] = {
    # .f16 / .bf16 (two per .f16x2 register)
    ("m16n8k8", "a", 16, None): _spec("g", "2t", _cols(2) + [(8, 0)]),
    ("m16n8k8", "b", 16, None): _spec("2t", "g", _rows(2)),
    ("m16n8k16", "a", 16, None): _spec("g", "2t", _cols(2) + [(8, 0), (0, 8)]),
    ("m16n8k16", "b", 16, None): _spec("2t", "g", _rows(2) + [(8, 0)]),
    # .tf32 and .f64 (one per register; identical positions on m16n8k4 / m16n8k8)
    ("m16n8k4", "a", 32, None): _spec("g", "t", [(8, 0)]),
    ("m16n8k4", "b", 32, None): _spec("t", "g", []),
    ("m16n8k8", "a", 32, None): _spec("g", "t", [(8, 0), (0, 4)]),
    ("m16n8k8", "b", 32, None): _spec("t", "g", [(4, 0)]),
    ("m8n8k4", "a", 64, None): _spec("g", "t", []),
    ("m8n8k4", "b", 64, None): _spec("t", "g", []),
    ("m16n8k4", "a", 64, None): _spec("g", "t", [(8, 0)]),
    ("m16n8k4", "b", 64, None): _spec("t", "g", []),
    ("m16n8k8", "a", 64, None): _spec("g", "t", [(8, 0), (0, 4)]),
    ("m16n8k8", "b", 64, None): _spec("t", "g", [(4, 0)]),
    ("m16n8k16", "a", 64, None): _spec("g", "t", [(8, 0), (0, 4), (0, 8)]),
    ("m16n8k16", "b", 64, None): _spec("t", "g", [(4, 0), (8, 0)]),
    # 8-bit: .s8/.u8/.e4m3/.e5m2 and .e3m2/.e2m3/.e2m1 in 8-bit containers (four per register)
    ("m8n8k16", "a", 8, None): _spec("g", "4t", _cols(4)),
    ("m8n8k16", "b", 8, None): _spec("4t", "g", _rows(4)),
    ("m16n8k16", "a", 8, None): _spec("g", "4t", _cols(4) + [(8, 0)]),
    ("m16n8k16", "b", 8, None): _spec("4t", "g", _rows(4)),
    ("m16n8k32", "a", 8, None): _spec("g", "4t", _cols(4) + [(8, 0), (0, 16)]),
    ("m16n8k32", "b", 8, None): _spec("4t", "g", _rows(4) + [(16, 0)]),
    # 4-bit: .s4/.u4, and packed .e2m1 of m16n8k64 (eight per register)
    ("m8n8k32", "a", 4, None): _spec("g", "8t", _cols(8)),
    ("m8n8k32", "b", 4, None): _spec("8t", "g", _rows(8)),
    ("m16n8k32", "a", 4, None): _spec("g", "8t", _cols(8) + [(8, 0)]),
    ("m16n8k32", "b", 4, None): _spec("8t", "g", _rows(8)),
    ("m16n8k64", "a", 4, None): _spec("g", "8t", _cols(8) + [(8, 0), (0, 32)]),
    ("m16n8k64", "b", 4, None): _spec("8t", "g", _rows(8) + [(32, 0)]),
    # .b1 (thirty-two per register)
    ("m8n8k128", "a", 1, None): _spec("g", "32t", _cols(32)),
    ("m8n8k128", "b", 1, None): _spec("32t", "g", _rows(32)),
    ("m16n8k128", "a", 1, None): _spec("g", "32t", _cols(32) + [(8, 0)]),
    ("m16n8k128", "b", 1, None): _spec("32t", "g", _rows(32)),
    # ISA text for m16n8k256 A says "(threadID_in_group * 32) + i for i < 64"; with i >= 32 that
    # would leave rows g+8, cols 0..31 uncovered, so the intended (i & 0x1F) is used (as for k128).
    ("m16n8k256", "a", 1, None): _spec("g", "32t", _cols(32) + [(8, 0), (0, 128)]),
    ("m16n8k256", "b", 1, None): _spec("32t", "g", _rows(32) + [(128, 0)]),
    # m8n8k4 .f16, per quad-pair (8x4 A, 4x8 B, 8x8 C); low group lanes 0-3, high group 16-19
    ("m8n8k4", "a", 16, "row"): _spec("t+4hi", "", _cols(4)),
    ("m8n8k4", "a", 16, "col"): _spec("4hi", "t", _rows(4)),
    ("m8n8k4", "b", 16, "row"): _spec("t", "4hi", _cols(4)),
    ("m8n8k4", "b", 16, "col"): _spec("", "t+4hi", _rows(4)),
    ("m8n8k4", "c", 16, None): _spec("t+4hi", "", _cols(8)),
    ("m8n8k4", "c", 32, None): _spec("t0+4hi", "2t1", [(0, 1), (2, 0), (0, 4)]),
    ("m8n8k4", "c", 64, None): _C_M8,
}
for _shape, _widths in {
    "m16n8k4": (32, 64),
    "m16n8k8": (16, 32, 64),
    "m16n8k16": (16, 32, 64),
    "m16n8k32": (16, 32),
    "m16n8k64": (32,),
    "m16n8k128": (32,),
    "m16n8k256": (32,),
}.items():
    for _w in _widths:
        _TABLE[(_shape, "c", _w, None)] = _C_M16
for _shape in ("m8n8k16", "m8n8k32", "m8n8k128"):
    _TABLE[(_shape, "c", 32, None)] = _C_M8

# Element width in registers of each PTX type an mma multiplies (A/B) or accumulates (C/D);
# .e2m1 is 8-bit (container) except on m16n8k64.
AB_TYPES = {t: BY_PTX[t].register_bits for t in isa_rows.INPUT_TYPES}
ACC_TYPES = {t: BY_PTX[t].register_bits for t in isa_rows.ACC_TYPES}
_PACKED_E2M1_SHAPES = ("m16n8k64",)  # .kind::mxf4 / mxf4nvf4: no container padding

_SHAPE_RE = re.compile(r"^m(\d+)n(\d+)k(\d+)$")
VIEWS = ("warp", "quadpair", "warp16")


def shape_mnk(shape: str) -> tuple[int, int, int]:
    m = _SHAPE_RE.match(shape)
    if not m:
        raise ValueError(f"not an mma shape: {shape!r} (expected like 'm16n8k16')")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


@dataclass(frozen=True)
class FragmentLayout:
    """One operand's fragment: value v of lane `lane` is matrix element `coord(lane, v)`.

    Values are numbered v = reg * elems_per_reg + slot (slot 0 = lowest bits of the register),
    which is the ISA's a_i / b_i / c_i index. `copies` is how many (lane, v) hold each element:
    1 everywhere except m8n8k4 .f16 (4 in the quad-pair view; A/B 2 in the warp16 view).
    """

    shape: str
    operand: str  # 'a', 'b' or 'c' (C and D share layouts; pick by ctype resp. dtype)
    elem_type: str
    view: str  # 'warp' (one MMA per warp), 'quadpair' or 'warp16' (m8n8k4 .f16)
    major: str | None  # 'row'/'col' for m8n8k4 .f16 A/B, else None (ISA fixes .row.col)
    rows: int
    cols: int
    elem_bits: int
    reg_bits: int
    regs: int
    row_terms: tuple[tuple[str, int], ...] = field(repr=False)
    col_terms: tuple[tuple[str, int], ...] = field(repr=False)
    value_bits: tuple[tuple[int, int], ...] = field(repr=False)

    @property
    def elems_per_reg(self) -> int:
        return self.reg_bits // self.elem_bits

    @property
    def b32_registers(self) -> int:
        """32-bit registers a lane holds (a 64-bit register is two)."""
        return self.regs * max(1, self.reg_bits // 32)

    @property
    def nvals(self) -> int:
        return 1 << len(self.value_bits)

    @property
    def copies(self) -> int:
        return LANES * self.nvals // (self.rows * self.cols)

    @property
    def word_dtype(self) -> type:
        return np.uint64 if self.reg_bits == 64 else np.uint32

    @property
    def elem_dtype(self) -> type:
        return uint_dtype(self.elem_bits)

    def coord(self, lane: int, v: int) -> tuple[int, int]:
        r, c = coords(self)
        return int(r[lane, v]), int(c[lane, v])

    def __str__(self) -> str:
        major = f".{self.major}" if self.major else ""
        view = f" [{self.view}]" if self.view != "warp" else ""
        return f"{self.shape}.{self.operand}{major}.{self.elem_type}{view}"


def uint_dtype(bits: int) -> type:
    """Smallest unsigned NumPy type holding `bits` (element bit patterns live in these)."""
    for width, dt in ((8, np.uint8), (16, np.uint16), (32, np.uint32), (64, np.uint64)):
        if bits <= width:
            return dt
    raise ValueError(f"no unsigned type for {bits} bits")


def elem_bits(shape: str, elem_type: str, operand: str = "a") -> int:
    """Register width of one element: .e2m1 sits in an 8-bit container except on m16n8k64."""
    table = ACC_TYPES if operand in ("c", "d") else AB_TYPES
    if elem_type not in table:
        role = "an accumulator (C/D)" if operand in ("c", "d") else "a multiplicand (A/B)"
        raise ValueError(f"{elem_type!r} is not {role} type of mma; known: {sorted(table)}")
    if elem_type == "e2m1" and shape in _PACKED_E2M1_SHAPES:
        return 4
    return table[elem_type]


def layout(
    shape: str,
    operand: str,
    elem_type: str,
    *,
    major: str | None = None,
    view: str | None = None,
) -> FragmentLayout:
    """The fragment layout of `operand` ('a', 'b', 'c' or 'd') of a dense `mma.sync`.

    `elem_type` is the PTX type without the dot ('f16', 'tf32', 's8', 'e2m1', 's32', ...); for C
    and D pass .ctype resp. .dtype, since on m8n8k4 .f16 and .f32 accumulators differ. `major`
    is the .alayout/.blayout of m8n8k4 .f16 (default .row for A, .col for B, which every other
    shape requires). `view` only matters for m8n8k4 .f16: 'quadpair' (default) or 'warp16'.
    """
    op = "c" if operand == "d" else operand
    if op not in ("a", "b", "c"):
        raise ValueError(f"operand must be 'a', 'b', 'c' or 'd', not {operand!r}")
    m, n, k = shape_mnk(shape)
    bits = elem_bits(shape, elem_type, op)
    canonical = {"a": "row", "b": "col", "c": None}[op]
    quad = shape == "m8n8k4" and (bits == 16 or (op == "c" and bits == 32))
    if major not in (None, canonical) and not (quad and op != "c" and major in ("row", "col")):
        raise ValueError(f"{shape} {op.upper()} is .{canonical} only, not .{major}")
    key_major = (major or canonical) if quad and op != "c" else None
    spec = _TABLE.get((shape, op, bits, key_major))
    if spec is None:
        have = sorted({(o, b) for (s, o, b, _) in _TABLE if s == shape})
        raise ValueError(
            f"mma.{shape} has no {op.upper()} fragment of {bits}-bit elements ({elem_type}); "
            f"the ISA defines (operand, bits) {have}"
        )
    if view is None:
        view = "quadpair" if quad else "warp"
    if (view == "warp") == quad or view not in VIEWS:
        allowed = "'quadpair' or 'warp16'" if quad else "'warp'"
        raise ValueError(f"view {view!r} does not apply to {shape} {elem_type}: use {allowed}")
    row_terms, col_terms = spec.row, spec.col
    if view == "warp16":
        m, n = 16, 16
        if op in ("a", "c"):
            row_terms = row_terms + (("qr", 8),)
        if op in ("b", "c"):
            col_terms = col_terms + (("qc", 8),)
    rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n)}[op]
    reg_bits = 64 if bits == 64 else 32
    nvals = 1 << len(spec.value_bits)
    return FragmentLayout(
        shape=shape,
        operand=op,
        elem_type=elem_type,
        view=view,
        major=key_major,
        rows=rows,
        cols=cols,
        elem_bits=bits,
        reg_bits=reg_bits,
        regs=nvals * bits // reg_bits,
        row_terms=row_terms,
        col_terms=col_terms,
        value_bits=spec.value_bits,
    )


def repacked(lay: FragmentLayout, elem_type: str, bits: int) -> FragmentLayout:
    """The accumulator layout `lay` holding `elem_type` values of `bits` bits instead: the same
    (lane, value) -> element map, values packed by their width (an epilogue's f16 result, a
    bias loaded in the accumulator's layout), 64-bit values one a 64-bit register."""
    if lay.operand != "c" or lay.view != "warp":
        raise ValueError(f"only warp-view accumulator layouts repack, not {lay}")
    reg_bits = 64 if bits == 64 else 32
    return replace(lay, elem_type=elem_type, elem_bits=bits, reg_bits=reg_bits,
                   regs=-(-lay.nvals * bits // reg_bits))


def all_layouts() -> list[FragmentLayout]:
    """Every (shape, operand, type, major, view) combination the table defines."""
    out = []
    for shape, op, bits, major in _TABLE:
        table = ACC_TYPES if op == "c" else AB_TYPES
        for t in table:
            try:
                if elem_bits(shape, t, op) != bits:
                    continue
            except ValueError:
                continue
            quad = shape == "m8n8k4" and (bits == 16 or (op == "c" and bits == 32))
            for view in ("quadpair", "warp16") if quad else ("warp",):
                out.append(layout(shape, op, t, major=major, view=view))
    return out


@functools.cache
def _coords_cached(lay: FragmentLayout) -> tuple[np.ndarray, np.ndarray]:
    lane = np.arange(LANES)[:, None]
    v = np.arange(lay.nvals)[None, :]
    rows = sum((c * _LANE_TERMS[t](lane) for t, c in lay.row_terms), np.zeros_like(lane))
    cols = sum((c * _LANE_TERMS[t](lane) for t, c in lay.col_terms), np.zeros_like(lane))
    rows = rows + np.zeros_like(v)
    cols = cols + np.zeros_like(v)
    for b, (dr, dc) in enumerate(lay.value_bits):
        bit = (v >> b) & 1
        rows = rows + dr * bit
        cols = cols + dc * bit
    rows.setflags(write=False)
    cols.setflags(write=False)
    return rows, cols


def coords(lay: FragmentLayout) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each int array [32, nvals]: element of value v of lane l (read-only)."""
    return _coords_cached(lay)


@dataclass(frozen=True)
class LinearForm:
    """row = sum_i bit_i(lane) * row_w[i] + row_off[v] (same for col): what codegen emits."""

    row_w: tuple[int, ...]  # LANE_BITS weights
    col_w: tuple[int, ...]
    row_off: tuple[int, ...]  # nvals offsets
    col_off: tuple[int, ...]

    @staticmethod
    def of(ll: LinearLayout, nvals: int, what: str = "layout") -> LinearForm:
        """The additive form of a (lane, value) -> (row, col) layout, offsets for values
        0..nvals-1; ValueError when its basis vectors overlap (XOR is not + there)."""
        split = ll.additive_split()
        if split is None:
            raise ValueError(f"{what} is linear over GF(2) but not additive (basis bits overlap): {ll}")
        w, const = split.weights, split.const
        v = np.arange(nvals)
        off = split.evaluate(lane=0, value=v)
        return LinearForm(
            w["row"]["lane"], w["col"]["lane"], tuple(map(int, off["row"])), tuple(map(int, off["col"]))
        )

    def evaluate(self) -> tuple[np.ndarray, np.ndarray]:
        lane = np.arange(LANES)
        bits = (lane[:, None] >> np.arange(LANE_BITS)[None, :]) & 1
        rows = (bits @ np.array(self.row_w))[:, None] + np.array(self.row_off)[None, :]
        cols = (bits @ np.array(self.col_w))[:, None] + np.array(self.col_off)[None, :]
        return rows, cols


def fit_layout(rows: np.ndarray, cols: np.ndarray, what: str = "layout", **kw) -> LinearLayout:
    """The (lane, value) -> (row, col) `LinearLayout` of [32, nvals] coordinates (negative
    entries ignored; `LinearLayout.fit` options in `kw`)."""
    rows, cols = np.asarray(rows), np.asarray(cols)
    sizes = {"lane": LANES, "value": 1 << (rows.shape[1] - 1).bit_length()}
    return LinearLayout.fit_table({"row": rows, "col": cols}, ("lane", "value"), in_sizes=sizes, what=what, **kw)


def fit_linear(rows: np.ndarray, cols: np.ndarray, what: str = "layout") -> LinearForm:
    """The lane-bit-linear form of [32, nvals] coordinates (`fit_layout`, then its additive
    split); raises ValueError if no linear layout reproduces them."""
    return LinearForm.of(fit_layout(rows, cols, what), np.shape(rows)[1], what)


@functools.cache
def linear_layout(lay: FragmentLayout) -> LinearLayout:
    """The fragment as a (lane: 32, value: nvals) -> (row, col) layout over GF(2), fitted to
    `coords` (so every table entry is checked; every dense ISA layout is linear)."""
    rows, cols = coords(lay)
    return fit_layout(rows, cols, str(lay), out_sizes={"row": lay.rows, "col": lay.cols})


def linear_form(lay: FragmentLayout) -> LinearForm:
    """The layout as row/col = lane-bit weights + per-value offsets (`linear_layout`'s additive
    split; every dense ISA layout has one)."""
    return LinearForm.of(linear_layout(lay), lay.nvals, str(lay))


def _check_matrix(lay: FragmentLayout, matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix)
    if matrix.shape != (lay.rows, lay.cols):
        raise ValueError(f"{lay}: matrix must be {lay.rows}x{lay.cols}, got {matrix.shape}")
    if matrix.dtype.kind != "u":
        raise ValueError(f"{lay}: pass raw element bits as an unsigned array, not {matrix.dtype}")
    if lay.elem_bits < 64 and matrix.size and int(matrix.max()) >> lay.elem_bits:
        raise ValueError(f"{lay}: element bit patterns exceed {lay.elem_bits} bits")
    return matrix


def pack(lay: FragmentLayout, matrix_bits: np.ndarray) -> np.ndarray:
    """Each lane's register words, [32, regs] uint32 (uint64 for .f64), from a matrix of raw
    element bit patterns (sub-byte elements: the value in the low bits, packed low bits first)."""
    matrix = _check_matrix(lay, matrix_bits)
    rows, cols = coords(lay)
    wt = lay.word_dtype
    vals = matrix[rows, cols].astype(wt).reshape(LANES, lay.regs, lay.elems_per_reg)
    shifts = (np.arange(lay.elems_per_reg) * lay.elem_bits).astype(wt)
    return np.bitwise_or.reduce(vals << shifts, axis=2)


def unpack(lay: FragmentLayout, regs: np.ndarray) -> np.ndarray:
    """The matrix of element bit patterns held by [32, regs] words. Elements held by several
    lanes (m8n8k4) must agree; a disagreement raises ValueError naming the lanes."""
    words = np.asarray(regs)
    if words.shape != (LANES, lay.regs):
        raise ValueError(f"{lay}: register words must be [32, {lay.regs}], got {words.shape}")
    wt = lay.word_dtype
    words = words.astype(wt)
    shifts = (np.arange(lay.elems_per_reg) * lay.elem_bits).astype(wt)
    mask = wt((1 << lay.elem_bits) - 1) if lay.elem_bits < 64 else ~wt(0)
    vals = ((words[:, :, None] >> shifts) & mask).reshape(LANES, lay.nvals).astype(lay.elem_dtype)
    rows, cols = coords(lay)
    out = np.zeros((lay.rows, lay.cols), dtype=lay.elem_dtype)
    out[rows, cols] = vals
    diff = out[rows, cols] != vals
    if diff.any():
        lane, v = np.argwhere(diff)[0]
        r, c = rows[lane, v], cols[lane, v]
        holders = np.argwhere((rows == r) & (cols == c))
        seen = {f"lane {hl} v{hv}": int(vals[hl, hv]) for hl, hv in holders}
        raise ValueError(f"{lay}: copies of element ({r}, {c}) disagree: {seen}")
    return out
