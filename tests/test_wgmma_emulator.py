"""The emulator's wgmma (`compiler/verify/emulator/wgmma_ops.py`) on the kernel tools/wgmma_probe.py
ran on an H200: one warpgroup, D (64 x N, f32) = A (64 x 64) B (64 x N) + C as four chained
m64nNk16 wgmma.mma_async on 128-byte-swizzle descriptors, K- or N-major B. Every D word must be
`reference`'s, bit for bit, as it was on the GPU. Then the cases that must not run: a swapped
LBO / SBO (wrong on the GPU too), non-uniform descriptors, swizzle modes, types and forms that are
not modelled, writes to shared bytes a pending wgmma reads, a missing barrier or wgmma.fence.
Then the sparse form (wgmma.mma_async.sp m64nNk32, P.sparse_probe_ptx): the 48 variants the H200
ran (A in the 128- and the 64-byte swizzle), bit for bit `P.sparse_reference`'s, and what it refuses
(sp-sel 1, imm-trans-a 1, PTX before 8.2, undefined metadata, mode 2 for B); and the 8-bit integer
form (m64nNk32.s32, P.int8_probe_ptx): the 12 variants, word for word the wrapped int32 sums.

The probe's text is brought to the subset `ptx_text` reads (one parameter a line, numbered
registers for its three named ones) and, where its B is smaller than its copy loop's 2048-byte
step or N-major with N < 64 (a 128-byte row per K), given the shared memory and copy steps the
image needs; nothing else of the kernel changes.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from tilemma.compiler.verify import mma_arith
from tilemma.compiler.verify.emulator import EmulationError, compile_entry, emulate

from tools import wgmma_probe as P

A_BYTES = 64 * 128
STEP = 128 * 16  # bytes the probe's 128 threads copy a step
MODE_1 = 1 << 62


def _b_bytes(n: int, mn: bool) -> int:
    """Bytes of B's image: N-major keeps 64 N a 128-byte row whatever N is."""
    return -(-(64 * 128 * -(-n // 64) if mn else n * 128) // STEP) * STEP


def parser_subset(text: str) -> str:
    """A probe's text in the subset `ptx_text` reads: one parameter a line, numbered registers
    for its three named ones."""
    head, params, rest = re.match(r"(.*?\.entry \w+)\(([^)]*)\)\n(.*)", text, re.S).groups()
    text = head + "(\n" + ",\n".join("    " + p.strip() for p in params.split(",")) + "\n)\n" + rest
    text = text.replace(".reg .b64 %rd_desc, %rd_a, %rd_b;", ".reg .b64 %rq<3>;")
    for i, name in enumerate(("%rd_desc", "%rd_a", "%rd_b")):
        text = text.replace(name, f"%rq{i}")
    return text


def kernel(n: int = 64, etype: str = "f16", mn: bool = False, lbo: int | None = None, sbo: int = 1024) -> str:
    lbo = lbo if lbo is not None else (64 * 128 if mn else 16)
    text = parser_subset(P.probe_ptx(n, etype, mn, lbo, sbo))
    size = _b_bytes(n, mn)
    text = text.replace(f"smem[{A_BYTES + n * 128}]", f"smem[{A_BYTES + size}]")
    more = []
    for base in range(-(-n * 128 // STEP) * STEP, size, STEP):  # the copy steps the probe stops short of
        more += [f"mad.wide.u32 %rd5, %r1, 16, %rd2;", f"ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd5+{base}];",
                 "mad.lo.u32 %r3, %r1, 16, %r2;", f"st.shared.v4.u32 [%r3+{A_BYTES + base}], {{%r4, %r5, %r6, %r7}};"]
    return text.replace("fence.proxy.async.shared::cta;", "\n".join(more + ["fence.proxy.async.shared::cta;"]))


def case(n: int, etype: str, mn: bool, adversarial: bool, seed: int = 0):
    """A, B, C and the kernel's arguments: the swizzled images of A and B, C, D."""
    a, b, c = P.operands(n, etype, np.random.default_rng(seed), adversarial)
    if mn:
        wide = np.zeros((64, -(-n // 64) * 64), b.dtype)
        wide[:, :n] = b
        b_img = P.sw128_mnmajor(wide)
    else:
        b_img = P.sw128_kmajor(np.ascontiguousarray(b.T))
    b_img = np.concatenate([b_img, np.zeros(_b_bytes(n, mn) - b_img.size, np.uint8)])
    return (a, b, c), [P.sw128_kmajor(a), b_img, c, np.zeros((64, n), np.float32)]


def run(text: str, args) -> np.ndarray:
    return emulate(text, P.ENTRY, 1, 128, args)[3].view(np.uint32)


def bits(d) -> np.ndarray:
    return d.astype(np.float32).view(np.uint32)


def probe(n: int, etype: str, mn: bool, adversarial: bool):
    """(D the emulator gives, (A, B, C)) for the probe kernel."""
    (a, b, c), args = case(n, etype, mn, adversarial, seed=n + adversarial)
    return run(kernel(n, etype, mn), args), (a, b, c)


@pytest.mark.parametrize("adversarial", [False, True], ids=["random", "adversarial"])
@pytest.mark.parametrize("mn", [False, True], ids=["K-major", "N-major"])
@pytest.mark.parametrize("etype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [64, 128, 256])
def test_probe_kernel_matches_reference_bit_for_bit(n, etype, mn, adversarial):
    """What the H200 gave for N = 64, 128, 256 (N = 8: the same layouts, not run on a GPU)."""
    got, (a, b, c) = probe(n, etype, mn, adversarial)
    want = bits(P.reference(a, b, c, etype)).reshape(-1)
    bad = np.flatnonzero(got.reshape(-1) != want)
    assert bad.size == 0, f"{bad.size} of {want.size} D words differ, first at {np.unravel_index(bad[0], (64, n))}"


def test_two_warpgroups_in_each_of_two_ctas():
    """256 threads a CTA: warpgroup 0 copies the images, both run the wgmmas on them, each with
    its own accumulators (C's rows 64 up for warpgroup 1); two CTAs, each its own shared memory."""
    (a, b, c), args = case(64, "bf16", True, True)
    c2 = np.concatenate([c, c[::-1] * 3])
    text = kernel(64, "bf16", True).replace("mov.u32 %r2, smem;", "mov.u32 %r2, smem;\nsetp.lt.u32 %p3, %r1, 128;")
    text = re.sub(r"^(ld\.global\.v4|st\.shared\.v4)", r"@%p3 \1", text, flags=re.M)
    got = emulate(text, P.ENTRY, 2, 256, args[:2] + [c2, np.zeros((128, 64), np.float32)])[3].view(np.uint32)
    want = np.concatenate([bits(P.reference(a, b, c2[:64], "bf16")), bits(P.reference(a, b, c2[64:], "bf16"))])
    assert (got == want).all()


def test_swapped_lbo_and_sbo_read_the_wrong_elements():
    """N-major B with LBO 1024, SBO 8192 (the offsets of N blocks and K groups swapped): wrong
    on the GPU, wrong here; at N = 64 it reads past the shared memory."""
    (a, b, c), args = case(128, "f16", True, False)
    got = run(kernel(128, "f16", True, lbo=1024, sbo=64 * 128), args)
    assert (got.reshape(-1) != bits(P.reference(a, b, c, "f16")).reshape(-1)).mean() > 0.5
    _, args = case(64, "f16", True, False)
    with pytest.raises(EmulationError, match=r"out-of-range shared wgmma.mma_async operand read .* 0x4400"):
        run(kernel(64, "f16", True, lbo=1024, sbo=64 * 128), args)


def test_align_1024_buffer_after_a_smaller_one():
    """A buffer declared .align 1024 after another starts at the next 1024-aligned address: the
    swizzle is of absolute addresses, so D would be wrong (or the descriptor's start truncated)
    were it not."""
    (a, b, c), args = case(64, "bf16", False, True)
    text = kernel(64, "bf16").replace(".shared .align 1024", ".shared .align 4 .b8 pad[4];\n.shared .align 1024")
    assert (run(text, args).reshape(-1) == bits(P.reference(a, b, c, "bf16")).reshape(-1)).all()
    where = emulate(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(\n    .param .u64 p\n)\n{\n"
                    ".shared .align 4 .b8 pad[4];\n.shared .align 1024 .b8 buf[64];\n.reg .b32 %r<2>;\n"
                    ".reg .b64 %rd<2>;\nld.param.u64 %rd1, [p];\nmov.u32 %r1, buf;\nst.global.u32 [%rd1], %r1;\n"
                    "ret;\n}\n", "k", 1, 32, [np.zeros(1, np.uint32)])[0]
    assert int(where[0]) == 0x800


def test_scale_d_false_ignores_c():
    """scale-d false (a predicate register or the constant 0) on the first step: D = A B."""
    (a, b, c), args = case(64, "f16", False, False)
    want = bits(P.reference(a, b, np.zeros_like(c), "f16")).reshape(-1)
    assert (want != bits(P.reference(a, b, c, "f16")).reshape(-1)).any()
    text = kernel(64, "f16")
    first = text.index("wgmma.mma_async")
    for scale in ("%p2", "0"):
        edited = text[:first] + text[first:].replace("%p1, 1, 1, 0, 0;", f"{scale}, 1, 1, 0, 0;", 1)
        edited = edited.replace("setp.eq.u32 %p1, 1, 1;", "setp.eq.u32 %p1, 1, 1;\nsetp.eq.u32 %p2, 1, 0;")
        assert (run(edited, args).reshape(-1) == want).all()


@pytest.mark.parametrize("operand", ["a", "b"])
def test_imm_scale_minus_one_negates(operand):
    (a, b, c), args = case(64, "bf16", True, False)
    new = "%p1, -1, 1, 0, 1;" if operand == "a" else "%p1, 1, -1, 0, 1;"
    got = run(kernel(64, "bf16", True).replace("%p1, 1, 1, 0, 1;", new), args)
    a, b = (-a.astype(np.float64), b) if operand == "a" else (a, -b.astype(np.float64))
    assert (got.reshape(-1) == bits(P.reference(a, b, c, "bf16")).reshape(-1)).all()


def test_transposed_a_reads_m_major():
    """imm-trans-a 1: A M-major (64 M a 128-byte row per K), the N-major layout of B applied to A."""
    (a, b, c), args = case(64, "f16", False, True)
    args[0] = P.sw128_mnmajor(np.ascontiguousarray(a.T))  # K x M, M contiguous
    text = kernel(64, "f16")
    text = re.sub(r"add\.u32 %r15, %r2, (\d+);\n(cvt[^\n]*\n[^\n]*\n[^\n]*\n)or\.b64 %rq0, %rq0, (\d+);\nmov\.b64 %rq1",
                  lambda mt: f"add.u32 %r15, %r2, {int(mt.group(1)) // 32 * 2048};\n{mt.group(2)}"
                  f"or.b64 %rq0, %rq0, {mt.group(3)};\nmov.b64 %rq1", text)
    got = run(text.replace("%p1, 1, 1, 0, 0;", "%p1, 1, 1, 1, 0;"), args)
    assert (got.reshape(-1) == bits(P.reference(a, b, c, "f16")).reshape(-1)).all()


def test_non_uniform_descriptor():
    _, args = case(64, "f16", False, False)
    text = kernel(64, "f16").replace("mov.b64 %rq1, %rq0;", "mov.b64 %rq1, %rq0;\ncvt.u64.u32 %rd9, %r1;\n"
                                     "and.b64 %rd9, %rd9, 2;\nadd.u64 %rq1, %rq1, %rd9;", 1)
    with pytest.raises(EmulationError, match=r"the A descriptor differs across the warpgroup of thread \(0, 0, 0\) "
                                             r"of CTA \(0, 0, 0\) \(0x4000004000010040, 0x4000004000010042\)"):
        run(text, args)


@pytest.mark.parametrize("mode, what", [(0, r"no swizzle \(the interleaved layout\)"),
                                       (2, "the 64-byte swizzle"), (3, "the 32-byte swizzle")])
def test_unmodelled_swizzle_modes_are_refused(mode, what):
    """A dense A's descriptor of another mode than 1 (mode 2 was measured on a sparse A only)."""
    _, args = case(64, "f16", False, False)
    const = MODE_1 | (1024 >> 4) << 32 | (16 >> 4) << 16
    text = kernel(64, "f16").replace(f", {const};", f", {const - MODE_1 + (mode << 62)};")
    with pytest.raises(EmulationError, match=f"A descriptor 0x[0-9a-f]+ has swizzle mode {mode}, {what} "
                                             r"\(only mode 1, the 128-byte swizzle, is modelled"):
        run(text, args)


def test_base_offset_and_reserved_bits_are_refused():
    _, args = case(64, "f16", False, False)
    const = MODE_1 | (1024 >> 4) << 32 | (16 >> 4) << 16
    for extra, message in ((3 << 49, "base offset 3"), (1 << 14, "reserved bits 0x4000 set")):
        with pytest.raises(EmulationError, match=message):
            run(kernel(64, "f16").replace(f", {const};", f", {const | extra};"), args)


@pytest.mark.parametrize("old, new, message", [
    (".f32.f16.f16", ".f16.f16.f16", r"only wgmma.mma_async.sync.aligned.m64nNk16.f32.\{f16,bf16\}"),
    (".f32.f16.f16", ".f32.f16.bf16", "A and B of one type"),
    (".f32.f16.f16", ".f32.e4m3.e4m3", "m64nNk16.f32"),
    ("%rq1, %rq2, %p1", "{%r4, %r5, %r6, %r7}, %rq2, %p1", "A from registers is modelled for tf32 and 8-bit integers only"),
    ("%p1, 1, 1, 0, 0;", "%p1, 2, 1, 0, 0;", "imm-scale-a must be one of the constants 1, -1, got 2"),
    ("%p1, 1, 1, 0, 0;", "%p1, 1, 1, 0, 2;", "imm-trans-b must be one of the constants 0, 1"),
    ("%p1, 1, 1, 0, 0;", "%r3, 1, 1, 0, 0;", "scale-d"),
    ("{%d0, %d1,", "{%d1, %d1,", "a register appears twice in d"),
    ("%rq1, %rq2, %p1", "%r3, %rq2, %p1", "a-desc must be a .u64 or .b64 register"),
    ("wgmma.wait_group.sync.aligned 0;", "wgmma.wait_group.sync.aligned %r1;", "non-negative integer constant"),
    (".target sm_90a", ".target sm_90", "wgmma needs sm_90a"),
])
def test_unsupported_forms_are_refused_when_decoded(old, new, message):
    text = kernel(64, "f16")
    assert old in text
    with pytest.raises(EmulationError, match=message):
        compile_entry(text.replace(old, new))


def test_emulated_arch_must_be_hopper():
    with pytest.raises(EmulationError, match="wgmma exists only on sm_90a; the emulator imitates sm_120a"):
        compile_entry(kernel(64, "f16"), arch="sm_120a")
    assert mma_arith.DEFAULT_ARCH == "sm_90"


def test_whole_warpgroups_only():
    _, args = case(64, "f16", False, False)
    with pytest.raises(EmulationError, match="the CTA has 64 threads, not whole warpgroups of 128"):
        emulate(kernel(64, "f16"), P.ENTRY, 1, 64, args)
    text = kernel(64, "f16").replace("wgmma.fence.sync.aligned;", "setp.lt.u32 %p3, %r1, 64;\n"
                                     "@%p3 wgmma.fence.sync.aligned;")
    with pytest.raises(EmulationError, match="only 64 of the 128 threads of the warpgroup of thread"):
        run(text, args)


WAIT = "wgmma.wait_group.sync.aligned 0;"
COMMIT = "wgmma.commit_group.sync.aligned;"
STORE = "st.shared.u32 [%r3+4096], %r4;"  # thread t: A's row 32 + t / 8 (%r3 = smem + 16 t)


@pytest.mark.parametrize("where, ok", [
    (f"{COMMIT}\nbar.sync 0;\n{STORE}\n{WAIT}", False),  # before the wait, even after a barrier
    (f"{COMMIT}\n{WAIT}\nbar.sync 0;\n{STORE}", True),
    (f"{COMMIT}\nwgmma.wait_group.sync.aligned 1;\nbar.sync 0;\n{STORE}", False),  # its group is the newest
    (f"{WAIT}\nbar.sync 0;\n{STORE}", False),  # never committed: no wait retires it
    (f"{COMMIT}\n{WAIT}\n{STORE}", False),  # retired, but read by the warpgroup since the last barrier
    (f"{COMMIT}\nbar.sync 0;\ncp.async.cg.shared.global [%r2+4096], [%rd1], 16;\n{WAIT}", False),
], ids=["store-before-wait", "store-after-wait", "wait-1-keeps-the-newest", "never-committed",
        "no-barrier-after-wait", "cp.async-before-wait"])
def test_writes_to_bytes_a_pending_wgmma_reads(where, ok):
    (a, b, c), args = case(64, "f16", False, False)
    text = kernel(64, "f16").replace(f"{COMMIT}\n{WAIT}", where)
    if ok:
        assert (run(text, args).reshape(-1) == bits(P.reference(a, b, c, "f16")).reshape(-1)).all()
        return
    message = r"shared-memory race" if COMMIT + "\n" + WAIT + "\n" + STORE == where else (
        r"write of shared memory a wgmma.mma_async still reads: thread \(\d+, 0, 0\) of CTA \(0, 0, 0\) "
        r"(stores|copies to) shared address 0x1400, .*missing wgmma.wait_group\?")
    with pytest.raises(EmulationError, match=message):
        run(text, args)


def test_operands_need_a_barrier_after_the_stores():
    _, args = case(64, "f16", False, False)
    text = kernel(64, "f16").replace("fence.proxy.async.shared::cta;\nbar.sync 0;", "fence.proxy.async.shared::cta;")
    with pytest.raises(EmulationError, match=r"the warpgroup of thread \(0, 0, 0\) of CTA \(0, 0, 0\) reads shared "
                                             r"address 0x400, which thread \(0, 0, 0\) .* wrote since the last bar.sync"):
        run(text, args)


def test_first_mma_async_needs_a_fence():
    _, args = case(64, "f16", False, False)
    with pytest.raises(EmulationError, match="has not executed wgmma.fence"):
        run(kernel(64, "f16").replace("wgmma.fence.sync.aligned;\n", ""), args)


# The sparse form, wgmma.mma_async.sp m64nNk32 (selector 0): P.sparse_probe_ptx's kernel, which
# takes A's kept values, B and each thread's metadata words through dynamic shared memory and `pe`.


def sparse_kernel(n: int = 64, etype: str = "f16", mn: bool = False, k: int | None = None, a_row: int = 128) -> str:
    """The sparse probe's text in the parser's subset."""
    return parser_subset(P.sparse_probe_ptx(n, etype, mn, k or (128 if n <= 128 and a_row == 128 else 64), a_row))


def run_sparse(text: str, n: int, etype: str, mn: bool, adversarial: bool, edit=None, a_row: int = 128):
    """(D's words the emulator gives, (A, B, C)) for the sparse probe's data, seeded as on the
    GPU; `edit` may change the arguments first."""
    (a, b, c), args, shared, _ = P.sparse_case(n, etype, mn, adversarial, seed=n + adversarial, a_row=a_row)
    if edit is not None:
        edit(args)
    got = emulate(text, P.ENTRY, 1, 128, args, shared_bytes=shared)[3].view(np.uint32)
    return got, (a, b, c)


@pytest.mark.parametrize("adversarial", [False, True], ids=["random", "adversarial"])
@pytest.mark.parametrize("mn", [False, True], ids=["K-major", "N-major"])
@pytest.mark.parametrize("etype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [64, 128, 256])
@pytest.mark.parametrize("a_row", [128, 64], ids=["A-128B", "A-64B"])
def test_sparse_probe_kernel_matches_reference_bit_for_bit(n, etype, mn, adversarial, a_row):
    """The 48 variants the H200 ran (A's kept values in the 128- or the 64-byte swizzle): every D
    word P.sparse_reference's (as the GPU's were)."""
    got, (a, b, c) = run_sparse(sparse_kernel(n, etype, mn, a_row=a_row), n, etype, mn, adversarial, a_row=a_row)
    want = bits(P.sparse_reference(a, b, c, etype)).reshape(-1)
    bad = np.flatnonzero(got.reshape(-1) != want)
    assert bad.size == 0, f"{bad.size} of {want.size} D words differ, first at {np.unravel_index(bad[0], (64, n))}"


def test_sparse_counts_one_mma_per_instruction_and_ignores_other_lanes():
    """One mma counted per k32 instruction (K / 32 of them). The metadata words of the lanes
    selector 0 does not read (quad positions 2, 3) change nothing; a word of a lane it reads does."""
    for n in (64, 256):
        prog = compile_entry(sparse_kernel(n, "bf16", False))
        _, args, shared, k = P.sparse_case(n, "bf16", False, True, seed=n + 1)
        prog.run(1, 128, args, shared_bytes=shared)
        assert prog.stats.mma == k // 32 == (4 if n == 64 else 2)
    text = sparse_kernel(64, "bf16", False)
    (a, b, c), _, _, _ = P.sparse_case(64, "bf16", False, True, seed=65)
    want = bits(P.sparse_reference(a, b, c, "bf16")).reshape(-1)

    def flip_unread(args):
        lanes = np.arange(128) % 4 >= 2
        args[4][lanes] ^= np.uint32(0xFFFFFFFF)

    got, _ = run_sparse(text, 64, "bf16", False, True, edit=flip_unread)
    assert (got.reshape(-1) == want).all()

    def move_one_index(args):  # lane 0, step 0: chunk 0 of row 0 keeps 0, 1 -> 0, 2 (or 0, 3)
        w = int(args[4][0, 0])
        args[4][0, 0] = (w & ~np.uint32(0xF)) | np.uint32(0b1000 if (w & 0xF) != 0b1000 else 0b1100)

    got, _ = run_sparse(text, 64, "bf16", False, True, edit=move_one_index)
    assert (got.reshape(-1) != want).any()


SP_ARGS = "%e0, 0, %p1, 1, 1, 0, 0;"  # the first instruction's sp-meta .. imm-trans-b (K-major B)


@pytest.mark.parametrize("old, new, message", [
    (SP_ARGS, "%e0, 1, %p1, 1, 1, 0, 0;", r"sp-sel 1 is not modelled: only selector 0 .* was measured"),
    (SP_ARGS, "%e0, 2, %p1, 1, 1, 0, 0;", "sp-sel .* must be one of the constants 0, 1, got 2"),
    (SP_ARGS, "%e0, %r3, %p1, 1, 1, 0, 0;", "sp-sel .* must be one of the constants 0, 1"),
    (SP_ARGS, "%e0, 0, %p1, 1, 1, 1, 0;", r"imm-trans-a 1 \(an M-major sparse A\) is not modelled"),
    (SP_ARGS, "%rq1, 0, %p1, 1, 1, 0, 0;", "sp-meta must be a 32-bit register"),
    (SP_ARGS, "%p1, 0, %p1, 1, 1, 0, 0;", "sp-meta must be a 32-bit register"),
    (SP_ARGS, "0, %p1, 1, 1, 0, 0;", "expected 10 operands, got 9"),
    (".version 8.2", ".version 8.0", "wgmma.mma_async.sp needs PTX ISA 8.2 or newer, the module is 8.0"),
    (".version 8.2", ".version 7.8", "wgmma needs PTX ISA 8.0 or newer"),
    (".f32.f16.f16", ".f32.f16.bf16", r"only wgmma.mma_async.sp.sync.aligned.m64nNk32.f32.\{f16,bf16\}.* one type"),
    ("k32.f32.f16.f16", "k16.f32.f16.f16", r"only wgmma.mma_async.sp.sync.aligned.m64nNk32"),
])
def test_unsupported_sparse_forms_are_refused_when_decoded(old, new, message):
    text = sparse_kernel(64, "f16", False)
    assert old in text
    with pytest.raises(EmulationError, match=message):
        compile_entry(text.replace(old, new, 1))


@pytest.mark.parametrize("nibble, why", [(0b0101, "the same index twice"), (0b0001, "decreasing indices")])
def test_undefined_metadata_is_refused_with_its_warp(nibble, why):
    """Lane 1 of warp 1 (thread 33, read by selector 0), step 0: the low two fields (one chunk's
    two indices) set to 1, 1 or to 1, 0; the error names that warp. The same in lane 3 (not read)
    changes nothing."""
    text = sparse_kernel(64, "f16", False)

    def bad(lane):
        def edit(args):
            args[4][lane, 0] = (args[4][lane, 0] & ~np.uint32(0xF)) | np.uint32(nibble)
        return edit

    with pytest.raises(EmulationError, match=r"the warp of thread \(32, 0, 0\) of CTA \(0, 0, 0\) \(A rows 16..31 "
                                             rf"of its warpgroup\), sp-meta: metadata of A row \d+, chunk \d+ .*{why}"):
        run_sparse(text, 64, "f16", False, False, edit=bad(33))
    got, (a, b, c) = run_sparse(text, 64, "f16", False, False, edit=bad(35))
    assert (got.reshape(-1) == bits(P.sparse_reference(a, b, c, "f16")).reshape(-1)).all()


def test_sparse_a_in_the_64_byte_swizzle_read_as_128_is_wrong():
    """A's 64-byte-swizzled image through a mode 1 descriptor (SBO 1024) reads other elements:
    the mode is modelled, not ignored."""
    text = sparse_kernel(64, "f16", False, a_row=64)
    const = (2 << 62) | (512 >> 4) << 32 | (16 >> 4) << 16
    assert f", {const};" in text
    wrong = text.replace(f", {const};", f", {MODE_1 | (1024 >> 4) << 32 | (16 >> 4) << 16};")
    got, (a, b, c) = run_sparse(wrong, 64, "f16", False, False, a_row=64)
    assert (got.reshape(-1) != bits(P.sparse_reference(a, b, c, "f16")).reshape(-1)).any()


def test_64_byte_swizzle_of_a_sparse_b_is_refused():
    """Mode 2 was measured on a sparse A alone: a B descriptor of mode 2 is refused."""
    text = sparse_kernel(64, "f16", False)
    const = MODE_1 | (1024 >> 4) << 32 | (16 >> 4) << 16
    head, _, tail = text.partition("mov.b64 %rq1, %rq0;")  # past A's first descriptor: B's
    text = head + "mov.b64 %rq1, %rq0;" + tail.replace(f", {const};", f", {(2 << 62) | (512 >> 4) << 32 | 1 << 16};", 1)
    with pytest.raises(EmulationError, match="B descriptor 0x[0-9a-f]+ has swizzle mode 2"):
        run_sparse(text, 64, "f16", False, False)


# The 8-bit integer form, wgmma.mma_async m64nNk32.s32.{s8,u8} (K-major, no immediates):
# P.int8_probe_ptx's kernel, as the H200 ran it.


def int8_kernel(n: int = 64, etype: str = "s8", a_registers: bool = False) -> str:
    """The integer probe's text in the parser's subset."""
    return parser_subset(P.int8_probe_ptx(n, etype, a_registers))


def run_int8(text: str, n: int, etype: str, adversarial: bool, a_registers: bool = False):
    (a, b, c), args = P.int8_case(n, etype, adversarial, seed=n + adversarial, a_registers=a_registers)
    got = emulate(text, P.ENTRY, 1, 128, args, shared_bytes=args[0].nbytes + args[1].nbytes)[3]
    return got, P.int8_reference(a, b, c)


@pytest.mark.parametrize("a_registers", [False, True], ids=["a-shared", "a-registers"])
@pytest.mark.parametrize("adversarial", [False, True], ids=["random", "adversarial"])
@pytest.mark.parametrize("etype", ["s8", "u8"])
@pytest.mark.parametrize("n", [64, 128, 256])
def test_int8_probe_kernel_matches_reference(n, etype, adversarial, a_registers):
    """The 24 variants the H200 ran (A from shared memory or from registers): every D word the
    wrapped int32 sum (C near the limits)."""
    got, want = run_int8(int8_kernel(n, etype, a_registers), n, etype, adversarial, a_registers)
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {want.size} D words differ"


@pytest.mark.parametrize("old, new", [
    ("{%a0, %a1, %a2, %a3}", "{%a1, %a0, %a2, %a3}"),  # rows g and g + 8
    ("{%a0, %a1, %a2, %a3}", "{%a2, %a1, %a0, %a3}"),  # k 4c.. and 16 + 4c..
], ids=["rows", "k-halves"])
def test_int8_a_registers_are_the_mma_sync_fragment(old, new):
    """8-bit A from registers: swapping two of a thread's A registers changes D, so the m16n8k32
    fragment layout is what is checked."""
    text = int8_kernel(64, "s8", a_registers=True)
    wrong = text.replace(old, new)
    assert wrong != text
    got, want = run_int8(wrong, 64, "s8", False, a_registers=True)
    assert not np.array_equal(got, want)


def test_int8_a_register_written_while_the_wgmma_runs_is_an_error():
    """An 8-bit A register of a running mma_async overwritten before the wait_group that retires it."""
    text = int8_kernel(64, "s8", a_registers=True)
    early = text.replace("wgmma.commit_group.sync.aligned;", "wgmma.commit_group.sync.aligned;\nmov.b32 %a0, 0;")
    assert early != text
    with pytest.raises(EmulationError, match=r"wrote %a0, an A register of a wgmma.mma_async"):
        run_int8(early, 64, "s8", False, a_registers=True)


def test_int8_probe_catches_a_wrong_b_descriptor():
    """B's descriptor pointed at A: other products, other D (the descriptor is modelled, not ignored)."""
    text = int8_kernel(64, "s8")
    wrong = re.sub(r"add\.u32 %r15, %r2, 8192;", "add.u32 %r15, %r2, 0;", text, count=1)
    assert wrong != text
    got, want = run_int8(wrong, 64, "s8", False)
    assert not np.array_equal(got, want)


@pytest.mark.parametrize("old, new, message", [
    ("k32.s32.s8.s8 {", "k32.s32.s8.u8 {", r"A and B of one type"),
    ("%rq2, %p1;", "%rq2, %p1, 1, 1;", "4 operands"),
    (".reg .s32 %d<32>;", ".reg .f32 %d<32>;", r"d must be \.s32 registers"),
    ("m64n64k32", "m64n40k32", r"for 8-bit integers 8, 16, 24 or a multiple of 16"),  # as ptxas refuses it
])
def test_unsupported_int8_forms_are_refused_when_decoded(old, new, message):
    text = int8_kernel(64, "s8")
    assert old in text
    with pytest.raises(EmulationError, match=message):
        compile_entry(text.replace(old, new), P.ENTRY, "sm_90a")


# The tf32 form, wgmma.mma_async m64nNk8.f32.tf32.tf32 (K-major, f32 elements whose low 13 bits
# the tensor cores ignore): P.tf32_probe_ptx's kernel, as the H200 ran it.


def tf32_kernel(n: int = 64, a_registers: bool = False) -> str:
    """The tf32 probe's text in the parser's subset."""
    return parser_subset(P.tf32_probe_ptx(n, a_registers))


def run_tf32(text: str, n: int, adversarial: bool, a_registers: bool = False):
    (a, b, c), args = P.tf32_case(n, adversarial, seed=n + adversarial, a_registers=a_registers)
    got = emulate(text, P.ENTRY, 1, 128, args, shared_bytes=64 * 128 + n * 128)[3]
    return got.view(np.uint32), P.tf32_reference(a, b, c).view(np.uint32), (a, b, c)


@pytest.mark.parametrize("a_registers", [False, True], ids=["a-shared", "a-registers"])
@pytest.mark.parametrize("adversarial", [False, True], ids=["random", "adversarial"])
@pytest.mark.parametrize("n", [64, 128, 256])
def test_tf32_probe_kernel_matches_reference(n, adversarial, a_registers):
    """The 12 variants the GPU ran (A from shared memory on an H200, from registers on an H100):
    every D word mma.sync m16n8k8 tf32's on the operands' top 19 bits."""
    got, want, _ = run_tf32(tf32_kernel(n, a_registers), n, adversarial, a_registers)
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {want.size} D words differ"


def test_tf32_a_registers_are_the_mma_sync_fragment():
    """A from registers: swapping two of a thread's A registers (a0 <-> a1: rows g and g + 8)
    changes D, so the fragment layout is what is checked."""
    text = tf32_kernel(64, a_registers=True)
    wrong = text.replace("{%a0, %a1, %a2, %a3}", "{%a1, %a0, %a2, %a3}")
    assert wrong != text
    got, want, _ = run_tf32(wrong, 64, False, a_registers=True)
    assert not np.array_equal(got, want)


def test_tf32_a_register_written_while_the_wgmma_runs_is_an_error():
    """An A register of a running mma_async overwritten before the wait_group that retires it
    (the tensor cores may still read it)."""
    text = tf32_kernel(64, a_registers=True)
    early = text.replace("wgmma.commit_group.sync.aligned;", "wgmma.commit_group.sync.aligned;\nmov.b32 %a0, 0;")
    assert early != text
    with pytest.raises(EmulationError, match=r"wrote %a0, an A register of a wgmma.mma_async"):
        run_tf32(early, 64, False, a_registers=True)


def test_tf32_operands_low_bits_are_ignored_not_rounded():
    """The probe's operands carry low mantissa bits; D is the truncated operands' product, which
    differs from the product of the operands rounded to nearest (so truncation is what is checked)."""
    got, want, (a, b, c) = run_tf32(tf32_kernel(64), 64, False)
    rounded = mma_arith.fused_mma(mma_arith.round_tf32(a, "rn").astype(np.float64),
                                  mma_arith.round_tf32(b, "rn").astype(np.float64), c.astype(np.float64),
                                  mma_arith.model_for("sm_90", "tf32"), "tf32", "tf32", "f32")
    assert np.array_equal(got, want)
    assert (got != rounded.astype(np.float32).view(np.uint32)).mean() > 0.5


def test_tf32_probe_catches_a_wrong_b_descriptor():
    """B's descriptor pointed at A: other products, other D."""
    text = tf32_kernel(64)
    wrong = re.sub(r"add\.u32 %r15, %r2, 8192;", "add.u32 %r15, %r2, 0;", text, count=1)
    assert wrong != text
    got, want, _ = run_tf32(wrong, 64, False)
    assert not np.array_equal(got, want)


@pytest.mark.parametrize("old, new, message", [
    ("%rq2, %p1, 1, 1;", "%rq2, %p1, 1, 1, 0, 0;", "6 operands"),
    (".reg .f32 %d<32>;", ".reg .s32 %d<32>;", r"d must be \.f32 registers"),
    ("k8.f32.tf32.tf32 {", "k8.f16.tf32.tf32 {", r"is modelled"),
])
def test_unsupported_tf32_forms_are_refused_when_decoded(old, new, message):
    text = tf32_kernel(64)
    assert old in text
    with pytest.raises(EmulationError, match=message):
        compile_entry(text.replace(old, new), P.ENTRY, "sm_90a")
