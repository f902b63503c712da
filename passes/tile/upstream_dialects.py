"""xDSL's `linalg` and `memref` dialects as tilemma loads them: what bufferized frontend IR holds,
spelled and computed as MLIR does.

xDSL 0.74's `linalg.matmul` multiplies in the operands' type and adds that to the accumulator,
so a mixed-precision matmul (f16 x f16 -> f32, i8 x i8 -> i32, what every frontend emits) does
not verify; it does not parse the upstream `indexing_maps = [...]` spelling of a transposed
operand, and prints an op parsed with other maps as the default matmul (dropping the
transposition); and it has no `linalg.batch_matmul`. `MatmulOp` and `BatchMatmulOp` here are
xDSL's IRDL ops with MLIR's body (each operand converted to the output's element type first:
linalg's `cast_signed`), MLIR's syntax and printing. xDSL's `memref.copy` has only the
generic syntax; `CopyOp` here reads and prints MLIR's `memref.copy %a, %b : T to T` (what
`--buffer-results-to-out-params` writes). `LINALG` and `MEMREF` are the dialects with them,
which `tilemma-opt`, `tilemma` and (through the `xdsl.universe` entry point,
`compiler/universe.py`) plain `xdsl-opt` load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.builder import Builder
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.dialects.linalg import Linalg
from xdsl.dialects.linalg import ops as linalg
from xdsl.dialects.linalg.abstract_ops import NamedOperation
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import irdl_op_definition, prop_def
from xdsl.parser import Parser
from xdsl.printer import Printer


def convert_scalar(value: SSAValue, to: Attribute) -> SSAValue:
    """`value` as element type `to`, with the arith op linalg's `cast_signed` uses."""
    src = value.type
    if src == to:
        return value
    if isinstance(src, AnyFloat) and isinstance(to, AnyFloat):
        wider = to.bitwidth > src.bitwidth
        return (arith.ExtFOp(value, to) if wider else arith.TruncFOp(value, to)).result
    if isinstance(src, IntegerType) and isinstance(to, IntegerType):
        if to.width.data < src.width.data:
            return arith.TruncIOp(value, to).result
        unsigned = src.signedness.data == Signedness.UNSIGNED
        return (arith.ExtUIOp(value, to) if unsigned else arith.ExtSIOp(value, to)).result
    if isinstance(src, IntegerType) and isinstance(to, AnyFloat):
        return arith.SIToFPOp(value, to).result
    raise ValueError(f"linalg: no conversion from {src} to {to}")


def _contraction_body(arg_types: Sequence[Attribute]) -> Region:
    """acc + cast(a) * cast(b), each operand converted to the accumulator's type first."""
    out = arg_types[-1]
    add, mul = (arith.AddfOp, arith.MulfOp) if isinstance(out, AnyFloat) else (arith.AddiOp, arith.MuliOp)

    @Builder.implicit_region(arg_types)
    def body(args: tuple[BlockArgument, ...]) -> None:
        product = mul(convert_scalar(args[0], out), convert_scalar(args[1], out))
        linalg.YieldOp(add(args[2], product))

    return body


class _Contraction:
    """MLIR's syntax for the named contractions: `indexing_maps = [...]` before `ins`, printed
    only where it is not the default."""

    PRINT_ATTRS_IN_FRONT: ClassVar[bool] = True

    @classmethod
    def get_hidden_region(cls, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Region:
        operands = (*inputs, *outputs)
        if len(operands) != 3:  # the verifier says what is wrong; give it a body to look at
            return Region(Block(arg_types=NamedOperation.body_arg_types(operands)))
        return _contraction_body(NamedOperation.body_arg_types(operands))

    @classmethod
    def parse(cls, parser: Parser):
        maps = None
        if parser.parse_optional_keyword("indexing_maps") is not None:
            parser.parse_punctuation("=")
            at = parser.pos
            maps = parser.parse_attribute()
            if not isinstance(maps, ArrayAttr) or not all(isinstance(m, AffineMapAttr) for m in maps.data):
                parser.raise_error(f"{cls.name}: indexing_maps must be a list of affine maps", at, parser.pos)
        op = super().parse(parser)  # type: ignore[misc]
        if maps is not None:
            op.properties["indexing_maps"] = maps
        return op

    def print(self, printer: Printer) -> None:
        maps = self.properties.get("indexing_maps")  # type: ignore[attr-defined]
        default = type(self).get_irdl_definition().properties["indexing_maps"].default_value  # type: ignore[attr-defined]
        if maps is not None and maps != default:
            printer.print_string(" indexing_maps = ")
            printer.print_attribute(maps)
        super().print(printer)  # type: ignore[misc]


class MatmulOp(_Contraction, linalg.MatmulOp):
    """linalg.matmul with MLIR's body (operands converted to the output's element type before
    multiplying) and syntax. The op is xDSL's, IRDL definition included."""


def _maps(*results: tuple[int, ...], dims: int) -> ArrayAttr:
    from xdsl.ir.affine import AffineDimExpr

    return ArrayAttr([AffineMapAttr(AffineMap(dims, 0, tuple(AffineDimExpr(d) for d in r))) for r in results])


@irdl_op_definition
class BatchMatmulOp(_Contraction, NamedOperation):
    """`linalg.batch_matmul`: C[b, m, n] += A[b, m, k] * B[b, k, n] (xDSL 0.74 lacks it), with
    MLIR's body and `indexing_maps`."""

    name = "linalg.batch_matmul"

    indexing_maps = prop_def(
        ArrayAttr[AffineMapAttr],
        default_value=_maps((0, 1, 3), (0, 3, 2), (0, 1, 2), dims=4),
    )

    def __init__(self, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue] = (),
                 res: Sequence[Attribute] | None = None, attributes: dict[str, Attribute] | None = None):
        if res is None:
            res = tuple(o.type for o in outputs if isinstance(o.type, TensorType))
        super().__init__(ins=inputs, outs=outputs, result_types=res, attributes=attributes,
                         hidden_region=self.get_hidden_region(inputs, outputs))

    def get_default_indexing_maps(self) -> Sequence[AffineMap]:
        return tuple(m.data for m in self.indexing_maps.data)

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        return self.indexing_maps

    def get_iterator_types(self) -> ArrayAttr[IteratorTypeAttr]:
        p, r = IteratorTypeAttr.parallel(), IteratorTypeAttr.reduction()
        return ArrayAttr([p, p, p, r])


# xDSL's linalg dialect with the contractions above: what tilemma's parsers (and xdsl-opt with
# the plugin) load.
LINALG = Dialect(
    "linalg",
    [MatmulOp if op is linalg.MatmulOp else op for op in Linalg.operations] + [BatchMatmulOp],
    list(Linalg.attributes),
)


class CopyOp(memref.CopyOp):
    """memref.copy with MLIR's syntax: `memref.copy %src, %dst : memref<..> to memref<..>`."""

    @classmethod
    def parse(cls, parser: Parser) -> CopyOp:
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        dest = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        source_type = parser.parse_type()
        parser.parse_keyword("to")
        dest_type = parser.parse_type()
        op = cls(parser.resolve_operand(source, source_type), parser.resolve_operand(dest, dest_type))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(", ")
        printer.print_operand(self.destination)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" to ")
        printer.print_attribute(self.destination.type)


MEMREF = Dialect(
    "memref",
    [CopyOp if op is memref.CopyOp else op for op in memref.MemRef.operations],
    list(memref.MemRef.attributes),
)
