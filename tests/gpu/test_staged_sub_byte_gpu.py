"""Staged 4- and 1-bit kernels on the GPU (sm_90): b1 m16n8k256, s4/u4 m16n8k64 (asked for by
shape: sm_90 runs it, slowly), and s4/u4 the sm_90 way (4-bit stages, fragments widened to s8/u8 in
registers for m16n8k32), simple and staged, odd sizes, batches with broadcast and 2048^3: every
element against the exact integer reference."""

import pytest

from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"
    ),
]


def _run(spec, stages):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", ptx="9.0", stages=stages))
    assert ("cp.async" in kernel.ptx) == (stages != 0)
    result = run_compiled(kernel, 2, "gpu")
    print(result.line(), kernel.abi.config)
    return result


def _spec(m, n, k, t, **kw):
    if t == "b1":
        kw.setdefault("popc", "xor")
    else:
        kw.setdefault("shape", "m16n8k64")
    return GemmSpec(m, n, k, t, t, "s32", b_layout="col", **kw)


@pytest.mark.parametrize("stages", [0, -1], ids=["simple", "staged"])
@pytest.mark.parametrize("t,size", [("b1", (130, 70, 544)), ("b1", (257, 129, 1056)), ("s4", (130, 70, 200)),
                                    ("u4", (257, 129, 328))], ids=str)
def test_odd_size(t, size, stages):
    assert _run(_spec(*size, t), stages).ok


@pytest.mark.parametrize("bcast", [None, "a", "b"])
def test_batch(bcast):
    assert _run(_spec(61, 40, 800, "b1", popc="and", batch=3, bcast=bcast), -1).ok


@pytest.mark.parametrize("t", ["b1", "s4"])
def test_full_size_staged(t):
    assert _run(_spec(2048, 2048, 2048, t), -1).ok


@pytest.mark.parametrize("stages", [0, -1], ids=["simple", "staged"])
@pytest.mark.parametrize("t,size,batch", [("s4", (130, 70, 200), None), ("u4", (257, 129, 328), None),
                                          ("s4", (61, 40, 264), 3), ("s4", (2048, 2048, 2048), None)], ids=str)
def test_widened(t, size, batch, stages):
    spec = GemmSpec(*size, t, t, "s32", b_layout="col", batch=batch)
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", ptx="9.0", stages=stages))
    assert ".s8.s8." in kernel.ptx or ".u8.u8." in kernel.ptx
    assert ("cp.async" in kernel.ptx) == (stages != 0)
    result = run_compiled(kernel, 2, "gpu")
    print(result.line(), kernel.abi.config)
    assert result.ok
