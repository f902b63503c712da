"""tilemma.compiler.runtime.cuda_runtime: the CUDA driver wrapper that runs emitted PTX.

The GPU tests launch small hand-written kernels and compare with NumPy element by element; they
are skipped where `gpu_available()` is False (CI, development machines). The kernels themselves are
also checked by ptxas where it is installed, so a typo in them shows up without a GPU.
"""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pytest

from tilemma.compiler.runtime import cuda_runtime as cr

needs_gpu = pytest.mark.skipif(
    not cr.gpu_available(), reason=f"no GPU: {cr.gpu_unavailable_reason()}"
)

HEADER = ".version 7.0\n.target sm_80\n.address_size 64\n"

ADD_I32 = HEADER + r"""
.visible .entry add_i32(
    .param .u64 a_ptr,
    .param .u64 b_ptr,
    .param .u64 out_ptr,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<9>;

    ld.param.u64 %rd1, [a_ptr];
    ld.param.u64 %rd2, [b_ptr];
    ld.param.u64 %rd3, [out_ptr];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.u32 %rd7, %r5, 4;
    add.s64 %rd8, %rd4, %rd7;
    ld.global.u32 %r6, [%rd8];
    add.s64 %rd8, %rd5, %rd7;
    ld.global.u32 %r7, [%rd8];
    add.s32 %r6, %r6, %r7;
    add.s64 %rd8, %rd6, %rd7;
    st.global.u32 [%rd8], %r6;
DONE:
    ret;
}
"""

# In place x[i] = x[i] * s; the f32 scalar is passed by value.
SCALE_F32 = HEADER + r"""
.visible .entry scale_f32(
    .param .u64 x_ptr,
    .param .f32 s,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [x_ptr];
    ld.param.f32 %f1, [s];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    mul.rn.f32 %f3, %f2, %f1;
    st.global.f32 [%rd4], %f3;
DONE:
    ret;
}
"""

# y[i] = alpha * x[i] + y[i] with separate roundings (so NumPy's alpha * x + y is bit-exact); the
# parameters mix 4- and 8-byte scalars to check each is passed with its own size.
AXPY_F64 = HEADER + r"""
.visible .entry axpy_f64(
    .param .u64 y_ptr,
    .param .u32 n,
    .param .f64 alpha,
    .param .u64 x_ptr
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f64 %fd<6>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [y_ptr];
    ld.param.u32 %r1, [n];
    ld.param.f64 %fd1, [alpha];
    ld.param.u64 %rd2, [x_ptr];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 8;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f64 %fd2, [%rd7];
    ld.global.f64 %fd3, [%rd6];
    mul.rn.f64 %fd4, %fd1, %fd2;
    add.rn.f64 %fd5, %fd4, %fd3;
    st.global.f64 [%rd6], %fd5;
DONE:
    ret;
}
"""

# Each thread writes 3*tid+1 into dynamic shared memory at `offset` + 4*tid, then reads its right
# neighbour's word: exercises more than 48 KiB of dynamic shared memory (needs the opt-in attribute).
SHARED_ROUNDTRIP = HEADER + r"""
.extern .shared .align 4 .b8 smem[];

.visible .entry shared_roundtrip(
    .param .u64 out_ptr,
    .param .u32 offset
)
{
    .reg .b32 %r<12>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [out_ptr];
    ld.param.u32 %r1, [offset];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, smem;
    add.u32 %r4, %r4, %r1;
    mad.lo.u32 %r5, %r2, 4, %r4;
    mad.lo.u32 %r6, %r2, 3, 1;
    st.shared.u32 [%r5], %r6;
    bar.sync 0;
    add.u32 %r7, %r2, 1;
    rem.u32 %r8, %r7, %r3;
    mad.lo.u32 %r9, %r8, 4, %r4;
    ld.shared.u32 %r10, [%r9];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r10;
    ret;
}
"""

BAD_PTX = HEADER + r"""
.visible .entry bad(
    .param .u64 out_ptr
)
{
    .reg .b32 %r<4>;
    mov.u32 %r1, 1;
    frobnicate.s32 %r2, %r1, %r1;
    ret;
}
"""

GOOD_KERNELS = {
    "add_i32": ADD_I32,
    "scale_f32": SCALE_F32,
    "axpy_f64": AXPY_F64,
    "shared_roundtrip": SHARED_ROUNDTRIP,
}


