"""mbarriers and warp roles in the emulator (`mbarrier_ops`, `Program._execute`'s contexts): a
hand-written producer/consumer kernel (warp 1 writes a two-slot ring, warp 0 reads each slot a
lane over and sums; `full` and `empty` barriers a slot) against a NumPy model, and the kernels a
wrong protocol makes: a missing wait on either side, a wrong parity (deadlock), a whole-CTA barrier
in one role, a lane-divergent branch. The `gpu` test runs the good kernel on the GPU, word for word.
"""

from __future__ import annotations

import numpy as np
import pytest
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify.emulator import EmulationError, emulate

_HEAD = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k(
    .param .u64 p_src,
    .param .u64 p_out,
    .param .u32 p_n
)
{
    .reg .pred %p<8>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<16>;
    .shared .align 8 .b8 bars[32];
    .shared .align 16 .b8 ring[256];
    ld.param.u64 %rd1, [p_src];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [p_out];
    cvta.to.global.u64 %rd2, %rd2;
    ld.param.u32 %r1, [p_n];
    mov.u32 %r2, %tid.x;
    and.b32 %r3, %r2, 31;
    mov.u32 %r4, bars;
    mov.u32 %r5, ring;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r4], 32;
    @%p1 mbarrier.init.shared::cta.b64 [%r4+8], 32;
    @%p1 mbarrier.init.shared::cta.b64 [%r4+16], 32;
    @%p1 mbarrier.init.shared::cta.b64 [%r4+24], 32;
    bar.sync 0;
    mov.u32 %r6, 0;
    mov.u32 %r13, 0;
    setp.ge.u32 %p2, %r2, 32;
    @%p2 bra $producer;
"""
# warp 0: wait full[i % 2] (parity i / 2), read the next lane's word, arrive at empty[i % 2]
_CONSUMER = """$cloop:
    and.b32 %r7, %r6, 1;
    shr.u32 %r8, %r6, 1;
    and.b32 %r8, %r8, 1;
    mad.lo.u32 %r9, %r7, 8, %r4;
$cwait:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r9], %r8;
    @!%p3 bra $cwait;
    add.u32 %r10, %r3, 1;
    and.b32 %r10, %r10, 31;
    mad.lo.u32 %r11, %r7, 128, %r5;
    mad.lo.u32 %r11, %r10, 4, %r11;
    ld.shared.u32 %r12, [%r11];
    add.u32 %r13, %r13, %r12;
    add.u32 %r14, %r9, 16;
    mbarrier.arrive.shared::cta.b64 %rd3, [%r14];
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p4, %r6, %r1;
    @%p4 bra $cloop;
    mul.wide.u32 %rd4, %r3, 4;
    add.s64 %rd5, %rd2, %rd4;
    st.global.u32 [%rd5], %r13;
    ret;
"""
# warp 1: wait empty[i % 2] (parity i / 2 + 1: the first two pass at once), store src word, arrive at full
_PRODUCER = """$producer:
    and.b32 %r7, %r6, 1;
    shr.u32 %r8, %r6, 1;
    xor.b32 %r8, %r8, 1;
    and.b32 %r8, %r8, 1;
    mad.lo.u32 %r9, %r7, 8, %r4;
    add.u32 %r14, %r9, 16;
$pwait:
    mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r14], %r8;
    @!%p5 bra $pwait;
    mad.lo.u32 %r15, %r6, 32, %r3;
    mul.wide.u32 %rd6, %r15, 4;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.u32 %r16, [%rd7];
    mad.lo.u32 %r11, %r7, 128, %r5;
    mad.lo.u32 %r11, %r3, 4, %r11;
    st.shared.u32 [%r11], %r16;
    mbarrier.arrive.shared::cta.b64 %rd3, [%r9];
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p6, %r6, %r1;
    @%p6 bra $producer;
    ret;
}
"""
GOOD = _HEAD + _CONSUMER + _PRODUCER
# warp 1 copies each word by cp.async and arrives once it lands (`cp.async.mbarrier.arrive.noinc`)
_COPY = ("    ld.global.u32 %r16, [%rd7];\n    mad.lo.u32 %r11, %r7, 128, %r5;\n    mad.lo.u32 %r11, %r3, 4, %r11;\n"
         "    st.shared.u32 [%r11], %r16;\n    mbarrier.arrive.shared::cta.b64 %rd3, [%r9];\n")
_ASYNC_COPY = ("    mad.lo.u32 %r11, %r7, 128, %r5;\n    mad.lo.u32 %r11, %r3, 4, %r11;\n"
               "    cp.async.ca.shared.global [%r11], [%rd7], 4;\n    cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r9];\n")
ASYNC = GOOD.replace(_COPY, _ASYNC_COPY)


def _args(rng, n: int, ctas: int = 1):
    return [rng.integers(0, 2**32, (n * 32,), dtype=np.uint32), np.zeros(32, np.uint32), np.uint32(n)]


def _want(src: np.ndarray, n: int) -> np.ndarray:
    words = src.reshape(n, 32).astype(np.uint64)
    return (np.roll(words, -1, axis=1).sum(0) % 2**32).astype(np.uint32)


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_producer_consumer(n):
    rng = np.random.default_rng(n)
    args = _args(rng, n)
    _, out = emulate(GOOD, "k", 1, 64, args)
    np.testing.assert_array_equal(out, _want(args[0], n))


@pytest.mark.parametrize("edit, message", [
    # the consumer reads a slot before its phase completes: the producer's store meets its read mark
    (("    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r9], %r8;\n    @!%p3 bra $cwait;\n", ""),
     r"shared-memory race: thread \(32, 0, 0\).* writes .* which thread \(\d+, 0, 0\).* read|deadlock"),
    # the producer refills a slot the consumer has not released
    (("    mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r14], %r8;\n    @!%p5 bra $pwait;\n", ""),
     r"shared-memory race: thread \(32, 0, 0\).* writes .* which thread \(\d+, 0, 0\).* read"),
    # the producer waits for the phase that completes only after its own next arrival
    (("    xor.b32 %r8, %r8, 1;\n", ""), r"deadlock: every live thread waits"),
    # a whole-CTA barrier in one role while the other still runs
    (("    ld.shared.u32 %r12, [%r11];\n", "    ld.shared.u32 %r12, [%r11];\n    bar.sync 0;\n"),
     r"only 32 of the 64 live threads of the CTA .* reach this barrier"),
    # more arrivals than a phase expects
    (("    mbarrier.arrive.shared::cta.b64 %rd3, [%r9];\n",
      "    mbarrier.arrive.shared::cta.b64 %rd3, [%r9];\n    mbarrier.arrive.shared::cta.b64 %rd3, [%r9];\n"),
     r"32 threads of CTA 0 arrive at the mbarrier at 0x400, whose phase awaits 0 more|deadlock"),
    # roles that part lanes of one warp
    (("    setp.ge.u32 %p2, %r2, 32;\n", "    setp.ge.u32 %p2, %r2, 16;\n"), "non-uniform branch"),
    # a barrier used before it is made
    (("    @%p1 mbarrier.init.shared::cta.b64 [%r4+16], 32;\n", ""), "used before mbarrier.init"),
])  # fmt: skip
def test_broken_protocols_are_refused(edit, message):
    _refused(GOOD, edit, message)


def _refused(program: str, edit: tuple[str, str], message: str) -> None:
    """`program` with one line edited fails in the emulator with `message`."""
    old, new = edit
    assert old in program
    with pytest.raises(EmulationError, match=message):
        emulate(program.replace(old, new), "k", 1, 64, _args(np.random.default_rng(0), 4))


@pytest.mark.parametrize("n", [1, 2, 5])
def test_copies_arrive_as_they_land(n):
    """The producer's cp.async copies arrive at `full` once they land, with no group or wait."""
    assert ASYNC != GOOD
    rng = np.random.default_rng(20 + n)
    args = _args(rng, n)
    _, out = emulate(ASYNC, "k", 1, 64, args)
    np.testing.assert_array_equal(out, _want(args[0], n))


