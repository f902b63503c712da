"""Split-K: an output tile's K shared by several CTAs whose partial sums the last to arrive adds,
in split order, to C (`warp.split_k_publish`, `warp.split_k_sum`). In the emulator, against the
project's reference (every element; integers exactly), staged and simple, with an epilogue after
the sum; the counters left at 0 for the next launch; the automatic choice where tiles leave SMs
idle; C loaded after the partials are stored where a thread cannot hold both (no spills); and the
kernels it cannot serve refused with the reason. (On the GPU: tests/gpu/test_split_k_gpu.py.)"""

import re

import numpy as np
import pytest

import tilemma
from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled

from tests.wgmma_cases import assert_assembles_without_spills, needs_ptxas
from tests.wgmma_cases import compiled as wgmma_compiled


def compiled(spec: GemmSpec, **options):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", tune_cache="", **options))
    return kernel


CASES = {
    # staged f16 (three K 64 stages a split, the last one ragged), C loaded, ragged M and N
    "f16-staged": (GemmSpec(130, 72, 520, "f16", "f16", "f32"), 3, True),
    # the simple schedule (forced: by default N's odd rows would be gathered); K not a multiple of 16
    "f16-simple": (GemmSpec(37, 91, 300, "f16", "f16", "f32"), 4, False),
    # integers must come out exactly; K-major 8-bit B, staged; no C (a constant 0 joins the sum)
    "s8-exact": (GemmSpec(70, 40, 512, "s8", "s8", "s32", b_layout="col", c=False), 4, True),
    # f64: the sum of the splits in order, each an fma chain
    "f64": (GemmSpec(40, 24, 200, "f64", "f64", "f64"), 2, True),
    # 4-bit widened to the 8-bit mma in registers, 1-bit XOR popc, tf32 with a row-major B (load_shared)
    "s4-widened": (GemmSpec(40, 24, 512, "s4", "s4", "s32", b_layout="col"), 2, True),
    "b1-xor": (GemmSpec(40, 24, 2048, "b1", "b1", "s32", b_layout="col", popc="xor"), 2, True),
    "tf32": (GemmSpec(40, 24, 256, "tf32", "tf32", "f32"), 3, True),
    # batched, B broadcast: grid z is batch x split, a workspace slab and a counter per batch's tile
    "batched": (GemmSpec(37, 45, 300, "f16", "f16", "f32", batch=3, bcast="b"), 2, False),
    "batched-staged": (GemmSpec(64, 64, 512, "bf16", "bf16", "f32", batch=2), 2, True),
    # the epilogue (bias, GELU, f16 D) runs once, on the sum
    "epilogue": (GemmSpec(64, 48, 512, "bf16", "bf16", "f32", bias="col", act="gelu", out="f16"), 3, True),
}


@pytest.mark.parametrize("name", CASES)
def test_split_k_matches_the_reference(name):
    spec, splits, staged = CASES[name]
    kernel = compiled(spec, split_k=splits, **({} if staged else {"stages": 0}))
    assert kernel.grid[2] == splits * (spec.batch or 1) and f"split-k={splits}" in kernel.abi.config
    assert ("cp.async" in kernel.ptx) == staged
    assert "atom.global.add.u32" in kernel.ptx and "bar.red.or.pred" in kernel.ptx
    result = run_compiled(kernel, seed=3, on="emulator")  # also: the counters back at 0
    assert result.ok, result.line()


