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

This module holds the fragment type, the ops and the dialect; the attributes the ops carry
(`#warp.variant`, `#warp.target`, the operand names) are in `attributes`, with what `tile`
shares; the `#warp.swizzled` layout of a shared buffer's type is in `swizzle`.
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
    NoneAttr,
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
    element_bits,
    element_name,
)
from tilemma.dialects.element_tables import INT4_WIDENED, PRE_COMPRESSED
from tilemma.dialects.schedule import ScheduleAttr

# The swizzled layout of a shared buffer, read by callers as warp.X too.
from tilemma.dialects.swizzle import (  # noqa: F401
    SwizzledLayoutAttr,
    row_bytes,
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
        flags = self.in_bounds
        return (False, False) if flags is None else tuple(bool(x) for x in flags.get_values())  # type: ignore[return-value]

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
        ref = self.ref.type
        if not isinstance(ref, MemRefType) or len(ref.get_shape()) not in (2, 3) or element_name(ref.element_type) != "ui32":
            raise VerifyException(f"warp.load_meta: reads a [batch x] tiles x words ui32 memref, got {ref}")
        if ref.get_shape()[-1] % fmt.GROUP_WORDS:
            raise VerifyException(f"warp.load_meta: a metadata row holds groups of {fmt.GROUP_WORDS} words, got {ref}")
        if len(self.indices) != 3:
            raise VerifyException("warp.load_meta: expected three index operands (batch, row, k)")
        if len(self.fragments) not in (1, 2, 4) or len(set(r.type for r in self.fragments)) != 1:
            raise VerifyException("warp.load_meta: 1, 2 or 4 metadata fragments of one type (a v1/v2/v4 load)")
        frag = _frag(self.fragments[0], "warp.load_meta result")
        v = frag.variant
        if frag.role != Operand.META or v.sparse is None or v.shape != fmt.SHAPE or v.atype not in PRE_COMPRESSED:
            raise VerifyException(
                f"warp.load_meta: loads metadata of the 16-bit {fmt.SHAPE} mma.sp, not {frag.role.value} of {v.opcode}"
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


# ---------------------------------------------------------------------------------------------
# Shared memory: CTA-wide asynchronous copies, their groups, ldmatrix.
# ---------------------------------------------------------------------------------------------

SHARED = 3  # memory space of a shared-memory memref (NVVM's address space 3, as MLIR's nvgpu)


def is_shared(t: Attribute) -> bool:
    return isinstance(t, MemRefType) and isinstance(t.memory_space, IntegerAttr) and t.memory_space.value.data == SHARED


def _shared_stage(ref: Attribute, what: str) -> MemRefType:
    """The stages x rows x cols shared buffer an op addresses. Its layout is what the lowering
    addresses it by: row-major, or `#warp.swizzled` where the rows can be (`swizzles`)."""
    if not isinstance(ref, MemRefType) or not is_shared(ref) or len(ref.get_shape()) != 3:
        raise VerifyException(f"{what} must be a 3-d shared memref (stages x rows x cols, memory space {SHARED})")
    if isinstance(ref.layout, SwizzledLayoutAttr):
        if not swizzles(ref):
            raise VerifyException(f"{what}: #warp.swizzled needs rows of a power of two of at least 32 bytes "
                                  f"(the XOR stays inside the row), not {row_bytes(ref)}")
    elif not isinstance(ref.layout, NoneAttr):
        raise VerifyException(f"{what}: a shared buffer is row-major or #warp.swizzled, not {ref.layout}")
    return ref


@irdl_op_definition
class CopyAsyncOp(_WindowOp):
    """`warp.copy_async`: the whole CTA copies a rows x cols tile of a global window into one
    stage of a shared buffer, `vector` bytes per `cp.async`; elements outside the window's extent
    are zero-filled (nothing is read there). With `transpose` the stage holds the tile's
    transpose (cols x rows), for a window whose columns are contiguous in memory (an M-major A, a
    K-major B):
    each shared row is then one contiguous run of the window. A `#warp.swizzled` destination
    stores each shared row's 16-byte granules XORed with the row (see `swizzle_granule`). With
    `one_offset`, where a thread's chunks are whole swizzle periods of rows apart inside the
    window, the lowering keeps one thread offset and puts each chunk at an immediate from it."""

    name = "warp.copy_async"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    dest = operand_def(MemRefType)
    stage = operand_def(IndexType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)
    threads = prop_def(IntegerAttr)
    vector = prop_def(IntegerAttr)
    transpose = opt_prop_def(UnitAttr)
    # Registers before scheduling freedom: a thread's chunks share one offset, each at an
    # immediate from it, where they can (measured: attention, short of registers, gains; the
    # GEMMs lose 1-7% on an H200, so they keep an offset per chunk).
    one_offset = opt_prop_def(UnitAttr)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = (
        "$ref `[` $indices `]` `,` $dest `[` $stage `]` attr-dict `:` type($ref) `,` type($dest)"
    )

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], dest: SSAValue, stage: SSAValue,
                 window: Sequence[int], extent: Sequence[int], threads: int, vector: int, transpose: bool = False,
                 one_offset: bool = False):
        props: dict[str, Attribute] = {"window": _ints(window), "extent": _ints(extent),
                                       "threads": IntegerAttr(threads, i64), "vector": IntegerAttr(vector, i64)}
        if transpose:
            props["transpose"] = UnitAttr()
        if one_offset:
            props["one_offset"] = UnitAttr()
        super().__init__(operands=[ref, indices, dest, stage], properties=props)

    def verify_(self) -> None:
        self.verify_window(self.ref.type, self.indices)
        dest = _shared_stage(self.dest.type, "warp.copy_async destination")
        if dest.element_type != self.ref.type.element_type:  # type: ignore[union-attr]
            raise VerifyException("warp.copy_async: source and destination element types differ")
        if self.vector.value.data not in (4, 8, 16):
            raise VerifyException("warp.copy_async: vector must be 4, 8 or 16 bytes (cp.async sizes)")


