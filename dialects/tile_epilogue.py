"""The `tile` ops that work on a result after the mma: `tile.map`, `tile.yield`, `tile.broadcast`.

Elementwise work is written as MLIR writes it: `tile.map` applies a body of scalar `arith` and
`math` ops (the body of a `linalg.map` / elementwise `linalg.generic`) to every element of its
input tiles, which have one shape. Scalars are `arith.constant`s in the body; a row or column
vector (a per-column bias `b[n]`, a per-row scale `s[m]`) or a one-element memref (a scalar
kernel argument) becomes a whole tile by `tile.broadcast`, which names, for each memref
dimension, the tile dimension it runs along (MLIR's indexing map `(d0, d1) -> (d1)` is
`dims [1]`). Why a region of `arith`/`math` rather than one `tile` op per operation: the
frontends' bodies move over unchanged, every scalar semantic is MLIR's own, and `arith`'s
verifiers would refuse `!tile.tile` operands anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IntegerType, MemRefType, Signedness, i64
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.dialects.attributes import element_name
from tilemma.dialects.tile_types import DYNAMIC, TileType, shape_str

# Tile elements a map body sees, as scalars: MLIR's arith works on signless integers.
MAP_ELEMENTS = ("f16", "bf16", "f32", "f64", "si32")


def scalar_type(tile_element: str) -> Attribute:
    """The body's scalar type for a tile element (si32 -> i32; floats as they are)."""
    if tile_element == "si32":
        return IntegerType(32)
    from tilemma.dialects.attributes import element_type

    return element_type(tile_element)


def tile_element(scalar: Attribute) -> str | None:
    """The tile element a body scalar type stands for (None: not one a map can take)."""
    if isinstance(scalar, IntegerType):
        return "si32" if scalar.width.data == 32 and scalar.signedness.data == Signedness.SIGNLESS else None
    name = element_name(scalar)
    return name if name in MAP_ELEMENTS else None


def _tiles(values: Sequence[SSAValue], what: str) -> list[TileType]:
    out = []
    for v in values:
        if not isinstance(v.type, TileType):
            raise VerifyException(f"tile.map: every {what} must be a !tile.tile, got {v.type}")
        out.append(v.type)
    return out


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The values of one element of each `tile.map` result."""

    name = "tile.yield"
    values = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(MapOp), Pure()))

    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class MapOp(IRDLOperation):
    """Apply the body to every element of the inputs (all of one shape): result r's element at
    (i, j) is the body's r-th yielded value on the inputs' elements at (i, j).

        %y = tile.map %acc, %bias : !tile.tile<64x64xf32>, !tile.tile<64x64xf16>
                 -> !tile.tile<64x64xf16> {
        ^bb0(%x: f32, %b: f16):
          %bf = arith.extf %b : f16 to f32
          %s = arith.addf %x, %bf : f32
          %y = arith.truncf %s : f32 to f16
          tile.yield %y : f16
        }

    The body holds `arith` and `math` ops on scalars (f16, bf16, f32, f64, i32); which of them
    the lowering emits, and how exactly, is `tile-distribute-epilogue`'s table."""

    name = "tile.map"
    inputs = var_operand_def(TileType)
    outputs = var_result_def(TileType)
    body = region_def("single_block")
    traits = traits_def(Pure())

    def __init__(self, inputs: Sequence[SSAValue], result_types: Sequence[TileType], body: Region):
        super().__init__(operands=[list(inputs)], result_types=[list(result_types)], regions=[body])

    def verify_(self) -> None:
        ins, outs = _tiles(self.inputs, "input"), [r.type for r in self.outputs]
        if not ins:
            raise VerifyException("tile.map needs at least one input tile")
        if not outs:
            raise VerifyException("tile.map needs at least one result")
        shape = ins[0].get_shape()
        for t in [*ins, *outs]:
            if not isinstance(t, TileType) or t.get_shape() != shape:
                raise VerifyException(
                    f"tile.map: every input and result must be a {shape_str(shape)} tile, got {t}")
            if t.element not in MAP_ELEMENTS:
                raise VerifyException(
                    f"tile.map: {t.element} tiles cannot be mapped; map elements are "
                    f"{', '.join(MAP_ELEMENTS)} (convert others with tile.cast)")
        block = self.body.block
        want = [scalar_type(t.element) for t in ins]
        got = [a.type for a in block.args]
        if got != want:
            raise VerifyException(
                f"tile.map: the body's arguments must be the inputs' elements "
                f"({', '.join(map(str, want))}), got ({', '.join(map(str, got))})")
        term = block.last_op
        if not isinstance(term, YieldOp):
            raise VerifyException("tile.map: the body must end with tile.yield")
        yielded = [v.type for v in term.values]
        want = [scalar_type(t.element) for t in outs]  # type: ignore[union-attr]
        if yielded != want:
            raise VerifyException(
                f"tile.map: tile.yield must give the results' elements ({', '.join(map(str, want))}), "
                f"got ({', '.join(map(str, yielded))})")
        for op in block.ops:
            if op is term:
                continue
            dialect = op.name.split(".")[0]
            if dialect not in ("arith", "math"):
                raise VerifyException(
                    f"tile.map: the body holds arith and math ops on scalars, not {op.name}")
            for v in (*op.operands, *op.results):
                if tile_element(v.type) is None and not (
                        isinstance(v.type, IntegerType) and v.type.width.data == 1):
                    raise VerifyException(
                        f"tile.map: {op.name} works on {v.type}; body values are "
                        f"f16, bf16, f32, f64, i32 (and i1 conditions)")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list((v.type for v in self.inputs), printer.print_attribute)
        printer.print_string(" -> ")
        printer.print_list((r.type for r in self.outputs), printer.print_attribute)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> MapOp:
        names: list[UnresolvedOperand] = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        if len(types) != len(names):
            parser.raise_error(f"tile.map: {len(names)} inputs but {len(types)} types")
        parser.parse_punctuation("->")
        results = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        body = parser.parse_region()
        op = cls([parser.resolve_operand(n, t) for n, t in zip(names, types)], results, body)
        op.attributes |= attrs
        return op

    @staticmethod
    def build(inputs: Sequence[SSAValue], result_types: Sequence[TileType], fill) -> MapOp:
        """A map whose body `fill(args) -> list of yielded values` builds (it adds its ops to
        the block it is given as `args[0].owner`)."""
        block = Block(arg_types=[scalar_type(v.type.element) for v in inputs])  # type: ignore[union-attr]
        values = fill(block)
        block.add_op(YieldOp(*values))
        return MapOp(inputs, result_types, Region(block))


