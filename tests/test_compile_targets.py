"""`tilemma compile` output assembles with ptxas on every target where the ISA table says the
chosen instruction is legal, and selection refuses (with a reason) exactly where it is not."""

import pytest

from tests import dense_cases, sparse_cases
from tests.dense_cases import DENSE_SM90, case_id
from tests.ptxas_batch import assemble_each
from tilemma.compiler.core import isa
from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.gemm_generator import gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.runtime.ptxas import find_ptxas
from tilemma.compiler.core.targets import parse_sm
from tilemma.compiler.core.elements import ELEMENTS

# sm_86 is left out: its instructions are sm_80's and its limits (99 KiB a CTA) sm_89's, both here;
# sm_100a too: its mma.sync and mma.sp variants and limits are sm_90's (the ISA audit,
# tests/test_isa_ptxas.py, checks its table against ptxas; tests/test_target_limits.py compiles for it)
TARGETS = ("75", "80", "89", "90", "120a")

pytestmark = pytest.mark.ptxas


def _table_has_legal(case, sm: str, sparse: bool = False) -> bool:
    a, b, acc, shape, extra = case
    widened = (
        {"si4": "si8", "ui4": "ui8"} if parse_sm(sm).limits.int4_mma == "emulated" and shape is None and not sparse
        else {}
    )
    forms = ("sp", "sp::ordered_metadata") if sparse else (None,)
    want = (ELEMENTS[widened.get(a, a)].ptx, ELEMENTS[widened.get(b, b)].ptx, ELEMENTS[acc].ptx)
    return any(
        (v.atype, v.btype, v.dtype) == want
        and v.sparse in forms and v.kind is None and v.rounding is None
        and (shape is None or v.shape == shape)
        and v.satfinite == bool(extra.get("satfinite"))
        and v.bitop == extra.get("popc")
        for v in isa.legal_variants(sm)
    )


def _compile(cases, family_cases, sm):
    """Each case compiled for `sm` (odd sizes, a batch and a broadcast operand: every addressing
    form a kernel has; small, test_emulator's batch size, since each of the ~450 kernels is
    compiled and assembled) and assembled: (case, kernel, ptxas' result) where it compiled,
    (case, None, the refusal) where it did not. The kernels are assembled together
    (tests/ptxas_batch.py)."""
    out = []
    for case in family_cases:
        spec = cases.spec_for(case, 13, 17, 300 if case[0] == "i1" else 29, batch=2, bcast="a")
        try:
            [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm=sm))
        except LocatedVerifyError as e:
            out.append((case, None, str(e)))
            continue
        out.append((case, kernel, None))
    compiled = [i for i, (_, kernel, _) in enumerate(out) if kernel is not None]
    assembled = assemble_each([out[i][1].ptx for i in compiled], parse_sm(sm).name)
    for i, result in zip(compiled, assembled):
        out[i] = (out[i][0], out[i][1], result)
    return out


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (pip install nvidia-cuda-nvcc)")
@pytest.mark.parametrize("sm", TARGETS)
def test_every_dense_family_assembles_where_legal(sm):
    results = _compile(dense_cases, DENSE_SM90, sm)
    compiled = 0
    for case, kernel, outcome in results:
        legal = _table_has_legal(case, sm)
        if kernel is None:
            assert not legal, f"{case_id(case)} on sm_{sm}: table has a legal variant but: {outcome}"
            assert "no mma.sync variant" in outcome or "no mma.sp variant" in outcome
            continue
        assert legal, f"{case_id(case)} compiled for sm_{sm} though the table has no legal variant"
        assert outcome.ok, f"{case_id(case)} on sm_{sm}: {kernel.variant}\n{outcome.log}"
        assert not isa.check(kernel.variant, sm)
        compiled += 1
    assert compiled > 0


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (pip install nvidia-cuda-nvcc)")
@pytest.mark.parametrize("sm", TARGETS)
def test_every_sparse_family_assembles_where_legal(sm):
    results = _compile(sparse_cases, sparse_cases.SPARSE_SM90, sm)
    for case, kernel, outcome in results:
        legal = _table_has_legal(case, sm, sparse=True)
        if kernel is None:
            assert not legal and "no mma.sp variant" in outcome, (case, sm, outcome)
            continue
        assert legal and outcome.ok, f"{sparse_cases.case_id(case)} on sm_{sm}: {kernel.variant}\n{outcome.log}"
        assert kernel.variant.startswith("mma.sp::ordered_metadata.")
