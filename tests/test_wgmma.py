"""Stages multiplied by warpgroups (`--wgmma`, `#warp.schedule` mma = wgmma, sm_90a): what
`tile-plan` chooses and refuses, the PTX (descriptors, the proxy fence, 1024-byte stages), and in the
emulator the kernels' D bit for bit as the mma.sync kernels' of the same problem (both add each k16
step as the tensor cores do, in K order; tools/wgmma_probe.py showed wgmma's arithmetic to be
mma.sync's on an H200) and within the reference's bound, at odd sizes, both B orders, bf16, split-K,
batches and an epilogue. (GPU: tests/gpu/test_wgmma_gpu.py.)"""

import re

import numpy as np
import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.runner import run_compiled

from tests.wgmma_cases import assert_assembles_without_spills, assert_refused_at_the_mma, compiled, like_the_sm90_kernel, needs_ptxas, schedule


@pytest.mark.parametrize("m, n, k, b_layout, warps, warp_tile, stages", [
    (4096, 4096, 4096, "row", (8, 1), (1, 32), 4),  # the default: 128 x 256 CTAs
    (512, 4096, 4096, "row", (8, 1), (1, 16), 4),  # fewer CTAs than SMs: m64n128 warpgroups
    (4096, 4096, 4096, "col", (8, 1), (1, 32), 4),
    (37, 72, 64, "row", (4, 1), (1, 16), 4),  # one warpgroup; an N-major B in whole 64-column blocks
    (37, 72, 64, "col", (4, 1), (1, 9), 4),  # a K-major B cut to N
])
def test_plan_tiles(m, n, k, b_layout, warps, warp_tile, stages):
    s = schedule(GemmSpec(m, n, k, "f16", "f16", "f32", b_layout=b_layout), wgmma=True)
    assert (s.mma, s.warps, s.warp_tile, s.stages, s.stage_k) == ("wgmma", warps, warp_tile, stages, 64)


@pytest.mark.parametrize("spec, sm, kw, mma", [
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32"), "90a", {}, "wgmma"),  # sm_90a, from 256 rows: by itself
    (GemmSpec(256, 512, 128, "bf16", "bf16", "f32", b_layout="col"), "90a", {}, "wgmma"),
    (GemmSpec(128, 4096, 4096, "f16", "f16", "f32"), "90a", {}, "sync"),  # fewer rows: mma.sync wins there
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32"), "90", {}, "sync"),  # sm_90 has no wgmma
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32"), "90a", {"warps": "2x2"}, "sync"),  # a forced configuration
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32"), "90a", {"stages": 3}, "sync"),
    (GemmSpec(4096, 4096, 4096, "s8", "s8", "s32"), "90a", {}, "wgmma"),  # 8-bit N-major B: its transpose
    # both 8-bit operands in the other order: A from registers, B transposed in shared memory
    (GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", a_layout="col"), "90a", {}, "wgmma"),
    (GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", a_layout="col"), "90a", {"shared_transpose": False,
                                                                           "transpose_first": 0}, "sync"),
    (GemmSpec(4096, 4096, 4096, "f64", "f64", "f64", b_layout="col"), "90a", {}, "sync"),
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", a_layout="col"), "90a", {}, "wgmma"),  # A M-major too
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", a_layout="col"), "90a", {"split_k": 1, "stage_k": 32}, "sync"),
])
def test_sm90a_takes_the_warpgroups_where_they_win(spec, sm, kw, mma):
    assert schedule(spec, sm, **kw).mma == mma


