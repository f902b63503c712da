"""PTX emission shared by the `warp-to-ptx` patterns: registers, per-lane fragment addressing,
predication at the tile's edge, element loads with their conversions, stores.

A window op's memref is seen as a `Window` (`window_of`): (batch, row, col) strides and the
element offset of the tile's origin, from the memref's layout (identity or strided).

A fragment access works from the fragment table's linear form (`compiler/layouts/fragments.py`): a lane's
row and column are a lane-bit-linear base (computed once per access with `bfe`/`mad`) plus a
per-value constant that folds into the load's immediate offset. Elements outside the window's
extent are predicated off (loads then give 0, which adds nothing to an mma); predicates that can
never be false are not emitted. Addresses are 64-bit; index arithmetic is 32-bit, which the
distribution pass guarantees is enough (it refuses larger tiles).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import MemRefType

from tilemma.compiler.core.elements import BY_PTX, ELEMENTS
from tilemma.compiler.core.memref_layout import DYNAMIC, symbolic_layout
from tilemma.compiler.layouts import fragments
from tilemma.dialects.ptx_builder import RegisterFile, f32_literal, f64_literal
from tilemma.dialects import ptx, tile

# Load/store opcode suffix of a whole element in memory, by storage bits.
MEM_SUFFIX = {64: "f64", 32: "b32", 16: "u16", 8: "u8"}
U32_MAX = (1 << 32) - 1
UNBOUNDED = (1 << 31) - 1  # the extent of a dimension a broadcast repeats: any index is inside


def unsigned_magic(d: int) -> tuple[int, int, bool]:
    """(m, s, add) with which n // d, for every 32-bit n and d >= 2 not a power of two, is
    mulhi(n, m) >> s (add False: m = ceil(2^(32+s) / d) is below 2^32 and overshoots d's multiple
    by at most 2^s), or else, with t = mulhi(n, m) and m the low 32 bits of floor(2^(32+s) / d) + 1
    (s = ceil(log2 d)), (t + ((n - t) >> 1)) >> (s - 1) (Granlund and Montgomery 1994, fig. 4.1)."""
    top = (d - 1).bit_length()
    for s in range(top + 1):
        m = -(-(1 << (32 + s)) // d)
        if m <= U32_MAX and m * d - (1 << (32 + s)) <= 1 << s:
            return m, s, False
    return ((((1 << top) - d) << 32) // d) + 1, top, True


class Emitter:
    """Appends PTX operations for one rewrite, drawing registers from the kernel's file."""

    def __init__(self, regs: RegisterFile):
        self.regs = regs
        self.ops: list = []

    def reg(self, bank: str) -> str:
        return self.regs.reg(bank)

    def reg_list(self, bank: str, n: int) -> list[str]:
        return [self.regs.reg(bank) for _ in range(n)]

    def emit(self, opcode: str, *args: str | int, guard: str | None = None) -> None:
        if opcode in ("div.u32", "rem.u32") and str(args[2]).isdigit() and int(args[2]) > 0:
            self._by_constant(opcode == "rem.u32", str(args[0]), str(args[1]), int(args[2]), guard)
            return
        self.ops.append(ptx.InstOp(opcode, [str(a) for a in args], guard))

    def _by_constant(self, rem: bool, dst: str, n: str, d: int, guard: str | None) -> None:
        """`div.u32` / `rem.u32` by the constant d as a shift, a mask or a high multiply
        (`unsigned_magic`), as compilers divide: ptxas assembles a division by an immediate as a
        general one (the divisor's reciprocal by I2F and MUFU.RCP, then corrections), which a K loop
        taking its ring's stage modulo 3 or 5 pays on every iteration."""
        def emit(opcode: str, *args: str | int) -> None:
            self.ops.append(ptx.InstOp(opcode, [str(a) for a in args], guard))

        if d & (d - 1) == 0:
            if rem:
                emit("and.b32", dst, n, d - 1)
            else:
                emit("shr.u32", dst, n, d.bit_length() - 1)
            return
        n = self.in_register(n)
        magic, shift, add = unsigned_magic(d)
        q = self.reg("b32")
        emit("mul.hi.u32", q, n, magic)
        if add:  # the multiplier is 2^32 more than magic: q = (t + (n - t) / 2) >> (shift - 1)
            half = self.reg("b32")
            emit("sub.u32", half, n, q)
            emit("shr.u32", half, half, 1)
            emit("add.u32", q, q, half)
            shift -= 1
        if not rem:
            emit("shr.u32", dst, q, shift)
            return
        emit("shr.u32", q, q, shift)
        emit("mul.lo.u32", q, q, d)
        emit("sub.u32", dst, n, q)

    def comment(self, text: str) -> None:
        self.ops.append(ptx.CommentOp(text))

    def in_register(self, value: str) -> str:
        """A .b32 register holding `value` (immediates are moved into one)."""
        if value.startswith("%"):
            return value
        r = self.reg("b32")
        self.emit("mov.u32", r, value)
        return r

    def lane_linear(self, lane: str, weights: Sequence[int], start: str) -> str:
        """start + sum_i bit_i(lane) * weights[i]: the lane's part of a fragment coordinate."""
        acc = self.reg("b32")
        self.emit("mov.u32", acc, start)
        for i, w in enumerate(weights):
            if w:
                bit = self.reg("b32")
                self.emit("bfe.u32", bit, lane, i, 1)
                self.emit("mad.lo.u32", acc, bit, w, acc)
        return acc

    def pred_lt(self, cache: dict[int, str | None], reg: str, const: int, bound: int | str, static: bool) -> str | None:
        """Predicate reg + const < bound (None when it always holds); `bound` a constant or a
        .u32 register (a size known at launch, below 2^31)."""
        if static:
            return None
        if const not in cache:
            p = self.reg("pred")
            if isinstance(bound, str):
                at = reg
                if const:
                    at = self.reg("b32")
                    self.emit("add.u32", at, reg, const)
                self.emit("setp.lt.s32", p, at, bound)
            else:
                self.emit("setp.lt.s32", p, reg, bound - const)
            cache[const] = p
        return cache[const]

    def both(self, p: str | None, q: str | None) -> str | None:
        if p is None or q is None:
            return p or q
        r = self.reg("pred")
        self.emit("and.pred", r, p, q)
        return r


