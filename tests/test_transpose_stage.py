"""An 8-bit N-major B of a warpgroup kernel copied as stored and transposed in shared memory by the
producer warpgroup (`#warp.schedule` transpose, `warp.transpose_stage`, `warp.copy_async
{for_transpose}`): the schedule that takes it, D exact in the emulator at odd sizes, the
emulator refusing the kernel without the waits that order it, the chunks' banks, the verifiers."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.driver.gemm_generator import GemmSpec
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.verify.emulator import EmulationError
from tilemma.dialects import warp
from tilemma.dialects.schedule import Schedule, ScheduleAttr
from tilemma.passes.warp.swizzle_shared import wavefronts

from tests.wgmma_cases import assert_assembles_without_spills, compiled, exactly_a_times_b, needs_ptxas, schedule


def spec(m: int, n: int, k: int, a: str = "s8", b: str = "s8", **kw) -> GemmSpec:
    return GemmSpec(m, n, k, a, b, "s32", a_layout="col", **kw)  # (B row-major: N-major)


def test_the_default_for_both_operands_in_the_other_order():
    """s8 with A M-major and B N-major, B not transposed first (`tile-transpose-first`, which takes
    such kernels by default: tests/test_transpose_first.py): the warpgroups by themselves, A from
    registers by byte pairs, B transposed in shared memory by a producer warpgroup on cp.async, no
    products in flight (its K-major ring then 2 stages), as many stages as fit."""
    s = schedule(spec(4096, 4096, 4096), transpose_first=0)
    assert (s.mma, s.transpose, s.fill, s.pair_bytes, s.producers, s.copy) == ("wgmma", "b", "", "a", 4, "async")
    assert (s.stages, s.wgmma_in_flight) == (3, 0)
    assert schedule(spec(4096, 4096, 4096), shared_transpose=False, transpose_first=0).mma == "sync"  # the fill loses
    forced = schedule(spec(4096, 4096, 4096), wgmma=True, shared_transpose=False)
    assert (forced.transpose, forced.fill) == ("", "b")


def test_by_itself_only_where_its_ctas_fill_the_waves():
    """512 x 11008: 172 CTAs of 128 x 256, the second wave 30% full (`configs.WGMMA_WAVE`): mma.sync."""
    assert schedule(spec(512, 11008, 4096), transpose_first=0).mma == "sync"
    assert schedule(spec(512, 4096, 4096), transpose_first=0).transpose == "b"  # 128 narrow CTAs: one wave


@pytest.mark.parametrize("problem, options", [
    (spec(256, 264, 512), {}),  # B's rows 264 bytes: not whole 16-byte copies
    (spec(256, 256, 512), {"producers": 0}),  # no producer warpgroup to transpose
])
def test_the_fill_where_it_cannot(problem, options):
    s = schedule(problem, wgmma=True, **options)
    assert (s.transpose, s.fill) == ("", "b")


def test_the_tma_is_refused_with_a_located_reason():
    from tests.wgmma_cases import assert_refused_at_the_mma

    assert_refused_at_the_mma(spec(256, 256, 512), "copies the rows of B it transposes", tma=1)


CASES = {
    # 128 x 256 CTAs (16 x 16 chunks a producer thread), a ring that wraps (8 stages of K)
    "wide": (spec(256, 512, 1024), {}),
    # ragged M and K, a batch, N a multiple of 16 (each chunk of lines inside or outside)
    "ragged-batch": (spec(200, 272, 456, batch=2), {}),
    # 128 x 128 CTAs: chunks of 16 x 8 (8-byte stores), unsigned operands, N past the last tile
    "narrow-u8": (spec(136, 144, 320, "u8", "u8"), {"warps": "8x1", "warp_tile": "1x16"}),
    # one stage of K: the producers' tail alone
    "one-stage": (spec(128, 256, 96), {}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_d_is_a_times_b_in_the_emulator(name):
    problem, options = CASES[name]
    assert schedule(problem, wgmma=True, **options).transpose == "b"
    kernel = compiled(problem, wgmma=True, **options)
    assert "ld.global.b32" not in kernel.ptx  # (no register fill)
    exactly_a_times_b(problem, kernel, "emulator", seed=3)


def _swap(kernel, ptx: str):
    return dataclasses.replace(kernel, ptx=ptx)


def _mutated(kernel, pattern: str, replace: str):
    ptx, n = re.subn(pattern, replace, kernel.ptx, count=1, flags=re.M)
    assert n == 1
    return _swap(kernel, ptx)


def test_the_waits_that_order_it_are_needed():
    """The emulator refuses the kernel with the producers' wait for their copies relaxed by one
    group (the transpose would read a stage still in flight), and with their wait for a released
    slot dropped (they overwrite stages the consumers still read: a race, or a wrong D)."""
    kernel = compiled(spec(256, 256, 512), wgmma=True)
    assert run_compiled(kernel, 5, "emulator").ok
    waits = re.findall(r"cp\.async\.wait_group (\d+);", kernel.ptx)
    assert len(waits) == 1, waits
    relaxed = _mutated(kernel, r"cp\.async\.wait_group (\d+);", f"cp.async.wait_group {int(waits[0]) + 1};")
    with pytest.raises(EmulationError, match="cp.async"):
        run_compiled(relaxed, 5, "emulator")
    # the producers' first wait on an mbarrier is their wait for a released slot (`empty`)
    producer = kernel.ptx.index("setmaxnreg.dec")
    wait = re.compile(r"mbarrier\.try_wait\.parity\.shared::cta\.b64 (%p\d+), \[[^\]]*\], %r\d+;")
    found = wait.search(kernel.ptx, producer)
    dropped = _swap(kernel, kernel.ptx[:found.start()] + f"setp.eq.u32 {found.group(1)}, 0, 0;" + kernel.ptx[found.end():])
    try:  # (the producers run through the stages: a race the emulator sees, or D overwritten)
        assert not run_compiled(dropped, 5, "emulator").ok
    except EmulationError as e:
        assert "shared" in str(e)


@needs_ptxas
def test_the_4096_kernel_assembles_without_spills():
    assert_assembles_without_spills(compiled(spec(4096, 4096, 4096)).ptx)


@pytest.mark.parametrize("lines, across, threads, chunk", [(256, 128, 128, 16), (128, 128, 128, 8), (256, 128, 256, 8)])
def test_reads_and_stores_meet_in_no_bank(lines, across, threads, chunk):
    """Every 16-byte read of the stage as stored (K rows of `lines` bytes, the copies' swizzle) and
    every store of a K-major line (`across`-byte rows, the warpgroups' 128-byte swizzle) by a warp
    takes the wavefronts of its bytes alone."""
    layout = warp.TransposeLayout.of(lines, across, 8, threads)
    assert layout is not None and layout.chunk_across == chunk
    for first in range(0, threads, 32):
        lanes = range(first, first + 32)
        for i in range(layout.chunks_per_thread):
            for a in range(chunk):  # read a: row b A + a, the 16 lines' bytes at 16 g
                addr = [(layout.block(t) * chunk + a) * lines
                        + warp.swizzle_granule(layout.block(t) * chunk + a, layout.group(t, i), lines) * 16
                        for t in lanes]
                assert wavefronts(np.array(addr), 16) == 4
            for r in range(warp.TRANSPOSE_LINES):  # store r: line 16 g + r, the bytes across at b A
                addr = []
                for t in lanes:
                    line, col = 16 * layout.group(t, i) + r, layout.block(t) * chunk
                    addr.append(line * across + warp.swizzle_granule(line, col // 16, across) * 16 + col % 16)
                assert wavefronts(np.array(addr), chunk) == 32 * chunk // 128


def test_layouts_it_refuses():
    assert warp.TransposeLayout.of(256, 64, 8, 128) is None  # 64-byte lines: stores would meet in banks
    assert warp.TransposeLayout.of(112, 128, 8, 128) is None  # fewer than 8 line groups
    assert warp.TransposeLayout.of(256, 128, 16, 128) is None  # 8-bit only


def test_the_schedule_verifier():
    base = dict(warps=(8, 1), warp_tile=(1, 32), stages=3, stage_k=128, mma="wgmma", producers=4, pair_bytes="a")
    ScheduleAttr(Schedule(**base, transpose="b")).verify()
    for bad in (dict(transpose="a"), dict(transpose="b", fill="b"), dict(transpose="b", copy="tma")):
        with pytest.raises(VerifyException, match="transpose"):
            ScheduleAttr(Schedule(**{**base, **bad})).verify()


def test_the_ops_verifiers():
    from xdsl.dialects import arith, memref, test
    from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, MemRefType, Signedness, i64

    i8 = IntegerType(8, Signedness.SIGNED)
    shared = IntegerAttr(warp.SHARED, i64)
    raw = memref.AllocOp([], [], MemRefType(i8, [3, 128, 256], memory_space=shared))
    kmaj = memref.AllocOp([], [], MemRefType(i8, [2, 256, 128], memory_space=shared))
    wrong = memref.AllocOp([], [], MemRefType(i8, [2, 128, 256], memory_space=shared))
    idx = arith.ConstantOp.from_int_and_width(0, IndexType())
    token = test.TestOp(result_types=[warp.AsyncTokenType()])
    warp.TransposeStageOp(raw.memref, idx.result, kmaj.memref, idx.result, token.res[0], 128).verify()
    with pytest.raises(VerifyException, match="transposed"):
        warp.TransposeStageOp(raw.memref, idx.result, wrong.memref, idx.result, token.res[0], 128).verify()
    with pytest.raises(VerifyException, match="evenly"):
        warp.TransposeStageOp(raw.memref, idx.result, kmaj.memref, idx.result, token.res[0], 96).verify()
