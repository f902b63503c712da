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


@dataclass(frozen=True)
class _Slot:
    """The warp's slot of the staging buffer: its base address and what addressing it needs."""

    base: str  # .b32 shared address of the slot
    row_bytes: int
    bits: int  # of an element
    swizzle: bool
    mult: int
    fold: bool

    def offset(self, e: fio.Emitter, row: str, col_bytes: str) -> str:
        """The shared address of (row, byte column) of the slot, swizzled as the buffer's type says."""
        offset = _shared_offset(e, row, self.row_bytes, col_bytes, self.swizzle, self.mult, self.fold)
        e.emit("add.u32", offset, offset, self.base)
        return offset


def _write(e: fio.Emitter, slot: _Slot, lane: str, lay, values: list, suffix: str) -> None:
    """Each lane's values of the fragments into the slot: a pair of columns of rows g and g + 8 a
    fragment, fragment j 8j columns further (an XOR of the address: the swizzle moves whole granules)."""
    lin = fragments.linear_form(lay)
    row = e.lane_linear(lane, lin.row_w, "0")
    col = e.lane_linear(lane, lin.col_w, "0")
    starts = [v for v in range(0, lay.nvals, 2)
              if lin.row_off[v] == lin.row_off[v + 1] and lin.col_off[v + 1] == lin.col_off[v] + 1]
    if len(starts) * 2 != lay.nvals or any(lin.col_off[v] for v in starts):
        raise AssertionError(f"warp.store_staged: {lay} is not pairs of columns 2t, 2t + 1")
    col_bytes = e.reg("b32")
    e.emit("shl.b32", col_bytes, col, (slot.bits // 8).bit_length() - 1)
    at_row = {}
    for v in starts:
        if lin.row_off[v] not in at_row:
            r = e.reg("b32")
            e.emit("add.u32", r, row, lin.row_off[v])
            at_row[lin.row_off[v]] = slot.offset(e, r, col_bytes)
    for j, frag_regs in enumerate(values):
        for v in starts:
            addr = at_row[lin.row_off[v]]
            if j:
                moved = e.reg("b32")
                e.emit("xor.b32", moved, addr, 8 * j * slot.bits // 8)
                addr = moved
            if lay.elems_per_reg == 2:  # 16-bit halves: the pair is one register
                e.emit("st.shared.b32", f"[{addr}]", frag_regs[v // 2])
            else:
                e.emit(f"st.shared.v2.{suffix}", f"[{addr}]", f"{{{frag_regs[v]}, {frag_regs[v + 1]}}}")


def _store_rows(e: fio.Emitter, slot: _Slot, lane: str, access_at, bank: str, suffix: str) -> None:
    """Each lane's 16 bytes of rows L / 8 + 4i of the slot, read back and stored whole (guarded as a
    piece where the window's edge can cut); `access_at(row, col)` opens the window's access there."""
    per_row = slot.row_bytes // 16
    read_row, granule = e.reg("b32"), e.reg("b32")
    e.emit("shr.u32", read_row, lane, per_row.bit_length() - 1)
    e.emit("and.b32", granule, lane, per_row - 1)
    e.emit("shl.b32", granule, granule, 4)
    col = e.reg("b32")
    e.emit("shr.u32", col, granule, (slot.bits // 8).bit_length() - 1)
    access = access_at(read_row, col)
    rows_per_read = 32 // per_row
    for i in range(warp.STAGED_ROWS // rows_per_read):
        r = e.reg("b32")
        e.emit("add.u32", r, read_row, rows_per_read * i)
        offset = slot.offset(e, r, granule)
        out = e.reg_list(bank, 4)  # 16 bytes: four registers of one 32-bit element, or of two 16-bit ones
        group = "{" + ", ".join(out) + "}"
        e.emit(f"ld.shared.v4.{suffix}", group, f"[{offset}]")
        e.emit(f"st.global.v4.{suffix}", access.place(e, rows_per_read * i, 0).operand(slot.bits), group,
               guard=access.pred(e, rows_per_read * i, 0))


@dataclass
class LowerStoreStaged(RewritePattern):
    """`warp.store_staged` (see the module)."""

    state: LoweringState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: warp.StoreStagedOp, rewriter: PatternRewriter) -> None:
        values = [regs(v) for v in op.values]
        buf, slot_index, ptr, idx = reg(op.buffer), reg(op.slot), reg(op.ref), all_reg(op.indices)
        if any(v is None for v in values) or None in (buf, slot_index, ptr) or idx is None:
            return
        frag = op.values[0].type
        buffer = op.buffer.type
        assert isinstance(frag, warp.FragType) and isinstance(buffer, MemRefType)
        kernel = self.state.kernel(op)
        e = fio.Emitter(kernel.regs)
        lay = _layout(frag)
        bank = _bank_of(frag) if lay.elems_per_reg == 1 else "b32"
        suffix = fio._word_suffix(bank)
        bits, row_bytes, slot_bytes = _shared_geometry(buffer)
        base = e.reg("b32")
        e.emit("mad.lo.u32", base, slot_index, slot_bytes, buf)
        slot = _Slot(base, row_bytes, bits, *_swizzle(buffer))
        _write(e, slot, kernel.lane, lay, values, suffix)
        e.emit("bar.warp.sync", "-1")
        batch, row0, col0 = idx

        def access_at(row: str, col: str) -> fio.Access:
            g_row, g_col = e.reg("b32"), e.reg("b32")
            e.emit("add.u32", g_row, row, e.in_register(row0))
            e.emit("add.u32", g_col, col, e.in_register(col0))
            return fio.open_access(e, window_of(op, kernel.memrefs.get(ptr)), ptr, batch, g_row, g_col)

        _store_rows(e, slot, kernel.lane, access_at, bank, suffix)
        e.emit("bar.warp.sync", "-1")  # before the warp's next staged store writes the slot again
        _finish(op, rewriter, e)
