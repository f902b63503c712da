"""The pre-compressed sparse A (`tile.sparse_from`) on the GPU, simple and staged, f16 and bf16,
odd sizes, batches with broadcast and 2048^3: every element against the reference on the
decompressed A (and, where the emulator is proven bit-exact, the GPU's words against it)."""

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
    result = run_compiled(kernel, 2, "gpu")
    print(result.line(), kernel.abi.config)
    return result


@pytest.mark.parametrize("stages", [0, -1], ids=["simple", "staged"])
@pytest.mark.parametrize("t", ["f16", "bf16"])
@pytest.mark.parametrize("size", [(130, 70, 200), (37, 91, 150), (257, 129, 333)], ids=str)
def test_odd_size(size, t, stages):
    assert _run(GemmSpec(*size, t, t, "f32", pre_compressed=True), stages).ok


@pytest.mark.parametrize("stages", [0, -1], ids=["simple", "staged"])
@pytest.mark.parametrize("bcast", [None, "a", "b"])
def test_batch(bcast, stages):
    assert _run(GemmSpec(61, 40, 130, "f16", "f16", "f32", batch=3, bcast=bcast, pre_compressed=True), stages).ok


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_full_size_staged(t):
    assert _run(GemmSpec(2048, 2048, 2048, t, t, "f32", pre_compressed=True), -1).ok