@irdl_op_definition
class AsyncCommitOp(IRDLOperation):
    """`warp.async_commit`: closes the group of this thread's copies issued since the last one."""

    name = "warp.async_commit"
    assembly_format = "attr-dict"


@irdl_attr_definition
class AsyncTokenType(ParametrizedAttribute, TypeAttribute):
    """`!warp.async_token`: that the copies a `warp.async_wait` completed (with the barrier
    after it) are visible. Every read of a shared buffer (`warp.ldmatrix`, `warp.load_shared`)
    takes one, so a read with no wait before it is not valid IR. It has no registers."""

    name = "warp.async_token"


@irdl_op_definition
class AsyncWaitOp(IRDLOperation):
    """`warp.async_wait`: waits until at most `pending` of this thread's groups are in flight;
    its token orders the shared-memory reads that depend on the groups it completed."""

    name = "warp.async_wait"
    pending = prop_def(IntegerAttr)
    token = result_def(AsyncTokenType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def __init__(self, pending: int):
        super().__init__(properties={"pending": IntegerAttr(pending, i64)}, result_types=[AsyncTokenType()])


class _StageReadOp(IRDLOperation):
    """What `warp.ldmatrix` and `warp.load_shared` share: fragments read from stage
    `indices[0]` of a shared buffer at (row, col) = indices[1:] + `offsets` (static), after the
    wait whose `token` they take, swizzled as the buffer's type says, and an f32 buffer read as
    tf32 fragments when `rounding` says how."""

    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    token = operand_def(AsyncTokenType)
    offsets = prop_def(DenseArrayBase)
    rounding = opt_prop_def(Attribute)  # f32 read as tf32: a #tile<rounding ...> (tile.RoundingAttr)

    @staticmethod
    def stage_props(offsets: Sequence[int], rounding: str | None, **flags: bool) -> dict[str, Attribute]:
        props: dict[str, Attribute] = {"offsets": _ints(offsets)}
        props.update({name: UnitAttr() for name, on in flags.items() if on})
        if rounding:
            props["rounding"] = RoundingAttr(Rounding(rounding))
        return props

    def offset_values(self) -> tuple[int, int]:
        return tuple(self.offsets.get_values())  # type: ignore[return-value]

    def verify_stage_read(self, frag_value: SSAValue) -> FragType:
        """The checks both ops make: the buffer, the indices, and its element against the
        fragment's (an f32 buffer only with a tf32 rounding). Returns the fragment type."""
        ref = _shared_stage(self.ref.type, f"{self.name} source")
        if len(self.indices) != 3 or len(self.offset_values()) != 2:
            raise VerifyException(f"{self.name}: expected three indices (stage, row, col) and two offsets (row, col)")
        frag = _frag(frag_value, f"{self.name} result")
        stored = element_name(ref.element_type)
        element = element_name(frag.element)
        if self.rounding is not None:
            if not isinstance(self.rounding, RoundingAttr) or (stored, element) != ("f32", "tf32"):
                raise VerifyException(f"{self.name}: rounding (a #tile<rounding ...>) reads an f32 buffer as tf32 fragments")
        elif stored != element:
            raise VerifyException(f"{self.name}: a {stored} buffer holds no {element} fragments")
        return frag


@irdl_op_definition
class LdMatrixOp(_StageReadOp):
    """`warp.ldmatrix`: fragments of a dense mma with 16-byte K rows (32-bit m16n8k8, 16-bit
    m16n8k16, 8-bit m16n8k32) read from stage `indices[0]` of a shared buffer at (row, col) = indices[1:] +
    `offsets` (static): one A fragment from an M x K buffer (`ldmatrix .x4`) or with `trans` from
    a K x M one (`.x4.trans`), or one or two B fragments (n and n + 8): from an N x K buffer
    (`.x2`/`.x4`), or with `trans` from a K x N one (`.x2.trans`/`.x4.trans`). `trans` reads
    16-bit elements only, since .trans moves 16-bit elements.
    Static offsets become immediates where the swizzle allows; `rounding` reads an f32 buffer
    as tf32 fragments (converted in registers)."""

    name = "warp.ldmatrix"
    trans = opt_prop_def(UnitAttr)
    fragments = var_result_def(FragType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` `after` $token attr-dict `:` type($ref) `->` type($fragments)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], token: SSAValue, offsets: Sequence[int],
                 result: FragType, count: int = 1, trans: bool = False, rounding: str | None = None):
        super().__init__(operands=[ref, indices, token], result_types=[[result] * count],
                         properties=self.stage_props(offsets, rounding, trans=trans))

    def verify_(self) -> None:
        if not 1 <= len(self.fragments) <= 2 or len(set(r.type for r in self.fragments)) != 1:
            raise VerifyException("warp.ldmatrix: one or two fragments of one type")
        frag = self.verify_stage_read(self.fragments[0])
        v = frag.variant
        bits = _element_bits(frag.element)
        if v.sparse is not None and not v.block_scale and (v.m, v.n, v.k) in LDMATRIX_SPARSE_SHAPES:
            # mma.sp m16n8k32 (16-bit): A is the dense m16n8k16 A of the compressed M x K/2 tile
            # (one .x4); B a whole k32 fragment (one .x4: k rows +0/+8/+16/+24)
            if LDMATRIX_SPARSE_SHAPES[(v.m, v.n, v.k)] != bits or len(self.fragments) != 1:
                raise VerifyException(f"warp.ldmatrix: sparse {v.shape} fragments are one per .x4, of "
                                      f"{LDMATRIX_SPARSE_SHAPES[(v.m, v.n, v.k)]}-bit elements")
        elif (v.m, v.n, v.k) not in LDMATRIX_SHAPES or v.sparse or v.block_scale or frag.role not in (Operand.A, Operand.B):
            raise VerifyException("warp.ldmatrix: loads A or B fragments of a dense 16-bit m16n8k16 or 8-bit m16n8k32 mma")
        elif LDMATRIX_SHAPES[(v.m, v.n, v.k)] != bits:
            raise VerifyException(f"warp.ldmatrix: {v.m}x{v.n}x{v.k} fragments need {LDMATRIX_SHAPES[(v.m, v.n, v.k)]}-bit elements, not {bits}-bit")
        if frag.role not in (Operand.A, Operand.B):
            raise VerifyException("warp.ldmatrix: loads A or B fragments")
        if frag.role == Operand.A and len(self.fragments) != 1:
            raise VerifyException("warp.ldmatrix: an A fragment takes the whole .x4")
        if self.trans is not None and bits != 16:
            raise VerifyException("warp.ldmatrix: trans moves 16-bit elements; 8- and 32-bit operands need "
                                  "a buffer of K rows (A: M x K, B: N x K)")


@irdl_op_definition
class LoadSharedOp(_StageReadOp):
    """`warp.load_shared`: one A or B fragment of a dense mma whose registers each hold one
    element (32- and 64-bit operands: f64, tf32), read element by element from stage
    `indices[0]` of a shared buffer at (row, col) = indices[1:] + `offsets` (static), each value
    where the fragment table puts it: where ldmatrix does not apply (its unit is a 16-byte row of
    the fragment, which f64 and a K x N tf32 B do not have). The buffer holds the operand as the
    mma sees it (A: M x K, B: K x N) or, with `transposed`, its transpose (A: K x M, an M-major A;
    B: N x K, a K-major B).
    `rounding` reads an f32 buffer as tf32 fragments."""

    name = "warp.load_shared"
    transposed = opt_prop_def(UnitAttr)
    result = result_def(FragType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` `after` $token attr-dict `:` type($ref) `->` type($result)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], token: SSAValue, offsets: Sequence[int],
                 result: FragType, transposed: bool = False, rounding: str | None = None):
        super().__init__(operands=[ref, indices, token], result_types=[result],
                         properties=self.stage_props(offsets, rounding, transposed=transposed))

    def verify_(self) -> None:
        frag = self.verify_stage_read(self.result)
        v = frag.variant
        if v.sparse or v.block_scale or frag.role not in (Operand.A, Operand.B):
            raise VerifyException("warp.load_shared: loads A or B fragments of a dense mma")
        bits = _element_bits(frag.element)
        if bits not in (32, 64):
            raise VerifyException(
                f"warp.load_shared: reads fragments of one 32- or 64-bit element per register, not {bits}-bit "
                f"(narrower ones come from warp.ldmatrix)")


