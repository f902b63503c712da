"""The `tile` dialect: tile-level matmul IR with the `cuda::tiles` matmul/mma rules.

A kernel is a `func.func` whose arguments are memrefs; `tile.load`/`tile.store` move statically
shaped tiles (rank 2, or rank 3 for batches) between memrefs and values, `tile.matmul` and
`tile.mma` multiply them, `tile.cast` converts element types and `tile.constant` makes splats.
The verifiers enforce every rule of the CUDA Tile `matmul_compatible`/`mma_compatible` concepts
(`shared/ptx-isa/003_*.txt`), each error naming the rule it enforces, plus the few extensions the
PTX ISA needs beyond them (4-bit integers, single-bit popc, fp6/fp4 for `.kind::f8f6f4`), each
marked as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    Float4E2M1FNType,
    Float6E2M3FNType,
    Float6E3M2FNType,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    FloatTF32Type,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    Signedness,
    StringAttr,
    UnitAttr,
    i64,
)
from enum import auto

from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, SpacedOpaqueSyntaxAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from tilemma.dialects.warp import VariantAttr


@irdl_attr_definition
class UE4M3Type(ParametrizedAttribute, TypeAttribute):
    """Unsigned e4m3 (the `.ue4m3` block-scale type of `.kind::mxf4nvf4`); MLIR has no builtin."""

    name = "tile.ue4m3"


# ---------------------------------------------------------------------------------------------
# Element types and the cuda::tiles type rules, as data.
# ---------------------------------------------------------------------------------------------


def element_name(t: Attribute) -> str:
    """The MLIR spelling of an element type (`f16`, `si8`, `i1`, `f8E4M3FN`, `ue4m3`, ...)."""
    if isinstance(t, IntegerType):
        prefix = {Signedness.SIGNED: "si", Signedness.UNSIGNED: "ui"}.get(
            t.signedness.data, "i"
        )
        return f"{prefix}{t.width.data}"
    if isinstance(t, UE4M3Type):
        return "ue4m3"
    return str(t)


@dataclass(frozen=True)
class ElementClass:
    """A row of the cuda::tiles tables: operand types that may meet, and what they produce.

    `matmul_result` is None where `matmul` is not defined (it is then reachable through `mma`
    only); `extension` says why a row goes beyond the CUDA Tile text (None for rows of the text).
    """

    name: str
    kind: str  # "int" or "float" (rule 1 compares bit width for int, conversion rank for float)
    matmul_result: str | None
    accumulators: tuple[str, ...]
    extension: str | None = None


ELEMENT_CLASSES: dict[str, ElementClass] = {
    c.name: c
    for c in (
        ElementClass("8-bit integer", "int", "si32", ("si32",)),
        ElementClass(
            "4-bit integer", "int", None, ("si32",), "PTX mma .s4/.u4 (not in cuda::tiles)"
        ),
        ElementClass(
            "single bit", "int", None, ("si32",), "PTX mma .b1 with xor/and popc (not in cuda::tiles)"
        ),
        ElementClass("fp8/fp6/fp4", "float", "f16", ("f16", "f32")),
        ElementClass("f16", "float", "f16", ("f16", "f32")),
        ElementClass("bf16", "float", "f32", ("f32",)),
        ElementClass("tf32", "float", "f32", ("f32",)),
        ElementClass("f32", "float", "f32", ("f32",)),
        ElementClass("f64", "float", "f64", ("f64",)),
    )
}

# Element type -> its row. fp6/fp4 share the fp8 row: PTX `.kind::f8f6f4` mixes them freely
# (an extension of the text, which names only e4m3 and e5m2 there).
OPERAND_ELEMENTS: dict[str, str] = {
    "si8": "8-bit integer",
    "ui8": "8-bit integer",
    "si4": "4-bit integer",
    "ui4": "4-bit integer",
    "i1": "single bit",
    "f8E4M3FN": "fp8/fp6/fp4",
    "f8E5M2": "fp8/fp6/fp4",
    "f6E3M2FN": "fp8/fp6/fp4",
    "f6E2M3FN": "fp8/fp6/fp4",
    "f4E2M1FN": "fp8/fp6/fp4",
    "f16": "f16",
    "bf16": "bf16",
    "tf32": "tf32",
    "f32": "f32",
    "f64": "f64",
}

SCALE_ELEMENTS = ("f8E8M0FNU", "ue4m3")
# Element types of fewer than 8 bits that do not divide a byte are stored one per byte.
BYTE_PER_ELEMENT = ("f6E3M2FN", "f6E2M3FN")
ACCUMULATOR_ELEMENTS = ("si32", "f16", "f32", "f64")
TILE_ELEMENTS = tuple(OPERAND_ELEMENTS) + SCALE_ELEMENTS + ("si32",)
# Types with no storage format of their own: kept in memory as another type.
NO_STORAGE = {"tf32": "f32"}

_ELEMENT_TYPES: dict[str, Attribute] = {
    "f16": Float16Type(),
    "bf16": BFloat16Type(),
    "tf32": FloatTF32Type(),
    "f32": Float32Type(),
    "f64": Float64Type(),
    "si8": IntegerType(8, Signedness.SIGNED),
    "ui8": IntegerType(8, Signedness.UNSIGNED),
    "si4": IntegerType(4, Signedness.SIGNED),
    "ui4": IntegerType(4, Signedness.UNSIGNED),
    "i1": IntegerType(1),
    "si32": IntegerType(32, Signedness.SIGNED),
    "f8E4M3FN": Float8E4M3FNType(),
    "f8E5M2": Float8E5M2Type(),
    "f6E3M2FN": Float6E3M2FNType(),
    "f6E2M3FN": Float6E2M3FNType(),
    "f4E2M1FN": Float4E2M1FNType(),
    "f8E8M0FNU": Float8E8M0FNUType(),
    "ue4m3": UE4M3Type(),
}


# PTX spellings accepted wherever a user names an element type.
ELEMENT_ALIASES = {
    "e4m3": "f8E4M3FN",
    "e5m2": "f8E5M2",
    "e3m2": "f6E3M2FN",
    "e2m3": "f6E2M3FN",
    "e2m1": "f4E2M1FN",
    "ue8m0": "f8E8M0FNU",
    "s8": "si8",
    "u8": "ui8",
    "s4": "si4",
    "u4": "ui4",
    "b1": "i1",
    "s32": "si32",
}


def canonical_element(name: str) -> str:
    """The MLIR name of an element type given by its MLIR or PTX spelling."""
    name = ELEMENT_ALIASES.get(name, name)
    if name not in _ELEMENT_TYPES:
        raise ValueError(
            f"unknown element type '{name}'; known: {', '.join(_ELEMENT_TYPES)} "
            f"(PTX spellings {', '.join(ELEMENT_ALIASES)} also work)"
        )
    return name


def element_type(name: str) -> Attribute:
    """The attribute for an element type named as in MLIR or PTX (see `TILE_ELEMENTS`)."""
    return _ELEMENT_TYPES[canonical_element(name)]


def element_bits(name: str) -> int:
    """Storage bits of one element (tf32 travels as 32 bits)."""
    t = _ELEMENT_TYPES[name]
    if isinstance(t, IntegerType):
        return t.width.data
    if isinstance(t, UE4M3Type):
        return 8
    if isinstance(t, FloatTF32Type):
        return 32
    return t.bitwidth  # type: ignore[attr-defined]


# (lowest, highest) finite value of each float element type; unsigned types hold no negatives and
# e8m0 holds only powers of two (no zero).
FLOAT_LIMITS: dict[str, tuple[float, float]] = {
    "f16": (-(2 - 2.0**-10) * 2.0**15, (2 - 2.0**-10) * 2.0**15),
    "bf16": (-(2 - 2.0**-7) * 2.0**127, (2 - 2.0**-7) * 2.0**127),
    "tf32": (-(2 - 2.0**-10) * 2.0**127, (2 - 2.0**-10) * 2.0**127),
    "f32": (-(2 - 2.0**-23) * 2.0**127, (2 - 2.0**-23) * 2.0**127),
    "f64": (-(2 - 2.0**-52) * 2.0**1023, (2 - 2.0**-52) * 2.0**1023),
    "f8E4M3FN": (-448.0, 448.0),
    "f8E5M2": (-57344.0, 57344.0),
    "f6E3M2FN": (-28.0, 28.0),
    "f6E2M3FN": (-7.5, 7.5),
    "f4E2M1FN": (-6.0, 6.0),
    "f8E8M0FNU": (2.0**-127, 2.0**127),
    "ue4m3": (0.0, 448.0),
}


def element_range(name: str) -> tuple[int | float, int | float]:
    """(lowest, highest) finite value of an element type. Signless integers (i1) take either
    reading, as MLIR's integer attributes do: -2**(w-1) .. 2**w - 1."""
    t = _ELEMENT_TYPES[name]
    if not isinstance(t, IntegerType):
        return FLOAT_LIMITS[name]
    w, sign = t.width.data, t.signedness.data
    low = 0 if sign == Signedness.UNSIGNED else -(2 ** (w - 1))
    return low, 2 ** (w - 1) - 1 if sign == Signedness.SIGNED else 2**w - 1


