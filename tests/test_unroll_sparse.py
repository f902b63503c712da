"""Sparse warpgroups with a stage's products in flight (`warp-unroll-sparse`): `unroll` keeps a
loop's values (xDSL's interpreter, every trip count), the sparse loops unrolled by two with each
copy's metadata in its own registers, what is left over with nothing running; ptxas keeps the
wgmma pipeline (no C7513, which the loop not unrolled draws), warp-to-ptx refuses the loop not
unrolled, the emulator finds its metadata overwritten, and the unrolled kernels are bit for bit the
mma.sp kernels at every stage count. (GPU: tests/gpu/test_wgmma_gpu.py, test_specialize_gpu.py.)"""

from __future__ import annotations

import re

import pytest
from xdsl.dialects import arith, scf
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.parser import Parser

from tilemma.compiler.driver.gemm_generator import GemmSpec
from tilemma.compiler.runtime.ptxas import run_ptxas
from tilemma.compiler.universe import make_context
from tilemma.dialects import warp
from tilemma.passes.warp import unroll_sparse
from tilemma.passes.warp.loop_clone import unroll

from tests.wgmma_cases import compiled, like_the_sm90_kernel, needs_ptxas, warp_module


@register_impls
class _Unsigned(InterpreterFunctions):
    """arith.divui and arith.remui, which xDSL's arith interpreter lacks (index values: non-negative)."""

    @impl(arith.DivUIOp)
    def run_divui(self, interpreter, op, args):
        return (args[0] // args[1],)

    @impl(arith.RemUIOp)
    def run_remui(self, interpreter, op, args):
        return (args[0] % args[1],)


LOOP = """func.func @f(%lb: index, %ub: index) -> (index, index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c9 = arith.constant 9 : index
  {bounds}
  %r:2 = scf.for %i = %lo to %hi step %c1 iter_args(%a = %c1, %b = %c0) -> (index, index) {{
    %t = arith.muli %a, %c3 : index
    %u = arith.addi %t, %i : index
    %v = arith.remui %u, %c9 : index
    %w = arith.addi %b, %a : index
    scf.yield %v, %w : index, index
  }}
  func.return %r#0, %r#1 : index, index
}}"""
ARGS = "%lo = arith.addi %lb, %c0 : index\n  %hi = arith.addi %ub, %c0 : index"
CONSTANTS = "%lo = arith.constant {} : index\n  %hi = arith.constant {} : index"


def _run(text: str, lb: int, ub: int, factor: int = 0):
    module = Parser(make_context(), text).parse_module()
    if factor:
        [loop] = [o for o in module.walk() if isinstance(o, scf.ForOp)]
        unroll(loop, factor)
        module.verify()
    interpreter = Interpreter(module)
    for functions in (_Unsigned(), ArithFunctions(), ScfFunctions(), FuncFunctions()):
        interpreter.register_implementations(functions)
    loops = [o for o in module.walk() if isinstance(o, scf.ForOp)]
    return interpreter.call_op("f", (lb, ub)), loops


@pytest.mark.parametrize("factor", [2, 3])
@pytest.mark.parametrize("known", [False, True], ids=["at-run-time", "constant"])
def test_unroll_keeps_the_loops_values(factor, known):
    """Every trip count from 0 to 10, and a loop from 2: the unrolled loop's results are the
    loop's; with constant bounds a second loop only where whole groups leave iterations over."""
    for lb, ub in [(0, n) for n in range(11)] + [(2, 9)]:
        text = LOOP.format(bounds=CONSTANTS.format(lb, ub) if known else ARGS)
        want, _ = _run(text, lb, ub)
        got, loops = _run(text, lb, ub, factor)
        assert got == want, (lb, ub)
        assert len(loops) == (1 + bool((ub - lb) // factor and (ub - lb) % factor) if known else 2), (lb, ub)


def _sparse(m=512, n=4096, k=4096, t="f16", **kw) -> GemmSpec:
    return GemmSpec(m, n, k, t, t, "f32", pre_compressed=True, **kw)


def _warp_ir(spec: GemmSpec, **kw):
    """The warp IR of `spec` without a producer warpgroup (which narrow sparse kernels take by
    themselves: their consumers' loops are unrolled alike, tests/test_specialize.py)."""
    return warp_module(spec, wgmma=True, **{"producers": 0, **kw})


def test_sparse_loops_are_unrolled_by_two():
    """512 x 4096 x 4096: 32 stages of K 128, a stage in flight; the pipelined loop runs 31 of them,
    15 unrolled pairs (each copy its own metadata words) and one left over with nothing running,
    after a `warp.wgmma_wait`; the last (peeled) stage and the wait after it as before."""
    module = _warp_ir(_sparse())
    loops = [o for o in module.walk() if isinstance(o, scf.ForOp)]
    assert len(loops) == 2
    main, rest = loops
    for loop, count, pending in ((main, 2, 1), (rest, 1, 0)):
        body = loop.body.block.ops
        mmas = [o for o in body if isinstance(o, warp.WgmmaOp)]
        assert [o.pending.value.data for o in mmas] == [pending] * count
        metas = [o for o in body if isinstance(o, warp.LoadMetaSharedOp)]
        assert len(metas) == count and len({r for o in metas for r in o.results}) == 4 * count
    assert [o.step.owner.value.value.data for o in loops] == [2, 1]
    before = rest.iter_args[0].owner
    assert isinstance(before, warp.WgmmaWaitOp) and before.accs[0] in main.results


def test_the_unrolled_loop_retires_its_products_as_it_ends():
    """3 stages: the pipelined loop's 2 iterations are one pair, none left over; its products
    retire before the last stage's mmas (without, ptxas serializes the kernel: `CONFIGURATIONS`)."""
    module = _warp_ir(_sparse(128, 128, 384))
    [loop] = [o for o in module.walk() if isinstance(o, scf.ForOp)]
    after = loop.next_op
    assert isinstance(after, warp.WgmmaWaitOp) and list(after.accs) == list(loop.results)
    assert all(u.operation is after for r in loop.results for u in r.uses)


def test_dense_loops_are_left_alone():
    dense = _warp_ir(GemmSpec(512, 4096, 4096, "f16", "f16", "f32"))
    assert [o.step.owner.value.value.data for o in dense.walk() if isinstance(o, scf.ForOp)] == [1]


def test_unrolled_twice_is_unrolled_once():
    module = _warp_ir(_sparse())
    text = str(module)
    unroll_sparse.WarpUnrollSparse().apply(make_context(), module)
    assert str(module) == text


def _without_the_pass(monkeypatch):
    monkeypatch.setattr(unroll_sparse.WarpUnrollSparse, "apply", lambda self, ctx, op: None)


def test_warp_to_ptx_refuses_a_loop_not_unrolled(monkeypatch):
    """A located error at the kernel (the loop is a pass's, with no source line)."""
    from tilemma.compiler.driver.diagnostics import LocatedVerifyError

    _without_the_pass(monkeypatch)
    with pytest.raises(LocatedVerifyError, match=r"_f32:2:3: error: func.func: run warp-unroll-sparse before warp-to-ptx"):
        compiled(_sparse(), wgmma=True)


CONFIGURATIONS = {  # the stage counts and loops that leave products running
    "pipelined-odd": (_sparse(), {}),  # 31 iterations in the loop: one left over
    "pipelined-even": (_sparse(128, 128, 384), {}),  # 2: none left over, the last stage straight after
    "b-col": (_sparse(4096, 4096, 4096, b_layout="col"), {"producers": 0}),  # 4 stages of K 64, 8 warps
    "default": (_sparse(4096, 4096, 4096), {}),  # 128 x 256 CTAs of 4 K 64 stages, producers
    "specialized": (_sparse(), {"producers": 4}),  # the consumers' loop, 32 iterations
    "specialized-odd": (_sparse(k=4096 + 128), {"producers": 4}),  # 33: one left over
}


@needs_ptxas
@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_ptxas_keeps_the_wgmma_pipeline(name, monkeypatch):
    """No wgmma serialized (C7511/C7513). The pipelined loop not unrolled draws C7513 (the check
    can fail); ptxas does not see the specialized consumers' loop not unrolled (an H200 computed
    wrong products with it: the emulator's test below finds it)."""
    spec, kw = CONFIGURATIONS[name]
    kernel = compiled(spec, wgmma=True, **kw)
    assert "wgmma.wait_group.sync.aligned 1;" in kernel.ptx
    log = run_ptxas(kernel.ptx, "sm_90a", ("-v",)).log
    assert "C751" not in log, log
    if "producers=4" in kernel.abi.config:
        return
    _without_the_pass(monkeypatch)
    monkeypatch.setattr("tilemma.passes.warp_to_ptx.lower.meta_overwritten", lambda loop: False)
    log = run_ptxas(compiled(spec, wgmma=True, **kw).ptx, "sm_90a", ("-v",)).log
    assert re.search(r"C7513\).*non wgmma instructions defining input registers", log), log


@pytest.mark.parametrize("kw", [{}, {"producers": 4}], ids=["pipelined", "specialized"])
def test_the_emulator_finds_the_loop_not_unrolled(kw, monkeypatch):
    from tilemma.compiler.driver.runner import run_compiled
    from tilemma.compiler.verify.emulator import EmulationError

    _without_the_pass(monkeypatch)
    monkeypatch.setattr("tilemma.passes.warp_to_ptx.lower.meta_overwritten", lambda loop: False)
    kernel = compiled(_sparse(128, 128, 1024), wgmma=True, **kw)
    assert "wgmma.wait_group.sync.aligned 1;" in kernel.ptx
    with pytest.raises(EmulationError, match="sp-meta register"):
        run_compiled(kernel, 3, "emulator")


STAGE_COUNTS = {  # K 128 stages, 4 in the ring (a stage in flight): the loops' trip counts
    "one": (_sparse(128, 128, 128), {}),  # no loop
    "two": (_sparse(128, 128, 256), {}),  # the pipelined loop: one iteration, left over
    "three": (_sparse(130, 136, 300), {}),  # ragged; one unrolled pair
    "eight": (_sparse(128, 128, 1024), {}),  # 7: three pairs, one left over
    "nine": (_sparse(64, 256, 1100, "bf16"), {}),  # 8: four pairs
    "specialized-odd": (_sparse(128, 128, 1100), {"producers": 4}),  # 9: four pairs, one left
    "b-col": (_sparse(130, 200, 700, b_layout="col"), {"warps": "8x1", "warp_tile": "1x32"}),  # K 64, 11
}


@pytest.mark.parametrize("name", STAGE_COUNTS)
def test_emulated_like_the_mma_sp_kernel(name):
    spec, kw = STAGE_COUNTS[name]
    kernel = compiled(spec, wgmma=True, **kw)
    assert "stages=4" in kernel.abi.config
    like_the_sm90_kernel(spec, kw, "emulator", 13, "wgmma.mma_async.sp", "mma.sp")
