"""`tile.transpose_view`: a kernel argument seen with its last two dimensions exchanged.

A GEMM can be computed as its transpose, D^T = B^T A^T, where that suits the instructions better
(`tile-transpose-product`: an 8-bit A stored K-major with a B stored N-major becomes an M-major
A', which the warpgroups take from registers, times a K-major B'). The kernel's arguments stay as
the caller passes them; its tiles read and write them through transposed views, as MLIR's
`memref.transpose` makes one: the same buffer and offset, the last two sizes and strides
exchanged. Everything after reads a view's strides from its type, as an argument's.
"""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType, StridedLayoutAttr
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.core.memref_layout import DYNAMIC, layout_values


def transposed_type(ref: MemRefType) -> MemRefType:
    """`ref` with its last two dimensions exchanged: sizes and strides (`?` kept), the offset kept;
    a ValueError for a rank below 2 or a layout tilemma cannot address."""
    shape = list(ref.get_shape())
    if len(shape) < 2:
        raise ValueError(f"{ref}: a transposed view needs 2 or more dimensions")
    strides, offset = layout_values(ref)
    strides = list(strides)
    shape[-2:], strides[-2:] = shape[:-3:-1], strides[:-3:-1]
    layout = StridedLayoutAttr([None if s == DYNAMIC else s for s in strides], offset)
    return MemRefType(ref.element_type, shape, layout, ref.memory_space)


@irdl_op_definition
class TransposeViewOp(IRDLOperation):
    """`tile.transpose_view %m : memref<...xRxC> -> memref<...xCxR, strided<...>>`: the same
    buffer, its last two dimensions exchanged (`transposed_type`)."""

    name = "tile.transpose_view"
    source = operand_def(MemRefType)
    result = result_def(MemRefType)
    traits = traits_def(Pure())

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue):
        assert isinstance(source.type, MemRefType)
        super().__init__(operands=[source], result_types=[transposed_type(source.type)])

    def verify_(self) -> None:
        ref = self.source.type
        assert isinstance(ref, MemRefType)
        try:
            want = transposed_type(ref)
        except ValueError as e:
            raise VerifyException(f"tile.transpose_view: {e}") from None
        if self.result.type != want:
            raise VerifyException(f"tile.transpose_view: {ref} transposed is {want}, not {self.result.type}")
