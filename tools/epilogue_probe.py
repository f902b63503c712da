"""GPU probe of the epilogue's PTX arithmetic: every instruction the emulator models for fused
epilogues, and every `scalar_math` sequence, run on the GPU and in the emulator on the same inputs.

One small kernel per probe: thread i loads element i of each input array, runs the instruction
(or sequence), stores element i of the output. Inputs are adversarial values (zeros, subnormals,
the largest finite values, infinities, NaNs with payloads, rounding ties of every target format,
fma's double-rounding traps), random bit patterns and sweeps.

* exact instructions (`kind="exact"`): the GPU's output must be bit-identical to the emulator's;
* approximate instructions (`"approx"`): the fraction bit-identical and the largest distance in
  ulps are recorded, and the GPU's result must lie within the ISA's stated error of the exact
  function (`isa_bound`);
* math sequences (`"math"`): likewise, against `scalar_math.bound` - the bound proven on hardware.

    python -m tools.epilogue_probe --out DIR [--only SUBSTRING] [--emulator-only]

prints the table (instruction, inputs, bit-identical %, max ulp GPU vs emulator, max error vs
exact in units of the bound) and writes DIR/epilogue_probe.json and DIR/epilogue_probe.md. It
exits 1 when an exact instruction differs or a bound is exceeded. `--emulator-only` runs the
kernels in the emulator alone (a check of the harness on a machine without a GPU).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np
from xdsl.ir import Block, Region

from tilemma.compiler.verify.emulator import emulate
from tilemma.compiler.verify.emulator.float_ops import APPROX_BOUNDS
from tilemma.compiler.verify.ptx_text import print_ptx
from tilemma.dialects import ptx
from tilemma.dialects.ptx_builder import RegisterFile
from tilemma.passes.warp_to_ptx import scalar_math
from tilemma.passes.warp_to_ptx.fragment_io import Emitter

ENTRY = "epilogue_probe"
BLOCK = 256
TARGET, VERSION = "sm_90", "8.7"  # cvt to e4m3x2/e5m2x2 needs sm_89+, .satfinite f16/bf16 PTX 8.1

# Register types of the kernels' inputs and outputs -> (load/store suffix, register bank, NumPy word).
_IO = {
    "f32": ("f32", "f32", np.uint32), "f64": ("f64", "f64", np.uint64), "b32": ("b32", "b32", np.uint32),
    "b16": ("b16", "b16", np.uint16), "u16": ("u16", "b16", np.uint16), "u8": ("u8", "b16", np.uint8),
    "b8": ("b8", "b16", np.uint8),
}  # fmt: skip


class ProbeEmitter(Emitter):
    """The lowering's `Emitter` plus a .b16 bank (`%h`), which the kernels' b16 values need."""

    def __init__(self) -> None:
        super().__init__(RegisterFile())
        self.b16 = 0

    def reg(self, bank: str) -> str:
        if bank == "b16":
            self.b16 += 1
            return f"%h{self.b16 - 1}"
        return super().reg(bank)


Body = Callable[[ProbeEmitter, list[str]], str]


@dataclass
class Probe:
    """One row of the table: a kernel body over inputs of `ins` types giving an `out` value."""

    name: str
    ins: tuple[str, ...]
    out: str
    body: Body
    kind: str  # "exact", "approx", "math"
    inputs: Callable[[np.random.Generator], list[np.ndarray]]  # word arrays, one per input
    fn: str = ""  # approx: the ex2/lg2/... of APPROX_BOUNDS; math: the scalar_math op
    ftz: bool = False
    note: str = ""


def kernel(p: Probe) -> str:
    """The probe's PTX module: entry `epilogue_probe(p_in0, ..., p_out)`, one element a thread."""
    e = ProbeEmitter()
    tid, cta, gid = e.reg("b32"), e.reg("b32"), e.reg("b32")
    e.emit("mov.u32", tid, "%tid.x")
    e.emit("mov.u32", cta, "%ctaid.x")
    e.emit("mad.lo.u32", gid, cta, BLOCK, tid)
    names = [f"p_in{i}" for i in range(len(p.ins))] + ["p_out"]

    def address(param: str, t: str) -> str:
        base, off = e.reg("b64"), e.reg("b64")
        e.emit("ld.param.u64", base, f"[{param}]")
        e.emit("cvta.to.global.u64", base, base)
        e.emit("mul.wide.u32", off, gid, np.dtype(_IO[t][2]).itemsize)
        e.emit("add.s64", base, base, off)
        return base

    regs = []
    for name, t in zip(names, p.ins):
        suffix, bank, _ = _IO[t]
        addr = address(name, t)
        r = e.reg(bank)
        e.emit(f"ld.global.{suffix}", r, f"[{addr}]")
        regs.append(r)
    out = p.body(e, regs)
    addr = address("p_out", p.out)
    e.emit(f"st.global.{_IO[p.out][0]}", f"[{addr}]", out)
    e.emit("ret")
    decls = e.regs.declarations() + ([ptx.RegOp("b16", "%h", e.b16)] if e.b16 else [])
    entry = ptx.EntryOp(ENTRY, [f".u64 {n}" for n in names], Region(Block([*decls, *e.ops])), BLOCK)
    return print_ptx(ptx.ModuleOp_(VERSION, TARGET, [entry]))


