"""Each step of the tile -> warp chain on the GPU (sm_90): the staged loop of
`warp-stage-shared`, the pipelined one and the prefetched one (`tests/test_pass_chain.py`'s cases)
give every element of the reference and, bit for bit, the same words as each other."""

import numpy as np
import pytest

from tilemma.compiler.driver.gemm_generator import gemm_module
from tilemma.compiler.driver.pipeline import compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.runtime import cuda_runtime
from tilemma.passes.warp.pipeline import WarpPipeline
from tilemma.passes.warp.prefetch import WarpPrefetchFragments
from tests.test_pass_chain import CASES, _Without

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"
    ),
]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_step_of_the_chain_on_the_gpu(name):
    spec, sm, config = CASES[name]
    text = str(gemm_module(spec))
    words = []
    for skip in ((WarpPipeline, WarpPrefetchFragments), (WarpPrefetchFragments,), ()):
        [kernel] = compile_text(text, spec.name, _Without(sm=sm, skip=skip, **config))
        result = run_compiled(kernel, seed=5, on="gpu")
        assert result.ok, (name, skip, result.detail)
        [out] = list(result.outputs.values())
        words.append(np.ascontiguousarray(out).view(np.uint8))
    assert all(np.array_equal(words[0], w) for w in words[1:]), name
