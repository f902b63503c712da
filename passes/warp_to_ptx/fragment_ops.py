"""`warp-to-ptx` patterns for the fragment ops that work in registers or on global memory:
`warp.constant` (a splat), `warp.load`/`warp.store`/`warp.load_scale` (each value at its place
in the memref window, through `fragment_io`), `warp.split_tf32`, `warp.widen`,
the pair ops (`warp.unpair_columns`, `warp.pair_columns`, `warp.unpair_rows`,
`warp.pair_rows`) and `warp.mma` (whose result reuses the accumulator's registers where it
is their only use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import scf
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.layouts import fragments, scale_fragments
from tilemma.dialects import ptx, warp
from tilemma.dialects.tile import element_name
from tilemma.passes.tile.select_mma import scale_count
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.fragment_io import window_of
from tilemma.passes.warp_to_ptx.state import (
    LoweringState,
    _bank_of,
    _count,
    _finish,
    _layout,
    _ptx_type,
    all_reg,
    all_regs,
    reg,
    regs,
)


@dataclass
class LowerFragConstant(RewritePattern):
    """`warp.constant`: every register of the fragment set to the splat."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.ConstantOp, rewriter: PatternRewriter) -> None:
        frag = op.result.type
        assert isinstance(frag, warp.FragType)
        e = fio.Emitter(self.state.kernel(op).regs)
        bank = _bank_of(frag)
        out = e.reg_list(bank, _count(frag))
        literal = fio.splat_literal(op.scalar(), frag.variant.ctype)
        for r in out:
            e.emit(f"mov.{bank}", r, literal)
        _finish(op, rewriter, e, [out])


def _open(e: fio.Emitter, op, kernel, weights: tuple[tuple[int, ...], tuple[int, ...]],
          col_scale: int = 1) -> fio.Access | None:
    """Per-lane access of a window op: lane part of the coordinates (columns scaled by
    `col_scale`, compressed -> dense) plus the op's indices."""
    base, idx = reg(op.ref), all_reg(op.indices)
    if base is None or idx is None:
        return None
    batch, row0, col0 = idx
    lane, symbols = kernel.lane, kernel.memrefs
    row = e.lane_linear(lane, weights[0], row0)
    if col_scale == 1:
        col = e.lane_linear(lane, weights[1], col0)
    else:
        col = e.lane_linear(lane, weights[1], "0")
        e.emit("mul.lo.u32", col, col, col_scale)
        e.emit("add.u32", col, col, col0)
    return fio.open_access(e, window_of(op, symbols.get(base)), base, batch, row, col)


@dataclass
class LowerLoad(RewritePattern):
    """`warp.load`: each value from its place in the window, converted, packed into registers."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadOp, rewriter: PatternRewriter) -> None:
        frag = op.result.type
        assert isinstance(frag, warp.FragType)
        kernel = self.state.kernel(op)
        lay = _layout(frag)
        lin = fragments.linear_form(lay)
        e = fio.Emitter(kernel.regs)
        access = _open(e, op, kernel, (lin.row_w, lin.col_w))
        if access is None:
            return
        bank = _bank_of(frag)
        out = e.reg_list(bank, lay.regs)
        rounding = str(op.rounding.data) if op.rounding is not None else None
        fio.fill_fragment(e, out, access, lin, lay, bank, _ptx_type(frag), rounding)
        _finish(op, rewriter, e, [out])


@dataclass
class LowerStore(RewritePattern):
    """`warp.store`: each accumulator value to its place in the window."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.StoreOp, rewriter: PatternRewriter) -> None:
        frag = op.value.type
        assert isinstance(frag, warp.FragType)
        values = regs(op.value)
        if values is None:
            return
        kernel = self.state.kernel(op)
        lay = _layout(frag)
        lin = fragments.linear_form(lay)
        e = fio.Emitter(kernel.regs)
        access = _open(e, op, kernel, (lin.row_w, lin.col_w))
        if access is None:
            return
        fio.store_fragment(e, values, access, lin, lay, _bank_of(frag))
        _finish(op, rewriter, e)