# ---------------------------------------------------------------------------------------------
# Bodies
# ---------------------------------------------------------------------------------------------

_BANK = {"f32": "f32", "f64": "f64", "b32": "b32", "s32": "b32", "u32": "b32", "b16": "b16", "f16": "b16"}


def op(opcode: str, out_bank: str) -> Body:
    """d = opcode(inputs...)."""

    def body(e: ProbeEmitter, xs: list[str]) -> str:
        r = e.reg(out_bank)
        e.emit(opcode, r, *xs)
        return r

    return body


def setp_all(t: str) -> Body:
    """All 16 float comparisons of the two inputs, as bit i of a .b32 (i in FLOAT_CMPS order)."""
    from tilemma.compiler.verify.emulator.float_ops import FLOAT_CMPS

    def body(e: ProbeEmitter, xs: list[str]) -> str:
        acc = e.reg("b32")
        e.emit("mov.u32", acc, 0)
        for i, c in enumerate(FLOAT_CMPS):
            p, bit = e.reg("pred"), e.reg("b32")
            e.emit(f"setp.{c}.{t}", p, *xs)
            e.emit("selp.b32", bit, 1 << i, 0, p)
            e.emit("or.b32", acc, acc, bit)
        return acc

    return body


def selp(t: str) -> Body:
    """selp.t d, x, y, (z & 1) for inputs x, y of type t and a selector word z."""

    def body(e: ProbeEmitter, xs: list[str]) -> str:
        p, low, r = e.reg("pred"), e.reg("b32"), e.reg(_BANK[t])
        e.emit("and.b32", low, xs[2], 1)
        e.emit("setp.ne.u32", p, low, 0)
        e.emit(f"selp.{t}", r, xs[0], xs[1], p)
        return r

    return body


def cvt_pack(opcode: str) -> Body:
    """A packing cvt d, a, b: a .b32 (f16x2/bf16x2) or a .b16 (e4m3x2/e5m2x2, widened to .b32)."""
    narrow = "e4m3x2" in opcode or "e5m2x2" in opcode

    def body(e: ProbeEmitter, xs: list[str]) -> str:
        r = e.reg("b16" if narrow else "b32")
        e.emit(opcode, r, *xs)
        if not narrow:
            return r
        w = e.reg("b32")
        e.emit("cvt.u32.u16", w, r)
        return w

    return body


def pack_unpack(e: ProbeEmitter, xs: list[str]) -> str:
    """Unpack a .b32 into two .b16, swap them, pack again; unpack/pack a .b64 too."""
    lo, hi, r = e.reg("b16"), e.reg("b16"), e.reg("b32")
    e.emit("mov.b32", "{" + f"{lo}, {hi}" + "}", xs[0])
    e.emit("mov.b32", r, "{" + f"{hi}, {lo}" + "}")
    wide, a, b = e.reg("b64"), e.reg("b32"), e.reg("b32")
    e.emit("mov.b64", wide, "{" + f"{r}, {xs[0]}" + "}")
    e.emit("mov.b64", "{" + f"{a}, {b}" + "}", wide)
    out = e.reg("b32")
    e.emit("xor.b32", out, a, b)  # = swapped ^ original
    e.emit("xor.b32", out, out, xs[0])  # = swapped
    return out


def memory_8_16(e: ProbeEmitter, xs: list[str]) -> str:
    """The input's load and the output's store alone: ld/st.global.u8, .u16 or .b16 through a .b16
    register."""
    return xs[0]


def sequence(name: str) -> Body:
    emit = scalar_math.MATH[name]
    return lambda e, xs: emit(e, xs[0])


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------

