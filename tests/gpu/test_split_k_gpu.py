"""Split-K on the GPU: whichever CTA of a tile arrives last, it adds the partial sums in split
order, so D must equal, bit for bit, what the emulator computes from the same inputs (its mma
arithmetic is the H100's; its CTAs arrive in CTA order). Launched many times on one workspace
(the counters must come back to 0 each time), with the launcher's own scratch and the caller's,
through the runner, and as a torch custom op, eagerly and in a CUDA graph."""

import numpy as np
import pytest

import tilemma
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.driver.runner import run_compiled
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.verify import reference

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]
torch = pytest.importorskip("torch")

CASES = [  # (spec, split-k): staged and simple, 16-bit, 8-bit (K-major B), f64, an epilogue
    (GemmSpec(16, 4096, 4096, "f16", "f16", "f32"), 0),  # the automatic choice (decode)
    (GemmSpec(130, 72, 1000, "f16", "f16", "f32"), 3),
    (GemmSpec(37, 91, 300, "f16", "f16", "f32"), 4),
    (GemmSpec(257, 129, 4096, "bf16", "bf16", "f32"), 0),
    (GemmSpec(70, 40, 1024, "s8", "s8", "s32", b_layout="col"), 4),
    (GemmSpec(40, 24, 200, "f64", "f64", "f64"), 2),
    (GemmSpec(64, 48, 512, "bf16", "bf16", "f32", bias="col", act="gelu", out="f16"), 3),
    (GemmSpec(64, 64, 512, "bf16", "bf16", "f32", batch=2), 2),  # batched: grid z is batch x split
    (GemmSpec(37, 45, 300, "f16", "f16", "f32", batch=3, bcast="b"), 2),
]


def _torch(x: np.ndarray):
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


@pytest.mark.parametrize("spec, splits", CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_split_k_on_the_gpu_is_the_emulators_bits(spec, splits):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, CompileOptions(sm="90", split_k=splits))
    assert kernel.grid[2] > 1, kernel.abi.config
    result = run_compiled(kernel, seed=9, on="gpu")  # the runner: reference, emulator twin, counters at 0
    assert result.ok, result.line()


def test_repeated_launches_on_one_workspace():
    """Thirty launches on the launcher's scratch, then on the caller's: every D the emulator's
    bits (a counter left wrong would make a later launch's last CTA the wrong one)."""
    spec = GemmSpec(64, 256, 2048, "f16", "f16", "f32")
    [k] = tilemma.compile(str(gemm_module(spec)), sm="90", split_k=6)
    rng = np.random.default_rng(2)
    a = reference.random_matrix("f16", (64, 2048), rng).astype(np.float16)
    b = reference.random_matrix("f16", (2048, 256), rng).astype(np.float16)
    c = reference.random_matrix("f32", (64, 256), rng).astype(np.float32)
    want = np.zeros((64, 256), np.float32)
    k.emulate(a, b, c, want, max_macs=1 << 28)
    ta, tb, tc = _torch(a), _torch(b), _torch(c)
    ws = torch.empty(k.abi.params[4].shape, dtype=torch.float32, device="cuda")
    counters = torch.zeros(k.abi.params[5].shape, dtype=torch.int32, device="cuda")
    for scratch in ((), (ws, counters)):
        for _ in range(30):
            d = torch.full((64, 256), float("nan"), device="cuda")
            k.launch(ta, tb, tc, d, *scratch)
            torch.cuda.synchronize()
            assert d.cpu().numpy().view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert not counters.any()


def test_custom_op_eagerly_and_in_a_cuda_graph():
    import tilemma.torch

    spec = GemmSpec(16, 1024, 4096, "f16", "f16", "f32")
    [k] = tilemma.compile(str(gemm_module(spec)), sm="90")
    assert k.grid[2] > 1
    op = tilemma.torch.custom_op(k, "split_k_test::gemm")
    rng = np.random.default_rng(4)
    a, b = (torch.from_numpy(rng.standard_normal(s).astype(np.float16)).cuda() for s in ((16, 4096), (4096, 1024)))
    c = torch.from_numpy(rng.standard_normal((16, 1024)).astype(np.float32)).cuda()
    want = np.zeros((16, 1024), np.float32)
    k.emulate(a.cpu().numpy(), b.cpu().numpy(), c.cpu().numpy(), want, max_macs=1 << 28)
    eager = op(a, b, c)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        op(a, b, c)  # warm-up on the capturing stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = op(a, b, c)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    for got in (eager, captured):
        assert got.cpu().numpy().view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_launch_in_a_cuda_graph():
    """A capture after an eager launch uses the launcher's scratch; replays give the emulator's bits
    and leave the counters at 0 (the next replay is right too)."""
    spec = GemmSpec(16, 1024, 2048, "f16", "f16", "f32", c=False)
    [k] = tilemma.compile(str(gemm_module(spec)), sm="90")
    assert k.grid[2] > 1
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((16, 2048), (2048, 1024)))
    want = np.zeros((16, 1024), np.float32)
    k.emulate(a, b, want, max_macs=1 << 28)
    ta, tb, d = _torch(a), _torch(b), torch.zeros(16, 1024, device="cuda")
    k.launch(ta, tb, d, stream=torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        k.launch(ta, tb, d, stream=torch.cuda.current_stream())
    for _ in range(3):
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert d.cpu().numpy().view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_a_first_launch_in_a_capture_says_what_to_do():
    """The launcher's scratch cannot be allocated inside a capture: a clear LaunchError, nothing
    launched, and the same launch works once made eagerly first."""
    spec = GemmSpec(16, 512, 2048, "f16", "f16", "f32", c=False)
    [k] = tilemma.compile(str(gemm_module(spec)), sm="90")
    ta = torch.zeros(16, 2048, dtype=torch.half, device="cuda")
    tb, d = torch.zeros(2048, 512, dtype=torch.half, device="cuda"), torch.zeros(16, 512, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(tilemma.LaunchError, match="launch it once before capturing"):
        with torch.cuda.graph(graph):
            k.launch(ta, tb, d, stream=torch.cuda.current_stream())
    torch.cuda.synchronize()
    k.launch(ta, tb, d)
    torch.cuda.synchronize()
    assert not d.any()
