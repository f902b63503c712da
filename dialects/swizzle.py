"""The XOR swizzle of a shared buffer's 16-byte granules, carried by the buffer's type.

`#warp.swizzled<mult>` is a memref layout: `memref<3x64x32xf16, #warp.swizzled<1>, 3>` is a
stages x rows x cols shared buffer whose granule g of row r is kept at
`g ^ ((r / rows-per-128-byte-line * mult) mod period)` (`swizzle_granule`). Being part of the
type, it is seen alike by the copies that write the buffer and the ldmatrix and
`warp.load_shared` reads of it: they cannot disagree, and the lowering reads it from the operand's
type (`swizzle_mult`). `warp-swizzle-shared` writes it on the `memref.alloc`.

`#warp.swizzled<mult, fold>` first folds bit 3 of the row into bit 1 (`swizzle_row`): a
byte-pair `ldmatrix .trans` of an 8-bit operand reads rows 4i and 4i + 1 (i < 4) of 16 in one matrix,
which the plain phase, a function of the row mod 8, maps onto 4 phases twice; folded, onto 8.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntAttr, MemRefLayoutAttr, MemRefType
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.ir.affine import AffineMap
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from tilemma.dialects.attributes import element_bits, element_name


@irdl_attr_definition
class SwizzledLayoutAttr(MemRefLayoutAttr, ParametrizedAttribute):
    """`#warp.swizzled<5>`: the granule swizzle with an odd phase multiplier `mult`. Any odd
    multiplier keeps 8 rows at one column in 8 bank groups (ldmatrix, the copies); 5 also
    spreads the rows one half-warp of an f64 fragment reads over both halves of the banks (the
    plain XOR, 1, leaves them in one half: 2x the wavefronts). An even one is no bijection of
    the 8 phases: two granules would share a place."""

    name = "warp.swizzled"
    mult: IntAttr
    fold: IntAttr  # 1: row bit 3 folded into bit 1 before the phase (`swizzle_row`)

    def __init__(self, mult: int, fold: bool = False):
        super().__init__(IntAttr(mult), IntAttr(int(fold)))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            start = parser.pos
            mult = parser.parse_integer(allow_boolean=False)
            if (problem := _multiplier_problem(mult)) is not None:  # located at the number
                parser.raise_error(problem, start, parser.pos)
            fold = False
            if parser.parse_optional_punctuation(","):
                at = parser.pos
                if parser.parse_optional_identifier() != "fold":
                    parser.raise_error("#warp.swizzled: expected `fold` after the multiplier", at, parser.pos)
                fold = True
            return (IntAttr(mult), IntAttr(int(fold)))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(str(self.mult.data) + (", fold" if self.fold.data else ""))

    def verify(self) -> None:
        if (problem := _multiplier_problem(self.mult.data)) is not None:
            raise VerifyException(problem)
        if self.fold.data not in (0, 1):
            raise VerifyException("#warp.swizzled: fold is 0 or 1")

    def get_affine_map(self) -> AffineMap:
        # an XOR of the column with the row is not affine: no map describes the addresses
        raise DiagnosticException(
            "#warp.swizzled: the granule XOR has no affine map (addresses come from swizzle_granule)")


def _multiplier_problem(mult: int) -> str | None:
    if mult < 1 or mult % 2 == 0 or mult > 7:
        return f"#warp.swizzled: the phase multiplier must be odd, 1..7 (a bijection of the 8 phases), got {mult}"
    return None


def swizzle_mult(ref: Attribute) -> int | None:
    """The phase multiplier of a buffer type's `#warp.swizzled` layout; None for a row-major one."""
    layout = ref.layout if isinstance(ref, MemRefType) else None
    return layout.mult.data if isinstance(layout, SwizzledLayoutAttr) else None


def swizzle_fold(ref: Attribute) -> bool:
    """Whether a buffer type's `#warp.swizzled` layout folds row bit 3 into bit 1."""
    layout = ref.layout if isinstance(ref, MemRefType) else None
    return isinstance(layout, SwizzledLayoutAttr) and bool(layout.fold.data)


def swizzle_row(row, fold: bool = False):
    """The row the phase is computed from: itself, or with bit 3 folded (XORed) into bit 1."""
    return row ^ ((row >> 2) & 2) if fold else row


def period_rows(row_bytes: int, fold: bool = False) -> int:
    """Rows after which the phases repeat (a row offset of a multiple keeps them)."""
    per_line, period = swizzle_phases(row_bytes)
    return max(per_line * period, 16) if fold else per_line * period


def row_bytes(ref: MemRefType) -> int:
    """Bytes of one row of a stages x rows x cols buffer (sub-byte elements packed)."""
    return ref.get_shape()[-1] * element_bits(element_name(ref.element_type)) // 8


def swizzles(ref: MemRefType) -> bool:
    """Whether a stages x rows x cols buffer has rows the swizzle applies to (a power of two of
    at least 32 bytes: the XOR stays inside the row)."""
    n = row_bytes(ref)
    return n >= 32 and n & (n - 1) == 0


def swizzle_phases(row_bytes: int) -> tuple[int, int]:
    """(rows per 128-byte line, number of phases) of the granule swizzle for `row_bytes` rows."""
    return max(1, 128 // row_bytes), min(8, row_bytes // 16)


def swizzle_granule(row, granule, row_bytes: int, mult: int = 1, fold: bool = False):
    """The 16-byte granule where (row, granule) of a buffer with `row_bytes`-byte rows is kept:
    granules XORed with the row's position among the 8 rows that share the banks (times an odd
    `mult`; the row folded first with `fold`), so that 8 rows read at one column (ldmatrix, and
    the copies) touch 8 different bank groups."""
    per_line, period = swizzle_phases(row_bytes)
    return granule ^ (((swizzle_row(row, fold) // per_line) * mult) % period)