def test_the_last_cta_adds_the_partials_in_order_and_resets_the_counters():
    """Through the API, scratch provided by `emulate`, then by the caller: the same D, and the
    caller's counters hold 0 again; D equals C + the splits' partial products added in order (each
    partial from an unsplit kernel over that part of K)."""
    spec = GemmSpec(32, 16, 192, "f16", "f16", "f32")
    [kernel] = tilemma.compile(str(gemm_module(spec)), sm="90", split_k=3, stages=0, cache=False)
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((32, 192)) * 2.0 ** rng.integers(-8, 8, (32, 192))).astype(np.float16)
    b = rng.standard_normal((192, 16)).astype(np.float16)
    c = rng.standard_normal((32, 16)).astype(np.float32)
    d = np.full((32, 16), np.nan, np.float32)
    kernel.emulate(a, b, c, d)
    ws, counters = (np.zeros(p.shape, p.dtype) for p in kernel.abi.params[4:])
    d2 = np.full_like(d, np.nan)
    kernel.emulate(a, b, c, d2, ws, counters)
    np.testing.assert_array_equal(d.view(np.uint32), d2.view(np.uint32))
    assert not counters.any()
    want = c.copy()
    for part in range(3):  # split_chunk 64: three parts of K, each summed by the mma from zero
        ks = slice(64 * part, 64 * part + 64)
        [one] = tilemma.compile(str(gemm_module(GemmSpec(32, 16, 64, "f16", "f16", "f32", c=False))), sm="90",
                                stages=0, split_k=1, cache=False)
        p = np.zeros((32, 16), np.float32)
        one.emulate(np.ascontiguousarray(a[:, ks]), np.ascontiguousarray(b[ks]), p)
        want = (want + p).astype(np.float32)
    np.testing.assert_array_equal(d.view(np.uint32), want.view(np.uint32))


def test_automatic_split_where_tiles_leave_sms_idle():
    decode = compiled(GemmSpec(16, 4096, 4096, "f16", "f16", "f32"))
    assert decode.grid[2] > 1 and decode.grid[0] * decode.grid[1] * decode.grid[2] >= 64
    assert "split-k" in decode.abi.config
    assert compiled(GemmSpec(16, 4096, 512, "f16", "f16", "f32")).grid[2] == 1  # K too short to pay
    assert compiled(GemmSpec(4096, 4096, 4096, "f16", "f16", "f32")).grid[2] == 1  # tiles fill the SMs
    assert compiled(GemmSpec(16, 4096, 4096, "f16", "f16", "f32"), split_k=1).grid[2] == 1  # asked for none


@pytest.mark.parametrize("spec, why", [
    (GemmSpec(64, 64, 256, "f16", "f16", "f16"), "f16 accumulator would round"),
    (GemmSpec(16384, 16384, 4096, "f16", "f16", "f32"), "workspace would hold"),
    (GemmSpec(64, 64, 256, "s8", "s8", "s32", b_layout="col", satfinite=True), "satfinite"),
    (GemmSpec(64, 64, 256, "f16", "f16", "f32", sparse_a=True, prune=True), "sparse"),
    (GemmSpec(64, 64, 256, "f16", "f16", "f32", dynamic="mnk"), "known only at launch"),
    (GemmSpec(64, 64, 16, "f16", "f16", "f32"), "nothing to split"),
])
def test_what_cannot_be_split_says_why(spec, why):
    with pytest.raises(LocatedVerifyError, match=f"split-k=(2|16): .*{why}"):
        compiled(spec, split_k=16 if spec.m == 16384 else 2)


@needs_ptxas
@pytest.mark.parametrize("spec, after", [
    (GemmSpec(512, 4096, 4096, "tf32", "tf32", "f32", a_layout="col"), True),  # split 2, both operands filled
    (GemmSpec(128, 11008, 4096, "tf32", "tf32", "f32", b_layout="col"), True),  # split 3, cp.async
    (GemmSpec(16, 4096, 4096, "f16", "f16", "f32"), False),  # decode: 32 accumulators a thread
])
def test_c_is_loaded_after_the_publish_where_a_thread_cannot_hold_both(spec, after):
    """The 128 x 256 tf32 warpgroup kernels (128 accumulators a thread) load C after
    `warp.split_k_publish` has stored the partials and let the last CTA on: holding both, they
    spilled 770-784 bytes at 255 registers. Kernels with room load it before, where its loads
    overlap the publish (the decode kernel ran 14% slower with it after)."""
    kernel = wgmma_compiled(spec)
    assert kernel.grid[2] > 1
    leave = kernel.ptx.index(" ret;", kernel.ptx.index("// split-K"))
    c_load = re.compile(r"ld\.global(\.v2)?\.f32")
    assert bool(c_load.search(kernel.ptx[:leave])) != after
    assert bool(c_load.search(kernel.ptx[leave:])) == after
    assert_assembles_without_spills(kernel.ptx)
