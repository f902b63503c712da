"""A pattern applier that offers each op only the patterns written for its type.

xDSL's `GreedyRewritePatternApplier` tries every pattern on every op; in `warp-to-ptx` that is 23
patterns on each of the thousands of `ptx` instructions the lowering creates (and the walker
revisits), about a fifth of a compile spent in failed `isinstance` checks. Patterns declared with
`op_type_rewrite_pattern` name their op type; this applier reads it once and looks the candidates
up by the op's class. Order, dead-code erasure and the first-action-wins rule are the greedy
applier's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union, get_args, get_origin

from xdsl.ir import Block, Operation, Region
from xdsl.traits import MemoryEffect
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.transforms.dead_code_elimination import is_trivially_dead


def declared_types(pattern: RewritePattern) -> tuple[type, ...] | None:
    """The op classes an `op_type_rewrite_pattern` method accepts (its `op` annotation, kept in
    the wrapper's closure by xDSL 0.74), or None for a pattern that takes any op."""
    method = type(pattern).match_and_rewrite
    code, cells = method.__code__, method.__closure__ or ()
    cell = dict(zip(code.co_freevars, cells)).get("expected_type")
    if cell is None:
        return None
    expected = cell.cell_contents
    return tuple(get_args(expected)) if get_origin(expected) is Union or type(expected).__name__ == "UnionType" else (expected,)


@dataclass
class TypedPatternApplier(RewritePattern):
    patterns: list[RewritePattern]
    _declared: list[tuple[RewritePattern, tuple[type, ...] | None]] = field(init=False, repr=False)
    _by_class: dict[type, tuple[list[RewritePattern], bool]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._declared = [(p, declared_types(p)) for p in self.patterns]

    def _for(self, op: Operation) -> tuple[list[RewritePattern], bool]:
        """The patterns for `op`'s class, and whether an op of the class can be dead code at all:
        one without a memory-effect trait has unknown effects, which DCE keeps (`get_effects` is
        None), so the walker's thousands of visits to `ptx.inst` skip the dead-code check."""
        cls = type(op)
        found = self._by_class.get(cls)
        if found is None:
            patterns = [p for p, types in self._declared if types is None or issubclass(cls, types)]
            found = (patterns, bool(op.get_traits_of_type(MemoryEffect)))
            self._by_class[cls] = found
        return found

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        patterns, may_be_dead = self._for(op)
        if may_be_dead and is_trivially_dead(op):
            rewriter.erase(op)
            return
        for pattern in patterns:
            pattern.match_and_rewrite(op, rewriter)
            if rewriter.has_done_action:
                return

    def visits(self, op: Operation) -> bool:
        """Whether offering `op` to this applier can do anything: it has patterns, or it may be
        dead code. An op of neither kind (a `ptx.inst`) is a no-op to visit."""
        patterns, may_be_dead = self._for(op)
        return bool(patterns) or may_be_dead


@dataclass
class TypedPatternWalker(PatternRewriteWalker):
    """xDSL's greedy walker over a `TypedPatternApplier` that never queues an op the applier
    would do nothing with: the thousands of instructions warp-to-ptx inserts were each queued,
    offered the applier and found no pattern, and all of them again on the walker's final sweep
    (about a third of the pass). Which rewrites happen, and in what order, is unchanged: the ops
    left out would have been no-ops, and the queue keeps the others' order."""

    pattern: TypedPatternApplier

    def _handle_operation_insertion(self, op: Operation) -> None:
        if self.apply_recursively and self.pattern.visits(op):
            self._worklist.push(op)

    def _populate_worklist(self, op: Operation | Region | Block) -> None:
        visits = self.pattern.visits
        for sub_op in op.walk(reverse=not self.walk_reverse, region_first=not self.walk_regions_first):
            if visits(sub_op):
                self._worklist.push(sub_op)
