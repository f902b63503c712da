"""How a linalg op's read of a kernel argument becomes a view of that argument's buffer.

linalg reads an operand through an indexing map: for each memref dimension, the loop (or the
constant) that indexes it. tilemma loads whole tiles, so each read is turned into a view of the
same buffer, written as the argument's memref type: the memref dimensions reordered to the
tile's (a transposed operand, `linalg.transpose` of an argument, `indexing_maps`), dimensions
read at a constant dropped (the `0` of `(d0, d1) -> (0, d1)` on a `1 x N` bias), and dimensions of
stride 0 dropped (a broadcast view such as `memref<37x91xf16, strided<[0, 1]>>`). What is left is
loaded whole (`tile.load`) when it has every dimension of the tile, else repeated along the
others (`tile.broadcast ... dims [...]`).

The caller then retypes the argument to the view: the buffer and every element's place in it
are the same, only the memref type says them differently (the caller passes `w.t()` for a
weight `w` that the kernel reads transposed, `b` for a bias it was handed as `b.expand(M, N)`).

Sizes and strides may be `?` (known at launch), as at the tile level: a view keeps them, so the
transposed read of a `memref<?x?xf16>` weight is `memref<?x?xf16, strided<[1, ?]>>`, whose `?`
stride the launch reads off the buffer it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    IntegerType,
    MemRefType,
    NoneAttr,
    Signedness,
    StridedLayoutAttr,
)
from xdsl.ir import Attribute
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr

from tilemma.compiler.core.memref_layout import DYNAMIC, is_identity, layout_values, symbolic_row_major, window_start


@dataclass(frozen=True)
class View:
    """A read of an argument: its retyped memref and, for each of that memref's dimensions, the
    tile dimension it runs along (increasing)."""

    ref: MemRefType
    dims: tuple[int, ...]


def view_strides(ref: MemRefType) -> tuple[tuple[int, ...], int]:
    """(strides, offset) of a memref type, a `?` stride DYNAMIC, zero strides allowed (a
    broadcast view); ValueError where tilemma cannot address it (`layout_values`: a dynamic
    offset, a layout that is not strided) or a stride or the offset is negative."""
    strides, offset = layout_values(ref)
    if any(s < 0 and s != DYNAMIC for s in strides) or offset < 0:
        raise ValueError(f"{ref}: strides and offset must not be negative")
    return strides, offset


def memref_type(element: Attribute, shape: Sequence[int], strides: Sequence[int], offset: int,
                memory_space: Attribute) -> MemRefType:
    """The memref type of a view, with the identity layout where the strides are the row-major
    ones, all static (a `?` stride takes any value at launch, the identity's only the contiguous
    one)."""
    if DYNAMIC not in strides and tuple(strides) == symbolic_row_major(tuple(shape)) and offset == 0:
        return MemRefType(element, list(shape), NoneAttr(), memory_space)
    return MemRefType(element, list(shape), StridedLayoutAttr(
        [None if s == DYNAMIC else s for s in strides], offset), memory_space)


def tile_element(t: Attribute, signedness: Signedness = Signedness.SIGNED) -> Attribute:
    """The tile element type of a memref element: signless integers are read with `signedness`
    (linalg's cast_signed by default)."""
    if isinstance(t, IntegerType) and t.signedness.data == Signedness.SIGNLESS and t.width.data != 1:
        return IntegerType(t.width.data, signedness)
    return t


def view(ref: MemRefType, exprs: Sequence[AffineExpr], tile_dim: dict[int, int], element: Attribute) -> View:
    """The view through which a read reaches `ref`: `exprs` index its dimensions, loop d being
    tile dimension `tile_dim[d]`. ValueError (a sentence) where no view can say it.

    A `?` size is read whole along a loop (as a tile covers a `?` dimension from 0): a constant
    index into it, which nothing could check, is refused, and so is one that would start the
    view at a nonzero index along a `?` stride (`window_start`). Trailing dimensions of an
    identity layout, read in order from 0, stay the identity: a launch checks that its buffer is
    contiguous, while `?` strides of another view take any."""
    shape = tuple(ref.get_shape())
    strides, offset = view_strides(ref)
    kept: list[tuple[int, int, int, int]] = []  # (tile dimension, memref dimension, size, stride)
    starts = [0] * len(shape)
    for i, (e, size, stride) in enumerate(zip(exprs, shape, strides)):
        if isinstance(e, AffineConstantExpr):
            if size == DYNAMIC:
                raise ValueError(f"dimension {i} is ? and read at index {e.value}: a ? dimension is read "
                                 f"whole, by a loop of the tile (its size is known only at launch)")
            if not 0 <= e.value < size:
                raise ValueError(f"dimension {i} is read at {e.value}, outside its size {size}")
            starts[i] = e.value
        elif isinstance(e, AffineDimExpr) and e.position in tile_dim:
            if stride != 0 or size == 1:
                kept.append((tile_dim[e.position], i, size, stride))
        else:
            raise ValueError(
                f"dimension {i} is indexed by {e}: a loop of the tile or a constant can index "
                f"a dimension, not an expression")
    offset = window_start(strides, offset, starts)
    kept.sort()
    if len({t for t, _, _, _ in kept}) != len(kept):
        raise ValueError("two dimensions are indexed by one loop (a diagonal), which no strided view reads")
    if kept:
        sizes, dims = [s for _, _, s, _ in kept], tuple(t for t, _, _, _ in kept)
        trailing = [i for _, i, _, _ in kept] == list(range(len(shape) - len(kept), len(shape)))
        if is_identity(ref) and offset == 0 and trailing:
            return View(MemRefType(element, sizes, NoneAttr(), ref.memory_space), dims)
        return View(memref_type(element, sizes, [s for _, _, _, s in kept], offset, ref.memory_space), dims)
    # One element (every dimension repeats or is read at a constant): a scalar.
    if all(d == 1 for d in shape) and offset == view_strides(ref)[1]:
        return View(MemRefType(element, list(shape), ref.layout, ref.memory_space), ())
    return View(memref_type(element, [1], [1], offset, ref.memory_space), ())


def identity_exprs(rank: int) -> tuple[AffineExpr, ...]:
    return tuple(AffineDimExpr(d) for d in range(rank))
