"""`warp-prefetch-fragments`: reads a stage's fragments ahead of their mmas, in registers.

After `warp-pipeline` each stage's section (wait, barrier, the stage's fragment reads and
mmas, K step by K step) waits for its stage and then reads before it multiplies. This pass
moves the head of every section - the wait, the barrier and the reads of its first K step (A,
and B's first `b-ahead` groups where reads interleave, and a pre-compressed A's metadata for
the stage) - to the end of the section before, so that the next stage's first fragments load
while this stage's last mmas run; the fragments and the wait's token travel as loop-carried
values. Within a section the rest of the reads are placed by `reads` (`#warp.schedule`, as in
Triton's prefetch pass):

- `ahead`: the whole next K step before a step's mmas;
- `interleaved`: mmas column by column (instruction rows in order within a column), reading as
  the registers they replace free up - after a B group's mmas the group `b-ahead` groups on,
  after a row's mma in a step's last column that row's next A - so about one fragment set is
  live, not two.

A moved wait keeps its count: it stays after the same commits.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, scf
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tilemma.dialects import warp
from tilemma.dialects.schedule import Schedule, ScheduleAttr
from tilemma.passes.errors import LoweringError
from tilemma.passes.tile.plan import ceil_div
from tilemma.passes.warp.loop_clone import Cloner, const_before

_READS = (warp.LdMatrixOp, warp.LoadSharedOp, warp.LoadMetaSharedOp)


def _const(value: int, ops: list[Operation]) -> SSAValue:
    op = arith.ConstantOp.from_int_and_width(value, IndexType())
    ops.append(op)
    return op.result


def _private(op: Operation, within: set[Operation]) -> list[Operation]:
    """The ops of `within` that compute only `op`'s operands (in program order): they move and
    are cloned with it."""
    found: list[Operation] = []
    work = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
    while work:
        o = work.pop()
        if o not in within or o in found or isinstance(o, arith.ConstantOp):
            continue
        users = {u.operation for r in o.results for u in r.uses}
        if users <= {op, *found}:
            found.append(o)
            work.extend(v.owner for v in o.operands if isinstance(v.owner, Operation))
    block = op.parent_block()
    assert block is not None
    order = {o: n for n, o in enumerate(block.ops)}
    return sorted(found, key=order.__getitem__)


class _Section:
    """One stage's consuming ops: wait, barrier, metadata loads, K step after K step of reads
    and mmas (as `warp-stage-shared` writes them and `warp-pipeline` clones them)."""

    def __init__(self, ops: list[Operation], s: Schedule):
        self.ops = ops
        rm, rn = s.warp_tile
        waits = [o for o in ops if isinstance(o, warp.AsyncWaitOp)]
        barriers = [o for o in ops if isinstance(o, gpu.BarrierOp)]
        if len(waits) != 1 or len(barriers) != 1:
            raise LoweringError(ops[0], "warp-prefetch-fragments: expected one wait and one barrier per stage (run warp-pipeline first)")
        self.wait, self.barrier = waits[0], barriers[0]
        mmas = [o for o in ops if isinstance(o, warp.MmaOp)]
        if not mmas or len(mmas) % (rm * rn):
            raise LoweringError(ops[0], f"warp-prefetch-fragments: expected K steps of {rm}x{rn} mmas")
        self.steps = len(mmas) // (rm * rn)
        self.mma = [[[mmas[(s_ * rm + i) * rn + j] for j in range(rn)] for i in range(rm)] for s_ in range(self.steps)]
        for s_ in range(1, self.steps):
            for i in range(rm):
                for j in range(rn):
                    if self.mma[s_][i][j].c != self.mma[s_ - 1][i][j].result:
                        raise LoweringError(self.mma[s_][i][j], "warp-prefetch-fragments: mmas out of K step order")
        reads = [o for o in ops if isinstance(o, _READS)]
        if any(r.token != self.wait.token for r in reads):
            raise LoweringError(reads[0], "warp-prefetch-fragments: a stage's reads take its wait's token")
        first_b = self.mma[0][0][0].b.owner
        self.w = len(first_b.results)
        self.groups = ceil_div(rn, self.w)
        self.a = [[self.mma[s_][i][0].a.owner for i in range(rm)] for s_ in range(self.steps)]
        self.b = [[self.mma[s_][0][g * self.w].b.owner for g in range(self.groups)] for s_ in range(self.steps)]
        self.metas = list(dict.fromkeys(m.metadata.owner for m in mmas if m.metadata is not None))
        within = set(ops)
        self.private = {r: _private(r, within) for r in [*reads, *self.metas]}
        meta_private = {o for m in self.metas for o in self.private[m]}
        self.meta_ops = [o for o in ops if o in meta_private or o in self.metas]
        placed = {self.wait, self.barrier, *mmas, *reads, *self.meta_ops,
                  *(p for r in reads for p in self.private[r])}
        self.other = [o for o in ops if o not in placed]

    def stage(self) -> SSAValue:
        return self.a[0][0].indices[0]


@dataclass(frozen=True)
class WarpPrefetchFragments(ModulePass):
    """Options: `b-ahead`: B groups an interleaved stage reads ahead of their mmas (one group of
    mmas covers a read's latency)."""

    name = "warp-prefetch-fragments"

    b_ahead: int = 2

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.b_ahead < 1:
            raise ValueError(f"warp-prefetch-fragments: b-ahead must be positive, got {self.b_ahead}")
        for kernel in [k for k in op.walk() if isinstance(k, func.FuncOp)]:
            attr = kernel.attributes.get("warp.schedule")
            if isinstance(attr, ScheduleAttr) and attr.schedule.stages and "warp.grid" in kernel.attributes:
                # (a warpgroup kernel's reads, of an A from registers, stay with their wgmma)
                if attr.schedule.mma != "wgmma" and any(isinstance(o, warp.LdMatrixOp | warp.LoadSharedOp)
                                                        for o in kernel.walk()):
                    _Prefetch(kernel, attr.schedule, self.b_ahead).run()


class _Prefetch:
    def __init__(self, kernel: func.FuncOp, s: Schedule, b_ahead: int):
        self.kernel, self.s = kernel, s
        block = kernel.body.block
        ops = list(block.ops)
        loops = [o for o in ops if isinstance(o, scf.ForOp) and any(isinstance(x, warp.MmaOp) for x in o.walk())]
        waits = [o for o in ops if isinstance(o, warp.AsyncWaitOp)]
        if not waits or waits[-1].pending.value.data != 0:
            raise LoweringError(kernel, "warp-prefetch-fragments: run warp-pipeline first (no final wait)")
        self.final = waits[-1]
        self.loop = loops[0] if loops else None
        if self.loop is not None:
            start = ops.index(self.loop) + 1
        else:
            start = max(n for n, o in enumerate(ops[:ops.index(self.final)]) if isinstance(o, warp.AsyncCommitOp)) + 1
        self.last = _Section(ops[start:ops.index(self.final)], s)
        self.body = None
        if self.loop is not None:
            body = list(self.loop.body.block.ops)
            first = next(n for n, o in enumerate(body) if isinstance(o, warp.AsyncWaitOp))
            self.body = _Section(body[first:-1], s)
        groups = self.last.groups
        self.ahead = min(b_ahead, groups) if s.reads == "interleaved" else groups
        self.interleave = s.reads == "interleaved"

    # -- the head: what a stage starts with --------------------------------------------------

    def head(self, sec: _Section) -> list[Operation]:
        """The reads a stage starts with: A of its first K step, B's first `ahead` groups."""
        return [*sec.a[0], *sec.b[0][:self.ahead]]

    def clone_reads(self, reads, mapping: dict[SSAValue, SSAValue], out: list[Operation], sec: _Section) -> list[SSAValue]:
        c = Cloner(mapping)
        values = []
        for r in reads:
            c.clone_all(sec.private[r])
            c.clone(r)
            values += [c.value(v) for v in r.results]
        out += c.ops
        return values

    def run(self) -> None:
        template = self.body or self.last
        # the first stage's head (and metadata), before the loop
        pre: list[Operation] = []
        wait = warp.AsyncWaitOp(template.wait.pending.value.data)
        pre += [wait, gpu.BarrierOp()]
        first = {template.stage(): _const(0, pre), template.wait.token: wait.token}
        frags = self.clone_reads(self.head(template), first, pre, template)
        metas = self.clone_reads(template.metas, first, pre, template)
        anchor = self.loop if self.loop is not None else self.last.ops[0]
        Rewriter.insert_op(pre, InsertPoint.before(anchor))
        carried = [*frags, *metas, wait.token]
        if self.loop is not None:
            carried = self.prefetch_loop(carried)
        self.emit(self.last, carried, InsertPoint.before(self.final))

    def prefetch_loop(self, inits: list[SSAValue]) -> list[SSAValue]:
        """Carry the head values through the loop; returns its results (the last stage's)."""
        loop, sec = self.loop, self.body
        assert loop is not None and sec is not None
        old = loop.body.block
        n_acc = len(loop.iter_args)
        body = Block(arg_types=[a.type for a in old.args] + [v.type for v in inits])
        for a, b in zip(old.args, body.args):
            a.replace_all_uses_with(b)
        for o in list(old.ops):
            o.detach()
            body.add_op(o)
        kt = body.args[0]
        carried = list(body.args[1 + n_acc:])
        # the next stage's index, beside this one's
        stage = sec.stage()
        stage_op = stage.owner
        nxt = arith.AddiOp(kt, const_before(stage_op, 1))
        following = arith.RemUIOp(nxt, stage_op.rhs)
        Rewriter.insert_op([nxt, following], InsertPoint.after(stage_op))
        yield_op = body.last_op
        assert isinstance(yield_op, scf.YieldOp)
        out = self.emit(sec, carried, InsertPoint.before(yield_op), following.result)
        new_yield = scf.YieldOp(*yield_op.operands, *out)
        Rewriter.replace_op(yield_op, new_yield)
        new = scf.ForOp(loop.lb, loop.ub, loop.step, [*loop.iter_args, *inits], body)
        Rewriter.insert_op(new, InsertPoint.before(loop))
        for r_old, r_new in zip(loop.results, new.results):
            r_old.replace_all_uses_with(r_new)
        Rewriter.erase_op(loop, safe_erase=False)
        return list(new.results[n_acc:])

    def emit(self, sec: _Section, carried: list[SSAValue], at: InsertPoint,
             following: SSAValue | None = None) -> list[SSAValue]:
        """Re-order one section around its carried head; with `following` (a loop's section)
        also read the next stage's head (and metadata) after waiting for it. Returns what the
        next section starts with."""
        s = self.s
        rm, rn = s.warp_tile
        w, groups, steps, ahead = sec.w, sec.groups, sec.steps, self.ahead
        nb = min(ahead * w, rn)
        n_meta = len(sec.metas) * steps
        frags_a, frags_b = carried[:rm], carried[rm:rm + nb]
        metas = carried[rm + nb:-1]
        token = carried[-1]
        # the head is carried in: its reads, wait and barrier go
        for r, values in zip(sec.a[0], [[v] for v in frags_a]):
            r.results[0].replace_all_uses_with(values[0])
        b_vals = iter(frags_b)
        for r in sec.b[0][:ahead]:
            for res in r.results:
                res.replace_all_uses_with(next(b_vals))
        for m, n in zip(sec.metas, range(0, n_meta, steps)):
            for res, v in zip(m.results, metas[n:n + steps]):
                res.replace_all_uses_with(v)
        for o in sec.ops:
            o.detach()
        gone = {*sec.a[0], *sec.b[0][:ahead], sec.wait, sec.barrier, *sec.meta_ops}
        for r in [*sec.a[0], *sec.b[0][:ahead]]:
            gone |= set(sec.private[r])
        for r in [o for o in sec.ops if isinstance(o, _READS) and o not in gone]:
            r.operands[len(r.operands) - 1] = token  # the stage was waited for before this section
        out: list[Operation] = list(sec.other)
        next_metas: list[SSAValue] = []
        next_token: list[SSAValue] = []
        wait_pending = sec.wait.pending.value.data

        def read(st: int, what: str, n: int) -> list[SSAValue]:
            if st < steps:
                r = (sec.a if what == "a" else sec.b)[st][n]
                out.extend(sec.private[r])
                out.append(r)
                return list(r.results)
            assert following is not None
            if not next_token:  # the next stage's wait, then its metadata first
                wait = warp.AsyncWaitOp(wait_pending)
                out.extend([wait, gpu.BarrierOp()])
                next_token.append(wait.token)
                next_metas.extend(self.clone_reads(sec.metas, {sec.stage(): following, sec.wait.token: wait.token},
                                                   out, sec))
            r = (sec.a if what == "a" else sec.b)[0][n]
            return self.clone_reads([r], {sec.stage(): following, sec.wait.token: next_token[0]}, out, sec)

        last = steps if following is not None else steps - 1
        a: dict[int, list[SSAValue]] = {0: list(frags_a)}
        b: dict[int, list[SSAValue]] = {0: list(frags_b)}
        if not self.interleave:
            for st in range(steps):
                if st < last:
                    a[st + 1] = [v for i in range(rm) for v in read(st + 1, "a", i)]
                    b[st + 1] = [v for g in range(groups) for v in read(st + 1, "b", g)]
                out.extend(m for row in sec.mma[st] for m in row)
        else:
            for st in range(steps):
                for g in range(groups):
                    for j in range(g * w, min(g * w + w, rn)):
                        for i in range(rm):
                            out.append(sec.mma[st][i][j])
                            if j == rn - 1 and st < last:
                                a.setdefault(st + 1, []).extend(read(st + 1, "a", i))
                    s_b, g_b = divmod(st * groups + g + ahead, groups)
                    if s_b <= last:
                        b.setdefault(s_b, []).extend(read(s_b, "b", g_b))
        Rewriter.insert_op(out, at)
        for o in gone:
            o.erase(safe_erase=False)
        if following is None:
            return []
        return [*a[steps], *b[steps], *next_metas, next_token[0]]

