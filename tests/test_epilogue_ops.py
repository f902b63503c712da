"""Every scalar op the epilogue lowering has, in one tile.map per element family, run in the
emulator and checked element by element against the interval reference (every output)."""

from __future__ import annotations

import pytest

from tests.epilogue_ops_cases import FAMILIES, kernel
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled

# Odd sizes: the first on the simple schedule (forced: 16-bit rows that are not 4-byte aligned
# would be gathered into shared memory by default), the second staged where the family stages
# (16-bit, tf32 and f64 row-major; s8 with its K-major B).
SIZES = [(37, 45, 29), (130, 72, 128)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("family", FAMILIES)
def test_every_epilogue_op_on_the_emulator(family, size):
    m, n, k = size
    if family == "s8":
        k = 32 * -(-k // 32)  # 8-bit K rows of a K-major B end on a 4-byte boundary
    simple = size == SIZES[0]
    [compiled] = compile_text(kernel(family, m, n, k), "ops.mlir", CompileOptions(sm="90", stages=0 if simple else -1))
    assert ("stages=0" in compiled.abi.config) == simple
    result = run_compiled(compiled, seed=7, on="emulator")
    assert result.ok, result.detail
    assert len(result.outputs) == (2 if family == "f64" else 4)
