"""The two stages of a staged K loop's body (as `warp-stage-shared` writes it), which the passes that
reorganize the loop - `warp-pipeline` (copies ahead of the mmas) and `warp-specialize` (copies by a
producer warpgroup) - both split it into: stage 0 fills the ring (the copies, commits and the index
arithmetic only they use), stage 1 consumes it (wait, barrier, reads, mmas)."""

from __future__ import annotations

from xdsl.dialects import arith, scf
from xdsl.ir import Block, Operation

from tilemma.dialects import warp
from tilemma.passes.errors import LoweringError


def fill_ops(body: Block) -> list[Operation]:
    """Stage 0 of a staged loop body: the commits, the ops that copy (or hold copies), and the
    ops only they use."""
    seeds = [o for o in body.ops if isinstance(o, warp.AsyncCommitOp | warp.CopyAsyncOp | warp.FillLoadOp | warp.FillStoreOp)
             or (isinstance(o, scf.IfOp) and any(isinstance(x, warp.CopyAsyncOp) for x in o.walk()))]
    stage0 = set(seeds)
    for op in reversed(list(body.ops)):
        if op in stage0 or isinstance(op, scf.YieldOp):
            continue
        users = {u.operation for r in op.results for u in r.uses}
        # a user inside a stage-0 op's region counts as that op
        owners = set()
        for u in users:
            while u.parent_op() is not None and u.parent_block() is not body:
                u = u.parent_op()
            owners.add(u)
        if owners and owners <= stage0:
            stage0.add(op)
    for op in body.ops:
        if op not in stage0 and any(isinstance(x.owner, Operation) and x.owner in stage0 for x in op.operands):
            raise LoweringError(op, "an op of the staged loop's consuming stage uses a value of its filling stage")
    return [o for o in body.ops if o in stage0]


def wgmma_pending(loop: scf.ForOp) -> int:
    """Stages of products the loop's `warp.wgmma`s leave running (their `pending`; 0 without)."""
    return max((o.pending.value.data for o in loop.walk() if isinstance(o, warp.WgmmaOp)), default=0)


def is_pure(op: Operation) -> bool:
    """Index arithmetic: placed anywhere before its users."""
    return isinstance(op, (arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.DivUIOp, arith.RemUIOp, arith.MinUIOp,
                           arith.CmpiOp, arith.ConstantOp))


def operand_chain(ops: list[Operation], within: list[Operation]) -> list[Operation]:
    """The ops of `within` (in their order) that compute the operands of `ops`, and of the ops in
    their regions."""
    need, work = set(), [v.owner for o in ops for x in o.walk() for v in x.operands]
    while work:
        o = work.pop()
        if isinstance(o, Operation) and o in within and o not in need:
            need.add(o)
            work.extend(v.owner for v in o.operands)
    return [o for o in within if o in need]
