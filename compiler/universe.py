"""The xDSL universe entry point: makes plain `xdsl-opt` (and any xDSL tool) know tilemma.

Registered in pyproject under `[project.entry-points."xdsl.universe"]`; every entry is a lazy
factory so that loading the universe costs nothing until a dialect, pass or target is used.
"""

from xdsl.universe import Universe


def _tile():
    from tilemma.dialects.tile import Tile

    return Tile


DIALECTS = {"tile": _tile}
PASSES: dict = {}
TARGETS: dict = {}

TILEMMA_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES, all_targets=TARGETS)
