"""The `warp` dialect: the level between `tile` and `ptx`, where one warp's share of a GEMM is
explicit (the slot MLIR's `nvgpu` fills).

Values are register fragments of one `mma` operand, typed `!warp.frag<OPERAND, ELEMENT,
#warp.variant<...>>`: the variant and operand name the lane layout (`compiler/fragments.py` and
its sparse and scale companions are read from the type, never from a side channel), the element
is what the registers hold. Ops move fragments between memref windows and registers (predicated
at the tile's edge), multiply them (`warp.mma`), compress a sparse A in registers
(`warp.load_sparse_a`) and split f32 into tf32 parts (`warp.split_tf32`). Thread and block ids
come from `gpu`, the K loop is `scf.for` with the accumulators as `iter_args`, index arithmetic is
`arith`. A kernel's launch shape and the role of each argument are attributes of its `func.func`
(`warp.grid`, `warp.block`, `warp.role`), read back as `KernelABI`.

This module holds the fragment type, the ops on fragments and registers, and the dialect; the
ops of shared memory (copies, their groups, stage reads) are in `warp_shared`, the epilogue's in
`warp_epilogue`, the transposing fill's in `warp_fill`, the row and chaining ops in `warp_rows`, a
warp-specialized kernel's mbarriers in `warp_mbarrier`, the TMA's copy in `warp_tma`.
The attributes the ops carry (`#warp.variant`, `#warp.target`, the operand names) are in
`attributes`, with what `tile` shares; the `#warp.swizzled` layout of a shared buffer's type is in
`swizzle`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
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
    var_result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.core.isa import MmaVariant
from tilemma.compiler.layouts import sparse_format as fmt
from tilemma.dialects.attributes import (
    Operand,
    Rounding,
    RoundingAttr,
    TargetAttr,
    VariantAttr,
    element_name,
)
from tilemma.dialects.element_tables import INT4_WIDENED, PRE_COMPRESSED
from tilemma.dialects.schedule import ScheduleAttr

# The swizzled layout of a shared buffer, read by callers as warp.X too.
from tilemma.dialects.swizzle import (  # noqa: F401
    SwizzledLayoutAttr,
    row_bytes,
    period_rows,
    swizzle_fold,
    swizzle_granule,
    swizzle_mult,
    swizzle_phases,
    swizzles,
)


# ---------------------------------------------------------------------------------------------
# Fragments.
# ---------------------------------------------------------------------------------------------


@irdl_attr_definition
class FragType(ParametrizedAttribute, TypeAttribute):
    """`!warp.frag<a, f16, #warp.variant<...>>`: one warp's registers for one operand of one
    instruction; lane l holds the elements the variant's layout assigns to it."""

    name = "warp.frag"
    operand: StringAttr
    element: Attribute
    variant_attr: VariantAttr

    def __init__(self, operand: Operand, element: Attribute, variant: VariantAttr | MmaVariant):
        if isinstance(variant, MmaVariant):
            variant = VariantAttr(variant)
        super().__init__(StringAttr(operand.value), element, variant)

    @property
    def role(self) -> Operand:
        return Operand(self.operand.data)

    @property
    def variant(self) -> MmaVariant:
        return self.variant_attr.variant

    def layout(self):
        """The fragment's layout (`compiler/layouts`); an accumulator-shaped fragment of another
        element than the instruction's (the epilogue's) is the C layout repacked by the
        element's width."""
        from tilemma.compiler.core.elements import ELEMENTS
        from tilemma.compiler.layouts import fragments
        from tilemma.compiler.layouts.mma_layouts import instruction_layouts

        lays = instruction_layouts(self.variant)
        lay = {Operand.A: lays.a, Operand.B: lays.b, Operand.ACC: lays.c}[self.role]
        if self.role == Operand.ACC:
            element = ELEMENTS[element_name(self.element)]
            if element.ptx != lay.elem_type:
                return fragments.repacked(lay, element.ptx, element.storage_bits)
        return lay

    def verify(self) -> None:
        if self.operand.data not in {o.value for o in Operand}:
            raise VerifyException(
                f"warp.frag: operand must be one of {', '.join(o.value for o in Operand)}, "
                f"got {self.operand.data!r}"
            )

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(f"{self.operand.data}, ")
            printer.print_attribute(self.element)
            printer.print_string(", ")
            printer.print_attribute(self.variant_attr)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            start = parser.pos
            operand = parser.parse_identifier()
            if operand not in {o.value for o in Operand}:
                parser.raise_error(
                    f"fragment operand must be one of {', '.join(o.value for o in Operand)}",
                    start,
                    parser.pos,
                )
            parser.parse_punctuation(",")
            element = parser.parse_type()
            parser.parse_punctuation(",")
            variant = parser.parse_attribute()
            if not isinstance(variant, VariantAttr):
                parser.raise_error("expected #warp.variant<...>")
        return (StringAttr(operand), element, variant)