@dataclass
class LowerScale(RewritePattern):
    """`warp.load_scale`: byte j of the lane's register = the scale of K block j of the
    instruction, for the canonical selectors {0, 0} (lanes at byte j hold K block j)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadScaleOp, rewriter: PatternRewriter) -> None:
        frag = op.result.type
        assert isinstance(frag, warp.FragType)
        is_a = frag.role == warp.Operand.SCALE_A
        weights, per_instr = scale_fragments.scale_linear("a" if is_a else "b", f"{scale_count(frag.variant)}X")
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        no_lane = (0,) * len(weights)
        access = _open(e, op, kernel, (weights, no_lane) if is_a else (no_lane, weights))
        if access is None:
            return
        out = e.reg("b32")
        e.emit("mov.b32", out, 0)
        for j in range(per_instr):
            row, col = (0, j) if is_a else (j, 0)
            t = e.reg("b32")
            fio.load_element(e, access, access.place(e, row, col), access.pred(e, row, col), t, "b32")
            e.emit("bfi.b32", out, t, out, 8 * j, 8)
        _finish(op, rewriter, e, [[out]])


@dataclass
class LowerSplitTf32(RewritePattern):
    """`warp.split_tf32`: hi = tf32(x), lo = tf32(x - hi), both rounded rna."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.SplitTf32Op, rewriter: PatternRewriter) -> None:
        src = regs(op.source)
        if src is None:
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        hi, lo = e.reg_list("b32", len(src)), e.reg_list("b32", len(src))
        for x, h, l in zip(src, hi, lo):
            hi_f, rest = e.reg("f32"), e.reg("f32")
            e.emit("cvt.rna.tf32.f32", h, x)
            e.emit("mov.b32", hi_f, h)
            e.emit("sub.f32", rest, x, hi_f)
            e.emit("cvt.rna.tf32.f32", l, rest)
        _finish(op, rewriter, e, [hi, lo])


