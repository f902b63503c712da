"""Reads a tile-IR kernel into the GEMM it computes: the shared front half of the lowering.

A kernel is a `func.func` whose memref arguments become PTX parameters; the lowering supports
the computation D = A x B + C where each of A, B (and C) is a `tile.load`, optionally followed by
element `tile.cast`s, and C may be a `tile.constant`. Anything else is reported at the offending
operation, saying what is supported.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.core.memref_layout import StridedLayout, strided_layout
from tilemma.dialects import tile
from tilemma.passes.errors import LoweringError

@dataclass(frozen=True)
class MemOperand:
    """Where a tile lives: kernel parameter, storage element type, strides and base offset."""

    param: int
    stored: str  # element type in memory (MLIR name)
    value_type: str  # element type the tile IR hands to the mma (after its casts)
    casts: tuple[tuple[str, str, str | None], ...]  # (from, to, rounding) in order
    batch_stride: int  # elements between batches (0 when the batch broadcasts)
    row_stride: int  # elements between rows
    col_stride: int  # elements between columns (1 unless the memref's layout says otherwise)
    base: int  # element offset of the tile's first element (the layout's offset included)
    sparse: str | None = None  # tile.compress of this operand: "check" (pattern) or "prune"; "pre": tile.sparse_from
    sparse_pattern: str | None = None  # and the pattern it compresses to ("2:4", "1:2", "4:8")

    @property
    def bits(self) -> int:
        """Bits one element takes in memory (fp6 is stored one per byte)."""
        return ELEMENTS[self.stored].storage_bits


@dataclass(frozen=True)
class GemmKernel:
    name: str
    params: tuple[str, ...]
    batch: int
    m: int
    n: int
    k: int
    a: MemOperand
    b: MemOperand
    c: MemOperand | float | int  # a memory operand or a splat constant
    d: MemOperand
    acc_type: str
    mma: Operation  # the tile.mma op (carries the selected variant and tiling)
    scales: tuple[MemOperand, MemOperand, int] | None = None  # scale_a, scale_b, block
    a_meta: MemOperand | None = None  # the metadata words of a pre-compressed A (tile.sparse_from)


def _layout(ref: MemRefType, at: Operation, sparse: str | None = None) -> StridedLayout:
    """The memref's strided layout (`read_kernel` has checked that it has one), or a
    LoweringError at `at` where the lowering cannot address it: a compressed A is read in runs
    along a row. (Packed sub-byte elements sit at bit (offset + i*s0 + j*s1) * bits, any order.)"""
    layout = strided_layout(ref)
    col_stride = layout.strides[-1]
    if col_stride != 1 and sparse is not None:
        raise LoweringError(
            at,
            f"{ref}: a compressed (tile.compress) operand is read in runs along its rows, so "
            f"the column stride must be 1, not {col_stride}",
        )
    return layout


def _operand(
    value: SSAValue, params: dict[SSAValue, int], batched: bool, what: str, at: Operation
) -> MemOperand:
    casts: list[tuple[str, str, str | None]] = []
    owner = value.owner
    sparse = pattern = None
    if isinstance(owner, tile.SparseFromOp):
        return _pre_compressed(owner, owner.values, params, batched, "pre")
    if isinstance(owner, tile.CompressOp):
        sparse = "prune" if owner.prune is not None else "check"
        pattern = owner.result.type.pattern  # type: ignore[union-attr]
        owner = owner.source.owner
    while isinstance(owner, tile.CastOp):
        src, dst = owner.source.type, owner.result.type
        assert isinstance(src, tile.TileType) and isinstance(dst, tile.TileType)
        rounding = str(owner.rounding.data) if owner.rounding is not None else None
        casts.insert(0, (src.element, dst.element, rounding))
        owner = owner.source.owner
    if not isinstance(owner, tile.LoadOp):
        raise LoweringError(
            at,
            f"the {what} operand must come from tile.load (optionally through tile.cast, then "
            f"tile.compress for the left one); "
            f"got {getattr(owner, 'name', 'a block argument')}",
        )
    if owner.source not in params:
        raise LoweringError(owner, "tile.load must read a kernel argument (memref)")
    ref = owner.source.type
    assert isinstance(ref, MemRefType)
    tile_type = owner.result.type
    assert isinstance(tile_type, tile.TileType)
    layout = _layout(ref, owner, sparse)
    strides = layout.strides
    base = layout.offset + sum(o * s for o, s in zip(owner.offset_values(), strides))
    broadcast = batched and tile_type.get_shape()[0] == 1
    return MemOperand(
        param=params[owner.source],
        stored=tile_type.element,
        value_type=value.type.element,  # type: ignore[union-attr]
        casts=tuple(casts),
        batch_stride=0 if (not batched or broadcast) else strides[0],
        row_stride=strides[-2],
        col_stride=strides[-1],
        base=base,
        sparse=sparse,
        sparse_pattern=pattern,
    )


def _pre_compressed(op: tile.SparseFromOp, ref_value: SSAValue, params: dict[SSAValue, int],
                    batched: bool, sparse: str | None) -> MemOperand:
    """The values (sparse="pre") or metadata (None) memref of a `tile.sparse_from`."""
    if ref_value not in params:
        raise LoweringError(op, "tile.sparse_from must read kernel arguments (memrefs)")
    ref = ref_value.type
    assert isinstance(ref, MemRefType)
    strides = strided_layout(ref).strides  # row-major: the verifier checked
    element = tile.element_name(ref.element_type)
    broadcast = batched and op.result.type.get_shape()[0] == 1  # type: ignore[union-attr]
    return MemOperand(
        param=params[ref_value],
        stored=element,
        value_type=element,
        casts=(),
        batch_stride=0 if (not batched or broadcast) else strides[0],
        row_stride=strides[-2],
        col_stride=strides[-1],
        base=0,
        sparse=sparse,
        sparse_pattern="2:4" if sparse else None,
    )


def _store_operand(store: tile.StoreOp, params: dict[SSAValue, int], batched: bool) -> MemOperand:
    if store.dest not in params:
        raise LoweringError(store, "tile.store must write a kernel argument (memref)")
    ref = store.dest.type
    assert isinstance(ref, MemRefType)
    element = store.value.type.element  # type: ignore[union-attr]
    layout = _layout(ref, store)
    strides = layout.strides
    return MemOperand(
        param=params[store.dest],
        stored=element,
        value_type=element,
        casts=(),
        batch_stride=strides[0] if batched else 0,
        row_stride=strides[-2],
        col_stride=strides[-1],
        base=layout.offset + sum(o * s for o, s in zip(store.offset_values(), strides)),
    )


def read_kernel(kernel: func.FuncOp) -> GemmKernel:
    """The GEMM computed by `kernel`, or a LoweringError at the op that does not fit."""
    params = {arg: i for i, arg in enumerate(kernel.body.block.args)}
    for arg in params:
        if not isinstance(arg.type, MemRefType):
            raise LoweringError(
                kernel, f"kernel arguments must be memrefs, got {arg.type} for argument {arg.index}"
            )
        try:
            strided_layout(arg.type)
        except ValueError as e:  # reported where the argument is first used
            raise LoweringError(next((u.operation for u in arg.uses), kernel), str(e)) from None
    stores = [op for op in kernel.walk() if isinstance(op, tile.StoreOp)]
    if len(stores) != 1:
        raise LoweringError(
            kernel,
            f"a kernel must store exactly one tile (the mma result), found {len(stores)} tile.store",
        )
    store = stores[0]
    mma = store.value.owner
    if isinstance(mma, tile.MatmulOp):
        raise LoweringError(mma, "run tile-select-mma first: it turns tile.matmul into tile.mma")
    if not isinstance(mma, tile.MMA_OPS):
        raise LoweringError(store, "the stored tile must be the result of tile.mma or tile.scaled_mma")
    lhs, rhs, acc = mma.lhs.type, mma.rhs.type, mma.acc.type
    assert isinstance(lhs, tile.TileLike) and isinstance(rhs, tile.TileType)
    assert isinstance(acc, tile.TileType)
    batched = len(acc.get_shape()) == 3
    batch = acc.get_shape()[0] if batched else 1
    m, n = acc.get_shape()[-2:]
    k = lhs.get_shape()[-1]
    c: MemOperand | float | int
    if isinstance(mma.acc.owner, tile.ConstantOp):
        c = mma.acc.owner.scalar()
    else:
        c = _operand(mma.acc, params, batched, "accumulator", mma)
    names = tuple(arg.name_hint or f"arg{i}" for arg, i in params.items())
    return GemmKernel(
        name=kernel.sym_name.data,
        params=names,
        batch=batch,
        m=m,
        n=n,
        k=k,
        a=_operand(mma.lhs, params, batched, "left", mma),
        b=_operand(mma.rhs, params, batched, "right", mma),
        c=c,
        d=_store_operand(store, params, batched),
        scales=(
            (
                _operand(mma.scale_a, params, batched, "scale_a", mma),
                _operand(mma.scale_b, params, batched, "scale_b", mma),
                mma.block_size,
            )
            if isinstance(mma, tile.ScaledMmaOp)
            else None
        ),
        acc_type=acc.element,
        mma=mma,
        a_meta=(
            _pre_compressed(mma.lhs.owner, mma.lhs.owner.meta, params, batched, None)
            if isinstance(mma.lhs.owner, tile.SparseFromOp)
            else None
        ),
    )
