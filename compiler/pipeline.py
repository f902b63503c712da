"""The whole compiler as one call: tile IR text -> verified IR -> passes -> PTX per kernel.

Used by `tilemma compile` and `tilemma run`; `tilemma-opt` runs the same passes one by one. Every
error that is the input's fault comes out as a `LocatedVerifyError` pointing at the source.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tilemma.compiler.diagnostics import LocatedParser, LocatedVerifyError, verify_located
from tilemma.compiler.memref_layout import strided_layout
from tilemma.dialects import ptx, tile
from tilemma.passes.errors import LoweringError
from tilemma.passes.gemm_kernel import GemmKernel, read_kernel
from tilemma.passes.select_mma import SelectMma
from tilemma.passes.tile_to_ptx import TileToPtx
from tilemma.passes.tile_warps import TileWarps


def make_context() -> Context:
    ctx = Context()
    for dialect in (builtin.Builtin, func.Func, tile.Tile, ptx.PTX):
        ctx.load_dialect(dialect)
    return ctx


@dataclass(frozen=True)
class CompileOptions:
    sm: str = "90"
    ptx: str = ""
    f32_precision: str = "exact"
    allow_slow: bool = False
    warps: str = ""
    warp_tile: str = ""
    sparse_form: str = "ordered"

    def passes(self) -> list[ModulePass]:
        return [
            SelectMma(self.sm, self.ptx, self.f32_precision, self.allow_slow, self.sparse_form),
            TileWarps(self.warps, self.warp_tile),
            TileToPtx(),
        ]


@dataclass(frozen=True)
class CompiledKernel:
    name: str
    ptx: str  # a complete PTX module holding this one kernel
    variant: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    gemm: GemmKernel  # what the kernel computes, read from the tile IR before lowering
    arg_sizes: tuple[int, ...]  # elements of each memref argument, in order


def parse(text: str, name: str) -> tuple[ModuleOp, dict]:
    """Parse and verify tile IR, keeping each operation's source position."""
    if not text.strip():
        raise ValueError(f"{name}: empty input: expected MLIR operations")
    parser = LocatedParser(make_context(), text, name)
    module = parser.parse_module()
    verify_located(module, parser.locations)
    return module, parser.locations


def _apply(passes: list[ModulePass], module: ModuleOp, locations: dict) -> None:
    ctx = make_context()
    for p in passes:
        try:
            p.apply(ctx, module)
        except LoweringError as e:
            raise LocatedVerifyError(locations.get(e.op), e.message) from None
        module.verify()


def lower(module: ModuleOp, locations: dict, options: CompileOptions) -> None:
    """Run the whole pipeline in place: tile IR in, ptx.module per kernel out."""
    _apply(options.passes(), module, locations)


def compile_text(text: str, name: str, options: CompileOptions) -> list[CompiledKernel]:
    module, locations = parse(text, name)
    kernels = [op for op in module.body.ops if isinstance(op, func.FuncOp)]
    if not kernels:
        raise ValueError(f"{name}: no kernel (func.func) in the input")
    select_and_tile, to_ptx = options.passes()[:2], options.passes()[2:]
    _apply(select_and_tile, module, locations)
    described = {}
    for k in kernels:
        try:
            g = read_kernel(k)
        except LoweringError as e:
            raise LocatedVerifyError(locations.get(e.op), e.message) from None
        tiling = {key: tuple(v.get_values()) for key, v in g.mma.tiling.data.items()}  # type: ignore[union-attr]
        sizes = tuple(strided_layout(arg.type).span for arg in k.body.block.args)  # type: ignore[arg-type]
        described[k.sym_name.data] = (g, g.mma.variant.data, tiling, sizes)  # type: ignore[union-attr]
    _apply(to_ptx, module, locations)
    compiled = []
    for pm in module.body.ops:
        if not isinstance(pm, ptx.ModuleOp_):
            continue
        entry = next(iter(pm.body.ops))
        assert isinstance(entry, ptx.EntryOp)
        g, variant, tiling, sizes = described[entry.sym_name.data]
        out = io.StringIO()
        ptx.print_module(pm, out)
        compiled.append(
            CompiledKernel(
                entry.sym_name.data, out.getvalue(), variant, tiling["grid"], tiling["block"], g, sizes
            )
        )
    return compiled
