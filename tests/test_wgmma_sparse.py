"""A pre-compressed 2:4 A (`tile.sparse_from`) multiplied by sparse warpgroups
(`wgmma.mma_async.sp`, sm_90a), with an N-major or a K-major B: what `tile-plan` chooses and
refuses, the PTX (the .sp opcode with each warp's metadata word and selector 0; A's descriptors in
the 128-byte swizzle for stages of K 128, the 64-byte one for K 64), ptxas, and in the emulator the kernels' D bit for bit as the
mma.sp kernels' of the same problem (tools/wgmma_probe.py showed wgmma.sp's arithmetic to be
mma.sp m16n8k32's, a k32 step at a time, on an H200) and within the reference's bound. (That the
kernel follows the metadata it is given: tests/test_sparse_precompressed.py.) (GPU: tests/gpu/test_wgmma_gpu.py.)"""

import re

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec

from tests.wgmma_cases import assert_assembles_without_spills, assert_refused_at_the_mma, compiled, like_the_sm90_kernel, needs_ptxas, schedule


def spec(m, n, k, t="f16", **kw) -> GemmSpec:
    return GemmSpec(m, n, k, t, t, "f32", pre_compressed=True, **kw)


@pytest.mark.parametrize("m, n, k, kw, warps, warp_tile, stages, stage_k, producers", [
    # the default: 128 x 256 CTAs, producers, a ring of 5 stages of K 64 (`configs.WGMMA_PRODUCER_STAGES`)
    (4096, 4096, 4096, {}, (8, 1), (1, 32), 5, 64, 4),
    (4096, 4096, 4096, {"producers": 0}, (8, 1), (1, 32), 4, 64, 0),  # ... 4 without producers
    (512, 4096, 4096, {}, (8, 1), (1, 16), 4, 128, 4),  # fewer CTAs than SMs: two warpgroups, 4 stages of K 128
    (130, 200, 300, {}, (8, 1), (1, 16), 4, 128, 0),  # no more warpgroups than 64-row blocks (3), narrow
    (40, 64, 64, {}, (4, 1), (1, 8), 4, 128, 0),  # one warpgroup, one 64-column block of B
])
def test_plan_tiles(m, n, k, kw, warps, warp_tile, stages, stage_k, producers):
    s = schedule(spec(m, n, k), wgmma=True, **kw)
    assert (s.mma, s.warps, s.warp_tile, s.stages, s.stage_k, s.producers) == (
        "wgmma", warps, warp_tile, stages, stage_k, producers)


@pytest.mark.parametrize("m, n, k, warps, warp_tile, stages", [
    (4096, 4096, 4096, (8, 1), (1, 32), 5),  # 128 x 256 CTAs, a ring of 5 stages of K 64 with producers
    (512, 4096, 4096, (8, 1), (1, 16), 4),  # fewer CTAs than SMs: m64n128, 4 stages
    (45, 33, 90, (4, 1), (1, 5), 4),  # a K-major B cut to N
])
def test_plan_tiles_k_major_b(m, n, k, warps, warp_tile, stages):
    s = schedule(spec(m, n, k, b_layout="col"), wgmma=True)
    assert (s.mma, s.warps, s.warp_tile, s.stages, s.stage_k) == ("wgmma", warps, warp_tile, stages, 64)
    assert s.producers == (4 if warps == (8, 1) else 0)  # two consumer warpgroups, B's stages whole


@pytest.mark.parametrize("s, sm, kw, mma", [
    (spec(4096, 4096, 4096), "90a", {}, "wgmma"),  # sm_90a, from 256 rows: by itself
    (spec(256, 512, 256, "bf16"), "90a", {}, "wgmma"),
    (spec(16, 4096, 4096), "90a", {}, "wgmma"),  # from 16 rows (`configs.WGMMA_MIN_ROWS`)
    (spec(8, 4096, 4096), "90a", {}, "sync"),  # fewer rows: mma.sp
    (spec(4096, 4096, 4096), "90", {}, "sync"),  # sm_90 has no wgmma
    (spec(4096, 4096, 4096, b_layout="col"), "90a", {}, "wgmma"),  # a K-major B: stages of K 64
    (spec(128, 4096, 4096, b_layout="col"), "90a", {}, "sync"),  # ... from 512 rows
    (spec(4096, 4096, 4096), "90a", {"stages": 3}, "sync"),  # a forced configuration
])
def test_sm90a_takes_the_sparse_warpgroups_where_they_can(s, sm, kw, mma):
    assert schedule(s, sm, **kw).mma == mma


@pytest.mark.parametrize("s, kw, message", [
    (spec(64, 64, 128, b_layout="col"), {"stage_k": 128}, "with a K-major B a pre-compressed A's stages are K 64"),
    (spec(64, 64, 128), {"stage_k": 32}, "a pre-compressed A's stages are K 128 or 64"),
    (spec(64, 64, 128), {"stage_k": 256}, "a pre-compressed A's stages are K 128 or 64"),
    (spec(64, 64, 128), {"sm": "90"}, "the arch-specific target sm_90a's"),
    (spec(256, 256, 128), {"warps": "8x1", "warp_tile": "1x32", "stages": 3, "stage_k": 128}, "bytes of shared memory"),
])
def test_refusals_are_located(s, kw, message):
    sm = kw.pop("sm", "90a")
    assert_refused_at_the_mma(s, message, sm, **kw)


