"""`warp-specialize`: splits a staged warpgroup K loop between a producer warpgroup and the
consumers, who meet at mbarriers instead of a CTA-wide barrier a stage (`#warp.schedule` producers).

The input is the loop `warp-stage-shared` writes (one iteration: copy stage kt, commit, wait, the
barrier, the warpgroups' mmas); `warp-pipeline` leaves these kernels alone. With S stages and
`warp.wgmma` leaving P stages' products running (its `pending`), the copies run
L = S - 1 - P stages ahead, as they do in the pipelined kernel, and the kernel becomes:

- two arrays of S mbarriers (`warp.mbarrier_init`, thread 0, then a CTA barrier): `full[s]` (the
  producers' arrivals: stage s has landed) and `empty[s]` (the consumers': their mmas no longer
  read it);
- the producer warpgroup (threads from the consumers' count on) loops over kt = 0 .. n + L - 1:
  for kt < n it waits for `empty[kt % S]`'s phase kt / S - 1 (parity kt / S + 1: the first S
  pass at once) and issues stage kt's copies (the loop's own `warp.copy_async`s, and a
  transposing fill's `warp.fill_load` and `warp.fill_store`, dealt to it by `warp-stage-shared`;
  the fill's stores are the generic proxy's, fenced with the copies below before the arrival;
  where the registers allow, `loads_ahead`, the fill's loads run a stage ahead of its stores:
  iteration kt loads stage kt + 1's words, carried into the next, and stores stage kt's);
  it commits a group every iteration, and from kt = L on waits until L
  groups remain (stage kt - L landed), rounds that stage where the loop does (`warp.round_stage`),
  fences for the async proxy and arrives at `full[(kt - L) % S]`; then it retires (`warp.retire`);
- the consumers loop over kt = 0 .. n - 1: wait for `full[kt % S]`'s phase kt / S, read and
  multiply the stage (the loop's own ops, their wait token replaced by the mbarrier's), and arrive
  at `empty` for the stage whose products the mma's own wait retired (kt - P).

No deadlock: the producer's wait at kt needs the consumers past stage kt - S + P, which needs
`full` of that stage, arrived at producer iteration kt - S + P + L = kt - 1.

With `copy = tma` (`_copy_by_tma`) the first producer thread expects stage kt's bytes at
`full[kt % S]` and issues its copies as `warp.copy_tma`s, which complete there as they land: the
producers loop over kt < n only, and `full` expects that one arrival, plus the 128 producers' where
a pre-compressed A's metadata stays on cp.async (each thread's `warp.async_arrive` after its copies:
they arrive as they land, no group and no wait; generic loads read them, so no proxy fence). With
`cluster = 2` B's copies are multicast, half issued by each CTA of the pair (`_roles_of`); the
consumers also arrive at the peer's `empty` (`warp.mbarrier_arrive_peers`, lane 0 of each warp: 8
arrivals more), after the loop for the stages still in flight too; `warp.cluster_sync` publishes
the barriers to the pair; and the producers, before they leave, wait for every stage's last
release (the tail), so that no peer arrives at the barriers of a CTA that has left.

With `persistent = P` (a TMA kernel) the grid becomes P CTAs (`warp.grid`), and each role loops
over the tiles t = pid, pid + P, ... below the original grid's T (`_per_tile`): the ops that derive
the tile's origin from the CTA's index are cloned into each role's tile loop, with t for it. The
ring runs on across tiles: the roles count stages from `base`, n a tile (a loop-carried value of
their tile loops), so that stage kt of a tile is the ring's base + kt, its barrier and phase, and
its buffer where n is not whole rings (`_on_the_ring`); the consumers release the stages still in
flight after each tile's loop, so that the producers, who are already copying the next tile's
stages, find them free while the consumers store the products.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, memref, scf
from xdsl.dialects.builtin import (ArrayAttr, DenseArrayBase, IndexType, IntegerAttr, IntegerType, MemRefType, ModuleOp,
                                   i64)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tilemma.dialects import warp
from tilemma.dialects.warp_mbarrier import MBARRIER_BYTES
from tilemma.dialects.schedule import ScheduleAttr
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.plan import kernel_target
from tilemma.passes.warp.loop_clone import Cloner, const_before, hoist_constants, insert_before
from tilemma.passes.warp.loop_stages import fill_ops, is_pure, operand_chain, wgmma_pending
from tilemma.passes.warp.stage_shared import k_loop

_LANDING = (warp.AsyncWaitOp, warp.RoundStageOp, warp.TransposeStageOp)
# registers a producer thread keeps (`setmaxnreg`) for its copies' addresses (CUTLASS's producers keep
# 40); a transposing fill's words come on top (`producer_registers`)
PRODUCER_REGISTERS = 40
# ... and a `warp.transpose_stage`'s words of a chunk plus these, for what it builds from them
TRANSPOSE_HEADROOM = 24
# registers a consumer thread keeps beside its accumulators for a fill's loads to run a stage ahead
# (`loads_ahead`): a 128 x 256 CTA's m64n256 accumulators (128) with an 8-bit fill's two stages of
# words kept by the producers (168 each) spill
CONSUMER_HEADROOM = 64


def _barriers(stages: int) -> memref.AllocOp:
    ref = MemRefType(IntegerType(64), [stages], memory_space=IntegerAttr(warp.SHARED, i64))
    return memref.AllocOp([], [], ref, IntegerAttr(MBARRIER_BYTES, i64))


class _Builder(Cloner):
    """A `Cloner` that also builds the index arithmetic the roles add."""

    def op(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def slot(self, kt: SSAValue, stages: int) -> SSAValue:
        """kt % S: the stage's barrier."""
        return self.op(arith.RemUIOp(kt, self.const(stages)))

    def ring_step(self, kt: SSAValue, base: SSAValue | None) -> SSAValue:
        """The ring's stage count at a tile's stage kt: base + kt (kt without tiles)."""
        return kt if base is None else self.op(arith.AddiOp(kt, base))

    def slot_parity(self, kt: SSAValue, stages: int, ahead: int) -> tuple[SSAValue, SSAValue]:
        """(kt % S, (kt / S + ahead) % 2): the stage's barrier and the parity of its phase kt / S + ahead."""
        use = self.op(arith.DivUIOp(kt, self.const(stages)))
        if ahead:
            use = self.op(arith.AddiOp(use, self.const(ahead)))
        return self.slot(kt, stages), self.op(arith.RemUIOp(use, self.const(2)))

    def when(self, cond: SSAValue, build) -> None:
        """`scf.if cond` around what `build(inner builder)` adds (its values stay inside)."""
        inner = _Builder(self.map)
        build(inner)
        inner.ops.append(scf.YieldOp())
        self.ops.append(scf.IfOp(cond, [], inner.ops))


