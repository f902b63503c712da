"""How a warp-level window op addresses its memref: strides and offset from the memref's layout
(identity or `strided<[...], offset: ...>`), seen as (batch, row, col) strides of the tile."""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType, NoneAttr, StridedLayoutAttr

from tilemma.dialects.tile import element_name
from tilemma.passes.fragment_io import Window


def memref_strides(ref: MemRefType) -> tuple[tuple[int, ...], int]:
    """(strides, offset) in elements; ValueError for layouts that are not static strides."""
    shape = tuple(ref.get_shape())
    layout = ref.layout
    if isinstance(layout, NoneAttr):
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        return tuple(strides), 0
    if isinstance(layout, StridedLayoutAttr):
        strides = layout.get_strides()
        offset = layout.get_offset()
        if any(s is None for s in strides) or offset is None:
            raise ValueError(f"{ref}: dynamic strides or offsets are not supported")
        return tuple(strides), offset  # type: ignore[return-value]
    raise ValueError(f"{ref}: only the identity layout and strided<[...], offset: ...> are supported")


def window_of(op) -> Window:
    """The Window of a warp.load / warp.store / warp.load_sparse_a / warp.load_scale."""
    ref = op.ref.type
    assert isinstance(ref, MemRefType)
    strides, offset = memref_strides(ref)
    window, extent = op.window_values(), op.extent_values()
    batch_stride = strides[0] if len(strides) == 3 and extent[0] > 1 else 0
    base = offset + sum(o * s for o, s in zip(window, strides))
    return Window(element_name(ref.element_type), (batch_stride, strides[-2], strides[-1]), base, extent,
                  op.in_bounds_values())