# Dense shapes whose fragments are 16-byte K rows, ldmatrix's unit: (m, n, k) -> element bits.
LDMATRIX_SHAPES = {(16, 8, 8): 32, (16, 8, 16): 16, (16, 8, 32): 8, (16, 8, 64): 4, (16, 8, 256): 1}
# Sparse shapes (mma.sp) whose compressed A and whole B fragments are .x4 reads -> element bits.
LDMATRIX_SPARSE_SHAPES = {(16, 8, 32): 16}


def _element_bits(t: Attribute) -> int:
    return element_bits(element_name(t))


from tilemma.dialects.warp_epilogue import SPLIT_ELEMENTS, CastOp, DistributedOp, MapOp, MapYieldOp, SplitKReduceOp  # noqa: E402,F401  (one dialect)
from tilemma.dialects.warp_fill import FillLayout, FillLoadOp, FillStoreOp, GatherLayout, StagedType  # noqa: E402,F401  (one dialect)
from tilemma.dialects.warp_rows import MaskOp, RowReduceOp, RowsType, ToLhsOp  # noqa: E402,F401  (one dialect)

Warp = Dialect(
    "warp",
    [LoadOp, StoreOp, ConstantOp, LoadSparseAOp, LoadScaleOp, SplitTf32Op, WidenOp, MmaOp,
     CopyAsyncOp, AsyncCommitOp, AsyncWaitOp, LdMatrixOp, LoadMetaOp, LoadSharedOp,
     DistributedOp, MapOp, MapYieldOp, CastOp, SplitKReduceOp, FillLoadOp, FillStoreOp,
     RowReduceOp, MaskOp, ToLhsOp],
    [VariantAttr, TargetAttr, FragType, SwizzledLayoutAttr, AsyncTokenType, ScheduleAttr, StagedType, RowsType],
)
