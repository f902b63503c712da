"""`warp-split-tf32`: 3xTF32. A `warp.mma {split_tf32}` on f32 fragments becomes three tf32
mmas on hi/lo parts (`warp.split_tf32`), small terms first: lo*hi, hi*lo, then hi*hi, close to
f32 accuracy at three times the instructions (as MLIR's MmaSyncTF32Transform)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.dialects.builtin import Float32Type
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

from tilemma.dialects import warp
from tilemma.dialects.tile import element_type


class SplitTf32Mma(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.MmaOp, rewriter: PatternRewriter) -> None:
        if op.split_tf32 is None:
            return
        parts = []
        for value in (op.a, op.b):
            frag = value.type
            assert isinstance(frag, warp.FragType) and isinstance(frag.element, Float32Type)
            part = warp.FragType(frag.role, element_type("tf32"), frag.variant_attr)
            split = warp.SplitTf32Op(value, part)
            rewriter.insert(split)
            parts.append((split.hi, split.lo))
        (a_hi, a_lo), (b_hi, b_lo) = parts
        first = warp.MmaOp(a_lo, b_hi, op.c)
        second = warp.MmaOp(a_hi, b_lo, first.result)
        last = warp.MmaOp(a_hi, b_hi, second.result)
        rewriter.replace(op, [first, second, last], [last.result])


@dataclass(frozen=True)
class SplitTf32(ModulePass):
    name = "warp-split-tf32"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if PatternRewriteWalker(SplitTf32Mma(), apply_recursively=False).rewrite_module(op):
            # one split per fragment, however many mmas use it
            CommonSubexpressionElimination().apply(ctx, op)
