"""`tile-transpose-product`: computes a GEMM as its transpose, D^T = B^T A^T, where that lets the
warpgroups multiply it.

8-bit integer wgmma reads both operands K-major from shared memory, or A from registers. An A
stored M-major is read from registers by byte pairs (`#warp.schedule` pair_bytes `a`), but a B
stored N-major (the layout of `torch._int_mm`'s and most row-major weights) has no such road: the
kernel stays on mma.sync's byte-pair reads. Its transpose has one: B^T is then an M-major A', read
from registers, and A^T a K-major B'. So this pass rewrites such a kernel (tile IR: the loads, a
zero or loaded C, the mma, and an elementwise epilogue: broadcasts of per-row or per-column
vectors, maps, casts, its stores) into its transpose: every tile transposed, each read and written
through `tile.transpose_view` of its argument, a per-row vector now broadcast along the columns and
the other way round; where `tile-plan` then multiplies it by warpgroups with A from registers.
Elsewhere it leaves the kernel alone. The arguments and what lands in them are unchanged.

H200, s8 with a row-major A and B, TOP/s: 4096^3 1233 (the K-major kernel 1332 in the same run),
4096x4096x11008 1478, 512x4096x4096 1023 (benchmarks/results/h200-2026-11-28-matrix-sm90a-s8.csv),
where mma.sync's byte pairs ran 810 at 4096^3 (-s8-mma-sync-baseline.csv, the call before); with a
quantized linear layer's epilogue (scales, bias, f16 D) 1160 against 735 in one call
(-s8-quantized-epilogue.txt).

tf32 wgmma reads both operands K-major from shared memory too, so an N-major B is transposed by
the fill on its way there (`warp.fill_load`, rounding as it stores). In the transpose the filled
operand is A' = B^T, M-major: a stage of the CTA's 128 rows rather than B's 256 columns, and B' =
A^T is copied K-major as stored (and rounded where it lies). From 512 rows on
(`configs.TRANSPOSED_MIN_ROWS`) that is the faster kernel (H200, rna, 4096^3 210 against 202
TFLOP/s, 512x4096x4096 190 against 173).

It runs before `tile-plan`, only where the tiling is left to it (`TilePlan.automatic`): a forced
configuration names the kernel's own M and N, and so does a tuning cache's entry for the kernel
(`tune-cache`: those kernels are left as they are, as `tilemma tune` measured them).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tilemma.compiler.core import configs
from tilemma.dialects import tile
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.gemm_kernel import GemmKernel, read_kernel
from tilemma.passes.tile.plan import kernel_target, plan, tuned_config, wrong_order
from tilemma.passes.tile.plan_warpgroups import tf32_rounding


def _swapped(ty: tile.TileType) -> tile.TileType:
    shape = list(ty.get_shape())
    shape[-2:] = shape[:-3:-1]
    return tile.TileType(shape, ty.element_type)


def _offsets(op: tile.LoadOp | tile.StoreOp) -> list[int]:
    offsets = list(op.offset_values())
    offsets[-2:] = offsets[:-3:-1]
    return offsets


# the tile ops a transposed kernel is made of (each rewritten by `transpose`), besides the mma
_OPS = (tile.LoadOp, tile.ConstantOp, tile.BroadcastOp, tile.MapOp, tile.CastOp, tile.StoreOp, func.ReturnOp)


def _swap_dim(d: int, rank: int) -> int:
    """Tile dimension `d` of a rank-`rank` tile in the transpose (rows and columns exchanged)."""
    return {rank - 2: rank - 1, rank - 1: rank - 2}.get(d, d)


def _broadcast_dims(op: tile.BroadcastOp) -> list[int]:
    rank = len(op.result.type.get_shape())  # type: ignore[union-attr]
    return [_swap_dim(d, rank) for d in op.dim_values()]


def candidate(kernel: func.FuncOp) -> GemmKernel | None:
    """`kernel`'s GEMM (`read_kernel`) where it is one of 8-bit integers, or of tf32 (f32 operands
    cast alike, each through its one cast), for sm_90a, A K-major and B N-major, of static sizes and
    as many rows as `configs.TRANSPOSED_MIN_ROWS` says (fewer, the transpose's few columns lost to
    mma.sync's split K, H200 s8 64 / 128 x 11008 x 4096 304 / 373 against 349 / 429 TOP/s), made of
    loads, constants, broadcasts (of one dimension), maps, casts and stores around its mma (the
    forms `transpose` rewrites); None otherwise."""
    if not kernel_target(kernel).is_arch(90):
        return None
    try:
        g = read_kernel(kernel)
    except LoweringError:
        return None  # (tile-plan reports it)
    v = g.mma.variant.variant  # type: ignore[union-attr]
    ops = list(kernel.body.block.ops)
    tf32 = v.atype == "tf32" and tf32_rounding(g.a) is not None and tf32_rounding(g.a) == tf32_rounding(g.b)

    def loaded(x: SSAValue) -> bool:  # (tf32: through its one cast)
        owner = x.owner
        if tf32 and isinstance(owner, tile.CastOp):
            owner = owner.source.owner
        return isinstance(owner, tile.LoadOp)

    ok = ((v.atype in ("s8", "u8") and not g.a.casts and not g.b.casts
           and g.m >= configs.TRANSPOSED_MIN_ROWS["8bit-wgmma"])
            or (tf32 and g.m >= configs.TRANSPOSED_MIN_ROWS["tf32-wgmma-fill"]))
    ok = (ok and v.sparse is None and g.scales is None and g.a_meta is None and not g.dynamic
            and not wrong_order(g, "a") and wrong_order(g, "b")
            and all(loaded(op) for op in (g.mma.lhs, g.mma.rhs))
            and all(isinstance(o, _OPS) or o is g.mma for o in ops)
            and all(d == sorted(d) for d in (_broadcast_dims(o) for o in ops if isinstance(o, tile.BroadcastOp))))
    return g if ok else None


def transpose(kernel: func.FuncOp) -> None:
    """Rewrite `kernel` (a `candidate`) as D^T = B^T A^T: every tile its transpose (loads and stores
    through transposed views of the arguments, at exchanged offsets; broadcasts along exchanged
    dimensions; maps and casts as they are, of transposed tiles), the mma of the exchanged operands."""
    block = kernel.body.block
    new: list[Operation] = []
    values: dict[SSAValue, SSAValue] = {}
    views: dict[SSAValue, SSAValue] = {}

    def view(ref: SSAValue) -> SSAValue:
        if ref not in views:
            new.append(op := tile.TransposeViewOp(ref))
            views[ref] = op.result
        return views[ref]

    for op in list(block.ops):
        if isinstance(op, func.ReturnOp):
            continue
        if isinstance(op, tile.LoadOp):
            out: Operation = tile.LoadOp(view(op.source), _offsets(op), _swapped(op.result.type))  # type: ignore[arg-type]
        elif isinstance(op, tile.ConstantOp):
            out = tile.ConstantOp(op.scalar(), _swapped(op.result.type))  # type: ignore[arg-type]
        elif isinstance(op, tile.BroadcastOp):
            out = tile.BroadcastOp(op.source, op.offset_values(), _broadcast_dims(op), _swapped(op.result.type))  # type: ignore[arg-type]
        elif isinstance(op, tile.CastOp):
            out = tile.CastOp(values[op.source], _swapped(op.result.type),  # type: ignore[arg-type]
                              op.rounding.data if op.rounding is not None else None)
        elif isinstance(op, tile.MapOp):
            out = tile.MapOp([values[x] for x in op.inputs], [_swapped(r.type) for r in op.outputs],  # type: ignore[arg-type]
                             op.body.clone())
        elif isinstance(op, tile.StoreOp):
            out = tile.StoreOp(values[op.value], view(op.dest), _offsets(op))
        else:  # the mma (a candidate's one other op): of the exchanged operands
            assert isinstance(op, tile.MmaOp)
            out = tile.MmaOp.create(operands=[values[op.rhs], values[op.lhs], values[op.acc]],
                                    result_types=[_swapped(op.result.type)],
                                    properties=dict(op.properties), attributes=dict(op.attributes))
        new.append(out)
        values.update(zip(op.results, out.results))
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    for op in reversed([o for o in block.ops if o is not ret]):
        Rewriter.erase_op(op, safe_erase=False)
    Rewriter.insert_op(new, InsertPoint.before(ret))


@dataclass(frozen=True)
class TileTransposeProduct(ModulePass):
    """Transpose each `candidate` kernel's product where `tile-plan` multiplies the transpose by
    warpgroups with A from registers (`#warp.schedule` mma wgmma, pair_bytes `a`) or, for tf32, A
    filled (fill `a`) and B copied K-major. Option:
    `tune-cache`, tile-plan's: a kernel it holds a configuration for is left as it is."""

    name = "tile-transpose-product"

    tune_cache: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            g = candidate(kernel)
            if g is None or tuned_config(kernel, g.mma, self.tune_cache) is not None:
                continue
            trial = kernel.clone()
            transpose(trial)
            try:
                schedule = plan(trial, read_kernel(trial), None, None)
            except LoweringError:
                continue  # (the product as written: tile-plan reports what it cannot take)
            tf32 = g.mma.variant.variant.atype == "tf32"  # type: ignore[union-attr]
            if schedule.mma == "wgmma" and ("a" in schedule.pair_bytes if not tf32 else schedule.fill == "a"):
                Rewriter.replace_op(kernel, trial)
