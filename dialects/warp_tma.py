"""The `warp` op of the Hopper tensor-memory accelerator: `warp.copy_tma`, one thread's copy of a
whole stage (a box of a global window) into a shared buffer, counted against an mbarrier.

Where a warp-specialized kernel's producers issue `warp.copy_async` (every producer thread a
share of the chunks, a group, a wait and an arrival a stage), one producer thread issues
`warp.copy_tma` and the TMA unit moves the box by itself (`cp.async.bulk.tensor`). The bytes
land on the stage's `full` mbarrier as transactions: the thread first expects them
(`warp.mbarrier_expect_tx`), and the barrier's phase completes once they are in. The copy reads
its window through a tensor map, a kernel parameter the lowering adds for the memref argument
(`compiler/runtime/tensor_map.py`); elements outside the window's extent arrive as zeros.

The box is the destination's stage (rows x cols, each at most 256); the shared layout is the
TMA's swizzle: a row-major stage (none) or `#warp.swizzled<1>` of 32-, 64- or 128-byte rows, which
is the TMA's swizzle of that span on a stage aligned to 1024 bytes (`tma_swizzle`). A swizzle
spans at most 128 bytes, so a stage wider than that along the window's contiguous dimension is
several buffers of one span each; with `blocks = N` one copy fills N of them (`warp-tma-blocks`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DYNAMIC_INDEX, DenseArrayBase, IndexType, IntegerAttr, MemRefType, NoneAttr, UnitAttr, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from tilemma.dialects.attributes import element_bits, element_name
from tilemma.dialects.swizzle import SwizzledLayoutAttr, row_bytes
from tilemma.dialects.warp import _ints, _WindowOp
from tilemma.dialects.warp_mbarrier import CLUSTERS, _barriers
from tilemma.dialects.warp_shared import _shared_stage

TMA_MAX_BOX = 256  # elements a box dimension (cuTensorMapEncodeTiled's boxDim)
TMA_SWIZZLES = (32, 64, 128)  # the spans of CU_TENSOR_MAP_SWIZZLE_32B / 64B / 128B


def tma_swizzle(ref: MemRefType) -> int | None:
    """The TMA swizzle span (bytes; 0: none) that writes a stage buffer in its layout, None where
    none does: a row-major stage is written unswizzled; `#warp.swizzled<1>` (no fold) of 32-,
    64- or 128-byte rows keeps granule g of row r at g ^ (r / (128 / row bytes) mod row bytes /
    16), which is the TMA's swizzle of the row's span on absolute address bits (granule bits XOR
    bits 7-9) where the stage starts 1024-byte aligned."""
    layout = ref.layout
    if isinstance(layout, NoneAttr):
        return 0
    if isinstance(layout, SwizzledLayoutAttr) and layout.mult.data == 1 and not layout.fold.data \
            and row_bytes(ref) in TMA_SWIZZLES:
        return row_bytes(ref)
    return None


@irdl_op_definition
class CopyTmaOp(_WindowOp):
    """`warp.copy_tma %ref[%batch, %row, %col], %dest[%stage], %bars[%slot] {thread = T}`: thread
    T of the CTA copies the stage-sized box of the window at (batch, row, col) into stage `stage`
    of `dest` (cp.async.bulk.tensor), its bytes completing as transactions on barrier `slot` of
    `bars`. With `transpose` the stage holds the box's transpose, for a window whose rows are
    contiguous (its shared rows run along the window's columns), as `warp.copy_async`'s. With
    `multicast = N` (a cluster of N CTAs that share the window), only the CTA of cluster rank
    `rank` issues it, and the box lands in every CTA of the cluster, on each one's barrier.

    With `blocks = N` it fills stages stage .. stage + N - 1, stage + j with the box whose index
    along the window's contiguous dimension (col; row with `transpose`) is j stage widths on, as
    one copy of a three-dimensional box (the stage's width, its height, N widths): one TMA
    instruction where there would be N. The width is then a power of two (a swizzle's span), the
    window's contiguous extent whole widths, so that no width reads past it, and that index a
    multiple of the width (which `warp-tma-blocks` proves before it merges copies)."""

    name = "warp.copy_tma"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    dest = operand_def(MemRefType)
    stage = operand_def(IndexType)
    bars = operand_def(MemRefType)
    slot = operand_def(IndexType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)  # (the window's; the TMA bounds every copy itself)
    thread = prop_def(IntegerAttr)
    transpose = opt_prop_def(UnitAttr)
    # in a cluster of `multicast` CTAs: issued by the CTA of rank `rank`, written to every CTA's
    # stage (the same offset) and counted on every CTA's barrier
    multicast = opt_prop_def(IntegerAttr)
    rank = opt_prop_def(IntegerAttr)
    blocks = opt_prop_def(IntegerAttr)  # stages filled by one copy: N spans of the contiguous dimension
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = ("$ref `[` $indices `]` `,` $dest `[` $stage `]` `,` $bars `[` $slot `]` attr-dict `:` "
                       "type($ref) `,` type($dest) `,` type($bars)")

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], dest: SSAValue, stage: SSAValue, bars: SSAValue,
                 slot: SSAValue, window: Sequence[int], extent: Sequence[int], thread: int, transpose: bool = False):
        props: dict[str, Attribute] = {"window": _ints(window), "extent": _ints(extent),
                                       "thread": IntegerAttr(thread, i64)}
        if transpose:
            props["transpose"] = UnitAttr()
        super().__init__(operands=[ref, indices, dest, stage, bars, slot], properties=props)

    @property
    def box_bytes(self) -> int:
        """Bytes the copy writes (the whole stage, zeros where the box leaves the window): the
        transactions its barrier expects."""
        _, rows, cols = self.dest.type.get_shape()  # type: ignore[union-attr]
        bits = element_bits(element_name(self.dest.type.element_type))  # type: ignore[union-attr]
        return self.block_count * rows * cols * bits // 8

    @property
    def block_count(self) -> int:
        """The stages the copy fills (`blocks`; 1 where it has none)."""
        return 1 if self.blocks is None else self.blocks.value.data

    def verify_(self) -> None:
        self.verify_window(self.ref.type, self.indices)
        dest = _shared_stage(self.dest.type, "warp.copy_tma destination")
        _barriers(self.bars.type, "warp.copy_tma barriers")
        if dest.element_type != self.ref.type.element_type:  # type: ignore[union-attr]
            raise VerifyException("warp.copy_tma: source and destination element types differ")
        bits = element_bits(element_name(dest.element_type))
        if bits < 8:
            raise VerifyException("warp.copy_tma: the TMA moves whole bytes; sub-byte elements stay on cp.async")
        _, rows, cols = dest.get_shape()
        if not (1 <= rows <= TMA_MAX_BOX and 1 <= cols <= TMA_MAX_BOX) or cols * bits % 128:
            raise VerifyException(f"warp.copy_tma: a stage of {rows} x {cols} is no TMA box (each side 1 to "
                                  f"{TMA_MAX_BOX} elements, rows of a multiple of 16 bytes)")
        if tma_swizzle(dest) is None:
            raise VerifyException(f"warp.copy_tma: no TMA swizzle writes the layout {dest.layout} "
                                  f"({row_bytes(dest)}-byte rows; row-major, or #warp.swizzled<1> of 32, 64 "
                                  "or 128-byte rows)")
        if DYNAMIC_INDEX in self.extent_values():
            raise VerifyException("warp.copy_tma: the window's extent is static (its tensor map is made at compile "
                                  "time)")
        if self.thread.value.data < 0:
            raise VerifyException("warp.copy_tma: thread is a thread of the CTA (0 or more)")
        if self.blocks is not None:
            n, t = self.blocks.value.data, self.transpose is not None
            extent = self.extent_values()[1 if t else 2]  # along the window's contiguous dimension
            if not 2 <= n <= TMA_MAX_BOX:
                raise VerifyException(f"warp.copy_tma: blocks is 2 to {TMA_MAX_BOX} stages, not {n}")
            if cols & (cols - 1):
                raise VerifyException(f"warp.copy_tma: blocks of {cols} {'rows' if t else 'columns'}: a block is a "
                                      "swizzle's span, a power of two")
            if extent % cols:
                raise VerifyException(f"warp.copy_tma: blocks of {cols} {'rows' if t else 'columns'} need a window of "
                                      f"whole blocks; its extent is {extent}")
        if (self.multicast is None) != (self.rank is None) or (self.multicast is not None and not (
                self.multicast.value.data in CLUSTERS[1:] and 0 <= self.rank.value.data < self.multicast.value.data)):
            raise VerifyException(f"warp.copy_tma: a multicast names its cluster ({CLUSTERS[1:]} CTAs) and the rank "
                                  "in it that issues the copy")
