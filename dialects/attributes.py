"""Attributes and types that both levels, `tile` and `warp`, use, and the element-type helpers
over them: one module that `tile.py` and `warp.py` import, so neither imports the other.

- Element types: `UE4M3Type` (`!tile.ue4m3`, which MLIR lacks), and `element_name`,
  `element_type`, `element_bits`, `canonical_element`, `element_range` between xDSL types and
  the records of `compiler/core/elements.py`, keyed by MLIR name.
- `#tile<popc ...>` and `#tile<rounding ...>`: the bit operation of a single-bit mma and the
  rounding of a conversion (tile ops carry them, and so do the warp ops they become).
- `#warp.variant<...>` (the selected `mma` instruction, field by field), `#warp.target<...>` and
  `Operand` (which register group a fragment feeds).

The attribute names (`tile.*`, `warp.*`) say which dialect registers each one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import auto

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    DictionaryAttr,
    Float4E2M1FNType,
    Float6E2M3FNType,
    Float6E3M2FNType,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatTF32Type,
    IntegerType,
    Signedness,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, ParametrizedAttribute, SpacedOpaqueSyntaxAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.str_enum import StrEnum

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.core.elements import canonical as canonical_element  # MLIR or PTX name -> MLIR name
from tilemma.compiler.core.isa import MmaVariant


@irdl_attr_definition
class UE4M3Type(ParametrizedAttribute, TypeAttribute):
    """Unsigned e4m3 (the `.ue4m3` block-scale type of `.kind::mxf4nvf4`); MLIR has no builtin."""

    name = "tile.ue4m3"


# ---------------------------------------------------------------------------------------------
# Element types: xDSL types <-> the MLIR names the tables are keyed by.
# ---------------------------------------------------------------------------------------------


def element_name(t: Attribute) -> str:
    """The MLIR spelling of an element type (`f16`, `si8`, `i1`, `f8E4M3FN`, `ue4m3`, ...).

    Remembered per type: a float type's spelling comes from xDSL's printer (~40 us), and a
    compile asks for it hundreds of times."""
    name = _ELEMENT_NAMES.get(t)
    if name is None:
        name = _ELEMENT_NAMES[t] = _element_name(t)
    return name


_ELEMENT_NAMES: dict[Attribute, str] = {}


def _element_name(t: Attribute) -> str:
    if isinstance(t, IntegerType):
        prefix = {Signedness.SIGNED: "si", Signedness.UNSIGNED: "ui"}.get(
            t.signedness.data, "i"
        )
        return f"{prefix}{t.width.data}"
    if isinstance(t, UE4M3Type):
        return "ue4m3"
    return str(t)


# xDSL's float types, by their own spelling (which is the MLIR name).
_FLOAT_TYPES: dict[str, Attribute] = {
    str(t): t
    for t in (
        Float16Type(), BFloat16Type(), FloatTF32Type(), Float32Type(), Float64Type(),
        Float8E4M3FNType(), Float8E5M2Type(), Float6E3M2FNType(), Float6E2M3FNType(),
        Float4E2M1FNType(), Float8E8M0FNUType(),
    )
}  # fmt: skip


def _xdsl_type(name: str) -> Attribute:
    e = ELEMENTS[name]
    if not e.builtin:
        return UE4M3Type()
    if e.is_float:
        return _FLOAT_TYPES[name]
    signedness = Signedness.SIGNLESS if e.is_bit else Signedness.SIGNED if e.signed else Signedness.UNSIGNED
    return IntegerType(e.bits, signedness)


_ELEMENT_TYPES: dict[str, Attribute] = {name: _xdsl_type(name) for name in ELEMENTS}


def element_type(name: str) -> Attribute:
    """The attribute for an element type named as in MLIR or PTX (see `TILE_ELEMENTS`)."""
    return _ELEMENT_TYPES[canonical_element(name)]


def element_bits(name: str) -> int:
    """Bits of one element's value (tf32 travels as 32 bits; fp6 is 6, stored in a byte)."""
    return ELEMENTS[name].bits


def element_range(name: str) -> tuple[int | float, int | float]:
    """(lowest, highest) finite value of an element type. Signless integers (i1) take either
    reading, as MLIR's integer attributes do: -2**(w-1) .. 2**w - 1."""
    e = ELEMENTS[name]
    if e.is_float:
        return e.float_range
    if e.is_bit:
        return -(2 ** (e.bits - 1)), 2**e.bits - 1
    return e.int_range


# ---------------------------------------------------------------------------------------------
# Bit operation and rounding (tile ops and the warp ops they become).
# ---------------------------------------------------------------------------------------------


class Popc(StrEnum):
    """The bit operation of a single-bit mma (PTX .xor.popc / .and.popc)."""

    XOR = auto()
    AND = auto()


@irdl_attr_definition
class PopcAttr(EnumAttribute[Popc], SpacedOpaqueSyntaxAttribute):
    """`#tile<popc xor>`."""

    name = "tile.popc"


