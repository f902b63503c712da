"""The tensor cores' own floating-point arithmetic, bit for bit: what `mma` computes on a given GPU.

The PTX ISA leaves the order and rounding of an `mma`'s sums unspecified, so the emulator needs the
hardware's actual algorithm to give the GPU's bits. It is published (MMA-Sim, arXiv 2511.10909;
Khattak & Mikaitis, arXiv 2512.07004) and is one algorithm with a few parameters per architecture
(`MODELS`). For each output element the products are taken in groups of `group` consecutive kept
products (chained through the rounded accumulator, C joining the first group):

1. every product is exact and is not renormalized: its significand is sig_a * sig_b (in [0, 4))
   and its alignment exponent e_a + e_b (+ the block scales' exponents); an input's exponent is
   max(floor(log2 |x|), emin of its type), zero counting as exponent -126;
2. C and the group's products are aligned to the largest of their exponents and each term is
   truncated toward zero to `frac_bits` fraction bits of that alignment;
3. the truncated terms are summed exactly and the sum is normalized once: truncated (RZ) to an
   f32 (to `out_frac` fraction bits), or rounded to nearest even for an f16 accumulator; a zero
   result, exact or rounded, is +0;
4. NaN (any NaN input, Inf - Inf, 0 x Inf) gives the canonical NaN (0x7FFFFFFF, f16 0x7FFF), a
   surviving Inf its signed Inf, found from an f64 shadow sum before the alignment.

f64 is a chain of IEEE fmas in k order (`fma_chain`, honouring .rn/.rz/.rm/.rp); integers are
exact (the emulator's own path). Parameters marked `measured` were proved here bit-exact against
an H100 on adversarial recordings (tests/data/mma_arith); the others are taken from the papers
and no GPU here can confirm them.

`round_tf32` (`cvt.{rna,rn,rz}.tf32.f32`, how f32 values become tf32 operands) lives here too, so
the emulator's `cvt` and the NumPy reference share one copy of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tilemma.compiler.core.elements import BY_PTX, FP8, ptx_names

__all__ = ["MODELS", "Model", "model_for", "proven", "fused_mma", "fma_chain", "round_tf32", "DEFAULT_ARCH"]

DEFAULT_ARCH = "sm_90"  # the GPU the emulator imitates unless told otherwise (ours: H100/H200)

_FP8 = ptx_names(FP8)  # e4m3, e5m2: one family ("fp8") of mma.sync without .kind
_ZERO_EXP = -126  # the exponent a zero input aligns with
_CANONICAL_NAN = {"f32": (np.uint32(0x7FFFFFFF), np.float32), "f16": (np.uint16(0x7FFF), np.float16)}


@dataclass(frozen=True)
class Model:
    """One architecture's arithmetic for one operand family (the algorithm of the docstring)."""

    frac_bits: int  # F: fraction bits kept of each aligned term
    group: int  # products per fused sum; an instruction with more chains its groups
    measured: bool  # proved bit-exact here on an H100 (else: published, not confirmed here)
    source: str
    out_frac: int = 23  # fraction bits an f32 result keeps (Ada fp8: 13, "e8m13")
    as_type: str | None = None  # inputs converted to this type first (Hopper fp8 -> f16)
    sub_block: int = 0  # mxf4 kinds: products summed exactly in blocks of this many, then scaled
    software: bool = False  # not a tensor-core op there: ptxas emits FFMA/FADD (`_m8n8k4_ffma`)
    halves: bool = False  # ptxas: two mmas from zero over each register's halves, then D = C + sum


