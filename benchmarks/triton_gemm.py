"""The Triton peer of `gemm_bench`: a plain blocked matmul (`tl.dot` in a K loop, grouped program
order) tried over a handful of tile configurations. Imported only inside the Triton worker
subprocesses, so that whether Triton uses wgmma or mma.sync (`DISABLE_MMA_V3`, read when Triton
compiles) is fixed per process.
"""

from __future__ import annotations

import triton
import triton.language as tl

GROUP_M = 8

# (BM, BN, BK, warps, stages) per element size in bytes: BK keeps 64 or 128 bytes of K per row.
CONFIGS: dict[int, list[tuple[int, int, int, int, int]]] = {
    1: [(128, 128, 64, 4, 4), (128, 256, 128, 8, 3), (256, 128, 128, 8, 3), (64, 128, 128, 4, 4)],
    2: [(128, 128, 32, 4, 4), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (64, 128, 64, 4, 4)],
    4: [(128, 128, 32, 4, 3), (128, 256, 32, 8, 3), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4)],
    8: [(64, 64, 16, 4, 3), (128, 64, 16, 4, 3), (64, 128, 16, 4, 3), (128, 128, 16, 8, 3)],
}


@triton.jit
def _matmul(a_ptr, b_ptr, d_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_dm, s_dn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr,
            PRECISION: tl.constexpr):
    # Grouped order: GM consecutive programs walk down a column of D tiles, so that they share
    # B tiles in L2.
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
    acc_type = d_ptr.dtype.element_ty  # D's element type is the accumulator's
    acc = tl.zeros((BM, BN), dtype=acc_type)
    for step in range(0, tl.cdiv(K, BK)):
        left = K - step * BK
        a = tl.load(a_tile, mask=offs_k[None, :] < left, other=0)
        b = tl.load(b_tile, mask=offs_k[:, None] < left, other=0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=acc_type)
        a_tile += BK * s_ak
        b_tile += BK * s_bk
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    tl.store(d_ptr + rows[:, None] * s_dm + cols[None, :] * s_dn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def instruction(ptx: str) -> str:
    """Which matrix instruction a compiled kernel's PTX uses."""
    if "wgmma" in ptx:
        return "wgmma"
    if "mma.sync" in ptx:
        return "mma.sync"
    return "mma" if "mma" in ptx else "fma"


def _arguments(shape, a_strides, b_strides, d_strides, config, precision) -> tuple[tuple, dict]:
    """`_matmul`'s arguments after its three pointers, and its keyword arguments."""
    bm, bn, bk, warps, stages = config
    m, n, k = shape
    return ((m, n, k, *a_strides, *b_strides, *d_strides),
            dict(BM=bm, BN=bn, BK=bk, GM=GROUP_M, PRECISION=precision, num_warps=warps, num_stages=stages))


def matmul(a, b, d, config: tuple[int, int, int, int, int], precision: str | None):
    """D = A x B with one configuration; returns Triton's compiled kernel (`.asm["ptx"]`)."""
    bm, bn = config[:2]
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    args, kwargs = _arguments((m, n, k), a.stride(), b.stride(), d.stride(), config, precision)
    return _matmul[grid](a, b, d, *args, **kwargs)


def specialization(shape, a_strides, b_strides, d_strides) -> tuple:
    """What Triton specializes an integer argument on (equal to 1, a multiple of 16): shapes with
    the same key share a compiled kernel."""
    ints = (*shape, *a_strides, *b_strides, *d_strides)
    return tuple((x == 1, x % 16 == 0) for x in ints)


def warm(job: tuple) -> str:
    """Compile one (dtype names of A, B, D; shape; A, B, D strides; config; precision) into
    Triton's cache (`TRITON_CACHE_DIR`) without launching it (`JITFunction.warmup` on dtypes),
    so that a later `matmul` with the same specialization loads it; '' or the error."""
    import torch

    dtypes, shape, a_strides, b_strides, d_strides, config, precision = job
    try:
        args, kwargs = _arguments(shape, a_strides, b_strides, d_strides, config, precision)
        _matmul.warmup(*(getattr(torch, t) for t in dtypes), *args, grid=(1,), **kwargs)
        return ""
    except Exception as exc:  # the timed run compiles it (or reports the failure) itself
        return f"{type(exc).__name__}: {exc}"[:200]