@pytest.mark.parametrize("stage_k, a_bits", [
    (128, (1 << 62) | (1024 >> 4 << 32) | (16 >> 4 << 16)),  # the kept values' 128-byte rows
    (64, (2 << 62) | (512 >> 4 << 32) | (16 >> 4 << 16)),  # 64-byte rows: the 64-byte swizzle
])
def test_ptx(stage_k, a_bits):
    """The .sp opcode with each K step's metadata register and selector 0; A's descriptors of the
    stage's row bytes; the N-major B's LBO its 64-column block (K x 128 bytes), its k32 steps 32
    rows (4096 bytes, 256 in descriptor units) apart, A's 32 bytes (2); one ld.shared.v4 (K 128) or
    .v2 (K 64) of metadata words a stage."""
    kernel = compiled(spec(256, 256, 512), wgmma=True, stage_k=stage_k, stages=2)
    ptx = kernel.ptx
    b_bits = (1 << 62) | (1024 >> 4 << 32) | (stage_k * 128 >> 4 << 16)
    assert re.search(rf"or\.b64 %rd\d+, %rd\d+, {a_bits};", ptx) and re.search(rf"or\.b64 %rd\d+, %rd\d+, {b_bits};", ptx)
    steps = stage_k // 32
    words = re.findall(r"ld\.shared\.v(\d)\.u32 \{([^}]*)\}", ptx)
    assert words and all(int(v) == steps for v, _ in words)
    calls = re.findall(r"wgmma\.mma_async\.sp\.sync\.aligned\.m64n128k32\.f32\.f16\.f16 \{[^}]*\}, %rd\d+, %rd\d+, "
                       r"(%r\d+), 0, %p\d+, 1, 1, 0, 1;", ptx)
    assert len(calls) % steps == 0 and calls[:steps] == [w.strip() for w in words[0][1].split(",")]
    body = ptx[ptx.index("wgmma.fence"):]
    assert [int(x) for x in re.findall(r"add\.s64 %rd\d+, %rd\d+, (\d+);", body)[:2]] == [2, 256]
    assert kernel.variant == "wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.f16.f16"


@needs_ptxas
@pytest.mark.parametrize("kw", [{}, {"warps": "8x1", "warp_tile": "1x32", "stages": 4, "stage_k": 64}],
                         ids=["default", "k64"])
def test_ptxas_takes_it(kw):
    assert_assembles_without_spills(compiled(spec(4096, 4096, 4096), wgmma=True, **kw).ptx)


CASES = {  # spec, options
    "odd": (spec(130, 200, 300), {}),  # ragged M, N and K (K pads to 320: a partial last stage)
    # the default's kernel where its CTAs fill the SMs (`test_producers_by_themselves`): 128 x 256
    # CTAs of 4 K 64 stages, a stage in flight, a producer warpgroup; 11 stages, N ragged
    "wide-producers": (spec(256, 500, 700), {"warps": "8x1", "warp_tile": "1x32", "stages": 4, "stage_k": 64,
                                             "producers": 4}),
    "bf16-batch-bcast": (spec(70, 136, 200, "bf16", batch=2, bcast="a"), {}),
    "k64-stages": (spec(130, 200, 300), {"stage_k": 64, "stages": 4}),  # A in the 64-byte swizzle
    "in-flight": (spec(200, 264, 520, "bf16"), {"warps": "4x1", "warp_tile": "1x32", "stages": 3, "stage_k": 64}),
    "tall-ctas": (spec(300, 136, 520), {"warps": "16x1", "warp_tile": "1x16", "stages": 2, "stage_k": 128}),  # 256 x 128
    "epilogue": (spec(96, 64, 128, bias="col", act="gelu", out="f16"), {}),
    "b-col-odd": (spec(130, 200, 300, b_layout="col"), {}),  # K-major B: stages of K 64
    "b-col-narrow": (spec(45, 33, 90, "bf16", b_layout="col", batch=2), {}),  # m64n40k32
    "b-col-in-flight": (spec(300, 136, 520, b_layout="col"), {"warps": "8x1", "warp_tile": "1x32", "stages": 3}),
}


@pytest.mark.parametrize("name", CASES)
def test_emulated_like_the_mma_sp_kernel(name):
    s, kw = CASES[name]
    like_the_sm90_kernel(s, kw, "emulator", 7, "wgmma.mma_async.sp", "mma.sp")


@pytest.mark.parametrize("m, n, k, b_layout, producers", [
    (4096, 4096, 4096, "row", 4),  # the default's 128 x 256 CTAs, B's stages whole: a producer warpgroup
    (4096, 4096, 4096, "col", 4),
    (4000, 4096, 4096, "row", 4),  # a ragged M leaves B's stages whole
    (4000, 4000, 4000, "row", 0),  # N not a multiple of 256
    (4096, 4096, 1000, "col", 0),  # K not a multiple of 64
    (512, 4096, 4096, "row", 4),  # the narrow CTAs (128 x 128) in one wave
    (512, 4096, 4096, "col", 4),
    (768, 4096, 4096, "row", 4),  # past a wave, one CTA an SM (K 128 stages) with them or without
    (768, 4096, 4096, "col", 0),  # ... two an SM without them (K 64 stages): none
    (64, 11008, 4096, "row", 0),  # one consumer warpgroup
])
def test_producers_by_themselves(m, n, k, b_layout, producers):
    """`configs.WGMMA_PRODUCERS` where they cost no residency (`producers_by_themselves`; H200:
    faster there, slower with ragged B stages or past a wave where two CTAs would share an SM)."""
    assert schedule(spec(m, n, k, b_layout=b_layout)).producers == producers
    assert schedule(spec(m, n, k, b_layout=b_layout), producers=0).producers == 0