@dataclass
class _Ring:
    """What the two roles share: the stage ring, its barriers and the CTA's threads."""

    stages: int
    in_flight: int  # stages whose products `warp.wgmma` leaves running (P)
    consumers: int
    producers: int
    cluster: int  # CTAs sharing B's stages (1: none)
    full: SSAValue
    empty: SSAValue
    # a persistent kernel's: (CTAs, tiles) and each role's tile loop body (t, base), else None
    tiles: tuple[int, int] | None = None
    producer_tile: Block | None = None
    consumer_tile: Block | None = None
    rebased: bool = False  # ... whose tiles are not whole rings: their buffers follow the ring (`_on_the_ring`)

    def release(self, b: _Builder, slot: SSAValue) -> None:
        """The consumers are done with stage `slot`: they arrive at its `empty` barrier, and at the
        peers' (whose producers write B's shared stages here too)."""
        b.op(warp.MbarrierArriveOp(self.empty, slot))
        if self.cluster > 1:
            b.op(warp.MbarrierArrivePeersOp(self.empty, slot, self.cluster))


def specialize(kernel: func.FuncOp, loop: scf.ForOp, stages: int, in_flight: int, consumers: int, producers: int,
               tma: bool = False, cluster: int = 1, persistent: int = 0) -> None:
    ahead = stages - 1 - in_flight
    if ahead < 1:
        raise LoweringError(loop, f"warp-specialize: {stages} stages with {in_flight} in flight leave no stage to fill ahead")
    hoist_constants(loop)
    body = loop.body.block
    kt = body.args[0]
    fill = fill_ops(body)
    landing = [o for o in body.ops if isinstance(o, _LANDING)]
    barriers = [o for o in body.ops if isinstance(o, gpu.BarrierOp)]
    if not landing or not isinstance(landing[0], warp.AsyncWaitOp) or len(barriers) != 1:
        raise LoweringError(loop, "warp-specialize: expected a staged loop (copies, a wait, a barrier), as "
                                  "warp-stage-shared writes it")
    yield_op = body.last_op
    assert isinstance(yield_op, scf.YieldOp)
    consume = [o for o in body.ops if o not in fill and o not in landing and o not in barriers and o is not yield_op]
    pure = [o for o in body.ops if is_pure(o) and o not in fill]
    fill_chain = operand_chain(fill, pure)
    landing_chain = operand_chain(landing, pure)
    wgmmas = [o for o in consume if isinstance(o, warp.WgmmaOp)]
    a_reads = {f.owner for w in wgmmas for f in w.a_frags}  # an A from registers: its fragments' reads
    if not wgmmas or any(isinstance(o, warp.MmaOp | warp.LdMatrixOp | warp.LoadSharedOp) and o not in a_reads
                         for o in consume):
        raise LoweringError(loop, "warp-specialize: the consumers' stage is read by warp.wgmma alone (and the "
                                  "reads of an A it takes from registers)")

    # with `tma`, one producer thread copies A's and B's stages (`warp.copy_tma`); what cp.async
    # still copies (a pre-compressed A's metadata, which generic loads read) arrives at the stage's
    # barrier as it lands (`warp.async_arrive`), not a group and L stages later. Without, the
    # copies (and a fill's stores) land by a group's wait, fenced for the warpgroups' async proxy.
    lands = any(isinstance(o, warp.FillLoadOp) or (not tma and isinstance(o, warp.CopyAsyncOp | warp.CopyMetaAsyncOp))
                for f in fill for o in f.walk())
    hands_over = tma and any(isinstance(o, warp.CopyMetaAsyncOp) for f in fill for o in f.walk())
    pre = _Builder()
    full, empty = pre.op(_barriers(stages)), pre.op(_barriers(stages))
    pre.op(warp.MbarrierInitOp(full, (producers if lands or hands_over else 0) + int(tma)))
    # (in a cluster, lane 0 of each of the peer's consumer warps arrives too)
    pre.op(warp.MbarrierInitOp(empty, consumers + consumers // 32 * (cluster - 1)))
    pre.op(warp.ClusterSyncOp() if cluster > 1 else gpu.BarrierOp())
    tid = pre.op(gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X)))
    is_producer = pre.op(arith.CmpiOp(tid, pre.const(consumers), "uge"))
    insert_before(loop, pre.ops)
    ring = _Ring(stages, in_flight, consumers, producers, cluster, full, empty)
    if persistent:
        grid = tuple(kernel.attributes["warp.grid"].get_values())  # type: ignore[union-attr]
        # (the TMA's copies and no cluster: `#warp.schedule`'s verifier)
        if grid[1:] != (1, 1) or (_constant(loop.lb), _constant(loop.step)) != (0, 1):
            raise LoweringError(loop, "warp-specialize: a persistent kernel runs over a grid of one dimension and a "
                                      "K loop from 0 by 1")
        if persistent < grid[0]:
            ring.tiles = (persistent, grid[0])
            count = _constant(loop.ub)
            ring.rebased = count is None or count % stages != 0
            ring.producer_tile = Block(arg_types=[IndexType(), IndexType()])
            ring.consumer_tile = Block(arg_types=[IndexType(), IndexType()])
    p_base = ring.producer_tile.args[1] if ring.producer_tile else None

    # the producer warpgroup: copies of stage kt, landing and arrival of stage kt - L
    n = loop.ub
    steps = arith.AddiOp(n, const_before(loop, ahead))
    insert_before(loop, [steps])

    # a transposing fill's loads a stage ahead of its stores, where the registers allow
    # (`loads_ahead`): stage kt + 1's words load before the producers wait to store stage kt's
    # (carried from the iteration before), so that their latency hides behind a stage of mmas
    loads = [o for o in fill if isinstance(o, warp.FillLoadOp)]
    if not loads_ahead(kernel, fill, list(body.args[1:]), consumers, producers):
        loads = []
    stores = [o for o in fill if not is_pure(o) and o not in loads and not isinstance(o, warp.AsyncCommitOp)]
    within = [o for o in body.ops if is_pure(o)]
    p_body = Block(arg_types=[IndexType(), *(o.result.type for o in loads)])
    pk = p_body.args[0]
    p = _Builder({kt: pk, **{o.result: w for o, w in zip(loads, p_body.args[1:])}})
    slots: list[SSAValue] = []
    first, later = _Builder(), _Builder(dict(p.map))
    if loads:
        first.map[kt] = loop.lb
        first.clone_all(operand_chain(loads, within) + loads)
        later.map[kt] = later.op(arith.AddiOp(pk, later.const(1)))
        later.clone_all(operand_chain(loads, within) + loads)
        p.ops.extend(later.ops)

    def wait_empty(b: _Builder) -> SSAValue:
        """Stage pk's slot released by the consumers (stage pk - S's products retired)."""
        step = b.ring_step(pk, p_base)
        slot, parity = b.slot_parity(step, stages, 1)
        slots.append(slot)
        b.op(warp.MbarrierWaitOp(empty, slot, parity))
        return step

    def land(b: _Builder, pending: int) -> None:
        b.map[kt] = b.op(arith.SubiOp(pk, b.const(ahead)))
        b.clone_all(landing_chain)
        for op in landing:
            b.clone(op)
            if isinstance(op, warp.AsyncWaitOp):
                b.map[op.token].owner.pending = IntegerAttr(pending, i64)  # type: ignore[union-attr]
        b.op(warp.MbarrierArriveOp(full, b.slot(b.map[kt], stages)))

    # a B transposed in shared memory (`warp.transpose_stage`): stage pk - L is transposed before
    # the producers wait for stage pk's slot and copy it (L - 1 groups then still in flight), so
    # that its transpose waits only for the release the iteration before waited for, not for the
    # consumers to finish the stage before it. Its K-major ring may be shorter than the stages':
    # its slot for stage pk - L was last stage pk - L - R's, released with stage pk - 1 - S's
    # (R >= in_flight + 2), which the producers then wait for on every iteration, the last L (no
    # copies) too.
    transposes = lands and any(isinstance(o, warp.TransposeStageOp) for o in landing)
    if transposes:
        p.when(p.op(arith.CmpiOp(pk, p.const(ahead), "uge")), lambda b: land(b, ahead - 1))
    shorter = any(isinstance(o, warp.TransposeStageOp) and o.dest.type.get_shape()[0] < stages for o in landing)
    if shorter:
        wait_empty(p)

    def copy(b: _Builder) -> None:
        step = b.ring_step(pk, p_base) if shorter else wait_empty(b)
        b.clone_all(operand_chain(stores, within) + stores if loads else
                    fill_chain + [o for o in fill if not isinstance(o, warp.AsyncCommitOp)])
        if ring.rebased:
            _on_the_ring(loop, b.ops, pk, step, stages)

    p.when(p.op(arith.CmpiOp(pk, n, "ult")), copy)
    if lands:
        p.op(warp.AsyncCommitOp())
    if lands and not transposes:
        p.when(p.op(arith.CmpiOp(pk, p.const(ahead), "uge")), lambda b: land(b, ahead))
    # (every copy the TMA's: nothing to commit, wait for or arrive with)
    p.ops.append(scf.YieldOp(*(later.value(o.result) for o in loads)))
    p_body.add_ops(p.ops)
    if tma:
        _copy_by_tma(kernel, p_body, full, slots[0], consumers, cluster)
    if hands_over:
        meta = [o for o in p_body.walk() if isinstance(o, warp.CopyMetaAsyncOp)]
        Rewriter.insert_op(warp.AsyncArriveOp(full, slots[0]), InsertPoint.after(meta[-1]))
    producer = [*first.ops, scf.ForOp(loop.lb, steps.result if lands else n, loop.step,
                                      [first.value(o.result) for o in loads], p_body)]
    if ring.producer_tile is not None:
        producer = [_tile_loop(kernel, ring, ring.producer_tile, producer, n)]
    _roles(kernel, loop, producer, ring, fill, body, landing, consume, is_producer, bool(loads))
    if ring.tiles is not None:
        kernel.attributes["warp.grid"] = DenseArrayBase.from_list(i64, [ring.tiles[0], 1, 1])
        _per_tile(kernel)