@dataclass(frozen=True)
class Window:
    """A tile of a memref as one access sees it: storage type, strides (elements; batch stride 0
    when the tile is shared by every batch), the element offset of its origin, its extent."""

    stored: str
    strides: tuple[int | str, int | str, int | str]  # batch, row, col; a register where `?`
    base: int
    extent: tuple[int | str, int | str, int | str]  # batch, rows, cols; a register where `?`
    in_bounds: tuple[bool, bool] = (False, False)  # rows, cols: no predicate needed
    col_align: int = 1  # the access's column index is a multiple of this
    multiple: int = 1  # a `?` stride, and a `?` size of a contiguous dimension, is a multiple of this

    def divides(self, value: int | str, d: int) -> bool:
        """Whether d divides `value` (a register: what the kernel's `tile.stride_multiple` promises)."""
        return value % d == 0 if isinstance(value, int) else self.multiple % d == 0

    @property
    def static(self) -> bool:
        """Whether the strides are all known now (offsets fold into the accesses' immediates)."""
        return all(isinstance(x, int) for x in self.strides)

    @property
    def pairs(self) -> bool:
        """Whether a value at an even column and its right neighbour can move as one 2-vector:
        the pair is aligned (column index even, row/batch strides and offset even, columns
        contiguous) and inside or outside the extent together (an even number of columns)."""
        sb, sr, sc = self.strides
        return (self.col_align % 2 == 0 and sc == 1 and self.divides(sr, 2) and self.divides(sb, 2)
                and self.base % 2 == 0 and (self.divides(self.extent[2], 2) or self.in_bounds[1])
                and self.bits in (32, 64))

    @property
    def bits(self) -> int:
        """Bits one element takes in memory (fp6 is stored one per byte)."""
        return ELEMENTS[self.stored].storage_bits

    @property
    def sub_byte(self) -> bool:
        return self.bits < 8

    def offset(self, row: int, col: int) -> int:
        """Elements from the access origin to (row, col), where the strides are static."""
        return row * self.strides[1] + col * self.strides[2]  # type: ignore[operator]


@dataclass(frozen=True)
class Place:
    """An element's address: `ptr` (a .b64 register; a bit address for sub-byte types) plus
    `elems` elements, which fold into the instruction's immediate offset."""

    ptr: str
    elems: int

    def operand(self, bits: int) -> str:
        return f"[{self.ptr}+{self.elems * bits // 8}]"


