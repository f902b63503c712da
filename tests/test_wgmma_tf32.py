"""tf32 multiplied by warpgroups (`wgmma.mma_async ... m64nNk8.f32.tf32.tf32`, sm_90a): what
`tile-plan` chooses (the warpgroups read tf32 K-major from the stage itself, so an operand that is
rounded (rna, rn, rz) is rounded in shared memory: an M-major A or N-major B by the 32-bit
transposing fill on its way in, a K-major one copied by cp.async and rounded where it lies
(`warp.round_stage`); a truncated K-major one is copied as stored, its low bits ignored by the
tensor cores), the PTX (scale-a and scale-b only, K steps 32 bytes), ptxas, and in the emulator D
equal to the mma.sync kernel's word for word (both chain m16n8k8's arithmetic in K order;
tools/wgmma_probe.py showed wgmma's to be that on an H100). (GPU: tests/gpu/test_wgmma_gpu.py.)"""

import re

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec

from tests.wgmma_cases import assert_assembles_without_spills, assert_refused_at_the_mma, compiled, like_the_sm90_kernel, needs_ptxas, schedule


def spec(m, n, k, rounding="rna", **kw) -> GemmSpec:
    return GemmSpec(m, n, k, "tf32", "tf32", "f32", rounding=rounding, **{"b_layout": "col", **kw})


@pytest.mark.parametrize("s, want", [
    (spec(4096, 4096, 4096), ("wgmma", "")),  # K-major: cp.async, then rounded in place
    (spec(4096, 4096, 4096, "trunc"), ("wgmma", "")),  # truncated: cp.async as stored
    (spec(4096, 4096, 4096, b_layout="row"), ("wgmma", "b")),  # N-major B: the fill
    (spec(4096, 4096, 4096, "trunc", a_layout="col"), ("wgmma", "a")),
    (spec(4096, 4096, 4096, "rz", a_layout="col", b_layout="row"), ("wgmma", "ab")),
])
def test_staging(s, want):
    got = schedule(s, "90a", wgmma=True)
    assert (got.mma, got.fill, got.gather) == (*want, "")
    assert (got.warps, got.warp_tile, got.stages, got.stage_k) == ((8, 1), (1, 32), 4, 32)


@pytest.mark.parametrize("s", [
    spec(4096, 4096, 4096, "trunc"), spec(256, 4096, 4096, "trunc"),  # from configs.WGMMA_MIN_ROWS' 256 rows
    spec(4096, 4096, 4096), spec(2048, 2048, 256, "rn"),  # rounded in place: 128 x 256 CTAs that fill a wave
    spec(512, 4096, 4096), spec(128, 11008, 4096),  # ... K split in 2 and 3 (configs.WGMMA_WAVE)
    spec(512, 11008, 4096),  # 172 CTAs: two waves, the second 30% full; K split in 3 (configs.EVEN_WAVES)
    spec(4096, 4096, 4096, b_layout="row"), spec(2048, 2048, 256, a_layout="col"),  # filled: the same
    spec(512, 11008, 4096, b_layout="row"),  # filled: 172 CTAs, K split in 3, keep 98% of the slots busy
])
def test_chosen_by_itself(s):
    assert schedule(s, "90a").mma == "wgmma"


@pytest.mark.parametrize("s, sm", [
    (spec(4096, 4096, 4096, "trunc"), "90"),  # sm_90 has no wgmma
    (spec(128, 4096, 4096, "trunc"), "90a"),  # fewer rows than configs.WGMMA_MIN_ROWS
    (spec(1000, 1000, 1000), "90a"),  # rounded in place: 32 CTAs, not a wave (configs.WGMMA_WAVE)
    (spec(128, 4096, 4096, b_layout="row"), "90a"),  # filled: a wave only by 8 splits of K
    (spec(64, 11008, 4096), "90a"),  # fewer rows than configs.WGMMA_MIN_ROWS
])
def test_mma_sync_where_wgmma_is_not_chosen(s, sm):
    assert schedule(s, sm).mma == "sync"


def test_split_k_fills_the_wave_of_wide_ctas():
    """tf32 rounded in place keeps 128 x 256 CTAs where they would not fill a wave (no narrower
    configs.WGMMA_NARROW) and splits K instead."""
    got = schedule(spec(512, 4096, 4096), "90a")
    assert (got.warp_tile, got.split_k) == ((1, 32), 2)