@pytest.mark.parametrize("spec, kw, message", [
    (GemmSpec(64, 64, 64, "f16", "f16", "f32"), {"sm": "90"}, "the warpgroup mma is the arch-specific target sm_90a's, not sm_90's"),
    (GemmSpec(64, 64, 64, "f16", "f16", "f16"), {}, "the warpgroups here take bf16 x bf16 -> f32, f16 x f16 -> f32"),
    (GemmSpec(64, 64, 64, "f64", "f64", "f64", b_layout="col"), {}, "the warpgroups here take"),
    (GemmSpec(64, 64, 63, "f16", "f16", "f32"), {}, "4-byte aligned"),
    (GemmSpec(64, 64, 64, "f16", "f16", "f32"), {"warps": "2x2", "warp_tile": "1x8"}, "warps W x 1"),
    (GemmSpec(64, 64, 64, "f16", "f16", "f32"), {"warps": "4x1", "warp_tile": "1x4"}, "blocks of 64 columns"),
    (GemmSpec(64, 64, 64, "f16", "f16", "f32"), {"stage_k": 32}, "stages of 128-byte K rows"),
    (GemmSpec(64, 64, 64, "f16", "f16", "f32"), {"stages": 0}, "stages=0 cannot take it"),
    (GemmSpec(64, 64, 64, "f16", "f16", "f32"), {"warps": "8x1", "warp_tile": "1x32", "stages": 5},
     "bytes of shared memory"),
])
def test_refusals_are_located(spec, kw, message):
    sm = kw.pop("sm", "90a")
    assert_refused_at_the_mma(spec, message, sm, **kw)


def test_ptx():
    """Descriptors in the 128-byte-swizzle mode, SBO 1024; the N-major B's LBO is its 64-column
    block (K 64 x 128 bytes) and its K steps 16 rows (2048 bytes) apart, the A's 32 bytes; the
    copies' fence before the barrier; the dynamic shared memory 1024-byte aligned."""
    kernel = compiled(GemmSpec(256, 256, 256, "f16", "f16", "f32"), wgmma=True, producers=0)  # (one role)
    ptx = kernel.ptx
    assert ".target sm_90a" in ptx and ".extern .shared .align 1024 .b8 smem[];" in ptx
    assert re.search(r"cp\.async\.wait_group \d+;\n\s*fence\.proxy\.async\.shared::cta;\n\s*bar\.sync 0;", ptx)
    a_bits = (1 << 62) | (1024 >> 4 << 32) | (16 >> 4 << 16)
    b_bits = (1 << 62) | (1024 >> 4 << 32) | (64 * 128 >> 4 << 16)
    assert re.search(rf"or\.b64 %rd\d+, %rd\d+, {a_bits};", ptx) and re.search(rf"or\.b64 %rd\d+, %rd\d+, {b_bits};", ptx)
    body = ptx[ptx.index("wgmma.fence"):]
    assert [int(x) for x in re.findall(r"add\.s64 %rd\d+, %rd\d+, (\d+);", body)[:6]] == [2, 128, 4, 256, 6, 384]
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") % 4 == 0
    assert "ldmatrix" not in ptx and not re.search(r"^\s*mma\.sync", ptx, re.M)
    assert kernel.variant == "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"


@needs_ptxas
@pytest.mark.parametrize("b_layout, n", [("row", 256), ("col", 200)])
def test_ptxas_takes_it(b_layout, n):
    assert_assembles_without_spills(compiled(GemmSpec(300, n, 192, "bf16", "bf16", "f32", b_layout=b_layout),
                                             wgmma=True).ptx)


CASES = {  # spec, options
    "b-row-odd": (GemmSpec(70, 136, 200, "f16", "f16", "f32"), {}),
    "b-col-odd": (GemmSpec(70, 100, 200, "f16", "f16", "f32", b_layout="col"), {}),
    "bf16-two-groups": (GemmSpec(130, 192, 136, "bf16", "bf16", "f32"), {"warps": "8x1", "warp_tile": "1x32",
                                                                          "stages": 2}),
    "split-k": (GemmSpec(16, 128, 1024, "f16", "f16", "f32"), {"split_k": 4}),
    # K of many stages: the ring refilled while a stage's products still run (3 and 4 stages)
    "long-k-3-stages": (GemmSpec(64, 128, 1088, "f16", "f16", "f32"), {"stages": 3}),
    "long-k": (GemmSpec(64, 64, 1024, "bf16", "bf16", "f32", b_layout="col"), {}),
    "batched": (GemmSpec(64, 64, 128, "bf16", "bf16", "f32", batch=2, b_layout="col"), {}),
    # an M-major A: K x 64 blocks of rows, read with imm-trans-a
    "a-col-odd": (GemmSpec(70, 136, 200, "f16", "f16", "f32", a_layout="col"), {}),
    "a-col-b-col-two-groups": (GemmSpec(130, 72, 1088, "bf16", "bf16", "f32", a_layout="col", b_layout="col"),
                               {"warps": "8x1"}),
    "no-c": (GemmSpec(64, 128, 64, "f16", "f16", "f32", c=False), {}),
    "epilogue": (GemmSpec(96, 64, 128, "f16", "f16", "f32", bias="col", act="relu", out="f16"), {}),
}