def constant_problem(value: int | float, element: str) -> str | None:
    """Why `value` cannot be a constant of `element` (None if it can): it must lie in the type's
    finite range, or the lowering would wrap or overflow it silently."""
    low, high = element_range(element)
    if low <= value <= high or value != value or abs(value) == float("inf"):
        return None
    return f"tile.constant: {value!r} is out of range for {element} (range {low!r} to {high!r})"


# ---------------------------------------------------------------------------------------------
# The tile type.
# ---------------------------------------------------------------------------------------------


class TileLike(ParametrizedAttribute, TypeAttribute):
    """What every tile type has: a static shape (rank 2 or 3) and an element type (each
    definition below declares the two parameters again: IRDL reads a class's own fields)."""

    def __init__(self, shape: Sequence[int], element_type: Attribute):
        super().__init__(ArrayAttr(IntAttr(d) for d in shape), element_type)

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def element(self) -> str:
        return element_name(self.element_type)

    @classmethod
    def problem(cls, shape: Sequence[int], element: str) -> str | None:
        """Why a type of this kind with `shape` and `element` is invalid (None if it is valid)."""
        return tile_type_problem(shape, element)

    def verify(self) -> None:
        problem = self.problem(self.get_shape(), self.element)
        if problem:
            raise VerifyException(problem)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            for d in self.get_shape():
                printer.print_string(f"{d}x")
            printer.print_attribute(self.element_type)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        start = parser.pos
        with parser.in_angle_brackets():
            dims, elem = parser.parse_ranked_shape()
        # Report bad shapes/elements here, where the source position is still known.
        problem = cls.problem(dims, element_name(elem))
        if problem:
            parser.raise_error(problem, start, start + 1)
        return (ArrayAttr(IntAttr(d) for d in dims), elem)


