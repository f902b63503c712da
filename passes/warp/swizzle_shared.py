"""`warp-swizzle-shared`: XOR-swizzles the 16-byte granules of each shared buffer by giving
its type the `#warp.swizzled<mult>` layout, which the copies that write it and the ldmatrix and
`warp.load_shared` reads see alike.

Row-major rows of 64 or more bytes put the same column of 8 consecutive rows in the same banks,
so an `ldmatrix` (8 row addresses per phase) is serialized up to 8 ways. Storing granule g of row
r at g ^ ((r / rows-per-128-byte-line) mod period) spreads them over 8 distinct bank groups (as
MLIR's nvgpu-optimize-shared-memory and Triton's swizzled shared layouts). The layout is
`warp.swizzle_granule`; it is written on the `memref.alloc`'s result type, so every op that
addresses the buffer (its copies, fills, reads and `warp.round_stage`) has it (a buffer with another user, which would not know it, stays plain).

A buffer read by `warp.load_shared` may need a phase multiplier other than 1: 8-byte
loads are served a half-warp at a time, and with the plain XOR the 16 lanes of an f64 fragment
(A: 4 rows x 4 K columns; a row-major B: 4 k rows x 64 bytes) fall in one half of the banks:
4 wavefronts where 2 would do (ncu on an H100: 3 a load on average before, 2 after). The
multiplier is chosen by counting the wavefronts of every reader's pattern (`read_wavefronts`)
for each odd multiplier; any odd one keeps the ldmatrix and copy patterns conflict-free, and 1
(the flag) wins ties.

A buffer read by byte-pair `ldmatrix .trans` (an 8-bit M-major A or N-major B) folds row bit 3 into bit 1
(`#warp.swizzled<1, fold>`): one of its 8x8 matrices is rows 4i and 4i + 1 of 16, which the plain
phase puts two to a bank group (2-way conflicts on every such read).

A buffer `warp.wgmma` reads keeps the plain XOR (no reader of its own weighs in): with its rows of
128 bytes and its stages on 1024-byte boundaries that is the hardware's 128-byte swizzle (with a
sparse A's 64-byte rows, the 64-byte one), the layout the instruction's descriptors name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, NoneAttr
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tilemma.compiler.layouts import fragments
from tilemma.compiler.layouts.mma_layouts import instruction_layouts
from tilemma.dialects import tile, warp
from tilemma.dialects.tile import element_name

MULTIPLIERS = (1, 3, 5, 7)  # odd: bijections of the 8 phases


def wavefronts(byte_addresses: np.ndarray, size: int) -> int:
    """Shared-memory wavefronts a warp's `size`-byte loads (addresses in lane order) need: the
    warp is served in phases of 128 bytes of lanes (all 32 lanes for 4-byte loads, half-warps
    for 8-byte, quarter-warps for 16-byte ones), each taking as many wavefronts as the most
    distinct 4-byte words one of the 32 banks must deliver to it. (Counting the whole warp at
    once undercounts: an f64 A fragment read with the plain XOR took 4 wavefronts a load on an
    H100 where that count said 2; this model gives ncu's figure.)"""
    lanes = 128 // max(size, 4)
    total = 0
    for phase in range(0, len(byte_addresses), lanes):
        a = byte_addresses[phase:phase + lanes]
        words = np.unique((a[:, None] // 4 + np.arange(max(1, size // 4))[None, :]).ravel())
        total += int(np.bincount(words % 32, minlength=32).max())
    return total


def read_wavefronts(op: warp.LoadSharedOp, mult: int | None) -> int:
    """Wavefronts of all the ld.shared of one `warp.load_shared` (swizzled with multiplier
    `mult`, or plain for None), its dynamic indices taken as 0: the distribution pass makes
    them multiples of the instruction tile, which keeps the pattern up to a permutation."""
    frag, ref = op.result.type, op.ref.type
    assert isinstance(frag, warp.FragType) and isinstance(ref, MemRefType)
    lays = instruction_layouts(frag.variant)
    rows, cols = fragments.coords(lays.a if frag.role == warp.Operand.A else lays.b)
    if op.transposed is not None:
        rows, cols = cols, rows
    r0, c0 = op.offset_values()
    esz = tile.element_bits(element_name(ref.element_type)) // 8
    row_bytes = ref.get_shape()[-1] * esz
    total = 0
    for v in range(rows.shape[1]):
        r, cb = rows[:, v] + r0, (cols[:, v] + c0) * esz
        g = cb // 16 if mult is None else warp.swizzle_granule(r, cb // 16, row_bytes, mult)
        total += wavefronts(r * row_bytes + g * 16 + cb % 16, esz)
    return total


@dataclass(frozen=True)
class SwizzleShared(ModulePass):
    name = "warp-swizzle-shared"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for alloc in [o for o in op.walk() if isinstance(o, memref.AllocOp)]:
            ref = alloc.memref.type
            if not isinstance(ref, MemRefType) or not warp.is_shared(ref) or not isinstance(ref.layout, NoneAttr):
                continue  # a layout given already is kept
            users = [use.operation for use in alloc.memref.uses]
            if not all(isinstance(u, (warp.CopyAsyncOp, warp.CopyTmaOp, warp.FillStoreOp, warp.RoundStageOp, warp.TransposeStageOp, warp.LdMatrixOp,
                                      warp.LoadSharedOp, warp.WgmmaOp))
                       for u in users):
                continue  # an access that does not know the swizzle (metadata stages): keep the plain layout
            if not warp.swizzles(ref):
                continue
            readers = [u for u in users if isinstance(u, warp.LoadSharedOp)]
            mult = min(MULTIPLIERS, key=lambda m: sum(read_wavefronts(u, m) for u in readers))
            fold = any(isinstance(u, warp.LdMatrixOp) and u.byte_pairs for u in users)
            swizzled = MemRefType(ref.element_type, ref.shape, warp.SwizzledLayoutAttr(mult, fold), ref.memory_space)
            Rewriter.replace_value_with_new_type(alloc.memref, swizzled)