def _constant(v: SSAValue) -> int | None:
    """The value of an `arith.constant` index (None if `v` is not one)."""
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _on_the_ring(loop: scf.ForOp, ops: list[Operation], k: SSAValue, step: SSAValue, stages: int) -> None:
    """The stage buffers that `ops` (a role's clone of the staged loop's body) address by the tile's
    stage k (`k % S`, the staged loop's buffer) addressed by the ring's count instead (`step`, base
    + k): where a persistent kernel's tile is not whole rings, the next tile's stage 0 is buffer
    (base + n) % S, whose barrier the ring waits at. (Where it is, base + k = k mod S: the loop's own
    index stands.)"""
    moved = 0
    for top in ops:
        for op in top.walk():
            if isinstance(op, arith.RemUIOp) and op.lhs is k and _constant(op.rhs) == stages:
                op.operands[0] = step
                moved += 1
    if not moved:
        raise LoweringError(loop, "warp-specialize: expected the staged loop's buffers as its stage mod the ring")


def _tile_loop(kernel: func.FuncOp, ring: _Ring, body: Block, ops: list[Operation], n: SSAValue) -> scf.ForOp:
    """`for t = pid to T step P` (ring.tiles = (P, T)) around `ops` in `body`, its args (t, base): the
    ring's count `base` goes up by n stages a tile, from 0."""
    ctas, tiles = ring.tiles  # type: ignore[misc]
    pid = _block_id(kernel)
    step = arith.AddiOp(body.args[1], n)
    body.add_ops([*ops, step, scf.YieldOp(step.result)])
    lead = _Builder()
    bounds = (lead.const(tiles), lead.const(ctas), lead.const(0))
    insert_before(kernel.body.block.first_op, lead.ops)  # (hoisted: constants at the top)
    return scf.ForOp(pid, bounds[0], bounds[1], [bounds[2]], body)