F32_SPECIAL = np.array([
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x00000002, 0x007FFFFF, 0x807FFFFF, 0x00800000,
    0x80800000, 0x00800001, 0x3F800000, 0xBF800000, 0x3F800001, 0x3F7FFFFF, 0x7F7FFFFF, 0xFF7FFFFF,
    0x7F7FFFFE, 0x7F000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0xFFFFFFFF,
    0x7F800001, 0xFF800001, 0x7FA12345, 0x7FC12345, 0x40490FDB, 0x34000000, 0x33800000, 0x33000000,
    0x3F000000, 0x40000000, 0xC0000000, 0x4B000000, 0x4B800000, 0x4F000000, 0xCF000000, 0x5F000000,
    0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x38800000, 0x387FFFFF, 0x43E00000, 0x43E80000,
    0x43E7FFFF, 0x47600000, 0x47680000, 0x4767FFFF, 0x42B17218, 0x42B17217, 0xC2CE8ED0, 0xC2AEAC50,
    0x3F317218, 0x3FB8AA3B, 0x0C000000, 0x8C000000, 0x1F800000, 0x5E800000, 0x3E800000, 0x3F801000,
], dtype=np.uint32)  # fmt: skip

F64_SPECIAL = np.array([
    0x0, 0x8000000000000000, 0x1, 0x8000000000000001, 0x000FFFFFFFFFFFFF, 0x0010000000000000,
    0x3FF0000000000000, 0xBFF0000000000000, 0x3FF0000000000001, 0x3FEFFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF,
    0xFFEFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0xFFF8000000000000,
    0x7FFFFFFFFFFFFFFF, 0x7FF0000000000001, 0x7FF4000000001234, 0xFFF8000000005678, 0x400921FB54442D18,
    0x3CA0000000000000, 0x4340000000000000, 0x47EFFFFFE0000000, 0x47EFFFFFF0000000, 0x36A0000000000000,
    0x3690000000000000, 0x3810000000000000, 0x380FFFFFFFFFFFFF, 0x4000000000000000, 0xC000000000000000,
], dtype=np.uint64)  # fmt: skip


def _f32_bits(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float32).view(np.uint32)


def _log_uniform(rng, n: int, lo: float, hi: float, dtype=np.float32) -> np.ndarray:
    v = np.exp2(rng.uniform(lo, hi, n)) * np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return v.astype(dtype)


def f32_values(rng, n: int = 1 << 15) -> np.ndarray:
    """Specials, random bit patterns and random magnitudes, as f32 words."""
    return np.concatenate([F32_SPECIAL, rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32),
                           _f32_bits(_log_uniform(rng, n, -40, 40))])


def f64_values(rng, n: int = 1 << 14) -> np.ndarray:
    return np.concatenate([F64_SPECIAL, rng.integers(0, 1 << 64, n, dtype=np.uint64, endpoint=False),
                           _log_uniform(rng, n, -300, 300, np.float64).view(np.uint64)])


def pairs(values: np.ndarray, rng, n_random: int) -> list[np.ndarray]:
    """Every pair of the specials (first len(F32/F64_SPECIAL) values) plus random pairs."""
    special = values[: len(F32_SPECIAL) if values.dtype == np.uint32 else len(F64_SPECIAL)]
    a, b = np.meshgrid(special, special, indexing="ij")
    ra, rb = rng.choice(values, n_random), rng.choice(values, n_random)
    # close pairs: cancellation and ties of the sum
    near = rng.choice(values, n_random)
    step = rng.integers(-3, 4, n_random).astype(values.dtype.type)
    return [np.concatenate([a.ravel(), ra, near]), np.concatenate([b.ravel(), rb, near + step])]


def fma_inputs(rng, n: int = 1 << 14) -> list[np.ndarray]:
    """fma triples: specials, random, and double-rounding traps - a x b just off half an ulp
    of c, so that a float64 sum lands on an f32 midpoint that the exact sum is not on."""
    s = F32_SPECIAL[rng.integers(0, len(F32_SPECIAL), (3, 4096))]
    vals = f32_values(rng, n)
    rand = [rng.choice(vals, n) for _ in range(3)]
    c = _log_uniform(rng, n, -60, 60).astype(np.float32)
    e = np.frexp(c.astype(np.float64))[1] - 1  # c in [2**e, 2**(e+1))
    j = rng.integers(20, 40, n)
    sgn = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    a = (1.0 + sgn * np.exp2(-rng.integers(1, 24, n))).astype(np.float32)
    b = np.ldexp(1.0 - sgn * np.exp2(-j.astype(np.float64)), e - 24).astype(np.float32)  # a*b ~ half ulp(c)
    b = np.where(rng.random(n) < 0.5, -b, b).astype(np.float32)
    cancel_a, cancel_b = rng.choice(vals, n).view(np.float32), rng.choice(vals, n).view(np.float32)
    with np.errstate(all="ignore"):
        cancel_c = (-(cancel_a.astype(np.float64) * cancel_b.astype(np.float64))).astype(np.float32)
    return [np.concatenate([s[0], rand[0], _f32_bits(a), _f32_bits(cancel_a)]),
            np.concatenate([s[1], rand[1], _f32_bits(b), _f32_bits(cancel_b)]),
            np.concatenate([s[2], rand[2], _f32_bits(c), _f32_bits(cancel_c)])]


