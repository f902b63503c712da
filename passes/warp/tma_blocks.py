"""`warp-tma-blocks`: a stage's TMA copies into side-by-side buffers of one swizzle span each become
one copy of a three-dimensional box (`warp.copy_tma`'s `blocks`).

A TMA swizzle spans at most 128 bytes, so a stage wider than that along its operand's contiguous
dimension (an N-major B of 256 f16 columns: four widths of 64) is kept as consecutive stages of
one buffer, a width each, and `warp-specialize` issues a `warp.copy_tma` for each. One copy of the
box (width, height, N widths) writes the same bytes to the same places: the stages lie back to
back, and the swizzle is a function of the shared address alone. The producer thread issues one
instruction where it issued N, and the TMA unit takes one request. Simulated on an H200 before it
was built (the kernels' PTX patched so, results/h200-2026-11-28-box3d-sim.csv), 2:4 sparse f16
with an N-major B, dense-equivalent TFLOP/s, two passes: 4096^3 926 / 900 against 921 / 912,
8192^3 1026 / 976 against 981 / 953, 4096x4096x11008 1002 / 1008 against 977 / 969.

A run merges where its copies are consecutive in one block (only `arith` ops between them), read
one window (argument, window, extent, thread, transposition, the indices other than the
contiguous one), fill one buffer at one barrier slot, are not multicast, and copy j of the run is
at stage s + j and at contiguous index c + j * width. The width must be a power of two (a
swizzle's span is) and c a multiple of it (`multiple_of`: a constant, a product with one factor
such a multiple, a sum of such), and the window's contiguous extent whole widths (the op's
verifier), so that the map's third dimension counts widths exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from tilemma.dialects import warp
from tilemma.dialects.warp_tma import TMA_MAX_BOX
from tilemma.passes.warp.index_facts import constant_step, multiple_of
from tilemma.passes.warp.op_runs import run_after


def _contiguous(op: warp.CopyTmaOp) -> int:
    """Which of the copy's (batch, row, col) indices runs along the window's contiguous dimension."""
    return 1 if op.transpose is not None else 2


def _continues(first: warp.CopyTmaOp, op: warp.CopyTmaOp, j: int) -> bool:
    """Whether `op` is copy j of the run `first` starts."""
    inner, width = _contiguous(first), first.dest.type.get_shape()[2]  # type: ignore[union-attr]
    alike = (op.ref is first.ref and op.dest is first.dest and op.bars is first.bars and op.slot is first.slot
             and all(op.indices[i] is first.indices[i] for i in range(3) if i != inner)
             and op.window == first.window and op.extent == first.extent and op.thread == first.thread
             and op.transpose == first.transpose and op.multicast is None and op.blocks is None)
    return alike and constant_step(first.stage, op.stage) == j and constant_step(first.indices[inner], op.indices[inner]) == j * width


def _run(first: warp.CopyTmaOp) -> list[warp.CopyTmaOp]:
    """The copies `first` merges with (itself first)."""
    width = first.dest.type.get_shape()[2]  # type: ignore[union-attr]
    if first.multicast is not None or first.blocks is not None or width & (width - 1) \
            or first.extent_values()[_contiguous(first)] % width \
            or not multiple_of(first.indices[_contiguous(first)], width):
        return [first]
    return run_after(first, TMA_MAX_BOX, lambda op, j: _continues(first, op, j))


def _erase_dead(values: list[SSAValue]) -> None:
    """Erase the ops behind `values` that are now dead (xDSL's `is_trivially_dead`), and theirs."""
    work = [v.owner for v in values]
    while work:
        op = work.pop()
        if isinstance(op, Operation) and op.parent is not None and is_trivially_dead(op):
            operands = list(op.operands)
            Rewriter.erase_op(op)
            work += [v.owner for v in operands]


@dataclass(frozen=True)
class WarpTmaBlocks(ModulePass):
    """Merge each run of TMA copies into side-by-side stages into one copy of N blocks (see the module)."""

    name = "warp-tma-blocks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for first in [o for o in op.walk() if isinstance(o, warp.CopyTmaOp)]:
            if first.parent is None:  # merged into an earlier one
                continue
            run = _run(first)
            if len(run) < 2:
                continue
            first.blocks = IntegerAttr(len(run), i64)
            for later in run[1:]:
                operands = list(later.operands)
                Rewriter.erase_op(later)
                _erase_dead(operands)
