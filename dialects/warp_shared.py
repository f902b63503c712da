"""The `warp` ops of shared memory: CTA-wide asynchronous copies into the stages of a shared
buffer (`warp.copy_async`; a pre-compressed sparse A's metadata: `warp.copy_meta_async`), their
groups and waits (`warp.async_commit`, `warp.async_wait` and its `!warp.async_token`, which every
read of a stage takes), the tf32 rounding of a copied stage in place (`warp.round_stage`), the reads of fragments from a stage (`warp.ldmatrix`,
`warp.load_shared`, `warp.load_meta_shared`), and the epilogue's stores through a warp's own
staging buffer (`warp.store_staged`). A shared buffer is a `memref<stages x rows x cols, 3>`,
row-major or `#warp.swizzled` (`swizzle`); the lowering addresses it by that type alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DYNAMIC_INDEX, DenseArrayBase, IndexType, IntegerAttr, MemRefType, NoneAttr, UnitAttr, i64
from xdsl.ir import Attribute, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.layouts import sparse_format as fmt
from tilemma.dialects.attributes import Operand, Rounding, RoundingAttr, element_bits, element_name
from tilemma.dialects.swizzle import SwizzledLayoutAttr, row_bytes, swizzles
from tilemma.dialects.warp import FragType, _frag, _ints, _WindowOp, verify_meta_fragments, verify_meta_memref



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


def thread_props(threads: int, first_thread: int) -> dict[str, Attribute]:
    """`threads` (and `first_thread` where not 0) of a CTA-wide copy: the copy is dealt to threads
    first_thread .. first_thread + threads - 1 of the CTA (a warp-specialized kernel's producers)."""
    props: dict[str, Attribute] = {"threads": IntegerAttr(threads, i64)}
    if first_thread:
        props["first_thread"] = IntegerAttr(first_thread, i64)
    return props


def first_thread(op) -> int:
    """The CTA's first thread of those a copy is dealt to (`thread_props`)."""
    return op.first_thread.value.data if op.first_thread is not None else 0


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
    window, the lowering keeps one thread offset and puts each chunk at an immediate from it.
    With `for_transpose` (16-byte chunks of an 8-bit stage) each thread copies the rows of its own
    chunks of the `warp.transpose_stage` that reads the stage (`TransposeLayout`), so that the
    transpose reads back only what the same thread copied: its wait needs no barrier."""

    name = "warp.copy_async"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    dest = operand_def(MemRefType)
    stage = operand_def(IndexType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)
    threads = prop_def(IntegerAttr)
    first_thread = opt_prop_def(IntegerAttr)
    vector = prop_def(IntegerAttr)
    transpose = opt_prop_def(UnitAttr)
    # Registers before scheduling freedom: a thread's chunks share one offset, each at an
    # immediate from it, where they can (measured: attention, short of registers, gains; the
    # GEMMs lose 1-7% on an H200, so they keep an offset per chunk).
    one_offset = opt_prop_def(UnitAttr)
    for_transpose = opt_prop_def(UnitAttr)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = (
        "$ref `[` $indices `]` `,` $dest `[` $stage `]` attr-dict `:` type($ref) `,` type($dest)"
    )

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], dest: SSAValue, stage: SSAValue,
                 window: Sequence[int], extent: Sequence[int], threads: int, vector: int, transpose: bool = False,
                 one_offset: bool = False, first_thread: int = 0, for_transpose: bool = False):
        props: dict[str, Attribute] = {"window": _ints(window), "extent": _ints(extent),
                                       **thread_props(threads, first_thread), "vector": IntegerAttr(vector, i64)}
        for name, on in (("transpose", transpose), ("one_offset", one_offset), ("for_transpose", for_transpose)):
            if on:
                props[name] = UnitAttr()
        super().__init__(operands=[ref, indices, dest, stage], properties=props)

    def verify_(self) -> None:
        self.verify_window(self.ref.type, self.indices)
        dest = _shared_stage(self.dest.type, "warp.copy_async destination")
        if dest.element_type != self.ref.type.element_type:  # type: ignore[union-attr]
            raise VerifyException("warp.copy_async: source and destination element types differ")
        if self.vector.value.data not in (4, 8, 16):
            raise VerifyException("warp.copy_async: vector must be 4, 8 or 16 bytes (cp.async sizes)")
        if self.for_transpose is not None:
            self.transpose_layout()

    def transpose_layout(self):
        """With `for_transpose`, the chunks of the `warp.transpose_stage` that reads the stage."""
        from tilemma.dialects.warp_fill import TransposeLayout

        dest = _shared_stage(self.dest.type, "warp.copy_async destination")
        _, rows, cols = dest.get_shape()
        layout = TransposeLayout.of(cols, rows, element_bits(element_name(dest.element_type)), self.threads.value.data)
        if layout is None or self.vector.value.data != 16 or self.transpose is not None or self.one_offset is not None:
            raise VerifyException(f"warp.copy_async {{for_transpose}}: a {rows} x {cols} stage of {dest.element_type}, "
                                  "copied 16 bytes at a time as stored, that warp.transpose_stage can read over "
                                  f"{self.threads.value.data} threads")
        return layout


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
    its token orders the shared-memory reads that depend on the groups it completed. With
    `proxy_fence` the thread then fences its copies' writes (generic proxy) before the async
    proxy's reads (`warp.wgmma`'s descriptors), which the barrier after it publishes."""

    name = "warp.async_wait"
    pending = prop_def(IntegerAttr)
    proxy_fence = opt_prop_def(UnitAttr)
    token = result_def(AsyncTokenType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def __init__(self, pending: int, proxy_fence: bool = False):
        props: dict[str, Attribute] = {"pending": IntegerAttr(pending, i64)}
        if proxy_fence:
            props["proxy_fence"] = UnitAttr()
        super().__init__(properties=props, result_types=[AsyncTokenType()])


@irdl_op_definition
class RoundStageOp(IRDLOperation):
    """`warp.round_stage %dest[%stage] after %token`: each thread rounds to tf32, in place, the f32
    elements of the stage that its own `warp.copy_async` of `vector`-byte chunks wrote (chunks t,
    t + T, ... of the stage, row-major: that op's placement), once the wait whose `token` it takes
    has landed them (a thread's completed copies are visible to it: no barrier between). For the
    warpgroups, which read a stage as it lies (`warp.wgmma`): an operand copied as stored is rounded
    where it lies, before the barrier that publishes the stage; with `proxy_fence` the thread then
    fences its stores for the async proxy. Its token orders the stage's reads after it."""

    name = "warp.round_stage"
    dest = operand_def(MemRefType)
    stage = operand_def(IndexType)
    token = operand_def(AsyncTokenType)
    threads = prop_def(IntegerAttr)
    first_thread = opt_prop_def(IntegerAttr)
    vector = prop_def(IntegerAttr)
    rounding = prop_def(RoundingAttr)
    proxy_fence = opt_prop_def(UnitAttr)
    result = result_def(AsyncTokenType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$dest `[` $stage `]` `after` $token attr-dict `:` type($dest)"

    def __init__(self, dest: SSAValue, stage: SSAValue, token: SSAValue, threads: int, vector: int, rounding: str,
                 proxy_fence: bool = False, first_thread: int = 0):
        props: dict[str, Attribute] = {**thread_props(threads, first_thread), "vector": IntegerAttr(vector, i64),
                                       "rounding": RoundingAttr(Rounding(rounding))}
        if proxy_fence:
            props["proxy_fence"] = UnitAttr()
        super().__init__(operands=[dest, stage, token], properties=props, result_types=[AsyncTokenType()])

    def verify_(self) -> None:
        dest = _shared_stage(self.dest.type, "warp.round_stage destination")
        if element_name(dest.element_type) != "f32":
            raise VerifyException(f"warp.round_stage rounds f32 to tf32; the stage holds {dest.element_type}")
        if self.vector.value.data not in (4, 8, 16) or row_bytes(dest) % self.vector.value.data:
            raise VerifyException("warp.round_stage: vector is the copy's (4, 8 or 16 bytes), whole chunks a row")
        if str(self.rounding.data) == "trunc":  # type: ignore[union-attr]
            raise VerifyException("warp.round_stage: trunc is no rounding (the tensor cores ignore the low bits)")


class _StageReadOp(IRDLOperation):
    """What `warp.ldmatrix` and `warp.load_shared` share: fragments read from stage
    `indices[0]` of a shared buffer at (row, col) = indices[1:] + `offsets` (static), after the
    wait whose `token` they take, swizzled as the buffer's type says, and an f32 buffer read as
    tf32 fragments when `rounding` says how. With `xor_columns` (the column index 0 or a multiple
    of 128 bytes) a column offset inside a 128-byte line whose bits miss the lane's column is an
    XOR of the read's row address (the swizzle phase stays below those bits), so the reads share
    one address instead of a live one each."""

    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    token = operand_def(AsyncTokenType)
    offsets = prop_def(DenseArrayBase)
    rounding = opt_prop_def(Attribute)  # f32 read as tf32: a #tile<rounding ...> (tile.RoundingAttr)
    # Registers before instructions: one LOP3 a read instead of an address register per column
    # offset (attention at head dim 128 and tf32's 4x8 tiles are short of registers; the other
    # GEMM reads keep theirs)
    xor_columns = opt_prop_def(UnitAttr)

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
    (`.x2`/`.x4`), or with `trans` from a K x N one (`.x2.trans`/`.x4.trans`). .trans moves
    16-bit elements; with `trans`, 8-bit fragments are read from byte pairs (`.x4.trans` of K
    rows 4i, 4i + 1 and 4i + 2, 4i + 3, whose bytes `prmt` regroups): B two at a time, the first
    the even columns of n .. n + 15, the second the odd ones; an A fragment's rows g and g + 8
    are rows 2g and 2g + 1 of its 16. The accumulators they multiply into are put back in order
    by `warp.unpair_columns` and `warp.unpair_rows`.
    Static offsets become immediates where the swizzle allows; `rounding` reads an f32 buffer
    as tf32 fragments (converted in registers)."""

    name = "warp.ldmatrix"
    trans = opt_prop_def(UnitAttr)
    fragments = var_result_def(FragType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` `after` $token attr-dict `:` type($ref) `->` type($fragments)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], token: SSAValue, offsets: Sequence[int],
                 result: FragType, count: int = 1, trans: bool = False, rounding: str | None = None,
                 xor_columns: bool = False):
        super().__init__(operands=[ref, indices, token], result_types=[[result] * count],
                         properties=self.stage_props(offsets, rounding, trans=trans, xor_columns=xor_columns))

    @property
    def byte_pairs(self) -> bool:
        """Whether the read takes 8-bit fragments from byte pairs (`trans` of 8-bit elements)."""
        return self.trans is not None and _element_bits(self.fragments[0].type.element) == 8  # type: ignore[attr-defined]

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
        if self.byte_pairs and frag.role == Operand.B and len(self.fragments) != 2:
            raise VerifyException("warp.ldmatrix: trans reads 8-bit elements as byte pairs into two B fragments "
                                  "(the even and the odd columns of 16)")
        if self.trans is not None and bits not in (8, 16):
            raise VerifyException("warp.ldmatrix: trans moves 16-bit elements (8-bit B as byte pairs); 32-bit "
                                  "operands need a buffer of K rows (A: M x K, B: N x K)")


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
                 result: FragType, transposed: bool = False, rounding: str | None = None,
                 xor_columns: bool = False):
        super().__init__(operands=[ref, indices, token], result_types=[result],
                         properties=self.stage_props(offsets, rounding, transposed=transposed,
                                                     xor_columns=xor_columns))

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


@irdl_op_definition
class CopyMetaAsyncOp(IRDLOperation):
    """`warp.copy_meta_async`: the CTA copies the metadata of a pre-compressed sparse A
    (`sparse_format`) for one stage into stage `stage` of a shared buffer of `stages x rows x
    steps` ui32: the rows / 16 tiles from A's row indices[1] (indices: batch, row, dense k of the
    stage), the stage's `steps` k32 steps. Shared row 16 t + q holds the words of metadata
    lane q (lane 4 (q / 2) + q % 2) of tile t, contiguous in the format: one `cp.async` of 4 x
    steps bytes each, in the same groups as the operands' copies (CUTLASS's sm80 sparse
    pipeline stages E so). Tiles past the memref's and K groups past its rows read its last ones:
    valid metadata, selecting among A's zero-filled values there."""

    name = "warp.copy_meta_async"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    dest = operand_def(MemRefType)
    stage = operand_def(IndexType)
    threads = prop_def(IntegerAttr)
    first_thread = opt_prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` `,` $dest `[` $stage `]` attr-dict `:` type($ref) `,` type($dest)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], dest: SSAValue, stage: SSAValue, threads: int,
                 first_thread: int = 0):
        super().__init__(operands=[ref, indices, dest, stage], properties=thread_props(threads, first_thread))

    def verify_(self) -> None:
        verify_meta_memref(self.ref.type, self.name)
        if len(self.indices) != 3:
            raise VerifyException(f"{self.name}: expected three index operands (batch, row, k)")
        _meta_stage(self.dest.type, f"{self.name} destination")


@irdl_op_definition
class LoadMetaSharedOp(IRDLOperation):
    """`warp.load_meta_shared`: the `e` fragments of one 16-row tile for every k32 step of a
    stage that `warp.copy_meta_async` filled: stage indices[0], the tile at row indices[1] of
    the CTA's (a multiple of 16), after the wait whose `token` it takes; one `ld.shared.v{steps}`
    a lane (lanes at quad positions 2 and 3 read their neighbours', which the instruction ignores)."""

    name = "warp.load_meta_shared"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    token = operand_def(AsyncTokenType)
    fragments = var_result_def(FragType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` `after` $token attr-dict `:` type($ref) `->` type($fragments)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], token: SSAValue, result: FragType):
        steps = _meta_stage(ref.type, "warp.load_meta_shared source").get_shape()[2]
        super().__init__(operands=[ref, indices, token], result_types=[[result] * steps])

    def verify_(self) -> None:
        ref = _meta_stage(self.ref.type, f"{self.name} source")
        if len(self.indices) != 2:
            raise VerifyException(f"{self.name}: expected two index operands (stage, row)")
        if len(self.fragments) != ref.get_shape()[2]:
            raise VerifyException(f"{self.name}: one fragment for each of the stage's {ref.get_shape()[2]} k32 steps")
        verify_meta_fragments(self.fragments, self.name)


