"""`warp-swizzle-shared`: XOR-swizzles the 16-byte granules of each shared buffer, for the
copies that write it and the ldmatrix and `warp.load_shared` reads alike.

Row-major rows of 64 or more bytes put the same column of 8 consecutive rows in the same banks,
so an `ldmatrix` (8 row addresses per phase) is serialized up to 8 ways. Storing granule g of row
r at g ^ ((r / rows-per-128-byte-line) mod period) spreads them over 8 distinct bank groups (as
MLIR's nvgpu-optimize-shared-memory and Triton's swizzled shared layouts). The layout is
`warp.swizzle_granule`; it is marked on every op that addresses the buffer, never on some only.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, UnitAttr
from xdsl.passes import ModulePass

from tilemma.dialects import tile, warp
from tilemma.dialects.tile import element_name


def swizzles(ref: MemRefType) -> bool:
    """Whether a stages x rows x cols buffer has rows the swizzle applies to (a power of two of
    at least 32 bytes: the XOR stays inside the row)."""
    row_bytes = ref.get_shape()[-1] * tile.element_bits(element_name(ref.element_type)) // 8
    return row_bytes >= 32 and row_bytes & (row_bytes - 1) == 0


@dataclass(frozen=True)
class SwizzleShared(ModulePass):
    name = "warp-swizzle-shared"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for alloc in [o for o in op.walk() if isinstance(o, memref.AllocOp)]:
            ref = alloc.memref.type
            if not warp.is_shared(ref) or not swizzles(ref):  # type: ignore[arg-type]
                continue
            users = [use.operation for use in alloc.memref.uses]
            if not all(isinstance(u, (warp.CopyAsyncOp, warp.LdMatrixOp, warp.LoadSharedOp)) for u in users):
                continue  # an access that does not know the swizzle: keep the plain layout
            for u in users:
                u.swizzle = UnitAttr()  # type: ignore[union-attr]
