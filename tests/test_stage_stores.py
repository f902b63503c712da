"""`warp-stage-stores` and `warp.store_staged`: warpgroup kernels store their accumulators through
each warp's shared slot, as whole rows. In the emulator (whose shared memory tracks, per byte,
which thread or warp wrote and read it since they last met) every word of D is the one the kernel
with plain stores gives, and the reference's; a kernel without either warp barrier, or with two
warps in one slot, is refused as a race; where the shared memory is full, or the mma is mma.sync,
the stores stay as they were."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.verify.emulator import EmulationError

from tests.wgmma_cases import compiled, needs_ptxas, schedule
from tilemma.compiler.runtime.ptxas import run_ptxas

CASES = {
    # 2:4 sparse, pre-compressed, producers copying by the TMA: one CTA a tile and persistent
    "sparse-tma": (GemmSpec(256, 512, 512, "f16", "f16", "f32", pre_compressed=True),
                   dict(producers=4, tma=1, warps="8x1", warp_tile="1x32")),
    "sparse-persistent": (GemmSpec(256, 512, 512, "f16", "f16", "f32", pre_compressed=True),
                          dict(producers=4, tma=1, warps="8x1", warp_tile="1x32", persistent=3)),
    # rows cut by the edge (each piece guarded), a batch, C read first
    "f16-ragged-rows": (GemmSpec(200, 264, 136, "f16", "f16", "f32", batch=2), {}),
    "bf16-ragged": (GemmSpec(130, 132, 72, "bf16", "bf16", "f32", c=False), {}),
    # 32-bit integers (b32 moves), an 8-bit K-major B
    "s8": (GemmSpec(136, 256, 128, "s8", "s8", "s32", b_layout="col"), {}),
    # tf32 from f32 operands
    "tf32": (GemmSpec(128, 136, 64, "f32", "f32", "f32"), dict(f32_precision="tf32")),
    # 16-bit outputs (eight fragments a store, one register a row): ragged rows; a persistent sparse one
    "f16-out-ragged": (GemmSpec(200, 264, 136, "f16", "f16", "f32", out="f16"), {}),
    "bf16-out": (GemmSpec(130, 136, 72, "bf16", "bf16", "f32", out="bf16", c=False), {}),
    "sparse-d16-persistent": (GemmSpec(256, 512, 512, "f16", "f16", "f32", pre_compressed=True, out="f16"),
                              dict(producers=4, tma=1, warps="8x1", warp_tile="1x32", persistent=3)),
}


def _same_words(want, got) -> bool:
    return all(np.array_equal(o.view(np.uint8), got.outputs[n].view(np.uint8)) for n, o in want.outputs.items())


def _pair(name: str):
    spec, kw = CASES[name]
    return compiled(spec, wgmma=True, **kw), compiled(spec, wgmma=True, staged_stores=False, **kw)


@pytest.mark.parametrize("name", list(CASES))
def test_staged_stores_give_the_plain_stores_words(name):
    staged, plain = _pair(name)
    assert "st.global.v2" not in staged.ptx and staged.ptx.count("bar.warp.sync -1;") >= 2
    assert "st.global.v4" not in plain.ptx and "bar.warp.sync" not in plain.ptx
    if "out" in name or "d16" in name:  # 16-bit values: one register a row piece, no 4-byte global stores left
        assert "st.shared.b32" in staged.ptx and "st.global.b32" not in staged.ptx and "st.global.b32" in plain.ptx
    assert staged.abi.shared_bytes >= plain.abi.shared_bytes + 8 * 16 * 32 * 4
    want, got = run_compiled(plain, 5, "emulator"), run_compiled(staged, 5, "emulator")
    assert want.ok and got.ok, (want.detail, got.detail)
    assert _same_words(want, got)


def _swap(kernel, ptx: str):
    return dataclasses.replace(kernel, ptx=ptx)


@pytest.mark.parametrize("name", ["f16-ragged-rows", "sparse-persistent", "f16-out-ragged"])
def test_a_missing_warp_barrier_is_a_race(name):
    """Without the barrier between the writes and the reads, a lane reads what another lane wrote
    unordered; without the one after the reads, the next staged store overwrites what another lane
    read. Either is a shared-memory race in the emulator."""
    staged, _ = _pair(name)
    lines = staged.ptx.split("\n")
    syncs = [i for i, line in enumerate(lines) if line.strip() == "bar.warp.sync -1;"]
    for drop in (syncs[0], syncs[1]):
        broken = "\n".join(line for i, line in enumerate(lines) if i != drop)
        with pytest.raises(EmulationError, match="shared-memory race"):
            run_compiled(_swap(staged, broken), 5, "emulator")


def test_two_warps_in_one_slot_is_a_race():
    """A warp barrier orders a warp's lanes, not two warps: warps sharing a slot race."""
    staged, _ = _pair("f16-ragged-rows")
    slot = next(line for line in staged.ptx.split("\n") if line.strip().startswith("mad.lo.u32") and ", 2048, " in line)
    dst, _, _, buf = slot.strip().rstrip(";").split(" ", 1)[1].split(", ")
    broken = staged.ptx.replace(slot, f"    mov.u32 {dst}, {buf};")
    assert broken != staged.ptx
    with pytest.raises(EmulationError, match="shared-memory race"):
        run_compiled(_swap(staged, broken), 5, "emulator")