def _meta_stage(ref: Attribute, what: str) -> MemRefType:
    """A shared buffer of metadata stages: stages x (16-row tiles x 16 lanes) x steps ui32."""
    if not isinstance(ref, MemRefType) or not is_shared(ref) or len(ref.get_shape()) != 3 \
            or element_name(ref.element_type) != "ui32" or not isinstance(ref.layout, NoneAttr):
        raise VerifyException(f"{what} must be a row-major 3-d shared ui32 memref (stages x rows x steps)")
    _, rows, steps = ref.get_shape()
    if rows % fmt.META_LANES or steps not in (1, 2, fmt.STEPS_PER_GROUP):
        raise VerifyException(f"{what}: {fmt.META_LANES} rows a tile and 1, 2 or {fmt.STEPS_PER_GROUP} k32 steps "
                              f"a stage (one cp.async of a lane's words), not {rows} x {steps}")
    return ref


STAGED_ROWS, STAGED_ROW_BYTES = 16, 128  # a staging buffer's slot: one m16 block row, 128 bytes of columns
STAGED_BITS = (16, 32)  # the elements a staged store moves


def staged_cols(bits: int) -> int:
    """Columns of a staging slot's 128-byte rows of `bits`-bit elements (f32: 32, f16: 64)."""
    return STAGED_ROW_BYTES * 8 // bits


