"""The every-op epilogue kernels (`tests/epilogue_ops_cases.py`) on the GPU: every output element
within the interval reference, and - where the emulator's arithmetic is proven - the GPU's words
equal to the emulator's (`runner._gpu_twin_differs`)."""

from __future__ import annotations

import pytest

from tests.epilogue_ops_cases import FAMILIES, kernel
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify import emulator

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]

SIZES = [(37, 45, 29), (130, 72, 128), (257, 129, 320)]


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "approx"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("family", FAMILIES)
def test_every_epilogue_op_on_the_gpu(family, size, exact):
    """Every output within the interval reference; the exact kernels (no `.approx` instruction)
    also equal, word for word, what the emulator computes from the same inputs."""
    if family == "f64" and not exact:
        pytest.skip("the f64 body has no approximate functions: its kernel is the exact one")
    m, n, k = size
    if family == "s8":
        k = 32 * -(-k // 32)
    [compiled] = compile_text(kernel(family, m, n, k, exact), "ops.mlir", CompileOptions(sm="90"))
    approximate = emulator.compile_entry(compiled.ptx, compiled.name).approximate
    assert bool(approximate) != exact, sorted(approximate)  # the exact kernels do get the bitwise comparison
    result = run_compiled(compiled, seed=11, on="gpu")
    assert result.ok, result.detail