@np.errstate(all="ignore")
def grid_ties(rng, dtype, n: int = 1 << 13) -> np.ndarray:
    """f32 words at and next to the midpoints between neighbours of a narrower float type."""
    info = ml_dtypes.finfo(dtype)
    bits = np.dtype(dtype).itemsize * 8
    words = rng.integers(0, 1 << bits, n, dtype=np.uint64).astype({8: np.uint8, 16: np.uint16}[bits])
    v = words.view(dtype).astype(np.float64)
    v = v[np.isfinite(v)]
    up = np.nextafter(v.astype(dtype), np.array(np.inf, dtype=dtype)).astype(np.float64)
    mid = (v + up) / 2
    mid = mid[np.isfinite(mid)]
    m32 = mid.astype(np.float32)
    out = np.concatenate([m32, np.nextafter(m32, np.float32(np.inf)), np.nextafter(m32, np.float32(-np.inf)),
                          v.astype(np.float32), np.array([float(info.max)], np.float32)])
    return _f32_bits(out)


def sweep(lo: float, hi: float, step: int) -> np.ndarray:
    """Every `step`-th f32 of [lo, hi] (both of one sign), as words."""
    a, b = sorted((int(_f32_bits(lo)), int(_f32_bits(hi))))
    return np.arange(a, b + 1, step, dtype=np.uint64).astype(np.uint32)


def approx_inputs(domain: str) -> Callable[[np.random.Generator], list[np.ndarray]]:
    """Specials, random words, and sweeps over the part of the range that matters."""

    def make(rng) -> list[np.ndarray]:
        parts = [F32_SPECIAL, rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)]
        if domain == "exp":
            parts += [sweep(0.0, 130.0, 1 << 10), sweep(-0.0, -160.0, 1 << 10), sweep(-1.0, 1.0, 1 << 12),
                      sweep(0.0, 1.0, 1 << 10)]
        elif domain == "positive":
            parts += [sweep(0.0, 3.4e38, 1 << 11), sweep(0.5, 2.0, 1 << 6)]
        elif domain == "tanh":
            parts += [sweep(0.0, 20.0, 1 << 10), sweep(-0.0, -20.0, 1 << 10), sweep(0.0, 1.0, 1 << 8)]
        elif domain == "erf":
            parts += [sweep(0.0, 8.0, 1 << 10), sweep(-0.0, -8.0, 1 << 10), sweep(0.5, 4.5, 1 << 6)]
        return [np.concatenate(parts)]

    return make


def f32_in(n: int = 1) -> Callable:
    def make(rng) -> list[np.ndarray]:
        if n == 1:
            return [f32_values(rng)]
        return pairs(f32_values(rng), rng, 1 << 15)

    return make


def f64_in(n: int = 1) -> Callable:
    def make(rng) -> list[np.ndarray]:
        if n == 1:
            return [f64_values(rng)]
        if n == 2:
            return pairs(f64_values(rng), rng, 1 << 14)
        s = F64_SPECIAL[rng.integers(0, len(F64_SPECIAL), (3, 4096))]
        r = [rng.choice(f64_values(rng), 1 << 14) for _ in range(3)]
        return [np.concatenate([s[i], r[i]]) for i in range(3)]

    return make


def _with_selector(base: Callable, width: int) -> Callable:
    def make(rng) -> list[np.ndarray]:
        x, y = base(rng)
        if width == 16:
            x, y = x.astype(np.uint16), y.astype(np.uint16)
        return [x, y, rng.integers(0, 1 << 32, x.size, dtype=np.uint64).astype(np.uint32)]

    return make


def _b16_all(rng) -> list[np.ndarray]:
    return [np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)]


