"""Hand-written PTX kernels for the emulator's memory features (shared memory, vector loads and
stores, cp.async, ldmatrix, barriers). tests/test_emulator_memory.py runs them in the emulator
against NumPy models and, on a GPU, against the GPU bit for bit."""

HEADER = """.version 8.0
.target sm_90
.address_size 64
"""

# Vector global loads and stores, predicated: thread g < n copies 16 bytes as v4.u32 and 16 bytes
# as v2.b64 (words swapped) from `src` to `dst`; threads past n touch nothing.
VECTOR_COPY = HEADER + r"""
.visible .entry vector_copy(
    .param .u64 src,
    .param .u64 dst,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    ld.param.u32 %r1, [n];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.u32 %r5, %r3, %r4, %r2;
    setp.lt.u32 %p1, %r5, %r1;
    mul.wide.u32 %rd3, %r5, 32;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    @%p1 ld.global.v4.u32 {%r6, %r7, %r8, %r9}, [%rd4];
    @%p1 st.global.v4.u32 [%rd5], {%r9, %r8, %r7, %r6};
    @%p1 ld.global.nc.v2.b64 {%rd6, %rd7}, [%rd4+16];
    @%p1 st.global.v2.b64 [%rd5+16], {%rd7, %rd6};
    ret;
}
"""

# Every width and form of ld.shared: thread t of a 64-thread CTA stores its 16 input bytes to
# buf[16t..], and after the barrier reads its neighbour u = (t + 1) % 64's bytes back as u8, s8,
# u16, b16 (through the buffer's name), b32, v2.b32, b64, f32, f64, v4.b32, and through a 64-bit
# generic-then-shared address; each into its place of the thread's 64 output bytes.
SHARED_TYPES = HEADER + r"""
.visible .entry shared_types(
    .param .u64 src,
    .param .u64 dst
)
{
    .reg .pred %p<2>;
    .reg .b16 %h<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .reg .f32 %f<4>;
    .reg .f64 %fd<4>;
    .shared .align 4 .b8 pad[12];
    .shared .align 16 .b8 buf[1024];
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mad.lo.u32 %r3, %r2, 64, %r1;
    mul.wide.u32 %rd3, %r3, 16;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.v4.u32 {%r4, %r5, %r6, %r7}, [%rd4];
    mov.u32 %r8, buf;
    mad.lo.u32 %r9, %r1, 16, %r8;
    st.shared.v4.u32 [%r9], {%r4, %r5, %r6, %r7};
    mov.u32 %r22, pad;
    setp.eq.u32 %p1, %r1, 5;
    @%p1 st.shared.u8 [%r22+11], %r1;
    bar.sync 0;
    add.u32 %r10, %r1, 1;
    and.b32 %r10, %r10, 63;
    mad.lo.u32 %r11, %r10, 16, %r8;
    ld.shared.v4.b32 {%r16, %r17, %r18, %r19}, [%r11];
    ld.shared.u8 %r12, [%r11+3];
    ld.shared.s8 %r20, [%r11+1];
    ld.shared.u16 %h1, [%r11+6];
    ld.shared::cta.b16 %h2, [buf+34];
    ld.shared.b32 %r13, [%r11+4];
    ld.shared.v2.b32 {%r14, %r15}, [%r11+8];
    ld.shared.b64 %rd5, [%r11+8];
    ld.shared.f32 %f1, [%r11];
    ld.shared.f64 %fd1, [%r11];
    cvt.u64.u32 %rd6, %r11;
    cvta.shared.u64 %rd7, %rd6;
    cvta.to.shared.u64 %rd8, %rd7;
    ld.shared.u32 %r21, [%rd8+12];
    ld.shared.u8 %r23, [pad+11];
    mul.wide.u32 %rd9, %r3, 64;
    add.s64 %rd10, %rd2, %rd9;
    st.global.v4.u32 [%rd10], {%r16, %r17, %r18, %r19};
    st.global.u32 [%rd10+16], %r12;
    st.global.u16 [%rd10+20], %h1;
    st.global.u16 [%rd10+22], %h2;
    st.global.b32 [%rd10+24], %r13;
    st.global.u32 [%rd10+28], %r21;
    st.global.v2.b32 [%rd10+32], {%r14, %r15};
    st.global.b64 [%rd10+40], %rd5;
    st.global.f32 [%rd10+48], %f1;
    st.global.u32 [%rd10+52], %r20;
    st.global.f64 [%rd10+56], %fd1;
    st.global.u8 [%rd10+30], %r23;
    ret;
}
"""

