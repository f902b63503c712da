"""Shared by the emulator and GPU tests of rna rounding as `fragment_io.tf32_for_mma` emits it
(half a tf32 ulp added to a finite word's bits, the low 13 bits left to the tensor cores): the
kernels that round at each place (the transposing fill, a stage rounded where it lies, fragments
read from shared memory), the PTX with each such add turned back into
`cvt.rna.tf32.f32`, and adversarial f32 operands."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from tilemma.compiler.driver.gemm_generator import GemmSpec


# (id, spec, sm, options): where each kernel rounds
KERNELS = [
    ("fill-ab", GemmSpec(136, 256, 96, "tf32", "tf32", "f32", a_layout="col"), "90a", {"wgmma": True}),
    ("in-place-a-fill-b", GemmSpec(130, 256, 96, "tf32", "tf32", "f32"), "90a", {"wgmma": True}),
    ("in-place-ab", GemmSpec(130, 200, 96, "tf32", "tf32", "f32", b_layout="col"), "90a", {"wgmma": True}),
    ("ldmatrix-load-shared", GemmSpec(70, 72, 100, "tf32", "tf32", "f32"), "90", {}),
]

_ADD = re.compile(r"\n\s*abs\.f32 (%r\d+), (?P<src>%[rf]\d+);\n\s*setp\.lt\.f32 (?P<p>%p\d+), \1, 0f7F800000;\n"
                  r"(?:\s*mov\.b32 %r\d+, (?P=src);\n)?\s*@(?P=p) add\.s32 (?P<dst>%r\d+), (?P=dst), 4096;")


def adds(ptx: str) -> int:
    """How many rna roundings `ptx` does as the add."""
    return len(_ADD.findall(ptx))


def with_cvt(kernel):
    """`kernel` with each add of half an ulp made the `cvt.rna.tf32.f32` ptxas would assemble."""
    ptx, n = _ADD.subn(lambda m: f"\n    cvt.rna.tf32.f32 {m['dst']}, {m['src']};", kernel.ptx)
    assert n and not adds(ptx), n
    return dataclasses.replace(kernel, ptx=ptx)


def d_words(result) -> np.ndarray:
    """A run's D as its 32-bit words."""
    return np.asarray(result.outputs["d"]).view(np.uint32)


def operands(spec: GemmSpec, seed: int, nan_payloads: bool = False) -> dict[str, np.ndarray]:
    """A (M x K) and B (K x N) f32 of wide exponents with their low 13 bits set to make every case
    of the add: ties (0x1000), carries through the mantissa into the exponent (0x1FFF under an all-ones
    mantissa), subnormals, and in a few of A's rows values that round up to infinity; with
    `nan_payloads`, NaNs whose payload lies in the low 13 bits alone (the tensor cores read them as
    infinities, as ptxas's cvt.rna leaves them)."""
    rng = np.random.default_rng(seed)

    def one(shape, wild_rows):
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-24, 24, shape))).astype(np.float32)
        bits = x.view(np.uint32)
        pick = rng.random(shape)
        bits[pick < 0.2] = (bits[pick < 0.2] & 0xFFFFE000) | 0x1000  # ties
        carry = (pick >= 0.2) & (pick < 0.3)
        bits[carry] |= 0x007FFFFF  # all-ones mantissa: rounding up carries into the exponent
        low = (pick >= 0.3) & (pick < 0.5)
        bits[low] = (bits[low] & 0xFFFFE000) | rng.integers(0, 0x2000, int(low.sum()), dtype=np.uint32)
        sub = (pick >= 0.5) & (pick < 0.55)
        bits[sub] &= 0x807FFFFF  # subnormals
        for r in wild_rows:
            cols = rng.choice(shape[1], 2, replace=False)
            bits[r, cols[0]] = (bits[r, cols[0]] & 0x80000000) | 0x7F7FF000 | 0x1000 | 7  # rounds to infinity
            if nan_payloads:
                bits[r, cols[1]] = 0x7F800000 | rng.integers(1, 0x2000, dtype=np.uint32)
        return x

    return {"a": one((spec.m, spec.k), (3, spec.m - 2)), "b": one((spec.k, spec.n), ())}
