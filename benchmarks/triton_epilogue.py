"""The Triton peer of `epilogue_bench`: `triton_gemm`'s blocked matmul (`tl.dot` in a K loop,
grouped program order, the same tile configurations) with the epilogue fused on the accumulator
before its one store: int8 dequantization (`f32(acc) * sa[m] * sb[n]`), a per-column bias, ReLU or
GELU (erf form with `tl.math.erf`, tanh form with libdevice's `tanh`), then D's element type
(f16 / bf16 / f32 / s32: the type of the tensor passed as D). Imported only inside the Triton
worker subprocesses, like `triton_gemm`, so that `DISABLE_MMA_V3` is fixed per process.
"""

from __future__ import annotations

import triton
import triton.language as tl

from benchmarks.triton_gemm import CONFIGS, GROUP_M, instruction  # noqa: F401 (re-exported)

try:  # Triton >= 3.2: libdevice dispatched per backend
    from triton.language.extra import libdevice

    @triton.jit
    def _tanh(x):
        return libdevice.tanh(x)

    TANH = "libdevice.tanh"
except ImportError:  # older Triton: tanh(x) = 2 sigmoid(2x) - 1

    @triton.jit
    def _tanh(x):
        return 2.0 * tl.sigmoid(2.0 * x) - 1.0

    TANH = "2*sigmoid(2x)-1"


@triton.jit
def _matmul_epilogue(a_ptr, b_ptr, d_ptr, bias_ptr, sa_ptr, sb_ptr, M, N, K,
                     s_am, s_ak, s_bk, s_bn, s_dm, s_dn,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr,
                     ACC_INT: tl.constexpr, BIAS: tl.constexpr, DEQUANT: tl.constexpr, ACT: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    group = pid // (GM * tiles_n)
    first_m = group * GM
    rows_in_group = min(tiles_m - first_m, GM)
    pid_m = first_m + (pid % (GM * tiles_n)) % rows_in_group
    pid_n = (pid % (GM * tiles_n)) // rows_in_group
    offs_m = (pid_m * BM + tl.arange(0, BM)) % M
    offs_n = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_tile = a_ptr + offs_m[:, None] * s_am + offs_k[None, :] * s_ak
    b_tile = b_ptr + offs_k[:, None] * s_bk + offs_n[None, :] * s_bn
    if ACC_INT:
        acc = tl.zeros((BM, BN), dtype=tl.int32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BK)):
        left = K - step * BK
        a = tl.load(a_tile, mask=offs_k[None, :] < left, other=0)
        b = tl.load(b_tile, mask=offs_k[:, None] < left, other=0)
        acc = tl.dot(a, b, acc, out_dtype=acc.dtype)
        a_tile += BK * s_ak
        b_tile += BK * s_bk
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    # The epilogue, in registers: the same operations, in the same order, as tilemma's tile.map.
    # 0.70710678 = sqrt(1/2), 0.79788456 = sqrt(2/pi)
    if DEQUANT:
        sa = tl.load(sa_ptr + rows, mask=rows < M, other=0.0)
        sb = tl.load(sb_ptr + cols, mask=cols < N, other=0.0)
        x = acc.to(tl.float32) * sa[:, None] * sb[None, :]
    else:
        x = acc
    if BIAS:
        x = x + tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    if ACT == "relu":
        x = tl.maximum(x, 0.0)
    elif ACT == "gelu":
        x = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    elif ACT == "gelu-tanh":
        x = 0.5 * x * (1.0 + _tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    tl.store(d_ptr + rows[:, None] * s_dm + cols[None, :] * s_dn, x.to(d_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(a, b, d, config: tuple[int, int, int, int, int], *, bias=None, sa=None, sb=None,
           act: str | None = None):
    """D = epilogue(A x B) with one configuration (`triton_gemm.CONFIGS`' form); returns Triton's
    compiled kernel (`.asm["ptx"]`). The accumulator is s32 for 8-bit integer A, else f32."""
    import torch

    bm, bn, bk, warps, stages = config
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    return _matmul_epilogue[grid](
        a, b, d, d if bias is None else bias, d if sa is None else sa, d if sb is None else sb,
        m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), d.stride(0), d.stride(1),
        BM=bm, BN=bn, BK=bk, GM=GROUP_M, ACC_INT=a.dtype == torch.int8, BIAS=bias is not None, DEQUANT=sa is not None,
        ACT=act or "", num_warps=warps, num_stages=stages,
    )