@pytest.mark.parametrize("edit, message", [
    # no arrival: the consumer waits for 32 that never come
    (("    cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r9];\n", ""), "deadlock"),
    # a consumer that does not wait for `full` runs ahead of the copies, and the ring stops
    (("    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r9], %r8;\n    @!%p3 bra $cwait;\n", ""),
     "deadlock: every live thread waits"),
    # the counting form, which the ISA's count would take one arrival more for
    (("cp.async.mbarrier.arrive.noinc.shared::cta.b64", "cp.async.mbarrier.arrive.shared::cta.b64"), "the .noinc form"),
])  # fmt: skip
def test_broken_copy_arrivals_are_refused(edit, message):
    _refused(ASYNC, edit, message)


def test_named_barrier_of_one_role():
    """`bar.sync 1, 32` by the consumer warp alone is a barrier of its own: fine; with a count the
    role does not have, refused."""
    rng = np.random.default_rng(5)
    args = _args(rng, 3)
    text = GOOD.replace("    add.u32 %r13, %r13, %r12;\n", "    add.u32 %r13, %r13, %r12;\n    bar.sync 1, 32;\n")
    _, out = emulate(text, "k", 1, 64, args)
    np.testing.assert_array_equal(out, _want(args[0], 3))
    with pytest.raises(EmulationError, match="32 threads of CTA 0 reach barrier 1, which waits for 96"):
        emulate(text.replace("bar.sync 1, 32;", "bar.sync 1, 96;"), "k", 1, 64, args)
    with pytest.raises(EmulationError, match="only 32 of the 64 live threads"):  # 64: the whole CTA
        emulate(text.replace("bar.sync 1, 32;", "bar.sync 1, 64;"), "k", 1, 64, args)


def test_setmaxnreg_form():
    text = GOOD.replace(".target sm_90", ".target sm_90a")
    body = text.replace("    bar.sync 0;\n", "    bar.sync 0;\n    setmaxnreg.inc.sync.aligned.u32 100;\n")
    with pytest.raises(EmulationError, match="setmaxnreg's register count must be one of"):
        emulate(body, "k", 1, 128, _args(np.random.default_rng(0), 2))
    with pytest.raises(EmulationError, match="setmaxnreg needs sm_90a"):
        emulate(GOOD.replace("    bar.sync 0;\n", "    bar.sync 0;\n    setmaxnreg.inc.sync.aligned.u32 96;\n"),
                "k", 1, 64, _args(np.random.default_rng(0), 2))


needs_gpu = pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("n", [1, 3, 64])
def test_producer_consumer_on_gpu(n):
    rng = np.random.default_rng(100 + n)
    args = _args(rng, n)
    on_gpu = cuda_runtime.run_kernel(GOOD, "k", (1, 1, 1), (64, 1, 1), args)[1]
    _, emulated = emulate(GOOD, "k", 1, 64, args)
    np.testing.assert_array_equal(on_gpu, emulated)
    np.testing.assert_array_equal(on_gpu, _want(args[0], n))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("n", [1, 3, 64])
def test_copies_arrive_as_they_land_on_gpu(n):
    rng = np.random.default_rng(200 + n)
    args = _args(rng, n)
    on_gpu = cuda_runtime.run_kernel(ASYNC, "k", (1, 1, 1), (64, 1, 1), args)[1]
    np.testing.assert_array_equal(on_gpu, _want(args[0], n))
