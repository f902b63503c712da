"""The emulator's memory features against NumPy models written from the PTX ISA text: shared
memory of every width, vector loads and stores, cp.async with zero fill at a ragged edge and
commit/wait groups, ldmatrix x1/x2/x4 with and without .trans, barriers; and the errors that make a
kernel which would be wrong on the GPU fail here: a missing cp.async.wait_group, a missing
bar.sync, a misaligned cp.async, an out-of-range shared access.

The tests marked `gpu` run the same kernels on the GPU and compare every output word, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify.emulator import EmulationError, emulate
from tilemma.compiler.verify.ptx_text import PtxSyntaxError, parse_ptx, print_ptx
from tilemma.compiler.core.targets import max_shared_per_cta
from tilemma.dialects import ptx

from tests import memory_kernels as K

# ---------------------------------------------------------------------------------------------
# Models (from the ISA text; independent of the emulator)
# ---------------------------------------------------------------------------------------------


def vector_copy_case(rng, n: int = 100, block: int = 64):
    src = rng.integers(0, 2**32, (8 * 2 * block,), dtype=np.uint32)
    want = np.zeros_like(src)
    w, d = src.reshape(-1, 8)[:n], want.reshape(-1, 8)[:n]
    d[:, :4] = w[:, 3::-1]
    d[:, 4:6], d[:, 6:8] = w[:, 6:8], w[:, 4:6]  # the two 64-bit words swapped
    return [src, np.zeros_like(src), np.uint32(n)], 1, want


def shared_types_case(rng):
    src = rng.integers(0, 2**32, (2 * 64 * 4,), dtype=np.uint32)
    b = src.view(np.uint8).reshape(2, 64, 16)
    want = np.zeros((2, 64, 64), np.uint8)
    nb = np.roll(b, -1, axis=1)  # neighbour (t + 1) % 64 of the same CTA
    want[..., 0:16] = nb
    want[..., 16] = nb[..., 3]
    want[..., 20:22] = nb[..., 6:8]
    want[..., 22:24] = b[:, 2:3, 2:4]  # [buf+34]: bytes 2, 3 of thread 2
    want[..., 24:28] = nb[..., 4:8]
    want[..., 28:32] = nb[..., 12:16]
    want[..., 30] = 5  # pad[11], written by thread 5
    want[..., 32:40] = nb[..., 8:16]
    want[..., 40:48] = nb[..., 8:16]
    want[..., 48:52] = nb[..., 0:4]
    want[..., 52:56] = np.int32(nb[..., 1].view(np.int8)).view(np.uint8).reshape(2, 64, 4)
    want[..., 56:64] = nb[..., 0:8]
    return [src, np.zeros(2 * 64 * 16, np.uint32)], 1, want.reshape(-1).view(np.uint32)


def cp_async_case(rng, n: int):
    src = rng.integers(0, 256, (n,), dtype=np.uint8)  # exactly n bytes: nothing past them may be read
    padded = np.zeros(4096, np.uint8)
    padded[:n] = src
    want = np.zeros((2, 2048), np.uint8)
    for c in range(2):
        buf = padded[2048 * c: 2048 * (c + 1)]
        for t in range(64):
            u, v = (t + 1) % 64, (t + 5) % 64
            want[c, 16 * t: 16 * t + 16] = buf[16 * u: 16 * u + 16]
            want[c, 1024 + 16 * t: 1024 + 16 * t + 16] = buf[1024 + 16 * v: 1024 + 16 * v + 16]
    return [src, np.zeros(4096, np.uint8), np.uint32(n)], 1, want.reshape(-1)


def ldmatrix_model(mem: np.ndarray, rows: np.ndarray, count: int, trans: bool) -> np.ndarray:
    """One warp: mem = 64 rows of 8 b16, rows[l] = the row lane l addresses; [32 lanes, 4] words.
    Matrix i has rows given by lanes 8i..8i+7; lane l gets elements (l // 4, 2 (l % 4) + h) of
    each matrix (of its transpose under .trans), h = 0 in the low half."""
    out = np.zeros((32, 4), np.uint32)
    for i in range(count):
        mat = mem[rows[8 * i: 8 * i + 8]]
        if trans:
            mat = mat.T
        for lane in range(32):
            lo, hi = mat[lane // 4, 2 * (lane % 4)], mat[lane // 4, 2 * (lane % 4) + 1]
            out[lane, i] = int(lo) | int(hi) << 16
    return out


def ldmatrix_case(rng, count: int, trans: bool):
    src = rng.integers(0, 2**16, (2 * 512,), dtype=np.uint16)
    rows = rng.integers(0, 64, (128,), dtype=np.uint32)
    want = np.zeros((4, 32, 4), np.uint32)
    for w in range(4):
        c = w // 2
        want[w] = ldmatrix_model(src[512 * c: 512 * (c + 1)].reshape(64, 8), rows[32 * w: 32 * w + 32], count, trans)
    return [src, rows, np.zeros(128 * 4, np.uint32)], 2, want.reshape(-1)


CASES = {  # name -> (kernel text, entry, make(rng) -> (args, output index, expected words))
    "vector_copy": (K.VECTOR_COPY, "vector_copy", vector_copy_case),
    "shared_types": (K.SHARED_TYPES, "shared_types", shared_types_case),
    **{f"cp_async_n{n}": (K.cp_async(), "cp_async", lambda rng, n=n: cp_async_case(rng, n))
       for n in (4096, 3001, 2052, 1100, 700)},
    "cp_async_wait_all": (K.cp_async("cp.async.wait_all"), "cp_async", lambda rng: cp_async_case(rng, 2999)),
    **{f"ldmatrix_x{c}{'_trans' if t else ''}": (K.ldmatrix(c, t), "ldmatrix",
                                                 lambda rng, c=c, t=t: ldmatrix_case(rng, c, t))
       for c in (1, 2, 4) for t in (False, True)},
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_model(name):
    text, entry, make = CASES[name]
    args, index, want = make(np.random.default_rng(7))
    got = emulate(text, entry, (2, 1, 1), (64, 1, 1), args)[index]
    assert np.array_equal(got.view(want.dtype), want), f"{name}: first difference at {np.flatnonzero(got.view(want.dtype) != want)[:4]}"


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_text_round_trips(name):
    text = CASES[name][0]
    assert print_ptx(parse_ptx(text)) == text


# ---------------------------------------------------------------------------------------------
# Errors: what would be wrong (or undefined) on the GPU fails here
# ---------------------------------------------------------------------------------------------


def _kernel(body: str, shared: str = ".shared .align 16 .b8 buf[1024];", before: str = "") -> str:
    """A kernel of 1-D CTAs with %r1 = tid, %r2 = buf, %r3 = buf + 16 tid and, for the global
    thread index g, %rd3 = src + 16 g, %rd5 = dst + 16 g."""
    return K.HEADER + before + r"""
.visible .entry k(
    .param .u64 src,
    .param .u64 dst
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    """ + shared + r"""
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    mad.lo.u32 %r3, %r1, 16, %r2;
    ld.param.u64 %rd1, [src];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r10, %ctaid.x;
    mov.u32 %r11, %ntid.x;
    mad.lo.u32 %r12, %r10, %r11, %r1;
    mul.wide.u32 %rd2, %r12, 16;
    add.s64 %rd3, %rd1, %rd2;
    ld.param.u64 %rd4, [dst];
    cvta.to.global.u64 %rd4, %rd4;
    add.s64 %rd5, %rd4, %rd2;
""" + body + """
    ret;
}
"""


def _run(text: str, block: int = 64, **options):
    src = np.arange(1024, dtype=np.uint32)
    return emulate(text, "k", (2, 1, 1), (block, 1, 1), [src, np.zeros(512, np.uint32)], **options)[1]


COPY = "    cp.async.cg.shared.global [%r3], [%rd3], 16;\n"
READ_OWN = "    ld.shared.u32 %r4, [%r3];\n    st.global.u32 [%rd5], %r4;\n"
NEIGHBOUR = "    add.u32 %r5, %r1, 1;\n    and.b32 %r5, %r5, 63;\n    mad.lo.u32 %r6, %r5, 16, %r2;\n"
READ_NEXT = NEIGHBOUR + "    ld.shared.u32 %r4, [%r6];\n    st.global.u32 [%rd5], %r4;\n"


@pytest.mark.parametrize("sync, ok", [
    ("    cp.async.commit_group;\n    cp.async.wait_group 0;\n", True),
    ("    cp.async.wait_all;\n", True),  # commits, then waits
    ("    cp.async.commit_group;\n", False),  # missing wait
    ("    cp.async.commit_group;\n    cp.async.wait_group 1;\n", False),  # one group may stay in flight
    ("    cp.async.wait_group 0;\n", False),  # never committed: wait_group 0 waits for nothing
    ("", False),
])  # fmt: skip
def test_cp_async_lands_only_when_waited_for(sync, ok):
    text = _kernel(COPY + sync + "    bar.sync 0;\n" + READ_NEXT)
    if ok:
        got = _run(text)
        chunk = np.arange(2)[:, None] * 64 + np.roll(np.arange(64), -1)  # the neighbour's source chunk
        assert np.array_equal(got.reshape(2, 64, 4)[:, :, 0], 4 * chunk)
    else:
        with pytest.raises(EmulationError, match=r"read of shared memory with a cp.async in flight.*missing cp.async.wait_group\?"):
            _run(text)


def test_wait_group_keeps_the_newest_groups_in_flight():
    two = COPY + "    cp.async.commit_group;\n    cp.async.cg.shared.global [%r3+512], [%rd3], 16;\n    cp.async.commit_group;\n"
    read_first = "    ld.shared.u32 %r4, [%r3];\n"
    _run(_kernel(two + "    cp.async.wait_group 1;\n" + read_first), block=32)
    with pytest.raises(EmulationError, match="cp.async in flight"):
        _run(_kernel(two + "    cp.async.wait_group 1;\n    ld.shared.u32 %r4, [%r3+512];\n"), block=32)


def test_missing_barrier_between_store_and_other_threads_load():
    store = "    st.shared.u32 [%r3], %r1;\n"
    got = _run(_kernel(store + "    bar.sync 0;\n" + READ_NEXT))
    assert np.array_equal(got.reshape(2, 64, 4)[:, :, 0], np.tile(np.roll(np.arange(64), -1), (2, 1)))
    _run(_kernel(store + READ_OWN))  # a thread reading its own store needs no barrier
    with pytest.raises(EmulationError, match=r"shared-memory race: thread \(0, 0, 0\) of CTA \(0, 0, 0\) reads shared "
                                             r"address 0x410, which thread \(1, 0, 0\) of CTA \(0, 0, 0\) wrote since "
                                             r"the last bar.sync; missing bar.sync\?"):
        _run(_kernel(store + READ_NEXT))


@pytest.mark.parametrize("barrier", ["bar.sync 0;", "barrier.sync 0;", "barrier.sync.aligned 0;", "bar.sync 0, 64;"])
def test_missing_barrier_between_load_and_other_threads_store(barrier):
    """Write after read: a thread overwrites what another thread read (a reused pipeline stage)."""
    read_then_store = READ_NEXT + "    {}\n    st.shared.u32 [%r3], %r1;\n"
    _run(_kernel("    st.shared.u32 [%r3], %r1;\n    bar.sync 0;\n" + read_then_store.format(barrier)))
    with pytest.raises(EmulationError, match="writes shared address .* which .* read since the last bar.sync"):
        _run(_kernel("    st.shared.u32 [%r3], %r1;\n    bar.sync 0;\n" + read_then_store.format("")))
    with pytest.raises(EmulationError, match="copies to shared address .* which .* read since the last bar.sync"):
        _run(_kernel("    st.shared.u32 [%r3], %r1;\n    bar.sync 0;\n" + READ_NEXT + COPY))


def test_cp_async_data_needs_a_barrier_before_other_threads_read_it():
    with pytest.raises(EmulationError, match="shared-memory race.*wrote since the last bar.sync"):
        _run(_kernel(COPY + "    cp.async.wait_all;\n" + READ_NEXT))
    with pytest.raises(EmulationError, match="shared-memory race"):  # barrier before the wait is too early
        _run(_kernel(COPY + "    cp.async.commit_group;\n    bar.sync 0;\n    cp.async.wait_group 0;\n" + READ_NEXT))


def test_two_threads_storing_one_byte_is_a_race():
    with pytest.raises(EmulationError, match=r"also writes in the same instruction; missing bar.sync\?"):
        _run(_kernel("    st.shared.u32 [%r2], %r1;\n"))
    with pytest.raises(EmulationError, match=r"thread \(1, 0, 0\) .* copies to shared address 0x400, which thread "
                                             r"\(0, 0, 0\) .* also copies to in the same instruction"):
        _run(_kernel("    cp.async.ca.shared.global [%r2], [%rd3], 4;\n"))
    # away from the buffer's start (the byte was once looked up as an index: IndexError, issue 25)
    with pytest.raises(EmulationError, match=r"copies to shared address 0x600, which thread \(0, 0, 0\) .* also "
                                             r"copies to in the same instruction"):
        _run(_kernel("    cp.async.ca.shared.global [%r2+512], [%rd3], 4;\n"))


def test_register_declarations_fit_the_register_file():
    """A thread's registers are bounded by the target's register file (a huge `.reg` asked the
    emulator for 931 TiB; issue 25); up to it the kernel runs."""
    huge = _kernel("").replace(".reg .b64 %rd<16>;", ".reg .b64 %rd<16>;\n    .reg .b64 %big<1099511627776>;")
    with pytest.raises(EmulationError, match=r"`.reg .b64 %big<1099511627776>;`: the registers declared up to here "
                                             r"come to 2199023255620 32-bit registers per thread; sm_90's whole "
                                             r"register file holds 65536"):
        _run(huge)
    _run(_kernel("").replace(".reg .b64 %rd<16>;", ".reg .b64 %rd<16>;\n    .reg .b32 %many<60000>;"), block=32)


@pytest.mark.parametrize("copy, message", [
    ("cp.async.cg.shared.global [%r3+4], [%rd3], 16;", r"misaligned shared cp.async destination by .*: shared address 0x404 is not aligned to 16 bytes"),
    ("cp.async.ca.shared.global [%r3+4], [%rd3], 8;", r"misaligned shared cp.async destination .* not aligned to 8 bytes"),
    ("cp.async.cg.shared.global [%r3], [%rd3+8], 16;", r"misaligned cp.async source by thread \(0, 0, 0\).* not aligned to 16 bytes"),
    ("cp.async.ca.shared.global [%r3], [%rd3+2], 4;", r"misaligned cp.async source"),
])  # fmt: skip
def test_misaligned_cp_async(copy, message):
    with pytest.raises(EmulationError, match=message):
        _run(_kernel(f"    {copy}\n    cp.async.wait_all;\n"))


def test_cp_async_source_bounds_follow_src_size():
    """The source is read for src-size bytes only: 0 reads nothing, even past the buffer's end."""
    past_end = "    add.s64 %rd6, %rd3, 4096;\n"
    _run(_kernel(past_end + "    cp.async.cg.shared.global [%r3], [%rd6], 16, 0;\n    cp.async.wait_all;\n"))
    with pytest.raises(EmulationError, match="out-of-bounds cp.async source read"):
        _run(_kernel(past_end + "    cp.async.cg.shared.global [%r3], [%rd6], 16, 1;\n    cp.async.wait_all;\n"))


@pytest.mark.parametrize("body, message", [
    ("    ld.shared.u32 %r4, [%r2+1024];\n", r"out-of-range shared load by thread \(0, 0, 0\) of CTA \(0, 0, 0\): shared address 0x800 \(\+4 bytes\) is outside the CTA's 1024 bytes"),
    ("    ld.shared.u32 %r4, [%r2-4];\n", "out-of-range shared load"),
    ("    st.shared.v4.u32 [%r3+16], {%r1, %r1, %r1, %r1};\n", r"out-of-range shared store by thread \(63, 0, 0\)"),
    ("    ld.shared.v2.u32 {%r4, %r5}, [%r3+4];\n", "misaligned shared load .* not aligned to 8 bytes"),
    ("    cp.async.cg.shared.global [%r3+16], [%rd3], 16;\n", "out-of-range shared cp.async destination"),
    ("    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r4, %r5, %r6, %r7}, [%r3+16];\n", "out-of-range shared ldmatrix row load by thread \\(63"),
    ("    ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r4}, [%r3+8];\n", "misaligned shared ldmatrix row load .* 16 bytes"),
    ("    mov.u32 %r4, dyn;\n    ld.shared.u32 %r5, [%r4];\n", "outside the CTA's 1024 bytes"),  # no dynamic bytes
    ("    cvt.u64.u32 %rd6, %r3;\n    cvta.shared.u64 %rd7, %rd6;\n    ld.u32 %r4, [%rd7];\n", "generic address of shared memory"),
])  # fmt: skip
def test_bad_shared_access(body, message):
    with pytest.raises(EmulationError, match=message):
        _run(_kernel(body, before="\n.extern .shared .align 16 .b8 dyn[];\n"))


def test_dynamic_shared_memory():
    """`.extern .shared` names `shared_bytes` bytes after the static buffers (all externs alias)."""
    body = ("    mov.u32 %r4, dyn;\n    mov.u32 %r5, dyn2;\n    mad.lo.u32 %r6, %r1, 4, %r4;\n"
            "    mad.lo.u32 %r7, %r1, 4, %r5;\n    st.shared.u32 [%r6+60000], %r1;\n    ld.shared.u32 %r8, [%r7+60000];\n"
            "    sub.u32 %r9, %r4, %r2;\n    st.global.v2.u32 [%rd5], {%r8, %r9};\n")
    externs = "\n.extern .shared .align 16 .b8 dyn[];\n\n.extern .shared .align 128 .b8 dyn2[];\n"
    text = _kernel(body, before=externs)
    got = _run(text, shared_bytes=64 * 1024).reshape(2, 64, 4)
    assert np.array_equal(got[:, :, 0], np.tile(np.arange(64), (2, 1)))
    assert (got[:, :, 1] == 1024).all()  # after buf, at the largest alignment
    with pytest.raises(EmulationError, match="out-of-range shared store"):
        _run(text, shared_bytes=60000)
    limit = max_shared_per_cta("sm_90")
    assert limit == 227 * 1024
    _run(text, shared_bytes=limit - 1024)
    with pytest.raises(EmulationError, match=r"1024 bytes of static and 231425 bytes of dynamic shared memory exceed the "
                                             r"232448 bytes \(227 KiB\) one CTA may use on sm_90"):
        _run(text, shared_bytes=limit - 1023)


def test_shared_memory_is_per_cta():
    """Each CTA has its own buffer: CTA 1's store does not show in CTA 0."""
    got = _run(_kernel("    mov.u32 %r4, %ctaid.x;\n    st.shared.u32 [%r3], %r4;\n    bar.sync 0;\n" + READ_NEXT))
    assert np.array_equal(got.reshape(2, 64, 4)[:, :, 0], np.array([[0] * 64, [1] * 64]))


@pytest.mark.parametrize("body, message", [
    ("    setp.lt.u32 %p1, %r1, 32;\n    @%p1 bar.sync 0;\n", r"only 32 of the 64 live threads of the CTA of thread \(32, 0, 0\).* reach this barrier"),
    ("    bar.sync 0, 32;\n", "64 threads of CTA 0 reach barrier 0, which waits for 32"),
    ("    bar.sync 1, 48;\n", "a barrier's thread count is a multiple of 32, not 48"),
    ("    setp.lt.u32 %p1, %r1, 16;\n    @%p1 ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r4}, [%r3];\n", "only 16 of 32 lanes .* execute this ldmatrix"),
    ("    ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r4}, [%r3];\n", "ldmatrix .x2 writes 2 registers"),
    ("    ldmatrix.sync.aligned.m8n8.x1.b16 {%r4}, [%r3];\n", r"expected ldmatrix.sync.aligned.m8n8.\{x1,x2,x4\}\[.trans\].shared\[::cta\].b16"),
    ("    ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%rd4}, [%r3];\n", "ldmatrix writes 32-bit registers"),
    ("    cp.async.cg.shared.global [%r3], [%rd3], 8;\n", "cp-size must be 16 for .cg"),
    ("    cp.async.ca.shared.global [%r3], [%rd3], 2;\n", "cp-size must be 4, 8 or 16"),
    ("    cp.async.ca.shared.global [%r3], [%rd3], 8, 9;\n", "src-size 9 is not in 0..8"),
    ("    mov.u32 %r9, 9;\n    cp.async.ca.shared.global [%r3], [%rd3], 8, %r9;\n", "src-size 9 exceeds cp-size 8"),
    ("    cp.async.wait_group %r1;\n", "wait_group takes a non-negative integer constant"),
    ("    cp.async.bulk.shared.global [%r3], [%rd3], 16;\n", r"expected cp.async.\{ca,cg\}"),
    ("    bar.arrive 0;\n", "expected bar.sync B"),
    ("    bar.sync 16;\n", "only a constant barrier 0-15"),
    ("    ld.shared.v4.u32 {%r4, %r5}, [%r3];\n", r"the destination needs \{%r, %r, %r, %r\}"),
])  # fmt: skip
def test_refused(body, message):
    with pytest.raises(EmulationError, match=message):
        _run(_kernel(body))


def test_no_shared_memory_declared():
    text = _kernel("    ld.shared.u32 %r4, [%r3];\n", shared="").replace("mov.u32 %r2, buf;", "mov.u32 %r2, 0;")
    with pytest.raises(EmulationError, match="declares no shared memory"):
        _run(text)


# ---------------------------------------------------------------------------------------------
# The ptx.shared op and the text reader
# ---------------------------------------------------------------------------------------------


def test_shared_op_prints_and_verifies():
    assert ptx.SharedOp("buf", 16, 4096).text() == ".shared .align 16 .b8 buf[4096];"
    assert ptx.SharedOp("dyn", 128).text() == ".extern .shared .align 128 .b8 dyn[];"
    for op, message in ((ptx.SharedOp("buf", 12, 64), "power of two"), (ptx.SharedOp("buf", 16, 0), "positive"),
                        (ptx.SharedOp("9buf", 16, 8), "not a PTX identifier")):
        with pytest.raises(Exception, match=message):
            op.verify()


@pytest.mark.parametrize("line, message", [
    ("    .shared .align 12 .b8 buf[64];", r"<ptx>:13: ptx.shared buf: .align must be a power of two"),
    ("    .shared .align 16 .b8 buf[];", r"<ptx>:13: expected '.shared .align A .b8 NAME\[SIZE\];'"),
    ("    .shared .align 16 .b32 buf[4];", r"<ptx>:13: expected '.shared"),
    ("    .extern .shared .align 16 .b8 buf[];", r"<ptx>:13: '.extern .shared' belongs at module scope"),
])  # fmt: skip
def test_bad_shared_declarations(line, message):
    text = _kernel("", shared=line.strip())
    with pytest.raises(PtxSyntaxError, match=message):
        parse_ptx(text)


def test_extern_at_the_end_of_a_module_is_refused():
    with pytest.raises(PtxSyntaxError, match=r"<ptx>:31: '.extern .shared' must be followed by the kernel"):
        parse_ptx(_kernel("") + "\n.extern .shared .align 16 .b8 dyn[];\n")


def test_vector_operands_read_back():
    text = _kernel("    st.global.v4.u32 [%rd5], {%r1,%r2 ,  %r3, %r4};\n")
    printed = print_ptx(parse_ptx(text))
    assert "st.global.v4.u32 [%rd5], {%r1, %r2, %r3, %r4};" in printed
    with pytest.raises(PtxSyntaxError, match="malformed vector operand"):
        parse_ptx(_kernel("    st.global.v2.u32 [%rd5], {%r1, };\n"))


# ---------------------------------------------------------------------------------------------
# Runtime: dynamic shared memory limit (no GPU needed for the check itself)
# ---------------------------------------------------------------------------------------------


def test_runtime_refuses_too_much_shared_memory():
    cuda_runtime.check_shared_bytes(227 * 1024 - 1024, 1024, 232448, "sm_90")
    with pytest.raises(ValueError, match=r"shared_bytes=231425: with the kernel's 1024 bytes of static shared memory that "
                                         r"is 232449 bytes per CTA; sm_90 allows at most 232448 \(227 KiB\)"):
        cuda_runtime.check_shared_bytes(231425, 1024, 232448, "sm_90")
    with pytest.raises(ValueError, match="non-negative integer"):
        cuda_runtime.check_shared_bytes(-1, 0, 232448, "sm_90")


# ---------------------------------------------------------------------------------------------
# The GPU: the same kernels, every output word compared bit for bit
# ---------------------------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_gpu_matches_emulator(name, seed):
    text, entry, make = CASES[name]
    rng = np.random.default_rng(seed)
    args, index, want = make(rng)
    if entry == "cp_async":  # random bytes past n: a copy that read them instead of zero-filling shows
        args[0] = np.concatenate([args[0], rng.integers(0, 256, 4096 - args[0].size, dtype=np.uint8)])
    on_gpu = cuda_runtime.run_kernel(text, entry, (2, 1, 1), (64, 1, 1), args)[index]
    emulated = emulate(text, entry, (2, 1, 1), (64, 1, 1), args)[index]
    diff = np.flatnonzero(on_gpu.view(np.uint8) != emulated.view(np.uint8))
    print(f"{name} seed {seed}: {on_gpu.nbytes} bytes, {diff.size} differ")
    assert diff.size == 0, f"{name}: GPU and emulator differ at bytes {diff[:8]}"
    assert np.array_equal(on_gpu.view(want.dtype), want), f"{name}: GPU differs from the model"


@pytest.mark.gpu
@needs_gpu
def test_gpu_dynamic_shared_memory_and_limit():
    """More than 48 KiB of dynamic shared memory (the opt-in), and a launch over the limit refused."""
    body = ("    mov.u32 %r4, dyn;\n    mad.lo.u32 %r6, %r1, 4, %r4;\n    st.shared.u32 [%r6+200000], %r1;\n"
            "    bar.sync 0;\n    add.u32 %r5, %r1, 1;\n    and.b32 %r5, %r5, 63;\n    mad.lo.u32 %r7, %r5, 4, %r4;\n"
            "    ld.shared.u32 %r8, [%r7+200000];\n    st.global.u32 [%rd5], %r8;\n")
    text = _kernel(body, before="\n.extern .shared .align 16 .b8 dyn[];\n")
    args = [np.arange(1024, dtype=np.uint32), np.zeros(512, np.uint32)]
    on_gpu = cuda_runtime.run_kernel(text, "k", (2, 1, 1), (64, 1, 1), args, shared_bytes=210000)[1]
    emulated = emulate(text, "k", (2, 1, 1), (64, 1, 1), args, shared_bytes=210000)[1]
    assert np.array_equal(on_gpu, emulated)
    assert np.array_equal(on_gpu.reshape(2, 64, 4)[:, :, 0], np.tile(np.roll(np.arange(64), -1), (2, 1)))
    with pytest.raises(ValueError, match="allows at most 232448"):
        cuda_runtime.run_kernel(text, "k", (2, 1, 1), (64, 1, 1), args, shared_bytes=232448)



@pytest.mark.parametrize("body, message", [
    ("    ld.global.v4.u32 {%r4, %r5, %r6, %r7}, [%rd3+4];\n", r"misaligned load by thread \(0, 0, 0\).* not aligned to 16 bytes"),
    ("    ld.global.v2.u32 {%r4, %r5}, [%rd3+2064];\n", r"out-of-bounds load by thread \(63, 0, 0\) of CTA \(1, 0, 0\): byte offset 4096 \(\+8 bytes\)"),
    ("    setp.lt.u32 %p1, %r1, 63;\n    @%p1 st.global.v2.b64 [%rd5+8], {%rd1, %rd2};\n",
     r"misaligned store by thread \(0, 0, 0\).* not aligned to 16 bytes"),
    ("    setp.lt.u32 %p1, %r1, 63;\n    @%p1 st.global.v4.u32 [%rd5+16], {%r1, %r1, %r1, %r1};\n", None),
    ("    st.global.v4.u32 [%rd5+16], {%r1, %r1, %r1, %r1};\n", r"out-of-bounds store by thread \(63, 0, 0\) of CTA \(1, 0, 0\)"),
])  # fmt: skip
def test_vector_global_access_is_checked(body, message):
    if message is None:  # predicated off where it would be out of bounds
        _run(_kernel(body))
        return
    with pytest.raises(EmulationError, match=message):
        _run(_kernel(body))


def test_shared_cta_spelling_is_the_same_instruction():
    args, index, want = ldmatrix_case(np.random.default_rng(3), 4, True)
    text = K.ldmatrix(4, True).replace(".trans.shared.b16", ".trans.shared::cta.b16")
    assert ".shared::cta.b16" in text
    assert np.array_equal(emulate(text, "ldmatrix", (2, 1, 1), (64, 1, 1), args)[index], want)
