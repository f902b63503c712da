"""`warp.split_k_publish` and `warp.split_k_sum` in PTX: the CTAs that share an output tile's K
meet in a workspace.

Every thread stores its accumulator registers into the tile's and split's slab of the workspace
(register r of thread t at word r * T + t, so a warp's stores are coalesced), fences them
(`fence.acq_rel.gpu`) and meets the CTA at a barrier; thread 0 then counts the CTA in the tile's
counter (`atom.global.add.u32`), and `bar.red.or.pred` hands every thread whether this CTA was the
last of the tile's `splits` to arrive. The others leave (`ret`). The last one sets the counter back
to 0 and fences again (`warp.split_k_publish`); then (C loaded before or after that) it adds the
slabs to C in split order, reading them at L2 (`ld.global.cg`: the other CTAs wrote them from other
SMs), so that the sum is the same whichever CTA finishes last (`warp.split_k_sum`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.dialects import warp
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.state import LoweringState, _bank_of, _finish, _ptx_type, all_regs, reg

# Per accumulator element: the add that rounds (f32, f64) or wraps (s32), and the load/store type.
_ADD = {"f32": "add.rn.f32", "f64": "add.rn.f64", "s32": "add.s32"}
_MEM = {"f32": "f32", "f64": "f64", "s32": "b32"}


def _slab_address(e: fio.Emitter, workspace: str, tile: str, slab: str | None, splits: int, per_slab: int,
                  size: int) -> tuple[str, str]:
    """(%tid.x, the address of the thread's first word in the tile's slab `slab`, its first slab
    where None): slab (tile * splits + slab) of `per_slab` words of `size` bytes, register r of
    thread t at word r * T + t of it."""
    tid, at = e.reg("b32"), e.reg("b32")
    e.emit("mov.u32", tid, "%tid.x")
    e.emit("mul.lo.u32", at, e.in_register(tile), splits)
    if slab is not None:
        e.emit("add.u32", at, at, e.in_register(slab))
    e.emit("mul.lo.u32", at, at, per_slab)
    e.emit("add.u32", at, at, tid)
    address, words = e.reg("b64"), e.reg("b64")
    e.emit("mul.wide.u32", words, at, size)
    e.emit("add.s64", address, workspace, words)
    return tid, address


@dataclass
class LowerSplitKPublish(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.SplitKPublishOp, rewriter: PatternRewriter) -> None:
        partials = all_regs(op.partials)
        split, tile, workspace, counters = (reg(v) for v in (op.split, op.tile, op.workspace, op.counters))
        if partials is None or None in (split, tile, workspace, counters):
            return
        kernel = self.state.kernel(op)
        flat = [r for frag_regs in partials for r in frag_regs]
        t = _ptx_type(op.partials[0].type)  # type: ignore[arg-type]
        size, threads, splits = (8 if t == "f64" else 4), kernel_threads(op), op.splits.value.data
        e = fio.Emitter(kernel.regs)
        e.comment(f"split-K: {splits} CTAs meet in the workspace; the last adds the partials in split order")
        tid, mine = _slab_address(e, workspace, tile, split, splits, len(flat) * threads, size)  # type: ignore[arg-type]
        for i, r in enumerate(flat):
            e.emit(f"st.global.{_MEM[t]}", f"[{mine}+{i * threads * size}]", r)
        e.emit("fence.acq_rel.gpu")
        e.emit("bar.sync", 0)
        leader, last = e.reg("pred"), e.reg("pred")
        counter, arrived, word = e.reg("b64"), e.reg("b32"), e.reg("b64")
        e.emit("setp.eq.u32", leader, tid, 0)
        e.emit("mul.wide.u32", word, e.in_register(tile), 4)  # type: ignore[arg-type]
        e.emit("add.s64", counter, counters, word)
        e.emit("mov.u32", arrived, 0)
        e.emit("atom.global.add.u32", arrived, f"[{counter}]", 1, guard=leader)
        e.emit("setp.eq.u32", last, arrived, splits - 1)
        e.emit("and.pred", last, last, leader)
        e.emit("bar.red.or.pred", last, 0, last)
        e.emit("ret", guard=f"!{last}")
        e.emit("st.global.u32", f"[{counter}]", 0, guard=leader)  # ready for the next launch
        e.emit("fence.acq_rel.gpu")
        _finish(op, rewriter, e)


@dataclass
class LowerSplitKSum(RewritePattern):
    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.SplitKSumOp, rewriter: PatternRewriter) -> None:
        init, tile, workspace = all_regs(op.init), reg(op.tile), reg(op.workspace)
        if init is None or tile is None or workspace is None:
            return
        kernel = self.state.kernel(op)
        frag = op.init[0].type
        assert isinstance(frag, warp.FragType)
        t, bank = _ptx_type(frag), _bank_of(frag)
        flat_init = [r for frag_regs in init for r in frag_regs]
        size, threads, splits = (8 if t == "f64" else 4), kernel_threads(op), op.splits.value.data
        slab = len(flat_init) * threads * size  # one split's bytes of one tile
        e = fio.Emitter(kernel.regs)
        _, base = _slab_address(e, workspace, tile, None, splits, len(flat_init) * threads, size)
        out = [[e.reg(bank) for _ in frag_regs] for frag_regs in init]
        part = e.reg(bank)
        for i, (r, c) in enumerate(zip((r for o in out for r in o), flat_init)):
            e.emit(f"mov.{bank}", r, c)
            for s in range(splits):
                e.emit(f"ld.global.cg.{_MEM[t]}", part, f"[{base}+{s * slab + i * threads * size}]")
                e.emit(_ADD[t], r, r, part)
        _finish(op, rewriter, e, out)


def kernel_threads(op) -> int:
    """Threads of the op's CTA (`warp.block` of its kernel, one-dimensional)."""
    parent = op.parent_op()
    while not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    return parent.attributes["warp.block"].get_values()[0]
