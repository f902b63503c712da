"""The xDSL universe entry point: makes plain `xdsl-opt` (and any xDSL tool) know tilemma.

Registered in pyproject under `[project.entry-points."xdsl.universe"]`; every entry is a lazy
factory so that loading the universe costs nothing until a dialect, pass or target is used.
"""

from xdsl.universe import Universe


def _tile():
    from tilemma.dialects.tile import Tile

    return Tile


def _ptx():
    from tilemma.dialects.ptx import PTX

    return PTX


def _select_mma():
    from tilemma.passes.select_mma import SelectMma

    return SelectMma


def _tile_warps():
    from tilemma.passes.tile_warps import TileWarps

    return TileWarps


def _tile_to_ptx():
    from tilemma.passes.tile_to_ptx import TileToPtx

    return TileToPtx


def _ptx_target():
    from tilemma.dialects.ptx import PTXTarget

    return PTXTarget


DIALECTS = {"tile": _tile, "ptx": _ptx}
PASSES = {
    "tile-select-mma": _select_mma,
    "tile-tile-warps": _tile_warps,
    "tile-to-ptx": _tile_to_ptx,
}
TARGETS = {"ptx": _ptx_target}

TILEMMA_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES, all_targets=TARGETS)
