"""Stages multiplied by warpgroups (`--wgmma`, sm_90a) on the GPU: D within the reference's bound
and bit for bit as the emulator computes it (the runner's twin check, where the kernel is small
enough to emulate) and as the GPU's own mma.sync kernel of the same problem computes it (both add
each k16 step in K order; the sparse ones, of a pre-compressed A, as the mma.sp kernel, each k32
step); and the raw instruction probe (tools/wgmma_probe.py: descriptors, both B orders, N 64-256,
random and adversarial data, against mma_arith; the sparse form with A in the 128- and the
64-byte swizzle; the 8-bit integer form against the wrapped int32 sums; the tf32 form, its operands
f32 with low bits to ignore); 8-bit integer kernels exact and equal to the mma.sync kernels',
tf32 ones (rounded by the fill or a rounding copy, or truncated) bit for bit the mma.sync kernels'."""

import subprocess
import sys

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec
from tilemma.compiler.runtime import cuda_runtime

from tests.wgmma_cases import compiled, exactly_a_times_b, is_sm90, like_the_sm90_kernel, same_words_as_mma_sync

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_runtime.gpu_available(), reason=f"no GPU: {cuda_runtime.gpu_unavailable_reason()}"),
]


CASES = [  # (spec, options)
    (GemmSpec(130, 200, 96, "f16", "f16", "f32"), {}),
    (GemmSpec(130, 200, 96, "bf16", "bf16", "f32", b_layout="col"), {}),
    (GemmSpec(37, 72, 64, "f16", "f16", "f32"), {}),
    (GemmSpec(300, 264, 200, "bf16", "bf16", "f32"), {"warps": "8x1", "warp_tile": "1x32", "stages": 3}),
    (GemmSpec(16, 4096, 4096, "f16", "f16", "f32"), {}),  # split-K where the tiles leave SMs idle
    (GemmSpec(64, 128, 1024, "f16", "f16", "f32", b_layout="col"), {"split_k": 4}),
    (GemmSpec(96, 64, 128, "bf16", "bf16", "f32", batch=3), {}),
    (GemmSpec(96, 64, 128, "f16", "f16", "f32", bias="col", act="gelu", out="f16"), {}),
    (GemmSpec(1000, 1000, 1000, "f16", "f16", "f32"), {}),
    (GemmSpec(2048, 2048, 512, "bf16", "bf16", "f32", b_layout="col"), {}),
    (GemmSpec(130, 200, 96, "f16", "f16", "f32", a_layout="col"), {}),  # an M-major A (imm-trans-a)
    (GemmSpec(300, 264, 1088, "bf16", "bf16", "f32", a_layout="col", b_layout="col"), {}),
    (GemmSpec(1024, 1024, 1024, "f16", "f16", "f32", a_layout="col"), {}),
]


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("spec, options", CASES, ids=lambda x: x.name if isinstance(x, GemmSpec) else "")
def test_wgmma_on_the_gpu(spec, options):
    like_the_sm90_kernel(spec, options, "gpu", 5, "wgmma.mma_async", "mma.sync")


SPARSE_CASES = [  # (spec, options): a pre-compressed A, an N-major B
    (GemmSpec(130, 200, 300, "f16", "f16", "f32", pre_compressed=True), {}),
    (GemmSpec(70, 136, 200, "bf16", "bf16", "f32", pre_compressed=True, batch=2, bcast="a"), {}),
    (GemmSpec(300, 136, 520, "f16", "f16", "f32", pre_compressed=True), {"warps": "16x1", "warp_tile": "1x16", "stages": 2}),
    (GemmSpec(200, 264, 520, "bf16", "bf16", "f32", pre_compressed=True),
     {"warps": "4x1", "warp_tile": "1x32", "stages": 3, "stage_k": 64}),  # A in the 64-byte swizzle
    (GemmSpec(96, 64, 128, "f16", "f16", "f32", pre_compressed=True, bias="col", act="gelu", out="f16"), {}),
    (GemmSpec(1024, 1024, 1024, "f16", "f16", "f32", pre_compressed=True), {}),
    (GemmSpec(2048, 2048, 512, "bf16", "bf16", "f32", pre_compressed=True), {}),  # the default 128 x 256 tiles: a producer warpgroup, a stage in flight
    (GemmSpec(130, 200, 300, "f16", "f16", "f32", pre_compressed=True, b_layout="col"), {}),  # K-major B: K 64
    (GemmSpec(1024, 1024, 1024, "bf16", "bf16", "f32", pre_compressed=True, b_layout="col"), {}),
    # a stage's products in flight, the loop unrolled by two (`warp-unroll-sparse`): 7 iterations
    # (three pairs and one left over), 8 (four pairs), a K-major B's 11, the consumers' 33
    (GemmSpec(128, 128, 1024, "f16", "f16", "f32", pre_compressed=True), {}),
    (GemmSpec(64, 256, 1100, "bf16", "bf16", "f32", pre_compressed=True), {}),
    (GemmSpec(130, 200, 700, "f16", "f16", "f32", pre_compressed=True, b_layout="col"), {"warps": "8x1", "warp_tile": "1x32"}),
    (GemmSpec(512, 512, 4224, "f16", "f16", "f32", pre_compressed=True), {"producers": 4}),
]


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("spec, options", SPARSE_CASES, ids=lambda x: x.name if isinstance(x, GemmSpec) else "")
def test_sparse_wgmma_on_the_gpu(spec, options):
    like_the_sm90_kernel(spec, options, "gpu", 5, "wgmma.mma_async.sp", "mma.sp")


