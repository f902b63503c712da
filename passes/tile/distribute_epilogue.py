"""`tile-distribute-epilogue`: the tile ops after the mma become the same work on each warp's
accumulator fragments, so the epilogue runs in registers and D is stored once, in its type.

`tile-distribute` leaves the mma's result as `warp.distributed` (the fragments and where each
starts) and the epilogue's tile ops reading it. Each pattern here rewrites one op whose input is
distributed: `tile.map` becomes one `warp.map` per fragment (a `tile.load` or `tile.broadcast`
input is loaded in the accumulator's layout, once per distinct window: a per-column bias once
per column of fragments; a `tile.constant` input becomes an `arith.constant` in the body),
`tile.cast` one `warp.cast` per fragment, `tile.store` one `warp.store` per fragment. The
results are `warp.distributed` again, until the stores consume them.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tilemma.dialects import tile, warp
from tilemma.dialects.tile_epilogue import scalar_type
from tilemma.passes.errors import LoweringError, replaced


def _distributed(value: SSAValue) -> warp.DistributedOp | None:
    owner = value.owner
    return owner if isinstance(owner, warp.DistributedOp) else None


def _frag_of(dist: warp.DistributedOp, element) -> warp.FragType:
    first = dist.frags[0].type
    assert isinstance(first, warp.FragType)
    return warp.FragType(warp.Operand.ACC, element, first.variant_attr)


def _grid(dist: warp.DistributedOp) -> list[tuple[int, int]]:
    return [(i, j) for i in range(len(dist.rows)) for j in range(len(dist.cols))]


def _redistribute(dist: warp.DistributedOp, frags: list[SSAValue], result: tile.TileType) -> warp.DistributedOp:
    return warp.DistributedOp(frags, dist.batch, list(dist.rows), list(dist.cols), dist.in_bounds_values(),
                              dist.col_align.value.data, result)


def _window(value_type: tile.TileType) -> tuple[int, int, int]:
    shape = value_type.get_shape()
    return (shape[0] if len(shape) == 3 else 1, shape[-2], shape[-1])


def _load(op: Operation, dist: warp.DistributedOp, ops: list[Operation]) -> list[SSAValue]:
    """A tile.load or tile.broadcast, loaded in the fragments' layout: one warp.load per distinct
    window (fragments that differ only along a repeated dimension share theirs)."""
    result = op.results[0].type
    assert isinstance(result, tile.TileType)
    frag = _frag_of(dist, result.element_type)
    rank = len(result.get_shape())
    if isinstance(op, tile.BroadcastOp):
        dims = tuple(d + 3 - rank for d in op.dim_values())
        ref, window = op.source, op.offset_values()
    else:
        assert isinstance(op, tile.LoadOp)
        dims, ref, window = None, op.source, op.offset_values()
    rows_vary = dims is None or 1 in dims
    cols_vary = dims is None or 2 in dims
    batch = dist.batch
    loaded: dict[tuple[int, int], SSAValue] = {}
    out = []
    for i, j in _grid(dist):
        key = (i if rows_vary else 0, j if cols_vary else 0)
        if key not in loaded:
            load = warp.LoadOp(ref, [batch, dist.rows[key[0]], dist.cols[key[1]]], window, _window(result), frag,
                               broadcast=dims)
            load.set_in_bounds(*dist.in_bounds_values())
            if cols_vary:
                load.col_align = dist.col_align
            replaced(op, load)
            ops.append(load)
            loaded[key] = load.result
        out.append(loaded[key])
    return out


def _constant_body(m: tile.MapOp, constants: dict[int, tile.ConstantOp]) -> Region:
    """The map's body with the inputs at `constants` replaced by arith.constants."""
    body = m.body.clone()
    block = body.block
    for index in sorted(constants, reverse=True):
        const = constants[index]
        arg = block.args[index]
        t = arg.type
        value = const.scalar()
        attr = IntegerAttr(int(value), t) if isinstance(t, IntegerType) else FloatAttr(float(value), t)  # type: ignore[arg-type]
        new = arith.ConstantOp(attr, t)
        block.insert_op_before(new, block.first_op)  # type: ignore[arg-type]
        arg.replace_by(new.result)
        block.erase_arg(arg)
    return body


def _record_body(old: Region, new: Region) -> None:
    for a, b in zip(old.walk(), new.walk()):
        replaced(a, b)


