"""`warp-unroll-sparse`: unrolls by P + 1 each loop whose warpgroup mmas that read registers (a
sparse one's metadata, an A from registers) leave P stages' products running, so that no stage's
loads overwrite the registers a running mma reads.

The tensor cores read a `wgmma.mma_async.sp`'s metadata registers (sp-meta), and the A registers
of one that takes A from registers, until its products retire (`wgmma.wait_group`). In a loop the
next iteration's `warp.load_meta_shared` (or A's `warp.ldmatrix`) writes the same registers while
the mma it fed still runs: an H200 computed wrong products so (the sparse metadata; 8-bit A
registers likewise, every D word wrong at 4096^3), and where ptxas sees it, it serializes every
wgmma of the kernel (C7513). With the body copied P + 1 times
each copy loads into its own registers, and writes them again only after P + 1 later stages
committed, whose waits (each leaving P running) retired the mma that read them.

The unrolled loop's last products retire as it ends (`warp.wgmma_wait`). The iterations past the
last whole group (fewer than P + 1, known only at launch where K is) stay in the old loop after
it, whose sparse mmas keep nothing running (`pending` 0), so no back edge reaches a running mma
there either. Loops that already hold P + 1 sparse mmas are left alone (`meta_overwritten`), so
the pass is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tilemma.dialects import warp
from tilemma.dialects.warp import FragType, Operand
from tilemma.passes.warp.loop_clone import unroll


def _sparse_running(loop: scf.ForOp) -> list[warp.WgmmaOp]:
    """The `warp.wgmma`s of `loop`'s own body that read registers (sparse, or A from registers)
    and leave products running."""
    return [o for o in loop.body.block.ops
            if isinstance(o, warp.WgmmaOp) and (o.sparse or o.a_frags) and o.pending.value.data]


def _copies(running: list[warp.WgmmaOp]) -> int:
    """Copies of the body that keep each running mma's metadata registers: P + 1."""
    return 1 + max(o.pending.value.data for o in running)


def meta_overwritten(loop: scf.ForOp) -> bool:
    """Whether the next iteration of `loop` may load metadata into the registers of a sparse mma
    that still runs: its body holds fewer sparse mmas than `_copies`."""
    running = _sparse_running(loop)
    return bool(running) and len(running) < _copies(running)


@dataclass(frozen=True)
class WarpUnrollSparse(ModulePass):
    """Unroll every loop whose sparse `warp.wgmma`s leave P stages running by P + 1 (see the module)."""

    name = "warp-unroll-sparse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for loop in [o for o in op.walk() if isinstance(o, scf.ForOp) and meta_overwritten(o)]:
            main, rest = unroll(loop, _copies(_sparse_running(loop)))
            if main is not None:
                _retire_after(main)
            if rest is not None:  # the iterations left over: one after another
                for mma in _sparse_running(rest):
                    mma.pending = IntegerAttr(0, i64)


def _retire_after(main: scf.ForOp) -> None:
    """The unrolled loop's last products retire as it ends (`warp.wgmma_wait` on its accumulators,
    unless its users are such a wait already): ptxas serializes every wgmma of a kernel whose loop
    exits with a sparse mma running into more of them (C7513), and the iterations left over copy
    the carried accumulators into their loop's registers, which must not read registers a running
    mma still writes."""
    accs = [r for r in main.results if isinstance(r.type, FragType) and r.type.role == Operand.ACC]
    if not accs or all(isinstance(u.operation, warp.WgmmaWaitOp) for r in accs for u in r.uses):
        return
    wait = warp.WgmmaWaitOp(accs)
    Rewriter.insert_op(wait, InsertPoint.after(main))
    for old, new in zip(accs, wait.results):
        old.replace_uses_with_if(new, lambda use: use.operation is not wait)
