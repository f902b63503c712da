"""Reads a tile-IR kernel into the GEMM it computes: the shared front half of the lowering.

A kernel is a `func.func` whose memref arguments become PTX parameters; the lowering supports
the computation D = A x B + C where each of A, B (and C) is a `tile.load`, optionally followed by
element `tile.cast`s, and C may be a `tile.constant`, followed by an epilogue: `tile.map`s and
result `tile.cast`s on the mma result, whose other inputs are `tile.load`s of whole M x N windows,
`tile.broadcast`s and `tile.constant`s, and one or more `tile.store`s of the mma result or of what
the epilogue computed from it. Anything else is reported at the offending operation, saying what
is supported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import BlockArgument, Operation, SSAValue

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.core.memref_layout import DYNAMIC, StridedLayout, strided_layout, symbolic_layout, window_start
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
    # The ops after the mma in program order (tile.map, tile.cast, and the tile.load /
    # tile.broadcast / tile.constant inputs of the maps), each memory input's operand (a
    # broadcast's strides are 0 along the dimensions it repeats), and every store; `d` is the first.
    epilogue: tuple[Operation, ...] = ()
    inputs: tuple[tuple[Operation, MemOperand], ...] = ()
    outputs: tuple[tuple[tile.StoreOp, MemOperand], ...] = ()

    # Sizes known only at launch (DYNAMIC in m, n, k): per kernel argument, the symbol each memref
    # dimension's size is ("" where static: M, N, K), and the symbol of each `?` stride
    sizes: tuple[tuple[str, ...], ...] = ()
    strides: tuple[tuple[str, ...], ...] = ()

    @property
    def dynamic(self) -> bool:
        """Whether a size or stride is a value the kernel gets at launch."""
        return any(any(row) for row in self.sizes + self.strides)

    @property
    def fused(self) -> bool:
        """Whether anything happens between the mma and the store(s)."""
        return bool(self.epilogue) or len(self.outputs) > 1


def _layout(ref: MemRefType, at: Operation, sparse: str | None = None) -> StridedLayout:
    """The memref's strided layout (`read_kernel` has checked that it has one), or a
    LoweringError at `at` where the lowering cannot address it: a compressed A is read in runs
    along a row. (Packed sub-byte elements sit at bit (offset + i*s0 + j*s1) * bits, any order.)"""
    layout = symbolic_layout(ref)
    col_stride = layout.strides[-1]
    if col_stride != 1 and sparse is not None:
        raise LoweringError(
            at,
            f"{ref}: a compressed (tile.compress) operand is read in runs along its rows, so "
            f"the column stride must be 1, not {col_stride}",
        )
    return layout


def _base(layout: StridedLayout, offsets, at: Operation) -> int:
    """Element offset of a window's first element (`window_start`); a LoweringError at `at`
    where it would depend on a stride known only at launch."""
    try:
        return window_start(layout.strides, layout.offset, offsets)
    except ValueError as e:
        raise LoweringError(at, str(e)) from None


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
        if tile.CAST_RULES[(src.element, dst.element)].on != "operand":
            raise LoweringError(
                owner, f"{src.element} -> {dst.element} converts a result (after the mma); the {what} "
                f"operand can be converted only by {_operand_casts()}")
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
    base = _base(layout, owner.offset_values(), owner)
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


def _operand_casts() -> str:
    return ", ".join(f"{s} -> {d}" for (s, d), r in tile.CAST_RULES.items() if r.on == "operand")


def _broadcast_operand(op: tile.BroadcastOp, params: dict[SSAValue, int], batched: bool) -> MemOperand:
    """A `tile.broadcast` as a memory operand: strides along the tile's (batch, row, col), 0
    where the window repeats."""
    if op.source not in params:
        raise LoweringError(op, "tile.broadcast must read a kernel argument (memref)")
    ref = op.source.type
    assert isinstance(ref, MemRefType)
    layout = _layout(ref, op)
    strides = [0, 0, 0]
    rank = len(op.result.type.get_shape())  # type: ignore[union-attr]
    for stride, dim in zip(layout.strides, op.dim_values()):
        strides[dim + 3 - rank] = stride
    element = op.result.type.element  # type: ignore[union-attr]
    return MemOperand(
        param=params[op.source], stored=element, value_type=element, casts=(),
        batch_stride=strides[0] if batched else 0, row_stride=strides[1], col_stride=strides[2],
        base=_base(layout, op.offset_values(), op),
    )


def _epilogue(mma: Operation, stores: list[tile.StoreOp], params: dict[SSAValue, int], batched: bool):
    """The ops between the mma and the stores, in program order, and the memory inputs among
    them; a LoweringError where something else feeds a map or a store."""
    acc_shape = mma.results[0].type.get_shape()  # type: ignore[union-attr]
    computed: set[SSAValue] = {mma.results[0]}
    ops: list[Operation] = []
    inputs: list[tuple[Operation, MemOperand]] = []
    needed: set[Operation] = set()
    work = [s.value.owner for s in stores]
    while work:  # every op a stored value depends on, back to the mma
        op = work.pop()
        if op is mma or op in needed or not isinstance(op, Operation):
            continue
        needed.add(op)
        if isinstance(op, (tile.MapOp, tile.CastOp)):
            work.extend(v.owner for v in op.operands)
    for op in mma.parent_block().ops if mma.parent_block() else ():
        if op not in needed:
            continue
        if isinstance(op, tile.MapOp):
            if not any(v in computed for v in op.inputs):
                raise LoweringError(op, "a tile.map of the epilogue must take the mma result or a value "
                                        "computed from it")
            for v in op.inputs:
                if v not in computed and not isinstance(v.owner, (tile.LoadOp, tile.BroadcastOp, tile.ConstantOp)):
                    raise LoweringError(op, f"tile.map inputs are the mma result, values computed from it, "
                                            f"tile.load, tile.broadcast or tile.constant; got "
                                            f"{getattr(v.owner, 'name', 'a block argument')}")
            computed.update(op.outputs)
        elif isinstance(op, tile.CastOp):
            src, dst = op.source.type, op.result.type
            rule = tile.CAST_RULES[(src.element, dst.element)]  # type: ignore[union-attr]
            if op.source not in computed or rule.on != "result":
                raise LoweringError(op, f"after the mma, tile.cast converts the mma result or values computed "
                                        f"from it by {_result_casts()}")
            computed.add(op.result)
        elif isinstance(op, tile.LoadOp):
            if op.source not in params:
                raise LoweringError(op, "tile.load must read a kernel argument (memref)")
            inputs.append((op, _operand(op.result, params, batched, "epilogue", op)))
        elif isinstance(op, tile.BroadcastOp):
            inputs.append((op, _broadcast_operand(op, params, batched)))
        elif not isinstance(op, tile.ConstantOp):
            raise LoweringError(op, f"{op.name} cannot follow the mma: the epilogue is tile.map, tile.cast, "
                                    f"tile.load, tile.broadcast and tile.constant")
        for r in op.results:
            if r.type.get_shape() != acc_shape:  # type: ignore[union-attr]
                raise LoweringError(op, f"epilogue tiles have the accumulator's shape "
                                        f"{tile.shape_str(acc_shape)}, got {r.type}")
        ops.append(op)
    for s in stores:
        if s.value not in computed:
            raise LoweringError(s, "a stored tile must be the mma result or computed from it by tile.map / "
                                   "tile.cast")
    return tuple(ops), tuple(inputs)


def _result_casts() -> str:
    return ", ".join(f"{s} -> {d}" for (s, d), r in tile.CAST_RULES.items() if r.on == "result")


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
        base=_base(layout, store.offset_values(), store),
    )


def _views(kernel: func.FuncOp, params: dict[SSAValue, int]) -> dict[SSAValue, int]:
    """The transposed views of arguments (`tile.transpose_view`) in the kernel's body -> the
    argument each views; a LoweringError for one of a computed memref or of `?` sizes."""
    views = {}
    for op in kernel.body.block.ops:
        if isinstance(op, tile.TransposeViewOp):
            if op.source not in params:
                raise LoweringError(op, "tile.transpose_view must view a kernel argument")
            if symbolic_layout(op.result.type).dynamic:  # (its `?` symbols are the argument's, in its order)
                raise LoweringError(op, "tile.transpose_view of an argument with sizes known at launch (`?`) is not "
                                        "supported; give it static sizes")
            views[op.result] = params[op.source]
    return views


def read_kernel(kernel: func.FuncOp) -> GemmKernel:
    """The GEMM computed by `kernel`, or a LoweringError at the op that does not fit."""
    params = {arg: i for i, arg in enumerate(kernel.body.block.args)}
    for arg in params:
        if not isinstance(arg.type, MemRefType):
            raise LoweringError(
                kernel, f"kernel arguments must be memrefs, got {arg.type} for argument {arg.index}"
            )
        try:
            symbolic_layout(arg.type)
        except ValueError as e:  # reported where the argument is first used
            raise LoweringError(next((u.operation for u in arg.uses), kernel), str(e)) from None
        element = tile.element_name(arg.type.element_type)
        if not arg.uses and element not in ELEMENTS:  # no op says what it holds: the runner and the
            raise LoweringError(kernel,  # ABI cannot make a buffer of it
                                f"argument {arg.index} is a {arg.type}, which the kernel does not use, of {element}, "
                                f"not an element type of a kernel argument ({', '.join(ELEMENTS)}): remove the "
                                "argument or give it one of them")
    refs = {**params, **_views(kernel, params)}  # what tiles read and write: arguments and their views
    softmax = next((o for o in kernel.walk() if isinstance(o, tile.SoftmaxOp)), None)
    if softmax is not None:
        raise LoweringError(softmax, "an attention kernel (tile.softmax) is lowered by tile-attention, "
                                     "after tile-select-mma")
    stores = [op for op in kernel.walk() if isinstance(op, tile.StoreOp)]
    mmas = [op for op in kernel.walk() if isinstance(op, (tile.MatmulOp, *tile.MMA_OPS))]
    if not stores:
        raise LoweringError(kernel, "a kernel must store the mma result (or what an epilogue computes "
                                    "from it) with tile.store; found none")
    if len(mmas) != 1:
        raise LoweringError(mmas[1] if mmas else stores[0],
                            f"a kernel computes one tile.mma, found {len(mmas)}")
    mma = mmas[0]
    if isinstance(mma, tile.MatmulOp):
        raise LoweringError(mma, "run tile-select-mma first: it turns tile.matmul into tile.mma")
    store = stores[0]
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
        c = _operand(mma.acc, refs, batched, "accumulator", mma)
    names = tuple(arg.name_hint or f"arg{i}" for arg, i in params.items())
    epilogue, inputs = _epilogue(mma, stores, refs, batched)
    sizes, strides = _symbols(kernel, mma, stores, epilogue, names)
    if any(any(row) for row in sizes + strides):
        problem = dynamic_problem(mma, (_operand(value, refs, batched, what, mma).stored
                                        for value, what in ((mma.lhs, "left"), (mma.rhs, "right"))))
        if problem:
            raise LoweringError(mma, problem)
    return GemmKernel(
        sizes=sizes,
        strides=strides,
        name=kernel.sym_name.data,
        params=names,
        batch=batch,
        m=m,
        n=n,
        k=k,
        a=_operand(mma.lhs, refs, batched, "left", mma),
        b=_operand(mma.rhs, refs, batched, "right", mma),
        c=c,
        d=_store_operand(store, refs, batched),
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
        epilogue=epilogue,
        inputs=inputs,
        outputs=tuple((s, _store_operand(s, refs, batched)) for s in stores),
    )


def _symbols(kernel: func.FuncOp, mma: Operation, stores, epilogue, names) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """Which size each `?` dimension of each kernel argument is (M, N, K, batch: the tile
    dimension it covers), and a symbol for each `?` stride (`<argument>_stride<d>`); a
    LoweringError where one argument would be two different sizes."""
    args = list(kernel.body.block.args)
    sizes = [["" for _ in a.type.get_shape()] for a in args]
    rows = {"a": ("batch", "M", "K"), "b": ("batch", "K", "N"), "acc": ("batch", "M", "N")}

    def note(ref: SSAValue, dims: tuple[int, ...], roles: tuple[str, ...], at: Operation) -> None:
        if not isinstance(ref, BlockArgument) or ref not in args:
            return
        shape = ref.type.get_shape()
        for i, d in enumerate(dims):
            if shape[i] != DYNAMIC:
                continue
            old = sizes[ref.index][i]
            if old and old != roles[d]:
                raise LoweringError(at, f"dimension {i} of {names[ref.index]} would be both {old} and {roles[d]}")
            sizes[ref.index][i] = roles[d]

    def source_load(value: SSAValue) -> Operation | None:
        owner = value.owner
        while isinstance(owner, (tile.CastOp, tile.CompressOp)):
            owner = owner.source.owner
        return owner if isinstance(owner, tile.LoadOp) else None

    for value, which in ((mma.lhs, "a"), (mma.rhs, "b"), (mma.acc, "acc")):
        load = source_load(value)
        if load is not None:
            rank = len(load.result.type.get_shape())
            note(load.source, tuple(range(rank)), rows[which][3 - rank:], load)
    acc_rank = len(mma.results[0].type.get_shape())
    roles = rows["acc"][3 - acc_rank:]
    for op in (*epilogue, *stores):
        if isinstance(op, tile.LoadOp):
            note(op.source, tuple(range(acc_rank)), roles, op)
        elif isinstance(op, tile.StoreOp):
            note(op.dest, tuple(range(acc_rank)), roles, op)
        elif isinstance(op, tile.BroadcastOp):
            note(op.source, op.dim_values(), roles, op)
    strides = [tuple(f"{names[a.index]}_stride{d}" if st == DYNAMIC else ""
                     for d, st in enumerate(symbolic_layout(a.type).strides)) for a in args]
    for a, row in zip(args, sizes):
        for d, sym in enumerate(row):
            if a.type.get_shape()[d] == DYNAMIC and not sym:
                raise LoweringError(next((u.operation for u in a.uses), kernel),
                                    f"dimension {d} of {names[a.index]} is ? but no tile op says which size it is")
    return tuple(tuple(r) for r in sizes), tuple(strides)


def dynamic_problem(mma: Operation, stored: Iterable[str]) -> str | None:
    """Why a GEMM with sizes or strides known at launch cannot be lowered (what `?` does not
    cover yet), or None. `stored`: the element types of A and B in memory, read only once the
    kind of mma has passed (linalg-to-tile asks the same of the kernels it makes)."""
    lhs, acc = mma.lhs.type, mma.acc.type  # type: ignore[attr-defined]
    if isinstance(mma, tile.ScaledMmaOp) or isinstance(lhs, tile.SparseTileType):
        return ("sizes known at launch (?) are supported for dense tile.mma; block-scaled and "
                "sparse kernels need static shapes (their scale and metadata layouts are "
                "computed from the sizes when the kernel is compiled)")
    if len(acc.get_shape()) == 3 and acc.get_shape()[0] == DYNAMIC:
        return "the batch size must be static; M, N, K and strides may be ?"
    for element in stored:
        if ELEMENTS[element].storage_bits < 8:
            return (f"{element} operands are packed below a byte: their sizes must be static "
                    f"(a ? K would not say where a row ends within a byte)")
    return None


#: The size a `?` M, N or K is planned for: the configuration of a large problem (smaller ones
#: run it with their edges predicated).
PLANNING_SIZE = 4096


def planning_stride(multiple: int) -> int:
    """What planning takes a `?` stride for: a multiple of `multiple` whose alignment is that of
    `multiple` itself (the alignment of a stride the kernel promises to be some multiple of it),
    and never 1: a `?` stride is never a contiguous dimension's (`strided<[1, ?]>` is column-major
    whatever its leading dimension turns out to be)."""
    return 3 * multiple


def planning_view(g: GemmKernel, multiple: int, plan_for: tuple[int, int, int] | None = None) -> GemmKernel:
    """The GEMM as planning sees it: a `?` size as `plan_for`'s (M, N, K; the kernel's
    `tile.plan_sizes`, which the dispatcher sets per size bucket), else PLANNING_SIZE, and a `?`
    stride as `planning_stride(multiple)`."""
    if not g.dynamic:
        return g
    hints = dict(zip("mnk", plan_for or (PLANNING_SIZE,) * 3))

    def size(v: int, which: str = "m") -> int:
        return hints[which] if v == DYNAMIC else v

    def mem(x):
        if not isinstance(x, MemOperand):
            return x
        return dataclasses.replace(x, **{f: planning_stride(multiple) for f in ("batch_stride", "row_stride", "col_stride")
                                         if getattr(x, f) == DYNAMIC})

    return dataclasses.replace(g, m=size(g.m, "m"), n=size(g.n, "n"), k=size(g.k, "k"), a=mem(g.a), b=mem(g.b), c=mem(g.c),
                               d=mem(g.d), inputs=tuple((op, mem(x)) for op, x in g.inputs),
                               outputs=tuple((op, mem(x)) for op, x in g.outputs))
