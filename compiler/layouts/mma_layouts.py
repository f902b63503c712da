"""The fragment layouts of one selected instruction, and the warp-level tile it computes.

m8n8k4 with .f16 runs four 8x8x4 products on a warp's quad-pairs; tilemma uses it as one
16x16x4 warp-level product (the fragment table's `warp16` view). Every other shape computes one
m x n x k product per warp. For `mma.sp` the A layout is that of the compressed M x K/2 operand
(`sparse_fragments`), so K comes from B.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilemma.compiler.layouts import fragments, sparse_fragments
from tilemma.compiler.core.isa import MmaVariant


@dataclass(frozen=True)
class InstructionLayouts:
    a: fragments.FragmentLayout
    b: fragments.FragmentLayout
    c: fragments.FragmentLayout

    @property
    def warp_shape(self) -> tuple[int, int, int]:
        """(M, N, K) of the product one warp computes per instruction."""
        return self.a.rows, self.b.cols, self.b.rows


def instruction_layouts(v: MmaVariant) -> InstructionLayouts:
    if v.sparse:
        return InstructionLayouts(
            sparse_fragments.compressed_a_layout(v.shape, v.atype),
            sparse_fragments.b_layout(v.shape, v.btype),
            sparse_fragments.accumulator_layout(v.shape, v.ctype),
        )
    view = "warp16" if v.shape == "m8n8k4" and v.atype == "f16" else None
    return InstructionLayouts(
        fragments.layout(v.shape, "a", v.atype, major=v.alayout, view=view),
        fragments.layout(v.shape, "b", v.btype, major=v.blayout, view=view),
        fragments.layout(v.shape, "c", v.ctype, view=view),
    )
