"""The sparse A lowerings of `warp-to-ptx`: `warp.load_sparse_a` compresses a structured-sparse
A in registers for `mma.sp`; `warp.load_meta` reads the metadata words of an A that arrives
compressed (`sparse_format`) from global memory, `warp.copy_meta_async` stages them in shared
memory and `warp.load_meta_shared` reads them from a stage.

Each lane reads whole chunks of the dense A (4 elements for 2:4; 2 for tf32's 1:2; 8 for the
4-bit pair-wise 4:8), finds which of the chunk's 4 metadata units are kept — the nonzero ones
(`tile.compress`) or the largest magnitudes (`tile.compress {prune}`, ties to the lower column) —
and from that 4-bit unit mask one table lookup gives the chunk's metadata nibble (two increasing
2-bit unit indices, right for both `mma.sp` and `::ordered_metadata`). The kept values are then
cut out of the chunk with `bfe` at the indexed positions. The compressed A fragment and the
metadata word `e` both come from `sparse_fragments` (the verified layouts); each is filled from
its own chunk reads, since a lane's metadata describes rows other lanes hold.

A chunk with more nonzeros than the pattern keeps (without `prune`) is recorded with
`atom.global.min` of its row-major group number in the kernel's extra error word, so the run
reports the first offending group.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.compiler.core.elements import BY_PTX
from tilemma.compiler.core.isa import MmaVariant
from tilemma.compiler.layouts import fragments, sparse_fragments
from tilemma.compiler.layouts import sparse_format as fmt
from tilemma.dialects import warp
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.fragment_io import Access, Emitter, load_converted
from tilemma.passes.warp_to_ptx.fragment_ops import _open
from tilemma.passes.warp_to_ptx.shared import thread_chunks
from tilemma.passes.warp_to_ptx.state import LoweringState, _finish, _layout, all_reg, reg

NO_ERROR = 0xFFFFFFFF


def magnitude_mask(atype: str, elem_bits: int) -> int:
    """Bits of an element, as loaded for the instruction (`elem_bits` wide), that make it nonzero:
    a float's bits below its sign (-0.0 counts as zero; they also order magnitudes), at its
    place in an 8-bit .kind::f8f6f4 container (e2m1: bits 2..4), or all of an integer's."""
    e = BY_PTX[atype]
    if not e.is_float:
        return (1 << elem_bits) - 1
    shift = e.container_shift if e.container_shift is not None and elem_bits == 8 else 0
    return ((1 << (e.bits - 1)) - 1) << shift


# 2 * |e2m1| for the codes 0..7 (0, 0.5, 1, 1.5, 2, 3, 4, 6), one nibble each: pair sums of
# magnitudes must be real sums, which the codes themselves do not give.
E2M1_TWICE_MAGNITUDE = 0xC8643210


def _nibble_table() -> int:
    """64-bit constant: for each 4-bit kept-unit mask, the metadata nibble idx0 | idx1 << 2.

    Masks with fewer than two units are padded with the lowest free units (their values are
    zero); masks with more than two (a pattern error, reported separately) keep the first two."""
    table = 0
    for mask in range(16):
        kept = [u for u in range(4) if mask >> u & 1][:2]
        kept = sorted(kept + [u for u in range(4) if u not in kept][: 2 - len(kept)])
        table |= (kept[0] | kept[1] << 2) << (4 * mask)
    return table


NIBBLE_TABLE = _nibble_table()


@dataclass(frozen=True)
class SparseGeometry:
    """Sizes of one sparse instruction's A, in elements and metadata units."""

    elem_bits: int
    unit_bits: int
    chunk: int  # dense elements per chunk
    kept: int  # kept elements per chunk
    atom: int  # elements ranked together by prune (2 for 4-bit pairs)

    @staticmethod
    def of(instr: MmaVariant) -> SparseGeometry:
        spec = sparse_fragments.sparse_spec(instr.shape, instr.atype)
        pat = spec.pattern
        return SparseGeometry(spec.elem_bits, spec.unit_bits, pat.chunk, pat.kept, pat.atom)

    def units_of_element(self, j: int) -> range:
        lo = j * self.elem_bits // self.unit_bits
        hi = ((j + 1) * self.elem_bits - 1) // self.unit_bits
        return range(lo, hi + 1)


