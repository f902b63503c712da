"""Each step of the tile -> warp chain on the GPU (sm_90): the staged loop of
`warp-stage-shared`, the pipelined one and the prefetched one (`tests/test_pass_chain.py`'s cases)
give every element of the reference and, bit for bit, the same words as each other."""

import numpy as np
import pytest

from tilemma.compiler.runtime import cuda_runtime
from tests.test_pass_chain import CASES, chain_words

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"
    ),
]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_step_of_the_chain_on_the_gpu(name):
    words = chain_words(name, "gpu")
    assert all(np.array_equal(words[0], w) for w in words[1:]), name
