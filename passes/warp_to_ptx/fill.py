"""`warp-to-ptx` patterns of the transposing fill and the gather (`dialects/warp_fill.py`).

`warp.fill_load`: for each chunk of the thread (`FillLayout`), 4 `ld.global.b32`, one for each
of its 4 elements across, each word holding that element of the chunk's 4 lines (of 32-bit
elements: of its one line); zero (nothing read) past the extent. With `by_element` (lines not 4-byte aligned, or an extent ending inside a
word) each word's 4 bytes are loaded one by one (`ld.global.u8`, each zero past the extent) and
packed by `prmt` into the same word. `warp.fill_store`: a chunk's 4 words transposed by 8 `prmt`
(word q then holds the 4 elements across of line q) and stored with one `st.shared.b32` each into
the lines of the K-major stage. A 4-bit chunk is 8 words of 8 lines: pairs of words interleaved
by nibbles first (`_nibble_pairs`), then each half transposed by bytes.

A thread rotates which transposed word it stores first by two bits of its word index,
r = (word >> s) & 3: store j writes line `4 * word + (j ^ r)`. A store's bank is set by the
line's position in its 128-byte line, its swizzle phase and the column, so without the rotation
the 8 neighbouring words of a warp's store meet in few bank groups (lines 4 apart); `_rotation`
picks the s whose stores of each warp meet in the fewest conflicts for the stage's row width and
swizzle, simulated on the layout (s = 1 where 8 lanes share a block: each store of a warp
conflict-free; s = 0, the low bits, left 2-way conflicts: ncu, s8 B row-major 4096^3, 2.8 M
conflicts on 2.1 M stores). The rotation costs nothing: it is in the `prmt` selectors,
registers computed once per thread.

A 32-bit chunk (tf32 for the warpgroups, `_vector_stores`) needs no transpose: its 4 words are
its line's 4 elements across, rounded as `rounding` says and stored as one 16-byte vector.

With `gather` (rows not 4-byte aligned), the same ops copy the tile as stored: each word's
elements loaded one by one (`ld.global.u16`/`.u8`, predicated), packed by `prmt`, and stored to
its stage row (`GatherLayout`; the end of this module).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.dialects import warp
from tilemma.passes.errors import LoweringError
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.fragment_io import window_of
from tilemma.passes.warp_to_ptx.shared import _shared_geometry, _shared_offset, _swizzle, _swizzle_phase, _thread
from tilemma.passes.warp_to_ptx.state import LoweringState, _finish, all_reg, reg, regs

# prmt selectors: the low and high byte pairs of two words interleaved (level 1), and the low
# and high halves of two words joined (level 2); adding SWAP turns each into its other one.
_PAIRS_LOW, _HALVES_LOW, _SWAP = 0x5140, 0x5410, 0x2222


def _thread_parts(e: fio.Emitter, layout: warp.FillLayout, first: int) -> tuple[str, str]:
    """(word, first block) of this thread's chunks, from its index among the threads from the
    CTA's thread `first` (`FillLayout.word/block`)."""
    tid, warp_id, lane = _thread(e, first), e.reg("b32"), e.reg("b32")
    e.emit("shr.u32", warp_id, tid, 5)
    e.emit("and.b32", lane, tid, 31)
    groups = layout.words // layout.lanes
    word, block, t = e.reg("b32"), e.reg("b32"), e.reg("b32")
    e.emit("rem.u32", word, warp_id, groups)
    e.emit("mul.lo.u32", word, word, layout.lanes)
    e.emit("rem.u32", t, lane, layout.lanes)
    e.emit("add.u32", word, word, t)
    e.emit("div.u32", block, warp_id, groups)
    e.emit("mul.lo.u32", block, block, 32 // layout.lanes)
    e.emit("div.u32", t, lane, layout.lanes)
    e.emit("add.u32", block, block, t)
    return word, block


@dataclass
class LowerFillLoad(RewritePattern):
    """`warp.fill_load`: the thread's words, `ld.global.b32` each, predicated at the extent (one
    predicate for all of them along a dimension the op marks `aligned`)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.FillLoadOp, rewriter: PatternRewriter) -> None:
        ptr, idx = reg(op.ref), all_reg(op.indices)
        if ptr is None or idx is None:
            return
        batch, row0, col0 = idx
        kernel = self.state.kernel(op)
        layout, dealt = op.layout(), warp.first_thread(op)
        window = window_of(op, kernel.memrefs.get(ptr))
        if isinstance(layout, warp.GatherLayout):
            _finish(op, rewriter, *_gather_loads(op, kernel, layout, window, ptr, batch, row0, col0))
            return
        lines_dim, across_dim = (2, 1) if op.transpose is not None else (1, 2)
        if window.strides[lines_dim] != 1 or window.bits != layout.bits:
            raise LoweringError(op, f"warp.fill_load reads {layout.bits}-bit lines contiguous in memory: the "
                                f"window's {'columns' if lines_dim == 2 else 'rows'} must have stride 1")
        per = layout.per_word
        step = layout.block_step * per  # elements across between a thread's chunks
        stride = window.strides[across_dim]  # elements: a register where `?` (not sub-byte)
        if isinstance(stride, int):
            stride = stride * layout.bits // 8  # bytes: tile-plan asked for whole words a line
        elif layout.bits < 8:
            raise LoweringError(op, "warp.fill_load: sub-byte elements need static strides")
        elif layout.bits == warp.WIDE_BITS:  # bytes, once
            elements = stride
            stride = kernel.thread_invariant(("fill-stride", elements), lambda e2: _bytes_of(e2, elements, 4))

        def parts(e: fio.Emitter) -> tuple[str, str, str]:
            """(line, first element across, byte offset of the first word) of the thread."""
            word, block = kernel.thread_invariant(("fill-thread", layout, dealt), lambda e2: _thread_parts(e2, layout, dealt))
            line, across = e.reg("b32"), e.reg("b32")
            e.emit("mul.lo.u32", line, word, layout.lines_per_word)
            e.emit("mul.lo.u32", across, block, per)
            offset, line64 = e.reg("b64"), e.reg("b64")
            fio._mul_wide(e, offset, across, stride)
            if layout.bits == 8:
                e.emit("cvt.u64.u32", line64, line)
            else:  # a word's bytes
                e.emit("mul.wide.u32", line64, word, 4)
            e.emit("add.s64", offset, offset, line64)
            return line, across, offset

        line, across, offset = kernel.thread_invariant(("fill-load", layout, stride, dealt), parts)
        e = fio.Emitter(kernel.regs)
        origin = fio.open_access(e, window, ptr, batch, row0, col0)  # type: ignore[arg-type]
        start = origin.ptr
        if window.sub_byte:  # a bit address, of a whole word (the tile's origin starts a word)
            start = e.reg("b64")
            e.emit("shr.u64", start, origin.ptr, 3)
        base = e.reg("b64")
        e.emit("add.s64", base, start, offset)
        line0, across0 = (col0, row0) if lines_dim == 2 else (row0, col0)
        ext_lines, ext_across = window.extent[lines_dim], window.extent[across_dim]
        in_lines, in_across = window.in_bounds[lines_dim - 1], window.in_bounds[across_dim - 1]
        by_element = op.by_element is not None
        line_ok = None
        lines_ok: list[str | None] = [None] * per  # by_element: each line of a word (its extent may end inside)
        if not in_lines and by_element:
            for c in range(per):
                at, lines_ok[c] = e.reg("b32"), e.reg("pred")
                e.emit("add.u32", at, line, e.in_register(line0))  # type: ignore[arg-type]
                if c:
                    e.emit("add.u32", at, at, c)
                e.emit("setp.lt.u32", lines_ok[c], at, ext_lines)
        elif not in_lines:  # the word's first line inside: all 4 are (the extent is a multiple of 4)
            at, line_ok = e.reg("b32"), e.reg("pred")
            e.emit("add.u32", at, line, e.in_register(line0))  # type: ignore[arg-type]
            e.emit("setp.lt.u32", line_ok, at, ext_lines)
        first = None
        if not in_across and op.aligned_values()[across_dim - 1] and not by_element:
            # the stage wholly inside the extent or past it (`aligned`): one guard, on its origin
            stage_ok = e.reg("pred")
            e.emit("setp.lt.u32", stage_ok, e.in_register(across0), ext_across)  # type: ignore[arg-type]
            if line_ok is not None:
                e.emit("and.pred", stage_ok, stage_ok, line_ok)
            line_ok = stage_ok
        elif not in_across:
            first = e.reg("b32")
            e.emit("add.u32", first, across, e.in_register(across0))  # type: ignore[arg-type]
        words = []
        for i in range(layout.chunks_per_thread):
            for j in range(per):
                k = i * step + j  # elements across past the thread's first
                w = e.reg("b32")
                words.append(w)
                guard = line_ok
                if first is not None:
                    at, ok = e.reg("b32"), e.reg("pred")
                    e.emit("add.u32", at, first, k)
                    e.emit("setp.lt.u32", ok, at, ext_across)
                    if line_ok is not None:
                        e.emit("and.pred", ok, ok, line_ok)
                    guard = ok
                if isinstance(stride, int) or not k:
                    at, bytes_ = base, k * stride if k else 0
                else:
                    at, off = e.reg("b64"), e.reg("b64")
                    fio._mul_wide(e, off, e.in_register(str(k)), stride)
                    e.emit("add.s64", at, base, off)
                    bytes_ = 0
                if by_element:
                    _word_by_element(e, w, at, bytes_, [e.both(guard, ok) for ok in lines_ok])
                    continue
                if guard is not None:
                    e.emit("mov.b32", w, 0)
                e.emit("ld.global.b32", w, f"[{at}+{bytes_}]" if bytes_ else f"[{at}]", guard=guard)
        _finish(op, rewriter, e, [words])


def _bytes_of(e: fio.Emitter, elements: str, size: int) -> str:
    """A register holding `elements` (a register) times the element size `size` (a power of 2)."""
    out = e.reg("b32")
    e.emit("shl.b32", out, elements, size.bit_length() - 1)
    return out


def _word_by_element(e: fio.Emitter, word: str, at: str, offset: int, guards: list[str | None]) -> None:
    """`word` = the 4 bytes at `at` + `offset` (byte c: line c), loaded one by one (`ld.global.u8`,
    each zero where its guard fails) and packed by `prmt`: a fill's word whose lines are not 4-byte
    aligned or straddle the extent."""
    elems = []
    for c, guard in enumerate(guards):
        v = e.reg("b32")
        if guard is not None:
            e.emit("mov.b32", v, 0)
        e.emit("ld.global.u8", v, f"[{at}+{offset + c}]" if offset + c else f"[{at}]", guard=guard)
        elems.append(v)
    _pack_bytes(e, word, elems)


def _pack_bytes(e: fio.Emitter, word: str, elems: list[str]) -> None:
    """`word` = the low bytes of the 4 registers `elems`, the first in the low byte (`prmt`)."""
    lo, hi = e.reg("b32"), e.reg("b32")
    e.emit("prmt.b32", lo, elems[0], elems[1], 0x40)
    e.emit("prmt.b32", hi, elems[2], elems[3], 0x40)
    e.emit("prmt.b32", word, lo, hi, _HALVES_LOW)


@dataclass
class LowerFillStore(RewritePattern):
    """`warp.fill_store`: each chunk's 4 words transposed by `prmt` (with the thread's rotation,
    see the module docstring) and stored to its 4 lines, swizzled as the buffer's type says."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.FillStoreOp, rewriter: PatternRewriter) -> None:
        words, dst, stage = regs(op.value), reg(op.dest), reg(op.stage)
        if words is None or dst is None or stage is None:
            return
        kernel = self.state.kernel(op)
        layout, first = op.layout(), warp.first_thread(op)
        ref = op.dest.type
        assert isinstance(ref, MemRefType)
        _, row_bytes, stage_bytes = _shared_geometry(ref)
        swizzle, mult, fold = _swizzle(ref)
        if fold:
            raise LoweringError(op, "warp.fill_store: a folded swizzle (#warp.swizzled<_, fold>) is for byte-pair "
                                "ldmatrix reads; a filled or gathered stage takes the plain one")
        rounding = None if op.rounding is None else str(op.rounding.data)
        if isinstance(layout, warp.GatherLayout):
            _finish(op, rewriter, _gather_stores(kernel, layout, words, dst, stage, row_bytes, stage_bytes, swizzle, mult))
            return
        if layout.bits == warp.WIDE_BITS:
            _finish(op, rewriter, _vector_stores(kernel, layout, words, dst, stage, row_bytes, stage_bytes, swizzle,
                                                 mult, rounding, first))
            return
        per = layout.per_word
        step_bytes = layout.block_step * per * layout.bits // 8  # bytes across between chunks

        def parts(e: fio.Emitter) -> tuple[list[str], list[str], str, list[str]]:
            """Per store j: the line's byte offset and its swizzle phase (as a granule XOR); the
            byte column of the first chunk; the four prmt selectors of the rotation."""
            word, block = kernel.thread_invariant(("fill-thread", layout, first), lambda e2: _thread_parts(e2, layout, first))
            r, r0, r1 = e.reg("b32"), e.reg("b32"), e.reg("b32")
            shift = _rotation(layout, row_bytes, swizzle, mult)
            if shift:
                e.emit("shr.u32", r, word, shift)
                e.emit("and.b32", r, r, 3)
            else:
                e.emit("and.b32", r, word, 3)
            e.emit("and.b32", r0, r, 1)
            e.emit("shr.u32", r1, r, 1)
            sels = []
            for bit, low, sign in ((r1, _PAIRS_LOW, 1), (r1, _PAIRS_LOW + _SWAP, -1),
                                   (r0, _HALVES_LOW, 1), (r0, _HALVES_LOW + _SWAP, -1)):
                s = e.reg("b32")
                e.emit("mad.lo.s32", s, bit, sign * _SWAP, low)
                sels.append(s)
            rows, phases = [], []
            for j in range(per):  # store j's line: _line
                line, off = e.reg("b32"), e.reg("b32")
                e.emit("xor.b32", line, r, j % 4)
                if per == 8:
                    e.emit("mad.lo.u32", line, line, 2, j // 4)
                e.emit("mad.lo.u32", line, word, per, line)
                e.emit("mul.lo.u32", off, line, row_bytes)
                rows.append(off)
                if swizzle:
                    phases.append(_swizzle_phase(e, line, row_bytes, mult))
            col = e.reg("b32")
            e.emit("mul.lo.u32", col, block, per * layout.bits // 8)
            return rows, phases, col, sels

        rows, phases, col, (pair_a, pair_b, half_even, half_odd) = kernel.thread_invariant(
            ("fill-store", layout, row_bytes, swizzle, mult, first), parts)
        e = fio.Emitter(kernel.regs)
        stage_base = e.reg("b32")
        e.emit("mad.lo.u32", stage_base, e.in_register(stage), stage_bytes, dst)
        for i in range(layout.chunks_per_thread):
            chunk = words[i * per:(i + 1) * per]
            # 8-bit: the chunk's 4 words transposed by bytes; 4-bit: its 8 words interleaved by
            # nibbles in pairs first (`_nibble_pairs`), then each group of 4 transposed by bytes
            groups = [chunk] if per == 4 else _nibble_pairs(e, chunk)
            for g, (w0, w1, w2, w3) in enumerate(groups):
                xa, xb, ya, yb = e.reg("b32"), e.reg("b32"), e.reg("b32"), e.reg("b32")
                e.emit("prmt.b32", xa, w0, w1, pair_a)
                e.emit("prmt.b32", xb, w0, w1, pair_b)
                e.emit("prmt.b32", ya, w2, w3, pair_a)
                e.emit("prmt.b32", yb, w2, w3, pair_b)
                if g == 0:
                    c = e.reg("b32")
                    e.emit("add.u32", c, col, i * step_bytes)
                for j, (x, y, sel) in enumerate(((xa, ya, half_even), (xa, ya, half_odd), (xb, yb, half_even),
                                                 (xb, yb, half_odd)), start=4 * g):
                    out, addr = e.reg("b32"), e.reg("b32")
                    e.emit("prmt.b32", out, x, y, sel)
                    if swizzle:
                        e.emit("xor.b32", addr, c, phases[j])
                        e.emit("add.u32", addr, addr, rows[j])
                    else:
                        e.emit("add.u32", addr, c, rows[j])
                    e.emit("add.u32", addr, addr, stage_base)
                    e.emit("st.shared.b32", f"[{addr}]", out)
        _finish(op, rewriter, e)


def _rounded(e: fio.Emitter, word: str, rounding: str | None) -> str:
    """An f32 word as the tf32 `rounding` makes it for the tensor cores (`fio.tf32_for_mma`); trunc
    (the tensor cores ignore the low bits) and none leave it as loaded."""
    if rounding in (None, "trunc"):
        return word
    out = e.reg("b32")
    fio.tf32_for_mma(e, out, word, rounding)
    return out


def _vector_stores(kernel, layout: warp.FillLayout, words: list[str], dst: str, stage: str, row_bytes: int,
                   stage_bytes: int, swizzle: bool, mult: int, rounding: str | None, first: int) -> fio.Emitter:
    """A 32-bit fill's stores: each chunk, its line's 4 elements across already, rounded and
    stored as one `st.shared.v4.b32` at the thread's line (its word) and the chunk's 16 bytes of
    the row, swizzled. A warp's 8 lanes of a store phase take 8 neighbouring lines of one column,
    which the swizzle spreads over 8 granules: no bank conflicts, no rotation needed."""
    vector = layout.per_word * 4  # bytes a chunk's line holds

    def parts(e: fio.Emitter) -> tuple[str, str | None, str]:
        """(the line's byte offset, its swizzle phase, the first chunk's byte column)."""
        word, block = kernel.thread_invariant(("fill-thread", layout, first), lambda e2: _thread_parts(e2, layout, first))
        row, col = e.reg("b32"), e.reg("b32")
        e.emit("mul.lo.u32", row, word, row_bytes)
        phase = _swizzle_phase(e, word, row_bytes, mult) if swizzle else None
        e.emit("mul.lo.u32", col, block, vector)
        return row, phase, col

    row, phase, col = kernel.thread_invariant(("fill-store-wide", layout, row_bytes, swizzle, mult, first), parts)
    e = fio.Emitter(kernel.regs)
    stage_base = e.reg("b32")
    e.emit("mad.lo.u32", stage_base, e.in_register(stage), stage_bytes, dst)
    per = layout.per_word
    for i in range(layout.chunks_per_thread):
        values = [_rounded(e, w, rounding) for w in words[i * per:(i + 1) * per]]
        c, addr = col, e.reg("b32")
        if i:
            c = e.reg("b32")
            e.emit("add.u32", c, col, i * layout.block_step * vector)
        if phase is not None:
            e.emit("xor.b32", addr, c, phase)
            e.emit("add.u32", addr, addr, row)
        else:
            e.emit("add.u32", addr, c, row)
        e.emit("add.u32", addr, addr, stage_base)
        e.emit("st.shared.v4.b32", f"[{addr}]", "{" + ", ".join(values) + "}")
    return e


_LOW_NIBBLES, _HIGH_NIBBLES = 0x0F0F0F0F, 0xF0F0F0F0


def _nibble_pairs(e: fio.Emitter, chunk: list[str]) -> list[list[str]]:
    """A 4-bit chunk's 8 words (word k: element k across of 8 lines, line c in nibble c) as two
    groups of 4 words, the even lines' and the odd lines': word p of group h holds in byte q line
    2q + h's elements 2p (low nibble) and 2p + 1 (high) across, so that the 8-bit byte transpose
    of a group gives its lines' K-major words."""
    even, odd = [], []
    for p in range(4):
        w0, w1 = chunk[2 * p], chunk[2 * p + 1]
        lo, hi, t, u = e.reg("b32"), e.reg("b32"), e.reg("b32"), e.reg("b32")
        e.emit("shl.b32", t, w1, 4)  # even lines: w0's low nibbles, w1's moved up
        e.emit("and.b32", t, t, _HIGH_NIBBLES)
        e.emit("and.b32", u, w0, _LOW_NIBBLES)
        e.emit("or.b32", lo, u, t)
        t, u = e.reg("b32"), e.reg("b32")
        e.emit("shr.u32", t, w0, 4)  # odd lines: w0's high nibbles moved down, w1's
        e.emit("and.b32", t, t, _LOW_NIBBLES)
        e.emit("and.b32", u, w1, _HIGH_NIBBLES)
        e.emit("or.b32", hi, u, t)
        even.append(lo)
        odd.append(hi)
    return [even, odd]


def _line(layout: warp.FillLayout, word: int, store: int, r: int) -> int:
    """The stage line of a thread's `store`-th store of a chunk, rotated by r (the module
    docstring): 8-bit, 4 x word + (store ^ r); 4-bit, stores 0-3 the even lines and 4-7 the odd,
    8 x word + 2 x ((store % 4) ^ r) + store // 4."""
    if layout.per_word == 4:
        return 4 * word + (store ^ r)
    return 8 * word + 2 * ((store % 4) ^ r) + store // 4


def _rotation(layout: warp.FillLayout, row_bytes: int, swizzle: bool, mult: int) -> int:
    """The shift s of the stores' rotation (r = (word >> s) & 3, the module docstring): of 0, 1
    and 2 the one whose warps' stores meet in the fewest bank conflicts (the most lanes on one
    bank, summed over every store of every warp), the lowest on a tie."""
    per, bytes_per = layout.per_word, layout.per_word * layout.bits // 8

    def conflicts(shift: int) -> int:
        total = 0
        for first in range(0, layout.threads, 32):
            for i in range(layout.chunks_per_thread):
                for j in range(per):
                    banks: Counter[int] = Counter()
                    for t in range(first, first + 32):
                        w = layout.word(t)
                        line = _line(layout, w, j, (w >> shift) & 3)
                        col = (layout.block(t) + i * layout.block_step) * bytes_per
                        granule = warp.swizzle_granule(line, col // 16, row_bytes, mult) if swizzle else col // 16
                        banks[(line * row_bytes + granule * 16 + col % 16) // 4 % 32] += 1
                    total += max(banks.values())
        return total

    return min(range(3), key=conflicts)


# ---------------------------------------------------------------------------------------------
# The gather: a stage copied as stored, element by element (rows not 4-byte aligned).
# ---------------------------------------------------------------------------------------------


def _gather_thread(e: fio.Emitter, layout: warp.GatherLayout) -> tuple[str, str]:
    """(row of the first chunk, word) of this thread, from %tid.x (`GatherLayout.row/word`): one
    computation for a gather's loads and stores."""
    tid, row, word = e.reg("b32"), e.reg("b32"), e.reg("b32")
    e.emit("mov.u32", tid, "%tid.x")
    e.emit("div.u32", row, tid, layout.words)
    e.emit("rem.u32", word, tid, layout.words)
    return row, word


def _gather_loads(op: warp.FillLoadOp, kernel, layout: warp.GatherLayout, window, ptr: str, batch: str,
                  row0: str, col0: str) -> tuple[fio.Emitter, list[list[str]]]:
    """Per chunk, its word's `32 / bits` elements: `ld.global.u16`/`.u8` each, predicated at the
    extent (zero outside: K past its end must add nothing), packed by `prmt`."""
    outer, inner = (2, 1) if op.transpose is not None else (1, 2)  # the stage's rows, columns
    per, bytes_ = layout.per_word, layout.bits // 8
    suffix = fio.MEM_SUFFIX[layout.bits]

    def parts(e: fio.Emitter) -> tuple[str, str, str]:
        """(row, first element of the word, byte offset) of the thread's first chunk."""
        row, word = kernel.thread_invariant(("gather-thread", layout), lambda e2: _gather_thread(e2, layout))
        col = e.reg("b32")
        e.emit("mul.lo.u32", col, word, per)
        offset, t = e.reg("b64"), e.reg("b64")
        fio._mul_wide(e, offset, row, window.strides[outer])
        fio._mul_wide(e, t, col, window.strides[inner])
        e.emit("add.s64", offset, offset, t)
        if bytes_ > 1:
            e.emit("shl.b64", offset, offset, bytes_.bit_length() - 1)
        return row, col, offset

    row, col, offset = kernel.thread_invariant(("gather", layout, window.strides[outer], window.strides[inner]), parts)
    e = fio.Emitter(kernel.regs)
    origin = fio.open_access(e, window, ptr, batch, row0, col0)
    base = e.reg("b64")
    e.emit("add.s64", base, origin.ptr, offset)
    o0, i0 = (col0, row0) if op.transpose is not None else (row0, col0)
    in_outer, in_inner = window.in_bounds[outer - 1], window.in_bounds[inner - 1]
    cols_ok: list[str | None] = [None] * per
    if not in_inner:
        first = e.reg("b32")
        e.emit("add.u32", first, col, e.in_register(i0))
        for j in range(per):
            at, ok = e.reg("b32"), e.reg("pred")
            e.emit("add.u32", at, first, j)
            e.emit("setp.lt.u32", ok, at, window.extent[inner])
            cols_ok[j] = ok
    top = None
    if not in_outer:
        top = e.reg("b32")
        e.emit("add.u32", top, row, e.in_register(o0))

    def step(count: int, dim: int) -> str | None:
        """The byte offset of `count` steps along `dim` (an immediate, or a register for `?`)."""
        stride = window.strides[dim]
        if isinstance(stride, int):
            return None if not count else str(count * stride * bytes_)
        r = e.reg("b64")
        fio._mul_wide(e, r, e.in_register(str(count)), stride)
        if bytes_ > 1:
            e.emit("shl.b64", r, r, bytes_.bit_length() - 1)
        return r

    words = []
    for i in range(layout.chunks_per_thread):
        row_ok = None
        if top is not None:
            at, row_ok = e.reg("b32"), e.reg("pred")
            e.emit("add.u32", at, top, i * layout.row_step)
            e.emit("setp.lt.u32", row_ok, at, window.extent[outer])
        elems = []
        for j in range(per):
            guard = row_ok
            if cols_ok[j] is not None:
                guard = cols_ok[j]
                if row_ok is not None:
                    guard = e.reg("pred")
                    e.emit("and.pred", guard, cols_ok[j], row_ok)
            off = [x for x in (step(i * layout.row_step, outer), step(j, inner)) if x is not None]
            address = f"[{base}]"
            if off and all(not x.startswith("%") for x in off):
                address = f"[{base}+{sum(int(x) for x in off)}]"
            elif off:
                addr = e.reg("b64")
                e.emit("mov.b64", addr, base)
                for x in off:
                    e.emit("add.s64", addr, addr, x)
                address = f"[{addr}]"
            v = e.reg("b32")
            if guard is not None:
                e.emit("mov.b32", v, 0)
            e.emit(f"ld.global.{suffix}", v, address, guard=guard)
            elems.append(v)
        w = e.reg("b32")
        if per == 2:
            e.emit("prmt.b32", w, elems[0], elems[1], _HALVES_LOW)
        else:  # four bytes: pairs, then the pairs' low halves
            _pack_bytes(e, w, elems)
        words.append(w)
    return e, [words]


def _gather_stores(kernel, layout: warp.GatherLayout, words: list[str], dst: str, stage: str, row_bytes: int,
                   stage_bytes: int, swizzle: bool, mult: int) -> fio.Emitter:
    """Each word into its stage row, `st.shared.b32`, swizzled."""

    def parts(e: fio.Emitter) -> str:
        """The byte column of the thread's word."""
        _, word = kernel.thread_invariant(("gather-thread", layout), lambda e2: _gather_thread(e2, layout))
        col = e.reg("b32")
        e.emit("shl.b32", col, word, 2)
        return col

    row, _ = kernel.thread_invariant(("gather-thread", layout), lambda e2: _gather_thread(e2, layout))
    col = kernel.thread_invariant(("gather-store", layout), parts)
    e = fio.Emitter(kernel.regs)
    stage_base = e.reg("b32")
    e.emit("mad.lo.u32", stage_base, e.in_register(stage), stage_bytes, dst)
    for i, w in enumerate(words):
        r = e.reg("b32")
        e.emit("add.u32", r, row, i * layout.row_step)
        addr = _shared_offset(e, r, row_bytes, col, swizzle, mult)
        e.emit("add.u32", addr, addr, stage_base)
        e.emit("st.shared.b32", f"[{addr}]", w)
    return e