INT8_CASES = [  # 8-bit integers, K-major A and B: D exact, the same words as the mma.sync kernel's
    (GemmSpec(130, 200, 300, "s8", "s8", "s32", b_layout="col"), {}),
    (GemmSpec(70, 136, 264, "u8", "u8", "s32", b_layout="col", batch=2), {}),
    (GemmSpec(1024, 1024, 1024, "s8", "s8", "s32", b_layout="col"), {}),
    (GemmSpec(200, 264, 520, "s8", "s8", "s32", b_layout="col"), {"warps": "4x1", "warp_tile": "1x32", "stages": 3}),
    (GemmSpec(130, 200, 300, "s8", "s8", "s32"), {}),  # an N-major B: the transposing fill stages it K-major
    (GemmSpec(136, 200, 320, "u8", "u8", "s32", a_layout="col"), {}),  # an M-major A, from registers (byte pairs)
    (GemmSpec(136, 200, 320, "u8", "u8", "s32", a_layout="col"), {"pair_bytes": False}),  # ... filled
    (GemmSpec(1024, 1024, 1024, "s8", "s8", "s32", a_layout="col"), {}),  # A from registers, an N-major B filled
    (GemmSpec(512, 520, 2048, "s8", "s8", "s32", a_layout="col", b_layout="col"), {}),  # the loop unrolled by 2
    (GemmSpec(1024, 100, 512, "s8", "s8", "s32", b_layout="col"), {}),  # N 100: m64n112 (ptxas refuses n104)
]


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("spec, options", INT8_CASES, ids=lambda x: x.name if isinstance(x, GemmSpec) else "")
def test_int8_wgmma_on_the_gpu(spec, options):
    result = like_the_sm90_kernel(spec, options, "gpu", 5, "wgmma.mma_async.sync.aligned.m64n", "mma.sync")
    assert ".s32." in result.variant and result.max_abs == 0, result.line()


TRANSPOSED_CASES = [  # 8-bit, A K-major and B N-major, by default: D^T = B^T A^T (tile-transpose-product)
    GemmSpec(512, 520, 1024, "s8", "s8", "s32"),
    GemmSpec(520, 600, 300, "u8", "u8", "s32"),
    GemmSpec(520, 1000, 512, "s8", "s8", "s32", c=True),  # C through its view, ragged edges
    GemmSpec(512, 520, 256, "s8", "s8", "s32", batch=2),
    GemmSpec(2048, 2048, 2048, "s8", "s8", "s32"),
]


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("spec", TRANSPOSED_CASES, ids=lambda s: s.name)
def test_transposed_product_on_the_gpu(spec):
    """The transposed product's D, from the arguments as given: numpy's A @ B (+ C) word for word,
    and the GPU's mma.sync kernel's."""
    kernel = compiled(spec)
    assert kernel.variant.startswith("wgmma.mma_async"), kernel.variant
    exactly_a_times_b(spec, kernel, "gpu", 5)


TRANSPOSED_EPILOGUE_CASES = [  # ... with an epilogue: its vectors broadcast along the exchanged dimensions
    GemmSpec(512, 520, 256, "s8", "s8", "s32", vector_scales="rows,cols", bias="col", out="f16"),
    GemmSpec(1024, 1000, 512, "u8", "u8", "s32", alpha=0.5, vector_scales="cols", act="relu", out="f32"),
]


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("spec", TRANSPOSED_EPILOGUE_CASES, ids=lambda s: s.name)
def test_transposed_epilogue_on_the_gpu(spec):
    """Within the reference's bound, and every output word the GPU's mma.sync kernel's."""
    kernel = compiled(spec)
    assert kernel.variant.startswith("wgmma.mma_async"), kernel.variant
    same_words_as_mma_sync(spec, kernel, "gpu", 5)