@dataclass(frozen=True)
class Symbols:
    """A kernel argument's `?` sizes and strides as registers (None where static), and the
    multiple its kernel promises them to be (`tile.stride_multiple`)."""

    sizes: tuple[str | None, ...]
    strides: tuple[str | None, ...]
    multiple: int = 1


def window_of(op, symbols: Symbols | None = None) -> Window:
    """The Window of a warp.load / warp.store / warp.load_sparse_a / warp.load_scale /
    warp.copy_async: strides and offset from its memref's layout (identity or
    `strided<[...], offset: ...>`), seen as (batch, row, col) strides of the tile; a `?` stride
    or extent is the register `symbols` names (read_kernel refused a window that starts at a
    nonzero offset along a `?` stride)."""
    ref = op.ref.type
    assert isinstance(ref, MemRefType)
    layout = symbolic_layout(ref)  # read_kernel refused what it cannot address
    offset = layout.offset
    strides = tuple(symbols.strides[i] if s == DYNAMIC and symbols else s for i, s in enumerate(layout.strides))
    if DYNAMIC in strides:
        raise AssertionError(f"{op.name}: {ref} has a ? stride and no register for it")
    window, extent = op.window_values(), op.extent_values()
    base = offset + sum(o * s for o, s in zip(window, strides) if o)
    dims = op.broadcast_dims() if hasattr(op, "broadcast_dims") else None
    if dims is None:  # memref dimension i covers tile dimension i (of batch, rows, cols)
        dims = tuple(range(3 - len(strides), 3))
    sizes = symbols.sizes if symbols else (None,) * len(strides)
    # a `?` extent is the size of the memref dimension covering it; a broadcast repeats its
    # memref along the others (stride 0: every index reads a valid place), so nothing bounds them
    extent = tuple(next((sizes[i] for i, d in enumerate(dims) if d == t), None if t in dims else UNBOUNDED)
                   if x == DYNAMIC else x for t, x in enumerate(extent))
    if None in extent:
        raise AssertionError(f"{op.name}: a ? extent no ? memref dimension covers")
    multiple = symbols.multiple if symbols else 1
    tile_strides: list[int | str] = [0, 0, 0]
    for stride, dim in zip(strides, dims):
        tile_strides[dim] = stride
    if extent[0] == 1:
        tile_strides[0] = 0
    return Window(tile.element_name(ref.element_type), tuple(tile_strides), base, extent,  # type: ignore[arg-type]
                  op.in_bounds_values(), op.col_align_value(), multiple)


