"""The `tile` dialect: tile-level matmul IR with the `cuda::tiles` matmul/mma rules.

A kernel is a `func.func` whose arguments are memrefs; `tile.load`/`tile.store` move statically
shaped tiles (rank 2, or rank 3 for batches) between memrefs and values, `tile.matmul` and
`tile.mma` multiply them, `tile.cast` converts element types and `tile.constant` makes splats.
The verifiers enforce every rule of the CUDA Tile `matmul_compatible`/`mma_compatible` concepts
(`shared/ptx-isa/003_*.txt`), each error naming the rule it enforces, plus the few extensions the
PTX ISA needs beyond them (4-bit integers, single-bit popc, fp6/fp4 for `.kind::f8f6f4`), each
marked as such.

This module holds the ops and the dialect. The tile types and the rules are in `tile_types`, the
element rules in `element_tables` (the element vocabulary in `compiler/core/elements`), and what
`tile` shares with `warp` (the element types, the popc and rounding attributes, `#warp.variant`)
in `attributes`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.core.elements import ELEMENTS, F8F6F4
from tilemma.compiler.core.memref_layout import row_major, strided_layout
from tilemma.compiler.layouts import sparse_format as fmt

from tilemma.dialects.attributes import (
    ROUNDING_MODES,
    Popc,
    PopcAttr,
    Rounding,
    RoundingAttr,
    UE4M3Type,
    VariantAttr,
    element_name,
)
from tilemma.dialects.element_tables import CAST_RULES, PRE_COMPRESSED
from tilemma.dialects.tile_types import (
    DYNAMIC,
    SparseTileType,
    TileLike,
    TileType,
    check_mma,
    constant_problem,
    matmul_result,
    shape_str,
)

from tilemma.dialects.tile_epilogue import BroadcastOp, MapOp, YieldOp  # noqa: E402  (tile ops, one dialect)
from tilemma.dialects.tile_softmax import SoftmaxOp  # noqa: E402  (tile ops, one dialect)
from tilemma.dialects.tile_view import TransposeViewOp  # noqa: E402  (tile ops, one dialect)

# Defined with the element vocabulary, read by callers as tile.X too.
from tilemma.dialects.attributes import canonical_element, element_bits, element_type  # noqa: F401
from tilemma.dialects.element_tables import (  # noqa: F401
    ELEMENT_CLASSES,
    INT4_WIDENED,
    OPERAND_ELEMENTS,
    SCALE_ELEMENTS,
)


def _tile(value: SSAValue, what: str, sparse_ok: bool = False) -> TileLike:
    if not isinstance(value.type, TileLike):
        raise VerifyException(f"{what} must be a !tile.tile, got {value.type}")
    if isinstance(value.type, SparseTileType) and not sparse_ok:
        raise VerifyException(
            f"{what} is a sparse tile ({value.type}); sparse tiles are only the left operand "
            f"of tile.mma / tile.matmul"
        )
    return value.type


# ---------------------------------------------------------------------------------------------
# Operations.
# ---------------------------------------------------------------------------------------------


def _verify_popc(op: IRDLOperation, lhs: TileType) -> None:
    popc = op.properties.get("popc")
    if lhs.element == "i1":
        if popc is None:
            raise VerifyException(
                f"{op.name}: single-bit (i1) operands need popc = #tile<popc xor> or #tile<popc and> "
                f"(PTX mma .b1 multiplies by xor/and then popc)"
            )
    elif popc is not None:
        raise VerifyException(f"{op.name}: popc only applies to i1 operands, got {lhs.element}")


def _verify_satfinite(op: IRDLOperation, acc: str) -> None:
    if op.properties.get("satfinite") is not None and acc != "si32":
        raise VerifyException(
            f"{op.name}: satfinite clamps integer (si32) accumulation, not {acc}"
        )


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """`matmul(lhs, rhs)`: the result element type follows `matmul_result_t`."""

    name = "tile.matmul"
    lhs = operand_def(TileType | SparseTileType)
    rhs = operand_def(TileType)
    result = result_def(TileType)
    satfinite = opt_prop_def(UnitAttr)
    popc = opt_prop_def(PopcAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, result_type: Attribute | None = None):
        if result_type is None:
            result_type = matmul_result(_tile(lhs, "lhs", sparse_ok=True), _tile(rhs, "rhs"))
        super().__init__(operands=[lhs, rhs], result_types=[result_type])

    def verify_(self) -> None:
        lhs, rhs = _tile(self.lhs, "lhs", sparse_ok=True), _tile(self.rhs, "rhs")
        _verify_popc(self, lhs)
        expected = matmul_result(lhs, rhs)
        if self.result.type != expected:
            raise VerifyException(
                f"tile.matmul: result type must be {expected} (matmul_result_t of "
                f"{lhs.element} operands), got {self.result.type}; the result element type of "
                f"matmul cannot be configured: use tile.mma with a zero accumulator"
            )
        _verify_satfinite(self, expected.element)


@irdl_op_definition
class MmaOp(IRDLOperation):
    """`mma(lhs, rhs, acc)`: multiply and add into an explicit accumulator of the same type."""

    name = "tile.mma"
    lhs = operand_def(TileType | SparseTileType)
    rhs = operand_def(TileType)
    acc = operand_def(TileType)
    result = result_def(TileType)
    # Integer accumulation saturates instead of wrapping; like PTX .satfinite it clamps after each
    # instruction-K step of the accumulation (C first, then K in order), not only at the end.
    satfinite = opt_prop_def(UnitAttr)
    popc = opt_prop_def(PopcAttr)
    # Optional hint: the instruction shape to use (e.g. "m16n8k8"), honoured by tile-select-mma.
    mma_shape = opt_prop_def(StringAttr)
    # Set by tile-select-mma: the instruction chosen for this op.
    variant = opt_prop_def(VariantAttr)
    # Set by tile-select-mma{f32-precision=3xtf32}: f32 operands split as hi + lo tf32 parts and
    # multiplied as hi*hi + hi*lo + lo*hi on tf32 units (about f32 accuracy, 3x the instructions).
    split_tf32 = opt_prop_def(UnitAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = (
        "$lhs `,` $rhs `,` $acc attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc) "
        "`->` type($result)"
    )

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        acc: SSAValue,
        *,
        satfinite: bool = False,
        popc: str | None = None,
        mma_shape: str | None = None,
    ):
        props: dict[str, Attribute] = {}
        if satfinite:
            props["satfinite"] = UnitAttr()
        if popc is not None:
            props["popc"] = PopcAttr(Popc(popc))
        if mma_shape is not None:
            props["mma_shape"] = StringAttr(mma_shape)
        super().__init__(operands=[lhs, rhs, acc], result_types=[acc.type], properties=props)

    def verify_(self) -> None:
        lhs = _tile(self.lhs, "lhs", sparse_ok=True)
        rhs, acc = _tile(self.rhs, "rhs"), _tile(self.acc, "acc")
        check_mma(lhs, rhs, acc)
        _verify_popc(self, lhs)
        _verify_satfinite(self, acc.element)
        if self.result.type != acc:
            raise VerifyException(
                f"tile.mma: result type {self.result.type} must equal the accumulator type {acc}"
            )


# Block-scaled mma (PTX Table 36): (sparse A, scale type, block size = elements of K per scale
# factor) -> what the operands may be; the lowering picks .kind and .scale_vec from them. The
# block is the instruction's K over its .scale_vec, and mma.sp has twice the K of mma.sync.
SCALE_BLOCK_RULES = {
    (False, "f8E8M0FNU", 32): F8F6F4,  # mxf8f6f4 1X (k32); mxf4 / mxf4nvf4 2X (k64)
    (False, "f8E8M0FNU", 16): ("f4E2M1FN",),  # mxf4nvf4 4X (PTX 9.1)
    (False, "ue4m3", 16): ("f4E2M1FN",),  # mxf4nvf4 4X
    (True, "f8E8M0FNU", 64): F8F6F4,  # sparse mxf8f6f4 1X (k64); mxf4 / mxf4nvf4 2X (k128)
    (True, "f8E8M0FNU", 32): ("f4E2M1FN",),  # sparse mxf4nvf4 4X (PTX 9.1)
    (True, "ue4m3", 32): ("f4E2M1FN",),  # sparse mxf4nvf4 4X
}
# The sparse mxf4 / mxf4nvf4 kinds (m16n8k128) take packed e2m1 that is "4:8" sparse (aligned
# pairs); a "2:4" f4E2M1FN tile goes to sparse mxf8f6f4 instead.


@irdl_op_definition
class ScaledMmaOp(IRDLOperation):
    """Block-scaled `mma`: D = (A * scale_a) (B * scale_b) + C (PTX `.block_scale`).

    scale_a is M x ceil(K / block), scale_b is ceil(K / block) x N: element k of a row of A is
    multiplied by scale_a[row, k // block], element k of a column of B by scale_b[k // block, col].
    The valid (scale type, block, operand types) are Table 36's (`SCALE_BLOCK_RULES`); the
    accumulator is f32."""

    name = "tile.scaled_mma"
    lhs = operand_def(TileType | SparseTileType)
    rhs = operand_def(TileType)
    acc = operand_def(TileType)
    scale_a = operand_def(TileType)
    scale_b = operand_def(TileType)
    result = result_def(TileType)
    block = prop_def(IntegerAttr)
    mma_shape = opt_prop_def(StringAttr)
    variant = opt_prop_def(VariantAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = (
        "$lhs `,` $rhs `,` $acc `,` $scale_a `,` $scale_b attr-dict `:` type($lhs) `,` "
        "type($rhs) `,` type($acc) `,` type($scale_a) `,` type($scale_b) `->` type($result)"
    )

    def __init__(self, lhs: SSAValue, rhs: SSAValue, acc: SSAValue, scale_a: SSAValue,
                 scale_b: SSAValue, block: int, mma_shape: str | None = None):
        props: dict[str, Attribute] = {"block": IntegerAttr(block, i64)}
        if mma_shape is not None:
            props["mma_shape"] = StringAttr(mma_shape)
        super().__init__(
            operands=[lhs, rhs, acc, scale_a, scale_b], result_types=[acc.type], properties=props
        )

    @property
    def block_size(self) -> int:
        return self.block.value.data

    def verify_(self) -> None:
        lhs = _tile(self.lhs, "lhs", sparse_ok=True)
        rhs, acc = _tile(self.rhs, "rhs"), _tile(self.acc, "acc")
        sa, sb = _tile(self.scale_a, "scale_a"), _tile(self.scale_b, "scale_b")
        check_mma(lhs, rhs, acc)
        if self.result.type != acc:
            raise VerifyException(
                f"tile.scaled_mma: result type {self.result.type} must equal the accumulator type {acc}"
            )
        if acc.element != "f32":
            raise VerifyException(
                f"tile.scaled_mma: block-scaled mma accumulates in f32, got {acc.element}"
            )
        if sa.element != sb.element:
            raise VerifyException(
                f"tile.scaled_mma: scale_a and scale_b must have one scale type, got {sa.element} "
                f"and {sb.element}"
            )
        sparse = isinstance(lhs, SparseTileType)
        key = (sparse, sa.element, self.block_size)
        if key not in SCALE_BLOCK_RULES:
            valid = ", ".join(f"{t} with block {b}" for sp, t, b in SCALE_BLOCK_RULES if sp == sparse)
            form = "a sparse A (mma.sp)" if sparse else "a dense A"
            raise VerifyException(
                f"tile.scaled_mma: scale type {sa.element} with block {self.block_size} is not a "
                f"valid block scaling for {form} (PTX Table 36: {valid})"
            )
        allowed = SCALE_BLOCK_RULES[key]
        for side, t in (("left", lhs.element), ("right", rhs.element)):
            if t not in allowed:
                raise VerifyException(
                    f"tile.scaled_mma: {side} operand {t} cannot be block-scaled by {sa.element} "
                    f"in blocks of {self.block_size} (PTX Table 36 allows {', '.join(allowed)})"
                )
        ls, rs = lhs.get_shape(), rhs.get_shape()
        blocks = -(-ls[-1] // self.block_size)
        want_a = (*ls[:-1], blocks)
        want_b = (*rs[:-2], blocks, rs[-1])
        for name, got, want in (("scale_a", sa.get_shape(), want_a), ("scale_b", sb.get_shape(), want_b)):
            if got != want:
                raise VerifyException(
                    f"tile.scaled_mma: {name} must be {shape_str(want)} (one scale per "
                    f"{self.block_size} elements of K={ls[-1]}), got {shape_str(got)}"
                )


def _offsets_str(offsets: Sequence[int]) -> str:
    return "[" + ", ".join(str(o) for o in offsets) + "]"


def _verify_window(op: str, tile: TileType, ref: MemRefType, offsets: Sequence[int]) -> None:
    """A tile moves to/from memory at static offsets, wholly inside the memref."""
    shape, mshape = tile.get_shape(), tuple(ref.get_shape())
    if len(mshape) != len(shape):
        raise VerifyException(
            f"{op}: memref rank {len(mshape)} differs from tile rank {len(shape)}"
        )
    if len(offsets) != len(shape):
        raise VerifyException(
            f"{op}: {len(offsets)} offsets given for a rank {len(shape)} tile"
        )
    for dim, (o, t, m) in enumerate(zip(offsets, shape, mshape)):
        if DYNAMIC in (t, m):  # a size known at launch: the tile spans that whole dimension
            if t != m or o != 0:
                raise VerifyException(
                    f"{op}: a ? dimension of the memref is covered by a ? dimension of the tile at "
                    f"offset 0 (the whole dimension, whatever its size), got tile {shape_str(shape)} at "
                    f"offsets {_offsets_str(offsets)} of memref {shape_str(mshape)} in dimension {dim}"
                )
            continue
        if o < 0 or o + t > m:
            raise VerifyException(
                f"{op}: tile {shape_str(shape)} at offsets {_offsets_str(offsets)} leaves "
                f"memref {shape_str(mshape)} in dimension {dim} ({o} + {t} > {m})"
            )
    stored = ELEMENTS[tile.element].stored_as
    if element_name(ref.element_type) != stored:
        hint = f" ({tile.element} is stored as {stored})" if stored != tile.element else ""
        raise VerifyException(
            f"{op}: memref element type {element_name(ref.element_type)} does not match tile "
            f"element type {tile.element}{hint}; use tile.cast to convert"
        )


def _parse_offsets(parser: Parser) -> list[int]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Read a tile from a kernel argument (memref) at static offsets."""

    name = "tile.load"
    source = operand_def(MemRefType)
    offsets = prop_def(DenseArrayBase)
    result = result_def(TileType)

    def __init__(self, source: SSAValue, offsets: Sequence[int], result_type: TileType):
        super().__init__(
            operands=[source],
            result_types=[result_type],
            properties={"offsets": DenseArrayBase.from_list(i64, list(offsets))},
        )

    def offset_values(self) -> tuple[int, ...]:
        return tuple(self.offsets.get_values())

    def verify_(self) -> None:
        ref = self.source.type
        assert isinstance(ref, MemRefType)
        _verify_window("tile.load", _tile(self.result, "result"), ref, self.offset_values())

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(_offsets_str(self.offset_values()))
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        source = parser.parse_unresolved_operand()
        offsets = _parse_offsets(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        src_type = parser.parse_type()
        parser.parse_punctuation("->")
        res_type = parser.parse_type()
        if not isinstance(res_type, TileType):
            parser.raise_error(f"tile.load must produce a !tile.tile, got {res_type}")
        source = parser.resolve_operand(source, src_type)
        op = cls(source, offsets, res_type)
        op.attributes |= attrs
        return op


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Write a tile into a kernel argument (memref) at static offsets."""

    name = "tile.store"
    value = operand_def(TileType)
    dest = operand_def(MemRefType)
    offsets = prop_def(DenseArrayBase)

    def __init__(self, value: SSAValue, dest: SSAValue, offsets: Sequence[int]):
        super().__init__(
            operands=[value, dest],
            properties={"offsets": DenseArrayBase.from_list(i64, list(offsets))},
        )

    def offset_values(self) -> tuple[int, ...]:
        return tuple(self.offsets.get_values())

    def verify_(self) -> None:
        ref = self.dest.type
        assert isinstance(ref, MemRefType)
        _verify_window("tile.store", _tile(self.value, "value"), ref, self.offset_values())

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.value)
        printer.print_string(", ")
        printer.print_operand(self.dest)
        printer.print_string(_offsets_str(self.offset_values()))
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.value.type)
        printer.print_string(", ")
        printer.print_attribute(self.dest.type)

    @classmethod
    def parse(cls, parser: Parser) -> StoreOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        dest = parser.parse_unresolved_operand()
        offsets = _parse_offsets(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        value_type = parser.parse_type()
        parser.parse_punctuation(",")
        dest_type = parser.parse_type()
        op = cls(
            parser.resolve_operand(value, value_type),
            parser.resolve_operand(dest, dest_type),
            offsets,
        )
        op.attributes |= attrs
        return op


def _cast_rules_str() -> str:
    return ", ".join(
        f"{s} -> {d}" + (f" (rounding {' / '.join(r.rounding_names)})" if r.roundings else "")
        for (s, d), r in CAST_RULES.items()
    )


@irdl_op_definition
class CastOp(IRDLOperation):
    """Element-wise conversion (`element_cast`) of a pair in `CAST_RULES`; `rounding` picks the
    mode where the conversion rounds (its rule's default when absent)."""

    name = "tile.cast"
    source = operand_def(TileType)
    result = result_def(TileType)
    rounding = opt_prop_def(RoundingAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, result_type: TileType, rounding: str | None = None):
        props = {} if rounding is None else {"rounding": RoundingAttr(Rounding(rounding))}
        super().__init__(operands=[source], result_types=[result_type], properties=props)

    def verify_(self) -> None:
        src, dst = _tile(self.source, "source"), _tile(self.result, "result")
        if src.get_shape() != dst.get_shape():
            raise VerifyException(
                f"tile.cast: shape changes from {shape_str(src.get_shape())} to "
                f"{shape_str(dst.get_shape())}; a cast converts elements only"
            )
        if self.rounding is not None and self.rounding.data not in ROUNDING_MODES:
            raise VerifyException(
                f"tile.cast: rounding must be one of {', '.join(ROUNDING_MODES)}, "
                f"got '{self.rounding.data}'"
            )
        rule = CAST_RULES.get((src.element, dst.element))
        if rule is None:
            raise VerifyException(
                f"tile.cast: no conversion from {src.element} to {dst.element}; "
                f"supported: {_cast_rules_str()}"
            )
        if self.rounding is not None and self.rounding.data not in rule.rounding_names:
            allowed = (
                f"takes rounding {' / '.join(rule.rounding_names)}"
                if rule.roundings
                else "is exact and takes no rounding"
            )
            raise VerifyException(
                f"tile.cast: {src.element} -> {dst.element} {allowed}, got '{self.rounding.data}'"
            )


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A tile with every element equal to `value` (zeros for a fresh accumulator)."""

    name = "tile.constant"
    value = prop_def(Attribute)
    result = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, value: int | float, result_type: TileType):
        attr: Attribute
        if isinstance(result_type.element_type, IntegerType):
            attr = IntegerAttr(int(value), i64)
        else:
            attr = FloatAttr(float(value), Float64Type())
        super().__init__(properties={"value": attr}, result_types=[result_type])

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.scalar()!r}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        start = parser.pos
        value = parser.parse_number()
        value_end = parser.pos
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        if not isinstance(result_type, TileType):
            parser.raise_error(f"tile.constant must produce a !tile.tile, got {result_type}")
        if isinstance(value, float) and isinstance(result_type.element_type, IntegerType):
            parser.raise_error(
                f"tile.constant: an {result_type.element} tile needs an integer value, got {value}",
                start,
                value_end,
            )
        problem = constant_problem(value, result_type.element)
        if problem:
            parser.raise_error(problem, start, value_end)
        op = cls(value, result_type)
        op.attributes |= attrs
        return op

    def scalar(self) -> int | float:
        return self.value.value.data  # type: ignore[attr-defined]

    def verify_(self) -> None:
        res = _tile(self.result, "result")
        is_int = isinstance(res.element_type, IntegerType)
        if is_int and not isinstance(self.value, IntegerAttr):
            raise VerifyException(
                f"tile.constant: an {res.element} tile needs an integer value, got {self.value}"
            )
        if not is_int and not isinstance(self.value, FloatAttr | IntegerAttr):
            raise VerifyException(
                f"tile.constant: value must be a number, got {self.value}"
            )
        problem = constant_problem(self.scalar(), res.element)
        if problem:
            raise VerifyException(problem)


@irdl_op_definition
class CompressOp(IRDLOperation):
    """Compress a dense tile to its structured-sparse form (`SPARSE_PATTERNS`).

    Without `prune`, every group must already hold at most the kept number of nonzeros (2 of 4;
    1 of 2 for tf32; 2 pairs of 4 for 4-bit integers): this is checked when the kernel runs and
    the first offending group (row-major) is reported. With `prune`, the largest magnitudes of
    each group are kept (ties keep the lower column) and the others dropped."""

    name = "tile.compress"
    source = operand_def(TileType)
    result = result_def(SparseTileType)
    prune = opt_prop_def(UnitAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, prune: bool = False, pattern: str | None = None):
        st = _tile(source, "source")
        props = {"prune": UnitAttr()} if prune else {}
        super().__init__(
            operands=[source],
            result_types=[SparseTileType(st.get_shape(), st.element_type, pattern)],
            properties=props,
        )

    def verify_(self) -> None:
        src, dst = _tile(self.source, "source"), _tile(self.result, "result", sparse_ok=True)
        if src.get_shape() != dst.get_shape() or src.element_type != dst.element_type:
            raise VerifyException(
                f"tile.compress: result {dst} must have the shape and element type of the "
                f"source {src}"
            )


@irdl_op_definition
class SparseFromOp(IRDLOperation):
    """A 2:4 sparse 16-bit tile that arrives compressed (`compiler/sparse_format.py`): `values`
    (the kept elements, [batch x] M x Kp/2, Kp = K rounded up to 32) and `meta` (ui32 metadata
    words of the m16n8k32 `mma.sp`, [batch x] ceil(M/16) x ceil(Kp/128)*64), both whole kernel
    arguments with the identity layout. The kernel trusts the pattern: nothing is checked or
    pruned (`tilemma.compiler.layouts.sparse_format.compress_a` does that on the host)."""

    name = "tile.sparse_from"
    values = operand_def(MemRefType)
    meta = operand_def(MemRefType)
    result = result_def(SparseTileType)
    traits = traits_def(Pure())

    assembly_format = "$values `,` $meta attr-dict `:` type($values) `,` type($meta) `->` type($result)"

    def __init__(self, values: SSAValue, meta: SSAValue, result_type: SparseTileType):
        super().__init__(operands=[values, meta], result_types=[result_type])

    def verify_(self) -> None:
        res = _tile(self.result, "result", sparse_ok=True)
        assert isinstance(res, SparseTileType)
        shape = res.get_shape()
        if res.element not in PRE_COMPRESSED or res.pattern != "2:4":
            raise VerifyException(
                f"tile.sparse_from: pre-compressed tiles are 2:4 sparse {' or '.join(PRE_COMPRESSED)} "
                f"(mma.sp m16n8k32), not {res.pattern} {res.element}"
            )
        *batch, m, k = shape
        want = {
            "values": (self.values.type, (*batch, *fmt.values_shape(m, k)), res.element),
            "meta": (self.meta.type, (*batch, *fmt.meta_shape(m, k)), "ui32"),
        }
        for what, (ref, dims, element) in want.items():
            assert isinstance(ref, MemRefType)
            got = tuple(ref.get_shape())
            if got != dims or element_name(ref.element_type) != element:
                raise VerifyException(
                    f"tile.sparse_from: {what} of a {shape_str(shape)} {res.element} tile must be "
                    f"memref<{shape_str(dims)}x{element}> (K padded to a multiple of 32; "
                    f"sparse_format's layout), got {ref}"
                )
            try:
                layout = strided_layout(ref)
            except ValueError as e:
                raise VerifyException(f"tile.sparse_from: {e}") from None
            if layout.strides != row_major(got) or layout.offset:
                raise VerifyException(f"tile.sparse_from: {what} must be a contiguous row-major memref, got {ref}")


#: The kernel (`func.func`) attribute that promises every `?` stride of its memrefs (an identity
#: layout's included) and every `?` size of a contiguous (stride-1) dimension is a multiple of
#: this many elements, as Triton's `tt.divisibility` does; the launch checks it. Absent: 1.
STRIDE_MULTIPLE = "tile.stride_multiple"


def stride_multiple(kernel: Operation) -> int:
    attr = kernel.attributes.get(STRIDE_MULTIPLE)
    return attr.value.data if isinstance(attr, IntegerAttr) and attr.value.data > 0 else 1


#: The kernel attribute that promises its `?` sizes M, N, K are multiples of these (one each), so
#: that tiles of a size dividing one need no edge predicates; the launch checks it. Absent: 1s.
SIZE_MULTIPLE = "tile.size_multiple"


def size_multiple(kernel: Operation) -> tuple[int, int, int]:
    """(M, N, K) multiples the kernel's `?` sizes are promised to be."""
    attr = kernel.attributes.get(SIZE_MULTIPLE)
    if isinstance(attr, DenseArrayBase) and len(attr.get_values()) == 3 and min(attr.get_values()) > 0:
        return tuple(attr.get_values())  # type: ignore[return-value]
    return (1, 1, 1)


#: The kernel attribute that says which sizes to plan a kernel with `?` sizes for (M, N, K: its
#: configuration only; any size runs). Absent: a large problem's.
PLAN_SIZES = "tile.plan_sizes"


def plan_sizes(kernel: Operation) -> tuple[int, int, int] | None:
    attr = kernel.attributes.get(PLAN_SIZES)
    if isinstance(attr, DenseArrayBase) and len(attr.get_values()) == 3 and min(attr.get_values()) > 0:
        return tuple(attr.get_values())  # type: ignore[return-value]
    return None


#: The kernel attribute `tile-transpose-first` leaves on a kernel whose 8-bit N-major B a kernel of
#: its own transposes first: [B's argument, its K-major workspace's argument] (indices), which
#: `tile-distribute` gives their roles (b, transposed_b) and `warp-to-ptx` turns into that kernel.
TRANSPOSE_FIRST = "tile.transpose_first"


def transpose_first(kernel: Operation) -> tuple[int, int] | None:
    attr = kernel.attributes.get(TRANSPOSE_FIRST)
    if isinstance(attr, DenseArrayBase) and len(attr.get_values()) == 2:
        return tuple(attr.get_values())  # type: ignore[return-value]
    return None


def tiles_exactly(size: int, step: int, multiple: int) -> bool:
    """Whether tiles of `step` cover `size` without a ragged edge: a static size by division, a
    `?` one (DYNAMIC) by what the kernel promises of it (`tile.size_multiple`)."""
    return (multiple if size == DYNAMIC else size) % step == 0


# The ops that multiply into an accumulator (what tile-select-mma leaves behind).
MMA_OPS = (MmaOp, ScaledMmaOp)

Tile = Dialect(
    "tile",
    [MatmulOp, MmaOp, ScaledMmaOp, LoadOp, StoreOp, CastOp, ConstantOp, CompressOp, SparseFromOp,
     MapOp, YieldOp, BroadcastOp, SoftmaxOp, TransposeViewOp],
    [TileType, SparseTileType, UE4M3Type, PopcAttr, RoundingAttr],
)