@pytest.mark.parametrize("s, kw, message", [
    (spec(64, 64, 128), {"stage_k": 64}, "stage-k 32 for 32-bit operands"),
    (spec(256, 256, 128, b_layout="row"), {"warps": "12x1", "warp_tile": "1x32"},
     "the transposing fill of B cannot split a 256 x 32 stage evenly over 384 threads"),
])
def test_refusals_are_located(s, kw, message):
    assert_refused_at_the_mma(s, message, **kw)


def test_ptx():
    """The tf32 opcode with scale-a and scale-b after scale-d (no transposes), both descriptors' K
    steps 32 bytes (2 units) along the 128-byte rows (K 32 a stage: 4 steps); a K-major rounded
    operand copied by cp.async and rounded where it lies (16-byte shared loads and stores around
    cvt.rna, then the proxy fence), a filled one through the fill's 16-byte stores, a truncated one
    never converted."""
    ptx = compiled(spec(256, 256, 512), wgmma=True).ptx
    calls = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n256k8\.f32\.tf32\.tf32 \{[^}]*\}, %rd\d+, %rd\d+, "
                       r"%p\d+, 1, 1;", ptx)
    assert calls and len(calls) % 4 == 0
    body = ptx[ptx.index("wgmma.fence"):]
    assert [int(x) for x in re.findall(r"add\.s64 %rd\d+, %rd\d+, (\d+);", body)[:6]] == [2, 2, 4, 4, 6, 6]
    loop = ptx[ptx.index("cp.async.wait_group"):ptx.index("wgmma.fence")]
    assert re.search(r"cp\.async\.cg", ptx) and "ld.shared.v4.b32" in loop and "st.shared.v4.b32" in loop
    rounded = re.search(r"@%p\d+ add\.s32 %r\d+, %r\d+, 4096;", loop)  # rna (`fragment_io.tf32_for_mma`)
    assert rounded and rounded.start() < loop.index("fence.proxy.async") < loop.index("bar.sync")
    filled = compiled(spec(256, 256, 512, "rz", b_layout="row"), wgmma=True).ptx
    assert "cvt.rz.tf32.f32" in filled and "st.shared.v4.b32" in filled
    truncated = compiled(spec(256, 256, 512, "trunc"), wgmma=True).ptx
    assert "tf32.f32" not in truncated.replace("tf32.tf32", "") and re.search(r"cp\.async\.c[ag]", truncated)


@needs_ptxas
@pytest.mark.parametrize("layouts", [("row", "col"), ("row", "row"), ("col", "col"), ("col", "row")])
def test_ptxas_takes_it(layouts):
    a, b = layouts
    assert_assembles_without_spills(compiled(spec(4096, 4096, 4096, a_layout=a, b_layout=b), wgmma=True).ptx)


CASES = {  # spec, options
    "odd": (spec(130, 200, 300), {}),  # ragged M, N and K: cp.async, rounded in place
    "odd-rows": (spec(130, 200, 97), {}),  # rows of 97 f32: 4-byte copies, each rounded alone
    "odd-filled": (spec(67, 131, 45, "rz", a_layout="col"), {}),  # A filled, B's rows 4-byte copies
    "b-row-filled": (spec(130, 200, 300, b_layout="row"), {}),  # the fill stages B K-major
    "a-col-filled-rz": (spec(136, 200, 96, "rz", a_layout="col"), {}),
    "both-filled-rn": (spec(70, 136, 100, "rn", a_layout="col", b_layout="row", batch=2), {}),
    "trunc": (spec(130, 72, 64, "trunc"), {}),  # cp.async as stored
    "in-flight": (spec(200, 264, 96, b_layout="row"), {"warps": "4x1", "warp_tile": "1x16", "stages": 3}),
    "wait-each": (spec(96, 64, 100), {"stages": 2}),
    "split-k": (spec(64, 128, 1024, b_layout="row"), {"split_k": 4}),  # the fill, K split in 4
    "epilogue": (spec(96, 64, 128, bias="col", act="gelu", out="f16"), {}),  # the mma.sync kernel's epilogue
}


@pytest.mark.parametrize("name", CASES)
def test_emulated_like_the_mma_sync_kernel(name):
    s, kw = CASES[name]
    like_the_sm90_kernel(s, kw, "emulator", 7, "wgmma.mma_async", "mma.sync")


@pytest.mark.parametrize("lines, across, threads", [(256, 32, 256), (128, 32, 256), (128, 32, 128), (64, 32, 128),
                                                    (512, 64, 512)])