def metadata_linear(instr: MmaVariant, selector: int = 0) -> fragments.LinearForm:
    """The metadata layout (row, field) as a linear form over lane bits, fitted on the lanes the
    selector reads; lane bits that only reach ignored lanes get weight 0, so the others compute
    a live lane's formula, which the instruction ignores."""
    lay = sparse_fragments.metadata_layout(instr.shape, instr.atype, selector)
    what = f"metadata of {instr.shape} {instr.atype} selector {selector}"
    return fragments.fit_linear(lay.row, lay.field, what)


class SparseALoader:
    """Emits one instruction's compressed A fragment and metadata (see module docstring) through
    `e`; `batch` is the batch index register (for the error word's group number)."""

    def __init__(self, e: Emitter, instr: MmaVariant, prune: bool, error_ptr: str | None, batch: str):
        self.b = e
        self.instr, self.prune, self.error_ptr, self.batch = instr, prune, error_ptr, batch
        self.geo = SparseGeometry.of(instr)
        self.cache: dict = {}
        self.table: str | None = None

    # -- one chunk ------------------------------------------------------------------------

    def analyse(self, op, key, row_const: int, col_const: int):
        """(nibble, [element registers]) of the chunk at (row_reg + row_const, col_reg + col_const)."""
        if (key, row_const, col_const) in self.cache:
            return self.cache[(key, row_const, col_const)]
        b, geo = self.b, self.geo
        elems = []
        for j in range(geo.chunk):
            t = b.reg("b32")
            pred = op.pred(b, row_const, col_const + j)
            load_converted(b, op, op.place(b, row_const, col_const + j), pred, t, "b32", self.instr.atype, None,
                           geo.elem_bits)
            elems.append(t)
        atoms = self._kept_atoms(elems) if self.prune else None
        unit_mask = b.reg("b32")
        b.emit("mov.b32", unit_mask, 0)
        for u in range(4):
            preds = (
                [atoms[j // geo.atom] for j in range(geo.chunk) if u in geo.units_of_element(j)]
                if atoms is not None
                else [self._nonzero(elems[j]) for j in range(geo.chunk) if u in geo.units_of_element(j)]
            )
            p = preds[0]
            for q in preds[1:]:
                r = b.reg("pred")
                b.emit("or.pred", r, p, q)
                p = r
            bit = b.reg("b32")
            b.emit("selp.u32", bit, 1, 0, p)
            b.emit("bfi.b32", unit_mask, bit, unit_mask, u, 1)
        if self.error_ptr is not None:
            self._record_violation(op, unit_mask, row_const, col_const)
        if self.table is None:
            self.table = b.reg("b64")
            b.emit("mov.b64", self.table, f"0x{NIBBLE_TABLE:016X}")
        shift, looked = b.reg("b32"), b.reg("b64")
        nib = b.reg("b32")
        b.emit("shl.b32", shift, unit_mask, 2)
        b.emit("shr.b64", looked, self.table, shift)
        b.emit("cvt.u32.u64", nib, looked)
        b.emit("and.b32", nib, nib, 15)
        self.cache[(key, row_const, col_const)] = (nib, elems)
        return nib, elems

    def _nonzero(self, t: str) -> str:
        b = self.b
        mask = self._mask()
        m, p = b.reg("b32"), b.reg("pred")
        b.emit("and.b32", m, t, mask)
        b.emit("setp.ne.u32", p, m, 0)
        return p

    def _mask(self) -> int:
        """Bits of an element (as loaded for the instruction) that hold its magnitude."""
        return magnitude_mask(self.instr.atype, self.geo.elem_bits)

    def _magnitude(self, t: str) -> str:
        """An integer that orders like |value| and adds like it (pairs are ranked by sums)."""
        b, atype = self.b, self.instr.atype
        element = BY_PTX[atype]
        m = b.reg("b32")
        if self.geo.elem_bits == 4 and atype == "e2m1":  # 2|x| by table: codes 0..7 -> 0..12
            shift = b.reg("b32")
            b.emit("and.b32", shift, t, 0x7)
            b.emit("shl.b32", shift, shift, 2)
            b.emit("mov.u32", m, E2M1_TWICE_MAGNITUDE)
            b.emit("shr.u32", m, m, shift)
            b.emit("and.b32", m, m, 0xF)
        elif element.is_float:
            b.emit("and.b32", m, t, self._mask())
        elif element.signed:  # integers: their absolute value
            b.emit("bfe.s32", m, t, 0, element.bits)
            b.emit("abs.s32", m, m)
        else:
            b.emit("and.b32", m, t, (1 << self.geo.elem_bits) - 1)
        return m

    def _kept_atoms(self, elems: list[str]) -> list[str]:
        """Predicates: atom kept by prune (largest magnitudes; ties keep the lower column)."""
        b, geo = self.b, self.geo
        mags = []
        for a in range(geo.chunk // geo.atom):
            m = self._magnitude(elems[a * geo.atom])
            for j in range(1, geo.atom):
                b.emit("add.u32", m, m, self._magnitude(elems[a * geo.atom + j]))
            mags.append(m)
        kept = []
        for a, ma in enumerate(mags):
            rank = b.reg("b32")
            b.emit("mov.u32", rank, 0)
            for o, mo in enumerate(mags):
                if o == a:
                    continue
                p, one = b.reg("pred"), b.reg("b32")
                b.emit("setp.ge.u32" if o < a else "setp.gt.u32", p, mo, ma)
                b.emit("selp.u32", one, 1, 0, p)
                b.emit("add.u32", rank, rank, one)
            k = b.reg("pred")
            b.emit("setp.lt.u32", k, rank, geo.kept // geo.atom)
            kept.append(k)
        return kept

    def _record_violation(self, op, unit_mask: str, row_const: int, col_const: int) -> None:
        """atom.min of the chunk's row-major group number when it keeps too many units."""
        b, geo = self.b, self.geo
        _, m, k = op.window.extent
        count, bad = b.reg("b32"), b.reg("pred")
        b.emit("popc.b32", count, unit_mask)
        b.emit("setp.gt.u32", bad, count, 2)
        groups = -(-k // geo.chunk)
        row, group, code, old = b.reg("b32"), b.reg("b32"), b.reg("b32"), b.reg("b32")
        b.emit("add.u32", row, op.row_reg, row_const)
        b.emit("mad.lo.u32", row, b.in_register(self.batch), m, row)
        b.emit("add.u32", group, op.col_reg, col_const)
        b.emit("div.u32", group, group, geo.chunk)
        b.emit("mad.lo.u32", code, row, groups, group)
        b.emit("atom.global.min.u32", old, f"[{self.error_ptr}]", code, guard=bad)

    # -- fragments ------------------------------------------------------------------------

    def kept_value(self, nib: str, elems: list[str], p: int) -> str:
        """Register holding kept element p (0-based within the chunk's kept elements)."""
        b, geo = self.b, self.geo
        eb, ub = geo.elem_bits, geo.unit_bits
        if eb >= ub:  # an element spans eb // ub units (tf32: two); its first unit's index
            unit_slot, sub = p * (eb // ub), 0
        else:  # ub // eb elements share a unit (4-bit pairs): the unit, then which half
            unit_slot, sub = divmod(p, ub // eb)
        idx = b.reg("b32")
        b.emit("bfe.u32", idx, nib, 2 * unit_slot, 2)
        # The element starting at unit idx (plus `sub` elements within a shared unit).
        out = b.reg("b32")
        b.emit("mov.b32", out, 0)
        for j, e in enumerate(elems):
            first_unit = j * eb // ub
            if j * eb % ub != sub * eb:
                continue
            p_hit = b.reg("pred")
            b.emit("setp.eq.u32", p_hit, idx, first_unit)
            b.emit("selp.b32", out, e, out, p_hit)
        return out

    def fill_a(self, op: Access, frag: list[str], lin: fragments.LinearForm, lay: fragments.FragmentLayout) -> None:
        """The compressed A fragment from the dense A chunks at the access origin."""
        b, geo = self.b, self.geo
        per = lay.elems_per_reg
        for r, reg in enumerate(frag):
            b.emit("mov.b32", reg, 0)
            for s in range(per):
                v = r * per + s
                row = lin.row_off[v]
                chunk, p = divmod(lin.col_off[v], geo.kept)
                nib, elems = self.analyse(op, "a", row, chunk * geo.chunk)
                value = self.kept_value(nib, elems, p)
                if per == 1:
                    b.emit("mov.b32", reg, value)
                else:
                    b.emit("bfi.b32", reg, value, reg, s * lay.elem_bits, lay.elem_bits)

    def fill_metadata(self, op: Access, e: str, lin: fragments.LinearForm) -> None:
        """The `e` word: nibble q holds fields 2q, 2q+1 = one chunk's two unit indices."""
        b = self.b
        b.emit("mov.b32", e, 0)
        for q in range(8):
            row = lin.row_off[2 * q]
            chunk = lin.col_off[2 * q] // 2
            nib, _ = self.analyse(op, "e", row, chunk * self.geo.chunk)
            b.emit("bfi.b32", e, nib, e, 4 * q, 4)


# ---------------------------------------------------------------------------------------------
# The patterns.
# ---------------------------------------------------------------------------------------------


@dataclass
class LowerSparseA(RewritePattern):
    """`warp.load_sparse_a`: dense chunks read, compressed in registers (`sparse_a`)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadSparseAOp, rewriter: PatternRewriter) -> None:
        frag = op.values.type
        assert isinstance(frag, warp.FragType)
        v = frag.variant
        error = reg(op.error) if op.error is not None else None
        batch = reg(op.indices[0])
        if (op.error is not None and error is None) or batch is None:
            return
        kernel = self.state.kernel(op)
        lay = _layout(frag)
        lin_a, lin_e = fragments.linear_form(lay), metadata_linear(v)
        e = fio.Emitter(kernel.regs)
        loader = SparseALoader(e, v, op.prune is not None, error, batch)
        geo = loader.geo
        # A's lane columns count kept elements (chunk/kept apart), the metadata's count fields
        # (two per chunk): both scale to dense columns.
        a = _open(e, op, kernel, (lin_a.row_w, lin_a.col_w), geo.chunk // geo.kept)
        meta = _open(e, op, kernel, (lin_e.row_w, lin_e.col_w), geo.chunk // 2)
        if a is None or meta is None:
            return
        values, word = e.reg_list("b32", lay.regs), e.reg("b32")
        loader.fill_a(a, values, lin_a, lay)
        loader.fill_metadata(meta, word, lin_e)
        _finish(op, rewriter, e, [values, [word]])


@dataclass
class LowerLoadMeta(RewritePattern):
    """`warp.load_meta`: one `ld.global.v{count}.u32` per lane at its words of the metadata row
    (`sparse_format`: word 64 * (step // 4) + 4 * q + step % 4 of the row of tile row // 16,
    q = 2 * (lane // 4) + lane % 2; lanes at quad positions 2 and 3 repeat their neighbours',
    which the instruction ignores), predicated on the tile and the K group existing (else the
    filler: the staged loop loads stages ahead, past the last)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadMetaOp, rewriter: PatternRewriter) -> None:
        base, idx = reg(op.ref), all_reg(op.indices)
        if base is None or idx is None:
            return
        batch, row, k = idx
        kernel = self.state.kernel(op)
        ref = op.ref.type
        assert isinstance(ref, MemRefType)
        shape = ref.get_shape()
        tiles, width = shape[-2:]
        batch_bytes = 4 * tiles * width if len(shape) == 3 and shape[0] > 1 else 0

        lane_off = _meta_lane_bytes(kernel, 4 * fmt.STEPS_PER_GROUP)
        e = fio.Emitter(kernel.regs)
        tile_, step, group, within, off = (e.reg("b32") for _ in range(5))
        e.emit("shr.u32", tile_, e.in_register(row), 4)
        inside, in_row = e.reg("pred"), e.reg("pred")
        e.emit("setp.lt.u32", inside, tile_, tiles)
        e.emit("shr.u32", step, e.in_register(k), 5)
        e.emit("shr.u32", group, step, 2)
        e.emit("setp.lt.u32", in_row, group, width // fmt.GROUP_WORDS)
        e.emit("and.pred", inside, inside, in_row)
        e.emit("and.b32", within, step, fmt.STEPS_PER_GROUP - 1)
        e.emit("mad.lo.u32", off, tile_, 4 * width, lane_off)
        e.emit("mad.lo.u32", off, group, 4 * fmt.GROUP_WORDS, off)
        e.emit("mad.lo.u32", off, within, 4, off)
        addr = e.reg("b64")
        e.emit("cvt.u64.u32", addr, off)
        if batch_bytes:
            t = e.reg("b64")
            fio._mul_wide(e, t, batch, batch_bytes)
            e.emit("add.s64", addr, addr, t)
        e.emit("add.s64", addr, addr, base)
        out = e.reg_list("b32", len(op.fragments))
        for r in out:
            e.emit("mov.b32", r, fmt.FILLER)
        vec = f".v{len(out)}" if len(out) > 1 else ""
        dst = "{" + ", ".join(out) + "}" if len(out) > 1 else out[0]
        e.emit(f"ld.global{vec}.u32", dst, f"[{addr}]", guard=inside)
        _finish(op, rewriter, e, [[r] for r in out])


def _meta_lane_bytes(kernel, size: int) -> str:
    """A register holding q * `size`: q = 2 (lane / 4) + lane % 2, the metadata lane whose words
    this lane reads (lanes at quad positions 2 and 3 read their neighbours')."""

    def build(e: fio.Emitter) -> list:
        quad, odd, off = e.reg("b32"), e.reg("b32"), e.reg("b32")
        e.emit("bfe.u32", quad, kernel.lane, 2, 3)
        e.emit("and.b32", odd, kernel.lane, 1)
        e.emit("shl.b32", quad, quad, 1)
        e.emit("add.u32", quad, quad, odd)
        e.emit("mul.lo.u32", off, quad, size)
        return [off]

    return kernel.thread_invariant(("meta-lane", size), build)[0]


@dataclass
class LowerCopyMetaAsync(RewritePattern):
    """`warp.copy_meta_async`: thread t copies shared rows t, t + T, ... (tile r / 16, metadata
    lane q = r % 16) of the stage, each one `cp.async` of the lane's 4 x steps contiguous bytes
    (word 64 g + 4 q + step % 4 of its tile's row, `sparse_format`); the tile and the K group
    clamped to the memref's last."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.CopyMetaAsyncOp, rewriter: PatternRewriter) -> None:
        base, dst, stage, idx = reg(op.ref), reg(op.dest), reg(op.stage), all_reg(op.indices)
        if base is None or dst is None or stage is None or idx is None:
            return
        batch, row, k = idx
        kernel = self.state.kernel(op)
        ref, dest = op.ref.type, op.dest.type
        assert isinstance(ref, MemRefType) and isinstance(dest, MemRefType)
        shape = ref.get_shape()
        tiles, width = shape[-2:]
        _, rows, steps = dest.get_shape()
        size, threads, first = 4 * steps, op.threads.value.data, warp.first_thread(op)

        def thread_parts(e: fio.Emitter) -> list:
            """Per chunk: (guard, tile within the CTA's, word of its lane in a group, shared offset)."""
            parts = []
            for r, guard in thread_chunks(e, threads, rows, -(-rows // threads), first):
                t, q, shared = e.reg("b32"), e.reg("b32"), e.reg("b32")
                e.emit("shr.u32", t, r, 4)
                e.emit("and.b32", q, r, fmt.META_LANES - 1)
                e.emit("shl.b32", q, q, 2)  # the lane's words start 4 q into a group
                e.emit("mul.lo.u32", shared, r, size)
                parts.append((guard, t, q, shared))
            return parts

        parts = kernel.thread_invariant(("copy-meta", threads, rows, size) + ((first,) if first else ()), thread_parts)
        e = fio.Emitter(kernel.regs)
        tile0, step, group, word = e.reg("b32"), e.reg("b32"), e.reg("b32"), e.reg("b32")
        e.emit("shr.u32", tile0, e.in_register(row), 4)
        e.emit("shr.u32", step, e.in_register(k), 5)
        e.emit("shr.u32", group, step, 2)
        e.emit("min.u32", group, group, width // fmt.GROUP_WORDS - 1)
        e.emit("and.b32", word, step, fmt.STEPS_PER_GROUP - 1)
        e.emit("mad.lo.u32", word, group, fmt.GROUP_WORDS, word)
        origin = e.reg("b64")
        e.emit("mov.b64", origin, base)
        if len(shape) == 3 and shape[0] > 1:  # a batch of 1 serves every batch
            t = e.reg("b64")
            fio._mul_wide(e, t, batch, 4 * tiles * width)
            e.emit("add.s64", origin, origin, t)
        stage_base = e.reg("b32")
        e.emit("mad.lo.u32", stage_base, e.in_register(stage), rows * size, dst)
        kind = "cg" if size == 16 else "ca"
        for guard, t_local, q, shared in parts:
            t, w, src, addr = e.reg("b32"), e.reg("b32"), e.reg("b64"), e.reg("b32")
            e.emit("add.u32", t, tile0, t_local)
            e.emit("min.u32", t, t, tiles - 1)
            e.emit("mad.lo.u32", w, t, width, word)
            e.emit("add.u32", w, w, q)
            fio._mul_wide(e, src, w, 4)
            e.emit("add.s64", src, src, origin)
            e.emit("add.u32", addr, stage_base, shared)
            e.emit(f"cp.async.{kind}.shared.global", f"[{addr}]", f"[{src}]", size, guard=guard)
        _finish(op, rewriter, e)


@dataclass
class LowerLoadMetaShared(RewritePattern):
    """`warp.load_meta_shared`: one `ld.shared.v{steps}.u32` a lane at its metadata lane's row of
    the tile (`warp.copy_meta_async`'s layout): the 16 rows a warp reads are one contiguous run,
    conflict-free."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadMetaSharedOp, rewriter: PatternRewriter) -> None:
        base, idx = reg(op.ref), all_reg(op.indices)
        if base is None or idx is None:
            return
        stage, row = idx
        kernel = self.state.kernel(op)
        ref = op.ref.type
        assert isinstance(ref, MemRefType)
        _, rows, steps = ref.get_shape()
        size = 4 * steps
        lane_off = _meta_lane_bytes(kernel, size)
        e = fio.Emitter(kernel.regs)
        addr = e.reg("b32")
        e.emit("mad.lo.u32", addr, e.in_register(row), size, lane_off)  # row = 16 x tile: its lanes' rows
        e.emit("add.u32", addr, addr, base)
        e.emit("mad.lo.u32", addr, e.in_register(stage), rows * size, addr)
        out = e.reg_list("b32", steps)
        vec = f".v{steps}" if steps > 1 else ""
        e.emit(f"ld.shared{vec}.u32", "{" + ", ".join(out) + "}" if steps > 1 else out[0], f"[{addr}]")
        _finish(op, rewriter, e, [[r] for r in out])
