"""How an accumulator is read again inside the warp: by rows (softmax's max and sum) and as the
next mma's A operand (attention's P.V), both derived from the fragment table, never assumed.

Rows: a lane of an m16n8 accumulator holds values of two rows (g and g + 8), and the four lanes
of a quad (same g) hold the rest of those rows. `row_slots` says which row slot each value is
in and which lane bits to exchange (butterfly shuffles) to reduce a row across the warp.

Chaining: packed to 16 bits, the accumulators of two adjacent n8 tiles hold exactly the A
fragment of one k16 slice of m16n8k16 (c0,c1 at (g, 2t..2t+1) and c2,c3 at (g + 8, ...) are a0..a3,
the next tile's are a4..a7). `lhs_registers` proves such a correspondence for the given
layouts - every (lane, value) of A is the same element, in the same register slot, as one
accumulator value - and returns it, or says why there is none (fp8's A packs four k a register,
which needs a byte permute).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tilemma.compiler.layouts.fragments import LANES, FragmentLayout, coords


@dataclass(frozen=True)
class RowSlots:
    """The rows of an accumulator a lane holds: value v is in row slot `slot[v]` (slot s is the
    lane's s-th row, the same offset from the lane's first row in every lane); `masks` are the
    lane xor masks whose butterfly exchanges reach every other lane holding the same rows."""

    slot: tuple[int, ...]
    count: int
    masks: tuple[int, ...]


@functools.cache
def row_slots(lay: FragmentLayout) -> RowSlots:
    """The row slots of accumulator layout `lay` (ValueError where lanes do not split rows
    evenly, e.g. a quad-pair layout)."""
    if lay.operand != "c" or lay.copies != 1:
        raise ValueError(f"{lay}: row reductions read warp-view accumulators that hold each element once")
    rows, _ = coords(lay)
    first = sorted(set(rows[0].tolist()))
    slot = tuple(first.index(r) for r in rows[0].tolist())
    for lane in range(LANES):
        own = sorted(set(rows[lane].tolist()))
        if [r - own[0] for r in own] != [r - first[0] for r in first] or \
                tuple(own.index(r) for r in rows[lane].tolist()) != slot:
            raise ValueError(f"{lay}: lane {lane} holds its rows in another pattern than lane 0")
    sharing = [lane for lane in range(LANES) if set(rows[lane].tolist()) == set(first)]
    masks = tuple(1 << b for b in range(5) if any(lane == 1 << b for lane in sharing))
    span = {0}
    for m in masks:
        span |= {x ^ m for x in span}
    if span != set(sharing):
        raise ValueError(f"{lay}: the lanes sharing a row ({sharing}) are not a butterfly group")
    return RowSlots(slot, len(first), masks)


def lhs_registers(accs: FragmentLayout, lhs: FragmentLayout) -> tuple[tuple[int, int], ...]:
    """For each register of the A fragment `lhs`, the (accumulator tile, register) holding the
    same elements in the same slots, the accumulator tiles being `lhs.cols // accs.cols`
    adjacent column tiles of (packed) layout `accs`. ValueError with the reason where no such
    register-for-register correspondence exists."""
    if accs.operand != "c" or lhs.operand != "a":
        raise ValueError("chaining reads an accumulator layout as an A layout")
    if accs.elem_bits != lhs.elem_bits or accs.reg_bits != lhs.reg_bits:
        raise ValueError(f"the accumulator holds {accs.elem_bits}-bit values, the A operand {lhs.elem_bits}-bit ones: "
                         f"cast the accumulator to the A operand's type first")
    if accs.rows != lhs.rows or lhs.cols % accs.cols:
        raise ValueError(f"{lhs.rows}x{lhs.cols} A fragments are not made of {accs.rows}x{accs.cols} accumulators")
    tiles = lhs.cols // accs.cols
    a_rows, a_cols = coords(lhs)
    c_rows, c_cols = coords(accs)
    per = lhs.elems_per_reg
    out = []
    for r in range(lhs.regs):
        found = None
        for t in range(tiles):
            for cr in range(accs.regs):
                same = all(
                    (a_rows[lane, r * per + s], a_cols[lane, r * per + s])
                    == (c_rows[lane, cr * per + s], c_cols[lane, cr * per + s] + t * accs.cols)
                    for lane in range(LANES) for s in range(per)
                )
                if same:
                    found = (t, cr)
                    break
            if found:
                break
        if found is None:
            raise ValueError(f"register {r} of the {lhs} fragment is no accumulator register of {accs}: "
                             f"its elements sit elsewhere (a byte permute would be needed)")
        out.append(found)
    return tuple(out)