@dataclass
class DistributeMap(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.MapOp, rewriter: PatternRewriter) -> None:
        dists = [_distributed(v) for v in op.inputs]
        dist = next((d for d in dists if d is not None), None)
        if dist is None:
            return
        ops: list[Operation] = []
        per_input: list[list[SSAValue]] = []
        constants: dict[int, tile.ConstantOp] = {}
        for index, (value, d) in enumerate(zip(op.inputs, dists)):
            if d is not None:
                per_input.append(list(d.frags))
            elif isinstance(value.owner, tile.ConstantOp):
                constants[index] = value.owner
            elif isinstance(value.owner, (tile.LoadOp, tile.BroadcastOp)):
                per_input.append(_load(value.owner, dist, ops))
            else:  # read_kernel admitted nothing else
                raise LoweringError(op, f"cannot distribute the input {value.owner.name}")
        results: list[list[SSAValue]] = [[] for _ in op.outputs]
        types = [_frag_of(dist, r.type.element_type) for r in op.outputs]  # type: ignore[union-attr]
        for n in range(len(dist.frags)):
            body = _constant_body(op, constants)
            _record_body(op.body, body)
            term = body.block.last_op
            assert isinstance(term, tile.YieldOp)
            yield_ = warp.MapYieldOp(*term.values)
            body.block.insert_op_before(yield_, term)
            body.block.erase_op(term)
            m = warp.MapOp([frags[n] for frags in per_input], types, body)
            replaced(op, m)
            ops.append(m)
            for r, v in zip(results, m.outputs):
                r.append(v)
        new = [_redistribute(dist, r, out.type) for r, out in zip(results, op.outputs)]  # type: ignore[arg-type]
        rewriter.replace_op(op, [*ops, *new], [d.result for d in new])


@dataclass
class DistributeCast(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.CastOp, rewriter: PatternRewriter) -> None:
        dist = _distributed(op.source)
        if dist is None:
            return
        result = op.result.type
        assert isinstance(result, tile.TileType)
        frag = _frag_of(dist, result.element_type)
        rounding = str(op.rounding.data) if op.rounding is not None else None
        casts = [warp.CastOp(f, frag, rounding) for f in dist.frags]
        for c in casts:
            replaced(op, c)
        new = _redistribute(dist, [c.result for c in casts], result)
        rewriter.replace_op(op, [*casts, new], [new.result])


@dataclass
class DistributeStore(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.StoreOp, rewriter: PatternRewriter) -> None:
        dist = _distributed(op.value)
        if dist is None:
            return
        window = op.offset_values()
        extent = _window(op.value.type)  # type: ignore[arg-type]
        stores = []
        for (i, j), frag in zip(_grid(dist), dist.frags):
            store = warp.StoreOp(frag, op.dest, [dist.batch, dist.rows[i], dist.cols[j]], window, extent)
            store.set_in_bounds(*dist.in_bounds_values())
            store.col_align = dist.col_align
            replaced(op, store)
            stores.append(store)
        rewriter.replace_op(op, stores, [])


_LEFT_BEHIND = (warp.DistributedOp, tile.LoadOp, tile.BroadcastOp, tile.ConstantOp)


@dataclass(frozen=True)
class TileDistributeEpilogue(ModulePass):
    """Distribute the epilogue (`tile.map`, `tile.cast`, `tile.store` of `warp.distributed`
    values) onto the warps' fragments."""

    name = "tile-distribute-epilogue"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([DistributeMap(), DistributeCast(), DistributeStore()]),
            apply_recursively=True,
        ).rewrite_module(op)
        for kernel in [d.parent_op() for d in op.walk() if isinstance(d, warp.DistributedOp)]:
            _erase_dead(kernel)


def _erase_dead(kernel: Operation | None) -> None:
    """Drop what the patterns consumed; anything still used is an op they could not distribute."""
    if kernel is None:
        return
    changed = True
    while changed:
        changed = False
        for o in list(kernel.walk(reverse=True)):
            if isinstance(o, _LEFT_BEHIND) and all(not r.uses for r in o.results):
                o.detach()
                o.erase()
                changed = True
    for o in kernel.walk():
        if isinstance(o, warp.DistributedOp):
            user = next(iter(o.result.uses)).operation
            raise LoweringError(user, "cannot be distributed onto the warps' fragments (run tile-distribute-epilogue "
                                      "on what tile-distribute produced)")