# cp.async with zero fill at a ragged edge, two groups. CTA c, thread t (64 threads) copies the
# 16-byte chunks t and 64 + t of the CTA's 2048-byte slice of `src` (whose first `n` bytes
# exist) to buf, src-size = clamp(n - offset, 0, size): t % 3 == 0 with one .cg 16-byte copy,
# == 1 with two .ca 8-byte copies, == 2 with four .ca 4-byte copies. Group 1 = chunks t, group 2 =
# chunks 64 + t; after wait_group 1 and a barrier each thread writes chunk (t + 1) % 64 to dst,
# after wait_group 0 (or wait_all) and a barrier chunk 64 + (t + 5) % 64.
_CP_CHUNK = r"""    add.s32 %r30, %r11, {off};
    sub.s32 %r31, %r1, %r30;
    max.s32 %r31, %r31, 0;
    min.s32 %r32, %r31, 16;
    min.s32 %r33, %r31, 8;
    sub.s32 %r34, %r31, 8;
    max.s32 %r34, %r34, 0;
    min.s32 %r34, %r34, 8;
    min.s32 %r35, %r31, 4;
    sub.s32 %r36, %r31, 4;
    max.s32 %r36, %r36, 0;
    min.s32 %r36, %r36, 4;
    sub.s32 %r37, %r31, 8;
    max.s32 %r37, %r37, 0;
    min.s32 %r37, %r37, 4;
    sub.s32 %r38, %r31, 12;
    max.s32 %r38, %r38, 0;
    min.s32 %r38, %r38, 4;
    cvt.s64.s32 %rd20, %r30;
    add.s64 %rd21, %rd5, %rd20;
    add.u32 %r39, %r8, {off};
    @%p1 cp.async.cg.shared.global [%r39], [%rd21], 16, %r32;
    @%p2 cp.async.ca.shared.global [%r39], [%rd21], 8, %r33;
    @%p2 cp.async.ca.shared.global [%r39+8], [%rd21+8], 8, %r34;
    @%p3 cp.async.ca.shared::cta.global [%r39], [%rd21], 4, %r35;
    @%p3 cp.async.ca.shared.global [%r39+4], [%rd21+4], 4, %r36;
    @%p3 cp.async.ca.shared.global [%r39+8], [%rd21+8], 4, %r37;
    @%p3 cp.async.ca.shared.global.L2::128B [%r39+12], [%rd21+12], 4, %r38;
    cp.async.commit_group;
"""

CP_ASYNC = HEADER + r"""
.visible .entry cp_async(
    .param .u64 src,
    .param .u64 dst,
    .param .u32 n
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<48>;
    .reg .b64 %rd<24>;
    .shared .align 16 .b8 buf[2048];
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    ld.param.u32 %r1, [n];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mul.lo.u32 %r10, %r3, 2048;
    sub.s32 %r1, %r1, %r10;
    cvt.u64.u32 %rd4, %r10;
    add.s64 %rd5, %rd1, %rd4;
    rem.u32 %r4, %r2, 3;
    setp.eq.u32 %p1, %r4, 0;
    setp.eq.u32 %p2, %r4, 1;
    setp.eq.u32 %p3, %r4, 2;
    mul.lo.u32 %r11, %r2, 16;
    mov.u32 %r5, buf;
    add.u32 %r8, %r5, %r11;
""" + _CP_CHUNK.format(off=0) + _CP_CHUNK.format(off=1024) + r"""    cp.async.wait_group 1;
    bar.sync 0;
    add.u32 %r12, %r2, 1;
    and.b32 %r12, %r12, 63;
    mad.lo.u32 %r13, %r12, 16, %r5;
    ld.shared.v4.u32 {%r20, %r21, %r22, %r23}, [%r13];
    mad.lo.u32 %r14, %r3, 128, %r2;
    mul.wide.u32 %rd6, %r14, 16;
    add.s64 %rd7, %rd2, %rd6;
    st.global.v4.u32 [%rd7], {%r20, %r21, %r22, %r23};
    {last_wait};
    bar.sync 0;
    add.u32 %r12, %r2, 5;
    and.b32 %r12, %r12, 63;
    mad.lo.u32 %r13, %r12, 16, %r5;
    ld.shared.v4.u32 {%r20, %r21, %r22, %r23}, [%r13+1024];
    st.global.v4.u32 [%rd7+1024], {%r20, %r21, %r22, %r23};
    ret;
}
"""

# ldmatrix: CTA c (64 threads) stores its 1024 input bytes to buf (64 rows of 16 bytes); after
# the barrier each thread gives row rows[c * 64 + t] as its address (for .x1/.x2 the lanes past 8/16
# give valid addresses too, which the instruction must ignore) and writes the registers it gets
# (zeros where the instruction has fewer than four) to dst[(c * 64 + t) * 16 ..].
LDMATRIX = HEADER + r"""
.visible .entry ldmatrix(
    .param .u64 src,
    .param .u64 rows,
    .param .u64 dst
)
{
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 128 .b8 buf[1024];
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [rows];
    ld.param.u64 %rd3, [dst];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mad.lo.u32 %r3, %r2, 64, %r1;
    mul.wide.u32 %rd4, %r3, 16;
    add.s64 %rd5, %rd1, %rd4;
    ld.global.v4.u32 {%r4, %r5, %r6, %r7}, [%rd5];
    mov.u32 %r8, buf;
    mad.lo.u32 %r9, %r1, 16, %r8;
    st.shared.v4.u32 [%r9], {%r4, %r5, %r6, %r7};
    mul.wide.u32 %rd6, %r3, 4;
    add.s64 %rd7, %rd2, %rd6;
    ld.global.u32 %r10, [%rd7];
    mad.lo.u32 %r11, %r10, 16, %r8;
    mov.b32 %r20, 0;
    mov.b32 %r21, 0;
    mov.b32 %r22, 0;
    mov.b32 %r23, 0;
    bar.sync 0;
    {opcode} {regs}, [%r11];
    add.s64 %rd8, %rd3, %rd4;
    st.global.v4.u32 [%rd8], {%r20, %r21, %r22, %r23};
    ret;
}
"""


def cp_async(last_wait: str = "cp.async.wait_group 0") -> str:
    return CP_ASYNC.replace("{last_wait}", last_wait)


def ldmatrix(count: int, trans: bool) -> str:
    opcode = f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16"
    regs = "{" + ", ".join(f"%r{20 + i}" for i in range(count)) + "}"
    return LDMATRIX.replace("{opcode}", opcode).replace("{regs}", regs)