def _block_id(kernel: func.FuncOp) -> SSAValue:
    """The kernel's CTA index along x (its tile's, before a persistent kernel's loop)."""
    for op in kernel.body.block.ops:
        if isinstance(op, gpu.BlockIdOp) and op.dimension.data == gpu.DimensionEnum.X:
            return op.result
    raise LoweringError(kernel, "warp-specialize: a persistent kernel derives its tile from gpu.block_id x")


def _per_tile(kernel: func.FuncOp) -> None:
    """In each tile loop of a persistent kernel (`scf.for` from `gpu.block_id x`), the ops of the
    kernel's block that derive values from that index, cloned with the loop's tile for it, ahead of
    the loop's body (as many as the body uses)."""
    block = kernel.body.block
    pid = _block_id(kernel)
    derived, ops = {pid}, []
    for op in block.ops:
        if isinstance(op, scf.ForOp | scf.IfOp):
            continue
        if any(v in derived for v in op.operands):
            derived.update(op.results)
            ops.append(op)
    loops = [o for o in kernel.walk() if isinstance(o, scf.ForOp) and o.lb is pid]
    for loop in loops:
        body = loop.body.block
        used: set[Operation] = set()
        work = [v for inner in body.walk() for v in inner.operands if v in derived and v is not pid]
        while work:
            owner = work.pop().owner
            if owner in used:
                continue
            used.add(owner)  # type: ignore[arg-type]
            work += [v for v in owner.operands if v in derived and v is not pid]  # type: ignore[union-attr]
        mapping: dict[SSAValue, SSAValue] = {pid: body.args[0]}
        clones = []
        for op in ops:
            if op in used:
                new = op.clone(value_mapper=mapping)
                mapping.update(zip(op.results, new.results))
                clones.append(new)
        for inner in body.walk():
            for i, v in enumerate(inner.operands):
                if v in mapping and v is not pid:
                    inner.operands[i] = mapping[v]
        for new in reversed(clones):
            body.insert_op_before(new, body.first_op)  # type: ignore[arg-type]