def _s32_in(rng) -> list[np.ndarray]:
    edge = np.array([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x80000001, 0x00FFFFFF, 0x01000001, 0x01000003,
                     0x7FFFFFC0, 0x7FFFFF80, 0xFFFFFF7F, 0x12345678], dtype=np.uint32)  # fmt: skip
    rnd = rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    near = (rng.integers(1, 1 << 8, 1 << 14, dtype=np.uint64) << rng.integers(24, 32, 1 << 14, dtype=np.uint64))
    near = (near + rng.integers(0, 4, 1 << 14, dtype=np.uint64) * (1 << 6)).astype(np.uint32)  # ties of f32
    return [np.concatenate([edge, rnd, near])]


def _int_pairs(rng) -> list[np.ndarray]:
    [x] = _s32_in(rng)
    return [x, rng.permutation(x)]


def _u8_in(rng) -> list[np.ndarray]:
    return [np.arange(1 << 16, dtype=np.uint32).astype(np.uint8)]


def _cvt_f32_in(dtype) -> Callable:
    return lambda rng: [np.concatenate([f32_values(rng, 1 << 14), grid_ties(rng, dtype)])]


def _cvt_f32_pair(dtype) -> Callable:
    def make(rng) -> list[np.ndarray]:
        [x] = _cvt_f32_in(dtype)(rng)
        return [x, rng.permutation(x)]

    return make


@np.errstate(all="ignore")
def _f64_to_f32_in(rng) -> list[np.ndarray]:
    f32 = f32_values(rng, 1 << 13).view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        up = np.nextafter(f32.astype(np.float32), np.float32(np.inf)).astype(np.float64)
        mid = (f32 + up) / 2
    near = np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)])
    return [np.concatenate([F64_SPECIAL, f64_values(rng, 1 << 13), near.view(np.uint64)])]


# ---------------------------------------------------------------------------------------------
# The probes
# ---------------------------------------------------------------------------------------------