TF32_CASES = [  # (spec, options): every order, every rounding, ragged sizes, a batch, both rings
    (GemmSpec(130, 200, 300, "tf32", "tf32", "f32", b_layout="col"), {}),  # rounding copies
    (GemmSpec(130, 200, 300, "tf32", "tf32", "f32"), {}),  # the fill stages B K-major
    (GemmSpec(136, 200, 96, "tf32", "tf32", "f32", a_layout="col", b_layout="col", rounding="rz"), {}),
    (GemmSpec(70, 136, 100, "tf32", "tf32", "f32", a_layout="col", batch=2, rounding="rn"), {}),
    (GemmSpec(130, 72, 64, "tf32", "tf32", "f32", b_layout="col", rounding="trunc"), {}),  # cp.async
    (GemmSpec(200, 264, 96, "tf32", "tf32", "f32"), {"warps": "4x1", "warp_tile": "1x16", "stages": 3}),
    (GemmSpec(1024, 1024, 1024, "tf32", "tf32", "f32"), {}),  # the default tiles
    (GemmSpec(96, 64, 100, "tf32", "tf32", "f32", b_layout="col"), {"stages": 2}),
    (GemmSpec(64, 128, 1024, "tf32", "tf32", "f32"), {"split_k": 4}),  # the fill, K split in 4
    (GemmSpec(96, 64, 128, "tf32", "tf32", "f32", b_layout="col", bias="col", act="gelu", out="f16"), {}),
    (GemmSpec(512, 4096, 1024, "tf32", "tf32", "f32", b_layout="col"), {}),  # 128 x 256 CTAs, K split in 2
    # an N-major B with a K-major A from 512 rows: D^T = B^T A^T (tile-transpose-product), A' filled
    (GemmSpec(512, 4096, 1024, "tf32", "tf32", "f32"), {}),
    (GemmSpec(2048, 2048, 256, "tf32", "tf32", "f32", rounding="rn"), {}),
]


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("spec, options", TF32_CASES, ids=lambda x: x.name if isinstance(x, GemmSpec) else "")
def test_tf32_wgmma_on_the_gpu(spec, options):
    like_the_sm90_kernel(spec, options, "gpu", 5, "wgmma.mma_async.sync.aligned.m64n", "mma.sync")


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("etype", ["s8", "u8"])
@pytest.mark.parametrize("n", [64, 128, 256])
@pytest.mark.parametrize("adversarial", [False, True])
@pytest.mark.parametrize("a_registers", [False, True])
def test_int8_probe(etype, n, adversarial, a_registers):
    """One integer wgmma kernel of the probe (A from shared memory or from registers) in its own process."""
    r = subprocess.run([sys.executable, "-m", "tools.wgmma_probe", "i8", etype, str(n), str(int(adversarial)),
                        str(int(a_registers))], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[0]) == 0, r.stdout


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("etype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [64, 128, 256])
@pytest.mark.parametrize("b_major", ["k", "n"])
@pytest.mark.parametrize("adversarial", [False, True])
@pytest.mark.parametrize("a_row", [128, 64])
def test_sparse_probe(etype, n, b_major, adversarial, a_row):
    """One wgmma.mma_async.sp kernel of the probe in its own process."""
    args = ["sp", etype, str(n), str(int(b_major == "n")), str(int(adversarial)), str(a_row)]
    r = subprocess.run([sys.executable, "-m", "tools.wgmma_probe", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mismatched = int(r.stdout.split()[0])
    assert mismatched == 0, r.stdout


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("etype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [64, 256])
@pytest.mark.parametrize("b_major", ["k", "n"])
@pytest.mark.parametrize("adversarial", [False, True])
def test_probe(etype, n, b_major, adversarial):
    """One wgmma kernel of the probe in its own process (a fault would end this one's context)."""
    lbo, sbo = (64 * 128, 1024) if b_major == "n" else (16, 1024)
    args = [etype, str(n), str(int(b_major == "n")), str(lbo), str(sbo), str(int(adversarial))]
    r = subprocess.run([sys.executable, "-m", "tools.wgmma_probe", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mismatched = int(r.stdout.split()[0])
    assert mismatched == 0, r.stdout


@pytest.mark.skipif(not is_sm90(), reason="wgmma is sm_90a's")
@pytest.mark.parametrize("n", [64, 128, 256])
@pytest.mark.parametrize("adversarial", [False, True])
@pytest.mark.parametrize("a_registers", [False, True])
def test_tf32_probe(n, adversarial, a_registers):
    """One tf32 wgmma kernel of the probe (f32 operands, their low 13 bits ignored; A from shared
    memory or from registers) in its own process."""
    r = subprocess.run([sys.executable, "-m", "tools.wgmma_probe", "tf32", str(n), str(int(adversarial)),
                        str(int(a_registers))], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[0]) == 0, r.stdout
