"""`warp-pipeline`: software-pipelines a staged K loop, so the copies run S - 1 stages ahead.

A loop body splits in two stages (as in MLIR's `scf::pipelineForLoop` and Triton's schedule +
expander): stage 0 fills the ring (the `warp.copy_async`s, in the `scf.if` that skips them past
K, a transposing fill's `warp.fill_load` and `warp.fill_store`, the `warp.async_commit`, and the
index arithmetic only they use); stage 1 is everything else
(wait, barrier, reads, mmas). With a distance D = S - 1 (the ring's stages, `#warp.schedule`)
the loop becomes:

- a prologue: stage 0 of iterations 0 .. D-1 (guards that fold to false drop their copies; the
  commits stay, so every iteration commits one group, possibly empty, and waits count alike);
- the kernel loop over the iterations that have a successor: stage 0 of iteration kt + D around
  stage 1 of iteration kt, in the body's order, except that the copies and the commit go right
  after stage 1's barrier: they refill the slot iteration kt - 1 read, which every thread has
  left once it passes that barrier;
- a transposing fill's stores (`warp.fill_store`) one iteration behind its loads where the ring
  has the room (D >= 2): iteration kt stores, right after its barrier, the words iteration kt - 1
  loaded (stage kt + D - 1, a loop-carried `!warp.staged` value), so no thread waits for its
  loads before its mmas, and the shared stores run under them; the last prologue iteration's
  words are the first carried value. (That stage's slot was last read in iteration kt - 2, its
  readers wait at the barrier of iteration kt + D - 2 >= kt. With D = 1 the stores stay with
  their loads.)
- the last iteration peeled, its stage 1 only (its stage 0 would fill stages past K);
- `warp.async_wait {pending = 0}` after it: nothing in flight when the CTA ends.

Each wait's `pending` becomes the number of groups committed after the one it waits for: D - 1
(it runs before its iteration's commit). Generic over the body: it knows the copies, commits,
waits and the barrier, not GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tilemma.dialects import warp
from tilemma.dialects.schedule import ScheduleAttr
from tilemma.passes.errors import LoweringError
from tilemma.passes.warp.loop_clone import Cloner, const_before, constant_value, hoist_constants, insert_before
from tilemma.passes.warp.loop_stages import fill_ops, is_pure, operand_chain, wgmma_pending
from tilemma.passes.warp.stage_shared import k_loop


def _set_pending(ops, pending: int) -> None:
    for op in ops:
        if isinstance(op, warp.AsyncWaitOp):
            op.pending = IntegerAttr(pending, i64)


def pipeline(loop: scf.ForOp, distance: int) -> None:
    """Pipeline `loop` (lower bound 0, step 1, at least one iteration: a constant trip count, or
    one known at launch, which the launch guarantees is at least 1) at `distance` iterations."""
    lb, ub, step = (constant_value(v) for v in (loop.lb, loop.ub, loop.step))
    if lb != 0 or step != 1 or (ub is not None and ub < 1):
        raise LoweringError(loop, "warp-pipeline: expected a loop from 0 with step 1 and at least one iteration")
    hoist_constants(loop)
    body = loop.body.block
    kt = body.args[0]
    fill = fill_ops(body)
    # a fill's stores, one iteration behind its loads (the module docstring), and what they need
    late = [o for o in fill if isinstance(o, warp.FillStoreOp)] if distance >= 2 else []
    late_chain = operand_chain(late, [o for o in fill if is_pure(o)])
    consume = [o for o in body.ops if o not in fill and not isinstance(o, scf.YieldOp)]
    yield_op = body.last_op
    assert isinstance(yield_op, scf.YieldOp)

    prologue = Cloner()
    for p in range(distance):
        prologue.map[kt] = prologue.const(p)
        prologue.clone_all([o for o in fill if o not in late] if p == distance - 1 else fill)
    insert_before(loop, prologue.ops)
    carried_in = [prologue.value(s.value) for s in late]

    results = list(loop.iter_args)
    last_kt = None if ub is not None else arith.SubiOp(loop.ub, const_before(loop, 1))
    if last_kt is not None:
        insert_before(loop, [last_kt])
    if ub is None or ub > 1:
        new_body = Block(arg_types=[a.type for a in body.args] + [s.value.type for s in late])
        inner = Cloner(dict(zip(body.args, new_body.args)))
        nkt = new_body.args[0]
        carried = new_body.args[len(body.args):]
        shift = arith.AddiOp(nkt, const_before(loop, distance))  # the iteration stage 0 fills
        deferred: list[Operation] = []  # the copies and commit: after the iteration's barrier

        def fill_with(op: Operation) -> None:
            if shift not in inner.ops:
                inner.ops.append(shift)
            inner.map[kt] = shift.result
            inner.clone(op)
            inner.map[kt] = nkt

        def store_late() -> None:
            """The stores of the words iteration nkt - 1 loaded: stage nkt + distance - 1."""
            behind = arith.AddiOp(nkt, const_before(loop, distance - 1))
            inner.ops.append(behind)
            stores = Cloner({**inner.map, kt: behind.result, **{s.value: c for s, c in zip(late, carried)}})
            stores.clone_all(late_chain + late)
            inner.ops.extend(stores.ops)

        for op in body.ops:
            if op in late:
                continue
            if op in fill and not is_pure(op):
                deferred.append(op)
            elif op in fill:
                fill_with(op)
            elif isinstance(op, scf.YieldOp):
                inner.ops.append(scf.YieldOp(*(inner.value(v) for v in op.operands),
                                             *(inner.value(s.value) for s in late)))
            else:
                inner.clone(op)
                if isinstance(op, gpu.BarrierOp) and deferred:
                    if late:
                        store_late()
                    for d in deferred:
                        fill_with(d)
                    deferred = []
        if deferred:
            raise LoweringError(loop, "warp-pipeline: the loop's consuming stage has no barrier to refill the ring after")
        _set_pending(inner.ops, distance - 1)
        new_body.add_ops(inner.ops)
        end = const_before(loop, ub - 1) if last_kt is None else last_kt.result
        kernel_loop = scf.ForOp(loop.lb, end, loop.step, [*loop.iter_args, *carried_in], new_body)
        Rewriter.insert_op(kernel_loop, InsertPoint.before(loop))
        results = list(kernel_loop.results)[:len(loop.iter_args)]

    last = Cloner(dict(zip(body.args[1:], results)))
    last.map[kt] = last.const(ub - 1) if last_kt is None else last_kt.result
    last.clone_all(consume)
    _set_pending(last.ops, distance - 1)
    last.ops.append(warp.AsyncWaitOp(0))
    insert_before(loop, last.ops)
    for old, new in zip(loop.results, yield_op.operands):
        old.replace_all_uses_with(last.value(new))
    Rewriter.erase_op(loop, safe_erase=False)


@dataclass(frozen=True)
class WarpPipeline(ModulePass):
    """Pipeline the staged K loop of every kernel whose `#warp.schedule` has stages, S - 1 deep
    (S - 2 where a stage's warpgroup mmas run on into the next: their `pending`)."""

    name = "warp-pipeline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            attr = kernel.attributes.get("warp.schedule")
            if not (isinstance(attr, ScheduleAttr) and attr.schedule.stages and "warp.grid" in kernel.attributes):
                continue
            if attr.schedule.producers:  # a producer warpgroup fills the ring (`warp-specialize`)
                continue
            loop = k_loop(kernel)
            if not any(isinstance(o, warp.CopyAsyncOp | warp.FillLoadOp) for o in loop.walk()):
                raise LoweringError(loop, "run warp-stage-shared before warp-pipeline (the K loop has no copies)")
            # a stage whose warpgroup mmas still run is refilled a stage later (`warp.wgmma` pending)
            pipeline(loop, attr.schedule.stages - 1 - wgmma_pending(loop))