def _copy_by_tma(kernel: func.FuncOp, body: Block, full: SSAValue, slot: SSAValue, thread: int, cluster: int) -> None:
    """The producers' `warp.copy_async`s in `body` become `warp.copy_tma`s that thread `thread`
    (the first producer) issues, their bytes landing on barrier `slot` of `full`, after its
    `warp.mbarrier_expect_tx` of them all. They sit in one block (the stage's bound), which the
    expectation shares, so that a stage's arrival and its bytes come together or not at all. In a
    cluster, B's copies are multicast: the CTA of rank j mod `cluster` issues B's j-th (all the
    rank-0 CTA where they do not divide evenly), and every CTA expects all of them."""
    copies = [o for o in body.walk() if isinstance(o, warp.CopyAsyncOp)]
    if not copies:
        return
    block = copies[0].parent_block()
    if any(c.parent_block() is not block for c in copies):
        raise LoweringError(copies[0], "warp-specialize: the TMA copies of a stage are in one block")
    shared = [c for c in copies if "b" in _roles_of(kernel, c.ref)] if cluster > 1 else []
    total = 0
    for c in copies:
        t = warp.CopyTmaOp(c.ref, c.indices, c.dest, c.stage, full, slot, c.window_values(), c.extent_values(),
                           thread, c.transpose is not None)
        if c in shared:
            j = shared.index(c)
            t.multicast = IntegerAttr(cluster, i64)
            t.rank = IntegerAttr(j % cluster if len(shared) % cluster == 0 else 0, i64)
        total += t.box_bytes
        Rewriter.replace_op(c, t)
    first = next(o for o in block.ops if isinstance(o, warp.CopyTmaOp))
    Rewriter.insert_op(warp.MbarrierExpectTxOp(full, slot, total, thread), InsertPoint.before(first))


