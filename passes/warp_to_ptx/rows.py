"""`warp-to-ptx` patterns for reading an accumulator again: `warp.row_reduce` (a lane's values
of each row, then `shfl.sync.bfly` over the lanes sharing the row), `warp.mask` (a value per
element by its tile coordinates) and `warp.to_lhs` (no instruction: the A fragment is the
accumulators' registers, in the order `acc_reuse.lhs_registers` proved)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.compiler.layouts import fragments
from tilemma.dialects import warp
from tilemma.dialects.ptx_builder import f32_literal
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.state import LoweringState, _finish, all_reg, all_regs, regs

_COMBINE = {"max": "max.f32", "add": "add.rn.f32"}


@dataclass
class LowerRowReduce(RewritePattern):
    """`warp.row_reduce`: per row slot, the lane's values in fragment then value order, then one
    butterfly step per lane mask of the row's group (every lane ends with the same result)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.RowReduceOp, rewriter: PatternRewriter) -> None:
        inputs = all_regs(op.frags)
        if inputs is None:
            return
        assert isinstance(op.result.type, warp.RowsType)
        slots = op.result.type.slots()
        combine = _COMBINE[op.kind.data]
        e = fio.Emitter(self.state.kernel(op).regs)
        out = []
        for s in range(slots.count):
            acc = None
            for r in inputs:
                for v, slot in enumerate(slots.slot):
                    if slot != s:
                        continue
                    if acc is None:
                        acc = e.reg("f32")
                        e.emit("mov.f32", acc, r[v])
                    else:
                        e.emit(combine, acc, acc, r[v])
            assert acc is not None
            for mask in slots.masks:
                other = e.reg("f32")
                e.emit("shfl.sync.bfly.b32", other, acc, mask, 0x1F, "0xffffffff")
                e.emit(combine, acc, acc, other)
            out.append(acc)
        _finish(op, rewriter, e, [out])


@dataclass
class LowerMask(RewritePattern):
    """`warp.mask`: each value's column offset against, computed once a mask from the fragment's
    origin + the lane's linear part, the room left before the limit and the diagonal's distance
    from its row offset: one compare and one select a value."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MaskOp, rewriter: PatternRewriter) -> None:
        src = regs(op.source)
        index = all_reg([op.row, op.col, *([op.limit] if op.limit is not None else [])])
        if src is None or index is None:
            return
        kernel = self.state.kernel(op)
        frag = op.source.type
        assert isinstance(frag, warp.FragType)
        lin = fragments.linear_form(frag.layout())
        lane_row, lane_col = kernel.thread_invariant(
            ("mask-lane", lin.row_w, lin.col_w),
            lambda e: [e.lane_linear(kernel.lane, lin.row_w, "0"), e.lane_linear(kernel.lane, lin.col_w, "0")])
        e = fio.Emitter(kernel.regs)
        row0, col0 = e.reg("b32"), e.reg("b32")
        e.emit("add.u32", row0, index[0], lane_row)
        e.emit("add.u32", col0, index[1], lane_col)
        # what each value's column offset is compared with, once: the room left before the limit
        # and, per row offset, the diagonal's distance (two instructions a value, not four)
        room = None
        if op.limit is not None:
            room = e.reg("b32")
            e.emit("sub.s32", room, index[2], col0)
        diagonal: dict[int, str] = {}
        if op.causal is not None:
            for r in sorted(set(lin.row_off)):
                diagonal[r] = e.reg("b32")
                e.emit("sub.s32", diagonal[r], row0, col0)
                if r:
                    e.emit("add.s32", diagonal[r], diagonal[r], r)
        fill = f32_literal(op.value.value.data)
        out = []
        for v, r in enumerate(src):
            masked = None
            if room is not None:  # col0 + offset >= limit
                masked = e.reg("pred")
                e.emit("setp.le.s32", masked, room, lin.col_off[v])
            if op.causal is not None:  # col0 + offset > row0 + row offset
                above = e.reg("pred")
                e.emit("setp.lt.s32", above, diagonal[lin.row_off[v]], lin.col_off[v])
                if masked is not None:  # past the limit or above the diagonal
                    e.emit("or.pred", above, masked, above)
                masked = above
            d = e.reg("f32")
            e.emit("selp.f32", d, fill, r, masked)
            out.append(d)
        _finish(op, rewriter, e, [out])


@dataclass
class LowerToLhs(RewritePattern):
    """`warp.to_lhs`: the A fragment's registers are the sources', as the verifier proved."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.ToLhsOp, rewriter: PatternRewriter) -> None:
        sources = all_regs(op.sources)
        if sources is None:
            return
        _finish(op, rewriter, fio.Emitter(self.state.kernel(op).regs),
                [[sources[t][r] for t, r in op.registers()]])
