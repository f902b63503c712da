"""`warp-to-ptx` patterns for shared memory: a shared `memref.alloc` (a slice of the kernel's
dynamic shared memory), `warp.copy_async` (`cp.async`, its per-thread addressing computed once
at the kernel's entry), the copies' groups and the barrier, and the stage reads `warp.ldmatrix`
and `warp.load_shared` (addresses swizzled as the buffer's type, `#warp.swizzled`, says).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import prod

from xdsl.dialects import gpu, memref
from xdsl.dialects.builtin import IntegerType, MemRefType
from xdsl.ir import Attribute
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.layouts import fragments
from tilemma.dialects import ptx, tile, warp
from tilemma.dialects.tile import element_name
from tilemma.passes.errors import LoweringError
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.fragment_io import window_of
from tilemma.passes.warp_to_ptx.state import (
    SHARED_SYMBOL,
    LoweringState,
    _bank_of,
    _finish,
    _layout,
    all_reg,
    reg,
)


@dataclass
class LowerSharedAlloc(RewritePattern):
    """`memref.alloc` in shared memory: a slice of the kernel's dynamic shared memory aligned as
    the alloc asks (at least 128 bytes; the dynamic memory itself as its most aligned slice);
    the value is its 32-bit shared address."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AllocOp, rewriter: PatternRewriter) -> None:
        ref = op.memref.type
        if not warp.is_shared(ref):
            return
        kernel = self.state.kernel(op)
        offset, kernel.shared_bytes = place_alloc(kernel.shared_bytes, op)
        kernel.shared_align = max(kernel.shared_align, _alignment(op))
        e = fio.Emitter(kernel.regs)
        r = e.reg("b32")
        e.emit("mov.u32", r, SHARED_SYMBOL)
        if offset:
            e.emit("add.u32", r, r, offset)
        _finish(op, rewriter, e, [[r]])