def staged_blocks(bits: int) -> int:
    """m16n8 fragments one staged store takes: a slot's columns in blocks of 8 (f32: 4, f16: 8)."""
    return staged_cols(bits) // 8


def staged_window_problem(ref: Attribute, element: Attribute, cols: int, cols_in_bounds: bool) -> str | None:
    """Why a memref window of `cols` columns (`cols_in_bounds`: no column predicate needed) cannot
    take a staged store of `element` values, None where it can: each lane stores 16 bytes of a row
    whole, so the window holds that element (a cast comes first), its columns are contiguous, its
    rows and origin 16-byte aligned (static strides and offset: a `?` one promises no alignment),
    and its columns whole 16-byte pieces, inside or outside together. `warp-stage-stores` takes a
    window only where this is None, and `warp.store_staged`'s verifier refuses one where it is not."""
    from tilemma.compiler.core.memref_layout import symbolic_layout

    bits = _element_bits(element)
    if bits not in STAGED_BITS:
        return f"a staged store moves 16- or 32-bit values, not {bits}-bit"
    assert isinstance(ref, MemRefType)
    if ref.element_type != element:
        return "the window holds the fragments' element (a cast comes first)"
    piece = 128 // bits  # elements in 16 bytes
    if not cols_in_bounds and (cols == DYNAMIC_INDEX or cols % piece):
        return (f"the window's columns are whole 16-byte pieces (in bounds, or a static extent that is a multiple of "
                f"{piece}): each lane stores 16 bytes inside or outside together")
    layout = symbolic_layout(ref)
    if len(layout.strides) < 2 or layout.strides[-1] != 1 \
            or any(s == DYNAMIC_INDEX or s % piece for s in (*layout.strides[:-1], layout.offset)):
        return ("the window's columns are contiguous and its rows and origin 16-byte aligned (static strides and "
                f"offset, multiples of {piece} elements)")
    return None