def _frag(value: SSAValue, what: str) -> FragType:
    if not isinstance(value.type, FragType):
        raise VerifyException(f"{what} must be a !warp.frag, got {value.type}")
    return value.type


def _expect(frag: FragType, role: Operand, variant: VariantAttr, what: str) -> None:
    if frag.role != role:
        raise VerifyException(f"{what} must be a fragment of operand {role.value}, got {frag.role.value}")
    if frag.variant_attr != variant:
        raise VerifyException(
            f"{what} belongs to {frag.variant.opcode}, not to the instruction {variant.variant.opcode}"
        )


# ---------------------------------------------------------------------------------------------
# Memory windows.
# ---------------------------------------------------------------------------------------------


class _WindowOp(IRDLOperation):
    """A tile of a memref: its static origin (`window`, one entry per memref dimension) and extent
    (`extent`: batch, rows, cols of the tile); `indices` (batch, row, col, as `index` values) are
    where in the tile the fragment's instruction block starts; an extent of ? (DYNAMIC_INDEX) is
    the launch-time size of the memref dimension that tile dimension covers (whose symbol the
    kernel argument's `warp.sizes` names). Elements outside the extent are
    not touched (loads give zero); `in_bounds` (rows, cols; as MLIR's vector transfers) marks the
    dimensions where no access can leave the extent, so no predicate is needed there. Loads and
    stores may carry `col_align`: the column index is a multiple of it (what the distributing
    pass guarantees), so neighbouring values of a lane can move as one vector access."""

    def in_bounds_values(self) -> tuple[bool, bool]:
        return flag_pair(self.in_bounds)

    def window_values(self) -> tuple[int, ...]:
        return tuple(self.window.get_values())  # type: ignore[attr-defined]

    def extent_values(self) -> tuple[int, int, int]:
        return tuple(self.extent.get_values())  # type: ignore[attr-defined,return-value]

    def verify_window(self, ref: Attribute, indices: Sequence[SSAValue]) -> None:
        if not isinstance(ref, MemRefType):
            raise VerifyException(f"{self.name}: the memory operand must be a memref, got {ref}")
        if len(indices) != 3 or any(not isinstance(i.type, IndexType) for i in indices):
            raise VerifyException(f"{self.name}: expected three index operands (batch, row, col)")
        rank = len(ref.get_shape())
        if len(self.window_values()) != rank:
            raise VerifyException(
                f"{self.name}: window has {len(self.window_values())} entries for a rank-{rank} memref"
            )
        if len(self.extent_values()) != 3 or any(e < 1 and e != DYNAMIC_INDEX for e in self.extent_values()):
            raise VerifyException(f"{self.name}: extent must be three positive sizes (batch, rows, cols) or ? "
                                  f"({DYNAMIC_INDEX}: the size of the memref dimension the tile dimension covers)")
        if self.in_bounds is not None and len(self.in_bounds.get_values()) != 2:  # type: ignore[attr-defined]
            raise VerifyException(f"{self.name}: in_bounds has two flags (rows, cols)")

    def set_in_bounds(self, rows: bool, cols: bool) -> None:
        if rows or cols:
            self.in_bounds = _ints([int(rows), int(cols)])

    def col_align_value(self) -> int:
        align = getattr(self, "col_align", None)
        return 1 if align is None else align.value.data


def flag_pair(flags: DenseArrayBase | None) -> tuple[bool, bool]:
    """A (rows, cols) flag property (`in_bounds`, `aligned`) as booleans; absent: neither."""
    return (False, False) if flags is None else tuple(bool(x) for x in flags.get_values())  # type: ignore[return-value]


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


