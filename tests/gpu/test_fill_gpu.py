"""The transposing fill and the gather on the GPU: 8- and 4-bit operands stored M- or N-contiguous, and
8- or 16-bit rows not 4-byte aligned, staged through registers (`warp.fill_load` /
`warp.fill_store`), give D bit for bit as the emulator computes it (the runner's twin check), at
odd sizes, with split-K, batched, and for fp8; the fill's bytes loaded one by one where M or N
is odd. (An N-major 8-bit B is read by byte-pair ldmatrix by default, tests/gpu/test_pair_bytes_gpu.py;
these ask for the fill.)"""

import re

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.runtime import cuda_runtime

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]

CASES = [  # (spec, the operands filled)
    (GemmSpec(130, 72, 200, "s8", "s8", "s32"), "b"),
    (GemmSpec(132, 96, 300, "s8", "s8", "s32", a_layout="col", b_layout="col"), "a"),
    (GemmSpec(132, 100, 260, "s8", "u8", "s32", a_layout="col"), "ab"),
    (GemmSpec(100, 68, 96, "e4m3", "e5m2", "f32"), "b"),
    (GemmSpec(16, 4096, 4096, "s8", "s8", "s32"), "b"),  # split-K (the automatic choice)
    (GemmSpec(100, 64, 96, "s8", "s8", "s32", batch=3), "b"),
    (GemmSpec(1024, 1024, 1024, "u8", "u8", "s32", a_layout="col"), "ab"),
    # 4-bit integers (nibbles interleaved, then bytes transposed), widened to the s8 mma on sm_90
    (GemmSpec(136, 80, 384, "s4", "s4", "s32"), "b"),
    (GemmSpec(136, 96, 264, "u4", "s4", "s32", a_layout="col", b_layout="col"), "a"),
    (GemmSpec(136, 80, 328, "s4", "u4", "s32", a_layout="col"), "ab"),
    (GemmSpec(16, 4096, 4096, "s4", "s4", "s32"), "b"),  # split-K
    (GemmSpec(40, 64, 256, "u4", "u4", "s32", batch=3), "b"),
    (GemmSpec(72, 80, 256, "u4", "s4", "s32", a_layout="col", shape="m16n8k64"), "ab"),  # the s4 mma itself
    (GemmSpec(512, 4096, 1024, "s4", "s4", "s32", a_layout="col", b_layout="col"), "a"),  # stage K doubled
]


@pytest.mark.parametrize("spec, fill", CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_fill_on_the_gpu_is_the_emulators_bits(spec, fill):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", pair_bytes=False))
    # the fill's transposes are its prmts; staged (no fragment loads from global memory)
    assert kernel.ptx.count("prmt.b32") and "stages=0" not in kernel.abi.config, kernel.abi.config
    assert kernel.ptx.count("ld.global.b32") and bool(re.search(r"cp\.async\.c[ag]\.shared", kernel.ptx)) == (fill != "ab")
    result = run_compiled(kernel, seed=5, on="gpu")
    assert result.ok, result.line()


BY_ELEMENT = [  # 8-bit operands the fill transposes whose lines are not 4-byte aligned or end inside a word
    GemmSpec(37, 91, 53, "s8", "s8", "s32"),
    GemmSpec(130, 91, 200, "s8", "u8", "s32", a_layout="col"),
    GemmSpec(1000, 1001, 999, "s8", "s8", "s32"),
    GemmSpec(16, 4095, 4096, "s8", "s8", "s32"),  # split-K
    GemmSpec(37, 91, 53, "e4m3", "e5m2", "f32"),
]


@pytest.mark.parametrize("spec", BY_ELEMENT, ids=lambda s: s.name)
def test_fill_by_element_on_the_gpu_is_the_emulators_bits(spec):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", pair_bytes=False))
    assert "stages=0" not in kernel.abi.config and "ld.global.u8" in kernel.ptx and "prmt.b32" in kernel.ptx
    result = run_compiled(kernel, seed=7, on="gpu")
    assert result.ok, result.line()


GATHER = [  # (spec, the element loads): rows that are not 4-byte aligned, gathered
    GemmSpec(130, 71, 200, "f16", "f16", "f32"),
    GemmSpec(64, 64, 99, "bf16", "bf16", "f32"),
    GemmSpec(65, 72, 96, "f16", "f16", "f32", a_layout="col"),
    GemmSpec(64, 40, 97, "f16", "f16", "f32", b_layout="col"),
    GemmSpec(64, 40, 99, "s8", "s8", "s32", b_layout="col"),
    GemmSpec(257, 129, 4096, "f16", "f16", "f32"),  # split-K too
    GemmSpec(1000, 1001, 999, "bf16", "bf16", "f32"),
]


@pytest.mark.parametrize("spec", GATHER, ids=lambda s: s.name)
def test_gather_on_the_gpu_is_the_emulators_bits(spec):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", pair_bytes=False))
    assert "stages=0" not in kernel.abi.config and "prmt.b32" in kernel.ptx, kernel.abi.config
    result = run_compiled(kernel, seed=6, on="gpu")
    assert result.ok, result.line()
