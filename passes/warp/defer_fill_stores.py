"""`warp-defer-fill-stores`: a transposing fill's shared stores move to the next barrier.

`warp-stage-shared` writes a fill's `warp.fill_load` and `warp.fill_store` together, and
`warp-pipeline` issues them S - 1 stages ahead, after a stage's barrier. The store needs the
loads' words, so where it stays every thread waits out the global latency there. This pass moves
each `warp.fill_store` to just before the first `gpu.barrier` after it in its block (the block's
end where none follows: the loop's next iteration starts at one), so the loads are in flight
while the stage's mmas run, as the words of CUTLASS's register-staged fills are. That is still
correct: the store writes the slot its iteration's barrier freed (nobody reads it until the
barrier after the store), and its readers come after that barrier.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import gpu
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from tilemma.dialects import warp


def defer(store: warp.FillStoreOp) -> None:
    """Move `store` before the next barrier of its block, or before the block's terminator."""
    block = store.parent_block()
    assert block is not None
    at: Operation | None = store.next_op
    while at is not None and not isinstance(at, gpu.BarrierOp) and at is not block.last_op:
        at = at.next_op
    if at is None or at is store.next_op:
        return
    store.detach()
    block.insert_op_before(store, at)


@dataclass(frozen=True)
class WarpDeferFillStores(ModulePass):
    """Move every `warp.fill_store` to the next barrier after it (see the module docstring)."""

    name = "warp-defer-fill-stores"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for store in [o for o in op.walk() if isinstance(o, warp.FillStoreOp)]:
            defer(store)