@pytest.mark.parametrize("name", CASES)
def test_emulated_like_the_mma_sync_kernel(name):
    spec, kw = CASES[name]
    like_the_sm90_kernel(spec, kw, "emulator", 5, "wgmma.mma_async", "mma.sync")


def test_the_check_catches_a_wrong_descriptor():
    """The N-major B's blocks LBO apart: with LBO and SBO swapped (which the H200 also got wrong)
    the emulated D is caught."""
    kernel = compiled(GemmSpec(64, 128, 64, "f16", "f16", "f32"), wgmma=True)
    good = (1 << 62) | (1024 >> 4 << 32) | (64 * 128 >> 4 << 16)
    bad = (1 << 62) | (64 * 128 >> 4 << 32) | (1024 >> 4 << 16)
    assert str(good) in kernel.ptx
    import dataclasses
    broken = dataclasses.replace(kernel, ptx=kernel.ptx.replace(str(good), str(bad)))
    try:
        result = run_compiled(broken, seed=1, on="emulator")
    except Exception:  # noqa: BLE001 - a read outside the stages is caught as well
        return
    assert not result.ok


def test_api():
    """`tilemma.compile(..., wgmma=True)`: the kernel names its instruction, and `emulate` runs it
    (sm_90's arithmetic, the only one the warpgroup model has) to the reference's bound."""
    import tilemma

    spec = GemmSpec(128, 136, 64, "f16", "f16", "f32", c=False)
    [k] = tilemma.compile(str(gemm_module(spec)), sm="90a", wgmma=True)
    assert k.instruction == "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"
    rng = np.random.default_rng(2)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 136)).astype(np.float16)
    d = np.zeros((128, 136), np.float32)
    k.emulate(a, b, d)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = 64 * 2.0**-23 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert (np.abs(d - exact) <= bound).all()


@needs_ptxas
@pytest.mark.parametrize("spec", [
    GemmSpec(4096, 4096, 4096, "f16", "f16", "f32"),
    GemmSpec(4096, 4096, 4096, "bf16", "bf16", "f32", a_layout="col", b_layout="col"),
    GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", b_layout="col"),
    GemmSpec(4096, 4096, 4096, "tf32", "tf32", "f32", b_layout="col", rounding="trunc"),
    GemmSpec(4096, 4096, 4096, "tf32", "tf32", "f32", rounding="rna"),
    GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True),
    GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True, b_layout="col"),
    GemmSpec(512, 4096, 4096, "f16", "f16", "f32", pre_compressed=True),
    GemmSpec(130, 200, 300, "f16", "f16", "f32", pre_compressed=True),
    GemmSpec(512, 4096, 4096, "f16", "f16", "f32"),
], ids=lambda s: s.name)
def test_ptxas_keeps_the_default_kernels_wgmmas_asynchronous(spec):
    """sm_90a's own choice for these problems assembles without ptxas serializing its wgmmas
    (C7510-C7515, which it reports only as info: default sparse kernels were, unnoticed) or
    ignoring setmaxnreg (C7508)."""
    from tilemma.compiler.runtime.ptxas import run_ptxas

    kernel = compiled(spec)
    assert "wgmma.mma_async" in kernel.ptx
    log = run_ptxas(kernel.ptx, "sm_90a", ("-v",)).log
    assert not re.search(r"\(C75\d\d\)", log), log
