"""8-bit integers multiplied by warpgroups (`wgmma.mma_async ... m64nNk32.s32.{s8,u8}`, sm_90a):
what `tile-plan` chooses and refuses (K-major A and B: the integer forms have no transposes; an
M-major A taken from registers, read from its stage as stored by byte pairs; an N-major B only
when asked, staged K-major by the transposing fill),
the PTX (no immediates after scale-d; K steps 32 bytes), ptxas, and in the emulator D equal to the
mma.sync kernel's word for word (both exact: the int32 sum, wrapped; tools/wgmma_probe.py showed
wgmma's to be that on an H200). (GPU: tests/gpu/test_wgmma_gpu.py.)"""

import re

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec

from tilemma.compiler.runtime.ptxas import run_ptxas

from tests.wgmma_cases import assert_assembles_without_spills, assert_refused_at_the_mma, compiled, like_the_sm90_kernel, needs_ptxas, schedule


def spec(m, n, k, t="s8", **kw) -> GemmSpec:
    return GemmSpec(m, n, k, t, t, "s32", **{"b_layout": "col", **kw})


@pytest.mark.parametrize("s, sm, kw, want", [
    (spec(4096, 4096, 4096), "90a", {}, ("wgmma", (8, 1), (1, 32), 4, 128)),  # by itself from 512 rows
    (spec(512, 4096, 4096, "u8"), "90a", {}, ("wgmma", (8, 1), (1, 16), 4, 128)),  # fewer CTAs than SMs
    (spec(257, 129, 4096), "90a", {}, ("sync",)),  # fewer rows: mma.sync (its split K)
    (spec(4096, 4096, 4096), "90", {}, ("sync",)),  # sm_90 has no wgmma
    (spec(4096, 4096, 4096, b_layout="row"), "90a", {}, ("wgmma", (8, 1), (1, 32), 4, 128)),  # its transpose
    (spec(4096, 264, 4096, b_layout="row"), "90a", {}, ("sync",)),  # ... not for 264 columns: byte pairs
    (spec(4096, 4096, 4096, a_layout="col"), "90a", {}, ("wgmma", (8, 1), (1, 32), 4, 128)),  # A from registers
    # B transposed first (`tile-transpose-first`): the A-M-major kernel on its K-major copy
    (spec(4096, 4096, 4096, a_layout="col", b_layout="row"), "90a", {}, ("wgmma", (8, 1), (1, 32), 4, 128)),
    # not: B transposed in shared memory by a producer warpgroup (3 stages fit beside its K-major ring)
    (spec(4096, 4096, 4096, a_layout="col", b_layout="row"), "90a", {"transpose_first": 0},
     ("wgmma", (8, 1), (1, 32), 3, 128)),
    (spec(4096, 4096, 4096, a_layout="col", b_layout="row"), "90a", {"shared_transpose": False, "transpose_first": 0},
     ("sync",)),  # the fill loses
    (spec(4096, 4096, 4096, b_layout="row"), "90a", {"wgmma": True}, ("wgmma", (8, 1), (1, 32), 3, 128)),
    (spec(4096, 4096, 4096, b_layout="row"), "90a", {"wgmma": True, "shared_transpose": False},
     ("wgmma", (8, 1), (1, 32), 4, 128)),  # filled
])
def test_plan(s, sm, kw, want):
    got = schedule(s, sm, **kw)
    assert (got.mma, got.warps, got.warp_tile, got.stages, got.stage_k)[:len(want)] == want


def test_narrow_n_is_one_the_integer_form_takes():
    """N = 100 columns: the warp tile's N rounded up to m64n112 (ptxas takes 8, 16, 24 and multiples
    of 16 for 8-bit integers, not n104), masked past the edge; a forced n104 is a located error."""
    s = schedule(spec(1024, 100, 512), wgmma=True)
    assert s.warp_tile == (1, 14)
    assert_refused_at_the_mma(spec(1024, 104, 512), "m64n104 is no s8 wgmma", warps="8x1", warp_tile="1x13")


@needs_ptxas
def test_the_integer_n_table_is_ptxas_own():
    """wgmma_n_legal's integer N against ptxas, every multiple of 8 from 8 to 256 (s8 and u8)."""
    from tilemma.compiler.core.isa_rows import wgmma_n_legal
    from tools.wgmma_probe import int8_probe_ptx

    for etype in ("s8", "u8"):
        for n in range(8, 257, 8):
            text = int8_probe_ptx(n, etype)
            verdict = run_ptxas(text, "sm_90a")
            assert verdict.ok == wgmma_n_legal(etype, n), (etype, n, verdict.log[-200:])


