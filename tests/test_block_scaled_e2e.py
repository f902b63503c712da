"""fp6/fp4 `.kind::f8f6f4` and block-scaled (`.kind::mxf8f6f4`, `mxf4`, `mxf4nvf4`) GEMMs, dense and
2:4-sparse, compiled for sm_120a: each assembles with ptxas and matches the reference in the CPU
emulator, every element compared. No GPU we can reach runs these instructions (they need sm_120a);
the GPU tests in tests/gpu/ are ready for one that does."""

import itertools

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.runtime.ptxas import find_ptxas, run_ptxas
from tilemma.compiler.driver.runner import run_compiled

NARROW = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
# Unscaled pairs that need .kind::f8f6f4 (two fp8 operands use the plain fp8 instruction).
F8F6F4 = [(a, b) for a, b in itertools.product(NARROW, NARROW) if not {a, b} <= {"e4m3", "e5m2"}]
# Sparse block-scaled kernels (in-kernel 2:4 compression of A, three times a dense kernel's PTX)
# run two diagonals of the 5 x 5 type square: every type as A and as B twice, so every per-operand
# path of the lowering (A's compression and packing, B's packing, each scale) runs; the dense form
# runs all 25 pairs, and test_emulator_block_scaled runs every sparse variant's arithmetic.
SPARSE_SCALED_PAIRS = [(a, NARROW[(i + d) % 5]) for d in (0, 1) for i, a in enumerate(NARROW)]
EVERY_SCALED = (  # every pair, dense and sparse: what an sm_120a GPU runs (tests/gpu)
    [(a, b, "ue8m0", 32, False) for a, b in itertools.product(NARROW, NARROW)]  # mxf8f6f4 / mxf4
    + [("e2m1", "e2m1", "ue4m3", 16, False)]  # mxf4nvf4 4X
    + [(a, b, "ue8m0", 64, True) for a, b in itertools.product(NARROW, NARROW)]  # sparse mxf8f6f4 / mxf4
)
SCALED = [c for c in EVERY_SCALED if not c[4] or c[:2] in SPARSE_SCALED_PAIRS]


def test_the_sparse_scaled_cases_cover_every_type_as_a_and_as_b():
    for side in (0, 1):
        assert sorted(p[side] for p in SPARSE_SCALED_PAIRS) == sorted(NARROW * 2)
    assert len(set(SPARSE_SCALED_PAIRS)) == 10 and ("e2m1", "e2m1") in SPARSE_SCALED_PAIRS
# Pair-wise 4:8 sparse e2m1: the sparse mxf4 (2X, ue8m0) and mxf4nvf4 (4X, ue4m3) kinds.
SPARSE_MXF4 = [("ue8m0", 64, "mxf4"), ("ue4m3", 32, "mxf4nvf4")]


def _check(spec: GemmSpec, expect_kind: str):
    module = gemm_module(spec)
    [kernel] = compile_text(str(module), spec.name, CompileOptions(sm="120a"))
    assert f".kind::{expect_kind}" in kernel.variant or expect_kind in kernel.variant, kernel.variant
    if find_ptxas() is not None:
        assembled = run_ptxas(kernel.ptx, "sm_120a")
        assert assembled.ok, assembled.log
    result = run_compiled(kernel, 7, "emulator")
    assert result.ok, result.line()


# Each unscaled pair once, in one of the four (sparse, accumulator) forms, chosen so that each form
# runs every type as A and as B: a form takes whole diagonals of the 5 x 5 type square (b's index
# minus a's; a diagonal holds each type once as A and once as B), the two fp8-only pairs a diagonal
# lacks made up by four pairs run a second time. The block-scaled tests below run every pair again (dense).
def _diagonal(d: int) -> list[tuple[str, str]]:
    return [(a, NARROW[(i + d) % 5]) for i, a in enumerate(NARROW) if (a, NARROW[(i + d) % 5]) in F8F6F4]


FORMS = {
    (False, "f32"): _diagonal(2),
    (True, "f32"): _diagonal(3),
    (False, "f16"): _diagonal(1) + _diagonal(4),
    (True, "f16"): _diagonal(0) + [("e4m3", "e2m1"), ("e2m1", "e4m3"), ("e5m2", "e3m2"), ("e3m2", "e5m2")],
}
F8F6F4_CASES = [(a, b, sparse, acc) for (sparse, acc), pairs in FORMS.items() for a, b in pairs]


def test_the_unscaled_cases_cover_every_type_in_every_form():
    for form, pairs in FORMS.items():
        assert {a for a, _ in pairs} == {b for _, b in pairs} == set(NARROW), form
    assert {(a, b) for a, b, *_ in F8F6F4_CASES} == set(F8F6F4)


@pytest.mark.parametrize("a, b, sparse, acc", F8F6F4_CASES,
                         ids=[f"{a}x{b}-{'sparse' if s else 'dense'}-{acc}" for a, b, s, acc in F8F6F4_CASES])
def test_kind_f8f6f4(a, b, sparse, acc):
    _check(GemmSpec(21, 13, 70, a, b, acc, sparse_a=sparse, prune=sparse), "f8f6f4")


@pytest.mark.parametrize(
    "a, b, scale, block, sparse", SCALED,
    ids=[f"{'sp-' if s else ''}{a}x{b}-{sc}-{blk}" for a, b, sc, blk, s in SCALED],
)
def test_block_scaled(a, b, scale, block, sparse):
    kind = "mxf" if (a, b) != ("e2m1", "e2m1") or scale == "ue8m0" else "mxf4nvf4"
    spec = GemmSpec(21, 13, 150, a, b, "f32", batch=2, bcast="b", sparse_a=sparse, prune=sparse,
                    scale=scale, scale_block=block)
    _check(spec, kind)


@pytest.mark.parametrize("prune", [False, True], ids=["checked", "pruned"])
@pytest.mark.parametrize("scale, block, kind", SPARSE_MXF4, ids=[k for _, _, k in SPARSE_MXF4])
def test_sparse_packed_e2m1(scale, block, kind, prune):
    spec = GemmSpec(21, 13, 300, "e2m1", "e2m1", "f32", batch=2, bcast="a", sparse_a=True,
                    prune=prune, scale=scale, scale_block=block, sparse_pattern="4:8")
    _check(spec, f"mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::{kind}")