def _roles_of(kernel: func.FuncOp, ref: SSAValue) -> tuple[str, ...]:
    """The `warp.role`s of the kernel argument `ref` ((): not an argument)."""
    args = kernel.body.block.args
    if ref not in args or kernel.arg_attrs is None:
        return ()
    roles = kernel.arg_attrs.data[list(args).index(ref)].data.get("warp.role")
    return tuple(r.data for r in roles.data) if isinstance(roles, ArrayAttr) else ()  # type: ignore[attr-defined]


def _roles(kernel: func.FuncOp, loop: scf.ForOp, producer: list[Operation], ring: _Ring, fill, body: Block, landing,
           consume, is_producer: SSAValue, ahead: bool) -> None:
    """The producers' loop in their role (registers given back, then retired), and the consumers'
    loop in place of the staged one. In a cluster the producers wait, before they leave, until
    every CTA's consumers released every stage (the producer tail: no peer arrives at a barrier of
    a CTA that has left), and so the consumers release the stages still in flight after their loop."""
    n, accs = loop.ub, list(body.args[1:])
    stages, in_flight, consumers, producers = ring.stages, ring.in_flight, ring.consumers, ring.producers
    yield_op = body.last_op
    assert isinstance(yield_op, scf.YieldOp)
    keep = producer_registers(kernel, fill, consumers + producers, ahead)
    role = _Builder()
    role.ops.append(warp.SetMaxRegistersOp(keep, increase=False))  # (`consumer_registers`)
    role.ops.extend(producer)
    if ring.cluster > 1:  # the tail: kt = n .. n + S - 1 wait for the releases of stages kt - S
        t_body = Block(arg_types=[IndexType()])
        t = _Builder()
        slot, parity = t.slot_parity(t_body.args[0], stages, 1)
        t.op(warp.MbarrierWaitOp(ring.empty, slot, parity))
        t.ops.append(scf.YieldOp())
        t_body.add_ops(t.ops)
        end = arith.AddiOp(n, const_before(loop, stages))
        insert_before(loop, [end])
        role.ops.append(scf.ForOp(n, end.result, loop.step, [], t_body))
    role.ops.append(scf.YieldOp())
    split = scf.IfOp(is_producer, [], role.ops)
    retire = warp.RetireOp(is_producer)
    insert_before(loop, [split, retire])
    _consumers_only(kernel, split, retire)
    Rewriter.insert_op(warp.SetMaxRegistersOp(consumer_registers(kernel, consumers, producers, keep), increase=True),
                       InsertPoint.after(retire))

    # the consumers: wait for stage kt, its mmas, release the stage whose products are done
    c_body = Block(arg_types=[IndexType()] + [a.type for a in accs])
    ck = c_body.args[0]
    c = _Builder(dict(zip(body.args, c_body.args)))
    c_base = ring.consumer_tile.args[1] if ring.consumer_tile else None
    gk = c.ring_step(ck, c_base)
    slot, parity = c.slot_parity(gk, stages, 0)
    token = c.op(warp.MbarrierWaitOp(ring.full, slot, parity))
    for op in landing:
        c.map[op.results[0]] = token
    c.clone_all(consume)
    if ring.rebased:
        _on_the_ring(loop, c.ops, ck, gk, stages)
    if in_flight:
        def release(b: _Builder) -> None:
            ring.release(b, b.slot(b.op(arith.SubiOp(gk, b.const(in_flight))), stages))
        c.when(c.op(arith.CmpiOp(ck, c.const(in_flight), "uge")), release)
    else:
        ring.release(c, slot)
    c.ops.append(scf.YieldOp(*(c.value(v) for v in yield_op.operands)))
    c_body.add_ops(c.ops)
    consumer = scf.ForOp(loop.lb, n, loop.step, list(loop.iter_args), c_body)
    Rewriter.insert_op(consumer, InsertPoint.before(loop))
    for old, new in zip(loop.results, consumer.results):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(loop, safe_erase=False)
    if (ring.cluster > 1 or ring.tiles) and in_flight:  # the stages in flight at the end, once their products are done
        done = next((o for o in _after(consumer) if isinstance(o, warp.WgmmaWaitOp)), None)
        if done is None:
            raise LoweringError(consumer, "warp-specialize: expected the warpgroups' wait after the consumers' loop")
        last = _Builder()
        end = last.ring_step(n, c_base)
        for j in range(in_flight):
            k = last.op(arith.SubiOp(end, last.const(in_flight - j)))
            ring.release(last, last.slot(k, stages))
        hoist = last.ops
        for op in reversed(hoist):
            Rewriter.insert_op(op, InsertPoint.after(done))
    if ring.consumer_tile is not None:  # what follows the consumers' registers, the return aside, a tile at a time
        block = kernel.body.block
        start = next(o for o in block.ops if isinstance(o, warp.SetMaxRegistersOp) and o.increase)
        tail = list(_after(start))[:-1]
        for op in tail:
            op.detach()
        Rewriter.insert_op(_tile_loop(kernel, ring, ring.consumer_tile, tail, n), InsertPoint.after(start))