@dataclass
class Access:
    """Per-lane addressing of one window: `ptr` is the lane's .b64 element address (byte
    address, or bit address for sub-byte types) at (row_reg, col_reg)."""

    window: Window
    ptr: str
    row_reg: str
    col_reg: str
    row_preds: dict[int, str | None] = field(default_factory=dict)
    col_preds: dict[int, str | None] = field(default_factory=dict)
    ptrs: dict[tuple[int, int], str] = field(default_factory=dict)  # `?` strides: (row, col) -> pointer

    def place(self, e: Emitter, row: int, col: int) -> Place:
        """The address of the value `row` rows and `col` columns from the access origin: an
        immediate offset where the strides are static, else a pointer per distinct (row, col)
        along the `?` strides (computed once)."""
        w = self.window
        if w.static:
            return Place(self.ptr, w.offset(row, col))
        _, sr, sc = w.strides
        key = (row if isinstance(sr, str) else 0, col if isinstance(sc, str) else 0)
        elems = (0 if isinstance(sr, str) else row * sr) + (0 if isinstance(sc, str) else col * sc)
        if key == (0, 0):
            return Place(self.ptr, elems)
        if key not in self.ptrs:
            p = e.reg("b64")
            first = True
            for n, stride in zip(key, (sr, sc)):
                if n:
                    t = e.reg("b64")
                    e.emit("mul.wide.u32", t, stride, n * w.bits // 8)
                    e.emit("add.s64", p, self.ptr if first else p, t)
                    first = False
            self.ptrs[key] = p
        return Place(self.ptrs[key], elems)

    def pred(self, e: Emitter, row: int, col: int) -> str | None:
        """row_reg + row < rows and col_reg + col < cols, where either can fail."""
        _, rows, cols = self.window.extent
        rows_in, cols_in = self.window.in_bounds
        return e.both(
            e.pred_lt(self.row_preds, self.row_reg, row, rows, rows_in),
            e.pred_lt(self.col_preds, self.col_reg, col, cols, cols_in),
        )


def open_access(e: Emitter, window: Window, base_ptr: str, batch: str, row: str, col: str) -> Access:
    """The lane's address of (batch, row, col) of `window`, from the memref's .b64 base."""
    sb, sr, sc = window.strides
    idx = e.reg("b64")
    _mul_wide(e, idx, row, sr)
    for reg, stride in ((col, sc), (batch, sb)):
        if stride:
            t = e.reg("b64")
            _mul_wide(e, t, reg, stride)
            e.emit("add.s64", idx, idx, t)
    if window.base:
        e.emit("add.s64", idx, idx, window.base)
    if window.sub_byte:
        bits_ptr = e.reg("b64")
        e.emit("shl.b64", bits_ptr, base_ptr, 3)
        e.emit("mad.lo.s64", idx, idx, window.bits, bits_ptr)
    else:
        e.emit("mad.lo.s64", idx, idx, window.bits // 8, base_ptr)
    return Access(window, idx, row, col)


def _mul_wide(e: Emitter, dst: str, reg: str, factor: int | str) -> None:
    """dst (.b64) = reg (.u32) * factor (a constant or a .u32 register), with a 64-bit multiply
    where factor needs it."""
    reg = e.in_register(reg)
    if isinstance(factor, str):
        e.emit("mul.wide.u32", dst, reg, factor)
    elif factor == 1:
        e.emit("cvt.u64.u32", dst, reg)
    elif factor <= U32_MAX:
        e.emit("mul.wide.u32", dst, reg, factor)
    else:
        e.emit("cvt.u64.u32", dst, reg)
        e.emit("mul.lo.u64", dst, dst, factor)


def load_element(e: Emitter, acc: Access, at: Place, pred: str | None, dst: str, bank: str) -> None:
    """dst = element at `at`, 0 where pred is false; widened to dst."""
    bits = acc.window.bits
    if pred is not None:
        e.emit(f"mov.{bank}", dst, _zero(bank))
    if not acc.window.sub_byte:
        suffix = MEM_SUFFIX[bits]
        if bank == "f32" and bits == 32:
            suffix = "f32"
        e.emit(f"ld.global.{suffix}", dst, at.operand(bits), guard=pred)
        return
    bitaddr, byte = e.reg("b64"), e.reg("b64")
    shift = e.reg("b32")
    e.emit("add.s64", bitaddr, at.ptr, at.elems * bits)
    e.emit("shr.u64", byte, bitaddr, 3)
    e.emit("cvt.u32.u64", shift, bitaddr)
    e.emit("and.b32", shift, shift, 7)
    e.emit("ld.global.u8", dst, f"[{byte}]", guard=pred)
    stored = ELEMENTS[acc.window.stored]
    signed = stored.is_int and stored.signed  # sign-extend si4; any other type's bits as they are
    e.emit("bfe.s32" if signed else "bfe.u32", dst, dst, shift, bits)


def load_converted(e: Emitter, acc: Access, at: Place, pred: str | None, dst: str, bank: str,
                   ptx_type: str, rounding: str | None, elem_bits: int) -> None:
    """Load one element and convert it from its storage type to `ptx_type` by its rule in
    `tile.CAST_RULES` (the tile verifier admitted only those casts)."""
    stored_element = ELEMENTS[acc.window.stored]
    stored = stored_element.ptx
    if stored == ptx_type:
        load_element(e, acc, at, pred, dst, bank)
        if elem_bits == 8 and stored_element.container_shift:  # .kind::*f8f6f4 byte container: e2m1 in bits 2..5
            e.emit("shl.b32", dst, dst, stored_element.container_shift)
        return
    rule = tile.CAST_RULES[(acc.window.stored, BY_PTX[ptx_type].name)]
    if rule.how == "extend":
        load_element(e, acc, at, pred, dst, bank)  # bfe already sign/zero-extends
        return
    t = e.reg(stored)
    load_element(e, acc, at, pred, t, stored)
    if (rounding or rule.default) == "trunc":  # f32 -> tf32 as the mma reads it: the bits as they are
        e.emit("mov.b32", dst, t)
        return
    e.emit(f"cvt.{rounding or rule.default}.{ptx_type}.{stored}", dst, t)


def fill_fragment(e: Emitter, regs: Sequence[str], acc: Access, lin: fragments.LinearForm,
                  lay: fragments.FragmentLayout, bank: str, ptx_type: str, rounding: str | None,
                  lo_regs: Sequence[str] | None = None) -> None:
    """Load every value of one fragment; with `lo_regs` (3xTF32) also the tf32 remainder of
    each f32 value. Value v sits at (lin.row_off[v], lin.col_off[v]) from the access origin."""
    per = lay.elems_per_reg
    same = ELEMENTS[acc.window.stored].ptx == ptx_type and lo_regs is None
    pairs = vector_pairs(acc, lin, lay) if same else set()
    words = packed_words(acc, lin, lay) if same else set()
    for r, reg in enumerate(regs):
        if r in words:  # two 16-bit values as one 32-bit word (0 where the pair is outside)
            row, col = lin.row_off[r * per], lin.col_off[r * per]
            pred = acc.pred(e, row, col)
            if pred is not None:
                e.emit("mov.b32", reg, 0)
            e.emit("ld.global.b32", reg, acc.place(e, row, col).operand(acc.window.bits), guard=pred)
            continue
        if per > 1:
            e.emit("mov.b32", reg, 0)
        for s in range(per):
            v = r * per + s
            if v - 1 in pairs:
                continue
            row, col = lin.row_off[v], lin.col_off[v]
            pred, at = acc.pred(e, row, col), acc.place(e, row, col)
            if v in pairs:
                _load_pair(e, acc, at, pred, reg, regs[r + 1], bank)
            elif lo_regs is not None:
                _load_split_tf32(e, acc, at, pred, reg, lo_regs[r])
            elif per == 1:
                load_converted(e, acc, at, pred, reg, bank, ptx_type, rounding, lay.elem_bits)
            else:
                t = e.reg("b32")
                load_converted(e, acc, at, pred, t, "b32", ptx_type, rounding, lay.elem_bits)
                e.emit("bfi.b32", reg, t, reg, s * lay.elem_bits, lay.elem_bits)


def _zero(bank: str) -> str:
    """0 as a `mov` source for a register of `bank`."""
    return {"f32": f32_literal(0.0), "f64": f64_literal(0.0)}.get(bank, "0")


def _word_suffix(bank: str) -> str:
    """ld/st type suffix that moves a whole register of `bank`."""
    return {"f32": "f32", "f64": "f64"}.get(bank, "b32")


def _load_pair(e: Emitter, acc: Access, at: Place, pred: str | None, first: str, second: str, bank: str) -> None:
    """Two neighbouring values with one 2-vector load (0 where the pair is outside)."""
    if pred is not None:
        e.emit(f"mov.{bank}", first, _zero(bank))
        e.emit(f"mov.{bank}", second, _zero(bank))
    e.emit(f"ld.global.v2.{_word_suffix(bank)}", f"{{{first}, {second}}}", at.operand(acc.window.bits), guard=pred)


def tf32_for_mma(e: Emitter, dst: str, src: str, rounding: str, guard: str | None = None) -> None:
    """f32 word `src` rounded to tf32 as `rounding` says, into `dst`, for the tensor cores alone,
    which read a tf32 operand's top 19 bits and drop the low 13. ptxas assembles
    `cvt.rna.tf32.f32` as half a tf32 ulp (2^12) added to a finite word's bits, then a mask of the
    low 13; the mask is theirs to drop, so rna is the add alone (H200, the transposing fill's
    words: tf32 A M-major and B N-major 4096^3 191 -> 204 TFLOP/s, results/h200-2026-11-28e-tf32-rna-add.csv).
    Where `guard` holds some lanes back, and for rn / rz, the `cvt` itself. Only for a word that
    goes to the mma and nowhere else: a zero becomes 2^12's bits (a subnormal the mma reads as zero),
    so fragments that are also checked for zeros (an A compressed in registers) keep the `cvt`."""
    if rounding != "rna" or guard is not None:
        e.emit(f"cvt.{rounding}.tf32.f32", dst, src, guard=guard)
        return
    magnitude, finite = e.reg("b32"), e.reg("pred")
    e.emit("abs.f32", magnitude, src)
    e.emit("setp.lt.f32", finite, magnitude, f32_literal(np.float32(np.inf)))
    if dst != src:
        e.emit("mov.b32", dst, src)
    e.emit("add.s32", dst, dst, 1 << 12, guard=finite)


def _load_split_tf32(e: Emitter, acc: Access, at: Place, pred: str | None, hi: str, lo: str) -> None:
    x, hi_f, rest = e.reg("f32"), e.reg("f32"), e.reg("f32")
    load_element(e, acc, at, pred, x, "f32")
    e.emit("cvt.rna.tf32.f32", hi, x)
    e.emit("mov.b32", hi_f, hi)
    e.emit("sub.f32", rest, x, hi_f)
    e.emit("cvt.rna.tf32.f32", lo, rest)


def vector_pairs(acc: Access, lin: fragments.LinearForm, lay: fragments.FragmentLayout) -> set[int]:
    """Values v (one per register) that start a pair with v + 1 at the next column of the same
    row, at an even column offset, where the window lets pairs move as 2-vectors."""
    if not acc.window.pairs or lay.elems_per_reg != 1 or any(w % 2 for w in lin.col_w):
        return set()
    starts, v = set(), 0
    while v + 1 < lay.nvals:
        if (lin.row_off[v] == lin.row_off[v + 1] and lin.col_off[v + 1] == lin.col_off[v] + 1
                and lin.col_off[v] % 2 == 0):
            starts.add(v)
            v += 2
        else:
            v += 1
    return starts


def packed_words(acc: Access, lin: fragments.LinearForm, lay: fragments.FragmentLayout) -> set[int]:
    """Registers of two 16-bit values at neighbouring columns of one row that move as one
    aligned 32-bit word (the window's conditions of `Window.pairs`, for 16-bit elements)."""
    w = acc.window
    sb, sr, sc = w.strides
    if (lay.elems_per_reg != 2 or w.bits != 16 or any(cw % 2 for cw in lin.col_w) or w.col_align % 2
            or sc != 1 or not w.divides(sr, 2) or not w.divides(sb, 2) or w.base % 2
            or (not w.divides(w.extent[2], 2) and not w.in_bounds[1])):
        return set()
    return {r for r in range(lay.regs)
            if lin.row_off[2 * r] == lin.row_off[2 * r + 1] and lin.col_off[2 * r + 1] == lin.col_off[2 * r] + 1
            and lin.col_off[2 * r] % 2 == 0}


def store_fragment(e: Emitter, regs: Sequence[str], acc: Access, lin: fragments.LinearForm,
                   lay: fragments.FragmentLayout, bank: str) -> None:
    per = lay.elems_per_reg
    bits = acc.window.bits
    pairs = vector_pairs(acc, lin, lay)
    words = packed_words(acc, lin, lay)
    suffix = _word_suffix(bank)
    for v in range(lay.nvals):
        if v - 1 in pairs or (v % 2 and v // 2 in words):
            continue
        if per == 2 and v // 2 in words:  # both halves inside or outside together
            row, col = lin.row_off[v], lin.col_off[v]
            e.emit("st.global.b32", acc.place(e, row, col).operand(bits), regs[v // 2],
                   guard=acc.pred(e, row, col))
            continue
        row, col = lin.row_off[v], lin.col_off[v]
        pred = acc.pred(e, row, col)
        reg, slot = regs[v // per], v % per
        addr = acc.place(e, row, col).operand(bits)
        if v in pairs:  # the pair shares its predicate: both columns are inside or neither
            e.emit(f"st.global.v2.{suffix}", addr, f"{{{reg}, {regs[v + 1]}}}", guard=pred)
            continue
        if per == 1:
            e.emit(f"st.global.{suffix}", addr, reg, guard=pred)
            continue
        t = e.reg("b32")
        e.emit("bfe.u32", t, reg, slot * lay.elem_bits, lay.elem_bits)
        e.emit(f"st.global.{MEM_SUFFIX[bits]}", addr, t, guard=pred)


def splat_literal(value: float | int, ctype: str) -> str:
    """One register's worth of `value` in the accumulator type (f16: two halves)."""
    if ctype == "f32":
        return f32_literal(float(value))
    if ctype == "f64":
        return f64_literal(float(value))
    if ctype == "f16":
        h = int(np.array(value, dtype=np.float16).view(np.uint16))
        return str(h | (h << 16))
    return str(int(value))
