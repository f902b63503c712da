"""`warp.store_staged` in PTX: accumulator fragments into the warp's slot of a staging buffer, a
warp barrier, and back as 16-byte pieces of whole rows to global memory.

A lane of an m16n8 accumulator holds rows g and g + 8 at columns 2t, 2t + 1 (g = lane / 4,
t = lane % 4): fragment j's pair goes to row g (and g + 8) of the slot at byte 8t + 32j of the
row's 128 (`st.shared.v2` of two 32-bit registers; of 16-bit values, one register's two halves at
byte 4t + 16j, `st.shared.b32`). After `bar.warp.sync`, lane L reads row L / 8 + 4i (i < 4) at bytes 16 (L % 8) and
stores them at the window's row row0 + L / 8 + 4i, columns col0 + 4 (L % 8): 8 lanes a row, 4 rows a
store, each piece guarded as a whole where the window's edge can cut (its columns come in whole
pieces: the op's verifier). A second `bar.warp.sync` keeps the next staged store of the warp from overwriting the slot
before every lane has read it. With the slot's granule swizzle (`#warp.swizzled`), columns 32j
apart are granules 2j apart: the same XOR of the offset by 32j (the phase never touches bits the
lane's own granule does not).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tilemma.compiler.layouts import fragments
from tilemma.dialects import warp
from tilemma.passes.warp_to_ptx import fragment_io as fio
from tilemma.passes.warp_to_ptx.fragment_io import window_of
from tilemma.passes.warp_to_ptx.shared import _shared_geometry, _shared_offset, _swizzle
from tilemma.passes.warp_to_ptx.state import LoweringState, _bank_of, _finish, _layout, all_reg, reg, regs


@dataclass
class LowerStoreStaged(RewritePattern):
    """`warp.store_staged` (see the module)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.StoreStagedOp, rewriter: PatternRewriter) -> None:
        values = [regs(v) for v in op.values]
        buf, slot, ptr, idx = reg(op.buffer), reg(op.slot), reg(op.ref), all_reg(op.indices)
        if any(v is None for v in values) or None in (buf, slot, ptr) or idx is None:
            return
        frag = op.values[0].type
        buffer = op.buffer.type
        assert isinstance(frag, warp.FragType) and isinstance(buffer, MemRefType)
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        lane = kernel.lane
        lay = _layout(frag)
        lin = fragments.linear_form(lay)
        bank = _bank_of(frag)
        suffix = fio._word_suffix(bank)
        swizzle, mult, fold = _swizzle(buffer)
        bits, row_bytes, slot_bytes = _shared_geometry(buffer)
        base = e.reg("b32")
        e.emit("mad.lo.u32", base, slot, slot_bytes, buf)
        # the lane's writes: value pairs (v, v + 1) of one row at columns c, c + 1
        row = e.lane_linear(lane, lin.row_w, "0")
        col = e.lane_linear(lane, lin.col_w, "0")
        starts = [v for v in range(0, lay.nvals, 2)
                  if lin.row_off[v] == lin.row_off[v + 1] and lin.col_off[v + 1] == lin.col_off[v] + 1]
        if len(starts) * 2 != lay.nvals or any(lin.col_off[v] for v in starts):
            raise AssertionError(f"warp.store_staged: {frag} is not pairs of columns 2t, 2t + 1")
        col_bytes = e.reg("b32")
        e.emit("shl.b32", col_bytes, col, (bits // 8).bit_length() - 1)
        written = {}
        for v in starts:
            rows = lin.row_off[v]
            if rows not in written:
                at = e.reg("b32")
                e.emit("add.u32", at, row, rows)
                offset = _shared_offset(e, at, row_bytes, col_bytes, swizzle, mult, fold)
                e.emit("add.u32", offset, offset, base)
                written[rows] = offset
        per = lay.elems_per_reg  # 1: a pair is two registers (st.shared.v2); 2: one (16-bit halves)
        for j, frag_regs in enumerate(values):
            for v in starts:
                addr = written[lin.row_off[v]]
                if j:
                    moved = e.reg("b32")
                    e.emit("xor.b32", moved, addr, 8 * j * bits // 8)
                    addr = moved
                if per == 2:
                    e.emit("st.shared.b32", f"[{addr}]", frag_regs[v // 2])
                else:
                    e.emit(f"st.shared.v2.{suffix}", f"[{addr}]", f"{{{frag_regs[v]}, {frag_regs[v + 1]}}}")
        e.emit("bar.warp.sync", "-1")
        # the lane's reads and stores: row L / 8 + 4i, 16 bytes at L % 8
        per_row = row_bytes // 16
        read_row, granule = e.reg("b32"), e.reg("b32")
        e.emit("shr.u32", read_row, lane, per_row.bit_length() - 1)
        e.emit("and.b32", granule, lane, per_row - 1)
        e.emit("shl.b32", granule, granule, 4)
        rows_per_read = 32 // per_row
        batch, row0, col0 = idx
        g_row, g_col = e.reg("b32"), e.reg("b32")
        e.emit("add.u32", g_row, read_row, e.in_register(row0))
        e.emit("shr.u32", g_col, granule, (bits // 8).bit_length() - 1)
        e.emit("add.u32", g_col, g_col, e.in_register(col0))
        access = fio.open_access(e, window_of(op, kernel.memrefs.get(ptr)), ptr, batch, g_row, g_col)
        words = 4  # 16 bytes: four registers of one 32-bit element, or of two 16-bit ones
        for i in range(warp.STAGED_ROWS // rows_per_read):
            at = e.reg("b32")
            e.emit("add.u32", at, read_row, rows_per_read * i)
            offset = _shared_offset(e, at, row_bytes, granule, swizzle, mult, fold)
            e.emit("add.u32", offset, offset, base)
            out = e.reg_list(bank if per == 1 else "b32", words)
            group = "{" + ", ".join(out) + "}"
            e.emit(f"ld.shared.v{words}.{suffix}", group, f"[{offset}]")
            e.emit(f"st.global.v{words}.{suffix}", access.place(e, rows_per_read * i, 0).operand(bits), group,
                   guard=access.pred(e, rows_per_read * i, 0))
        e.emit("bar.warp.sync", "-1")
        _finish(op, rewriter, e)
