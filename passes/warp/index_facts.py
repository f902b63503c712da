"""What an index value is provably, read from the arith ops that compute it: facts the warp passes
use to drop a predicate or merge accesses (`warp-tma-blocks`' contiguous copies, `warp-stage-stores`'
adjacent fragments, the transposing fill's one guard a stage)."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import SSAValue
from xdsl.traits import ConstantLike


def multiple_of(v: SSAValue, n: int) -> bool:
    """Whether index `v` is provably a multiple of `n` (a power of two, so that wrapping keeps it)."""
    c = ConstantLike.get_constant_value(v)
    if isinstance(c, IntegerAttr):
        return c.value.data % n == 0
    owner = v.owner
    if isinstance(owner, arith.MuliOp):
        return multiple_of(owner.lhs, n) or multiple_of(owner.rhs, n)
    if isinstance(owner, arith.AddiOp):
        return multiple_of(owner.lhs, n) and multiple_of(owner.rhs, n)
    return False


def split_constant(v: SSAValue) -> tuple[SSAValue, int]:
    """(x, c) where `v` is x + the constant c (`arith.addi`), else (v, 0)."""
    owner = v.owner
    if isinstance(owner, arith.AddiOp):
        for x, y in ((owner.lhs, owner.rhs), (owner.rhs, owner.lhs)):
            c = ConstantLike.get_constant_value(y)
            if isinstance(c, IntegerAttr):
                return x, c.value.data
    return v, 0


def constant_step(first: SSAValue, later: SSAValue) -> int | None:
    """later - first, where both are one value plus constants."""
    (x, a), (y, b) = split_constant(first), split_constant(later)
    return b - a if x is y else None
