"""Every dense mma.sync family tilemma lowers on sm_90, as (a, b, acc, shape hint, options).

Shared by the GPU tests and (later) the emulator tests, so both sweep the same variants.
"""

from tilemma.compiler.driver.gemm_generator import GemmSpec

# (a, b, acc, shape, extra GemmSpec fields): one row per instruction variant to exercise.
DENSE_SM90 = [
    ("f16", "f16", "f32", "m16n8k16", {}),
    ("f16", "f16", "f16", "m16n8k16", {}),
    ("f16", "f16", "f32", "m16n8k8", {}),
    ("f16", "f16", "f16", "m16n8k8", {}),
    ("f16", "f16", "f32", "m8n8k4", {}),
    ("f16", "f16", "f16", "m8n8k4", {}),
    ("bf16", "bf16", "f32", "m16n8k16", {}),
    ("bf16", "bf16", "f32", "m16n8k8", {}),
    ("tf32", "tf32", "f32", "m16n8k8", {}),
    ("tf32", "tf32", "f32", "m16n8k4", {}),
    ("f64", "f64", "f64", "m8n8k4", {}),
    ("f64", "f64", "f64", "m16n8k4", {}),
    ("f64", "f64", "f64", "m16n8k8", {}),
    ("f64", "f64", "f64", "m16n8k16", {}),
    ("si8", "si8", "si32", "m16n8k32", {}),
    ("ui8", "si8", "si32", "m16n8k16", {}),
    ("si8", "ui8", "si32", "m8n8k16", {}),
    ("ui8", "ui8", "si32", "m16n8k32", {"satfinite": True}),
    ("si8", "si8", "si32", "m16n8k16", {"satfinite": True}),
    ("si4", "si4", "si32", "m16n8k64", {}),
    ("ui4", "si4", "si32", "m16n8k32", {}),
    ("si4", "ui4", "si32", "m8n8k32", {"satfinite": True}),
    ("si4", "si4", "si32", None, {}),  # default on sm_90: widened to the s8 instruction
    ("i1", "i1", "si32", "m16n8k256", {"popc": "xor"}),
    ("i1", "i1", "si32", "m16n8k128", {"popc": "and"}),
    ("i1", "i1", "si32", "m8n8k128", {"popc": "xor"}),
    ("f8E4M3FN", "f8E4M3FN", "f32", "m16n8k32", {}),
    ("f8E5M2", "f8E4M3FN", "f32", "m16n8k16", {}),
    ("f8E4M3FN", "f8E5M2", "f16", "m16n8k32", {}),
    ("f8E5M2", "f8E5M2", "f16", "m16n8k16", {}),
]


def case_id(case) -> str:
    a, b, acc, shape, extra = case
    flags = "".join(f"-{k}" if v is True else f"-{v}" for k, v in extra.items())
    return f"{a}x{b}-{acc}-{shape or 'auto'}{flags}"


def spec_for(case, m: int, n: int, k: int, batch=None, bcast=None) -> GemmSpec:
    a, b, acc, shape, extra = case
    return GemmSpec(m, n, k, a, b, acc, batch, bcast, shape=shape, **extra)