@irdl_op_definition
class StoreStagedOp(_WindowOp):
    """`warp.store_staged %f0, ..., %f3 via %buf[%slot] to %d[%b, %row, %col]`: the m16n8
    accumulator fragments of one 16-row block at columns col, col + 8, ... that make 128-byte rows
    (four of 32-bit elements, eight of 16-bit ones), stored to a memref window of their element type
    (as `warp.store` would each) through slot `slot` of a shared staging buffer
    (`memref<slots x 16 x 32xf32, #warp.swizzled<...>, 3>`; 16 x 64 for 16-bit) that only this warp
    uses: each lane writes its values there, the warp meets (`bar.warp.sync`), and each lane
    reads back 16 bytes of a row and stores them whole, so that a warp's store covers 4 rows'
    128 bytes instead of 8 rows' 32, each guarded as a whole where the window's edge may cut it
    (`in_bounds`). The window must take it (`staged_window_problem`), and `col_align` a multiple of
    a piece (4 or 8 elements) promises the column."""

    name = "warp.store_staged"
    values = var_operand_def(FragType)
    buffer = operand_def(MemRefType)
    slot = operand_def(IndexType)
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)
    col_align = opt_prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))

    assembly_format = ("$values `via` $buffer `[` $slot `]` `to` $ref `[` $indices `]` attr-dict `:` type($buffer) "
                       "`,` type($ref) `,` type($values)")

    def __init__(self, values: Sequence[SSAValue], buffer: SSAValue, slot: SSAValue, ref: SSAValue,
                 indices: Sequence[SSAValue], window: Sequence[int], extent: Sequence[int], col_align: int,
                 in_bounds: tuple[bool, bool] = (False, False)):
        super().__init__(operands=[values, buffer, slot, ref, indices],
                         properties={"window": _ints(window), "extent": _ints(extent),
                                     "col_align": IntegerAttr(col_align, i64)})
        self.set_in_bounds(*in_bounds)

    def verify_(self) -> None:
        self.verify_window(self.ref.type, self.indices)
        frags = [_frag(v, "warp.store_staged value") for v in self.values]
        frag = frags[0]
        v = frag.variant
        bits = _element_bits(frag.element)
        if bits not in STAGED_BITS or frag.role != Operand.ACC or (v.m, v.n) != (16, 8) \
                or len(frags) != staged_blocks(bits) or any(f != frag for f in frags):
            raise VerifyException("warp.store_staged: the m16n8 accumulator fragments of one variant that make "
                                  f"{STAGED_ROW_BYTES}-byte rows (four of 32-bit elements, eight of 16-bit ones)")
        buf = _shared_stage(self.buffer.type, "warp.store_staged buffer")
        cols = staged_cols(bits)
        if tuple(buf.get_shape()[1:]) != (STAGED_ROWS, cols) or buf.element_type != frag.element:
            raise VerifyException(f"warp.store_staged: the buffer is slots x {STAGED_ROWS} x {cols} of the "
                                  f"fragments' element, not {buf}")
        if problem := staged_window_problem(self.ref.type, frag.element, self.extent_values()[2],
                                            self.in_bounds_values()[1]):
            raise VerifyException(f"warp.store_staged: {problem}")
        if self.col_align_value() % (piece := 128 // bits):
            raise VerifyException(f"warp.store_staged: the column is a multiple of {piece} (col_align): each lane "
                                  "stores 16 bytes of a row whole")
