"""Sparse GEMMs compiled for sm_80, sm_90 and sm_120a and run in the CPU emulator against the
dense reference of the (checked or pruned) A, every element compared: the CI numerics of the
sparse path. Also: a group that breaks the pattern is reported, with its position."""

import pytest

from tests.sparse_cases import SPARSE_SM90, case_id, spec_for
from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.gemm_generator import gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled


def _run(spec, sm, form="ordered", break_sparsity=None):
    module = gemm_module(spec)
    try:
        [kernel] = compile_text(str(module), spec.name, CompileOptions(sm=sm, sparse_form=form))
    except LocatedVerifyError as e:
        assert "no mma.sp variant" in str(e)
        pytest.skip(f"not legal on sm_{sm}: {e.message}")
    return run_compiled(kernel, 5, "emulator", break_sparsity)


@pytest.mark.parametrize("sm", ["80", "90", "120a"])
@pytest.mark.parametrize("case", SPARSE_SM90, ids=case_id)
def test_sparse_family_in_emulator(case, sm):
    result = _run(spec_for(case, 19, 23, 75), sm)
    assert result.ok, result.line()


@pytest.mark.parametrize("case", SPARSE_SM90[::3], ids=case_id)
def test_batch_broadcast_plain_sp(case):
    result = _run(spec_for(case, 17, 9, 40, batch=2, bcast="a"), "90", form="sp")
    assert result.ok and result.variant.startswith("mma.sp.sync"), result.line()


@pytest.mark.parametrize(
    "case, where, message",
    [
        (SPARSE_SM90[0], (0, 5, 3), "A is not 2:4 sparse: row 5, group 3 (columns 12..15)"),
        (SPARSE_SM90[4], (1, 7, 10), "A is not 1:2 sparse: batch 1, row 7, group 10 (columns 20..21)"),
        (SPARSE_SM90[9], (0, 18, 1), "A is not 4:8 sparse: row 18, group 1 (columns 8..15) has more than 2 nonzero pairs"),
    ],
    ids=["f16", "tf32-batched", "s4-pairs"],
)
def test_pattern_violation_reported(case, where, message):
    batched = where[0] > 0
    spec = spec_for(case, 19, 23, 75, batch=2 if batched else None, bcast="b" if batched else None)
    result = _run(spec, "90", break_sparsity=where)
    assert not result.ok and message in result.detail, result.line()
