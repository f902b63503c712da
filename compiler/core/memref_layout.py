"""Where each element of a kernel's memref argument lives in its buffer.

Element (i0, ..., in) of a memref is at `offset + sum(ik * strides[k])` elements from the start of
the buffer the kernel is given. The identity layout is row-major with offset 0; `strided<[...],
offset: o>` names strides and offset explicitly (column-major A, padded rows, a window of a larger
array). Sizes and strides may be `?` (known at launch: `symbolic_layout`, bound by
`StridedLayout.bind`); a dynamic offset is refused, and so are other affine maps, zero or negative strides and layouts where two elements share a
place (a store through them would race).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from math import gcd, prod

import numpy as np
from xdsl.dialects.builtin import DYNAMIC_INDEX, AffineMapAttr, MemRefType, NoneAttr, StridedLayoutAttr
from xdsl.ir.affine import AffineMap

#: A `?` size or stride (MLIR's kDynamic).
DYNAMIC = DYNAMIC_INDEX


@dataclass(frozen=True)
class StridedLayout:
    """A static strided layout: `shape`, `strides` (elements per step of each index) and
    `offset` (elements before element 0)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @property
    def dynamic(self) -> bool:
        """Whether a size or stride is `?` (DYNAMIC), known only at launch."""
        return DYNAMIC in self.shape or DYNAMIC in self.strides

    def bind(self, shape: tuple[int, ...], strides: tuple[int, ...]) -> StridedLayout:
        """The static layout of a buffer with `shape` and `strides` (elements) passed for this one,
        or a ValueError saying where they disagree with its static sizes and strides or make
        elements share a place."""
        if len(shape) != len(self.shape) or len(strides) != len(self.strides):
            raise ValueError(f"rank {len(shape)}, expected {len(self.shape)}")
        for what, want, got in (("shape", self.shape, shape), ("strides", self.strides, strides)):
            for d, (w, g) in enumerate(zip(want, got)):
                if w != DYNAMIC and w != g and not (what == "strides" and shape[d] == 1):
                    raise ValueError(f"{what}[{d}] is {g}, expected {w}")
        if any(g <= 0 for g, w in zip(strides, self.strides) if w == DYNAMIC):
            raise ValueError(f"strides {list(strides)}: a ? stride must be positive")
        bound = StridedLayout(tuple(shape), tuple(w if w != DYNAMIC else g for w, g in zip(self.strides, strides)),
                              self.offset)
        if bound.overlaps():
            raise ValueError(f"strides {list(strides)} make elements share a place")
        return bound

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
        """Whether two elements share a buffer position: whether some index difference y, not
        all zero with |y_k| < shape[k], has sum(y_k * strides[k]) == 0. Decided arithmetically,
        never by listing the positions (a 16384^2 interleaved layout took 69 s and 5 GB that way);
        a ValueError where that would take long (an interleaving of more than three large
        dimensions)."""
        dims = [(s, d) for d, s in zip(self.shape, self.strides) if d > 1]
        reach = 1  # elements spanned by the dimensions of smaller stride seen so far
        for s, d in sorted(dims):
            if s < reach:  # not nested
                return _index_difference_vanishes(dims)
            reach = s * (d - 1) + reach
        return False


#: Index differences of the dimensions beyond the two largest that `overlaps` tries, at most.
_MAX_DIFFERENCES = 1 << 18