def test_a_transposed_b_is_filled_k_major_and_an_m_major_a_read_from_registers():
    s = schedule(spec(256, 256, 256, b_layout="row", a_layout="col"), wgmma=True, shared_transpose=False)
    assert (s.mma, s.fill, s.pair_bytes) == ("wgmma", "b", "a")
    assert schedule(spec(256, 256, 256, a_layout="col"), pair_bytes=False, wgmma=True).fill == "a"  # without pairs


@pytest.mark.parametrize("s, kw, message", [
    (spec(64, 62, 128, b_layout="row"), {}, "4-byte aligned for cp.async (no gather)"),  # N not a multiple of 4
    (spec(62, 64, 128, a_layout="col"), {}, "4-byte aligned for cp.async (no gather)"),
    (spec(64, 64, 128), {"stage_k": 64}, "stage-k 128 for 8-bit operands"),
    (spec(256, 256, 512, a_layout="col"), {"producers": 4, "tma": 1}, "a swizzle no tensor map writes"),
    (GemmSpec(64, 64, 128, "e4m3", "e4m3", "f32", b_layout="col"), {}, "the warpgroups here take"),
])
def test_refusals_are_located(s, kw, message):
    assert_refused_at_the_mma(s, message, **kw)


def test_ptx():
    """The integer opcode with scale-d last (no immediates), s32 accumulators, both descriptors'
    K steps 32 bytes (2 units) along the 128-byte rows (128 K a stage: 4 steps)."""
    kernel = compiled(spec(256, 256, 512), wgmma=True)
    ptx = kernel.ptx
    calls = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.s32\.s8\.s8 \{[^}]*\}, %rd\d+, %rd\d+, %p\d+;", ptx)
    assert calls and len(calls) % 4 == 0
    body = ptx[ptx.index("wgmma.fence"):]
    assert [int(x) for x in re.findall(r"add\.s64 %rd\d+, %rd\d+, (\d+);", body)[:6]] == [2, 2, 4, 4, 6, 6]
    assert kernel.variant == "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8"


@needs_ptxas
def test_ptxas_takes_it():
    assert_assembles_without_spills(compiled(spec(4096, 4096, 4096), wgmma=True).ptx)


CASES = {  # spec, options
    "odd": (spec(130, 200, 300), {}),  # ragged M, N and K
    "b-row-filled": (spec(130, 200, 300, b_layout="row"), {}),  # the transposing fill stages B K-major
    "a-col-registers": (spec(136, 200, 320, "u8", a_layout="col"), {}),  # A from registers, by byte pairs
    "a-col-registers-unrolled": (spec(256, 264, 1024, a_layout="col"), {}),  # 8 stages: the loop unrolled by 2
    "a-col-b-row": (spec(136, 200, 320, a_layout="col", b_layout="row"), {}),  # A from registers, B filled
    "a-col-filled": (spec(136, 200, 320, "u8", a_layout="col"), {"pair_bytes": False}),
    "u8-batch": (spec(70, 136, 264, "u8", batch=2), {}),
    "in-flight": (spec(200, 264, 520), {"warps": "4x1", "warp_tile": "1x32", "stages": 3}),
    "wait-each": (spec(96, 64, 300, "u8"), {"stages": 2}),
}


@pytest.mark.parametrize("name", CASES)
def test_emulated_like_the_mma_sync_kernel(name):
    s, kw = CASES[name]
    result = like_the_sm90_kernel(s, kw, "emulator", 7, "wgmma.mma_async", "mma.sync")
    assert result.max_abs == 0, result.line()


def test_integer_accumulators_copied_where_not_updated_in_place():
    """A M-major, B K-major, sm_90a, no C: the accumulators start from a zero that is not theirs
    to update in place, copied into registers of the s32 accumulators' bank (b32; an internal
    error, KeyError 's32', before)."""
    from tilemma.compiler.driver.runner import run_compiled

    k = compiled(spec(512, 256, 128, a_layout="col", c=False))
    assert k.abi.instruction.startswith("wgmma.mma_async")
    result = run_compiled(k, seed=4, on="emulator")
    assert result.ok, result.line()
