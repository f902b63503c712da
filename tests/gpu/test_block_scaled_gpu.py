"""fp6/fp4 and block-scaled GEMMs on a GPU that runs them (sm_120 / sm_121). No such GPU is within
reach today (our GPU is sm_90), so these skip with that reason; the same kernels are checked in
the emulator by tests/test_block_scaled_e2e.py."""

import pytest

from tests.test_block_scaled_e2e import EVERY_SCALED, F8F6F4, SPARSE_MXF4
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled


def _sm120_reason() -> str | None:
    if not cuda_runtime.gpu_available():
        return f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"
    arch = cuda_runtime.device_arch()
    if arch not in ("sm_120", "sm_121"):
        return f"needs an sm_120/sm_121 GPU for .kind::f8f6f4 and block scaling; this one is {arch}"
    return None


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_sm120_reason() is not None, reason=str(_sm120_reason()))]


def _run(spec: GemmSpec):
    module = gemm_module(spec)
    target = cuda_runtime.device_arch() + "a"
    [kernel] = compile_text(str(module), spec.name, CompileOptions(sm=target))
    result = run_compiled(kernel, 7, "gpu")
    assert result.ok, result.line()


@pytest.mark.parametrize("a, b", F8F6F4)
@pytest.mark.parametrize("sparse", [False, True])
def test_kind_f8f6f4_gpu(a, b, sparse):
    _run(GemmSpec(37, 91, 150, a, b, "f32", sparse_a=sparse, prune=sparse))


@pytest.mark.parametrize("a, b, scale, block, sparse", EVERY_SCALED)
def test_block_scaled_gpu(a, b, scale, block, sparse):
    _run(GemmSpec(37, 91, 150, a, b, "f32", batch=2, bcast="b", sparse_a=sparse, prune=sparse,
                  scale=scale, scale_block=block))


@pytest.mark.parametrize("scale, block, kind", SPARSE_MXF4)
def test_sparse_packed_e2m1_gpu(scale, block, kind):
    _run(GemmSpec(37, 91, 300, "e2m1", "e2m1", "f32", sparse_a=True, prune=True, scale=scale,
                  scale_block=block, sparse_pattern="4:8"))
