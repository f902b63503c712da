"""Warp-specialized warpgroup kernels (`producers=4`, `warp-specialize`): the schedule and launch
shape `tile-plan` writes, its located refusals, the warp IR (roles, mbarriers), the PTX (barriers
made by thread 0, the try_wait loops, the producers' `ret`, the registers they give the consumers),
ptxas with no spills, and in the emulator - which runs the two roles as contexts meeting at the
mbarriers - every output word equal to the mma.sync (mma.sp) kernel's of the same problem. (GPU:
tests/gpu/test_specialize_gpu.py.)"""

import re

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec
from tilemma.compiler.runtime.ptxas import run_ptxas
from tilemma.compiler.verify.emulator.program import AHEAD
from tilemma.dialects import warp
from tilemma.passes.warp.specialize import PRODUCER_REGISTERS

from tests.specialize_cases import CASES, SPECIALIZED
from tests.wgmma_cases import (
    assert_assembles_without_spills, compiled, like_the_sm90_kernel, needs_ptxas, schedule, warp_module,
)

F16 = GemmSpec(4096, 4096, 4096, "f16", "f16", "f32")


def test_schedule_and_launch():
    s = schedule(F16, wgmma=True, **SPECIALIZED)
    assert (s.mma, s.producers, s.threads, s.block_threads, s.split_k) == ("wgmma", 4, 256, 384, 1)
    k = compiled(F16, wgmma=True, **SPECIALIZED)
    assert k.abi.block == (384, 1, 1)
    assert ".maxntid 384, 1, 1" in k.ptx
    # automatic (configs.WGMMA_PRODUCERS): 16-bit warpgroup kernels take producers copying by the TMA,
    # not where K would be split without them; other dense kernels none (measured no better)
    assert (schedule(F16).producers, schedule(F16).copy) == (4, "tma")
    assert schedule(GemmSpec(256, 4096, 4096, "f16", "f16", "f32")).split_k == 2
    assert schedule(GemmSpec(256, 4096, 4096, "f16", "f16", "f32")).producers == 0
    assert schedule(F16, "90").producers == 0
    assert schedule(GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", b_layout="col")).producers == 0


@pytest.mark.parametrize("spec, producers", [
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", a_layout="col"), 4),  # an M-major A: 542 -> 643 TFLOP/s
    (GemmSpec(512, 4096, 4096, "bf16", "bf16", "f32", b_layout="col"), 4),  # 128 x 128 CTAs in one wave
    (GemmSpec(256, 4096, 4096, "f16", "f16", "f32"), 0),  # K split two ways to fill the SMs without them
    (GemmSpec(1000, 1000, 1000, "f16", "f16", "f32"), 0),  # B's stages not whole
    (GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", dynamic="m"), 0),  # no tensor map: sizes at launch
    (GemmSpec(64, 4096, 4096, "f16", "f16", "f32"), 0),  # (mma.sync: too few rows)
], ids=lambda x: x.name if isinstance(x, GemmSpec) else None)
def test_16bit_producers_by_themselves(spec, producers):
    """`plan_warpgroups.producers_by_themselves` for 16-bit warpgroup kernels: with the TMA's copies
    (results/h200-2026-11-28-16bit-producers-ab.csv), where nothing they cost is lost."""
    s = schedule(spec)
    assert (s.producers, s.copy if s.producers else "") == (producers, "tma" if producers else "")


def test_k_is_not_split_for_producers():
    """512 rows would split K to fill the SMs; a producer warpgroup's kernel keeps it whole."""
    small = GemmSpec(512, 1024, 8192, "f16", "f16", "f32")
    assert schedule(small, wgmma=True).split_k > 1
    assert schedule(small, wgmma=True, **SPECIALIZED).split_k == 1


@pytest.mark.parametrize("s, sm, kw, message", [
    (F16, "90", {}, "producers: a producer warpgroup feeds the warpgroup mma (wgmma, sm_90a)"),
    (GemmSpec(256, 256, 256, "tf32", "tf32", "f32"), "90a", {"wgmma": True},
     "the transposing fill of B cannot split a 256 x 32 stage evenly over 128 threads"),
    (F16, "90a", {"wgmma": True, "split_k": 2}, "producers: a producer warpgroup's kernel does not split K"),
])
def test_refusals_are_located(s, sm, kw, message):
    from tilemma.compiler.driver.diagnostics import LocatedVerifyError

    with pytest.raises(LocatedVerifyError) as e:
        compiled(s, sm, **SPECIALIZED, **kw)
    assert message in str(e.value) and e.value.span is not None


def test_producers_option_is_checked():
    with pytest.raises(ValueError, match="producers is -1 .automatic., 0 .none. or 4"):
        compiled(F16, wgmma=True, producers=3)


def _warp_ir(spec: GemmSpec) -> str:
    return str(warp_module(spec, wgmma=True, **SPECIALIZED))


def test_warp_ir_roles():
    """The producers' loop (empty wait, copies dealt to threads 256.., commit, landing, full arrive)
    in their branch, then `warp.retire`, then the consumers' (full wait, wgmma, empty arrive)."""
    text = _warp_ir(GemmSpec(256, 256, 512, "f16", "f16", "f32"))
    assert text.count("warp.mbarrier_init") == 2 and "count = 128 : i64" in text and "count = 256 : i64" in text
    producer, consumer = text.split("warp.retire")
    assert "first_thread = 256 : i64" in producer and "threads = 128 : i64" in producer
    assert "warp.set_max_registers {count = 40 : i64}" in producer
    assert producer.index("warp.mbarrier_wait") < producer.index("warp.copy_async") < producer.index("warp.async_wait")
    assert producer.rindex("warp.async_wait") < producer.rindex("warp.mbarrier_arrive")
    assert "warp.wgmma" not in producer and "warp.copy_async" not in consumer
    assert "warp.set_max_registers {count = 232 : i64, increase}" in consumer
    assert consumer.index("warp.mbarrier_wait") < consumer.index("warp.wgmma") < consumer.index("warp.mbarrier_arrive")
    assert '"gpu.barrier"' not in consumer


def test_ptx_roles():
    k = compiled(GemmSpec(256, 256, 512, "f16", "f16", "f32"), wgmma=True, **SPECIALIZED)
    ptx = k.ptx
    assert len(re.findall(r"@%p\d+ mbarrier\.init\.shared::cta\.b64 \[%r\d+(\+\d+)?\], 128;", ptx)) == 4
    assert len(re.findall(r"@%p\d+ mbarrier\.init\.shared::cta\.b64 \[%r\d+(\+\d+)?\], 256;", ptx)) == 4
    assert ptx.count("bar.sync 0;") == 1  # after the barriers are made; none in the loops
    waits = re.findall(r"(\$wait_\d+):\n    mbarrier\.try_wait\.parity\.shared::cta\.b64 (%p\d+), \[%r\d+\], %r\d+;\n"
                       r"    @!(%p\d+) bra\.uni (\$wait_\d+);", ptx)
    assert len(waits) == 2 and all(w[0] == w[3] and w[1] == w[2] for w in waits)
    producer_end = re.search(r"@%p\d+ ret;\n    setmaxnreg\.inc\.sync\.aligned\.u32 232;", ptx)
    assert producer_end is not None
    assert ptx.index("setmaxnreg.dec.sync.aligned.u32 40;") < producer_end.start()
    assert "cp.async.wait_group 2;\n    fence.proxy.async.shared::cta;" in ptx  # stage kt - 2 landed, fenced


@pytest.mark.parametrize("consumers, take", [(256, 232), (512, 104)])
def test_consumers_take_their_share(consumers, take):
    """The registers the consumers take are what they start with plus their share of what the
    producers give back (a CTA's .incs draw on its own .decs; more hangs the GPU)."""
    from tilemma.passes.warp.specialize import consumer_registers

    kernel = __import__("xdsl.dialects.func", fromlist=["FuncOp"]).FuncOp("k", ((), ()))
    kernel.attributes["warp.target"] = warp.TargetAttr("sm_90a", "8.0")
    assert consumer_registers(kernel, consumers, 128) == take
    start = 65536 // (consumers + 128) // 8 * 8
    assert (take - start) * consumers <= (start - PRODUCER_REGISTERS) * 128


def test_sparse_consumers_keep_a_stage_in_flight():
    """With 4 stages a sparse wgmma leaves a stage's products running as a dense one does: the
    consumers' loop unrolled by two (`warp-unroll-sparse`), each copy with its own metadata
    registers (tests/test_unroll_sparse.py)."""
    sparse = compiled(GemmSpec(512, 4096, 4096, "f16", "f16", "f32", pre_compressed=True), wgmma=True, **SPECIALIZED)
    assert "stages=4" in sparse.abi.config
    assert "wgmma.wait_group.sync.aligned 1;" in sparse.ptx
    metas = re.findall(r"ld\.shared\.v4\.u32 \{([^}]*)\}", sparse.ptx)
    assert len(metas) == 2 and metas[0] != metas[1]


@needs_ptxas
@pytest.mark.parametrize("spec", [
    F16,
    GemmSpec(4096, 4096, 4096, "s8", "s8", "s32"),  # an N-major B transposed by the producers' fill
    GemmSpec(4096, 4096, 4096, "tf32", "tf32", "f32", b_layout="col", rounding="rna"),
    GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", b_layout="col"),
    GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True),
], ids=lambda s: s.name)
def test_ptxas_no_spills(spec):
    assert_assembles_without_spills(compiled(spec, wgmma=True, **SPECIALIZED).ptx)


@needs_ptxas
@pytest.mark.parametrize("m, threads, registers", [(64, 256, 248), (128, 384, 168)])
def test_the_entry_states_the_registers_setmaxnreg_starts_from(m, threads, registers):
    """`.maxnreg` is the count the CTA's register pool starts from (`Limits.launch_registers`);
    without it ptxas cannot work it out for a 256-thread CTA (one consumer warpgroup: the file
    would give a thread 256) and ignores setmaxnreg (C7508)."""
    kernel = compiled(GemmSpec(m, 4096, 4096, "f16", "f16", "f32"), wgmma=True, **SPECIALIZED)
    assert f".maxntid {threads}, 1, 1\n.maxnreg {registers}\n" in kernel.ptx
    result = run_ptxas(kernel.ptx, "sm_90a", ("-v",))
    assert result.ok and "C75" not in result.log and f"Used {registers} registers" in result.log, result.log
    if threads == 256:  # without the directive ptxas drops setmaxnreg
        assert "C7508" in run_ptxas(kernel.ptx.replace(f".maxnreg {registers}\n", ""), "sm_90a", ("-v",)).log


@pytest.mark.parametrize("ahead", AHEAD)
@pytest.mark.parametrize("spec, extra, sm90", CASES, ids=[c[0].name for c in CASES])
def test_emulated_like_the_mma_sync_kernel(spec, extra, sm90, ahead):
    """Every word of D the mma.sync kernel's, the leading warpgroups of each role ahead of the
    others in the emulator, and the others ahead of them (`Program.run` ahead)."""
    like_the_sm90_kernel(spec, {**SPECIALIZED, **extra}, "emulator", 11, "wgmma", sm90, ahead)


def test_sizes_known_at_launch():
    """One compile of `?` sizes serves ragged ones, K from under a stage to many (the producers'
    loop runs n + L iterations of a launch-time n; tf32 K-major rounded where it lies by them),
    every element within the reference's bound, and the same words with the other warpgroups ahead
    (`Kernel.emulate` ahead)."""
    import numpy as np

    import tilemma
    from tilemma.compiler.driver.gemm_generator import gemm_module
    from tilemma.compiler.verify import reference

    [kernel] = tilemma.compile(str(gemm_module(GemmSpec(64, 64, 64, "tf32", "tf32", "f32", b_layout="col", dynamic="mnk"))),
                               sm="90a", wgmma=True, **SPECIALIZED)
    assert "mbarrier.try_wait" in kernel.ptx
    rng = np.random.default_rng(9)
    for m, n, k in ((37, 91, 53), (130, 68, 300), (64, 200, 8)):
        a = reference.random_matrix("tf32", (m, k), rng).astype(np.float32)
        b = np.asfortranarray(reference.random_matrix("tf32", (k, n), rng).astype(np.float32))
        c = reference.random_matrix("f32", (m, n), rng).astype(np.float32)
        d = np.full_like(c, np.nan)
        arrays = (a, b, c, d)
        kernel.bind([x.shape for x in arrays], [tuple(s // x.itemsize for s in x.strides) for x in arrays])
        kernel.emulate(a, b, c, d)
        want = reference.mma_reference(a, b, c, a_type="tf32", b_type="tf32", acc_type="f32")
        result = reference.compare(d, want, acc_type="f32", a_type="tf32", k=k, a=a, b=b, c=c)
        assert result.ok, f"{m}x{n}x{k}: {result}"
        lagged = np.full_like(c, np.nan)
        kernel.emulate(a, b, c, lagged, ahead="laggards")
        assert np.array_equal(lagged.view(np.uint32), d.view(np.uint32)), f"{m}x{n}x{k}"


def test_registers_beyond_the_share_deadlock_in_the_emulator():
    """512 consumers asking 112 registers where the producers gave back 104 a consumer hung an
    H200; the emulator's register pool finds the same kernel waiting forever."""
    import dataclasses

    from tilemma.compiler.driver.runner import run_compiled
    from tilemma.compiler.verify.emulator import EmulationError

    spec, extra, _ = CASES[-1]
    kernel = compiled(spec, wgmma=True, **{**SPECIALIZED, **extra})
    assert "setmaxnreg.inc.sync.aligned.u32 104;" in kernel.ptx
    greedy = dataclasses.replace(kernel, ptx=kernel.ptx.replace("u32 104;", "u32 112;"))
    with pytest.raises(EmulationError, match="deadlock: every live thread waits"):
        run_compiled(greedy, 1, "emulator")
    # the pool starts from the entry's `.maxnreg`: 8 fewer a thread, and the share no longer fits
    start = re.search(r"\.maxnreg (\d+)\n", kernel.ptx)
    assert start is not None
    fewer = dataclasses.replace(kernel, ptx=kernel.ptx.replace(start.group(0), f".maxnreg {int(start.group(1)) - 8}\n"))
    with pytest.raises(EmulationError, match="deadlock: every live thread waits"):
        run_compiled(fewer, 1, "emulator")


def test_fill_producers_keep_their_words():
    """An N-major 8-bit B transposed by the producers' fill (not in shared memory): each keeps the
    fill's 64 words a thread (128 x 256 CTAs, K 128 stages) besides its addresses, and the
    consumers take the rest."""
    kernel = compiled(GemmSpec(4096, 4096, 4096, "s8", "s8", "s32"), wgmma=True, shared_transpose=False, **SPECIALIZED)
    assert "st.shared.b32" in kernel.ptx and "ld.global" in kernel.ptx  # the fill, not cp.async, for B
    assert f"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGISTERS + 64};" in kernel.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 200;" in kernel.ptx  # 168 + (168 - 104) * 128 / 256


def test_fill_loads_a_stage_ahead():
    """In 128 x 128 CTAs (m64n128 accumulators: 64 registers) the producers load the fill's stage
    kt + 1 before they store stage kt's words, carried by their loop, and keep both stages' words
    (2 x 32); in 128 x 256 ones (m64n256: 128) that would leave the consumers too few registers
    (`loads_ahead`), and the loads stay with their stores."""
    from xdsl.dialects import scf

    from tilemma.dialects.warp_fill import StagedType

    spec = GemmSpec(4096, 4096, 4096, "s8", "s8", "s32", a_layout="col")
    narrow = dict(warps="8x1", warp_tile="1x16", shared_transpose=False)  # (the fill, not the shared transpose)

    def carried(module) -> list:
        return [o for o in module.walk() if isinstance(o, scf.ForOp)
                and any(isinstance(a.type, StagedType) for a in o.body.block.args)]

    module = warp_module(spec, wgmma=True, **SPECIALIZED, **narrow)
    [loop] = carried(module)
    assert [isinstance(o, warp.FillLoadOp) for o in loop.body.block.ops].count(True) == 1  # stage kt + 1's
    assert len([o for o in module.walk() if isinstance(o, warp.FillLoadOp)]) == 2  # and stage 0's before
    kernel = compiled(spec, wgmma=True, **SPECIALIZED, **narrow)
    assert f"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGISTERS + 2 * 32};" in kernel.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 200;" in kernel.ptx  # 168 + (168 - 104) * 128 / 256
    assert not carried(warp_module(spec, wgmma=True, shared_transpose=False, **SPECIALIZED))
