"""Cloning loop-body ops for another iteration, as the pipelining, prefetching and unrolling passes need.

`Cloner` copies ops with their operands remapped (the induction variable to a shifted value
or a constant); index arithmetic whose operands are all constants folds to a constant, and an
`scf.if` whose condition folds keeps its body (inlined) or disappears, so a prologue iteration
reads as straight code. Constants of a loop body are hoisted before the loop first
(`hoist_constants`), since every clone shares them.
"""

from __future__ import annotations

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

_FOLD = {
    arith.AddiOp: lambda a, b: a + b,
    arith.SubiOp: lambda a, b: a - b,
    arith.MuliOp: lambda a, b: a * b,
    arith.DivUIOp: lambda a, b: a // b,
    arith.RemUIOp: lambda a, b: a % b,
    arith.MinUIOp: min,
}
_CMP = {"ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
        "uge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def constant_value(value: SSAValue) -> int | None:
    """The integer an index or i1 value is known to be (None if it is not a constant)."""
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def hoist_constants(loop: scf.ForOp) -> None:
    """Move the loop body's (and its nested regions') constants before the loop."""
    for op in [o for o in loop.body.walk() if isinstance(o, arith.ConstantOp)]:
        op.detach()
        Rewriter.insert_op(op, InsertPoint.before(loop))


class Cloner:
    """Clones ops into `self.ops`, remapping values through `self.map`."""

    def __init__(self, mapping: dict[SSAValue, SSAValue] | None = None):
        self.map: dict[SSAValue, SSAValue] = dict(mapping or {})
        self.ops: list[Operation] = []

    def value(self, v: SSAValue) -> SSAValue:
        return self.map.get(v, v)

    def const(self, value: int) -> SSAValue:
        op = arith.ConstantOp.from_int_and_width(value, IndexType())
        self.ops.append(op)
        return op.result

    def clone(self, op: Operation) -> None:
        """Clone `op` (folding what its constant operands decide)."""
        if type(op) in _FOLD:
            a, b = (constant_value(self.value(x)) for x in op.operands)
            if a is not None and b is not None:
                self.map[op.results[0]] = self.const(_FOLD[type(op)](a, b))
                return
        if isinstance(op, arith.CmpiOp):
            a, b = (constant_value(self.value(x)) for x in op.operands)
            if a is not None and b is not None:
                predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
                c = arith.ConstantOp.from_int_and_width(int(_CMP[predicate](a, b)), 1)
                self.ops.append(c)
                self.map[op.result] = c.result
                return
        if isinstance(op, scf.IfOp) and not op.results:
            cond = constant_value(self.value(op.cond))
            if cond is not None:
                if cond:
                    for inner in op.true_region.block.ops:
                        if not isinstance(inner, scf.YieldOp):
                            self.clone(inner)
                return
        new = op.clone(value_mapper=self.map)
        self.ops.append(new)
        for old, nw in zip(op.results, new.results):
            self.map[old] = nw

    def clone_all(self, ops) -> None:
        for op in ops:
            self.clone(op)


def const_before(anchor: Operation, value: int) -> SSAValue:
    """An index constant inserted before `anchor`."""
    c = arith.ConstantOp.from_int_and_width(value, IndexType())
    Rewriter.insert_op(c, InsertPoint.before(anchor))
    return c.result


def insert_before(anchor: Operation, ops: list[Operation]) -> None:
    if ops:
        Rewriter.insert_op(ops, InsertPoint.before(anchor))


def unroll(loop: scf.ForOp, factor: int) -> tuple[scf.ForOp | None, scf.ForOp | None]:
    """Unroll `loop` (step 1) by `factor`, as MLIR's `loopUnrollByFactor`: a loop of step `factor`
    over the whole groups of iterations, whose body is `factor` copies of the old one (the i-th at
    iv + i, each taking the last one's yields), inserted before `loop`; `loop` itself runs the
    iterations left over (fewer than `factor`) from where the new one ends. Returns (the unrolled
    loop, `loop`), either None where the trip count is known and leaves it nothing to run."""
    lb, ub, step = (constant_value(v) for v in (loop.lb, loop.ub, loop.step))
    if step != 1:
        raise ValueError("unroll: a loop of step 1")
    if lb is not None and ub is not None and (ub - lb) // factor == 0:
        return None, loop  # no whole group: every iteration is left over
    hoist_constants(loop)
    body = loop.body.block
    iv, iters = body.args[0], body.args[1:]
    yield_op = body.last_op
    assert isinstance(yield_op, scf.YieldOp)
    step_by = const_before(loop, factor)
    if lb is not None and ub is not None:
        end = const_before(loop, lb + max(ub - lb, 0) // factor * factor)
    else:
        span = arith.SubiOp(loop.ub, loop.lb)
        groups = arith.DivUIOp(span, step_by)
        whole = arith.MuliOp(groups, step_by)
        ends = arith.AddiOp(loop.lb, whole)
        insert_before(loop, [span, groups, whole, ends])
        end = ends.result
    new_body = Block(arg_types=[a.type for a in body.args])
    copies = Cloner(dict(zip(body.args, new_body.args)))
    carried = list(new_body.args[1:])
    for i in range(factor):
        copies.map.update(zip(iters, carried))
        if i:
            shifted = arith.AddiOp(new_body.args[0], const_before(loop, i))
            copies.ops.append(shifted)
            copies.map[iv] = shifted.result
        copies.clone_all([o for o in body.ops if o is not yield_op])
        carried = [copies.value(v) for v in yield_op.operands]
    copies.ops.append(scf.YieldOp(*carried))
    new_body.add_ops(copies.ops)
    main = scf.ForOp(loop.lb, end, step_by, list(loop.iter_args), new_body)
    Rewriter.insert_op(main, InsertPoint.before(loop))
    if lb is not None and ub is not None and (ub - lb) % factor == 0:
        for old, new in zip(loop.results, main.results):
            old.replace_all_uses_with(new)
        Rewriter.erase_op(loop, safe_erase=False)
        return main, None
    loop.operands = [end, loop.ub, loop.step, *main.results]
    return main, loop