class Rounding(StrEnum):
    """How a conversion rounds (PTX cvt modifiers): to nearest even, to nearest away, to zero;
    `trunc` (f32 -> tf32 only) converts nothing: the tensor cores read a tf32 register's top 19
    bits, so an f32 goes in as it is (rz for numbers and infinities; a NaN whose payload lies in
    the low 13 bits alone reads as an infinity) - what cuBLAS, Triton and CUTLASS's round_toward_zero
    conversion feed their tf32 mmas."""

    RN = auto()
    RNA = auto()
    RZ = auto()
    TRUNC = auto()


@irdl_attr_definition
class RoundingAttr(EnumAttribute[Rounding], SpacedOpaqueSyntaxAttribute):
    """`#tile<rounding rna>`."""

    name = "tile.rounding"


ROUNDING_MODES = tuple(r.value for r in Rounding)


# ---------------------------------------------------------------------------------------------
# The selected instruction, as a typed attribute.
# ---------------------------------------------------------------------------------------------

# Optional qualifiers of MmaVariant, in printing order; flags print bare, others as key = "v".
_FLAGS = ("block_scale", "satfinite")
_VALUED = ("sparse", "kind", "scale_vec", "stype", "bitop", "rounding")


@irdl_attr_definition
class VariantAttr(ParametrizedAttribute):
    """One `mma` variant of the ISA table (`compiler/isa.py`), field by field:
    `#warp.variant<m16n8k16, f32, f16, f16, f32>` (shape, d, a, b, c types), then qualifiers,
    e.g. `sparse = "sp::ordered_metadata"`, `kind = "mxf4"`, `block_scale`, `satfinite`,
    `bitop = "xor"`, `rounding = "rn"`. Passes read `.variant`; no opcode text is parsed."""

    name = "warp.variant"
    shape: DenseArrayBase
    types: ArrayAttr[StringAttr]
    quals: DictionaryAttr

    def __init__(self, v: MmaVariant):
        quals: dict[str, Attribute] = {}
        for f in _FLAGS:
            if getattr(v, f):
                quals[f] = UnitAttr()
        for f in _VALUED:
            if getattr(v, f) is not None:
                quals[f] = StringAttr(getattr(v, f))
        super().__init__(
            DenseArrayBase.from_list(i64, [v.m, v.n, v.k]),
            ArrayAttr(StringAttr(t) for t in (v.dtype, v.atype, v.btype, v.ctype)),
            DictionaryAttr(quals),
        )

    @property
    def variant(self) -> MmaVariant:
        m, n, k = self.shape.get_values()
        d, a, b, c = (t.data for t in self.types.data)
        q = self.quals.data
        fields: dict = {f: f in q for f in _FLAGS}
        fields.update({f: q[f].data for f in _VALUED if f in q})
        return MmaVariant(m, n, k, d, a, b, c, **fields)

    def print_parameters(self, printer: Printer) -> None:
        v = self.variant
        parts = [v.shape, v.dtype, v.atype, v.btype, v.ctype]
        parts += [f for f in _FLAGS if getattr(v, f)]
        parts += [f'{f} = "{getattr(v, f)}"' for f in _VALUED if getattr(v, f) is not None]
        printer.print_string("<" + ", ".join(parts) + ">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        start = parser.pos
        with parser.in_angle_brackets():
            shape = parser.parse_identifier()
            types = []
            for _ in range(4):
                parser.parse_punctuation(",")
                types.append(parser.parse_identifier())
            fields: dict = {}
            while parser.parse_optional_punctuation(","):
                key = parser.parse_identifier()
                if key in _FLAGS:
                    fields[key] = True
                elif key in _VALUED:
                    parser.parse_punctuation("=")
                    fields[key] = parser.parse_str_literal()
                else:
                    parser.raise_error(
                        f"unknown mma qualifier {key!r}; known: {', '.join(_FLAGS + _VALUED)}"
                    )
        try:
            m, n, k = _shape_mnk(shape)
        except ValueError as e:
            parser.raise_error(str(e), start, parser.pos)
        v = MmaVariant(m, n, k, *types, **fields)
        if not v.is_defined:
            parser.raise_error(f"{v.opcode} is not an mma variant of the ISA table", start, parser.pos)
        return VariantAttr(v).parameters


def _shape_mnk(shape: str) -> tuple[int, int, int]:
    match = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", shape)
    if not match:
        raise ValueError(f"mma shape must look like m16n8k16, got {shape!r}")
    return int(match[1]), int(match[2]), int(match[3])


@irdl_attr_definition
class TargetAttr(ParametrizedAttribute):
    """`#warp.target<"sm_90", "9.0">`: the target and PTX ISA version a kernel was selected for
    (set by tile-select-mma on the kernel as `warp.target`; the PTX module header is made from it)."""

    name = "warp.target"
    sm: StringAttr
    ptx: StringAttr

    def __init__(self, sm: str, ptx: str):
        super().__init__(StringAttr(sm), StringAttr(ptx))


# ---------------------------------------------------------------------------------------------
# Fragment operands.
# ---------------------------------------------------------------------------------------------


class Operand(StrEnum):
    """Which register group of the instruction a fragment feeds (PTX names them a, b, c/d, e,
    scale-a-data, scale-b-data)."""

    A = auto()
    B = auto()
    ACC = auto()
    META = auto()
    SCALE_A = auto()
    SCALE_B = auto()