def _after(op: Operation):
    """The ops after `op` in its block."""
    nxt = op.next_op
    while nxt is not None:
        yield nxt
        nxt = nxt.next_op


def producer_registers(kernel: func.FuncOp, fill: list[Operation], threads: int, ahead: bool = False) -> int:
    """Registers a producer thread keeps (`setmaxnreg.dec`): `PRODUCER_REGISTERS` for its copies'
    addresses, plus the words a transposing fill holds between its loads and stores (twice where
    the loads run a stage ahead) or the words a `warp.transpose_stage` reads of a chunk and
    `TRANSPOSE_HEADROOM` more for what it builds from them (in multiples of 8, at most what it
    starts with). ptxas (CUDA 13.0) on the 128 x 256 s8 kernels with B transposed: 64 + 24 words
    (128 registers, the consumers 184) spill nothing; 64 + 32 (136) spilled 20 bytes, 64 alone
    (104) 116."""
    words = (1 + ahead) * sum(o.result.type.words.data for o in fill if isinstance(o, warp.FillLoadOp))  # type: ignore[attr-defined]
    words += max((o.layout().words_per_chunk + TRANSPOSE_HEADROOM for o in kernel.walk()
                  if isinstance(o, warp.TransposeStageOp)), default=0)
    return min(kernel_target(kernel).limits.launch_registers(threads), PRODUCER_REGISTERS + -(-words // 8) * 8)


def loads_ahead(kernel: func.FuncOp, fill: list[Operation], accs: list[SSAValue], consumers: int,
                producers: int) -> bool:
    """Whether a transposing fill's loads run a stage ahead of its stores: where the consumers,
    with the producers keeping both stages' words, still take their accumulators' registers and
    `CONSUMER_HEADROOM` more. H200, a 128 x 128 CTA's producers filling, a stage ahead against
    with their loads (results/h200-2026-11-28g-fill-ahead-ab.csv): TOP/s s8 with A M-major and B
    N-major 4096^3 512 / 401, 4096x11008x4096 503 / 399; TFLOP/s tf32 rna with B N-major 4096^3
    159 / 108, 512x4096x4096 155 / 103, both transposed 121 / 80. Two or three stages ahead gained
    nothing more (-fill-ahead2-*.csv): one warp a scheduler issues the fill's instructions."""
    if not any(isinstance(o, warp.FillLoadOp) for o in fill):
        return False
    held = sum(a.type.layout().b32_registers for a in accs if isinstance(a.type, warp.FragType))
    keep = producer_registers(kernel, fill, consumers + producers, ahead=True)
    return consumer_registers(kernel, consumers, producers, keep) >= held + CONSUMER_HEADROOM


def consumer_registers(kernel: func.FuncOp, consumers: int, producers: int,
                       keep: int = PRODUCER_REGISTERS) -> int:
    """Registers a consumer thread takes (`setmaxnreg.inc`): what it starts with (the target's file
    over the CTA's threads, in multiples of 8: ptxas gives a kernel that uses setmaxnreg all of
    it) plus its share of what the producers give back (all but `keep` each). The CTA's
    .incs draw only on its own .decs: asking more hangs the GPU (an H200 did so for 512 consumers
    that asked for 112 where 104 was their share)."""
    start = kernel_target(kernel).limits.launch_registers(consumers + producers)
    return min(256, start + (start - keep) * producers // consumers // 8 * 8)


def _consumers_only(kernel: func.FuncOp, split: scf.IfOp, retire: warp.RetireOp) -> None:
    """Move what precedes the role split but only the consumers use (their accumulators' and the
    epilogue's loads, say) after `retire`, so that the producers do not run it."""
    block = kernel.body.block
    before = []
    for op in block.ops:
        if op is split:
            break
        before.append(op)
    # what the producers' branch uses, and what the ops that stay for everyone use
    needed, work = set(), [split, *(op for op in before if not op.results or isinstance(op, memref.AllocOp))]
    while work:
        op = work.pop()
        for inner in op.walk():
            for v in inner.operands:
                owner = v.owner
                if isinstance(owner, Operation) and owner.parent_block() is block and owner not in needed:
                    needed.add(owner)
                    work.append(owner)
    # (ops without results - the barriers' setup - and the buffers stay: everyone's)
    moved = [op for op in before if op not in needed and op.results and not isinstance(op, memref.AllocOp)]
    for op in reversed(moved):
        op.detach()
        Rewriter.insert_op(op, InsertPoint.after(retire))


@dataclass(frozen=True)
class WarpSpecialize(ModulePass):
    """Split the staged K loop of every kernel whose `#warp.schedule` has producers (see the module)."""

    name = "warp-specialize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            attr = kernel.attributes.get("warp.schedule")
            if not (isinstance(attr, ScheduleAttr) and attr.schedule.producers and "warp.grid" in kernel.attributes):
                continue
            s = attr.schedule
            loop = k_loop(kernel)
            if not any(isinstance(o, warp.CopyAsyncOp | warp.FillLoadOp) for o in loop.walk()):
                raise LoweringError(loop, "run warp-stage-shared before warp-specialize (the K loop has no copies)")
            specialize(kernel, loop, s.stages, wgmma_pending(loop), s.threads, 32 * s.producers, s.copy == "tma",
                       s.cluster, s.persistent)