def test_wide_fill_layout_covers_every_chunk_once(lines, across, threads):
    """A 32-bit fill's chunk is one line's 4 elements across: every (line, block of 4) once."""
    from tilemma.dialects import warp
    layout = warp.FillLayout.of(lines, across, 32, threads)
    assert layout is not None and (layout.per_word, layout.lines_per_word) == (4, 1)
    seen = [(layout.word(t), layout.block(t) + i * layout.block_step)
            for t in range(threads) for i in range(layout.chunks_per_thread)]
    assert sorted(seen) == [(w, b) for w in range(lines) for b in range(across // 4)]
    assert layout.words_per_thread == lines * across // threads


def _stage(element, shape=(4, 128, 32)):
    from xdsl.dialects.builtin import IntegerAttr, MemRefType, i64
    from tilemma.dialects import warp
    return MemRefType(element, list(shape), memory_space=IntegerAttr(warp.SHARED, i64))


def test_round_stage_verifier():
    """warp.round_stage rounds f32 stages (to tf32, never `trunc`) in whole chunks of the copy's vector."""
    from xdsl.dialects.builtin import IndexType, f16, f32
    from xdsl.ir import Block
    from xdsl.utils.exceptions import VerifyException
    from tilemma.dialects import warp

    for element, vector, rounding, message in ((f16, 16, "rna", "rounds f32 to tf32"),
                                               (f32, 32, "rna", "vector is the copy's"),
                                               (f32, 16, "trunc", "trunc is no rounding")):
        block = Block(arg_types=[_stage(element), IndexType(), warp.AsyncTokenType()])
        op = warp.RoundStageOp(block.args[0], block.args[1], block.args[2], 256, vector, rounding)
        block.add_op(op)
        with pytest.raises(VerifyException, match=message):
            op.verify()
    block = Block(arg_types=[_stage(f32), IndexType(), warp.AsyncTokenType()])
    block.add_op(ok := warp.RoundStageOp(block.args[0], block.args[1], block.args[2], 256, 16, "rn", proxy_fence=True))
    ok.verify()


def test_a_fill_store_rounds_only_f32_it_transposes():
    from xdsl.dialects.builtin import IndexType, f16, f32
    from xdsl.ir import Block
    from xdsl.utils.exceptions import VerifyException
    from tilemma.dialects import warp

    for element, gather in ((f16, False), (f32, True)):
        stage = _stage(element, (4, 128, 32))
        block = Block(arg_types=[warp.StagedType(16), stage, IndexType()])
        op = warp.FillStoreOp(block.args[0], block.args[1], block.args[2], 256, gather=gather, rounding="rna")
        block.add_op(op)
        with pytest.raises(VerifyException, match="a rounding stores f32 as tf32 by a transposing fill"):
            op.verify()


@pytest.mark.parametrize("a_layout, b_layout", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")])
def test_sizes_known_at_launch(a_layout, b_layout):
    """One `--wgmma` compile of `?` sizes serves ragged ones in every order (the fill's strides
    registers, its byte steps computed once; the in-place rounding), every element within the
    tf32 reference's bound in the emulator."""
    import numpy as np

    import tilemma
    from tilemma.compiler.driver.gemm_generator import gemm_module
    from tilemma.compiler.verify import reference

    [kernel] = tilemma.compile(str(gemm_module(spec(64, 64, 64, a_layout=a_layout, b_layout=b_layout, dynamic="mnk"))),
                               sm="90a", wgmma=True)
    rng = np.random.default_rng(5)
    for m, n, k in ((37, 91, 53), (130, 68, 96)):
        a = reference.random_matrix("tf32", (m, k), rng).astype(np.float32)
        b = reference.random_matrix("tf32", (k, n), rng).astype(np.float32)
        c = reference.random_matrix("f32", (m, n), rng).astype(np.float32)
        a = a if a_layout == "row" else np.asfortranarray(a)
        b = b if b_layout == "row" else np.asfortranarray(b)
        d = np.full_like(c, np.nan)
        arrays = (a, b, c, d)
        bound = kernel.bind([x.shape for x in arrays], [tuple(s // x.itemsize for s in x.strides) for x in arrays])
        assert bound.instruction.startswith("wgmma.mma_async.sync.aligned.m64n"), bound.instruction
        kernel.emulate(a, b, c, d)
        want = reference.mma_reference(a, b, c, a_type="tf32", b_type="tf32", acc_type="f32")
        result = reference.compare(d, want, acc_type="f32", a_type="tf32", k=k, a=a, b=b, c=c)
        assert result.ok, f"{m}x{n}x{k}: {result}"
