"""`warp-widen-int4`: 4-bit integer mmas as the 8-bit mmas the target runs fast.

Where `#warp.schedule` has `widen` (select-mma's choice: s4/u4 on sm_90, whose m16n8k64 mma is
emulated), the staged kernel reads its operands as stored, 4-bit m16n8k64 fragments, and
multiplies them with that instruction. This pass replaces each run of such mmas (the mmas of
one K step, consecutive in the block) by `warp.widen` of each distinct A and B fragment (two
8-bit fragments each, the K halves, with K permuted alike in A and B) and, per half, the same
mmas on the `widen` instruction, chained through the accumulators: the widening right before
the mmas that use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tilemma.dialects import tile, warp
from tilemma.dialects.schedule import ScheduleAttr


def _runs(block: Block, native) -> list[list[warp.MmaOp]]:
    """Runs of consecutive mmas of the `native` (4-bit) instruction in a block, each one K
    step: a run ends where an mma accumulates onto the result of one in it (the next step)."""
    runs: list[list[warp.MmaOp]] = []
    current: list[warp.MmaOp] = []
    for op in block.ops:
        if isinstance(op, warp.MmaOp) and op.a.type.variant == native:
            if current and op.c.owner in current:
                runs.append(current)
                current = []
            current.append(op)
            continue
        if current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def _widen_run(run: list[warp.MmaOp], target: warp.VariantAttr) -> None:
    def frag(value: SSAValue, role: warp.Operand) -> warp.FragType:
        element = tile.element_type(tile.INT4_WIDENED[tile.element_name(value.type.element)])
        return warp.FragType(role, element, target)

    new: list = []
    halves: dict[SSAValue, list[SSAValue]] = {}
    for role, operands in ((warp.Operand.A, [m.a for m in run]), (warp.Operand.B, [m.b for m in run])):
        for v in dict.fromkeys(operands):
            op = warp.WidenOp(v, frag(v, role))
            new.append(op)
            halves[v] = list(op.results)
    accs = [m.c for m in run]
    for h in (0, 1):
        for n, m in enumerate(run):
            op = warp.MmaOp(halves[m.a][h], halves[m.b][h], accs[n])
            new.append(op)
            accs[n] = op.result
    Rewriter.insert_op(new, InsertPoint.before(run[0]))
    for m, acc in zip(run, accs):
        m.result.replace_all_uses_with(acc)
    for m in run:
        Rewriter.erase_op(m)


def _retype_accumulators(kernel: func.FuncOp, target: warp.VariantAttr) -> None:
    """The accumulators (C loads, constants, loop-carried values, D stores) become fragments of
    the 8-bit instruction: the same m16n8 layout, now typed for the mmas that update them."""
    values = [v for o in kernel.walk() for v in o.results]
    values += [a for o in kernel.walk() for r in o.regions for b in r.blocks for a in b.args]
    for v in values:
        t = v.type
        if isinstance(t, warp.FragType) and t.role == warp.Operand.ACC and t.variant_attr != target:
            Rewriter.replace_value_with_new_type(v, warp.FragType(t.role, t.element, target))


@dataclass(frozen=True)
class WarpWidenInt4(ModulePass):
    """Widen the 4-bit mmas of every kernel whose `#warp.schedule` says `widen`."""

    name = "warp-widen-int4"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            attr = kernel.attributes.get("warp.schedule")
            if not isinstance(attr, ScheduleAttr) or attr.schedule.widen is None or "warp.grid" not in kernel.attributes:
                continue
            target = warp.VariantAttr(attr.schedule.widen)
            mmas = [o for o in kernel.walk() if isinstance(o, warp.MmaOp)]
            natives = {m.a.type.variant for m in mmas if m.a.type.variant_attr != target}
            _retype_accumulators(kernel, target)
            blocks = {m.parent_block() for m in mmas}
            for native in natives:
                for block in blocks:
                    for run in _runs(block, native):
                        _widen_run(run, target)