def _grid(n: int, block: int) -> tuple[int, int, int]:
    return ((n + block - 1) // block, 1, 1)


# ------------------------------------------------------------------------------- no GPU needed


def test_gpu_available_is_a_bool_and_never_raises():
    first = cr.gpu_available()
    assert isinstance(first, bool)
    assert cr.gpu_available() is first  # cached
    reason = cr.gpu_unavailable_reason()
    if first:
        assert reason is None
    else:
        assert isinstance(reason, str) and reason


@pytest.mark.skipif(cr.gpu_available(), reason="checks the no-GPU path")
def test_without_gpu_device_calls_raise_no_gpu_error():
    with pytest.raises(cr.NoGpuError, match="no GPU available"):
        cr.run_kernel(ADD_I32, "add_i32", (1, 1, 1), (1, 1, 1), [np.zeros(1, np.int32)])
    with pytest.raises(cr.NoGpuError):
        cr.device_arch()
    assert isinstance(cr.NoGpuError("x"), cr.CudaError)


@pytest.mark.parametrize(
    "cuda, ptx",
    [
        (13000, (9, 0)),
        (13010, (9, 1)),
        (12090, (8, 8)),
        (12080, (8, 7)),
        (12060, (8, 5)),  # CUDA 12.6 did not raise the PTX ISA version
        (12050, (8, 5)),
        (12000, (8, 0)),
        (11080, (7, 8)),
        (11000, (7, 0)),
        (10020, (6, 5)),
    ],
)
def test_ptx_isa_for_cuda_follows_nvidias_table(cuda, ptx):
    assert cr.ptx_isa_for_cuda(cuda) == ptx


def test_ptx_isa_for_cuda_beyond_and_below_the_table():
    newest = cr.ptx_isa_for_cuda(13050)
    assert cr.ptx_isa_for_cuda(99000) == newest  # unknown future driver: newest known, no guess
    with pytest.raises(ValueError):
        cr.ptx_isa_for_cuda(8000)


def test_cuda_error_message_carries_call_and_log():
    err = cr.CudaError("cuModuleLoadDataEx", log="line 3; error : bad thing")
    assert "cuModuleLoadDataEx failed" in str(err)
    assert "JIT log:\nline 3; error : bad thing" in str(err)


@pytest.mark.ptxas
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("entry", sorted(GOOD_KERNELS))
def test_test_kernels_assemble(entry):
    from tilemma.compiler.runtime.ptxas import run_ptxas

    result = run_ptxas(GOOD_KERNELS[entry], "sm_90")
    assert result.ok, result.log


@pytest.mark.ptxas
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_bad_kernel_is_refused_by_ptxas_too():
    from tilemma.compiler.runtime.ptxas import run_ptxas

    result = run_ptxas(BAD_PTX, "sm_90")
    assert not result.ok and "frobnicate" in result.log


# ------------------------------------------------------------------------------- on the GPU


@pytest.mark.gpu
@needs_gpu
def test_add_i32_matches_numpy_with_wraparound():
    rng = np.random.default_rng(1)
    n = 1000  # not a multiple of the block: the guard must hold
    a = rng.integers(-(2**31), 2**31, size=n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, size=n, dtype=np.int64).astype(np.int32)
    a[:2] = [2**31 - 1, -(2**31)]
    b[:2] = [1, -1]
    out = np.full(n, 12345, dtype=np.int32)
    a_back, b_back, got = cr.run_kernel(ADD_I32, "add_i32", _grid(n, 128), (128, 1, 1),
                                        [a, b, out, np.uint32(n)])
    want = (a.astype(np.int64) + b.astype(np.int64) + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(got, want.astype(np.int32))
    assert got[0] == -(2**31) and got[1] == 2**31 - 1
    np.testing.assert_array_equal(a_back, a)
    np.testing.assert_array_equal(b_back, b)


@pytest.mark.gpu
@needs_gpu
def test_add_i32_only_touches_the_first_n():
    a = np.arange(64, dtype=np.int32)
    b = np.full(64, 100, dtype=np.int32)
    out = np.full(64, -7, dtype=np.int32)
    _, _, got = cr.run_kernel(ADD_I32, "add_i32", (1, 1, 1), (64, 1, 1), [a, b, out, np.uint32(40)])
    np.testing.assert_array_equal(got[:40], np.arange(40) + 100)
    np.testing.assert_array_equal(got[40:], -7)


@pytest.mark.gpu
@needs_gpu
def test_scale_f32_matches_numpy_bit_for_bit():
    rng = np.random.default_rng(2)
    n = 4099
    x = (rng.standard_normal(n) * 1e3).astype(np.float32)
    s = np.float32(-0.3711)
    (got,) = cr.run_kernel(SCALE_F32, "scale_f32", _grid(n, 256), (256, 1, 1),
                           [x, s, np.uint32(n)])
    want = x * s
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert not np.array_equal(got, x)  # the scalar really arrived


@pytest.mark.gpu
@needs_gpu
def test_mixed_scalar_sizes_and_non_contiguous_input():
    rng = np.random.default_rng(3)
    n = 300
    y = rng.standard_normal(n)
    x_full = rng.standard_normal(2 * n)
    x = x_full[::2]  # not contiguous: must be copied as the values it shows
    alpha = np.float64(2.5)
    got_y, got_x = cr.run_kernel(AXPY_F64, "axpy_f64", _grid(n, 64), (64, 1, 1),
                                 [y, np.uint32(n), alpha, x])
    np.testing.assert_array_equal(got_y, alpha * x + y)
    np.testing.assert_array_equal(got_x, x)


@pytest.mark.gpu
@needs_gpu
def test_dynamic_shared_memory_above_48k():
    block = 256
    out = np.zeros(block, dtype=np.uint32)
    offset = 60000  # beyond the default 48 KiB window
    (got,) = cr.run_kernel(SHARED_ROUNDTRIP, "shared_roundtrip", (1, 1, 1), (block, 1, 1),
                           [out, np.uint32(offset)], shared_bytes=64 * 1024)
    t = np.arange(block)
    np.testing.assert_array_equal(got, ((t + 1) % block) * 3 + 1)


@pytest.mark.gpu
@needs_gpu
def test_jit_failure_raises_cuda_error_with_the_log():
    with pytest.raises(cr.CudaError) as info:
        cr.run_kernel(BAD_PTX, "bad", (1, 1, 1), (1, 1, 1), [np.zeros(1, np.int32)])
    err = info.value
    assert err.call == "cuModuleLoadDataEx"
    assert err.name == "CUDA_ERROR_INVALID_PTX"
    assert "frobnicate" in err.log  # the JIT's own diagnostic, naming the bad instruction
    assert err.log in str(err)


@pytest.mark.gpu
@needs_gpu
def test_unknown_entry_raises_cuda_error():
    with pytest.raises(cr.CudaError, match="no .entry named 'nope'") as info:
        cr.run_kernel(ADD_I32, "nope", (1, 1, 1), (1, 1, 1), [])
    assert info.value.name == "CUDA_ERROR_NOT_FOUND"


@pytest.mark.gpu
@needs_gpu
def test_python_scalars_are_refused():
    with pytest.raises(TypeError, match="np.int32"):
        cr.run_kernel(ADD_I32, "add_i32", (1, 1, 1), (1, 1, 1),
                      [np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32), 1])


@pytest.mark.gpu
@needs_gpu
def test_modules_are_cached_by_text():
    assert cr.load_module(ADD_I32) is cr.load_module(ADD_I32)


@pytest.mark.gpu
@needs_gpu
def test_driver_and_device_facts():
    assert cr.driver_max_ptx() >= (9, 0), f"driver {cr.driver_version()} JITs PTX up to 9.0 or more"
    arch = cr.device_arch()
    assert re.fullmatch(r"sm_\d{2,3}", arch)
    if "H100" in cr.device_name():
        assert arch == "sm_90"


@pytest.mark.gpu
@needs_gpu
def test_newest_ptx_version_loads_and_the_next_is_refused():
    major, minor = cr.driver_max_ptx()
    arch = cr.device_arch()
    body = ADD_I32.split("\n", 3)[3]

    def module(version: str) -> str:
        return f".version {version}\n.target {arch}\n.address_size 64\n{body}"

    cr.load_module(module(f"{major}.{minor}"))
    with pytest.raises(cr.CudaError) as info:
        cr.load_module(module(f"{major}.{minor + 1}"))
    assert info.value.name in ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_PTX")


@pytest.mark.gpu
@needs_gpu
def test_time_kernel_returns_positive_milliseconds():
    n = 1 << 20
    x = np.ones(n, dtype=np.float32)
    ms = cr.time_kernel(SCALE_F32, "scale_f32", _grid(n, 256), (256, 1, 1),
                        [x, np.float32(1.0), np.uint32(n)], iters=10, warmup=2)
    assert isinstance(ms, float) and math.isfinite(ms)
    assert 0.0 < ms < 1000.0


@pytest.mark.parametrize("bad", [1.5, True, -1, np.zeros(2, np.int32), "0x10"])
def test_launch_refuses_what_is_not_an_address_or_scalar(bad):
    # checked before the device is touched, so this runs without a GPU too
    with pytest.raises(TypeError, match="argument 1 is"):
        cr.launch(ADD_I32, "add_i32", (1, 1, 1), (1, 1, 1), [0, bad, 0, np.uint32(0)])


@pytest.mark.gpu
@needs_gpu
def test_launch_on_device_pointers_matches_numpy():
    n = 5000
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32) for _ in range(2))
    out = np.full(n + 1, 7, np.int32)  # one element past n must stay untouched
    cr._ensure_context()
    ptrs = []
    try:
        for host in (a, b, out):
            ptrs.append(cr._call("cuMemAlloc", host.nbytes))
            cr._call("cuMemcpyHtoD", ptrs[-1], host.ctypes.data, host.nbytes)
        cr.launch(ADD_I32, "add_i32", _grid(n, 128), (128, 1, 1), [int(p) for p in ptrs] + [np.uint32(n)])
        cr._call("cuCtxSynchronize")
        got = np.empty_like(out)
        cr._call("cuMemcpyDtoH", got.ctypes.data, ptrs[2], got.nbytes)
    finally:
        for p in ptrs:
            cr._call("cuMemFree", p)
    want = (a.astype(np.int64) + b).astype(np.int32)  # wraps like add.s32
    np.testing.assert_array_equal(got[:n], want)
    assert got[n] == 7