@irdl_op_definition
class BroadcastOp(IRDLOperation):
    """A tile whose elements repeat a memref window along the dimensions `dims` leaves out:
    memref dimension i runs along tile dimension `dims[i]`, from static offset `offsets[i]`.

        tile.broadcast %bias[0] dims [1] : memref<91xf16> -> !tile.tile<37x91xf16>   // b[n]
        tile.broadcast %scale[0] dims [0] : memref<37xf32> -> !tile.tile<37x91xf32>  // s[m]
        tile.broadcast %alpha[0] dims [] : memref<1xf32> -> !tile.tile<37x91xf32>    // a scalar

    (A one-element memref with `dims []` is a scalar argument.)"""

    name = "tile.broadcast"
    source = operand_def(MemRefType)
    offsets = prop_def(DenseArrayBase)
    dims = prop_def(DenseArrayBase)
    result = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, offsets: Sequence[int], dims: Sequence[int], result_type: TileType):
        super().__init__(
            operands=[source], result_types=[result_type],
            properties={"offsets": DenseArrayBase.from_list(i64, list(offsets)),
                        "dims": DenseArrayBase.from_list(i64, list(dims))})

    def offset_values(self) -> tuple[int, ...]:
        return tuple(self.offsets.get_values())

    def dim_values(self) -> tuple[int, ...]:
        return tuple(self.dims.get_values())

    def verify_(self) -> None:
        ref, res = self.source.type, self.result.type
        assert isinstance(ref, MemRefType) and isinstance(res, TileType)
        mshape, shape = tuple(ref.get_shape()), res.get_shape()
        offsets, dims = self.offset_values(), self.dim_values()
        scalar = not dims and all(d == 1 for d in mshape)
        if len(offsets) != len(mshape):
            raise VerifyException(f"tile.broadcast: {len(offsets)} offsets for a rank {len(mshape)} memref")
        if len(dims) != len(mshape) and not scalar:
            raise VerifyException(
                f"tile.broadcast: dims names the tile dimension of each of the memref's {len(mshape)} "
                f"dimensions, got {len(dims)} (a scalar is a one-element memref with dims [])")
        if list(dims) != sorted(set(dims)) or any(not 0 <= d < len(shape) for d in dims):
            raise VerifyException(
                f"tile.broadcast: dims must be increasing tile dimensions (0..{len(shape) - 1}), got "
                f"[{', '.join(map(str, dims))}]")
        for i, (o, m) in enumerate(zip(offsets, mshape)):
            extent = shape[dims[i]] if not scalar else 1
            if DYNAMIC in (m, extent):  # a size known at launch: the whole dimension, from 0
                if m != extent or o != 0:
                    raise VerifyException(
                        f"tile.broadcast: a ? dimension of the memref runs along a ? dimension of the "
                        f"tile from offset 0, got memref dimension {i} of {ref} at offset {o} along a "
                        f"tile dimension of {shape_str(shape)}")
                continue
            if o < 0 or o + extent > m:
                raise VerifyException(
                    f"tile.broadcast: {extent} elements from offset {o} leave memref dimension {i} "
                    f"of size {m} ({ref})")
        if element_name(ref.element_type) != res.element or ELEMENTS[res.element].storage_bits < 8:
            raise VerifyException(
                f"tile.broadcast: memref element {element_name(ref.element_type)} must be the tile's "
                f"element {res.element} (of at least 8 bits)")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string("[" + ", ".join(map(str, self.offset_values())) + "]")
        printer.print_string(" dims [" + ", ".join(map(str, self.dim_values())) + "]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> BroadcastOp:
        source = parser.parse_unresolved_operand()
        offsets = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        parser.parse_keyword("dims")
        dims = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        src_type = parser.parse_type()
        parser.parse_punctuation("->")
        res_type = parser.parse_type()
        if not isinstance(res_type, TileType):
            parser.raise_error(f"tile.broadcast must produce a !tile.tile, got {res_type}")
        op = cls(parser.resolve_operand(source, src_type), offsets, dims, res_type)
        op.attributes |= attrs
        return op


EPILOGUE_OPS = (MapOp, YieldOp, BroadcastOp)
