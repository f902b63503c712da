"""Runs of like ops that a warp pass merges into one: `first` and the ops of its kind after it in its
block, with only `arith` ops (their indices) between (`warp-tma-blocks`' copies, `warp-stage-stores`'
stores)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation


def run_after(first: Operation, limit: int, continues: Callable[[Operation, int], bool]) -> list:
    """`first` and the ops of its type after it in its block, up to `limit` in all, while each is the
    next of the run (`continues(op, j)`: whether `op` can be op j) and only `arith` ops lie between."""
    run = [first]
    op = first.next_op
    while op is not None and len(run) < limit:
        if isinstance(op, type(first)):
            if not continues(op, len(run)):
                break
            run.append(op)
        elif not op.name.startswith("arith."):
            break
        op = op.next_op
    return run
