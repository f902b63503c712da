"""The public API on the GPU: kernels launched on torch tensors and CuPy arrays (and through
DLPack, __cuda_array_interface__, int addresses), on non-default streams, every element checked
against the exact NumPy reference; the README's example as written; nvJitLink's and ptxas' cubins
both load."""

import pathlib

import numpy as np
import pytest

import tilemma
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify import reference
from tilemma.compiler.layouts import sparse_fragments
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]
torch = pytest.importorskip("torch")
README = pathlib.Path(__file__).parents[2] / "README.md"


def ptx_version() -> str:
    major, minor = min((9, 0), cuda_runtime.driver_max_ptx())
    return f"{major}.{minor}"


def compile_gemm(spec: GemmSpec, **options) -> tilemma.Kernel:
    [k] = tilemma.compile(str(gemm_module(spec)), sm="90", ptx=ptx_version(), **options)
    return k


def adversarial(type_name: str, shape, rng) -> np.ndarray:
    """Random values of the type with its extremes mixed in (largest magnitudes of both signs,
    and zeros), so that wrong element placement or overflow handling shows."""
    values = reference.random_matrix(type_name, shape, rng)
    et = reference.element_type(type_name)
    if et.is_float:
        extremes = np.array([0.0, -0.0, 2.0, -2.0], dtype=et.dtype)
    else:
        low, high = et.int_range
        extremes = np.array([low, high, 0, -1 if low < 0 else 1], dtype=et.dtype)
    mask = rng.random(shape) < 0.2
    values[mask] = rng.choice(extremes, size=int(mask.sum()))
    return values


def check(kernel, a, b, c, got, a_type, b_type, acc_type):
    want = reference.mma_reference(a, b, c, a_type=a_type, b_type=b_type, acc_type=acc_type)
    cmp = reference.compare(got, want, acc_type=acc_type, a_type=a_type, b_type=b_type, k=a.shape[-1],
                            a=a, b=b, c=c)
    assert cmp.ok, f"{kernel.name}: {cmp.detail}"
    return cmp


def to_torch(x: np.ndarray, dtype):
    return torch.from_numpy(np.ascontiguousarray(x).view(np.uint16) if x.dtype.itemsize == 2
                            and dtype == torch.bfloat16 else np.ascontiguousarray(x)).view(dtype).cuda()


# ------------------------------------------------------------------------------------- README


def test_readme_example_runs_as_written():
    text = README.read_text()
    code = text.split("## Python API", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "README.md", "exec"), {})


# ------------------------------------------------------------------------------------- torch


@pytest.mark.parametrize("spec", [
    GemmSpec(37, 91, 53, "f16", "f16", "f32"),
    GemmSpec(256, 192, 128, "bf16", "bf16", "f32"),  # the staged schedule (shared memory)
    GemmSpec(16, 16, 32, "f16", "f16", "f16", batch=3, bcast="b"),
], ids=["f16_odd", "bf16_staged", "f16_batched"])
def test_torch_float(spec):
    k = compile_gemm(spec)
    rng = np.random.default_rng(1)
    pa, pb, pc, pd = k.abi.params
    a, b, c = (adversarial(p.element, p.shape, rng) for p in (pa, pb, pc))
    tdtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    ta, tb, tc = to_torch(a, tdtype[pa.element]), to_torch(b, tdtype[pb.element]), to_torch(c, tdtype[pc.element])
    td = torch.full(pd.shape, float("nan"), dtype=tdtype[pd.element], device="cuda")
    k.launch(ta, tb, tc, td)
    torch.cuda.synchronize()
    got = td.cpu().float().numpy().astype(reference.element_type(pd.element).dtype)
    check(k, a, b, c, got, pa.element, pb.element, pd.element)
    if pd.element == "f32":  # and torch's own product agrees to f32 accuracy
        torch.testing.assert_close(td, ta.float() @ tb.float() + tc, rtol=1e-3, atol=1e-3)


