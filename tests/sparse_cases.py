"""Every sparse (mma.sp) family tilemma lowers on sm_90, as (a, b, acc, shape, extra GemmSpec fields).

Shared by the GPU tests and the emulator tests.
"""

from tilemma.compiler.driver.gemm_generator import GemmSpec

SPARSE_SM90 = [
    ("f16", "f16", "f32", "m16n8k32", {}),
    ("f16", "f16", "f16", "m16n8k16", {}),
    ("bf16", "bf16", "f32", "m16n8k32", {"prune": True}),
    ("bf16", "bf16", "f32", "m16n8k16", {}),
    ("tf32", "tf32", "f32", "m16n8k16", {}),
    ("tf32", "tf32", "f32", "m16n8k8", {"prune": True}),
    ("si8", "si8", "si32", "m16n8k64", {}),
    ("ui8", "si8", "si32", "m16n8k32", {"satfinite": True}),
    ("si8", "ui8", "si32", "m16n8k64", {"prune": True}),
    ("si4", "si4", "si32", "m16n8k128", {}),
    ("ui4", "si4", "si32", "m16n8k64", {"prune": True}),
    ("f8E4M3FN", "f8E5M2", "f32", "m16n8k64", {}),
    ("f8E5M2", "f8E5M2", "f32", "m16n8k64", {"prune": True}),
]


def case_id(case) -> str:
    a, b, acc, shape, extra = case
    flags = "".join(f"-{k}" for k, v in extra.items() if v)
    return f"{a}x{b}-{acc}-{shape}{flags}"


def spec_for(case, m: int, n: int, k: int, batch=None, bcast=None) -> GemmSpec:
    a, b, acc, shape, extra = case
    return GemmSpec(m, n, k, a, b, acc, batch, bcast, shape=shape, sparse_a=True, **extra)