_MMASIM, _KHATTAK = "MMA-Sim arXiv 2511.10909", "Khattak & Mikaitis arXiv 2512.07004"
# (arch, family) -> Model. Families: f16, bf16, tf32, fp8 (e4m3/e5m2 mma.sync), f8f6f4 (.kind),
# mxf8f6f4 and mxf4 (block-scaled). An f16 accumulator rounds to nearest even on every arch.
MODELS: dict[tuple[str, str], Model] = {
    ("sm_70", "f16"): Model(23, 4, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_80", "f16"): Model(24, 8, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_80", "bf16"): Model(24, 8, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_80", "tf32"): Model(24, 4, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_89", "f16"): Model(24, 8, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_89", "bf16"): Model(24, 8, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_89", "tf32"): Model(24, 4, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_89", "fp8"): Model(13, 16, False, f"{_MMASIM}; {_KHATTAK}", out_frac=13),
    ("sm_90", "f16"): Model(25, 16, True, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_90", "bf16"): Model(25, 16, True, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_90", "tf32"): Model(25, 8, True, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_90", "fp8"): Model(25, 16, True, "measured: ptxas 13.0 SASS for sm_90; " + _KHATTAK, as_type="f16",
                            halves=True),
    ("sm_90", "f16/m8n8k4"): Model(0, 4, True, "measured: ptxas 13.0 SASS for sm_90", software=True),
    ("sm_100", "f16"): Model(25, 16, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_100", "bf16"): Model(25, 16, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_100", "tf32"): Model(25, 8, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_120", "f16"): Model(25, 16, False, _MMASIM),
    ("sm_120", "bf16"): Model(25, 16, False, _MMASIM),
    ("sm_120", "tf32"): Model(25, 8, False, _MMASIM),
    ("sm_120", "fp8"): Model(25, 32, False, _MMASIM),
    ("sm_120", "f8f6f4"): Model(25, 32, False, f"{_MMASIM}; {_KHATTAK}"),
    ("sm_120", "mxf8f6f4"): Model(25, 32, False, _MMASIM),
    ("sm_120", "mxf4"): Model(35, 64, False, _MMASIM, sub_block=16),
}


def family(atype: str, kind: str | None) -> str:
    """The MODELS family of an mma's multiplicand type and .kind."""
    if kind in ("mxf4", "mxf4nvf4"):
        return "mxf4"
    if kind in ("f8f6f4", "mxf8f6f4"):
        return kind
    return "fp8" if atype in _FP8 else atype


def model_for(arch: str, atype: str, kind: str | None = None, shape: str = "") -> Model:
    """The model of `arch` (sm_120a counts as sm_120) for this family; ValueError if none."""
    base = arch.rstrip("af")
    key = (base, family(atype, kind))
    if (base, f"{key[1]}/{shape}") in MODELS:
        return MODELS[(base, f"{key[1]}/{shape}")]
    if key not in MODELS:
        known = sorted({a for a, f in MODELS if f == key[1]})
        raise ValueError(f"no tensor-core arithmetic model for {key[1]} on {arch} (known: {', '.join(known)})")
    return MODELS[key]


# Where the rest of the arithmetic was proved bit-exact on a GPU here: integer mma and f64 (an
# IEEE fma chain, NaNs as `_nan_of` says) on sm_90.
_EXACT_PROVEN = ("sm_90",)


def proven(arch: str, atype: str, dtype: str, kind: str | None = None, shape: str = "") -> bool:
    """Whether the emulator's arithmetic for this mma was proved equal to `arch`'s, word for word."""
    base = arch.rstrip("af")
    if dtype in ("s32", "f64"):
        return base in _EXACT_PROVEN
    try:
        return model_for(base, atype, kind, shape).measured
    except ValueError:
        return False


def round_tf32(x_f32, mode: str = "rna") -> np.ndarray:
    """f32 -> tf32 as `cvt.<mode>.tf32.f32`, returned as float32 with the low 13 mantissa bits zero.

    "rna": to nearest, ties away from zero (what `cvt.rna.tf32.f32` does; adding half an ulp to the
    magnitude bits and truncating rounds ties away because the sign is separate). "rn": ties to even.
    "rz": truncation. Carries into the exponent are correct by construction (the largest values round
    to infinity under rna/rn). NaN stays NaN under rn and rz; under rna as sm_90's `cvt.rna` leaves it
    (ptxas: the half ulp added to a word whose magnitude is below infinity, then the low 13 bits
    masked off), so that a NaN whose payload lies in the low 13 bits alone becomes an infinity
    (tests/gpu/test_tf32_for_mma_gpu.py). "trunc": no conversion, the f32 as the tensor cores read
    it (the low 13 bits dropped: rz, but that NaN becomes an infinity too).
    """
    arr = np.ascontiguousarray(np.asarray(x_f32, dtype=np.float32))
    bits = arr.view(np.uint32)
    sign = bits & np.uint32(0x80000000)
    mag = bits & np.uint32(0x7FFFFFFF)
    nan = mag > np.uint32(0x7F800000)
    keep = np.uint32(0xFFFFE000)
    if mode == "rna":
        mag = np.where(nan, mag, mag + np.uint32(0x1000)) & keep
    elif mode == "rn":
        odd = (mag >> np.uint32(13)) & np.uint32(1)
        mag = (mag + np.uint32(0x0FFF) + odd) & keep
    elif mode in ("rz", "trunc"):
        mag = mag & keep
    else:
        raise ValueError(f"tf32 rounding mode must be 'rna', 'rn', 'rz' or 'trunc', not {mode!r}")
    if mode in ("rn", "rz"):
        mag = np.where(nan, np.uint32(0x7FFFE000), mag)
    return (sign | mag).astype(np.uint32).view(np.float32)


def _emin(t: str) -> int:
    """Smallest exponent of an input type, by PTX name (subnormals are kept, with this exponent)."""
    emin = BY_PTX[t].emin
    assert emin is not None, t
    return emin


def _sig_exp(x: np.ndarray, emin: int) -> tuple[np.ndarray, np.ndarray]:
    """(significand, exponent) of finite values with x = sig * 2**exp exactly: exp is
    max(floor(log2|x|), emin) (so subnormals have sig < 1), zero has exponent _ZERO_EXP."""
    m, e = np.frexp(x)
    e = e.astype(np.int64) - 1
    e = np.maximum(e, emin)
    sig = np.ldexp(x, -e)  # exact: a power-of-two scaling of a finite double
    return sig, np.where(x == 0, _ZERO_EXP, e)


def _round_f32(v: np.ndarray, out_frac: int) -> np.ndarray:
    """Finite float64 values truncated (toward zero) to f32 with `out_frac` fraction bits."""
    tiny = np.abs(v) < 2.0**-126
    sub = np.ldexp(np.trunc(np.ldexp(v, 126 + out_frac)), -126 - out_frac)
    bits = v.view(np.uint64) & ~np.uint64((1 << (52 - out_frac)) - 1)
    with np.errstate(over="ignore"):
        return np.where(tiny, sub, bits.view(np.float64)).astype(np.float32)


@np.errstate(invalid="ignore", over="ignore")
def fused_mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, model: Model, atype: str, btype: str,
              dtype: str, *, kept: np.ndarray | None = None, scale_a: np.ndarray | None = None,
              scale_b: np.ndarray | None = None, stype: str | None = None) -> np.ndarray:
    """D = A B + C as the tensor cores compute it: a [..., M, K], b [..., K, N], c [..., M, N]
    element values (float64); `kept` [..., M, K] marks the products mma.sp really has (the others
    take no part, not even in the alignment); `scale_a` [..., M, K] / `scale_b` [..., K, N] are the
    block-scale factors of each element. Returns D in D's dtype (f32 or f16), NaNs canonical."""
    if model.software:
        return _m8n8k4_ffma(a, b, c, dtype)
    if model.halves:
        return _halves(a, b, c, model, atype, btype, dtype, kept)
    if model.as_type:  # fp8 -> f16 is exact: only the exponent range (emin) changes
        atype = btype = model.as_type
    k = a.shape[-1]
    dense = kept is None
    if kept is None:
        kept = np.ones(a.shape, bool)
    sa, ea = _sig_exp(np.where(np.isfinite(a), a, 0.0), _emin(atype))
    sb, eb = _sig_exp(np.where(np.isfinite(b), b, 0.0), _emin(btype))
    if scale_a is not None:  # scales join the exponents (their significands the product)
        ssa, esa = _sig_exp(scale_a, _emin(stype))
        ssb, esb = _sig_exp(scale_b, _emin(stype))
        sa, ea, sb, eb = sa * ssa, ea + esa, sb * ssb, eb + esb
    sbt, ebt = np.swapaxes(sb, -1, -2)[..., None, :, :], np.swapaxes(eb, -1, -2)[..., None, :, :]
    kept_positions = int(kept[(0,) * (kept.ndim - 1)].sum()) or k  # kept products per row
    span = k * model.group // kept_positions  # k positions per group of `group` kept products
    bt = np.swapaxes(b, -1, -2)[..., None, :, :]
    av, bvt = a, bt  # the values the shadow sum multiplies (scaled where scales are given)
    if scale_a is not None:
        av, bvt = a * scale_a, np.swapaxes(b * scale_b, -1, -2)[..., None, :, :]
    acc = c.astype(np.float64)
    out_type = _CANONICAL_NAN[dtype][1]
    # The float64 shadow sum is D only where it is not finite. With finite inputs whose products
    # summed are far inside float64's range it is finite everywhere, so it is not computed.
    products = float(np.abs(av).max(initial=0.0)) * float(np.abs(bvt).max(initial=0.0)) * span
    finite_inputs = bool(np.isfinite(av).all() and np.isfinite(bvt).all())
    for g0 in range(0, k, span):
        ks = slice(g0, min(k, g0 + span))
        live = kept[..., :, None, ks]
        if dense:  # every product takes part (the where of the sparse case would keep them all)
            p_sig, p_exp = sa[..., :, None, ks] * sbt[..., ks], ea[..., :, None, ks] + ebt[..., ks]
        else:
            p_sig = np.where(live, sa[..., :, None, ks] * sbt[..., ks], 0.0)
            p_exp = np.where(live, ea[..., :, None, ks] + ebt[..., ks], -(1 << 20))
        if model.sub_block:  # mxf4: exact sums of sub-blocks, each aligned at its scale exponent
            p_sig, p_exp = _sub_blocks(a[..., :, None, ks] * bt[..., ks], scale_a, scale_b, ks, stype,
                                       model.sub_block)
        shadow = None
        if not (finite_inputs and np.isfinite(acc).all() and products + float(np.abs(acc).max(initial=0.0)) < 2.0**1000):
            shadow = np.where(live, av[..., :, None, ks] * bvt[..., ks], 0.0).sum(-1) + acc
        c_sig, c_exp = _sig_exp(np.where(np.isfinite(acc), acc, 0.0), _emin(dtype))
        eta = np.maximum(p_exp.max(-1), c_exp)
        f = model.frac_bits
        terms = np.trunc(np.ldexp(p_sig, f + p_exp - eta[..., None])).sum(-1)
        total = terms + np.trunc(np.ldexp(c_sig, f + c_exp - eta))
        value = np.ldexp(total, eta - f)
        if dtype == "f32":
            rounded = _round_f32(value, model.out_frac).astype(np.float64)
        else:
            rounded = value.astype(np.float16).astype(np.float64)
        rounded = rounded + 0.0  # a zero sum, or one rounded away to zero, is +0
        acc = rounded if shadow is None else np.where(np.isfinite(shadow), rounded, shadow)
    out = acc.astype(out_type)
    nan_word, _ = _CANONICAL_NAN[dtype]
    out.view(nan_word.dtype)[np.isnan(acc)] = nan_word
    return out


def _halves(a, b, c, model: Model, atype: str, btype: str, dtype: str, kept) -> np.ndarray:
    """fp8 `mma.sync` on sm_90 as ptxas 13.0 emits it (SASS, checked on an H100): each 32-bit
    register of four fp8 is unpacked into two f16 pairs; one f16 HMMA from a zero accumulator takes
    the low pairs (kept products j with j % 4 < 2, j counting the kept ones), a second continues
    with the high pairs, and C is added last by an FADD (f32, nearest) or HADD2 (f16)."""
    if kept is None:
        kept = np.ones(a.shape, bool)
    j = np.cumsum(kept, -1) - 1
    low = kept & (j % 4 < 2)
    inner = Model(model.frac_bits, a.shape[-1], model.measured, model.source, as_type=model.as_type)
    acc = fused_mma(a, b, np.zeros(c.shape), inner, atype, btype, dtype, kept=low)
    acc = fused_mma(a, b, acc.astype(np.float64), inner, atype, btype, dtype, kept=kept & ~low)
    with np.errstate(invalid="ignore", over="ignore"):
        if dtype == "f32":
            d = _fadd32(c.astype(np.float64), acc.astype(np.float64))
        else:
            d = (c.astype(np.float64) + acc.astype(np.float64)).astype(np.float16).astype(np.float64)
    nan_word, out_type = _CANONICAL_NAN[dtype]
    out = d.astype(out_type)
    out.view(nan_word.dtype)[np.isnan(d)] = nan_word
    return out


def _rn32(t: np.ndarray, err: np.ndarray) -> np.ndarray:
    """The f32 nearest (ties to even) to the exact t + err, t being its float64 rounding."""
    r = t.astype(np.float32)
    other = np.nextafter(r, np.where(r.astype(np.float64) < t, np.inf, -np.inf).astype(np.float32))
    tie = np.abs(other.astype(np.float64) - t) == np.abs(r.astype(np.float64) - t)
    toward = np.sign(other.astype(np.float64) - t) == np.sign(err)
    return np.where(tie & (err != 0) & toward & np.isfinite(t), other, r)


def _fadd32(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """RN f32 of x + y (any float64 operands whose exact sum TwoSum captures)."""
    s = x + y
    z = s - x
    return _rn32(s, np.where(np.isfinite(s), (x - (s - z)) + (y - z), 0.0)).astype(np.float64)


@np.errstate(invalid="ignore", over="ignore")
def _m8n8k4_ffma(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: str) -> np.ndarray:
    """m8n8k4 .f16 on sm_90, as ptxas 13.0 emits it (read off its SASS, checked on an H100): f32
    FFMAs on the f16 inputs. An f32 D: s = 0, s = fma(a_k, b_k, s) for k = 0..3, D = C + s. An
    f16 D: the pairs p = fma(a_1, b_1, a_0 b_0) and q = fma(a_3, b_3, a_2 b_2), D = f16(C + p + q)
    added left to right in f32. (f16 x f16 products are exact in float64 and f32.)"""
    p = a[..., :, None, :] * np.swapaxes(b, -1, -2)[..., None, :, :]  # [..., M, N, 4], exact
    c = c.astype(np.float64)
    if dtype == "f32":
        s = np.zeros(c.shape)
        for k in range(4):
            s = _fadd32(p[..., k], s)
        d = _fadd32(c, s)
    else:
        first, second = _fadd32(p[..., 1], p[..., 0]), _fadd32(p[..., 3], p[..., 2])
        d = _fadd32(_fadd32(c, first), second)
    nan_word, out_type = _CANONICAL_NAN[dtype]
    out = d.astype(np.float32).astype(out_type)
    out.view(nan_word.dtype)[np.isnan(d)] = nan_word
    return out


def _sub_blocks(products, scale_a, scale_b, ks: slice, stype: str, block: int):
    """(significand, exponent) of each run of `block` products: their exact sum (fp4 x fp4 sums
    are exact in float64) times the scales' significands, aligned at the scales' exponents only
    (the sum is not renormalized)."""
    shape = products.shape[:-1] + (-1, block)
    total = products.reshape(shape).sum(-1)
    ssa, esa = _sig_exp(scale_a[..., :, None, ks][..., ::block], _emin(stype))
    ssb, esb = _sig_exp(np.swapaxes(scale_b, -1, -2)[..., None, :, ks][..., ::block], _emin(stype))
    return total * ssa * ssb, esa + esb


# ---------------------------------------------------------------------------------------------
# f64: a chain of IEEE fmas in k order
# ---------------------------------------------------------------------------------------------
def _two_sum(x, y):
    s = x + y
    z = s - x
    return s, (x - (s - z)) + (y - z)


def _two_prod(x, y):
    p = x * y
    c = 134217729.0 * x  # Veltkamp split into two 26-bit halves
    xh = c - (c - x)
    c = 134217729.0 * y
    yh = c - (c - y)
    xl, yl = x - xh, y - yh
    return p, xl * yl - (((p - xh * yh) - xl * yh) - xh * yl)


def _toward(x, err, rounding: str):
    """Round-to-nearest `x` with the sign of its error `err` (exact value = x + err), rounded
    instead by `rounding` (.rn/.rz/.rm/.rp)."""
    if rounding == "rn":
        return x
    if rounding == "rz":
        step = (err != 0) & (np.sign(err) != np.sign(x))
        return np.where(step, np.nextafter(x, 0.0), x)
    if rounding == "rm":
        return np.where(err < 0, np.nextafter(x, -np.inf), x)
    return np.where(err > 0, np.nextafter(x, np.inf), x)


def _odd(x, err):
    """Round to odd of the exact value x + err, given its round-to-nearest x."""
    rz = np.where((err != 0) & (np.sign(err) != np.sign(x)), np.nextafter(x, 0.0), x)
    even = (rz.view(np.uint64) & np.uint64(1)) == 0
    away = np.nextafter(rz, np.where(rz < 0, -np.inf, np.inf) * np.where(x == 0, np.sign(err), 1.0))
    return np.where((err != 0) & even, away, rz)


def _fma_exact(a: float, b: float, c: float, rounding: str) -> float:
    """One fma from exact rationals (the slow path: Inf/NaN, and near under- or overflow)."""
    if not (np.isfinite(a) and np.isfinite(b)):
        return float(np.float64(a) * np.float64(b) + np.float64(c))
    if not np.isfinite(c):  # the exact product is finite, however large
        return c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        near = float(exact)  # int / int true division rounds to nearest even
    except OverflowError:
        near = float("inf") if exact > 0 else float("-inf")
    if exact == 0:  # IEEE: zeros of one sign keep it; an exact cancellation is +0 (-0 under .rm)
        p_neg = bool(np.signbit(a) != np.signbit(b))
        if (a == 0 or b == 0) and c == 0 and p_neg == bool(np.signbit(c)):
            return -0.0 if p_neg else 0.0
        return -0.0 if rounding == "rm" else 0.0
    if not np.isfinite(near):
        big = np.finfo(np.float64).max
        keep = {"rn": True, "rz": False, "rm": exact < 0, "rp": exact > 0}[rounding]
        return near if keep else (big if exact > 0 else -big)
    err = exact - Fraction(near)  # only its sign matters (its value may underflow)
    return float(_toward(np.float64(near), np.float64((err > 0) - (err < 0)), rounding))


_QUIET = np.uint64(1 << 51)
NAN_PRIORITY = "bca"
DEFAULT_NAN = np.uint64(0xFFF8000000000000)


def _nan_of(x, y, z):
    """The NaN an fma(x, y, z) gives: an operand's NaN, quieted (sign and payload kept), the
    multiplicands' first; else (Inf - Inf, 0 x Inf) the default NaN."""
    out = np.full(np.shape(z), DEFAULT_NAN)
    ops = dict(zip("abc", (x, y, z)))
    for name in reversed(NAN_PRIORITY):
        v = ops[name]
        out = np.where(np.isnan(v), v.view(np.uint64) | _QUIET, out)
    return out.view(np.float64)


def _plain_step(x, y, acc, ex, ey, new) -> bool:
    """Whether no element of an fma step needs `fma_chain`'s special cases, by bounds on whole rows
    and columns (sufficient, not necessary: a step that fails the test takes the full path):
    everything finite and nonzero, no product below a quarter ulp of the accumulator
    (|x y| >= 2**(ex + ey - 2) against ulp(acc) / 4 <= 2**(ea - 55)), none near overflow or
    underflow (the slow path's thresholds), no exact zero result."""
    if not (np.isfinite(x).all() and np.isfinite(y).all() and np.isfinite(acc).all()):
        return False
    if not (x.all() and y.all() and acc.all()):
        return False
    lo = int(ex.min()) + int(ey.min())  # every product's exponent is at least lo - 2 (|v| >= 2**(e-1))
    hi = int(ex.max()) + int(ey.max())
    ea = int(np.frexp(np.abs(acc).max())[1])
    return (lo > max(ea - 53, -1074) - 2 and lo >= -958 and hi < 1000 and ea <= 1000
            and bool(new.all()) and bool(np.isfinite(new).all()))


@np.errstate(invalid="ignore", over="ignore", under="ignore")
def fma_chain(a: np.ndarray, b: np.ndarray, c: np.ndarray, rounding: str | None = None) -> np.ndarray:
    """D = fma(a[:, K-1], b[K-1], ... fma(a[:, 0], b[0], c)) elementwise in IEEE f64 with the
    rounding mode of every step (.rn default); NaNs as measured (`_nan_of`). Fast path: TwoProd /
    TwoSum with a round-to-odd middle sum (Boldo & Melquiond's FMA emulation); then, vectorized,
    the cases it cannot do: non-finite operands, products below a quarter ulp of the accumulator,
    products that overflow whatever is added, exact zeros. What is left (near the overflow or
    underflow threshold) goes through exact rationals."""
    rounding = rounding or "rn"
    big = np.finfo(np.float64).max
    acc = np.array(c, dtype=np.float64, copy=True)
    for k in range(a.shape[-1]):
        # a column of A and a row of B, broadcast by the arithmetic (what depends on one of them
        # alone - its split, exponent, sign - is computed once per row or column)
        x = np.asarray(a[..., :, k, None], dtype=np.float64)
        y = np.asarray(b[..., k, None, :], dtype=np.float64)
        ph, pl = _two_prod(x, y)
        th, tl = _two_sum(acc, ph)
        v, ve = _two_sum(tl, pl)
        s, se = _two_sum(th, _odd(v, ve))
        new = _toward(s, se, rounding)
        ex, ey = np.frexp(x)[1], np.frexp(y)[1]
        if _plain_step(x, y, acc, ex, ey, new):
            acc = new
            continue
        finite = np.isfinite(x) & np.isfinite(y)
        ea = np.where(acc == 0, -2000, np.frexp(acc)[1])  # |v| < 2**e
        sign = np.where(np.signbit(x) != np.signbit(y), -1.0, 1.0)
        nonzero = finite & (x != 0) & (y != 0)
        # products below a quarter ulp of a finite accumulator only steer its rounding
        negligible = nonzero & np.isfinite(acc) & (ex + ey <= np.maximum(ea - 53, -1074) - 2)
        lone = {"rn": 0.0, "rz": 0.0, "rm": np.where(sign < 0, -5e-324, 0.0), "rp": np.where(sign > 0, 5e-324, 0.0)}
        small = np.where(acc != 0, _toward(acc, sign, rounding), np.copysign(lone[rounding], sign))
        # products of 2**1025 or more overflow, whatever finite accumulator is added
        high = {"rn": np.inf, "rz": big, "rm": np.where(sign < 0, np.inf, big), "rp": np.where(sign > 0, np.inf, big)}
        huge = nonzero & np.isfinite(acc) & (ex + ey >= 1027)
        zero = finite & np.isfinite(acc) & ~negligible & (new == 0)  # IEEE's signed zeros
        both = (x == 0) | (y == 0)
        zero_sign = np.where(both & (acc == 0) & ((sign < 0) == np.signbit(acc)), sign < 0, rounding == "rm")
        new = np.where(negligible, small, new)
        new = np.where(huge, sign * high[rounding], new)
        new = np.where(zero, np.where(zero_sign, -0.0, 0.0), new)
        new = np.where(~finite, x * y + acc, np.where(finite & ~np.isfinite(acc), acc, new))
        plain = finite & np.isfinite(acc) & ~negligible & ~huge & ~zero
        mag = np.maximum(np.abs(x * y), np.abs(acc))
        slow = plain & (~np.isfinite(new) | ~np.isfinite(mag) | (mag > 2.0**1000) | (ex + ey < -958))
        if slow.any():
            xs, ys = np.broadcast_to(x, acc.shape), np.broadcast_to(y, acc.shape)
            for i in zip(*np.nonzero(slow)):
                new[i] = _fma_exact(float(xs[i]), float(ys[i]), float(acc[i]), rounding)
        nan = np.isnan(new)
        if nan.any():
            new = np.where(nan, _nan_of(np.broadcast_to(x, acc.shape), np.broadcast_to(y, acc.shape), acc), new)
        acc = new
    return acc