def test_torch_s8_exact_and_int_addresses():
    k = compile_gemm(GemmSpec(45, 70, 96, "si8", "si8", "si32"))
    rng = np.random.default_rng(2)
    a, b, c = (adversarial(p.element, p.shape, rng) for p in k.abi.params[:3])
    ta, tb, tc = (torch.from_numpy(x).cuda() for x in (a, b, c))
    td = torch.zeros(45, 70, dtype=torch.int32, device="cuda")
    k.launch(ta.data_ptr(), tb.data_ptr(), tc.data_ptr(), td.data_ptr())  # plain device addresses
    torch.cuda.synchronize()
    want = (a.astype(np.int64) @ b.astype(np.int64) + c).astype(np.int64)
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)  # s32 wraps
    np.testing.assert_array_equal(td.cpu().numpy(), want)
    check(k, a, b, c, td.cpu().numpy(), "si8", "si8", "si32")


def test_torch_non_default_stream_orders_the_launch():
    """Inputs are written on a non-blocking stream after a long sleep: only a launch queued on that
    stream sees them (one on the legacy default stream would read the zeros)."""
    k = compile_gemm(GemmSpec(64, 64, 64, "f16", "f16", "f32"))
    rng = np.random.default_rng(3)
    a, b, c = (reference.random_matrix(p.element, p.shape, rng) for p in k.abi.params[:3])
    host = [torch.from_numpy(x).pin_memory() for x in (a, b, c)]
    dev = [torch.zeros(x.shape, dtype=x.dtype, device="cuda") for x in host]
    d = torch.zeros(64, 64, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time
        for x, h in zip(dev, host):
            x.copy_(h, non_blocking=True)
    k.launch(*dev, d, stream=s)
    s.synchronize()
    check(k, a, b, c, d.cpu().numpy(), "f16", "f16", "f32")


def test_torch_dlpack_and_cuda_bindings_stream():
    from cuda.bindings import driver

    class OnlyDLPack:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    k = compile_gemm(GemmSpec(32, 40, 48, "f16", "f16", "f32"))
    rng = np.random.default_rng(4)
    a, b, c = (adversarial(p.element, p.shape, rng) for p in k.abi.params[:3])
    ta, tb, tc = (torch.from_numpy(x).cuda() for x in (a, b, c))
    td = torch.zeros(32, 40, device="cuda")
    torch.cuda.synchronize()
    err, stream = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
    assert err == driver.CUresult.CUDA_SUCCESS
    try:
        k.launch(OnlyDLPack(ta), OnlyDLPack(tb), OnlyDLPack(tc), OnlyDLPack(td), stream=stream)
        assert driver.cuStreamSynchronize(stream)[0] == driver.CUresult.CUDA_SUCCESS
    finally:
        driver.cuStreamDestroy(stream)
    check(k, a, b, c, td.cpu().numpy(), "f16", "f16", "f32")


def test_sparse_check_error_word():
    k = compile_gemm(GemmSpec(32, 24, 64, "f16", "f16", "f32", sparse_a=True))
    *_, word_param = k.abi.params
    rng = np.random.default_rng(5)
    a = sparse_fragments.prune(adversarial("f16", (32, 64), rng), "2:4")
    b, c = adversarial("f16", (64, 24), rng), adversarial("f32", (32, 24), rng)
    ta, tb, tc = (torch.from_numpy(x).cuda() for x in (a, b, c))
    td = torch.zeros(32, 24, device="cuda")
    word = torch.full((1,), word_param.init - 2**32, dtype=torch.int32, device="cuda")  # 0xFFFFFFFF
    k.launch(ta, tb, tc, td, word)
    torch.cuda.synchronize()
    assert k.sparsity_error(int(word.item()) & 0xFFFFFFFF) is None
    check(k, a, b, c, td.cpu().numpy(), "f16", "f16", "f32")
    a[7, 4 * 5:4 * 6] = 1.0  # row 7, group 5: four nonzeros
    word.fill_(-1)
    k.launch(torch.from_numpy(a).cuda(), tb, tc, td, word)
    torch.cuda.synchronize()
    message = k.sparsity_error(int(word.item()) & 0xFFFFFFFF)
    assert message is not None and "row 7, group 5" in message


def test_cpu_tensor_and_wrong_device_buffers_are_refused():
    k = compile_gemm(GemmSpec(16, 8, 16, "f16", "f16", "f32"))
    a, b = torch.zeros(16, 16, dtype=torch.float16), torch.zeros(16, 8, dtype=torch.float16, device="cuda")
    c, d = torch.zeros(16, 8, device="cuda"), torch.zeros(16, 8, device="cuda")
    with pytest.raises(tilemma.LaunchError, match=r"argument 0 \(a\): a torch tensor on cpu"):
        k.launch(a, b, c, d)
    with pytest.raises(tilemma.LaunchError, match=r"argument 1 \(b\).*dtype float32, expected float16"):
        k.launch(a.cuda(), b.float(), c, d)
    with pytest.raises(tilemma.LaunchError, match=r"strides \(1, 16\) elements, expected \(8, 1\)"):
        k.launch(a.cuda(), b.t().contiguous().t(), c, d)


# ------------------------------------------------------------------------------------- CuPy


def test_cupy_f16_and_bf16_free_families_on_a_cupy_stream():
    cp = pytest.importorskip("cupy")
    for spec, np_acc in ((GemmSpec(37, 91, 53, "f16", "f16", "f32"), np.float32),
                         (GemmSpec(40, 24, 80, "si8", "si8", "si32"), np.int32)):
        k = compile_gemm(spec)
        rng = np.random.default_rng(6)
        a, b, c = (adversarial(p.element, p.shape, rng) for p in k.abi.params[:3])
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            ca, cb, cc = (cp.asarray(x) for x in (a, b, c))
            cd = cp.zeros(c.shape, dtype=np_acc)
        k.launch(ca, cb, cc, cd, stream=stream)
        stream.synchronize()
        check(k, a, b, c, cp.asnumpy(cd), spec.a, spec.b, spec.acc)
    with pytest.raises(tilemma.LaunchError, match=r"argument 2 \(c\).*shape \(40, 23\), expected \(40, 24\)"):
        k.launch(ca, cb, cc[:, :23], cd)


# ------------------------------------------------------------------------------------- cubins


def test_nvjitlink_and_ptxas_cubins_both_load_and_run():
    from tilemma.compiler.runtime import ptxas

    if ptxas.nvjitlink_unavailable() or ptxas.find_ptxas() is None:
        pytest.skip(f"needs nvJitLink and ptxas ({ptxas.nvjitlink_unavailable()})")
    k = compile_gemm(GemmSpec(16, 8, 16, "f16", "f16", "f32"))
    rng = np.random.default_rng(7)
    a, b, c = (reference.random_matrix(p.element, p.shape, rng) for p in k.abi.params[:3])
    for assembler in ("nvjitlink", "ptxas"):
        cubin = ptxas.assemble(k.ptx, "sm_90", assembler)
        cuda_runtime._ensure_context()
        module = cuda_runtime._call("cuModuleLoadData", cubin)
        func = cuda_runtime._call("cuModuleGetFunction", module, k.name.encode())
        ta, tb, tc = (torch.from_numpy(x).cuda() for x in (a, b, c))
        td = torch.zeros(16, 8, device="cuda")
        holders = [np.array([t.data_ptr()], np.uint64) for t in (ta, tb, tc, td)]
        params = np.array([h.ctypes.data for h in holders], np.uint64)
        if k.shared_bytes > 48 * 1024:
            from cuda.bindings import driver

            attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            cuda_runtime._call("cuFuncSetAttribute", func, attribute, k.shared_bytes)
        cuda_runtime._call("cuLaunchKernel", func, *k.grid, *k.block, k.shared_bytes, 0, params.ctypes.data, 0)
        cuda_runtime._call("cuCtxSynchronize")
        check(k, a, b, c, td.cpu().numpy(), "f16", "f16", "f32")
        cuda_runtime._call("cuModuleUnload", module)
