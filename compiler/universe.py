"""The xDSL universe entry point: makes plain `xdsl-opt` (and any xDSL tool) know tilemma.

Registered in pyproject under `[project.entry-points."xdsl.universe"]`; every entry is a lazy
factory so that loading the universe costs nothing until a dialect, pass or target is used.
"""

import functools
from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect
from xdsl.universe import Universe


def _tile():
    from tilemma.dialects.tile import Tile

    return Tile


def _ptx():
    from tilemma.dialects.ptx import PTX

    return PTX


def _linalg_to_tile():
    from tilemma.passes.tile.linalg_to_tile import LinalgToTile

    return LinalgToTile


def _select_mma():
    from tilemma.passes.tile.select_mma import SelectMma

    return SelectMma


def _plan():
    from tilemma.passes.tile.plan import TilePlan

    return TilePlan


def _transpose_first():
    from tilemma.passes.tile.transpose_first import TileTransposeFirst

    return TileTransposeFirst


def _transpose_product():
    from tilemma.passes.tile.transpose_product import TileTransposeProduct

    return TileTransposeProduct


def _attention():
    from tilemma.passes.tile.attention import TileAttention

    return TileAttention


def _distribute():
    from tilemma.passes.tile.distribute import TileDistribute

    return TileDistribute


def _distribute_epilogue():
    from tilemma.passes.tile.distribute_epilogue import TileDistributeEpilogue

    return TileDistributeEpilogue


def _stage_shared():
    from tilemma.passes.warp.stage_shared import WarpStageShared

    return WarpStageShared


def _pipeline():
    from tilemma.passes.warp.pipeline import WarpPipeline

    return WarpPipeline


def _specialize():
    from tilemma.passes.warp.specialize import WarpSpecialize

    return WarpSpecialize


def _tma_blocks():
    from tilemma.passes.warp.tma_blocks import WarpTmaBlocks

    return WarpTmaBlocks


def _stage_stores():
    from tilemma.passes.warp.stage_stores import WarpStageStores

    return WarpStageStores


def _unroll_sparse():
    from tilemma.passes.warp.unroll_sparse import WarpUnrollSparse

    return WarpUnrollSparse


def _prefetch():
    from tilemma.passes.warp.prefetch import WarpPrefetchFragments

    return WarpPrefetchFragments


def _tile_to_warp():
    from tilemma.passes.tile_to_warp import TileToWarp

    return TileToWarp


def _widen_int4():
    from tilemma.passes.warp.widen_int4 import WarpWidenInt4

    return WarpWidenInt4


def _warp():
    from tilemma.dialects.warp import Warp

    return Warp


def _split_tf32():
    from tilemma.passes.warp.split_tf32 import SplitTf32

    return SplitTf32


def _swizzle_shared():
    from tilemma.passes.warp.swizzle_shared import SwizzleShared

    return SwizzleShared


def _warp_to_ptx():
    from tilemma.passes.warp_to_ptx.lower import WarpToPtx

    return WarpToPtx


def _ptx_target():
    from tilemma.dialects.ptx import PTXTarget

    return PTXTarget


def _linalg():
    from tilemma.passes.tile.upstream_dialects import LINALG

    return LINALG


def _memref():
    from tilemma.passes.tile.upstream_dialects import MEMREF

    return MEMREF


DIALECTS = {"tile": _tile, "warp": _warp, "ptx": _ptx}
# xDSL dialects every tool loads in a corrected form (`passes/tile/upstream_dialects.py`: linalg
# with MLIR's mixed-precision matmul body, its `indexing_maps` syntax and linalg.batch_matmul;
# memref.copy's custom syntax).
# Not in TILEMMA_UNIVERSE (the multiverse refuses two universes naming one dialect): loading
# this entry point puts them in xDSL's own universe instead, so plain `xdsl-opt` with tilemma
# installed parses `linalg.matmul ins(f16, f16) outs(f32)` as MLIR does. The ops are xDSL's
# IRDL definitions (subclasses, same names); only their bodies and syntax differ.
REPLACED_DIALECTS = {"linalg": _linalg, "memref": _memref}
PASSES = {
    "linalg-to-tile": _linalg_to_tile,
    "tile-select-mma": _select_mma,
    "tile-attention": _attention,
    "tile-transpose-product": _transpose_product,
    "tile-transpose-first": _transpose_first,
    "tile-plan": _plan,
    "tile-distribute": _distribute,
    "tile-distribute-epilogue": _distribute_epilogue,
    "warp-stage-shared": _stage_shared,
    "warp-pipeline": _pipeline,
    "warp-specialize": _specialize,
    "warp-tma-blocks": _tma_blocks,
    "warp-stage-stores": _stage_stores,
    "warp-unroll-sparse": _unroll_sparse,
    "warp-prefetch-fragments": _prefetch,
    "warp-widen-int4": _widen_int4,
    "tile-to-warp": _tile_to_warp,
    "warp-swizzle-shared": _swizzle_shared,
    "warp-split-tf32": _split_tf32,
    "warp-to-ptx": _warp_to_ptx,
}
TARGETS = {"ptx": _ptx_target}

TILEMMA_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES, all_targets=TARGETS)


def _correct_xdsl_universe() -> None:
    from xdsl.universe import XDSL_UNIVERSE

    XDSL_UNIVERSE.all_dialects.update(REPLACED_DIALECTS)


_correct_xdsl_universe()


@functools.cache
def _all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Every installed universe's dialects and tilemma's, read once a process: the entry-point
    scan costs about 25 ms, and a compile makes three contexts."""
    return {**Universe.get_multiverse().all_dialects, **DIALECTS, **REPLACED_DIALECTS}


def make_context() -> Context:
    """The one context both tools parse with: every dialect xDSL knows (loaded lazily, on
    first use) and tilemma's, also when running from a tree whose entry points are not
    installed. So `tilemma compile` takes whatever `tilemma-opt` takes (e.g. `arith.constant`)."""
    ctx = Context()
    for name, factory in _all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx
