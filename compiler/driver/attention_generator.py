"""Writes the tile IR of an attention kernel: `tilemma attention` and the tests' generator.

O = softmax(scale * Q K^T [causal]) V for b x h heads of s rows and head dim d, as three tile ops
over whole memrefs (the batch is b*h heads): Q, K, V and O are `memref<BH x S x D>` (row-major,
as PyTorch's contiguous (b, h, s, d) tensors), and K^T is K read through a transposed layout
(`strided<[S*D, 1, D]>`), so S = tile.mma(Q, K^T) needs no copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DTYPES = ("f16", "bf16")


@dataclass(frozen=True)
class AttentionSpec:
    b: int
    h: int
    s: int
    d: int
    causal: bool = False
    dtype: str = "f16"
    scale: float | None = None  # default 1 / sqrt(d)

    @property
    def heads(self) -> int:
        return self.b * self.h

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.d) if self.scale is None else self.scale

    @property
    def name(self) -> str:
        return f"attention_b{self.b}h{self.h}_s{self.s}_d{self.d}_{self.dtype}{'_causal' if self.causal else ''}"

    def problem(self) -> str | None:
        """Why the spec is not a kernel (None: it is)."""
        for what, v in (("b", self.b), ("h", self.h), ("s", self.s), ("d", self.d)):
            if v < 1:
                return f"--{what} must be positive, got {v}"
        if self.dtype not in DTYPES:
            return f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype}"
        if not (self.softmax_scale > 0 and math.isfinite(self.softmax_scale)):
            return f"--scale must be a positive finite number, got {self.scale}"
        return None


def attention_text(spec: AttentionSpec) -> str:
    """The kernel's tile IR (MLIR text)."""
    bh, s, d, t = spec.heads, spec.s, spec.d, spec.dtype
    rows = f"memref<{bh}x{s}x{d}x{t}>"
    kt = f"memref<{bh}x{d}x{s}x{t}, strided<[{s * d}, 1, {d}]>>"
    tq, tkt = f"!tile.tile<{bh}x{s}x{d}x{t}>", f"!tile.tile<{bh}x{d}x{s}x{t}>"
    ts, to = f"!tile.tile<{bh}x{s}x{s}xf32>", f"!tile.tile<{bh}x{s}x{d}xf32>"
    tp = f"!tile.tile<{bh}x{s}x{s}x{t}>"
    causal = ", causal" if spec.causal else ""
    return f"""builtin.module {{
  func.func @{spec.name}(%q: {rows}, %k: {kt}, %v: {rows}, %o: {rows}) {{
    %tq = tile.load %q[0, 0, 0] : {rows} -> {tq}
    %tkt = tile.load %k[0, 0, 0] : {kt} -> {tkt}
    %tv = tile.load %v[0, 0, 0] : {rows} -> {tq}
    %zs = tile.constant 0.0 : {ts}
    %s = tile.mma %tq, %tkt, %zs : {tq}, {tkt}, {ts} -> {ts}
    %p = tile.softmax %s {{scale = {spec.softmax_scale!r} : f32{causal}}} : {ts} -> {ts}
    %ph = tile.cast %p : {ts} -> {tp}
    %zo = tile.constant 0.0 : {to}
    %acc = tile.mma %ph, %tv, %zo : {tp}, {tq}, {to} -> {to}
    %out = tile.cast %acc : {to} -> {tq}
    tile.store %out, %o[0, 0, 0] : {tq}, {rows}
    func.return
  }}
}}
"""
