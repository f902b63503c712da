"""The `warp` ops of the epilogue: the accumulator as a distributed tile, and elementwise work on
accumulator-shaped fragments.

`tile-distribute` ends the K loop with `warp.distributed`: the tile value the loop computed, as
each warp holds it (its RM x RN accumulator fragments and where each starts). The tile ops after
the mma still read that value; `tile-distribute-epilogue` rewrites each of them to the same work
on every fragment: `warp.map` (the `tile.map` body, applied to each value a lane holds),
`warp.cast` and the loads and stores, so the epilogue runs in registers and D is stored once, in
its final type. An accumulator-shaped fragment of another element type (f16 after a cast, a
bias loaded in the accumulator's layout) is `!warp.frag<acc, f16, ...>`: the instruction's C
layout, its values packed by their width. Where `#warp.schedule` splits K across CTAs,
`warp.split_k_publish` and `warp.split_k_sum` first make the partial accumulators of an output
tile's CTAs one sum.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IndexType, IntegerAttr, MemRefType, i64
from xdsl.ir import Attribute, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from tilemma.dialects.attributes import Operand, Rounding, RoundingAttr, element_name
from tilemma.dialects.element_tables import CAST_RULES
from tilemma.dialects.tile_epilogue import scalar_type
from tilemma.dialects.tile_types import TileType
from tilemma.dialects.warp import FragType


def _acc_frags(values: Sequence[SSAValue], what: str) -> list[FragType]:
    frags = []
    for v in values:
        if not isinstance(v.type, FragType) or v.type.role != Operand.ACC:
            raise VerifyException(f"{what} must be accumulator fragments (!warp.frag<acc, ...>), got {v.type}")
        frags.append(v.type)
    if frags and any(f.variant_attr != frags[0].variant_attr for f in frags):
        raise VerifyException(f"{what}: every fragment must belong to one instruction")
    return frags


@irdl_op_definition
class DistributedOp(IRDLOperation):
    """The mma's result tile as the warps hold it: fragment (i, j) of the warp tile
    (`frags[i * RN + j]`) starts at tile row `rows[i]`, column `cols[j]` of batch `batch`.
    `in_bounds` (rows, cols) says where no fragment can leave the tile and `col_align` what the
    column indices are multiples of: the facts the distributing pass established."""

    name = "warp.distributed"
    frags = var_operand_def(FragType)
    batch = operand_def(IndexType)
    rows = var_operand_def(IndexType)
    cols = var_operand_def(IndexType)
    in_bounds = prop_def(DenseArrayBase)
    col_align = prop_def(IntegerAttr)
    result = result_def(TileType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())

    assembly_format = ("$frags `at` `[` $batch `]` `[` $rows `]` `[` $cols `]` attr-dict "
                       "`:` type($frags) `->` type($result)")

    def __init__(self, frags: Sequence[SSAValue], batch: SSAValue, rows: Sequence[SSAValue],
                 cols: Sequence[SSAValue], in_bounds: tuple[bool, bool], col_align: int, result: TileType):
        super().__init__(
            operands=[list(frags), batch, list(rows), list(cols)], result_types=[result],
            properties={"in_bounds": DenseArrayBase.from_list(i64, [int(b) for b in in_bounds]),
                        "col_align": IntegerAttr(col_align, i64)})

    def in_bounds_values(self) -> tuple[bool, bool]:
        return tuple(bool(x) for x in self.in_bounds.get_values())  # type: ignore[return-value]

    def verify_(self) -> None:
        frags = _acc_frags(self.frags, "warp.distributed")
        if len(frags) != len(self.rows) * len(self.cols):
            raise VerifyException(
                f"warp.distributed: {len(self.rows)} x {len(self.cols)} fragments expected, got {len(frags)}")
        res = self.result.type
        assert isinstance(res, TileType)
        if frags and element_name(frags[0].element) != res.element:
            raise VerifyException(f"warp.distributed: the fragments hold {element_name(frags[0].element)}, "
                                  f"the tile {res.element}")
        if len(self.in_bounds.get_values()) != 2:
            raise VerifyException("warp.distributed: in_bounds has two flags (rows, cols)")


def _split_buffers(name: str, partials: list[FragType], workspace: SSAValue, counters: SSAValue | None,
                   splits: int) -> None:
    """The checks `warp.split_k_publish` and `warp.split_k_sum` share: partial sums of an element
    split-K adds, at least two splits, one-dimensional buffers, the workspace of that element."""
    if partials and element_name(partials[0].element) not in SPLIT_ELEMENTS:
        raise VerifyException(f"{name}: partial sums of {element_name(partials[0].element)} "
                              f"are not added up (only {', '.join(SPLIT_ELEMENTS)})")
    if splits < 2:
        raise VerifyException(f"{name}: splits is 2 or more")
    for what, ref, want in (("workspace", workspace, None), ("counters", counters, "ui32")):
        if ref is None:
            continue
        t = ref.type
        assert isinstance(t, MemRefType)
        if len(t.get_shape()) != 1 or (want and element_name(t.element_type) != want):
            raise VerifyException(f"{name}: {what} is a one-dimensional memref{' of ' + want if want else ''}")
    if partials and element_name(workspace.type.element_type) != element_name(partials[0].element):  # type: ignore[attr-defined]
        raise VerifyException(f"{name}: the workspace holds the partials' element type")


@irdl_op_definition
class SplitKPublishOp(IRDLOperation):
    """`warp.split_k_publish`: the `splits` CTAs that share output tile `tile` (each multiplied
    its own part of K, `split` of them) meet here. Each stores its partial accumulators into
    `workspace` (per tile, split, register and thread: one word or double each) and counts
    itself in the tile's word of `counters` (atomically, after a fence); every CTA but the last
    to arrive then leaves the kernel. The last one sets the counter back to 0 for the next launch
    and goes on to `warp.split_k_sum`. Its accumulators are free from here, so that C, which joins
    the sum, may be loaded after this op rather than held beside them (`tile-distribute` does
    where a thread could not hold both)."""

    name = "warp.split_k_publish"
    partials = var_operand_def(FragType)
    split = operand_def(IndexType)
    tile = operand_def(IndexType)
    workspace = operand_def(MemRefType)
    counters = operand_def(MemRefType)
    splits = prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = ("`(` $partials `)` `split` $split `of` $splits `tile` $tile `in` $workspace `,` $counters "
                       "attr-dict `:` type($workspace) `,` type($counters) `,` `(` type($partials) `)`")

    def __init__(self, partials: Sequence[SSAValue], split: SSAValue, tile: SSAValue, workspace: SSAValue,
                 counters: SSAValue, splits: int):
        super().__init__(operands=[list(partials), split, tile, workspace, counters],
                         properties={"splits": IntegerAttr(splits, i64)})

    def verify_(self) -> None:
        parts = _acc_frags(self.partials, "warp.split_k_publish partials")
        _split_buffers(self.name, parts, self.workspace, self.counters, self.splits.value.data)


@irdl_op_definition
class SplitKSumOp(IRDLOperation):
    """`warp.split_k_sum`: in the CTA a `warp.split_k_publish` of the same tile and workspace
    let through (the last of the tile's `splits`), the tile's sum
    `((init + p_0) + p_1) + ... + p_{splits-1}` of the partials the CTAs published, in split
    order whichever CTA it is, so the sum does not depend on the order CTAs finish. `init` is C
    (or its constant): the splits multiply from zero."""

    name = "warp.split_k_sum"
    init = var_operand_def(FragType)
    tile = operand_def(IndexType)
    workspace = operand_def(MemRefType)
    splits = prop_def(IntegerAttr)
    results_ = var_result_def(FragType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = ("`(` $init `)` `of` $splits `tile` $tile `in` $workspace attr-dict `:` type($workspace) "
                       "`,` `(` type($init) `)` `->` type($results_)")

    def __init__(self, init: Sequence[SSAValue], tile: SSAValue, workspace: SSAValue, splits: int):
        super().__init__(operands=[list(init), tile, workspace], result_types=[[i.type for i in init]],
                         properties={"splits": IntegerAttr(splits, i64)})

    def verify_(self) -> None:
        inits = _acc_frags(self.init, "warp.split_k_sum init")
        if [r.type for r in self.results_] != inits:
            raise VerifyException("warp.split_k_sum: the results have init's types, one each")
        _split_buffers(self.name, inits, self.workspace, None, self.splits.value.data)
        publish = self.prev_op
        while publish is not None and not (isinstance(publish, SplitKPublishOp)
                                           and publish.workspace == self.workspace):
            publish = publish.prev_op
        if publish is None or publish.tile != self.tile or publish.splits != self.splits \
                or [p.type for p in publish.partials] != inits:
            raise VerifyException("warp.split_k_sum: follows the warp.split_k_publish of its tile and workspace "
                                  "in its block, of as many splits and fragments")


#: Accumulator elements whose partial sums split-K adds (wrapping or rounding, never saturating).
SPLIT_ELEMENTS = ("f32", "si32", "f64")


@irdl_op_definition
class MapYieldOp(IRDLOperation):
    """The values of one element of each `warp.map` result."""

    name = "warp.yield"
    values = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(MapOp), Pure()))

    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class MapOp(IRDLOperation):
    """`tile.map`'s body applied to every value a lane holds of accumulator-shaped fragments of
    one instruction (value v of every input is the same tile element). An input may be
    `!warp.rows` of the instruction: value v then sees the value of v's row. A map whose inputs
    are all rows (or that has none) computes rows."""

    name = "warp.map"
    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    traits = traits_def(Pure())

    def __init__(self, inputs: Sequence[SSAValue], result_types: Sequence[Attribute], body: Region):
        super().__init__(operands=[list(inputs)], result_types=[list(result_types)], regions=[body])

    def rows_only(self) -> bool:
        """Whether the map computes rows (no fragment input)."""
        from tilemma.dialects.warp_rows import RowsType

        return all(isinstance(v.type, RowsType) for v in self.inputs)

    def verify_(self) -> None:
        from tilemma.dialects.warp_rows import RowsType

        if not self.outputs:
            raise VerifyException("warp.map needs at least one result")
        rows_only = self.rows_only()
        frags = [v for v in self.inputs if not isinstance(v.type, RowsType)]
        _acc_frags(frags, "warp.map inputs")
        if rows_only:
            for r in self.outputs:
                if not isinstance(r.type, RowsType):
                    raise VerifyException(f"warp.map: a map of rows computes rows (!warp.rows), got {r.type}")
        else:
            _acc_frags(self.outputs, "warp.map results")
        variants = {v.type.variant_attr for v in [*self.inputs, *self.outputs]}  # type: ignore[union-attr]
        if len(variants) != 1:
            raise VerifyException("warp.map: the inputs and results belong to one instruction")
        block = self.body.block
        want = [scalar_type(element_name(v.type.element)) for v in self.inputs]  # type: ignore[union-attr]
        if [a.type for a in block.args] != want:
            raise VerifyException("warp.map: the body's arguments must be the inputs' elements")
        term = block.last_op
        if not isinstance(term, MapYieldOp) or [v.type for v in term.values] != [
                scalar_type(element_name(r.type.element)) for r in self.outputs]:  # type: ignore[union-attr]
            raise VerifyException("warp.map: the body must end with warp.yield of the results' elements")

    def print(self, printer: Printer) -> None:
        if self.inputs:
            printer.print_string(" ")
            printer.print_list(self.inputs, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list((v.type for v in self.inputs), printer.print_attribute)
        printer.print_string(" -> " if self.inputs else "-> ")
        printer.print_list((r.type for r in self.outputs), printer.print_attribute)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> MapOp:
        first = parser.parse_optional_unresolved_operand()
        names = [] if first is None else [first]
        while first is not None and parser.parse_optional_punctuation(","):
            names.append(parser.parse_unresolved_operand())
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [] if not names else parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        parser.parse_punctuation("->")
        results = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        body = parser.parse_region()
        op = cls([parser.resolve_operand(n, t) for n, t in zip(names, types)], results, body)
        op.attributes |= attrs
        return op


@irdl_op_definition
class CastOp(IRDLOperation):
    """`tile.cast` of an accumulator-shaped fragment: every value converted (`CAST_RULES`,
    result conversions), rounded as `rounding` says (the rule's default when absent)."""

    name = "warp.cast"
    source = operand_def(FragType)
    result = result_def(FragType)
    rounding = opt_prop_def(Attribute)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, result: FragType, rounding: str | None = None):
        props = {"rounding": RoundingAttr(Rounding(rounding))} if rounding else {}
        super().__init__(operands=[source], result_types=[result], properties=props)

    def verify_(self) -> None:
        [src] = _acc_frags([self.source], "warp.cast source")
        [dst] = _acc_frags([self.result], "warp.cast result")
        if src.variant_attr != dst.variant_attr:
            raise VerifyException("warp.cast: the result belongs to the source's instruction")
        pair = (element_name(src.element), element_name(dst.element))
        rule = CAST_RULES.get(pair)
        if rule is None or rule.on != "result":
            raise VerifyException(f"warp.cast: no result conversion {pair[0]} -> {pair[1]}")
        if self.rounding is not None and (not isinstance(self.rounding, RoundingAttr)
                                          or self.rounding.data not in rule.rounding_names):
            raise VerifyException(f"warp.cast: {pair[0]} -> {pair[1]} takes rounding "
                                  f"{' / '.join(rule.rounding_names) or 'none'}")


EPILOGUE_OPS = (DistributedOp, MapOp, MapYieldOp, CastOp)
