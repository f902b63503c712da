"""passes/rewriting.py: the typed applier offers an op exactly the patterns written for its type
(plus the untyped ones), in order, and erases dead ops as the greedy applier does."""

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32
from xdsl.ir import Block, Operation, Region
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from tilemma.passes.rewriting import TypedPatternApplier, declared_types


class _Seen(RewritePattern):
    def __init__(self):
        self.seen: list[str] = []


class OnAdd(_Seen):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.AddiOp, rewriter: PatternRewriter) -> None:
        self.seen.append(op.name)


class OnAddOrMul(_Seen):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.AddiOp | arith.MuliOp, rewriter: PatternRewriter) -> None:
        self.seen.append(op.name)


class OnAny(_Seen):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        self.seen.append(op.name)


def test_declared_types_are_read_from_the_pattern():
    assert declared_types(OnAdd()) == (arith.AddiOp,)
    assert declared_types(OnAddOrMul()) == (arith.AddiOp, arith.MuliOp)
    assert declared_types(OnAny()) is None


def test_each_op_meets_only_its_patterns_and_dead_ops_go():
    one = arith.ConstantOp(IntegerAttr(1, i32))
    add = arith.AddiOp(one, one)
    mul = arith.MuliOp(add, add)
    dead = arith.SubiOp(one, one)  # no uses: erased before any pattern sees it
    ret = func.ReturnOp(mul)
    body = Region(Block([one, add, mul, dead, ret]))
    module = ModuleOp([func.FuncOp.from_region("f", [], [i32], body)])
    patterns = [OnAdd(), OnAddOrMul(), OnAny()]
    PatternRewriteWalker(TypedPatternApplier(patterns), apply_recursively=False).rewrite_module(module)
    assert patterns[0].seen == ["arith.addi"]
    assert patterns[1].seen == ["arith.addi", "arith.muli"]
    assert "arith.subi" not in patterns[2].seen and "arith.constant" in patterns[2].seen
    assert not any(isinstance(o, arith.SubiOp) for o in module.walk())