def place_shared(used: int, ref: MemRefType, align: int = 128) -> tuple[int, int]:
    """Where the next shared buffer `ref` starts after `used` bytes (`align`-byte aligned, at
    least 128), and the bytes in use with it (sub-byte elements packed): the kernel's dynamic
    shared memory is the last of these."""
    align = max(align, 128)
    offset = -(-used // align) * align
    return offset, offset + prod(ref.get_shape()) * _stored_bits(ref) // 8


def _alignment(op: memref.AllocOp) -> int:
    """The alignment a shared alloc asks for (128 bytes where it names none)."""
    return op.alignment.value.data if op.alignment is not None else 128


def place_alloc(used: int, op: memref.AllocOp) -> tuple[int, int]:
    """`place_shared` for the buffer of shared alloc `op`, as it asks to be aligned: what the
    lowering does with each, in order, and what a pass that adds one counts first."""
    return place_shared(used, op.memref.type, _alignment(op))


def _stored_bits(ref: MemRefType) -> int:
    """Bits one element of a shared buffer takes: an operand's (sub-byte ones packed), or a
    builtin integer's width (the ui32 words of a sparse A's metadata, no operand type)."""
    t = ref.element_type
    if isinstance(t, IntegerType) and element_name(t) not in ELEMENTS:
        return t.width.data
    return tile.element_bits(element_name(t))


def _shared_geometry(ref: MemRefType) -> tuple[int, int, int]:
    """(bits per element, bytes per row, bytes per stage) of a stages x rows x cols buffer
    (sub-byte elements packed, as in global memory)."""
    _, rows, cols = ref.get_shape()
    bits = _stored_bits(ref)
    return bits, cols * bits // 8, rows * cols * bits // 8


def _column_bytes(e: fio.Emitter, dst: str, col: str, bits: int, sign: str = "u") -> None:
    """dst = the bytes of `col` elements (whole bytes for sub-byte elements: staged reads and
    copies start at 16-byte granules, and sub-byte extents end on a byte); `sign` "s" for a
    count that may be negative."""
    if bits >= 8:
        e.emit(f"mul.lo.{sign}32", dst, col, bits // 8)
    else:
        e.emit(f"shr.{sign}32", dst, col, (8 // bits).bit_length() - 1)


def _stage_read(op: warp.LdMatrixOp | warp.LoadSharedOp):
    """The registers of a stage read's buffer and (stage, row, col) indices, None until all are
    lowered, then the buffer's geometry (`_shared_geometry`)."""
    base, idx = reg(op.ref), all_reg(op.indices)
    if base is None or idx is None:
        return None
    ref = op.ref.type
    assert isinstance(ref, MemRefType)
    return (base, *idx, *_shared_geometry(ref))


def _swizzle(ref: Attribute) -> tuple[bool, int, bool]:
    """(whether, phase multiplier, row fold) of the granule swizzle of a buffer, from its type."""
    mult = warp.swizzle_mult(ref)
    return mult is not None, mult or 1, warp.swizzle_fold(ref)


def _round_tf32(e: fio.Emitter, rounding: Attribute | None, regs: list[str], guard: str | None = None) -> None:
    """f32 registers made tf32 in place as `rounding` (a #tile<rounding ...>, None: nothing) says:
    an f32 buffer read as tf32 fragments, or a stage rounded where it lies (`trunc`: not at all,
    the tensor cores read the top 19 bits; `fragment_io.tf32_for_mma`)."""
    if rounding is not None and rounding.data.value != "trunc":  # type: ignore[attr-defined]
        assert isinstance(rounding, tile.RoundingAttr)
        for r in regs:
            fio.tf32_for_mma(e, r, r, rounding.data.value, guard)


def _shared_address(e: fio.Emitter, base: str, stage: str, stage_bytes: int, row: str, row_bytes: int,
                    col_bytes: str, swizzle: bool, mult: int = 1, fold: bool = False) -> str:
    """Shared address of (stage, row, byte column), with the granule swizzle if asked."""
    # the part that does not depend on the stage first (loop-invariant where row and column are)
    offset = _shared_offset(e, row, row_bytes, col_bytes, swizzle, mult, fold)
    addr = e.reg("b32")
    e.emit("mad.lo.u32", addr, e.in_register(stage), stage_bytes, base)
    e.emit("add.u32", addr, addr, offset)
    return addr


def _swizzle_phase(e: fio.Emitter, row: str, row_bytes: int, mult: int = 1, fold: bool = False) -> str:
    """A register holding the swizzle phase of `row` in bytes (the granule XOR of
    `warp.swizzle_granule`, times 16), for a buffer of `row_bytes` rows, phase multiplier `mult`
    and `fold` (row bit 3 XORed into bit 1 first)."""
    phase = e.reg("b32")
    per_line, period = warp.swizzle_phases(row_bytes)
    if fold:
        folded = e.reg("b32")
        e.emit("shr.u32", folded, row, 2)
        e.emit("and.b32", folded, folded, 2)
        e.emit("xor.b32", folded, folded, row)
        row = folded
    e.emit("shr.u32", phase, row, per_line.bit_length() - 1)
    if mult != 1:
        e.emit("mul.lo.u32", phase, phase, mult)
    e.emit("and.b32", phase, phase, period - 1)
    e.emit("shl.b32", phase, phase, 4)
    return phase


def _shared_offset(e: fio.Emitter, row: str, row_bytes: int, col_bytes: str, swizzle: bool, mult: int = 1,
                   fold: bool = False) -> str:
    """Byte offset of (row, byte column) within a stage, swizzled if asked (phase multiplier
    `mult` and `fold` of the buffer's `#warp.swizzled`)."""
    if swizzle:  # the emitted form of warp.swizzle_granule
        offset = _swizzle_phase(e, row, row_bytes, mult, fold)
        e.emit("xor.b32", offset, offset, col_bytes)  # granule ^ phase, offset within it kept
    else:
        offset = e.reg("b32")
        e.emit("mov.u32", offset, col_bytes)
    e.emit("mad.lo.u32", offset, row, row_bytes, offset)
    return offset


def _uniform_steps(threads: int, per_row: int, total: int, row_step, row_bytes: int, swizzle: bool,
                   mult: int, fold: bool = False) -> tuple[int, int] | None:
    """(global, shared) byte steps between a thread's consecutive chunks where they are constants:
    each chunk is `threads / per_row` rows below the last in the same column, the global row
    stride is static and the rows keep their swizzle phase; None otherwise (one offset per chunk)."""
    if not isinstance(row_step, int) or threads % per_row or total <= threads:
        return None
    rows = threads // per_row
    if swizzle:
        per_line, period = warp.swizzle_phases(row_bytes)
        if rows % per_line or (rows // per_line * mult) % period or rows % warp.period_rows(row_bytes, fold):
            return None
    steps = rows * row_step, rows * row_bytes
    chunks = -(-total // threads)
    return steps if (chunks - 1) * max(steps) < 2**31 else None


def thread_chunks(e: fio.Emitter, threads: int, total: int, count: int, first: int = 0
                  ) -> Iterator[tuple[str, str | None]]:
    """This thread's first `count` chunks of `total` dealt round-robin to `threads` threads from
    the CTA's thread `first` (chunk i is %tid.x - first + i * threads), one at a time (the caller
    emits a chunk's own code before the next): its index register and, where some threads have
    none, the predicate that this one does (None where all do)."""
    tid = _thread(e, first)
    for i in range(count):
        c = e.reg("b32")
        e.emit("add.u32", c, tid, i * threads)
        guard = None
        if (i + 1) * threads > total:
            guard = e.reg("pred")
            e.emit("setp.lt.u32", guard, c, total)
        yield c, guard


@dataclass
class LowerRoundStage(RewritePattern):
    """`warp.round_stage`: for each chunk of the thread's copy (`LowerCopyAsync`'s placement: chunk
    t + i T of the stage, row-major, `vector` bytes), `ld.shared` its words (all chunks' loads
    first), rounds each to tf32 (`fragment_io.tf32_for_mma`) and `st.shared`s them back; the chunks' offsets one register and immediates where they are
    whole swizzle periods of rows apart (`_uniform_steps`), else one a chunk; then, with
    `proxy_fence`, `fence.proxy.async`."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.RoundStageOp, rewriter: PatternRewriter) -> None:
        dst, stage = reg(op.dest), reg(op.stage)
        if dst is None or stage is None:
            return
        kernel = self.state.kernel(op)
        ref = op.dest.type
        assert isinstance(ref, MemRefType)
        _, row_bytes, stage_bytes = _shared_geometry(ref)
        rows = ref.get_shape()[1]
        w, threads, first = op.vector.value.data, op.threads.value.data, warp.first_thread(op)
        per_row = row_bytes // w
        total = rows * per_row
        swizzle, mult, fold = _swizzle(ref)
        chunks = -(-total // threads)
        steps = _uniform_steps(threads, per_row, total, 0, row_bytes, swizzle, mult, fold)

        def offsets(e: fio.Emitter, count: int) -> list[tuple[str | None, str]]:
            """Per chunk (the first `count`): (guard, shared byte offset)."""
            out = []
            for c, guard in thread_chunks(e, threads, total, count, first):
                row, col_bytes = chunk_position(e, c, per_row)
                e.emit("mul.lo.u32", col_bytes, col_bytes, w)
                out.append((guard, _shared_offset(e, row, row_bytes, col_bytes, swizzle, mult, fold)))
            return out

        key = ("round-stage", threads, w, per_row, total, row_bytes, swizzle, mult, fold) + ((first,) if first else ())
        if steps is not None:
            [(_, offset0)] = kernel.thread_invariant(key + (1,), lambda e: offsets(e, 1))
            parts = [(None if (i + 1) * threads <= total else kernel.thread_invariant(
                ("copy-guard", threads, total - i * threads) + ((first,) if first else ()),
                lambda e, n=total - i * threads: [_below(e, n, first)])[0],
                offset0, i * steps[1]) for i in range(chunks)]
        else:
            parts = [(g, o, 0) for g, o in kernel.thread_invariant(key, lambda e: offsets(e, chunks))]
        e = fio.Emitter(kernel.regs)
        base = e.reg("b32")
        e.emit("mad.lo.u32", base, e.in_register(stage), stage_bytes, dst)
        words = w // 4
        vec = f".v{words}" if words > 1 else ""
        # every load first: ptxas cannot move a load above a store that may alias it, and a chain
        # of load-round-store a chunk leaves each load's latency exposed
        chunks_at = []
        for guard, offset, imm in parts:
            addr = e.reg("b32")
            e.emit("add.u32", addr, base, offset)
            at = f"[{addr}+{imm}]" if imm else f"[{addr}]"
            regs = [e.reg("b32") for _ in range(words)]
            e.emit(f"ld.shared{vec}.b32", "{" + ", ".join(regs) + "}" if vec else regs[0], at, guard=guard)
            chunks_at.append((guard, at, regs))
        for guard, at, regs in chunks_at:
            _round_tf32(e, op.rounding, regs, guard)
            e.emit(f"st.shared{vec}.b32", at, "{" + ", ".join(regs) + "}" if vec else regs[0], guard=guard)
        if op.proxy_fence is not None:
            e.emit("fence.proxy.async.shared::cta")
        token = ptx.RegsOp([], op.result.type)
        e.ops.append(token)
        rewriter.replace(op, e.ops, [token.results[0]])


def transpose_thread(e: fio.Emitter, layout: warp.TransposeLayout, first: int) -> tuple[str, list[str]]:
    """(block across, and per chunk the first line) of this thread's `warp.transpose_stage` chunks
    (`TransposeLayout`): one computation for the copies that place them and the transpose."""
    tid = _thread(e, first)
    block, q = e.reg("b32"), e.reg("b32")
    e.emit("rem.u32", block, tid, layout.blocks)
    e.emit("div.u32", q, tid, layout.blocks)
    lines = []
    for i in range(layout.chunks_per_thread):
        line = e.reg("b32")
        e.emit("add.u32", line, q, block)
        if i:
            e.emit("add.u32", line, line, i * (layout.threads // layout.blocks))
        e.emit("rem.u32", line, line, layout.groups)
        e.emit("mul.lo.u32", line, line, warp.TRANSPOSE_LINES)
        lines.append(line)
    return block, lines


def transpose_chunks(e: fio.Emitter, layout: warp.TransposeLayout, first: int) -> list[tuple[str, str]]:
    """(stage row, element in the row) of each 16-byte row of this thread's `warp.transpose_stage`
    chunks: chunk i's rows b A .. b A + A - 1 at its first line, where `warp.copy_async
    {for_transpose}` puts them."""
    block, lines = transpose_thread(e, layout, first)
    first_row = e.reg("b32")
    e.emit("mul.lo.u32", first_row, block, layout.chunk_across)
    out = []
    for line in lines:
        for a in range(layout.chunk_across):
            row = first_row
            if a:
                row = e.reg("b32")
                e.emit("add.u32", row, first_row, a)
            out.append((row, line))
    return out


def chunk_position(e: fio.Emitter, c: str, per_row: int) -> tuple[str, str]:
    """(row, chunk in the row) of a copy's chunk `c` (row-major, `per_row` chunks a row): where
    `warp.copy_async` puts it and `warp.round_stage` finds it."""
    row, vec = e.reg("b32"), e.reg("b32")
    e.emit("div.u32", row, c, per_row)
    e.emit("rem.u32", vec, c, per_row)
    return row, vec


def _thread(e: fio.Emitter, first: int) -> str:
    """The thread's index among those from the CTA's thread `first`."""
    tid = e.reg("b32")
    e.emit("mov.u32", tid, "%tid.x")
    if first:
        e.emit("sub.u32", tid, tid, first)
    return tid


def _below(e: fio.Emitter, n: int, first: int = 0) -> str:
    """A predicate: the thread's index (from thread `first`) is below n (a partial last chunk's guard)."""
    p = e.reg("pred")
    e.emit("setp.lt.u32", p, _thread(e, first), n)
    return p


@dataclass
class LowerCopyAsync(RewritePattern):
    """`warp.copy_async`: thread t copies chunks t, t + T, ... of the tile (row-major chunks of
    `vector` bytes), each a `cp.async`. The address is the tile origin's (uniform: the only part
    that moves with K) plus the thread's byte offset (loop-invariant), so the K loop advances
    one pointer. Unless `in_bounds` says the tile lies inside the window, each chunk's source
    size is the part inside the window (0 past its edge: nothing is read, it is zero-filled).
    `one_offset`: one thread offset for all its chunks, at immediates (`_uniform_steps`);
    `for_transpose`: the thread's chunks are the rows its `warp.transpose_stage` reads."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.CopyAsyncOp, rewriter: PatternRewriter) -> None:
        ptr, dst, stage = reg(op.ref), reg(op.dest), reg(op.stage)
        idx = [reg(i) for i in op.indices]
        if ptr is None or dst is None or stage is None or any(i is None for i in idx):
            return
        batch, row0, col0 = (x for x in idx)
        kernel = self.state.kernel(op)
        window = window_of(op, kernel.memrefs.get(ptr))
        # The shared rows run along the window's `outer` dimension, their contiguous chunks along
        # `inner` (rows and columns of the window, swapped when the copy transposes).
        t = op.transpose is not None
        outer, inner = (2, 1) if t else (1, 2)
        if window.strides[inner] != 1:
            raise LoweringError(op, "warp.copy_async copies runs of contiguous elements: the window's "
                                f"{'rows' if t else 'columns'} must have stride 1")
        o0, i0 = (col0, row0) if t else (row0, col0)
        o_in, i_in = window.in_bounds[outer - 1], window.in_bounds[inner - 1]
        o_ext, i_ext = window.extent[outer], window.extent[inner]
        ref = op.dest.type
        assert isinstance(ref, MemRefType)
        bits, row_bytes, stage_bytes = _shared_geometry(ref)
        _, rows, _ = ref.get_shape()
        w = op.vector.value.data
        threads, first_thread = op.threads.value.data, warp.first_thread(op)
        per_row = row_bytes // w
        total = rows * per_row
        stride = window.strides[outer]  # a register where it is `?`: bytes by a multiply below
        row_step = stride * bits // 8 if isinstance(stride, int) else stride
        swizzle, mult, fold = _swizzle(ref)
        chunks = -(-total // threads)

        def positions(e: fio.Emitter, count: int):
            """Per chunk (the first `count`): (guard, shared row, element in the row, its byte):
            chunk t + i T, row-major, or with `for_transpose` the rows of the thread's chunks of
            the transpose (`transpose_chunks`)."""
            if op.for_transpose is not None:
                for row, col in transpose_chunks(e, op.transpose_layout(), first_thread):
                    col_bytes = e.reg("b32")
                    e.emit("mul.lo.u32", col_bytes, col, bits // 8)
                    yield None, row, col, col_bytes
                return
            for c, guard in thread_chunks(e, threads, total, count, first_thread):
                row, vec = chunk_position(e, c, per_row)
                col, col_bytes = e.reg("b32"), e.reg("b32")
                e.emit("mul.lo.u32", col, vec, w * 8 // bits)
                e.emit("mul.lo.u32", col_bytes, vec, w)
                yield guard, row, col, col_bytes

        def thread_parts(e: fio.Emitter, count: int = chunks) -> list:
            """Per chunk (the first `count`): (guard, shared row, element in the row, global byte
            offset, shared byte offset)."""
            parts = []
            for guard, row, col, col_bytes in positions(e, count):
                offset, col64 = e.reg("b64"), e.reg("b64")
                fio._mul_wide(e, offset, row, row_step)
                if isinstance(row_step, str) and bits > 8:
                    e.emit("shl.b64", offset, offset, (bits // 8).bit_length() - 1)
                e.emit("cvt.u64.u32", col64, col_bytes)
                e.emit("add.s64", offset, offset, col64)
                parts.append((guard, row, col, offset, _shared_offset(e, row, row_bytes, col_bytes, swizzle, mult, fold)))
            return parts

        steps = (_uniform_steps(threads, per_row, total, row_step, row_bytes, swizzle, mult, fold)
                 if op.one_offset is not None and o_in and i_in else None)
        dealt = (first_thread,) if first_thread else ()  # in the keys only where set: PTX as before
        if op.for_transpose is not None:
            dealt += ("for-transpose",)
        if steps is not None:  # one thread offset, the chunks at immediates from it
            first = kernel.thread_invariant(("copy", threads, w, per_row, total, row_step, row_bytes, swizzle, mult, fold, 1)
                                            + dealt, lambda e: thread_parts(e, 1))[0]
            guards = [None if (i + 1) * threads <= total else kernel.thread_invariant(
                ("copy-guard", threads, total - i * threads) + dealt,
                lambda e, n=total - i * threads: [_below(e, n, first_thread)])[0] for i in range(chunks)]
        else:
            parts = kernel.thread_invariant(("copy", threads, w, per_row, total, row_step, row_bytes, swizzle, mult, fold)
                                            + dealt, thread_parts)
        e = fio.Emitter(kernel.regs)
        origin = fio.open_access(e, window, ptr, batch, row0, col0)  # type: ignore[arg-type]
        if window.sub_byte:  # a bit address; tile origins start on 4-byte runs (plan.copy_vector)
            e.emit("shr.u64", origin.ptr, origin.ptr, 3)
        stage_base = e.reg("b32")
        e.emit("mad.lo.u32", stage_base, e.in_register(stage), stage_bytes, dst)
        kind = "cg" if w == 16 else "ca"
        if steps is not None:
            _, _, _, offset, shared_offset = first
            src, addr = e.reg("b64"), e.reg("b32")
            e.emit("add.s64", src, origin.ptr, offset)
            e.emit("add.u32", addr, stage_base, shared_offset)
            for i, guard in enumerate(guards):
                g, sh = i * steps[0], i * steps[1]
                e.emit(f"cp.async.{kind}.shared.global", f"[{addr}+{sh}]", f"[{src}+{g}]", w, guard=guard)
            _finish(op, rewriter, e)
            return
        for guard, row, col, offset, shared_offset in parts:
            src = e.reg("b64")
            e.emit("add.s64", src, origin.ptr, offset)
            size: str | int = w
            if not (o_in and i_in):
                # bytes inside the window: clamp((inner extent - index) * bits / 8, 0, w), 0 on
                # an outer index past the edge (sub-byte extents end on a byte: `stageable`)
                size = e.reg("b32")
                if i_in:
                    e.emit("mov.u32", size, w)
                else:
                    index = e.reg("b32")
                    e.emit("add.u32", index, col, e.in_register(i0))  # type: ignore[arg-type]
                    e.emit("sub.s32", size, i_ext, index)
                    _column_bytes(e, size, size, bits, "s")
                    e.emit("min.s32", size, size, w)
                    e.emit("max.s32", size, size, 0)
                if not o_in:
                    index, inside = e.reg("b32"), e.reg("pred")
                    e.emit("add.u32", index, row, e.in_register(o0))  # type: ignore[arg-type]
                    e.emit("setp.lt.u32", inside, index, o_ext)
                    e.emit("selp.b32", size, size, 0, inside)
                some = e.reg("pred")
                e.emit("setp.ne.u32", some, size, 0)
                e.emit("selp.b64", src, src, ptr, some)  # nothing is read: any valid address
            addr = e.reg("b32")
            e.emit("add.u32", addr, stage_base, shared_offset)
            sizes = (w,) if size == w else (w, size)
            e.emit(f"cp.async.{kind}.shared.global", f"[{addr}]", f"[{src}]", *sizes, guard=guard)
        _finish(op, rewriter, e)


@dataclass
class LowerAsyncGroups(RewritePattern):
    """`warp.async_commit` / `warp.async_wait` as cp.async group instructions."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.AsyncCommitOp | warp.AsyncWaitOp | gpu.BarrierOp,
                          rewriter: PatternRewriter) -> None:
        if isinstance(op, warp.AsyncCommitOp):
            rewriter.replace(op, ptx.InstOp("cp.async.commit_group"), [])
        elif isinstance(op, warp.AsyncWaitOp):  # its token has no registers
            token = ptx.RegsOp([], op.token.type)
            fence = [ptx.InstOp("fence.proxy.async.shared::cta")] if op.proxy_fence is not None else []
            rewriter.replace(op, [ptx.InstOp("cp.async.wait_group", [str(op.pending.value.data)]), *fence, token],
                             [token.result])
        elif isinstance(op, gpu.BarrierOp):
            rewriter.replace(op, ptx.InstOp("bar.sync", ["0"]), [])


@dataclass
class LowerLdMatrix(RewritePattern):
    """`warp.ldmatrix`: lanes 8q..8q+7 give the rows of 8x8 (16-byte) matrix q, in fragment
    register order. A (x4, M x K buffer): rows +0/+8, then the K row's second 16 bytes; A `trans`
    (K x M buffer, 16-bit): m +0/+8, then k rows +8; B from an
    N x K buffer: the second 16 bytes, then n +8 for a second fragment (x4); B `trans` (K x N
    buffer, 16-bit): k rows +0/+8, then n +8. 8-bit `trans` (byte pairs, A or two B fragments):
    matrix q's row i is K row 4 (i >> 1) + (i & 1) + 2 (q & 1) + 16 (q >> 1) of the same 16
    bytes, and two `prmt`s a K half regroup each matrix pair's bytes by column (or row). A
    static row offset that keeps the swizzle phase is an immediate."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LdMatrixOp, rewriter: PatternRewriter) -> None:
        read = _stage_read(op)
        if read is None:
            return
        base, stage, row0, col0, bits, row_bytes, stage_bytes = read
        frag = op.fragments[0].type
        assert isinstance(frag, warp.FragType)
        swizzle, mult, fold = _swizzle(op.ref.type)
        row_off, col_off = op.offset_values()
        period_rows = warp.period_rows(row_bytes, fold)
        imm_rows = row_off if (not swizzle or row_off % period_rows == 0) else 0
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        lane = kernel.lane
        is_a, trans = frag.role == warp.Operand.A, op.trans is not None
        pairs = op.byte_pairs  # 8-bit, as byte pairs: K rows 4i, 4i + 1 (+ 2), then k + 16
        sparse_b = not is_a and frag.variant.sparse is not None  # one k32 B fragment per .x4
        wide = is_a or len(op.fragments) == 2 or sparse_b
        half_row = 128 // bits  # elements in 16 bytes: the second half of a K row
        # (lane bit, step) of the row and of the column of a lane's matrix row
        if pairs:
            row_part, col_part = None, None  # the rows below; 16 bytes are the fragments' rows or columns
        elif is_a and trans:  # K x M buffer: matrices 1 and 3 are m + 8, 2 and 3 are k + 8
            row_part, col_part = (4, 8), (3, 8)
        elif is_a:
            row_part, col_part = (3, 8), (4, half_row)
        elif sparse_b:  # lane bit 4 moves to K + 16 (added below)
            row_part, col_part = ((3, 8), None) if trans else (None, (3, half_row))
        elif trans:
            row_part, col_part = (3, 8), ((4, 8) if wide else None)
        else:
            row_part, col_part = ((4, 8) if wide else None), (3, half_row)
        row, col = e.reg("b32"), e.reg("b32")
        if pairs:  # matrix row i of matrix q: K row 4 (i >> 1) + (i & 1) + 2 (q & 1) + 16 (q >> 1)
            e.emit("and.b32", row, lane, 1)
            for lane_bit, width, step in ((1, 2, 4), (3, 1, 2), (4, 1, 16)):
                bit = e.reg("b32")
                e.emit("bfe.u32", bit, lane, lane_bit, width)
                e.emit("mad.lo.u32", row, bit, step, row)
        else:
            e.emit("and.b32", row, lane, 7)
        if row_part is not None:
            bit = e.reg("b32")
            e.emit("bfe.u32", bit, lane, row_part[0], 1)
            e.emit("mad.lo.u32", row, bit, row_part[1], row)
        e.emit("add.u32", row, row, e.in_register(row0))  # type: ignore[arg-type]
        if row_off != imm_rows:
            e.emit("add.u32", row, row, row_off)
        if col_part is not None:
            e.emit("bfe.u32", col, lane, col_part[0], 1)
            e.emit("mad.lo.u32", col, col, col_part[1], e.in_register(col0))  # type: ignore[arg-type]
        else:
            e.emit("mov.u32", col, col0)
        if sparse_b:  # matrices 2 and 3: the fragment's second k16 half
            upper = e.reg("b32")
            e.emit("bfe.u32", upper, lane, 4, 1)
            if trans:
                e.emit("mad.lo.u32", row, upper, 16, row)
            else:
                e.emit("mad.lo.u32", col, upper, 2 * half_row, col)
        lane_bytes = 0 if col_part is None else col_part[1] * bits // 8
        xor = None if sparse_b or col0 != "0" or bits < 8 else _xor_columns(op, col_off * bits // 8, lane_bytes,
                                                                           row_bytes)
        if col_off and xor is None:
            e.emit("add.u32", col, col, col_off)
        _column_bytes(e, col, col, bits)
        addr = _shared_address(e, base, stage, stage_bytes, row, row_bytes, col, swizzle, mult, fold)  # type: ignore[arg-type]
        line = 0
        if xor is not None:
            lo, line = xor
            if lo:
                moved = e.reg("b32")
                e.emit("xor.b32", moved, addr, lo)
                addr = moved
        out = e.reg_list("b32", 4 if wide else 2)
        shape = ("x4" if wide else "x2") + (".trans" if trans else "")
        e.emit(f"ldmatrix.sync.aligned.m8n8.{shape}.shared.b16", "{" + ", ".join(out) + "}",
               f"[{addr}+{imm_rows * row_bytes + line}]")
        _round_tf32(e, op.rounding, out)
        if pairs:  # out = k rows 4t, 4t+1 | 4t+2, 4t+3 of m or n 2g, 2g+1, then k + 16: bytes regrouped
            # (even, odd) of each K half: B's two fragments (b0, b1 each), or A's a0, a1 and a2, a3
            parts = [[e.reg("b32") for _ in range(2)] for _ in range(2)]
            for h in range(2):
                for f, selector in enumerate(_PAIR_SELECTORS):
                    e.emit("prmt.b32", parts[h][f], out[2 * h], out[2 * h + 1], selector)
            if is_a:
                _finish(op, rewriter, e, [[parts[0][0], parts[0][1], parts[1][0], parts[1][1]]])
            else:
                _finish(op, rewriter, e, [[parts[0][0], parts[1][0]], [parts[0][1], parts[1][1]]])
            return
        _finish(op, rewriter, e, [out] if is_a or sparse_b else [out[2 * f: 2 * f + 2] for f in range(len(op.fragments))])


# prmt selectors of a byte-pair read: the even columns' bytes (0 and 2 of each word), the odd ones'
_PAIR_SELECTORS = (0x6420, 0x7531)


def _value_address(e: fio.Emitter, row: str, col: str, key: tuple[int, int], stage_base: str, esz: int,
                   row_bytes: int, swizzle: bool, mult: int, fold: bool) -> str:
    """The shared address of a `warp.load_shared` value at (row, col) + `key` (elements)."""
    vr, cb = row, e.reg("b32")
    if key[0]:
        vr = e.reg("b32")
        e.emit("add.u32", vr, row, key[0])
    e.emit("add.u32", cb, col, key[1])
    e.emit("mul.lo.u32", cb, cb, esz)
    addr = e.reg("b32")
    e.emit("add.u32", addr, stage_base, _shared_offset(e, vr, row_bytes, cb, swizzle, mult, fold))
    return addr


def _xor_columns(op: warp.LdMatrixOp | warp.LoadSharedOp, col_bytes: int, lane_mask: int,
                 row_bytes: int) -> tuple[int, int] | None:
    """(XOR, immediate) that move an `xor_columns` read's address by `col_bytes`, or None where
    that does not hold. The address is 128-byte aligned stage and column index + row x
    `row_bytes` + (lane column ^ phase) below 128, the lane column's bits within `lane_mask`;
    an offset inside the line whose bits miss them is that XOR, whole lines an immediate."""
    if op.xor_columns is None or row_bytes % 128 or lane_mask >= 128:
        return None
    lo = col_bytes % 128
    return (lo, col_bytes - lo) if lo & lane_mask == 0 else None


@dataclass
class LowerLoadShared(RewritePattern):
    """`warp.load_shared`: one `ld.shared` per register, at the value's place in the fragment
    table (transposed for a `transposed` buffer). Offsets of whole swizzle periods (rows) and
    128-byte lines (columns) keep the granule phase, so they are immediates; the values whose
    offsets differ only by such periods share one address computation."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.LoadSharedOp, rewriter: PatternRewriter) -> None:
        read = _stage_read(op)
        if read is None:
            return
        base, stage, row0, col0, bits, row_bytes, stage_bytes = read
        esz = bits // 8  # 32- and 64-bit elements only (the verifier)
        frag = op.result.type
        assert isinstance(frag, warp.FragType)
        swizzle, mult, fold = _swizzle(op.ref.type)
        lay = _layout(frag)
        lin = fragments.linear_form(lay)
        # (lane weights, per-value offsets) of the buffer's rows and columns
        rows, cols = (lin.row_w, lin.row_off), (lin.col_w, lin.col_off)
        if op.transposed is not None:
            rows, cols = cols, rows
        _, period = warp.swizzle_phases(row_bytes)
        # offsets of whole swizzle periods (rows) and 128-byte lines (columns) keep the phase
        period_rows, period_cols = (warp.period_rows(row_bytes, fold), period * 16 // esz) if swizzle else (1, 1)
        row_off, col_off = op.offset_values()
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        row = e.lane_linear(kernel.lane, rows[0], row0)  # type: ignore[arg-type]
        col = e.lane_linear(kernel.lane, cols[0], col0)  # type: ignore[arg-type]
        stage_base = e.reg("b32")
        e.emit("mad.lo.u32", stage_base, e.in_register(stage), stage_bytes, base)  # type: ignore[arg-type]
        bank = _bank_of(frag)
        out = e.reg_list(bank, lay.regs)
        suffix = fio._word_suffix(bank)
        # `xor_columns`: the lane's column bytes, where their bits never carry into each other
        lane_bytes = [w * esz for w in cols[0] if w]
        carries = any(a & b for i, a in enumerate(lane_bytes) for b in lane_bytes[i + 1:])
        addrs: dict[tuple[int, int], str] = {}
        for v, r in enumerate(out):
            dr, dc = row_off + rows[1][v], col_off + cols[1][v]
            key = (dr % period_rows, dc % period_cols)
            split = None if carries else _xor_columns(op, key[1] * esz, sum(lane_bytes), row_bytes)
            moved = split[0] if split is not None and split[1] == 0 else 0  # inside the line: an XOR
            at = (key[0], 0) if moved else key
            if at not in addrs:
                addrs[at] = _value_address(e, row, col, at, stage_base, esz, row_bytes, swizzle, mult, fold)
            addr = addrs[at]
            if moved:
                addr = e.reg("b32")
                e.emit("xor.b32", addr, addrs[at], moved)
            imm = (dr - key[0]) * row_bytes + (dc - key[1]) * esz
            e.emit(f"ld.shared.{suffix}", r, f"[{addr}+{imm}]")
        _round_tf32(e, op.rounding, out)
        _finish(op, rewriter, e, [out])
