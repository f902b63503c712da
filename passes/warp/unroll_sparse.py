"""`warp-unroll-sparse`: unrolls by P + 1 each loop whose sparse warpgroup mmas leave P stages'
products running, so that no stage's metadata loads overwrite the registers a running mma reads.

The tensor cores read a `wgmma.mma_async.sp`'s metadata registers (sp-meta) until its products
retire (`wgmma.wait_group`). In a loop the next iteration's `warp.load_meta_shared` writes the same
registers while the mma it fed still runs: an H200 computed wrong products so, and where ptxas
sees it, it serializes every wgmma of the kernel (C7513). With the body copied P + 1 times
each copy loads into its own registers, and writes them again only after P + 1 later stages
committed, whose waits (each leaving P running) retired the mma that read them.

The iterations past the last whole group (fewer than P + 1, known only at launch where K is) stay
in the old loop after the unrolled one, which starts once the unrolled loop's products retired
and whose sparse mmas keep nothing running (`pending` 0), so no back edge reaches a running mma
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
    """The sparse `warp.wgmma`s of `loop`'s own body that leave products running."""
    return [o for o in loop.body.block.ops if isinstance(o, warp.WgmmaOp) and o.sparse and o.pending.value.data]


def meta_overwritten(loop: scf.ForOp) -> bool:
    """Whether the next iteration of `loop` may load metadata into the registers of a sparse mma
    that still runs: its body holds fewer sparse mmas than one leaves running, plus one."""
    running = _sparse_running(loop)
    return bool(running) and len(running) < 1 + max(o.pending.value.data for o in running)


@dataclass(frozen=True)
class WarpUnrollSparse(ModulePass):
    """Unroll every loop whose sparse `warp.wgmma`s leave P stages running by P + 1 (see the module)."""

    name = "warp-unroll-sparse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for loop in [o for o in op.walk() if isinstance(o, scf.ForOp) and meta_overwritten(o)]:
            main, rest = unroll(loop, 1 + max(o.pending.value.data for o in _sparse_running(loop)))
            if rest is not None:
                _one_after_another(rest, main is not None)


def _one_after_another(rest: scf.ForOp, after_unrolled: bool) -> None:
    """The left-over iterations: their sparse mmas keep nothing running, and the unrolled loop's
    last products retire before they start (`warp.wgmma_wait`): a loop's carried accumulators are
    copied into its own registers, which must not read registers a running mma still writes
    (ptxas would serialize every wgmma of the kernel, C7513)."""
    for mma in _sparse_running(rest):
        mma.pending = IntegerAttr(0, i64)
    if not after_unrolled:
        return
    carried = list(rest.iter_args)
    accs = [i for i, v in enumerate(carried) if isinstance(v.type, FragType) and v.type.role == Operand.ACC]
    wait = warp.WgmmaWaitOp([carried[i] for i in accs])
    Rewriter.insert_op(wait, InsertPoint.before(rest))
    for i, out in zip(accs, wait.results):
        carried[i] = out
    rest.operands = [rest.lb, rest.ub, rest.step, *carried]
