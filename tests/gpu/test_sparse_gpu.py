"""Every sparse (mma.sp) family compiled by tilemma and run on the GPU, every element checked
against the dense reference of the (checked or pruned) A; both sparse forms; odd sizes, batches
with broadcast, 2048^3; and the run-time report of a group that breaks the pattern."""

import pytest

from tests.sparse_cases import SPARSE_SM90, case_id, spec_for
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.driver.gemm_generator import gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"
    ),
]


def _run(spec, form="ordered", on="gpu", seed=2, break_sparsity=None):
    module = gemm_module(spec)
    [kernel] = compile_text(str(module), spec.name, CompileOptions(sm="90", ptx="9.0", sparse_form=form))
    result = run_compiled(kernel, seed, on, break_sparsity)
    print(result.line())
    return result


@pytest.mark.parametrize("form", ["ordered", "sp"])
@pytest.mark.parametrize("case", SPARSE_SM90, ids=case_id)
def test_odd_size(case, form):
    result = _run(spec_for(case, 37, 91, 150), form)
    assert result.ok, result.line()
    assert result.variant.startswith("mma.sp::ordered_metadata." if form == "ordered" else "mma.sp.sync")


@pytest.mark.parametrize("case", SPARSE_SM90, ids=case_id)
def test_batch_broadcast(case):
    result = _run(spec_for(case, 29, 40, 70, batch=3, bcast="a"))
    assert result.ok, result.line()


@pytest.mark.parametrize("case", [c for c in SPARSE_SM90 if not c[4]][:4], ids=case_id)
def test_full_gpu_size(case):
    result = _run(spec_for(case, 2048, 2048, 2048))
    assert result.ok, result.line()


def test_pattern_violation_is_reported():
    case = ("f16", "f16", "f32", "m16n8k32", {})
    result = _run(spec_for(case, 37, 91, 150), break_sparsity=(0, 21, 17))
    assert not result.ok
    assert "A is not 2:4 sparse: row 21, group 17 (columns 68..71)" in result.detail, result.line()
