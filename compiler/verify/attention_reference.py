"""The reference for attention kernels: O = softmax(scale Q K^T [causal]) V in float64, test data
that exercises it, and a per-element bound on what the FlashAttention-2 schedule may differ by.

The kernel's arithmetic (`passes/tile/attention.py`): S in f32 on the tensor cores, the running
max m exact, p_j = ex2.approx(fma(s_j, c, -m c)) with c = scale log2 e in f32, l = sum of p (f32, in
a fixed order, rescaled by alpha = ex2((m_old - m_new) c) per block, as O is), P rounded to the
operand type for P V (f32 accumulation), O (1 / l) rounded to the output type. Bound, first order,
for output (i, n), with W = sum_j P_ij |V_jn| (the true probabilities):

    |O' - O| <= W (2 rho + u_P + e_acc) + u_O |O| + tiny
    rho   = ln 2 (c (dS + dS_max) + 2^-24 (|s c| + |m c| + |s - m| c)) + 2^-22   (worst j of the row)
    dS_j  = (D + 2) 2^-22 sum_k |q_ik k_jk|     (f32 tensor-core accumulation of S)
    e_acc = (S + 2 B + 6) 2^-23                  (P V and l sums over S keys, B blocks of rescaling,
                                                 1 / l and the product)

u_P, u_O are the unit roundoffs of the operand and output types (2^-11 f16, 2^-8 bf16); `tiny`
covers P below f16's normals (2^-14; for bf16, below 2^-126, where ex2.approx.ftz flushes) and an
f16 O's subnormals: S 2^-25 max|V| + 2^-25 (bf16: S 2^-126 max|V|). The bound is doubled
against second-order terms. ex2.approx's 2 ulp is the ISA's figure (`scalar_math`).
"""

from __future__ import annotations

import math

import numpy as np

from tilemma.compiler.verify.reference import element_type

UNIT = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": 2.0**-24}
MIN_BLOCK_N = 32  # the smallest key block tile-attention takes


def attention_data(shape: tuple[int, int, int], element: str, rng: np.random.Generator) -> np.ndarray:
    """B x S x D values of `element` that are hard on a softmax: normal values with per-row
    magnitudes from 2^-6 to 2^3 (wide logits: near one-hot rows next to near-uniform ones), some
    rows and entries of exactly equal value (ties for the max, cancellation in S), f16 subnormals
    sprinkled in, never all zero."""
    b, s, d = shape
    dt = element_type(element).dtype
    mags = np.exp2(rng.uniform(-2.0, 1.0, size=shape))
    signs = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    row_scale = np.exp2(rng.integers(-6, 4, size=(b, s, 1)).astype(np.float64))
    x = signs * mags * row_scale
    tie = rng.random(size=(b, s)) < 0.05  # rows equal to their neighbour (equal logits)
    tie[:, 0] = False
    x[tie] = np.roll(x, 1, axis=1)[tie]
    sub = rng.random(size=shape) < 0.01
    x[sub] = signs[sub] * 2.0**-20  # an f16 subnormal (a bf16 normal)
    out = x.astype(dt)
    if not np.any(out.astype(np.float64)):
        out.flat[0] = dt.type(1.0)
    return out


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """(O, P) in float64: q B x L x D, k B x S x D, v B x S x Dv (values as stored)."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("bld,bsd->bls", q64, k64) * scale
    if causal:
        mask = np.triu(np.ones(s.shape[1:], bool), 1)
        s = np.where(mask, -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v64, p


def _unit(element: str, rounding: str | None) -> float:
    """The unit roundoff of a conversion to `element`: doubled for a directed rounding (rz)."""
    return UNIT[element] * (1 if rounding in (None, "rn", "rna") else 2)


def attention_bound(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool, element: str,
                    out_element: str, p_rounding: str | None = None,
                    o_rounding: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(O, bound): the reference and the per-element bound of the module docstring (`p_rounding`,
    `o_rounding`: the casts' roundings, round to nearest by default)."""
    o, p = attention_reference(q, k, v, scale, causal)
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    d, n = q.shape[-1], k.shape[1]
    c = scale * math.log2(math.e)
    s = np.einsum("bld,bsd->bls", q64, k64)
    ds = (d + 2) * 2.0**-22 * np.einsum("bld,bsd->bls", np.abs(q64), np.abs(k64))
    if causal:
        mask = np.triu(np.ones(s.shape[1:], bool), 1)
        s, ds = np.where(mask, -np.inf, s), np.where(mask, 0.0, ds)
    m = s.max(axis=-1, keepdims=True)
    seen = np.isfinite(s)
    spread = np.where(seen, (m - s) * c + np.abs(s) * c, 0.0) + np.abs(m) * c
    rho = math.log(2) * (c * (ds + ds.max(axis=-1, keepdims=True)) + 2.0**-24 * spread) + 2.0**-22
    rho = np.where(seen, rho, 0.0).max(axis=-1, keepdims=True)
    blocks = -(-n // MIN_BLOCK_N)  # the most rescalings any configuration makes
    e_acc = (n + 2 * blocks + 6) * 2.0**-23
    w = p @ np.abs(v64)
    flushed = 2.0**-25 if element == "f16" else 2.0**-126  # P below f16's normals, or flushed by ex2.ftz
    tiny = n * flushed * np.abs(v64).max(axis=1, keepdims=True) + (2.0**-25 if out_element == "f16" else 0.0)
    bound = 2 * (w * (2 * rho + _unit(element, p_rounding) + e_acc) + _unit(out_element, o_rounding) * np.abs(o) + tiny)
    return o, bound