@irdl_op_definition
class LoadOp(_WindowOp):
    """`warp.load`: a fragment read from a memref window, converted from the memref's element
    type to the fragment's (the conversions of `tile.CAST_RULES`; `rounding` where f32 becomes
    tf32)."""

    name = "warp.load"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)
    col_align = opt_prop_def(IntegerAttr)
    rounding = opt_prop_def(Attribute)  # a #tile<rounding ...> (tile.RoundingAttr)
    broadcast = opt_prop_def(DenseArrayBase)
    result = result_def(FragType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` attr-dict `:` type($ref) `->` type($result)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], window: Sequence[int],
                 extent: Sequence[int], result: FragType, rounding: str | None = None,
                 broadcast: Sequence[int] | None = None):
        props: dict[str, Attribute] = {"window": _ints(window), "extent": _ints(extent)}
        if rounding:
            props["rounding"] = RoundingAttr(Rounding(rounding))
        if broadcast is not None:
            props["broadcast"] = _ints(broadcast)
        super().__init__(operands=[ref, indices], result_types=[result], properties=props)

    def broadcast_dims(self) -> tuple[int, ...] | None:
        """For a broadcast (`tile.broadcast`), the (batch 0, row 1, col 2) dimension of the tile
        each memref dimension runs along; the window repeats along the others."""
        return None if self.broadcast is None else tuple(self.broadcast.get_values())

    def verify_(self) -> None:
        dims = self.broadcast_dims()
        if dims is not None:
            ref = self.ref.type
            assert isinstance(ref, MemRefType)
            if len(dims) > len(ref.get_shape()) or list(dims) != sorted(set(dims)) or any(not 0 <= d < 3 for d in dims):
                raise VerifyException("warp.load: broadcast names increasing tile dimensions (0 batch, 1 row, "
                                      "2 col), one per memref dimension")
            if len(self.window_values()) != len(ref.get_shape()):
                raise VerifyException("warp.load: window has one entry per memref dimension")
            _frag(self.result, "warp.load result")
            return
        self.verify_window(self.ref.type, self.indices)
        if self.rounding is not None and not isinstance(self.rounding, RoundingAttr):
            raise VerifyException(f"warp.load: rounding must be a #tile<rounding ...>, got {self.rounding}")
        frag = _frag(self.result, "warp.load result")
        if frag.role in (Operand.META,):
            raise VerifyException("warp.load: metadata fragments come from warp.load_sparse_a or warp.load_meta")

    @property
    def rounding_mode(self) -> str | None:
        """The f32 -> tf32 rounding's name (rna, rn, rz, trunc), None where nothing is rounded."""
        return None if self.rounding is None else str(self.rounding.data)  # type: ignore[attr-defined]


@irdl_op_definition
class StoreOp(_WindowOp):
    """`warp.store`: an accumulator fragment written to a memref window (inside its extent)."""

    name = "warp.store"
    value = operand_def(FragType)
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)
    col_align = opt_prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$value `,` $ref `[` $indices `]` attr-dict `:` type($value) `,` type($ref)"

    def __init__(self, value: SSAValue, ref: SSAValue, indices: Sequence[SSAValue],
                 window: Sequence[int], extent: Sequence[int]):
        super().__init__(
            operands=[value, ref, indices],
            properties={"window": _ints(window), "extent": _ints(extent)},
        )

    def verify_(self) -> None:
        self.verify_window(self.ref.type, self.indices)
        if _frag(self.value, "warp.store value").role != Operand.ACC:
            raise VerifyException("warp.store: only accumulator fragments are stored")


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """`warp.constant`: every element of an accumulator fragment set to one value."""

    name = "warp.constant"
    value = prop_def(IntegerAttr | FloatAttr)
    result = result_def(FragType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$value attr-dict `:` type($result)"

    def __init__(self, value: IntegerAttr | FloatAttr, result: FragType):
        super().__init__(properties={"value": value}, result_types=[result])

    def scalar(self) -> int | float:
        return self.value.value.data

    def verify_(self) -> None:
        if _frag(self.result, "warp.constant").role != Operand.ACC:
            raise VerifyException("warp.constant: only accumulator fragments are splats")


@irdl_op_definition
class LoadSparseAOp(_WindowOp):
    """`warp.load_sparse_a`: reads whole chunks of a dense A window and compresses them in
    registers into the variant's compressed A fragment and metadata word. Without `prune` a chunk
    must already have the pattern; the first one that does not is recorded in `error` (an ui32
    word, by `atom.global.min` of its row-major group number)."""

    name = "warp.load_sparse_a"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    error = opt_operand_def(MemRefType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)
    prune = opt_prop_def(UnitAttr)
    values = result_def(FragType)
    metadata = result_def(FragType)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))

    assembly_format = (
        "$ref `[` $indices `]` (`error` $error^ `:` type($error))? attr-dict `:` type($ref) "
        "`->` type($values) `,` type($metadata)"
    )

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], window: Sequence[int],
                 extent: Sequence[int], values: FragType, metadata: FragType,
                 error: SSAValue | None = None, prune: bool = False):
        props: dict[str, Attribute] = {"window": _ints(window), "extent": _ints(extent)}
        if prune:
            props["prune"] = UnitAttr()
        super().__init__(
            operands=[ref, indices, [error] if error is not None else []],
            properties=props,
            result_types=[values, metadata],
        )

    def verify_(self) -> None:
        self.verify_window(self.ref.type, self.indices)
        a, e = _frag(self.values, "compressed A"), _frag(self.metadata, "metadata")
        if a.variant.sparse is None:
            raise VerifyException("warp.load_sparse_a: the variant is not an mma.sp")
        _expect(a, Operand.A, a.variant_attr, "warp.load_sparse_a values")
        _expect(e, Operand.META, a.variant_attr, "warp.load_sparse_a metadata")
        if (self.prune is None) != (self.error is not None):
            raise VerifyException(
                "warp.load_sparse_a: a checked compression needs an error word, a pruning one has none"
            )


@irdl_op_definition
class LoadMetaOp(IRDLOperation):
    """`warp.load_meta`: the metadata words of a pre-compressed sparse A (`compiler/sparse_format.py`,
    a `[batch x] tiles x words` ui32 memref) for `count` consecutive k32 steps of one 16-row
    tile: one `e` fragment per step, for the instructions at (row, k + 32 j). Indices are (batch,
    row, k) of the dense A (row a multiple of 16, k of 32 * count), so a lane's words are one
    aligned `ld.global.v2/.v4`. Rows past the memref's tiles and K past its rows read as the
    format's filler (valid metadata for the zeros there). A memref batch of 1 serves every batch."""

    name = "warp.load_meta"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    fragments = var_result_def(FragType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` attr-dict `:` type($ref) `->` type($fragments)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], result: FragType, count: int = 1):
        super().__init__(operands=[ref, indices], result_types=[[result] * count])

    def verify_(self) -> None:
        verify_meta_memref(self.ref.type, self.name)
        if len(self.indices) != 3:
            raise VerifyException("warp.load_meta: expected three index operands (batch, row, k)")
        verify_meta_fragments(self.fragments, self.name)


