"""`warp-to-ptx` lowering of `warp.transpose_stage`: an 8-bit stage copied as stored (K rows of
M or N contiguous lines) written K-major, through registers, from shared memory to shared memory.

A chunk (`TransposeLayout`) is 16 lines by A = 16 or 8 elements across. Its A reads are
`ld.shared.v4.b32`, one source row (one k) each: word q holds lines 4q .. 4q + 3. Each 4 x 4 block
of bytes (4 lines by 4 across) is transposed by 8 `prmt`, as the transposing fill's chunks are
(`fill.py`), and each line's A bytes across are stored at once (`st.shared.v4.b32` or `.v2`).
Per 256 bytes that is 16 reads, 128 `prmt` and 16 stores.

Addresses: a source row's swizzle phase is that of its place in the chunk (A rows apart are whole
swizzle periods, checked here), as is a destination line's (16 lines are), so a chunk's reads and
stores share one register per phase and carry the row or line as an immediate offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.dialects import ptx, warp
from tilemma.passes.errors import LoweringError
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.fill import _HALVES_LOW, _PAIRS_LOW, _SWAP
from tilemma.passes.warp_to_ptx.shared import _shared_geometry, _swizzle, transpose_thread
from tilemma.passes.warp_to_ptx.state import LoweringState, reg

# prmt selectors of a 4 x 4 byte transpose: the low and high byte pairs of two words interleaved,
# then the low and high halves of two words joined (the fill's, without its rotation)
_PAIRS = (_PAIRS_LOW, _PAIRS_LOW + _SWAP)
_HALVES = (_HALVES_LOW, _HALVES_LOW + _SWAP)
_STORES = {4: "st.shared.v4.b32", 2: "st.shared.v2.b32"}


def transpose_bytes(e, w0: str, w1: str, w2: str, w3: str) -> list[str]:
    """The 4 x 4 bytes of four words (word m's byte j: row m, column j) transposed by 8 `prmt`:
    word j of the result holds column j, row 0 in its low byte. `e` allocates registers and
    emits (`fio.Emitter`, or a `PtxBuilder`: the transposing kernel of `transpose_kernel`)."""
    x = [e.reg("b32") for _ in range(4)]
    for r, (u, v), sel in ((x[0], (w0, w1), _PAIRS[0]), (x[1], (w0, w1), _PAIRS[1]),
                           (x[2], (w2, w3), _PAIRS[0]), (x[3], (w2, w3), _PAIRS[1])):
        e.emit("prmt.b32", r, u, v, sel)
    out = []
    for lo, hi, sel in ((x[0], x[2], _HALVES[0]), (x[0], x[2], _HALVES[1]),
                        (x[1], x[3], _HALVES[0]), (x[1], x[3], _HALVES[1])):
        r = e.reg("b32")
        e.emit("prmt.b32", r, lo, hi, sel)
        out.append(r)
    return out


def _phases(op: warp.TransposeStageOp, ref: MemRefType, count: int, period: int, what: str) -> list[int]:
    """The swizzle phase (bytes XORed into the column) of rows 0 .. count - 1 of `ref`, checked to
    repeat every `period` rows over the stage (the phase of a row is that of its place in a chunk)."""
    _, row_bytes, _ = _shared_geometry(ref)
    swizzle, mult, fold = _swizzle(ref)
    if fold:
        raise LoweringError(op, f"warp.transpose_stage: the {what} takes the plain swizzle, not a folded one")
    if not swizzle:
        return [0] * count
    rows = ref.get_shape()[1]
    phase = [warp.swizzle_granule(r, 0, row_bytes, mult) * 16 for r in range(rows)]
    if any(phase[r] != phase[r % period] for r in range(rows)):
        raise LoweringError(op, f"warp.transpose_stage: the {what}'s swizzle ({row_bytes}-byte rows) does not repeat "
                            f"every {period} rows")
    return phase[:count]


def _thread_parts(e: fio.Emitter, layout: warp.TransposeLayout, first: int, src_row: int,
                  dst_row: int) -> tuple[str, str, list[str], list[str]]:
    """(the source offset of the thread's first row, its byte column across, and per chunk the
    source byte column of its lines and the destination offset of its first line)."""
    block, firsts = transpose_thread(e, layout, first)
    rows, across = e.reg("b32"), e.reg("b32")
    e.emit("mul.lo.u32", rows, block, layout.chunk_across * src_row)
    e.emit("mul.lo.u32", across, block, layout.chunk_across)
    lines = []
    for col in firsts:  # (8-bit: a line's byte column in the source is the line)
        line = e.reg("b32")
        e.emit("mul.lo.u32", line, col, dst_row)
        lines.append(line)
    return rows, across, firsts, lines


def _phase_addresses(e: fio.Emitter, column: str, base: str, phases: list[int]) -> dict[int, str]:
    """One register a distinct swizzle phase of a chunk's rows or lines: (`column` ^ phase) +
    `base`; each row or line is an immediate from its phase's register."""
    out = {}
    for phase in sorted(set(phases)):
        at = e.reg("b32")
        if phase:
            e.emit("xor.b32", at, column, phase)
            e.emit("add.u32", at, at, base)
        else:
            e.emit("add.u32", at, column, base)
        out[phase] = at
    return out


def _address(register: str, offset: int) -> str:
    return f"[{register}+{offset}]" if offset else f"[{register}]"


@dataclass
class LowerTransposeStage(RewritePattern):
    """`warp.transpose_stage`: per chunk, its reads, 4 x 4 transposes and line stores (the module
    docstring), then with `proxy_fence` `fence.proxy.async`."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.TransposeStageOp, rewriter: PatternRewriter) -> None:
        src, stage, dst, dstage = reg(op.src), reg(op.stage), reg(op.dest), reg(op.dest_stage)
        if src is None or stage is None or dst is None or dstage is None:
            return
        kernel = self.state.kernel(op)
        layout, first = op.layout(), warp.first_thread(op)
        src_ref, dst_ref = op.src.type, op.dest.type
        assert isinstance(src_ref, MemRefType) and isinstance(dst_ref, MemRefType)
        _, src_row, src_stage = _shared_geometry(src_ref)
        _, dst_row, dst_stage = _shared_geometry(dst_ref)
        n = layout.chunk_across
        read_phase = _phases(op, src_ref, n, n, "source")
        store_phase = _phases(op, dst_ref, warp.TRANSPOSE_LINES, warp.TRANSPOSE_LINES, "destination")
        rows, across, cols, lines = kernel.thread_invariant(
            ("transpose-stage", layout, first, src_row, dst_row),
            lambda e2: _thread_parts(e2, layout, first, src_row, dst_row))
        e = fio.Emitter(kernel.regs)
        src_base, dst_base = e.reg("b32"), e.reg("b32")
        e.emit("mad.lo.u32", src_base, e.in_register(stage), src_stage, src)
        e.emit("add.u32", src_base, src_base, rows)
        e.emit("mad.lo.u32", dst_base, e.in_register(dstage), dst_stage, dst)
        words = n // 4  # a line's words across
        for i in range(layout.chunks_per_thread):
            reads = _phase_addresses(e, cols[i], src_base, read_phase)
            chunk = []  # word 4a + q: row a, lines 4q .. 4q + 3
            for a in range(n):
                quad = [e.reg("b32") for _ in range(4)]
                chunk += quad
                offset = a * src_row
                at = reads[read_phase[a]]
                e.emit("ld.shared.v4.b32", "{" + ", ".join(quad) + "}", _address(at, offset))
            line_base = e.reg("b32")
            e.emit("add.u32", line_base, dst_base, lines[i])
            stores = _phase_addresses(e, across, line_base, store_phase)
            for q in range(4):
                out: list[list[str]] = [[] for _ in range(4)]  # line 4q + j's words across
                for p in range(words):
                    columns = transpose_bytes(e, *(chunk[4 * (4 * p + m) + q] for m in range(4)))
                    for j, r in enumerate(columns):
                        out[j].append(r)
                for j in range(4):
                    line = 4 * q + j
                    offset = line * dst_row
                    at = stores[store_phase[line]]
                    e.emit(_STORES[words], _address(at, offset), "{" + ", ".join(out[j]) + "}")
        if op.proxy_fence is not None:
            e.emit("fence.proxy.async.shared::cta")
        token = ptx.RegsOp([], op.result.type)
        e.ops.append(token)
        rewriter.replace(op, e.ops, [token.results[0]])
