"""An 8-bit N-major B transposed in shared memory by the producer warpgroup (`warp.transpose_stage`)
on an sm_90 GPU: D equals numpy's A @ B (+ C) wrapped to int32, every word, and the mma.sync
kernel's words, at the emulator tests' sizes (tests/test_transpose_stage.py) and a larger one."""

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec

from tests.test_transpose_stage import CASES, spec
from tests.wgmma_cases import compiled, exactly_a_times_b, is_sm90, schedule

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not is_sm90(), reason="needs an sm_90 GPU (wgmma is sm_90a's)")]

GPU_CASES = {**CASES, "1024-u8": (spec(1024, 1024, 1024, "u8", "u8"), {}), "4096x512x2048": (spec(4096, 512, 2048), {})}


@pytest.mark.parametrize("name", list(GPU_CASES))
def test_d_is_a_times_b_on_the_gpu(name):
    problem, options = GPU_CASES[name]
    assert schedule(problem, wgmma=True, **options).transpose == "b"
    exactly_a_times_b(problem, compiled(problem, wgmma=True, **options), "gpu", seed=11)


def test_the_default_kernel_on_the_gpu():
    """The kernel tile-plan chooses by itself (no --wgmma) at a size where it takes the transpose,
    B not transposed first (`tile-transpose-first`, tests/gpu/test_transpose_first_gpu.py)."""
    problem: GemmSpec = spec(4096, 2048, 256)
    assert schedule(problem, transpose_first=0).transpose == "b"
    exactly_a_times_b(problem, compiled(problem, transpose_first=0), "gpu", seed=2)
