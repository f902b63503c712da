"""`tile-tile-warps`: splits each selected tile.mma over a grid of CTAs, warps and instructions.

A warp computes a warp tile of RM x RN instructions; a CTA holds WM x WN warps; the grid covers
the M x N tile (rounded up: the lowering predicates the ragged edge) and the batch. The choice is
recorded on the op as `tiling`, which tile-to-ptx follows.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, DictionaryAttr, ModuleOp, i64
from xdsl.passes import ModulePass

from tilemma.compiler.isa import parse_opcode
from tilemma.compiler.mma_layouts import instruction_layouts
from tilemma.dialects import tile
from tilemma.passes.errors import LoweringError


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _pair(text: str, option: str) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        x, y = (int(p) for p in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"tile-tile-warps: {option} must look like 2x4, got {text!r}") from None
    if x <= 0 or y <= 0:
        raise ValueError(f"tile-tile-warps: {option} must be positive, got {text!r}")
    return x, y


@dataclass(frozen=True)
class TileWarps(ModulePass):
    """Options: `warps` (WMxWN warps per CTA, default up to 2x2) and `warp-tile` (RMxRN
    instructions per warp, default up to 2 x (32 / instruction N)), both clamped to the problem."""

    name = "tile-tile-warps"

    warps: str = ""
    warp_tile: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        warps, warp_tile = _pair(self.warps, "warps"), _pair(self.warp_tile, "warp-tile")
        for mma in [o for o in op.walk() if isinstance(o, tile.MMA_OPS)]:
            if mma.variant is None:
                raise LoweringError(mma, "run tile-select-mma before tile-tile-warps")
            mi, ni, ki = instruction_layouts(parse_opcode(mma.variant.data)).warp_shape
            shape = mma.acc.type.get_shape()  # type: ignore[union-attr]
            batch = shape[0] if len(shape) == 3 else 1
            m, n = shape[-2:]
            rm, rn = warp_tile or (min(2, _ceil(m, mi)), min(max(1, 32 // ni), _ceil(n, ni)))
            wm, wn = warps or (min(2, _ceil(m, rm * mi)), min(2, _ceil(n, rn * ni)))
            grid = (_ceil(n, wn * rn * ni), _ceil(m, wm * rm * mi), batch)
            if grid[2] > 65535 or grid[1] > 65535:
                raise LoweringError(mma, f"grid {grid} exceeds the CUDA limit of 65535 in y/z")
            mma.tiling = DictionaryAttr(
                {
                    "instr": _ints((mi, ni, ki)),
                    "warp_tile": _ints((rm, rn)),
                    "warps": _ints((wm, wn)),
                    "grid": _ints(grid),
                    "block": _ints((32 * wm * wn, 1, 1)),
                }
            )


def _ints(values) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))
