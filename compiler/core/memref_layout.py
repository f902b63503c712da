"""Where each element of a kernel's memref argument lives in its buffer.

Element (i0, ..., in) of a memref is at `offset + sum(ik * strides[k])` elements from the start of
the buffer the kernel is given. The identity layout is row-major with offset 0; `strided<[...],
offset: o>` names strides and offset explicitly (column-major A, padded rows, a window of a larger
array). Kernels are specialised on static shapes, so dynamic sizes, strides or offsets are refused,
and so are other affine maps, zero or negative strides and layouts where two elements share a
place (a store through them would race).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np
from xdsl.dialects.builtin import AffineMapAttr, MemRefType, NoneAttr, StridedLayoutAttr
from xdsl.ir.affine import AffineMap


@dataclass(frozen=True)
class StridedLayout:
    """A static strided layout: `shape`, `strides` (elements per step of each index) and
    `offset` (elements before element 0)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @property
    def span(self) -> int:
        """Elements the buffer must hold: one past the farthest element."""
        return self.offset + sum((d - 1) * s for d, s in zip(self.shape, self.strides)) + 1

    def positions(self) -> np.ndarray:
        """The buffer position of every element, as an int64 array of `shape`."""
        pos = np.full(self.shape, self.offset, dtype=np.int64)
        for axis, (d, s) in enumerate(zip(self.shape, self.strides)):
            step = [1] * len(self.shape)
            step[axis] = d
            pos = pos + (np.arange(d, dtype=np.int64) * s).reshape(step)
        return pos

    def overlaps(self) -> bool:
        """Whether two elements share a buffer position."""
        reach = 1  # elements spanned by the dimensions of smaller stride seen so far
        for s, d in sorted((s, d) for d, s in zip(self.shape, self.strides) if d > 1):
            if s < reach:  # not nested: decide by listing the positions
                return int(np.unique(self.positions()).size) != prod(self.shape)
            reach = s * (d - 1) + reach
        return False


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The identity layout's strides."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return tuple(strides)


def strided_layout(ref: MemRefType) -> StridedLayout:
    """The layout of a memref type, or a ValueError saying why tilemma cannot address it."""
    shape = tuple(ref.get_shape())
    if any(d < 0 for d in shape):
        raise ValueError(f"{ref} has a dynamic size; kernel arguments need static shapes")
    layout = ref.layout
    if isinstance(layout, NoneAttr) or (
        isinstance(layout, AffineMapAttr) and layout.data == AffineMap.identity(len(shape))
    ):
        return StridedLayout(shape, row_major(shape), 0)
    if not isinstance(layout, StridedLayoutAttr):
        raise ValueError(
            f"{ref}: layout {layout} is not supported; use the identity layout or "
            f"strided<[...], offset: ...> with static values"
        )
    strides, offset = tuple(layout.get_strides()), layout.get_offset()
    if len(strides) != len(shape):
        raise ValueError(f"{ref}: {len(strides)} strides for a rank {len(shape)} memref")
    if None in strides or offset is None:
        what = "stride" if None in strides else "offset"
        raise ValueError(f"{ref} has a dynamic {what}; tilemma needs static strides and offset")
    if any(s <= 0 for s in strides) or offset < 0:
        raise ValueError(f"{ref}: strides must be positive and the offset not negative")
    result = StridedLayout(shape, strides, offset)  # type: ignore[arg-type]
    if result.overlaps():
        raise ValueError(f"{ref}: strides {list(strides)} make elements share a place")
    return result