def verify_meta_memref(ref: Attribute, what: str) -> None:
    """A pre-compressed A's metadata in global memory (`sparse_format`): [batch x] tiles x words
    ui32, whole groups of words a row."""
    if not isinstance(ref, MemRefType) or len(ref.get_shape()) not in (2, 3) or element_name(ref.element_type) != "ui32":
        raise VerifyException(f"{what}: reads a [batch x] tiles x words ui32 memref, got {ref}")
    if ref.get_shape()[-1] % fmt.GROUP_WORDS:
        raise VerifyException(f"{what}: a metadata row holds groups of {fmt.GROUP_WORDS} words, got {ref}")


def verify_meta_fragments(fragments: Sequence[SSAValue], what: str) -> None:
    """1, 2 or 4 `e` fragments of one type (one k32 step each: a v1/v2/v4 load), of the 16-bit
    pre-compressed mma.sp."""
    if len(fragments) not in (1, 2, 4) or len(set(r.type for r in fragments)) != 1:
        raise VerifyException(f"{what}: 1, 2 or 4 metadata fragments of one type (a v1/v2/v4 load)")
    frag = _frag(fragments[0], f"{what} result")
    v = frag.variant
    if frag.role != Operand.META or v.sparse is None or v.shape != fmt.SHAPE or v.atype not in PRE_COMPRESSED:
        raise VerifyException(
            f"{what}: loads metadata of the 16-bit {fmt.SHAPE} mma.sp, not {frag.role.value} of {v.opcode}"
        )