def test_where_the_buffer_does_not_fit_the_stores_stay():
    """128 x 224 CTAs of 5 f16 stages (220 KiB) leave no 16 KiB for the slots on sm_90 (227 KiB);
    of 4 stages they do."""
    spec = GemmSpec(256, 448, 512, "f16", "f16", "f32", b_layout="col")
    five = compiled(spec, wgmma=True, stages=5, warps="8x1", warp_tile="1x28")
    assert "bar.warp.sync" not in five.ptx and "st.global.v2.f32" in five.ptx
    assert five.abi.shared_bytes + 8 * 16 * 32 * 4 > 232448
    four = compiled(spec, wgmma=True, stages=4, warps="8x1", warp_tile="1x28")
    assert "bar.warp.sync" in four.ptx and "st.global.v2.f32" not in four.ptx and four.abi.shared_bytes <= 232448


def test_mma_sync_kernels_keep_their_stores():
    kernel = compiled(GemmSpec(128, 128, 64, "f16", "f16", "f32"), sm="90")
    assert "bar.warp.sync" not in kernel.ptx and "st.global.v2.f32" in kernel.ptx


@needs_ptxas
@pytest.mark.parametrize("name", ["sparse-persistent", "f16-ragged-rows", "s8", "f16-out-ragged"])
def test_it_assembles(name):
    result = run_ptxas(_pair(name)[0].ptx, "sm_90a")
    assert result.ok, result.log[-500:]


def test_split_k_kernels_keep_their_stores():
    """Measured 1% slower with staged stores (tf32 512x4096x4096, split-k 2): not taken."""
    spec = GemmSpec(128, 256, 1024, "f16", "f16", "f32")
    assert schedule(spec, wgmma=True, split_k=2).split_k == 2
    kernel = compiled(spec, wgmma=True, split_k=2)
    assert "bar.warp.sync" not in kernel.ptx and "st.global.v2.f32" in kernel.ptx


def test_kernels_filling_both_operands_keep_their_stores():
    """tf32 with A M-major and B N-major (the fill transposes both): 20% slower staged (rna, 4096^3)."""
    spec = GemmSpec(128, 256, 128, "f32", "f32", "f32", a_layout="col")
    assert schedule(spec, wgmma=True, f32_precision="tf32").fill == "ab"
    kernel = compiled(spec, wgmma=True, f32_precision="tf32")
    assert "bar.warp.sync" not in kernel.ptx and "st.global.v2.f32" in kernel.ptx
    one = GemmSpec(128, 256, 128, "f32", "f32", "f32", a_layout="col", b_layout="col")
    assert schedule(one, wgmma=True, f32_precision="tf32").fill == "a"
    assert "bar.warp.sync" in compiled(one, wgmma=True, f32_precision="tf32").ptx


def test_what_a_window_must_be_for_a_staged_store():
    """One rule for the pass and the op's verifier (`staged_window_problem`): the fragments'
    element, contiguous columns, static strides and offset in 16-byte multiples, whole pieces."""
    from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, StridedLayoutAttr, f16, f32

    from tilemma.dialects import warp

    assert warp.staged_window_problem(MemRefType(f32, [64, 64]), f32, 64, False) is None
    assert warp.staged_window_problem(MemRefType(f16, [64, 64]), f16, 64, False) is None
    assert "element" in warp.staged_window_problem(MemRefType(f16, [64, 64]), f32, 64, False)
    assert "whole 16-byte pieces" in warp.staged_window_problem(MemRefType(f32, [64, 30]), f32, 30, False)
    assert warp.staged_window_problem(MemRefType(f32, [64, 30]), f32, 30, True) is not None  # rows of 30: unaligned
    unknown = MemRefType(f32, [64, 64], StridedLayoutAttr([DYNAMIC_INDEX, 1], 0))
    assert "static strides" in warp.staged_window_problem(unknown, f32, 64, True)
    column_major = MemRefType(f32, [64, 64], StridedLayoutAttr([1, 64], 0))
    assert "contiguous" in warp.staged_window_problem(column_major, f32, 64, True)


def test_the_verifier_refuses_a_column_not_a_whole_piece():
    from xdsl.dialects.builtin import IntegerAttr, i64
    from xdsl.utils.exceptions import VerifyException

    from tests.wgmma_cases import warp_module
    from tilemma.dialects import warp

    module = warp_module(GemmSpec(256, 256, 64, "f16", "f16", "f32"), wgmma=True)
    [op, *_] = [o for o in module.walk() if isinstance(o, warp.StoreStagedOp)]
    op.verify()
    op.col_align = IntegerAttr(2, i64)
    with pytest.raises(VerifyException, match="multiple of 4"):
        op.verify()