def _probes() -> list[Probe]:
    P: list[Probe] = []
    for t, vin in (("f32", f32_in), ("f64", f64_in)):
        for o in ("add.rn", "sub.rn", "mul.rn", "div.rn", "max", "min", "copysign"):
            P.append(Probe(f"{o}.{t}", (t, t), t, op(f"{o}.{t}", t), "exact", vin(2)))
        for o in ("neg", "abs", "sqrt.rn", "rcp.rn"):
            P.append(Probe(f"{o}.{t}", (t,), t, op(f"{o}.{t}", t), "exact", vin(1)))
        P.append(Probe(f"setp.*.{t}", (t, t), "b32", setp_all(t), "exact", vin(2),
                       note="the 16 float comparisons as one mask"))
        P.append(Probe(f"selp.{t}", (t, t, "b32"), t, selp(t), "exact", _with_selector(vin(2), 0)))
    P.append(Probe("fma.rn.f32", ("f32",) * 3, "f32", op("fma.rn.f32", "f32"), "exact", fma_inputs))
    P.append(Probe("mad.rn.f32", ("f32",) * 3, "f32", op("mad.rn.f32", "f32"), "exact", fma_inputs))
    P.append(Probe("fma.rn.f64", ("f64",) * 3, "f64", op("fma.rn.f64", "f64"), "exact", f64_in(3)))
    for o in ("add.f32", "sub.f32", "mul.f32", "max.NaN.f32", "min.NaN.f32"):
        P.append(Probe(o, ("f32", "f32"), "f32", op(o, "f32"), "exact", f32_in(2)))
    P.append(Probe("selp.b32", ("b32", "b32", "b32"), "b32", selp("b32"), "exact", _with_selector(f32_in(2), 0)))
    P.append(Probe("selp.b16", ("b16", "b16", "b32"), "b16", selp("b16"), "exact", _with_selector(f32_in(2), 16)))
    f16, bf16 = np.float16, ml_dtypes.bfloat16
    for r in ("rn", "rz", "rm", "rp"):
        P.append(Probe(f"cvt.{r}.f16.f32", ("f32",), "b16", op(f"cvt.{r}.f16.f32", "b16"), "exact", _cvt_f32_in(f16)))
        P.append(Probe(f"cvt.{r}.bf16.f32", ("f32",), "b16", op(f"cvt.{r}.bf16.f32", "b16"), "exact",
                       _cvt_f32_in(bf16)))
        P.append(Probe(f"cvt.{r}.f32.f64", ("f64",), "f32", op(f"cvt.{r}.f32.f64", "f32"), "exact", _f64_to_f32_in))
        for it in ("s32", "u32"):
            P.append(Probe(f"cvt.{r}.f32.{it}", ("b32",), "f32", op(f"cvt.{r}.f32.{it}", "f32"), "exact", _s32_in))
    for o in ("cvt.rn.satfinite.f16.f32", "cvt.rn.satfinite.bf16.f32", "cvt.rz.satfinite.f16.f32"):
        dt = f16 if ".f16." in o else bf16
        P.append(Probe(o, ("f32",), "b16", op(o, "b16"), "exact", _cvt_f32_in(dt)))
    for o, dt in (("cvt.rn.f16x2.f32", f16), ("cvt.rz.f16x2.f32", f16), ("cvt.rn.bf16x2.f32", bf16),
                  ("cvt.rn.satfinite.f16x2.f32", f16), ("cvt.rn.satfinite.e4m3x2.f32", ml_dtypes.float8_e4m3fn),
                  ("cvt.rn.satfinite.e5m2x2.f32", ml_dtypes.float8_e5m2)):
        P.append(Probe(o, ("f32", "f32"), "b32", cvt_pack(o), "exact", _cvt_f32_pair(dt)))
    P.append(Probe("cvt.f32.f16", ("b16",), "f32", op("cvt.f32.f16", "f32"), "exact", _b16_all,
                   note="all 65536 patterns"))
    P.append(Probe("cvt.f32.bf16", ("b16",), "f32", op("cvt.f32.bf16", "f32"), "exact", _b16_all,
                   note="all 65536 patterns"))
    P.append(Probe("cvt.f64.f32", ("f32",), "f64", op("cvt.f64.f32", "f64"), "exact", f32_in(1)))
    P.append(Probe("mov.b32/.b64 {..} pack/unpack", ("b32",), "b32", pack_unpack, "exact", f32_in(1)))
    for o in ("add.s32", "sub.s32", "mul.lo.s32", "max.s32", "min.s32"):
        P.append(Probe(o, ("b32", "b32"), "b32", op(o, "b32"), "exact", _int_pairs))
    P.append(Probe("ld/st.global.u8", ("u8",), "u8", memory_8_16, "exact", _u8_in))
    P.append(Probe("ld.global.u8/st.global.b8", ("u8",), "b8", memory_8_16, "exact", _u8_in))
    P.append(Probe("ld/st.global.u16", ("u16",), "u16", memory_8_16, "exact", _b16_all))
    P.append(Probe("ld/st.global.b16", ("b16",), "b16", memory_8_16, "exact", _b16_all))
    domains = {"ex2": "exp", "lg2": "positive", "tanh": "tanh", "rcp": "positive", "rsqrt": "positive",
               "sqrt": "positive"}  # fmt: skip
    for fn, dom in domains.items():
        for ftz in (False, True) if fn != "tanh" else (False,):
            name = f"{fn}.approx{'.ftz' if ftz else ''}.f32"
            P.append(Probe(name, ("f32",), "f32", op(name, "f32"), "approx", approx_inputs(dom), fn, ftz))
    math_domains = {"math.exp": "exp", "math.exp2": "exp", "math.log": "positive", "math.log2": "positive",
                    "math.tanh": "tanh", "math.erf": "erf", "math.sqrt": "positive", "math.rsqrt": "positive"}
    for name, dom in math_domains.items():
        P.append(Probe(name, ("f32",), "f32", sequence(name), "math", approx_inputs(dom), name))
    return P


PROBES = _probes()


# ---------------------------------------------------------------------------------------------
# Bounds and comparison
# ---------------------------------------------------------------------------------------------

_EXACT_FN = {
    "ex2": np.exp2, "tanh": np.tanh, "rcp": lambda v: 1.0 / v, "sqrt": np.sqrt,
    "lg2": lambda v: np.where(v < 0, np.nan, np.log2(np.abs(v))),
    "rsqrt": lambda v: np.where(v == 0, np.copysign(np.inf, v), 1.0 / np.sqrt(v)),
}  # fmt: skip


