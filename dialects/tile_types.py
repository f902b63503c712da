"""The tile types and the cuda::tiles rules over them.

`!tile.tile<...>` and `!tile.sparse<...>` (with what both share, `TileLike`, and the structured
sparsity each element type may have), then the rules of the CUDA Tile `matmul_compatible` /
`mma_compatible` concepts (`shared/ptx-isa/003_*.txt`), one function each, each error naming the
rule it enforces: which element types may meet, ranks, batch broadcast, the matmul result type,
the accumulator table, and the range of a constant. The `tile` ops' verifiers and the CLI's
generators call them.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DYNAMIC_INDEX, ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from tilemma.dialects.attributes import element_name, element_range, element_type
from tilemma.dialects.element_tables import (
    ELEMENT_CLASSES,
    OPERAND_ELEMENTS,
    SCALE_ELEMENTS,
    TILE_ELEMENTS,
    ElementClass,
)


#: A `?` dimension (MLIR's kDynamic): a size the kernel is given at launch.
DYNAMIC = DYNAMIC_INDEX

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
                printer.print_string("?x" if d == DYNAMIC else f"{d}x")
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
            f"or rank 3 batches), got rank {len(shape)} in {shape_str(shape)}"
        )
    if any(d <= 0 and d != DYNAMIC for d in shape):
        return f"tile dimensions must be positive or ? (a size known at launch), got {shape_str(shape)}"
    if element not in TILE_ELEMENTS:
        return (
            f"element type {element} is not a tile element type; "
            f"allowed: {', '.join(TILE_ELEMENTS)}"
        )
    return None


def shape_str(shape: Sequence[int]) -> str:
    return "x".join("?" if d == DYNAMIC else str(d) for d in shape) or "scalar"


def is_dynamic(shape: Sequence[int]) -> bool:
    """Whether some dimension is `?`: its size is a value the kernel gets at launch."""
    return DYNAMIC in shape


def same_dim(a: int, b: int, what: str, op: str, lhs: Sequence[int], rhs: Sequence[int]) -> None:
    """Two dimensions that must be one size: equal, or both `?` (the launch checks that the
    buffers agree); a static size against `?` is refused, since nothing would check it."""
    if a == b:
        return
    if DYNAMIC in (a, b):
        raise VerifyException(
            f"{op}: {what} is ? in one operand and {b if a == DYNAMIC else a} in the other "
            f"({shape_str(lhs)} and {shape_str(rhs)}); make both ? or both static"
        )
    raise VerifyException(f"{op}: {what} differs: {shape_str(lhs)} and {shape_str(rhs)}")


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
                printer.print_string("?x" if d == DYNAMIC else f"{d}x")
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
            f"{shape_str(lhs)} and {shape_str(rhs)}"
        )
    n, k = lhs[-2], lhs[-1]
    k2, m = rhs[-2], rhs[-1]
    if DYNAMIC in (k, k2) and k != k2:
        same_dim(k, k2, "the contraction dimension K", op, lhs, rhs)
    if k != k2:
        raise VerifyException(
            f"{op}: contraction dimensions differ: left is {shape_str(lhs)} (N x K with K={k}), "
            f"right is {shape_str(rhs)} (K x M with K={k2}) (rule: N x K times K x M)"
        )
    if len(lhs) == 2:
        return None, n, k, m
    a, b = lhs[0], rhs[0]
    if DYNAMIC in (a, b) and a != b:
        same_dim(a, b, "the batch", op, lhs, rhs)
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
            f"{shape_str(ls)}, {shape_str(rs)} and {shape_str(cs)}"
        )
    _, n, _, m = batch_dims(ls, rs, "tile.mma")
    if tuple(cs[-2:]) != (n, m):
        raise VerifyException(
            f"tile.mma: accumulator shape {shape_str(cs)} does not match N x M = {shape_str((n, m))} of "
            f"{shape_str(ls)} times {shape_str(rs)} (rule 4: N x K, K x M, N x M)"
        )
    if len(cs) == 3:
        for side, b in (("left", ls[0]), ("right", rs[0])):
            if b not in (cs[0], 1):
                raise VerifyException(
                    f"tile.mma: {side} batch {b} must equal the accumulator batch {cs[0]} or "
                    f"be 1 (rule 5: broadcast of a batch of 1)"
                )


def constant_problem(value: int | float, element: str) -> str | None:
    """Why `value` cannot be a constant of `element` (None if it can): it must lie in the type's
    finite range, or the lowering would wrap or overflow it silently."""
    low, high = element_range(element)
    if low <= value <= high or value != value or abs(value) == float("inf"):
        return None
    return f"tile.constant: {value!r} is out of range for {element} (range {low!r} to {high!r})"
