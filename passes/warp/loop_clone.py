"""Cloning loop-body ops for another iteration, as the pipelining and prefetching passes need.

`Cloner` copies ops with their operands remapped (the induction variable to a shifted value
or a constant); index arithmetic whose operands are all constants folds to a constant, and an
`scf.if` whose condition folds keeps its body (inlined) or disappears, so a prologue iteration
reads as straight code. Constants of a loop body are hoisted before the loop first
(`hoist_constants`), since every clone shares them.
"""

from __future__ import annotations

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue
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