@np.errstate(all="ignore")
def isa_bound(fn: str, x32: np.ndarray, ftz: bool) -> tuple[np.ndarray, np.ndarray]:
    """(exact value, bound on |result - exact|) of `<fn>.approx[.ftz].f32` from the ISA's stated
    error (`float_ops.APPROX_BOUNDS`): 0 where the exact value is not finite (the result must equal
    it), inf where the result may overflow. .ftz: subnormal inputs count as zero, subnormal
    results may be flushed (2**-126 more)."""
    x = np.asarray(x32, dtype=np.float32)
    if ftz:
        x = np.where(np.abs(x) < np.float32(2.0**-126), np.copysign(np.float32(0), x), x).astype(np.float32)
    v = x.astype(np.float64)
    f = _EXACT_FN[fn](v)
    kind, val = APPROX_BOUNDS[fn]
    ulp = np.maximum(2.0**-23 * np.abs(f), 2.0**-149)
    if kind == "ulp":  # from the exact value ("maximum ulp error is 1")
        b = val * ulp
    elif kind == "ulp_cr":  # from the correctly rounded result
        b = (val + 0.5) * ulp
    elif kind == "lg2":
        b = np.where((v > 0.5) & (v < 2.0), val, val * np.abs(f))
    else:
        b = val * np.abs(f)
    if ftz:
        b = b + np.where(np.abs(f) < 2.0**-126, 2.0**-126, 0.0)
    b = np.where(np.isfinite(f), b + 2.0**-45 * np.abs(f), 0.0)  # + the float64 reference's own error
    big = float(np.finfo(np.float32).max)
    return f, np.where(np.isfinite(f) & (np.abs(f) + b > big), np.inf, b)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in f32 steps between two arrays of f32 words (0 for two NaNs, inf for NaN vs
    number)."""
    def key(w):
        w = w.astype(np.int64)
        mag = w & 0x7FFFFFFF
        return np.where(w & 0x80000000, -mag, mag)

    fa, fb = a.view(np.float32), b.view(np.float32)
    d = np.abs(key(a) - key(b)).astype(np.float64)
    na, nb = np.isnan(fa), np.isnan(fb)
    return np.where(na & nb, 0.0, np.where(na | nb, np.inf, d))


@dataclass
class Result:
    name: str
    kind: str
    n: int
    identical: float  # fraction of outputs bit-identical GPU vs emulator (nan: no GPU run)
    max_ulp: float | None  # largest f32 distance GPU vs emulator (None: not an f32 output / no GPU)
    bound_units: float | None  # approx/math: max |GPU (or emulator) - exact| / bound
    bound_violations: int
    who: str  # "gpu" or "emulator": whose result bound_units measures
    error: str = ""
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.error:
            return False
        if self.kind == "exact":
            return not (self.identical < 1.0)  # nan (no GPU) counts as ok here
        return self.bound_violations == 0

    def row(self) -> str:
        ident = "-" if math.isnan(self.identical) else f"{100 * self.identical:.4g}%"
        ulp = "-" if self.max_ulp is None else ("inf" if math.isinf(self.max_ulp) else f"{self.max_ulp:.0f}")
        units = "-" if self.bound_units is None else f"{self.bound_units:.3f}"
        verdict = "ok" if self.ok else ("ERROR " + self.error if self.error else "FAIL")
        return f"| {self.name} | {self.kind} | {self.n} | {ident} | {ulp} | {units} | {verdict} |"


HEADER = ("| instruction | kind | inputs | bit-identical GPU vs emulator | max ulp GPU vs emulator | "
          "max error vs exact / bound | verdict |\n| --- | --- | --- | --- | --- | --- | --- |")


#: Inputs `--thin` leaves whole (the specials and random words come first; the sweeps after).
THIN_KEEP = 1 << 17


def prepare(p: Probe, seed: int = 0, thin: int = 1) -> tuple[str, list[np.ndarray], int, int]:
    """(PTX, kernel arguments, element count, grid) of a probe; inputs padded to whole blocks;
    `thin` keeps every thin-th input past the first THIN_KEEP (the sweeps), alike in every operand."""
    rng = np.random.default_rng(seed)
    ins = [np.ascontiguousarray(x.astype(_IO[t][2])) for x, t in zip(p.inputs(rng), p.ins)]
    if thin > 1:
        ins = [np.concatenate([x[:THIN_KEEP], x[THIN_KEEP::thin]]) for x in ins]
    n = ins[0].size
    total = -(-n // BLOCK) * BLOCK
    ins = [np.concatenate([x, np.resize(x, total - n)]) if total > n else x for x in ins]
    out = np.zeros(total, dtype=_IO[p.out][2])
    return kernel(p), [*ins, out], n, total // BLOCK


def _f32_outputs(p: Probe) -> bool:
    return p.out == "f32"


def evaluate(p: Probe, emu: np.ndarray, gpu: np.ndarray | None, args: list[np.ndarray], n: int) -> Result:
    """Compare the GPU's and the emulator's outputs, and check approx/math results against the
    exact function's bound (the GPU's when there is one, else the emulator's)."""
    emu, gpu = emu[:n], (None if gpu is None else gpu[:n])
    identical, max_ulp, examples = float("nan"), None, []
    if gpu is not None:
        same = emu == gpu
        identical = float(same.mean())
        if _f32_outputs(p):
            max_ulp = float(ulp_distance(emu, gpu).max()) if n else 0.0
        for i in np.flatnonzero(~same)[:6]:
            ins = ", ".join(f"{int(a[i]):#x}" for a in args[:-1])
            examples.append(f"in ({ins}): gpu {int(gpu[i]):#x} emulator {int(emu[i]):#x}")
    units, violations = None, 0
    if p.kind != "exact":
        got = (gpu if gpu is not None else emu).view(np.float32).astype(np.float64)
        x = args[0][:n].view(np.float32)
        if p.kind == "approx":
            f, b = isa_bound(p.fn, x, p.ftz)
        else:
            f, b = scalar_math.exact(p.fn, x), scalar_math.bound(p.fn, x)
        with np.errstate(invalid="ignore"):
            err = np.abs(got - f)
            special = b == 0
            bad_special = special & ~((got == f) | (np.isnan(got) & np.isnan(f)))
            finite = ~special & np.isfinite(b)
            ratio = np.where(finite, err / np.where(finite, b, 1.0), 0.0)
            ratio = np.where(np.isnan(ratio), np.inf, ratio)
        units = float(ratio.max()) if n else 0.0
        over = np.flatnonzero((ratio > 1.0) | bad_special)
        violations = int(over.size)
        for i in over[:6]:
            examples.append(f"x = {float(x[i])!r} ({int(args[0][i]):#x}): got {got[i]!r}, exact {f[i]!r}, "
                            f"bound {b[i]:.3g}")
    return Result(p.name, p.kind, n, identical, max_ulp, units, violations, "gpu" if gpu is not None else "emulator",
                  examples=examples)