@dataclass
class LowerWiden(RewritePattern):
    """`warp.widen`: per source register, its low four nibbles (K 8t..8t+3) and high four
    (8t+4..8t+7) spread to bytes, sign-extended for s4; A's registers (rows g, g+8; K halves)
    regroup as each half's a0..a3, B's as b0, b1."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.WidenOp, rewriter: PatternRewriter) -> None:
        src = regs(op.source)
        if src is None:
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        source = op.source.type
        assert isinstance(source, warp.FragType)
        signed = ELEMENTS[element_name(source.element)].signed  # si4 (or ui4)

        def spread(r: str, high: bool) -> str:
            """Four nibbles of r to the four bytes of a new register."""
            x, t = e.reg("b32"), e.reg("b32")
            e.emit("shr.u32" if high else "and.b32", x, r, 16 if high else 0xFFFF)
            e.emit("shl.b32", t, x, 8)  # nibble pairs to bytes 0 and 2
            e.emit("or.b32", x, x, t)
            e.emit("and.b32", x, x, 0x00FF00FF)
            e.emit("shl.b32", t, x, 4)  # then one nibble a byte
            e.emit("or.b32", x, x, t)
            e.emit("and.b32", x, x, 0x0F0F0F0F)
            if signed:  # bit 3 set: the byte's top four bits too (8 x 30 = 0xF0, no carry out)
                e.emit("and.b32", t, x, 0x08080808)
                e.emit("mul.lo.u32", t, t, 30)
                e.emit("or.b32", x, x, t)
            return x

        if len(src) == 4:  # A: rows g and g+8 of K half 0 (a0, a1), then of half 1 (a2, a3)
            halves = [[spread(src[2 * h], False), spread(src[2 * h + 1], False),
                       spread(src[2 * h], True), spread(src[2 * h + 1], True)] for h in (0, 1)]
        else:  # B: one register a K half
            halves = [[spread(r, False), spread(r, True)] for r in src]
        _finish(op, rewriter, e, halves)


def _butterflies(e: fio.Emitter, lane: str, bank: str, pairs: list[list[str]], masks: tuple[int, ...]) -> None:
    """Swap, for each lane mask in turn, that lane bit with the slot bit of each register pair
    (lo, hi) in `pairs` (updated in place): a lane keeps the register whose slot bit equals its
    lane bit and trades the other with its partner across the mask (`shfl.sync.bfly`), so that
    afterwards the lane bit says which slot a value came from and the slot bit which lane. Each
    swap is its own inverse."""
    for mask in masks:
        bit, p = e.reg("b32"), e.reg("pred")
        e.emit("and.b32", bit, lane, mask)
        e.emit("setp.ne.u32", p, bit, 0)
        for pair in pairs:
            lo, hi = pair
            send, recv, new_lo, new_hi = (e.reg(bank) for _ in range(4))
            e.emit("selp.b32", send, lo, hi, p)  # the slot this lane gives away
            e.emit("shfl.sync.bfly.b32", recv, send, mask, 0x1F, 0xFFFFFFFF)
            e.emit("selp.b32", new_lo, recv, lo, p)
            e.emit("selp.b32", new_hi, hi, recv, p)
            pair[:] = [new_lo, new_hi]


@dataclass
class LowerColumnPairs(RewritePattern):
    """`warp.unpair_columns`: in each row (registers 0, 1 and 2, 3), lane t of a quad holds
    columns 4t .. 4t + 3 of the 16 (even c0, odd c0, even c1, odd c1: slot bits the column's
    bits 0 and 1, lane bits its bits 2 and 3) and must hold 2t, 2t + 1, 8 + 2t, 9 + 2t (slot
    bits the column's bits 0 and 3, lane bits 1 and 2): swapping lane bit 0 (lane mask 1) with
    slot bit 1, then lane bit 1 (mask 2) with it does it (`_butterflies`). `warp.pair_columns`
    swaps in the other order, from the column order's slots."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.UnpairColumnsOp | warp.PairColumnsOp, rewriter: PatternRewriter) -> None:
        ins = all_regs((op.first, op.second))
        if ins is None:
            return
        first, second = ins
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        frag = op.first.type
        assert isinstance(frag, warp.FragType)
        unpair = isinstance(op, warp.UnpairColumnsOp)
        outs: tuple[list[str], list[str]] = ([], [])
        rows = []
        for h in (0, 1):  # a row's four slots: (slot 0, slot 2) and (slot 1, slot 3) differ in slot bit 1
            if unpair:  # slot = the column's bits 0 and 1
                v = [first[2 * h], second[2 * h], first[2 * h + 1], second[2 * h + 1]]
            else:  # slot = the column's bits 0 and 3
                v = [first[2 * h], first[2 * h + 1], second[2 * h], second[2 * h + 1]]
            rows.append([[v[0], v[2]], [v[1], v[3]]])
        _butterflies(e, kernel.lane, _bank_of(frag), [p for r in rows for p in r], (1, 2) if unpair else (2, 1))
        for (p0, p1) in rows:
            v = [p0[0], p1[0], p0[1], p1[1]]
            if unpair:
                outs[0].extend(v[:2])
                outs[1].extend(v[2:])
            else:
                outs[0].extend(v[0::2])
                outs[1].extend(v[1::2])
        _finish(op, rewriter, e, list(outs))


@dataclass
class LowerRowPairs(RewritePattern):
    """`warp.unpair_rows`: lane 4g + t holds rows 2g (c0, c1) and 2g + 1 (c2, c3) of the 16 (slot
    bit the row's bit 0, lane bits 2..4 its bits 1..3) and must hold rows g and g + 8 (slot bit
    the row's bit 3, lane bits its bits 0..2): swapping the slot bit with lane bits 2, 3 and 4
    (masks 4, 8, 16) in turn rotates the row's bits into place (`_butterflies`, on the register
    pairs c0, c2 and c1, c3). `warp.pair_rows` swaps in the other order."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.UnpairRowsOp | warp.PairRowsOp, rewriter: PatternRewriter) -> None:
        src = regs(op.source)
        if src is None:
            return
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        frag = op.source.type
        assert isinstance(frag, warp.FragType)
        pairs = [[src[0], src[2]], [src[1], src[3]]]
        masks = (4, 8, 16) if isinstance(op, warp.UnpairRowsOp) else (16, 8, 4)
        _butterflies(e, kernel.lane, _bank_of(frag), pairs, masks)
        _finish(op, rewriter, e, [[pairs[0][0], pairs[1][0], pairs[0][1], pairs[1][1]]])


def accumulates_in_place(op: Operation, acc: SSAValue, regs: Sequence[str]) -> bool:
    """Whether `op` may write its result into the registers `regs` of its accumulator `acc`: this
    is its only use left, they are registers, and `acc` is not defined outside the loop `op` runs
    in (its next iteration would read it again: a zero accumulator made once for every block of
    attention's S)."""
    loop = op.parent_op()
    while loop is not None and not isinstance(loop, scf.ForOp):
        loop = loop.parent_op()
    return (acc.has_one_use() and all(r.startswith("%") for r in regs)
            and (loop is None or loop.is_ancestor(acc.owner)))


@dataclass
class LowerMma(RewritePattern):
    """`warp.mma`: one `mma` instruction; d reuses c's registers where it may
    (`accumulates_in_place`)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MmaOp, rewriter: PatternRewriter) -> None:
        groups = all_regs((op.a, op.b, op.c))
        extras = all_reg([x for x in (op.metadata, op.scale_a, op.scale_b) if x is not None])
        if groups is None or extras is None:
            return
        a, b, c = groups
        frag = op.c.type
        assert isinstance(frag, warp.FragType)
        e = fio.Emitter(self.state.kernel(op).regs)
        d = list(c) if accumulates_in_place(op, op.c, c) else e.reg_list(_bank_of(frag), len(c))
        extra: list[str] = []
        if op.metadata is not None:
            extra += [extras.pop(0), "0"]
        if op.scale_a is not None:
            extra += [extras[0], "{0, 0}", extras[1], "{0, 0}"]
        e.ops.append(ptx.MmaOp(frag.variant.opcode, d, a, b, c, extra))
        _finish(op, rewriter, e, [d])

