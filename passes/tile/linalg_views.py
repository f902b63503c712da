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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    AffineMapAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    Signedness,
    StridedLayoutAttr,
)
from xdsl.ir import Attribute
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap

from tilemma.compiler.core.memref_layout import row_major


@dataclass(frozen=True)
class View:
    """A read of an argument: its retyped memref and, for each of that memref's dimensions, the
    tile dimension it runs along (increasing)."""

    ref: MemRefType
    dims: tuple[int, ...]


def static_strides(ref: MemRefType) -> tuple[tuple[int, ...], int]:
    """(strides, offset) of a memref type, zero strides allowed; ValueError where they are not
    static or not strided."""
    shape = tuple(ref.get_shape())
    if any(d < 0 for d in shape):
        raise ValueError(f"{ref} has a dynamic shape; tilemma needs static shapes")
    layout = ref.layout
    if isinstance(layout, NoneAttr) or (
        isinstance(layout, AffineMapAttr) and layout.data == AffineMap.identity(len(shape))
    ):
        return row_major(shape), 0
    if not isinstance(layout, StridedLayoutAttr):
        raise ValueError(f"{ref}: layout {layout} is not supported; use the identity layout or strided<[...]>")
    strides, offset = tuple(layout.get_strides()), layout.get_offset()
    if None in strides or offset is None:
        raise ValueError(f"{ref} has a dynamic stride or offset; tilemma needs static ones")
    if any(s < 0 for s in strides) or offset < 0:  # type: ignore[operator]
        raise ValueError(f"{ref}: strides and offset must not be negative")
    return strides, offset  # type: ignore[return-value]


def memref_type(element: Attribute, shape: Sequence[int], strides: Sequence[int], offset: int,
                memory_space: Attribute) -> MemRefType:
    """The memref type of a view, with the identity layout where the strides are row-major."""
    if tuple(strides) == row_major(tuple(shape)) and offset == 0:
        return MemRefType(element, list(shape), NoneAttr(), memory_space)
    return MemRefType(element, list(shape), StridedLayoutAttr(list(strides), offset), memory_space)


def tile_element(t: Attribute, signedness: Signedness = Signedness.SIGNED) -> Attribute:
    """The tile element type of a memref element: signless integers are read with `signedness`
    (linalg's cast_signed by default)."""
    if isinstance(t, IntegerType) and t.signedness.data == Signedness.SIGNLESS and t.width.data != 1:
        return IntegerType(t.width.data, signedness)
    return t


def view(ref: MemRefType, exprs: Sequence[AffineExpr], tile_dim: dict[int, int], element: Attribute) -> View:
    """The view through which a read reaches `ref`: `exprs` index its dimensions, loop d being
    tile dimension `tile_dim[d]`. ValueError (a sentence) where no view can say it."""
    shape = tuple(ref.get_shape())
    strides, offset = static_strides(ref)
    kept: list[tuple[int, int, int]] = []  # (tile dimension, size, stride)
    for i, (e, size, stride) in enumerate(zip(exprs, shape, strides)):
        if isinstance(e, AffineConstantExpr):
            if not 0 <= e.value < size:
                raise ValueError(f"dimension {i} is read at {e.value}, outside its size {size}")
            offset += e.value * stride
        elif isinstance(e, AffineDimExpr) and e.position in tile_dim:
            if stride != 0 or size == 1:
                kept.append((tile_dim[e.position], size, stride))
        else:
            raise ValueError(
                f"dimension {i} is indexed by {e}: a loop of the tile or a constant can index "
                f"a dimension, not an expression")
    kept.sort()
    if len({t for t, _, _ in kept}) != len(kept):
        raise ValueError("two dimensions are indexed by one loop (a diagonal), which no strided view reads")
    if kept:
        new = memref_type(element, [s for _, s, _ in kept], [s for _, _, s in kept], offset, ref.memory_space)
        return View(new, tuple(t for t, _, _ in kept))
    # One element (every dimension repeats or is read at a constant): a scalar.
    if all(d == 1 for d in shape) and offset == static_strides(ref)[1]:
        return View(MemRefType(element, list(shape), ref.layout, ref.memory_space), ())
    return View(memref_type(element, [1], [1], offset, ref.memory_space), ())


def identity_exprs(rank: int) -> tuple[AffineExpr, ...]:
    return tuple(AffineDimExpr(d) for d in range(rank))
