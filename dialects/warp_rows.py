"""The `warp` ops that read an accumulator again: by rows, and as the next mma's A operand.

Attention computes S = Q.K^T, a softmax along S's rows, and P.V with P = the softmax's result:
everything between the two mmas stays in the registers that hold S. What that needs at the warp
level, all typed by the instruction whose accumulator layout it reads:

- `!warp.rows<f32, #warp.variant<...>>`: one value per accumulator row a lane holds (rows g and
  g + 8 of an m16n8 tile: two), the same in the lanes that share the rows (after a reduction);
- `warp.row_reduce`: max or sum along the rows of a row of accumulator tiles (the lane's values,
  then butterfly shuffles across the lanes sharing the rows);
- `warp.map` (the epilogue's) takes `!warp.rows` inputs too: a row's value is broadcast onto every
  accumulator value of that row, and a map of rows alone computes rows (the running max);
- `warp.mask`: accumulator values past a column limit, or (causal) above the diagonal, set to a
  value (-inf before a softmax), from the tile coordinates of the fragment;
- `warp.to_lhs`: accumulators of adjacent column tiles, cast to the next mma's A type, read as
  its A fragment: the same registers (the fragment tables prove it: `acc_reuse.lhs_registers`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import FloatAttr, IndexType, StringAttr, UnitAttr, f32
from xdsl.ir import Attribute, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.layouts import acc_reuse
from tilemma.compiler.layouts.mma_layouts import instruction_layouts
from tilemma.dialects.attributes import Operand, VariantAttr, element_name
from tilemma.dialects.warp import FragType

REDUCTIONS = ("max", "add")


@irdl_attr_definition
class RowsType(ParametrizedAttribute, TypeAttribute):
    """`!warp.rows<f32, #warp.variant<...>>`: per lane, one value per accumulator row it holds
    of the variant (`acc_reuse.row_slots`: value v of an accumulator is in row slot slot[v])."""

    name = "warp.rows"
    element: Attribute
    variant_attr: VariantAttr

    def __init__(self, element: Attribute, variant: VariantAttr):
        super().__init__(element, variant)

    def slots(self) -> acc_reuse.RowSlots:
        return acc_reuse.row_slots(instruction_layouts(self.variant_attr.variant).c)

    def verify(self) -> None:
        if element_name(self.element) != "f32":
            raise VerifyException(f"warp.rows: row values are f32, not {self.element}")
        try:
            self.slots()
        except ValueError as e:
            raise VerifyException(f"warp.rows: {e}") from None

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.element)
            printer.print_string(", ")
            printer.print_attribute(self.variant_attr)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            element = parser.parse_type()
            parser.parse_punctuation(",")
            variant = parser.parse_attribute()
            if not isinstance(variant, VariantAttr):
                parser.raise_error("expected #warp.variant<...>")
        return (element, variant)


def _f32_accs(values: Sequence[SSAValue], what: str) -> list[FragType]:
    frags = []
    for v in values:
        t = v.type
        if not isinstance(t, FragType) or t.role != Operand.ACC or element_name(t.element) != "f32":
            raise VerifyException(f"{what} must be f32 accumulator fragments (!warp.frag<acc, f32, ...>), got {t}")
        frags.append(t)
    if any(f.variant_attr != frags[0].variant_attr for f in frags):
        raise VerifyException(f"{what}: every fragment must belong to one instruction")
    return frags


@irdl_op_definition
class RowReduceOp(IRDLOperation):
    """`warp.row_reduce max|add %f0, %f1, ...`: for each row of the fragments (tiles of one row of
    a warp tile: they hold the same rows), the max or the sum of all their values in it, held by
    every lane that holds the row. The order is fixed: each lane's values fragment by fragment,
    then butterfly exchanges (`shfl.sync.bfly`) over the lanes that share the rows."""

    name = "warp.row_reduce"
    kind = prop_def(StringAttr)
    frags = var_operand_def(FragType)
    result = result_def(RowsType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$frags attr-dict `:` type($frags) `->` type($result)"

    def __init__(self, kind: str, frags: Sequence[SSAValue]):
        first = frags[0].type
        assert isinstance(first, FragType)
        super().__init__(operands=[list(frags)], result_types=[RowsType(first.element, first.variant_attr)],
                         properties={"kind": StringAttr(kind)})

    def verify_(self) -> None:
        if self.kind.data not in REDUCTIONS:
            raise VerifyException(f"warp.row_reduce: kind must be one of {', '.join(REDUCTIONS)}, got {self.kind.data!r}")
        if not self.frags:
            raise VerifyException("warp.row_reduce: needs at least one fragment")
        frags = _f32_accs(self.frags, "warp.row_reduce operands")
        assert isinstance(self.result.type, RowsType)
        if self.result.type.variant_attr != frags[0].variant_attr:
            raise VerifyException("warp.row_reduce: the rows belong to the fragments' instruction")


@irdl_op_definition
class MaskOp(IRDLOperation):
    """`warp.mask %acc at [%row][%col] cols %limit {causal, value = ...}`: the accumulator
    fragment whose tile starts at (row, col), with every value at a column >= `limit` (when
    given) or, `causal`, at a column > its row set to `value`; the others unchanged."""

    name = "warp.mask"
    source = operand_def(FragType)
    row = operand_def(IndexType)
    col = operand_def(IndexType)
    limit = opt_operand_def(IndexType)
    causal = opt_prop_def(UnitAttr)
    value = prop_def(FloatAttr)
    result = result_def(FragType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = ("$source `at` `[` $row `]` `[` $col `]` (`cols` $limit^)? attr-dict "
                       "`:` type($source) `->` type($result)")

    def __init__(self, source: SSAValue, row: SSAValue, col: SSAValue, limit: SSAValue | None, causal: bool,
                 value: float):
        props: dict[str, Attribute] = {"value": FloatAttr(value, f32)}
        if causal:
            props["causal"] = UnitAttr()
        super().__init__(operands=[source, row, col, [limit] if limit else []], result_types=[source.type],
                         properties=props)

    def verify_(self) -> None:
        _f32_accs([self.source], "warp.mask source")
        if self.result.type != self.source.type:
            raise VerifyException("warp.mask: the result type is the source's")
        if self.limit is None and self.causal is None:
            raise VerifyException("warp.mask: masks columns past a limit, causally, or both: give one")


@irdl_op_definition
class ToLhsOp(IRDLOperation):
    """`warp.to_lhs %c0, %c1 : acc frags -> !warp.frag<a, ...>`: accumulator fragments of
    adjacent column tiles (already of the A operand's element type), read as one A fragment of
    the result's instruction. Only where every A register is one of theirs, value for value
    (`acc_reuse.lhs_registers`): no instruction is emitted."""

    name = "warp.to_lhs"
    sources = var_operand_def(FragType)
    result = result_def(FragType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$sources attr-dict `:` type($sources) `->` type($result)"

    def __init__(self, sources: Sequence[SSAValue], result: FragType):
        super().__init__(operands=[list(sources)], result_types=[result])

    def registers(self) -> tuple[tuple[int, int], ...]:
        """For each A register, (source, register): what the verifier proved."""
        src = self.sources[0].type
        assert isinstance(src, FragType) and isinstance(self.result.type, FragType)
        return acc_reuse.lhs_registers(src.layout(), self.result.type.layout())

    def verify_(self) -> None:
        if not self.sources:
            raise VerifyException("warp.to_lhs: needs the accumulator fragments")
        srcs = [s.type for s in self.sources]
        for t in srcs:
            if not isinstance(t, FragType) or t.role != Operand.ACC:
                raise VerifyException(f"warp.to_lhs: sources must be accumulator fragments, got {t}")
        if any(t != srcs[0] for t in srcs):
            raise VerifyException("warp.to_lhs: the sources are fragments of one type")
        out = self.result.type
        if not isinstance(out, FragType) or out.role != Operand.A:
            raise VerifyException(f"warp.to_lhs: the result is an A fragment, got {out}")
        if out.element != srcs[0].element:
            raise VerifyException(f"warp.to_lhs: the sources hold {srcs[0].element}, the A fragment "
                                  f"{out.element}: warp.cast them first")
        try:
            mapping = self.registers()
        except ValueError as e:
            raise VerifyException(f"warp.to_lhs: {e}") from None
        used = {t for t, _ in mapping}
        if used != set(range(len(self.sources))):
            raise VerifyException(f"warp.to_lhs: the A fragment is made of {len(used)} accumulator tiles, "
                                  f"not {len(self.sources)}")


ROWS_OPS = (RowReduceOp, MaskOp, ToLhsOp)
