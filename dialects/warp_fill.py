"""The `warp` ops of the transposing fill: a stage of shared memory written through registers.

`cp.async` copies bytes as they lie, and `ldmatrix .trans` transposes only 16-bit elements, so an
8- or 4-bit operand stored the other way round from what its fragments need (a B with N
contiguous, an A with M contiguous) cannot reach the K-major stage that `ldmatrix` reads by either.
The warpgroups' tf32 (`wgmma`, K-major only) cannot be read from an f32 operand stored M- or
N-major either, and an operand rounded to tf32 must be rounded before it reaches shared memory
(wgmma reads the stage itself): the fill takes 32-bit elements too, rounding them as
`warp.fill_store`'s `rounding` says (a K-major one is copied by cp.async and rounded where it
lies, `warp.round_stage`). The fill does it in two halves, so
that the global latency hides behind a stage of mmas:

- `warp.fill_load`: each thread loads, for each of its chunks, the 32-bit words of `32 / bits`
  consecutive lines (one line of 32-bit elements) across the window's contiguous dimension, into
  a `!warp.staged<N>` value (N words, zero past the window's extent);
- `warp.fill_store`: the thread transposes each chunk's words in registers (`prmt`, and for 4-bit
  elements a nibble interleave first: word q of the result holds element q of every loaded line)
  and stores them into the K-major stage, one 32-bit `st.shared` each; a 32-bit chunk is already
  its line's 4 elements across, stored as one 16-byte vector. `warp-pipeline` runs it an
  iteration after its load, the words carried.

Which thread holds which chunk is `FillLayout`, the meaning of a `!warp.staged` value; both ops'
lowerings read it, and `tile-plan` asks it whether a tile can be filled at all.

`warp.transpose_stage` does the fill's byte transposes from shared memory instead: an 8-bit stage
that `warp.copy_async {for_transpose}` copied as stored, written K-major into another buffer by
the threads that copied its rows (`TransposeLayout`), so that the copies can run stages ahead
where the fill's loads wait on global memory a stage at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import scf
from xdsl.dialects.builtin import DenseArrayBase, IndexType, IntAttr, IntegerAttr, MemRefType, UnitAttr, i64
from xdsl.ir import Attribute, BlockArgument, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from tilemma.dialects.attributes import Rounding, RoundingAttr, element_bits, element_name
from tilemma.dialects.warp import _ints, _WindowOp, flag_pair
from tilemma.dialects.warp_shared import AsyncTokenType, _shared_stage, first_thread, thread_props

# Lanes of a warp that read neighbouring words of one line (a 32-byte sector each at 8), the
# others reading the next blocks of lines; tried in this order.
LANES_ALONG = (8, 16, 32, 4, 2, 1)
FILL_BITS = (8, 4)  # element widths the fill transposes for ldmatrix (4 or 8 a word: prmt, and shifts and masks)
WIDE_BITS = 32  # ... and for the warpgroups' tf32: one element a word, a chunk's 4 of a line a vector
GATHER_BITS = (8, 16)  # element widths a gather loads one by one (rows not 4-byte aligned)
VECTOR = 4  # 32-bit elements across a chunk: one 16-byte st.shared


@dataclass(frozen=True)
class FillLayout:
    """Chunks of a fill: the destination tile is `lines` rows (the window's contiguous dimension)
    of `across` elements (the other); a chunk is `per_word` consecutive elements across (a block)
    of `lines_per_word` consecutive lines (a word of each: as many lines as a word holds elements,
    one for 32-bit elements). Chunk c goes to thread c % threads; within a
    warp, `lanes` lanes take neighbouring words of the same block and the rest the next blocks;
    warps then cover whole line groups (`word` is the same for all of a thread's chunks), so
    chunk i of a thread is at block `block(thread) + i * block_step`."""

    lines: int
    across: int
    bits: int
    threads: int
    lanes: int

    @property
    def per_word(self) -> int:
        """Elements across a chunk (the words each of its lines is loaded as)."""
        return VECTOR if self.bits == WIDE_BITS else 32 // self.bits

    @property
    def lines_per_word(self) -> int:
        """Lines a loaded word holds an element of."""
        return 1 if self.bits == WIDE_BITS else 32 // self.bits

    @property
    def words(self) -> int:
        """Words across the lines (lines / lines_per_word)."""
        return self.lines // self.lines_per_word

    @property
    def chunks_per_thread(self) -> int:
        return self.words * (self.across // self.per_word) // self.threads

    @property
    def words_per_thread(self) -> int:
        return self.chunks_per_thread * self.per_word

    @property
    def block_step(self) -> int:
        """Blocks between a thread's successive chunks."""
        return self.threads // 32 // (self.words // self.lanes) * (32 // self.lanes)

    def word(self, thread: int) -> int:
        """The word (line group) a thread's chunks hold."""
        h = thread // 32
        return (h % (self.words // self.lanes)) * self.lanes + thread % 32 % self.lanes

    def block(self, thread: int) -> int:
        """The block of a thread's first chunk."""
        h = thread // 32
        return (h // (self.words // self.lanes)) * (32 // self.lanes) + thread % 32 // self.lanes

    @classmethod
    def of(cls, lines: int, across: int, bits: int, threads: int) -> FillLayout | None:
        """The layout of a tile, None where none covers it evenly (every thread the same chunks,
        a thread's chunks one word apart across blocks only)."""
        if bits not in (*FILL_BITS, WIDE_BITS) or threads % 32:
            return None
        per, per_line = (VECTOR, 1) if bits == WIDE_BITS else (32 // bits, 32 // bits)
        if lines % per_line or across % per:
            return None
        words, blocks = lines // per_line, across // per
        if (words * blocks) % threads:
            return None
        for lanes in LANES_ALONG:
            groups = words // lanes if words % lanes == 0 else 0
            if groups and blocks % (32 // lanes) == 0 and (threads // 32) % groups == 0:
                return cls(lines, across, bits, threads, lanes)
        return None


TRANSPOSE_LINES = 16  # lines of a chunk of `warp.transpose_stage`: one 16-byte read holds an element of each
BANK_SPAN = 128  # bytes one pass over the 32 banks of shared memory serves
PHASE_LANES = 8  # lanes of a warp served together by a 16-byte shared access


@dataclass(frozen=True)
class TransposeLayout:
    """Chunks of `warp.transpose_stage`: the K-major stage is `lines` lines (N or M) of `across`
    8-bit elements (K); a chunk is `TRANSPOSE_LINES` consecutive lines by `chunk_across`
    consecutive elements across, read from the stage as stored (its rows are K, its columns the
    lines) as `chunk_across` 16-byte reads, one row each, and written once transposed as 16
    stores of `chunk_across` bytes, one line each.

    Chunk c = t + i T of thread t (T threads) is at block b = c % blocks across and line group
    (c // blocks + b) % groups: the groups skewed by the block, so that the 8 lanes a 16-byte read
    serves together (neighbouring blocks, rows `chunk_across` apart: one swizzle phase) read 8
    different granules of their rows, and the lanes a store serves together (again neighbouring
    blocks) write distinct granules of their lines. A thread's block is the same for all its
    chunks (T a multiple of blocks)."""

    lines: int
    across: int
    threads: int
    chunk_across: int

    @property
    def groups(self) -> int:
        return self.lines // TRANSPOSE_LINES

    @property
    def blocks(self) -> int:
        return self.across // self.chunk_across

    @property
    def chunks_per_thread(self) -> int:
        return self.groups * self.blocks // self.threads

    @property
    def words_per_chunk(self) -> int:
        """Words a chunk's reads hold: 4 (16 lines) a read."""
        return 4 * self.chunk_across

    def block(self, thread: int) -> int:
        return thread % self.blocks

    def group(self, thread: int, chunk: int) -> int:
        """The line group of a thread's chunk `chunk` (0 ..)."""
        return (thread // self.blocks + chunk * (self.threads // self.blocks) + self.block(thread)) % self.groups

    @classmethod
    def of(cls, lines: int, across: int, bits: int, threads: int) -> TransposeLayout | None:
        """The widest layout (16 or 8 elements across a chunk) that splits a stage evenly over the
        threads with neither its reads nor its stores meeting in a bank; None where none does
        (8-bit elements, at least 8 line groups and blocks)."""
        if bits != 8 or threads % 32 or lines % TRANSPOSE_LINES or lines // TRANSPOSE_LINES < PHASE_LANES:
            return None
        for chunk_across in (16, 8):
            blocks = across // chunk_across if across % chunk_across == 0 else 0
            store_lanes = BANK_SPAN // chunk_across  # lanes served together by one store
            if blocks and (lines // TRANSPOSE_LINES * blocks) % threads == 0 and threads % blocks == 0 \
                    and blocks % store_lanes == 0:
                return cls(lines, across, threads, chunk_across)
        return None


@dataclass(frozen=True)
class GatherLayout:
    """Chunks of a gather (a fill that copies the tile as stored, `gather`): a chunk is one 32-bit
    word of a stage row (`32 / bits` elements), loaded element by element, for rows whose
    alignment rules out cp.async. Chunk c goes to thread c % threads; its word is c % words (the
    stage's words a row), so neighbouring lanes read neighbouring elements and store neighbouring
    words, and a thread's chunks lie `row_step` rows apart in one column of words."""

    rows: int
    cols: int
    bits: int
    threads: int

    @property
    def per_word(self) -> int:
        return 32 // self.bits

    @property
    def words(self) -> int:
        """Words a stage row holds."""
        return self.cols // self.per_word

    @property
    def row_step(self) -> int:
        return self.threads // self.words

    @property
    def chunks_per_thread(self) -> int:
        return self.rows * self.words // self.threads

    @property
    def words_per_thread(self) -> int:
        return self.chunks_per_thread

    def word(self, thread: int) -> int:
        return thread % self.words

    def row(self, thread: int) -> int:
        """The row of a thread's first chunk."""
        return thread // self.words

    @classmethod
    def of(cls, rows: int, cols: int, bits: int, threads: int) -> GatherLayout | None:
        """The layout of a stage, None where its words do not split evenly over the threads, a
        thread's chunks in one column of words."""
        if bits not in GATHER_BITS or cols % (32 // bits):
            return None
        words = cols // (32 // bits)
        if threads % words or (rows * words) % threads:
            return None
        return cls(rows, cols, bits, threads)


@irdl_attr_definition
class StagedType(ParametrizedAttribute, TypeAttribute):
    """`!warp.staged<N>`: the N 32-bit words a thread holds between a fill's loads and its stores."""

    name = "warp.staged"
    words: IntAttr

    def __init__(self, words: int):
        super().__init__(IntAttr(words))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.words.data}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            words = parser.parse_integer(allow_negative=False, allow_boolean=False)
        return (IntAttr(words),)

    def verify(self) -> None:
        if self.words.data < 1:
            raise VerifyException("!warp.staged holds at least one word")


def layout_of(rows: int, cols: int, element: Attribute, threads: int, gather: bool) -> FillLayout | GatherLayout:
    """The chunk layout of a fill (or a gather) of a rows x cols stage, or a VerifyException."""
    bits = element_bits(element_name(element))
    layout = (GatherLayout if gather else FillLayout).of(rows, cols, bits, threads)
    if layout is None:
        raise VerifyException(f"warp.fill: a {rows} x {cols} stage of {element} does not split into "
                              f"{'gathered' if gather else 'transposed'} chunks evenly over {threads} threads")
    return layout


@irdl_op_definition
class FillLoadOp(_WindowOp):
    """`warp.fill_load`: the CTA's loads of a fill of one stage of `shape` (lines x across): the
    window tile at `indices` (rows x cols; with `transpose` the stage holds its transpose, so the
    window's columns are its lines). A transposing fill reads it a 32-bit word at a time, the lines
    contiguous in memory, each thread's words as `FillLayout` places them; zero past the extent (a
    word lies wholly inside or outside it: `tile-plan` asks for lines a multiple of a word's
    elements, 4 or 8). With `by_element` (8-bit elements only) each word's elements are loaded one
    by one, each zero past the extent: lines not 4-byte aligned, or an extent that ends inside a
    word. With `gather`, the stage holds the tile as stored (as `warp.copy_async` would), its words
    loaded element by element (`GatherLayout`), each element zero past the extent. `aligned` (rows,
    cols) marks the dimensions whose extent is whole windows from an origin a multiple of the
    window (K a multiple of the stage K, each stage at a multiple of it): a window lies wholly
    inside or outside the extent there, so one predicate, on its origin, guards all its words."""

    name = "warp.fill_load"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)
    aligned = opt_prop_def(DenseArrayBase)  # (rows, cols): windows wholly inside or outside the extent
    shape = prop_def(DenseArrayBase)  # (lines, across) of the destination stage
    threads = prop_def(IntegerAttr)
    first_thread = opt_prop_def(IntegerAttr)  # dealt to threads first_thread .. (a producer warpgroup)
    transpose = opt_prop_def(UnitAttr)
    gather = opt_prop_def(UnitAttr)
    by_element = opt_prop_def(UnitAttr)
    result = result_def(StagedType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` attr-dict `:` type($ref) `->` type($result)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], window: Sequence[int], extent: Sequence[int],
                 shape: Sequence[int], threads: int, transpose: bool = False, gather: bool = False,
                 by_element: bool = False, first_thread: int = 0, aligned: tuple[bool, bool] = (False, False)):
        props: dict[str, Attribute] = {"window": _ints(window), "extent": _ints(extent), "shape": _ints(shape),
                                       **thread_props(threads, first_thread)}
        if any(aligned):
            props["aligned"] = _ints([int(x) for x in aligned])
        for name, on in (("transpose", transpose), ("gather", gather), ("by_element", by_element)):
            if on:
                props[name] = UnitAttr()
        try:
            words = layout_of(*shape, ref.type.element_type, threads, gather).words_per_thread  # type: ignore[attr-defined]
        except VerifyException:
            words = 1  # the verifier says why
        super().__init__(operands=[ref, indices], properties=props, result_types=[StagedType(words)])

    def aligned_values(self) -> tuple[bool, bool]:
        return flag_pair(self.aligned)

    def layout(self) -> FillLayout | GatherLayout:
        rows, cols = self.shape.get_values()  # type: ignore[attr-defined]
        return layout_of(rows, cols, self.ref.type.element_type, self.threads.value.data,  # type: ignore[attr-defined]
                         self.gather is not None)

    def verify_(self) -> None:
        self.verify_window(self.ref.type, self.indices)
        if len(self.shape.get_values()) != 2:  # type: ignore[attr-defined]
            raise VerifyException("warp.fill_load: shape is the stage's (rows, cols)")
        if self.aligned is not None and len(self.aligned.get_values()) != 2:  # type: ignore[attr-defined]
            raise VerifyException("warp.fill_load: aligned has two flags (rows, cols)")
        bits = element_bits(element_name(self.ref.type.element_type))  # type: ignore[attr-defined]
        if self.gather is not None and first_thread(self):
            raise VerifyException("warp.fill_load: a gather is dealt to the whole CTA (no first_thread)")
        if self.by_element is not None and (self.gather is not None or bits != 8):
            raise VerifyException("warp.fill_load: by_element loads a transposing fill's 8-bit elements one by "
                                  "one (a gather always loads them so)")
        words = self.layout().words_per_thread
        if self.result.type.words.data != words:  # type: ignore[attr-defined]
            raise VerifyException(f"warp.fill_load: each thread holds {words} words of this tile, "
                                  f"not {self.result.type.words.data}")  # type: ignore[attr-defined]


def _loaded_by(value: SSAValue):
    """The op whose words `value` are: its owner, or for words a loop carries (`warp-pipeline`'s and
    `warp-specialize`'s stores an iteration behind their loads) what the loop starts from."""
    while isinstance(value, BlockArgument) and isinstance(loop := value.block.parent_op(), scf.ForOp) \
            and value.index >= 1 and value.index - 1 < len(loop.iter_args):
        value = loop.iter_args[value.index - 1]
    return value.owner


@irdl_op_definition
class FillStoreOp(IRDLOperation):
    """`warp.fill_store`: a fill's words into stage `stage` of `dest`, swizzled as its type says:
    transposed in registers (K-major: each 32-bit word of a line holds `32 / bits` consecutive
    elements across; 32-bit ones a chunk's 4 a vector), or with `gather` as they are (each word its
    stage row's, as loaded); with `rounding` (a 32-bit fill) each f32 rounded to tf32 first. Its
    readers wait at the barrier after it."""

    name = "warp.fill_store"
    value = operand_def(StagedType)
    dest = operand_def(MemRefType)
    stage = operand_def(IndexType)
    threads = prop_def(IntegerAttr)
    first_thread = opt_prop_def(IntegerAttr)  # stored by threads first_thread .. (a producer warpgroup)
    gather = opt_prop_def(UnitAttr)
    rounding = opt_prop_def(RoundingAttr)  # f32 stored as tf32 (`cvt.<rounding>.tf32.f32`; trunc: as loaded)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$value `,` $dest `[` $stage `]` attr-dict `:` type($value) `,` type($dest)"

    def __init__(self, value: SSAValue, dest: SSAValue, stage: SSAValue, threads: int, gather: bool = False,
                 rounding: str | None = None, first_thread: int = 0):
        props: dict[str, Attribute] = thread_props(threads, first_thread)
        if gather:
            props["gather"] = UnitAttr()
        if rounding:
            props["rounding"] = RoundingAttr(Rounding(rounding))
        super().__init__(operands=[value, dest, stage], properties=props)

    def layout(self) -> FillLayout | GatherLayout:
        dest = _shared_stage(self.dest.type, "warp.fill_store destination")
        _, rows, cols = dest.get_shape()
        return layout_of(rows, cols, dest.element_type, self.threads.value.data, self.gather is not None)

    def verify_(self) -> None:
        if self.rounding is not None and (element_name(self.dest.type.element_type) != "f32"  # type: ignore[attr-defined]
                                          or self.gather is not None):
            raise VerifyException("warp.fill_store: a rounding stores f32 as tf32 by a transposing fill; the stage "
                                  f"holds {self.dest.type.element_type}"  # type: ignore[attr-defined]
                                  f"{', gathered' if self.gather is not None else ''}")
        words = self.layout().words_per_thread
        if self.value.type.words.data != words:  # type: ignore[attr-defined]
            raise VerifyException(f"warp.fill_store: each thread stores {words} words of this stage, "
                                  f"not {self.value.type.words.data}")  # type: ignore[attr-defined]
        load = _loaded_by(self.value)
        if isinstance(load, FillLoadOp):
            if tuple(load.shape.get_values()) != tuple(self.dest.type.get_shape()[1:]):  # type: ignore[attr-defined]
                raise VerifyException("warp.fill_store: the stage's shape is not the one its fill_load read")
            if load.threads != self.threads or first_thread(load) != first_thread(self) \
                    or (load.gather is None) != (self.gather is None):
                raise VerifyException("warp.fill_store: stored by other threads, or otherwise, than its fill_load loaded")
            if load.ref.type.element_type != self.dest.type.element_type:  # type: ignore[attr-defined]
                raise VerifyException("warp.fill_store: source and destination element types differ")


@irdl_op_definition
class TransposeStageOp(IRDLOperation):
    """`warp.transpose_stage %src[%stage] -> %dest[%dest_stage] after %token`: the CTA's threads
    (`threads` from `first_thread`) write stage `dest_stage` of `dest` (lines x K, K-major) as the
    transpose of stage `stage` of `src` (K x lines, as `warp.copy_async` copied an 8-bit M-major A
    or N-major B), once the wait whose `token` it takes has landed it: a transposing fill from
    shared memory instead of global. Each thread reads its chunks (`TransposeLayout`) 16 bytes a
    row, transposes them in registers and stores each line's bytes across as one vector, both
    buffers swizzled as their types say. Each thread reads only the rows it copied itself
    (`warp.copy_async {for_transpose}`), so its own wait lands them: no barrier before it. With
    `proxy_fence` the thread then fences its stores for the async proxy (the warpgroups read
    `dest`). Its token orders the stage's reads after it."""

    name = "warp.transpose_stage"
    src = operand_def(MemRefType)
    stage = operand_def(IndexType)
    dest = operand_def(MemRefType)
    dest_stage = operand_def(IndexType)
    token = operand_def(AsyncTokenType)
    threads = prop_def(IntegerAttr)
    first_thread = opt_prop_def(IntegerAttr)
    proxy_fence = opt_prop_def(UnitAttr)
    result = result_def(AsyncTokenType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = ("$src `[` $stage `]` `->` $dest `[` $dest_stage `]` `after` $token attr-dict `:` type($src) "
                       "`,` type($dest)")

    def __init__(self, src: SSAValue, stage: SSAValue, dest: SSAValue, dest_stage: SSAValue, token: SSAValue,
                 threads: int, first_thread: int = 0, proxy_fence: bool = False):
        props: dict[str, Attribute] = thread_props(threads, first_thread)
        if proxy_fence:
            props["proxy_fence"] = UnitAttr()
        super().__init__(operands=[src, stage, dest, dest_stage, token], properties=props,
                         result_types=[AsyncTokenType()])

    def layout(self) -> TransposeLayout:
        dest = _shared_stage(self.dest.type, "warp.transpose_stage destination")
        _, lines, across = dest.get_shape()
        layout = TransposeLayout.of(lines, across, element_bits(element_name(dest.element_type)),
                                    self.threads.value.data)
        if layout is None:
            raise VerifyException(f"warp.transpose_stage: a {lines} x {across} stage of {dest.element_type} does not "
                                  f"split into {TRANSPOSE_LINES}-line chunks evenly over "
                                  f"{self.threads.value.data} threads without bank conflicts")
        return layout

    def verify_(self) -> None:
        src = _shared_stage(self.src.type, "warp.transpose_stage source")
        dest = _shared_stage(self.dest.type, "warp.transpose_stage destination")
        if src.element_type != dest.element_type:
            raise VerifyException("warp.transpose_stage: source and destination element types differ")
        if tuple(src.get_shape()[1:]) != tuple(dest.get_shape()[1:][::-1]):
            raise VerifyException(f"warp.transpose_stage: the source stage ({src.get_shape()[1]} x "
                                  f"{src.get_shape()[2]}) must be the destination's ({dest.get_shape()[1]} x "
                                  f"{dest.get_shape()[2]}) transposed")
        self.layout()