@irdl_op_definition
class LoadScaleOp(_WindowOp):
    """`warp.load_scale`: the block-scale factors of one instruction for A (rows x K blocks) or B
    (K blocks x columns), one byte per K block, as the `.block_scale` operand with selectors
    {0, 0}. Indices are (batch, row or K block, K block or column) of the scale tile."""

    name = "warp.load_scale"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)
    result = result_def(FragType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` attr-dict `:` type($ref) `->` type($result)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], window: Sequence[int],
                 extent: Sequence[int], result: FragType):
        super().__init__(
            operands=[ref, indices],
            properties={"window": _ints(window), "extent": _ints(extent)},
            result_types=[result],
        )

    def verify_(self) -> None:
        self.verify_window(self.ref.type, self.indices)
        if _frag(self.result, "warp.load_scale").role not in (Operand.SCALE_A, Operand.SCALE_B):
            raise VerifyException("warp.load_scale: the result must be a scale_a or scale_b fragment")


@irdl_op_definition
class SplitTf32Op(IRDLOperation):
    """`warp.split_tf32`: x (f32) -> hi = tf32(x), lo = tf32(x - hi), rounded rna: the operands of
    3xTF32."""

    name = "warp.split_tf32"
    source = operand_def(FragType)
    hi = result_def(FragType)
    lo = result_def(FragType)
    traits = traits_def(Pure())

    assembly_format = "$source attr-dict `:` type($source) `->` type($hi) `,` type($lo)"

    def __init__(self, source: SSAValue, part: FragType):
        super().__init__(operands=[source], result_types=[part, part])

    def verify_(self) -> None:
        src = _frag(self.source, "warp.split_tf32 source")
        if element_name(src.element) != "f32" or element_name(self.hi.type.element) != "tf32":
            raise VerifyException("warp.split_tf32: splits an f32 fragment into tf32 fragments")


@irdl_op_definition
class WidenOp(IRDLOperation):
    """`warp.widen`: an m16n8k64 4-bit integer A or B fragment (what ldmatrix reads from packed
    K rows) -> the m16n8k32 8-bit fragments of its two K halves, each nibble sign- or
    zero-extended to a byte. Within a half, lane t's K columns 8t..8t+7 become its K slots
    4t..4t+3 (the first four) and 16+4t..16+4t+3 (the last four): a permutation of K that A and
    B share, so integer products summed over K are unchanged and no lane exchanges data. Where
    s4 mma is slow (sm_90) a staged s4 GEMM runs s8 mmas on 4-bit shared stages."""

    name = "warp.widen"
    source = operand_def(FragType)
    low = result_def(FragType)
    high = result_def(FragType)
    traits = traits_def(Pure())

    assembly_format = "$source attr-dict `:` type($source) `->` type($low) `,` type($high)"

    def __init__(self, source: SSAValue, part: FragType):
        super().__init__(operands=[source], result_types=[part, part])

    def verify_(self) -> None:
        src = _frag(self.source, "warp.widen source")
        out = self.low.type
        assert isinstance(out, FragType)
        v, w = src.variant, out.variant
        wide = INT4_WIDENED.get(element_name(src.element))
        if src.role not in (Operand.A, Operand.B) or (v.m, v.n, v.k) != (16, 8, 64) or wide is None:
            raise VerifyException(f"warp.widen: widens m16n8k64 4-bit integer A or B fragments, not "
                                  f"{src.role.value} of {v.shape} {element_name(src.element)}")
        if out.role != src.role or (w.m, w.n, w.k) != (16, 8, 32) or element_name(out.element) != wide:
            raise VerifyException(f"warp.widen: a {src.role.value} fragment of {element_name(src.element)} "
                                  f"widens to m16n8k32 {wide} {src.role.value} fragments")


def _verify_pair_accumulator(op: IRDLOperation, frag: FragType) -> None:
    """What the pair ops exchange: 32-bit accumulators of an m16n8 instruction, a value a register."""
    v = frag.variant
    if frag.role != Operand.ACC or (v.m, v.n) != (16, 8):
        raise VerifyException(f"{op.name}: accumulators of one m16n8 instruction in, the same out")
    lay = frag.layout()
    if lay.regs != 4 or lay.elems_per_reg != 1:
        raise VerifyException(f"{op.name}: the accumulators hold one 32-bit value a register (4 registers)")


class _RowPairsOp(IRDLOperation):
    """An accumulator in, the same out: between the row order and the byte-pair order of an
    8-bit A read by `warp.ldmatrix {trans}` (its rows g and g + 8 rows 2g and 2g + 1 of 16)."""

    source = operand_def(FragType)
    result = result_def(FragType)
    traits = traits_def(Pure())

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue):
        super().__init__(operands=[source], result_types=[source.type])

    def verify_(self) -> None:
        frag = _frag(self.source, f"{self.name} operand")
        if self.result.type != frag:
            raise VerifyException(f"{self.name}: accumulators of one m16n8 instruction in, the same out")
        _verify_pair_accumulator(self, frag)


@irdl_op_definition
class UnpairRowsOp(_RowPairsOp):
    """`warp.unpair_rows`: the accumulator of an A fragment read by byte pairs (rows 2g and 2g +
    1 where g and g + 8 belong) -> the same rows in order (the K loop's results)."""

    name = "warp.unpair_rows"


@irdl_op_definition
class PairRowsOp(_RowPairsOp):
    """`warp.pair_rows`: the inverse of `warp.unpair_rows` (the K loop's initial accumulators,
    where they are not a splat)."""

    name = "warp.pair_rows"


class _ColumnPairsOp(IRDLOperation):
    """Two accumulators of neighbouring instruction columns in, the same two out: between the
    column order and the byte-pair order of an 8-bit `warp.ldmatrix {trans}` (the first
    fragment the even columns of 16, the second the odd ones)."""

    first = operand_def(FragType)
    second = operand_def(FragType)
    out_first = result_def(FragType)
    out_second = result_def(FragType)
    traits = traits_def(Pure())

    assembly_format = ("$first `,` $second attr-dict `:` type($first) `,` type($second) `->` type($out_first) "
                       "`,` type($out_second)")

    def __init__(self, first: SSAValue, second: SSAValue):
        super().__init__(operands=[first, second], result_types=[first.type, first.type])

    def verify_(self) -> None:
        frag = _frag(self.first, f"{self.name} operand")
        if self.second.type != frag or self.out_first.type != frag or self.out_second.type != frag:
            raise VerifyException(f"{self.name}: accumulators of one m16n8 instruction in, the same out")
        _verify_pair_accumulator(self, frag)


@irdl_op_definition
class UnpairColumnsOp(_ColumnPairsOp):
    """`warp.unpair_columns`: the accumulators of two instruction columns that multiplied the B
    fragments of an 8-bit byte-pair `warp.ldmatrix {trans}` (the even and the odd columns of
    their 16) -> those of the first 8 columns and the last 8 (the K loop's results)."""

    name = "warp.unpair_columns"


@irdl_op_definition
class PairColumnsOp(_ColumnPairsOp):
    """`warp.pair_columns`: the inverse of `warp.unpair_columns` (the K loop's initial
    accumulators, where they are not a splat)."""

    name = "warp.pair_columns"


@irdl_op_definition
class MmaOp(IRDLOperation):
    """`warp.mma`: d = a * b + c on the fragments' instruction (with the metadata fragment for
    mma.sp, the scale fragments for .block_scale). `split_tf32` marks f32 operands that
    `warp-split-tf32` turns into three tf32 mmas."""

    name = "warp.mma"
    a = operand_def(FragType)
    b = operand_def(FragType)
    c = operand_def(FragType)
    metadata = opt_operand_def(FragType)
    scale_a = opt_operand_def(FragType)
    scale_b = opt_operand_def(FragType)
    split_tf32 = opt_prop_def(UnitAttr)
    result = result_def(FragType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))

    assembly_format = (
        "$a `,` $b `,` $c (`meta` $metadata^ `:` type($metadata))? "
        "(`scales` $scale_a^ `,` $scale_b `:` type($scale_a) `,` type($scale_b))? attr-dict "
        "`:` type($a) `,` type($b) `,` type($c) `->` type($result)"
    )

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue, metadata: SSAValue | None = None,
                 scales: tuple[SSAValue, SSAValue] | None = None, split_tf32: bool = False):
        super().__init__(
            operands=[a, b, c, [metadata] if metadata else [], [scales[0]] if scales else [],
                      [scales[1]] if scales else []],
            result_types=[c.type],
            properties={"split_tf32": UnitAttr()} if split_tf32 else {},
        )

    def verify_(self) -> None:
        c = _frag(self.c, "warp.mma accumulator")
        v = c.variant_attr
        _expect(c, Operand.ACC, v, "warp.mma accumulator")
        _expect(_frag(self.a, "warp.mma a"), Operand.A, v, "warp.mma a")
        _expect(_frag(self.b, "warp.mma b"), Operand.B, v, "warp.mma b")
        if self.result.type != c:
            raise VerifyException("warp.mma: the result type must equal the accumulator's")
        if (self.metadata is not None) != (c.variant.sparse is not None):
            raise VerifyException("warp.mma: a metadata fragment is needed exactly for mma.sp variants")
        if self.metadata is not None:
            _expect(_frag(self.metadata, "warp.mma metadata"), Operand.META, v, "warp.mma metadata")
        if (self.scale_a is not None) != c.variant.block_scale:
            raise VerifyException("warp.mma: scale fragments are needed exactly for .block_scale variants")
        if self.scale_a is not None and self.scale_b is not None:
            _expect(_frag(self.scale_a, "scale_a"), Operand.SCALE_A, v, "warp.mma scale_a")
            _expect(_frag(self.scale_b, "scale_b"), Operand.SCALE_B, v, "warp.mma scale_b")
        if self.split_tf32 is not None and c.variant.atype != "tf32":
            raise VerifyException("warp.mma: split_tf32 needs a tf32 instruction")


from tilemma.dialects.warp_shared import (  # noqa: E402,F401  (one dialect)
    LDMATRIX_SHAPES,
    LDMATRIX_SPARSE_SHAPES,
    SHARED,
    AsyncCommitOp,
    AsyncTokenType,
    AsyncWaitOp,
    CopyAsyncOp,
    CopyMetaAsyncOp,
    LdMatrixOp,
    LoadMetaSharedOp,
    LoadSharedOp,
    RoundStageOp,
    STAGED_BITS,
    STAGED_ROW_BYTES,
    STAGED_ROWS,
    StoreStagedOp,
    first_thread,
    is_shared,
    staged_blocks,
    staged_cols,
    staged_window_problem,
)
from tilemma.dialects.warp_epilogue import SPLIT_ELEMENTS, CastOp, DistributedOp, MapOp, MapYieldOp, SplitKPublishOp, SplitKSumOp  # noqa: E402,F401  (one dialect)
from tilemma.dialects.warp_fill import FILL_BITS, WIDE_BITS, FillLayout, FillLoadOp, FillStoreOp, GatherLayout, StagedType, TRANSPOSE_LINES, TransposeLayout, TransposeStageOp  # noqa: E402,F401  (one dialect)
from tilemma.dialects.warp_rows import MaskOp, RowReduceOp, RowsType, ToLhsOp  # noqa: E402,F401  (one dialect)
from tilemma.dialects.warp_mbarrier import CLUSTERS, AsyncArriveOp, ClusterSyncOp, MbarrierArriveOp, MbarrierArrivePeersOp, MbarrierExpectTxOp, MbarrierInitOp, MbarrierWaitOp, RetireOp, SetMaxRegistersOp  # noqa: E402,F401  (one dialect)
from tilemma.dialects.warp_tma import CopyTmaOp, tma_swizzle  # noqa: E402,F401  (one dialect)
from tilemma.dialects.warp_wgmma import K_MAJOR_ONLY, N_BLOCK, WGMMA_ALIGN, WGMMA_K, WGMMA_SP_K, WGMMA_STEP_BYTES, WGMMA_MAX_N, WGMMA_ROWS, WGMMA_TYPES, WgmmaOp, WgmmaWaitOp, wgmma_n_legal  # noqa: E402,F401  (one dialect)

Warp = Dialect(
    "warp",
    [LoadOp, StoreOp, ConstantOp, LoadSparseAOp, LoadScaleOp, SplitTf32Op, WidenOp, UnpairColumnsOp, PairColumnsOp, UnpairRowsOp, PairRowsOp, MmaOp,
     CopyAsyncOp, AsyncCommitOp, AsyncWaitOp, LdMatrixOp, LoadMetaOp, LoadSharedOp, CopyMetaAsyncOp, LoadMetaSharedOp,
     DistributedOp, MapOp, MapYieldOp, CastOp, SplitKPublishOp, SplitKSumOp, FillLoadOp, FillStoreOp, TransposeStageOp,
     RowReduceOp, MaskOp, ToLhsOp, WgmmaOp, WgmmaWaitOp, RoundStageOp, StoreStagedOp,
     MbarrierInitOp, MbarrierArriveOp, MbarrierExpectTxOp, MbarrierWaitOp, RetireOp, SetMaxRegistersOp, CopyTmaOp,
     MbarrierArrivePeersOp, ClusterSyncOp, AsyncArriveOp],
    [VariantAttr, TargetAttr, FragType, SwizzledLayoutAttr, AsyncTokenType, ScheduleAttr, StagedType, RowsType],
)
