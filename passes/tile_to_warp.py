"""`tile-to-warp`: the whole tile -> warp chain as one pass, for command lines and tests.

It runs, in order, `tile-transpose-product` (where the tiling is left to `tile-plan`),
`tile-transpose-first` (the same, or where its option forces it), `tile-plan` (with this pass's
options), `tile-distribute`, `tile-distribute-epilogue`, `warp-stage-shared`, `warp-pipeline`, `warp-specialize`, `warp-tma-blocks`, `warp-unroll-sparse`,
`warp-prefetch-fragments` and `warp-widen-int4`: each does one thing and has its own lit tests;
this is only their composition, as MLIR registers pass pipelines. `tilemma compile` runs the same
passes one by one (`--print-ir-after-all` shows each level).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tilemma.passes.tile.distribute import TileDistribute
from tilemma.passes.tile.distribute_epilogue import TileDistributeEpilogue
from tilemma.passes.tile.plan import TilePlan
from tilemma.passes.tile.transpose_first import TileTransposeFirst
from tilemma.passes.tile.transpose_product import TileTransposeProduct
from tilemma.passes.warp.pipeline import WarpPipeline
from tilemma.passes.warp.prefetch import WarpPrefetchFragments
from tilemma.passes.warp.specialize import WarpSpecialize
from tilemma.passes.warp.stage_shared import WarpStageShared
from tilemma.passes.warp.tma_blocks import WarpTmaBlocks
from tilemma.passes.warp.unroll_sparse import WarpUnrollSparse
from tilemma.passes.warp.widen_int4 import WarpWidenInt4


def chain(plan: TilePlan, transpose_first: int = -1) -> list[ModulePass]:
    """The passes from tile IR to the finished warp-level kernel (`transpose_first`:
    `tile-transpose-first`'s option)."""
    first = plan.automatic if transpose_first == -1 else transpose_first == 1
    return [*([TileTransposeProduct(plan.tune_cache)] if plan.automatic else []),
            *([TileTransposeFirst(transpose_first, plan.tune_cache)] if first else []), plan, TileDistribute(),
            TileDistributeEpilogue(), WarpStageShared(), WarpPipeline(), WarpSpecialize(), WarpTmaBlocks(),
            WarpUnrollSparse(), WarpPrefetchFragments(), WarpWidenInt4()]


@dataclass(frozen=True)
class TileToWarp(ModulePass):
    """Options: those of `tile-plan` (`warps`, `warp-tile`, `stages`, `stage-k`, `tune-cache`, `split-k`,
    `pair-bytes`, `wgmma`, `producers`, `tma`, `cluster`, `persistent`, `shared-transpose`) and
    `tile-transpose-first`'s `transpose-first`."""

    name = "tile-to-warp"

    warps: str = ""
    warp_tile: str = ""
    stages: int = -1
    stage_k: int = 0
    tune_cache: str = ""
    split_k: int = 0
    pair_bytes: bool = True
    wgmma: bool = False
    producers: int = -1
    tma: int = -1
    cluster: int = -1
    persistent: int = -1
    shared_transpose: bool = True
    transpose_first: int = -1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for p in chain(TilePlan(self.warps, self.warp_tile, self.stages, self.stage_k, self.tune_cache, self.split_k,
                                 self.pair_bytes, self.wgmma, self.producers, self.tma, self.cluster,
                                 self.persistent, self.shared_transpose), self.transpose_first):
            p.apply(ctx, op)