@irdl_attr_definition
class TileType(TileLike):
    """A statically shaped tile value: `!tile.tile<64x32xf16>` (rank 2) or `<3x64x32xf16>`."""

    name = "tile.tile"
    shape: ArrayAttr[IntAttr]
    element_type: Attribute


def tile_type_problem(shape: Sequence[int], element: str) -> str | None:
    """Why a tile type is invalid (None if it is valid)."""
    if len(shape) not in (2, 3):
        return (
            f"tile rank must be 2 or 3 (cuda::tiles matmul/mma operate on rank 2 tiles "
            f"or rank 3 batches), got rank {len(shape)} in {_shape_str(shape)}"
        )
    if any(d <= 0 for d in shape):
        return f"tile dimensions must be positive, got {_shape_str(shape)}"
    if element not in TILE_ELEMENTS:
        return (
            f"element type {element} is not a tile element type; "
            f"allowed: {', '.join(TILE_ELEMENTS)}"
        )
    return None


def _shape_str(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


# Structured sparsity of a compressed left operand, by element type (PTX mma.sp): two of every
# four elements; one of two for tf32; two of four aligned pairs ("4:8") for 4-bit integers.
SPARSE_PATTERNS = {
    "f16": "2:4",
    "bf16": "2:4",
    "tf32": "1:2",
    "si8": "2:4",
    "ui8": "2:4",
    "f8E4M3FN": "2:4",
    "f8E5M2": "2:4",
    "f6E3M2FN": "2:4",
    "f6E2M3FN": "2:4",
    "f4E2M1FN": "2:4",
    "si4": "4:8",
    "ui4": "4:8",
}
# Patterns a type may have besides its default: packed e2m1 (the sparse mxf4 / mxf4nvf4 kinds)
# is sparse in aligned pairs like the 4-bit integers.
OTHER_SPARSE_PATTERNS = {"f4E2M1FN": ("4:8",)}


@irdl_attr_definition
class SparseTileType(TileLike):
    """A tile known to be structured sparse (`SPARSE_PATTERNS`), held compressed: the kept
    values and their positions. `!tile.sparse<16x32xf16>` is a 16x32 tile of which 16x16 values
    are stored. It is made by `tile.compress` and only consumed as the left operand of
    `tile.mma`/`tile.matmul` (PTX mma.sp)."""

    name = "tile.sparse"
    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    sparsity: StringAttr

    def __init__(self, shape: Sequence[int], element_type: Attribute, pattern: str | None = None):
        pattern = pattern or SPARSE_PATTERNS.get(element_name(element_type), "2:4")
        ParametrizedAttribute.__init__(
            self, ArrayAttr(IntAttr(d) for d in shape), element_type, StringAttr(pattern)
        )

    @property
    def pattern(self) -> str:
        return self.sparsity.data

    @classmethod
    def problem(cls, shape: Sequence[int], element: str, pattern: str | None = None) -> str | None:
        if element not in SPARSE_PATTERNS:
            return (
                f"{element} has no structured-sparse mma (mma.sp); sparse element types: "
                f"{', '.join(SPARSE_PATTERNS)}"
            )
        allowed = (SPARSE_PATTERNS[element], *OTHER_SPARSE_PATTERNS.get(element, ()))
        if pattern is not None and pattern not in allowed:
            return (
                f"{element} tiles can be {' or '.join(allowed)} sparse (the patterns of mma.sp), "
                f"not {pattern}"
            )
        return tile_type_problem(shape, element)

    def verify(self) -> None:
        problem = self.problem(self.get_shape(), self.element, self.pattern)
        if problem:
            raise VerifyException(problem)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            for d in self.get_shape():
                printer.print_string(f"{d}x")
            printer.print_attribute(self.element_type)
            if self.pattern != SPARSE_PATTERNS.get(self.element):
                printer.print_string(f', "{self.pattern}"')

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        start = parser.pos
        with parser.in_angle_brackets():
            dims, elem = parser.parse_ranked_shape()
            pattern = parser.parse_str_literal() if parser.parse_optional_punctuation(",") else None
        problem = cls.problem(dims, element_name(elem), pattern)
        if problem:
            parser.raise_error(problem, start, start + 1)
        pattern = pattern or SPARSE_PATTERNS[element_name(elem)]
        return (ArrayAttr(IntAttr(d) for d in dims), elem, StringAttr(pattern))


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
# The cuda::tiles rules, one function each, used by the verifiers and by the CLI generators.
# ---------------------------------------------------------------------------------------------


def operand_class(lhs: str, rhs: str, op: str) -> ElementClass:
    """Rules 1 of matmul_compatible/mma_compatible: which element types may meet."""
    for side, name in (("left", lhs), ("right", rhs)):
        if name not in OPERAND_ELEMENTS:
            why = (
                "it is a block-scale type"
                if name in SCALE_ELEMENTS
                else "it is not a matmul operand type"
            )
            raise VerifyException(
                f"{op}: {side} operand element type {name} cannot be multiplied ({why}); "
                f"operand types: {', '.join(OPERAND_ELEMENTS)}"
            )
    lc, rc = ELEMENT_CLASSES[OPERAND_ELEMENTS[lhs]], ELEMENT_CLASSES[OPERAND_ELEMENTS[rhs]]
    if lc.kind != rc.kind:
        raise VerifyException(
            f"{op}: operand element types {lhs} and {rhs} may not meet "
            f"(rule 1: both integral or both floating point)"
        )
    if lc is not rc:
        what = "integral scalars of the same bit width" if lc.kind == "int" else (
            "floating point scalars of the same conversion rank"
        )
        raise VerifyException(
            f"{op}: operand element types {lhs} and {rhs} may not meet "
            f"(rule 1: operands must be {what})"
        )
    return lc


def batch_dims(lhs: Sequence[int], rhs: Sequence[int], op: str) -> tuple[int | None, int, int, int]:
    """Rules 2-4 of the concepts: ranks, N x K times K x M, batch broadcast. -> (batch, N, K, M)."""
    if len(lhs) != len(rhs):
        raise VerifyException(
            f"{op}: operands must have the same rank (rule: same rank, 2 or 3), got "
            f"{_shape_str(lhs)} and {_shape_str(rhs)}"
        )
    n, k = lhs[-2], lhs[-1]
    k2, m = rhs[-2], rhs[-1]
    if k != k2:
        raise VerifyException(
            f"{op}: contraction dimensions differ: left is {_shape_str(lhs)} (N x K with K={k}), "
            f"right is {_shape_str(rhs)} (K x M with K={k2}) (rule: N x K times K x M)"
        )
    if len(lhs) == 2:
        return None, n, k, m
    a, b = lhs[0], rhs[0]
    if a != b and a != 1 and b != 1:
        raise VerifyException(
            f"{op}: batch sizes {a} and {b} differ and neither is 1 "
            f"(rule: A = B, or one of them is 1 and broadcasts)"
        )
    return max(a, b), n, k, m


def matmul_result(lhs: TileType, rhs: TileType) -> TileType:
    """`matmul_result_t`: the result tile type of `tile.matmul` (raises VerifyException)."""
    cls = operand_class(lhs.element, rhs.element, "tile.matmul")
    if cls.matmul_result is None:
        raise VerifyException(
            f"tile.matmul: {lhs.element} operands have no matmul result type (rule 1 of "
            f"matmul_compatible: integral operands must be 8 bits wide); use tile.mma with an "
            f"{' or '.join(cls.accumulators)} accumulator"
        )
    batch, n, _, m = batch_dims(lhs.get_shape(), rhs.get_shape(), "tile.matmul")
    shape = (n, m) if batch is None else (batch, n, m)
    return TileType(shape, element_type(cls.matmul_result))


def check_mma(lhs: TileType, rhs: TileType, acc: TileType) -> None:
    """`mma_compatible`: the accumulator table (rule 2) and shapes with broadcast (rules 3-5)."""
    cls = operand_class(lhs.element, rhs.element, "tile.mma")
    if acc.element not in cls.accumulators:
        raise VerifyException(
            f"tile.mma: accumulator element type {acc.element} is not allowed for "
            f"{lhs.element} x {rhs.element} operands (rule 2: {cls.name} operands accumulate "
            f"into {' or '.join(cls.accumulators)})"
        )
    ls, rs, cs = lhs.get_shape(), rhs.get_shape(), acc.get_shape()
    if len(cs) != len(ls):
        raise VerifyException(
            f"tile.mma: accumulator rank differs from the operands' (rule 3: same rank), got "
            f"{_shape_str(ls)}, {_shape_str(rs)} and {_shape_str(cs)}"
        )
    _, n, _, m = batch_dims(ls, rs, "tile.mma")
    if tuple(cs[-2:]) != (n, m):
        raise VerifyException(
            f"tile.mma: accumulator shape {_shape_str(cs)} does not match N x M = {n}x{m} of "
            f"{_shape_str(ls)} times {_shape_str(rs)} (rule 4: N x K, K x M, N x M)"
        )
    if len(cs) == 3:
        for side, b in (("left", ls[0]), ("right", rs[0])):
            if b not in (cs[0], 1):
                raise VerifyException(
                    f"tile.mma: {side} batch {b} must equal the accumulator batch {cs[0]} or "
                    f"be 1 (rule 5: broadcast of a batch of 1)"
                )


# ---------------------------------------------------------------------------------------------
# Operations.
# ---------------------------------------------------------------------------------------------

class Popc(StrEnum):
    """The bit operation of a single-bit mma (PTX .xor.popc / .and.popc)."""

    XOR = auto()
    AND = auto()


@irdl_attr_definition
class PopcAttr(EnumAttribute[Popc], SpacedOpaqueSyntaxAttribute):
    """`#tile<popc xor>`."""

    name = "tile.popc"


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
_F8F6F4 = ("f8E4M3FN", "f8E5M2", "f6E3M2FN", "f6E2M3FN", "f4E2M1FN")
SCALE_BLOCK_RULES = {
    (False, "f8E8M0FNU", 32): _F8F6F4,  # mxf8f6f4 1X (k32); mxf4 / mxf4nvf4 2X (k64)
    (False, "f8E8M0FNU", 16): ("f4E2M1FN",),  # mxf4nvf4 4X (PTX 9.1)
    (False, "ue4m3", 16): ("f4E2M1FN",),  # mxf4nvf4 4X
    (True, "f8E8M0FNU", 64): _F8F6F4,  # sparse mxf8f6f4 1X (k64); mxf4 / mxf4nvf4 2X (k128)
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
                    f"tile.scaled_mma: {name} must be {_shape_str(want)} (one scale per "
                    f"{self.block_size} elements of K={ls[-1]}), got {_shape_str(got)}"
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
    if any(d < 0 for d in mshape):
        raise VerifyException(f"{op}: memref must have a static shape, got {ref}")
    for dim, (o, t, m) in enumerate(zip(offsets, shape, mshape)):
        if o < 0 or o + t > m:
            raise VerifyException(
                f"{op}: tile {_shape_str(shape)} at offsets {_offsets_str(offsets)} leaves "
                f"memref {_shape_str(mshape)} in dimension {dim} ({o} + {t} > {m})"
            )
    stored = NO_STORAGE.get(tile.element, tile.element)
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
        return tuple(self.offsets.get_values())  # type: ignore[arg-type]

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
        return tuple(self.offsets.get_values())  # type: ignore[arg-type]

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


class Rounding(StrEnum):
    """How a conversion rounds (PTX cvt modifiers): to nearest even, to nearest away, to zero."""

    RN = auto()
    RNA = auto()
    RZ = auto()


@irdl_attr_definition
class RoundingAttr(EnumAttribute[Rounding], SpacedOpaqueSyntaxAttribute):
    """`#tile<rounding rna>`."""

    name = "tile.rounding"


ROUNDING_MODES = tuple(r.value for r in Rounding)


@dataclass(frozen=True)
class CastRule:
    """How one element conversion is lowered. `roundings` maps each rounding the conversion may
    take to the first sm that has it (empty: the conversion is exact and takes none); `default`
    is the rounding used when the op names none. `how`: "cvt" emits cvt.<rounding>.<dst>.<src>
    after the load; "extend" is done by the load itself (sub-byte loads sign- or zero-extend)."""

    roundings: tuple[tuple[str, int], ...]
    default: str | None
    how: str

    @property
    def rounding_names(self) -> tuple[str, ...]:
        return tuple(r for r, _ in self.roundings)


# Every conversion the lowering can do, (source, destination) element names -> rule: the one
# table tile.cast verifies against and tile-to-ptx (and the reference runner) lower from.
# cvt.rna.tf32.f32 needs sm_80, cvt.rn/.rz.tf32.f32 sm_90 (PTX 7.8).
CAST_RULES: dict[tuple[str, str], CastRule] = {
    ("f32", "tf32"): CastRule((("rna", 80), ("rn", 90), ("rz", 90)), "rna", "cvt"),
    ("si4", "si8"): CastRule((), None, "extend"),
    ("ui4", "ui8"): CastRule((), None, "extend"),
}


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
                f"tile.cast: shape changes from {_shape_str(src.get_shape())} to "
                f"{_shape_str(dst.get_shape())}; a cast converts elements only"
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
        from tilemma.compiler.layouts import sparse_format as fmt
        from tilemma.compiler.core.memref_layout import row_major, strided_layout

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
                    f"tile.sparse_from: {what} of a {_shape_str(shape)} {res.element} tile must be "
                    f"memref<{_shape_str(dims)}x{element}> (K padded to a multiple of 32; "
                    f"sparse_format's layout), got {ref}"
                )
            try:
                layout = strided_layout(ref)
            except ValueError as e:
                raise VerifyException(f"tile.sparse_from: {e}") from None
            if layout.strides != row_major(got) or layout.offset:
                raise VerifyException(f"tile.sparse_from: {what} must be a contiguous row-major memref, got {ref}")


# Element types of a pre-compressed sparse A (`tile.sparse_from`).
PRE_COMPRESSED = ("f16", "bf16")
# 4-bit integers and the 8-bit type that holds each exactly: select-mma widens to it where 4-bit
# mma is slow, and `warp.widen` does it to staged fragments.
INT4_WIDENED = {"si4": "si8", "ui4": "ui8"}


# The ops that multiply into an accumulator (what tile-select-mma leaves behind).
MMA_OPS = (MmaOp, ScaledMmaOp)

Tile = Dialect(
    "tile",
    [MatmulOp, MmaOp, ScaledMmaOp, LoadOp, StoreOp, CastOp, ConstantOp, CompressOp, SparseFromOp],
    [TileType, SparseTileType, UE4M3Type, PopcAttr, RoundingAttr],
)
