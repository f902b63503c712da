"""How a warp-level window op addresses its memref: strides and offset from the memref's layout
(identity or `strided<[...], offset: ...>`), seen as (batch, row, col) strides of the tile."""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType

from tilemma.compiler.core.memref_layout import strided_layout

from tilemma.dialects.tile import element_name
from tilemma.passes.warp_to_ptx.fragment_io import Window


def window_of(op) -> Window:
    """The Window of a warp.load / warp.store / warp.load_sparse_a / warp.load_scale."""
    ref = op.ref.type
    assert isinstance(ref, MemRefType)
    layout = strided_layout(ref)  # read_kernel refused what it cannot address
    strides, offset = layout.strides, layout.offset
    window, extent = op.window_values(), op.extent_values()
    batch_stride = strides[0] if len(strides) == 3 and extent[0] > 1 else 0
    base = offset + sum(o * s for o, s in zip(window, strides))
    return Window(element_name(ref.element_type), (batch_stride, strides[-2], strides[-1]), base, extent,
                  op.in_bounds_values(), op.col_align_value())
