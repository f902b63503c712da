"""Every dense family, compiled by tilemma and run on the GPU, every output element checked.

Odd sizes (not multiples of any instruction shape, a batch of 3 with a broadcast operand) and one
size that fills the GPU. Skipped (with the reason) where there is no GPU.
"""

import pytest

from tests.dense_cases import DENSE_SM90, case_id, spec_for
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


def _run(spec, seed=1):
    module = gemm_module(spec)
    major, minor = cuda_runtime.driver_max_ptx()
    ptx = min((9, 0), (major, minor))
    [kernel] = compile_text(str(module), spec.name, CompileOptions(sm="90", ptx=f"{ptx[0]}.{ptx[1]}"))
    result = run_compiled(kernel, seed, "gpu")
    print(result.line())
    return result


@pytest.mark.parametrize("case", DENSE_SM90, ids=case_id)
def test_odd_size(case):
    k = 300 if case[0] == "i1" else 53
    result = _run(spec_for(case, 37, 91, k))
    assert result.ok, result.line()


@pytest.mark.parametrize("case", DENSE_SM90, ids=case_id)
def test_batch_broadcast(case):
    k = 300 if case[0] == "i1" else 45
    result = _run(spec_for(case, 29, 40, k, batch=3, bcast="b" if case[0] != "f16" else "a"))
    assert result.ok, result.line()


@pytest.mark.parametrize(
    "case", [c for c in DENSE_SM90 if c[3] in (None, "m16n8k16", "m16n8k32", "m16n8k256")], ids=case_id
)
def test_full_gpu_size(case):
    result = _run(spec_for(case, 2048, 2048, 2048))
    assert result.ok, result.line()


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
def test_f32_operands(precision):
    """f32 inputs on tf32 units: rounded (tf32) or split into three mmas (3xtf32), checked against
    the reference of what each promises (tf32-rounded inputs, resp. the f32 inputs themselves)."""
    from tilemma.compiler.driver.gemm_generator import GemmSpec

    spec = GemmSpec(37, 91, 53, "f32", "f32", "f32", batch=2, bcast="b")
    module = gemm_module(spec)
    [kernel] = compile_text(str(module), spec.name, CompileOptions(sm="90", ptx="9.0", f32_precision=precision))
    result = run_compiled(kernel, 3, "gpu")
    print(result.line())
    assert result.ok, result.line()


@pytest.mark.parametrize("layout", ["row", "col"])
def test_tf32_trunc_is_rz_on_the_tensor_cores(layout):
    """`--rounding trunc` (no cvt: the f32 registers go to the mma as they are) gives, on the GPU,
    the bits the cvt.rz kernel gives and the emulator's (which reads a tf32 register's top 19
    bits): random f32 operands over 60 binades, every low 13 bits set somewhere."""
    import numpy as np

    from tilemma.compiler.driver.gemm_generator import GemmSpec

    rng = np.random.default_rng(4)
    m, n, k = 130, 70, 200
    a = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-30, 30, (m, k)))).astype(np.float32)
    b = (rng.standard_normal((k, n)) * np.exp2(rng.integers(-30, 30, (k, n)))).astype(np.float32)
    words = {}
    for rounding in ("trunc", "rz"):
        spec = GemmSpec(m, n, k, "tf32", "tf32", "f32", b_layout=layout, rounding=rounding, c=False)
        [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", ptx="9.0"))
        for on in ("gpu", "emulator"):
            res = run_compiled(kernel, 3, on, inputs={"a": a, "b": b})
            assert res.ok, res.line()
            words[(rounding, on)] = np.ascontiguousarray(res.outputs["d"]).view(np.uint32)
    want = words[("rz", "gpu")]
    for key, got in words.items():
        assert np.array_equal(got, want), f"{key}: {np.count_nonzero(got != want)} words differ"
