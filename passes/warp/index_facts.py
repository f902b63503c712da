"""What an index value is provably, read from the arith ops that compute it: facts the warp passes
use to drop a predicate or merge accesses (`warp-tma-blocks`' contiguous copies, the transposing
fill's one guard a stage)."""

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
