"""The `warp` ops of the transposing fill: a stage of shared memory written through registers.

`cp.async` copies bytes as they lie, and `ldmatrix .trans` transposes only 16-bit elements, so an
8-bit operand stored the other way round from what its fragments need (a B with N contiguous, an
A with M contiguous) cannot reach the K-major stage that the 8-bit `ldmatrix` reads by either. The
fill does it in two halves, so that the global latency hides behind a stage of mmas:

- `warp.fill_load`: each thread loads, for each of its chunks, the 32-bit words of `32 / bits`
  consecutive lines across the window's contiguous dimension, into a `!warp.staged<N>` value (N
  words, zero past the window's extent);
- `warp.fill_store`: the thread transposes each chunk's words in registers (`prmt`: word q of the
  result holds element q of every loaded line) and stores them into the K-major stage, one 32-bit
  `st.shared` each. `warp-pipeline` runs it an iteration after its load, the words carried.

Which thread holds which chunk is `FillLayout`, the meaning of a `!warp.staged` value; both ops'
lowerings read it, and `tile-plan` asks it whether a tile can be filled at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import DenseArrayBase, IndexType, IntAttr, IntegerAttr, MemRefType, UnitAttr, i64
from xdsl.ir import Attribute, ParametrizedAttribute, SSAValue, TypeAttribute
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

from tilemma.dialects.attributes import element_bits, element_name
from tilemma.dialects.warp import _ints, _shared_stage, _WindowOp

# Lanes of a warp that read neighbouring words of one line (a 32-byte sector each at 8), the
# others reading the next blocks of lines; tried in this order.
LANES_ALONG = (8, 16, 32, 4, 2, 1)
FILL_BITS = (8,)  # element widths the fill transposes (4 per word, with prmt)


@dataclass(frozen=True)
class FillLayout:
    """Chunks of a fill: the destination tile is `lines` rows (the window's contiguous dimension)
    of `across` elements (the other); a chunk is `per_word` consecutive elements across (a block)
    of `per_word` consecutive lines (a word of each). Chunk c goes to thread c % threads; within a
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
        return 32 // self.bits

    @property
    def words(self) -> int:
        """Words across the lines (lines / per_word)."""
        return self.lines // self.per_word

    @property
    def chunks_per_thread(self) -> int:
        return self.words * (self.across // self.per_word) // self.threads

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
        if bits not in FILL_BITS or threads % 32:
            return None
        per = 32 // bits
        if lines % per or across % per:
            return None
        words, blocks = lines // per, across // per
        if (words * blocks) % threads:
            return None
        for lanes in LANES_ALONG:
            groups = words // lanes if words % lanes == 0 else 0
            if groups and blocks % (32 // lanes) == 0 and (threads // 32) % groups == 0:
                return cls(lines, across, bits, threads, lanes)
        return None


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


def _layout_of(dest: MemRefType, threads: int) -> FillLayout:
    _, lines, across = dest.get_shape()
    layout = FillLayout.of(lines, across, element_bits(element_name(dest.element_type)), threads)
    if layout is None:
        raise VerifyException(f"warp.fill: a {lines} x {across} stage of {dest.element_type} does not split "
                              f"into {FILL_BITS}-bit chunks evenly over {threads} threads")
    return layout


@irdl_op_definition
class FillLoadOp(_WindowOp):
    """`warp.fill_load`: the CTA's loads of a transposing fill of one stage of `dest`'s shape
    (lines x across): the window tile at `indices` (rows x cols; with `transpose` the stage holds
    its transpose, so the window's columns are its lines) is read a 32-bit word at a time, the
    lines contiguous in memory; each thread's words as `FillLayout` places them; zero past the
    extent (a word lies wholly inside or outside it: `tile-plan` asks for lines a multiple of 4)."""

    name = "warp.fill_load"
    ref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    window = prop_def(DenseArrayBase)
    extent = prop_def(DenseArrayBase)
    in_bounds = opt_prop_def(DenseArrayBase)
    shape = prop_def(DenseArrayBase)  # (lines, across) of the destination stage
    threads = prop_def(IntegerAttr)
    transpose = opt_prop_def(UnitAttr)
    result = result_def(StagedType)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$ref `[` $indices `]` attr-dict `:` type($ref) `->` type($result)"

    def __init__(self, ref: SSAValue, indices: Sequence[SSAValue], window: Sequence[int], extent: Sequence[int],
                 shape: Sequence[int], threads: int, transpose: bool = False):
        props: dict[str, Attribute] = {"window": _ints(window), "extent": _ints(extent), "shape": _ints(shape),
                                       "threads": IntegerAttr(threads, i64)}
        if transpose:
            props["transpose"] = UnitAttr()
        layout = self.layout_for(ref.type, shape, threads)  # type: ignore[arg-type]
        words = layout.chunks_per_thread * layout.per_word if layout else 1
        super().__init__(operands=[ref, indices], properties=props, result_types=[StagedType(words)])

    @staticmethod
    def layout_for(ref: Attribute, shape: Sequence[int], threads: int) -> FillLayout | None:
        if not isinstance(ref, MemRefType) or len(shape) != 2:
            return None
        return FillLayout.of(shape[0], shape[1], element_bits(element_name(ref.element_type)), threads)

    def layout(self) -> FillLayout:
        shape = self.shape.get_values()  # type: ignore[attr-defined]
        layout = self.layout_for(self.ref.type, shape, self.threads.value.data)
        if layout is None:
            raise VerifyException(f"warp.fill_load: a {shape[0]} x {shape[1]} tile of {self.ref.type.element_type} "  # type: ignore[union-attr]
                                  f"does not split into {FILL_BITS}-bit chunks evenly over {self.threads.value.data} threads")
        return layout

    def verify_(self) -> None:
        self.verify_window(self.ref.type, self.indices)
        layout = self.layout()
        if self.result.type.words.data != layout.chunks_per_thread * layout.per_word:  # type: ignore[attr-defined]
            raise VerifyException(f"warp.fill_load: each thread holds {layout.chunks_per_thread * layout.per_word} "
                                  f"words of this tile, not {self.result.type.words.data}")  # type: ignore[attr-defined]


@irdl_op_definition
class FillStoreOp(IRDLOperation):
    """`warp.fill_store`: a fill's words, transposed in registers, into stage `stage` of `dest`
    (K-major: each 32-bit word of a line holds `32 / bits` consecutive elements across), swizzled
    as its type says. Its readers wait at the barrier after it."""

    name = "warp.fill_store"
    value = operand_def(StagedType)
    dest = operand_def(MemRefType)
    stage = operand_def(IndexType)
    threads = prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$value `,` $dest `[` $stage `]` attr-dict `:` type($value) `,` type($dest)"

    def __init__(self, value: SSAValue, dest: SSAValue, stage: SSAValue, threads: int):
        super().__init__(operands=[value, dest, stage], properties={"threads": IntegerAttr(threads, i64)})

    def layout(self) -> FillLayout:
        return _layout_of(_shared_stage(self.dest.type, "warp.fill_store destination"), self.threads.value.data)

    def verify_(self) -> None:
        layout = self.layout()
        words = self.value.type.words.data  # type: ignore[attr-defined]
        if words != layout.chunks_per_thread * layout.per_word:
            raise VerifyException(f"warp.fill_store: each thread stores {layout.chunks_per_thread * layout.per_word} "
                                  f"words of this stage, not {words}")
        load = self.value.owner
        if isinstance(load, FillLoadOp):
            if tuple(load.shape.get_values()) != tuple(self.dest.type.get_shape()[1:]):  # type: ignore[attr-defined]
                raise VerifyException("warp.fill_store: the stage's shape is not the one its fill_load read")
            if load.threads != self.threads:
                raise VerifyException("warp.fill_store: stored by other threads than its fill_load loaded")
            if load.ref.type.element_type != self.dest.type.element_type:  # type: ignore[attr-defined]
                raise VerifyException("warp.fill_store: source and destination element types differ")