def _index_difference_vanishes(dims: list[tuple[int, int]]) -> bool:
    """Is there an integer y != 0, |y_k| <= d_k - 1, with sum(y_k s_k) == 0 for dims (s_k, d_k)
    (positive strides, extents > 1)?

    A dimension whose stride exceeds what all the others can reach has y = 0 and is dropped. Of
    the rest, the two of largest extent, p and q, are solved for in closed form (y_p s_p + y_q s_q
    = -r is a linear Diophantine equation: its solutions are one line, checked against both
    bounds), for each difference y of the others (r = their sum), one of each +-y pair."""
    g = gcd(*(s for s, _ in dims))
    dims = sorted(((s // g, d) for s, d in dims), reverse=True)
    while len(dims) > 1 and dims[0][0] > sum(s * (d - 1) for s, d in dims[1:]):
        dims = dims[1:]
    if len(dims) < 2:
        return False
    dims.sort(key=lambda sd: sd[1], reverse=True)
    (sp, dp), (sq, dq), rest = dims[0], dims[1], dims[2:]
    tries = prod(2 * d - 1 for _, d in rest)
    if tries > _MAX_DIFFERENCES:
        raise ValueError(f"{len(dims)} interleaved dimensions of {tries} index differences: tilemma does not "
                         "tell quickly whether elements share a place; use strides that nest (each at least what "
                         "the smaller ones span)")
    g2, u, _ = _extended_gcd(sp, sq)
    a, b = sp // g2, sq // g2

    def solvable(r: int, nonzero: bool) -> bool:
        """Is y_p a + y_q b = r / g2 solvable in the bounds (with (y_p, y_q) != 0 if `nonzero`)?"""
        if r % g2:
            return False
        r //= g2
        yp0 = (u * r) % b  # a particular solution, y_p reduced into [0, b)
        yq0 = (r - yp0 * a) // b
        # y_p = yp0 + t b, y_q = yq0 - t a
        lo = max(-((dp - 1 + yp0) // b), -((dq - 1 - yq0) // a))
        hi = min((dp - 1 - yp0) // b, (yq0 + dq - 1) // a)
        if lo > hi:
            return False
        return not nonzero or (yp0, yq0) != (0, 0) or lo < 0 or hi > 0 or lo != hi

    if solvable(0, nonzero=True):
        return True
    strides = [s for s, _ in rest]
    for y in product(*(range(-(d - 1), d) for _, d in rest)):
        first = next((v for v in y if v), 0)
        if first > 0 and solvable(-sum(v * s for v, s in zip(y, strides)), nonzero=False):
            return True
    return False


def _extended_gcd(a: int, b: int) -> tuple[int, int, int]:
    """(g, u, v) with u a + v b = g = gcd(a, b)."""
    u0, u1, v0, v1 = 1, 0, 0, 1
    while b:
        q, a, b = a // b, b, a % b
        u0, u1 = u1, u0 - q * u1
        v0, v1 = v1, v0 - q * v1
    return a, u0, v0


def symbolic_row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The identity layout's strides, `?` wherever a `?` size lies further in."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        inner = strides[i + 1]
        strides[i] = DYNAMIC if DYNAMIC in (inner, shape[i + 1]) else inner * shape[i + 1]
    return tuple(strides)


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The identity layout's strides."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return tuple(strides)


def strided_layout(ref: MemRefType) -> StridedLayout:
    """The layout of a static memref type, or a ValueError saying why tilemma cannot address it
    (a `?` size or stride among them: `symbolic_layout` admits those)."""
    layout = symbolic_layout(ref)
    if layout.dynamic:
        raise ValueError(f"{ref} has a dynamic size or stride; this needs static shapes")
    return layout


def is_identity(ref: MemRefType) -> bool:
    """Whether the memref has the identity layout: row-major and contiguous, whatever its sizes
    (a launch checks that a buffer for one with `?` sizes is contiguous; `strided<[?, 1]>` takes
    any row stride)."""
    layout = ref.layout
    return isinstance(layout, NoneAttr) or (
        isinstance(layout, AffineMapAttr) and layout.data == AffineMap.identity(len(ref.get_shape())))


def layout_values(ref: MemRefType) -> tuple[tuple[int, ...], int]:
    """(strides, offset) as the memref type writes them, `?` strides DYNAMIC (the identity
    layout's from `symbolic_row_major`), nothing else checked; a ValueError where tilemma cannot
    address the layout at all: an affine map that is not the identity, a rank mismatch, a dynamic
    offset (a view's start is the buffer's address). `symbolic_layout` checks the values too;
    a reader of stride-0 (broadcast) views takes them from here."""
    shape = tuple(DYNAMIC if d < 0 else d for d in ref.get_shape())
    layout = ref.layout
    if is_identity(ref):
        return symbolic_row_major(shape), 0
    if not isinstance(layout, StridedLayoutAttr):
        raise ValueError(
            f"{ref}: layout {layout} is not supported; use the identity layout or "
            f"strided<[...], offset: ...> with static values"
        )
    strides, offset = tuple(layout.get_strides()), layout.get_offset()
    if len(strides) != len(shape):
        raise ValueError(f"{ref}: {len(strides)} strides for a rank {len(shape)} memref")
    if offset is None:
        raise ValueError(f"{ref} has a dynamic offset; a view starts where its buffer does (pass the "
                         f"view's own address)")
    return tuple(DYNAMIC if s is None else s for s in strides), offset


def window_start(strides: tuple[int, ...], offset: int, starts) -> int:
    """Element offset of the first element of a window at index `starts` of a layout with these
    `strides` and `offset`; a ValueError where it would depend on a stride known only at launch
    (a window at a nonzero offset along a `?` stride)."""
    for d, (o, s) in enumerate(zip(starts, strides)):
        if o and s == DYNAMIC:
            raise ValueError(f"the window starts at offset {o} of dimension {d}, whose stride is ?: "
                             f"a window along a ? stride starts at 0 (pass the view that starts there)")
    return offset + sum(o * s for o, s in zip(starts, strides) if o)


def symbolic_layout(ref: MemRefType) -> StridedLayout:
    """The layout of a memref type whose sizes and strides may be `?` (DYNAMIC in `shape` and
    `strides`; the identity layout's strides are `?` from the innermost `?` size outwards), or a
    ValueError saying why tilemma cannot address it (`layout_values`; zero or negative strides, a
    negative offset, elements that share a place). The launch binds the `?`s
    (`StridedLayout.bind`) and checks there what cannot be checked here."""
    shape = tuple(DYNAMIC if d < 0 else d for d in ref.get_shape())
    strides, offset = layout_values(ref)
    if is_identity(ref):
        return StridedLayout(shape, strides, 0)
    if any(s <= 0 and s != DYNAMIC for s in strides) or offset < 0:
        raise ValueError(f"{ref}: strides must be positive and the offset not negative")
    result = StridedLayout(shape, strides, offset)
    if not result.dynamic and result.overlaps():  # a dynamic layout's is checked when bound
        raise ValueError(f"{ref}: strides {list(strides)} make elements share a place")
    return result
