"""The fragment layouts of one selected instruction, and the warp-level tile it computes.

m8n8k4 with .f16 runs four 8x8x4 products on a warp's quad-pairs; tilemma uses it as one
16x16x4 warp-level product (the fragment table's `warp16` view). Every other shape computes one
m x n x k product per warp.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilemma.compiler import fragments
from tilemma.compiler.isa import MmaVariant


@dataclass(frozen=True)
class InstructionLayouts:
    a: fragments.FragmentLayout
    b: fragments.FragmentLayout
    c: fragments.FragmentLayout

    @property
    def warp_shape(self) -> tuple[int, int, int]:
        """(M, N, K) of the product one warp computes per instruction."""
        return self.a.rows, self.b.cols, self.a.cols


def instruction_layouts(v: MmaVariant) -> InstructionLayouts:
    view = "warp16" if v.shape == "m8n8k4" and v.atype == "f16" else None
    return InstructionLayouts(
        fragments.layout(v.shape, "a", v.atype, major=v.alayout, view=view),
        fragments.layout(v.shape, "b", v.btype, major=v.blayout, view=view),
        fragments.layout(v.shape, "c", v.ctype, view=view),
    )