def run_probe(p: Probe, gpu: bool, seed: int = 0, thin: int = 1) -> Result:
    text, args, n, grid = prepare(p, seed, thin)
    try:
        emu = emulate(text, ENTRY, (grid, 1, 1), (BLOCK, 1, 1), [a.copy() for a in args])[-1]
    except Exception as err:  # noqa: BLE001 - reported as the row's verdict
        return Result(p.name, p.kind, n, float("nan"), None, None, 0, "emulator", f"emulator: {err}")
    out = None
    if gpu:
        from tilemma.compiler.runtime import cuda_runtime

        try:
            out = cuda_runtime.run_kernel(text, ENTRY, (grid, 1, 1), (BLOCK, 1, 1), [a.copy() for a in args])[-1]
        except Exception as err:  # noqa: BLE001
            return Result(p.name, p.kind, n, float("nan"), None, None, 0, "gpu", f"gpu: {str(err)[:200]}")
    return evaluate(p, emu, out, args, n)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.epilogue_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="folder for epilogue_probe.json and epilogue_probe.md")
    ap.add_argument("--only", action="append", help="only probes whose name contains this (repeatable)")
    ap.add_argument("--emulator-only", action="store_true", help="no GPU: check the harness in the emulator")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--thin", type=int, default=1, metavar="N",
                    help=f"every N-th input past the first {THIN_KEEP} (the sweeps): a quicker check of the harness")
    args = ap.parse_args(argv)
    if args.thin < 1:
        ap.error("--thin must be 1 or more")
    gpu = not args.emulator_only
    if gpu:
        from tilemma.compiler.runtime import cuda_runtime

        if not cuda_runtime.gpu_available():
            print(f"no GPU ({cuda_runtime.gpu_unavailable_reason()}); use --emulator-only", file=sys.stderr)
            return 2
    probes = [p for p in PROBES if not args.only or any(s in p.name for s in args.only)]
    start = time.perf_counter()
    results = []
    print(HEADER)
    for p in probes:
        r = run_probe(p, gpu, args.seed, args.thin)
        results.append(r)
        print(r.row(), flush=True)
        for ex in r.examples if not r.ok else []:
            print(f"    {ex}")
    seconds = time.perf_counter() - start
    failed = [r.name for r in results if not r.ok]
    print(f"\n{len(results)} probes in {seconds:.1f} s; {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "epilogue_probe.md").write_text(HEADER + "\n" + "\n".join(r.row() for r in results) + "\n")
        (args.out / "epilogue_probe.json").write_text(json.dumps([r.__dict__ for r in results], indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
