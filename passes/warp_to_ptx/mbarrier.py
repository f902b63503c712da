"""A warp-specialized kernel's mbarriers and roles in PTX (`dialects/warp_mbarrier.py`): each barrier
is 8 bytes at the array's shared address + 8 i; `mbarrier.init` by thread 0, `mbarrier.arrive`
(`cp.async.mbarrier.arrive.noinc` once a thread's copies land),
a `mbarrier.try_wait.parity` retry loop, `ret` for the threads a role ends and `setmaxnreg`."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.dialects import ptx, warp
from tilemma.dialects.warp_mbarrier import MBARRIER_BYTES
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.state import LoweringState, _finish, reg


def _barrier(e: fio.Emitter, bars: str, index: str) -> str:
    """The shared address of barrier `index` of the array at `bars`."""
    if index.isdigit():
        return f"[{bars}+{int(index) * MBARRIER_BYTES}]" if int(index) else f"[{bars}]"
    at = e.reg("b32")
    e.emit("mad.lo.u32", at, index, MBARRIER_BYTES, bars)
    return f"[{at}]"


@dataclass
class LowerMbarrierInit(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MbarrierInitOp, rewriter: PatternRewriter) -> None:
        bars = reg(op.bars)
        if bars is None:
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        tid, first = e.reg("b32"), e.reg("pred")
        e.emit("mov.u32", tid, "%tid.x")
        e.emit("setp.eq.u32", first, tid, 0)
        for i in range(op.bars.type.get_shape()[0]):  # type: ignore[union-attr]
            e.emit("mbarrier.init.shared::cta.b64", _barrier(e, e.in_register(bars), str(i)), op.count.value.data,
                   guard=first)
        _finish(op, rewriter, e)


@dataclass
class LowerMbarrierArrive(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MbarrierArriveOp, rewriter: PatternRewriter) -> None:
        bars, index = reg(op.bars), reg(op.index)
        if bars is None or index is None:
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        state = e.reg("b64")  # the arrival's state token: not used
        e.emit("mbarrier.arrive.shared::cta.b64", state, _barrier(e, e.in_register(bars), index))
        _finish(op, rewriter, e)


@dataclass
class LowerAsyncArrive(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.AsyncArriveOp, rewriter: PatternRewriter) -> None:
        bars, index = reg(op.bars), reg(op.index)
        if bars is None or index is None:
            return
        e = fio.Emitter(self.state.kernel(op).regs)
        e.emit("cp.async.mbarrier.arrive.noinc.shared::cta.b64", _barrier(e, e.in_register(bars), index))
        _finish(op, rewriter, e)


@dataclass
class LowerMbarrierWait(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MbarrierWaitOp, rewriter: PatternRewriter) -> None:
        bars, index, parity = reg(op.bars), reg(op.index), reg(op.parity)
        if bars is None or index is None or parity is None:
            return
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        at = _barrier(e, e.in_register(bars), index)
        again, done = kernel.regs.label("wait"), e.reg("pred")
        e.ops.append(ptx.LabelOp(again))
        e.emit("mbarrier.try_wait.parity.shared::cta.b64", done, at, parity)
        e.emit("bra.uni", again, guard=f"!{done}")
        token = ptx.RegsOp([], op.token.type)
        e.ops.append(token)
        rewriter.replace(op, e.ops, [token.results[0]])


@dataclass
class LowerRetire(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.RetireOp, rewriter: PatternRewriter) -> None:
        cond = reg(op.cond)
        if cond is None:
            return
        rewriter.replace(op, ptx.InstOp("ret", [], guard=cond), [])


@dataclass
class LowerSetMaxRegisters(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.SetMaxRegistersOp, rewriter: PatternRewriter) -> None:
        how = "inc" if op.increase is not None else "dec"
        rewriter.replace(op, ptx.InstOp(f"setmaxnreg.{how}.sync.aligned.u32", [str(op.count.value.data)]), [])
