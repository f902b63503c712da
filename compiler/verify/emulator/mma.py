"""What an mma computes on raw registers, apart from any kernel: each variant's fragment
gather/scatter indices, its elements decoded from bits, and D from the GPU's own arithmetic
(`mma_arith`). `mma_semantics` and `mma_warps` are public (tests drive every variant through
them); the emulator's mma instruction runs on the same semantics."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from tilemma.compiler.core import isa
from tilemma.compiler.core.elements import BY_PTX
from tilemma.compiler.layouts import fragments, scale_fragments, sparse_fragments
from tilemma.compiler.verify import mma_arith
from tilemma.compiler.verify.emulator.machine import _UNSIGNED, EmulationError
from tilemma.compiler.verify.emulator.mma_block_scale import _BlockScale
from tilemma.compiler.verify.emulator.mma_sparse import _MetadataError, _SparseA


def _decode(bits: np.ndarray, t: str, elem_bits: int) -> np.ndarray:
    """Element values (float64, or int64 for integers) of raw element bit patterns; an fp6/fp4
    element in its 8-bit .kind::f8f6f4 container is read from its place there (the padding is
    ignored)."""
    e = BY_PTX[t]
    if not e.is_float:
        n = e.bits
        v = bits.astype(np.int64)
        if e.signed:
            v = np.where(v >= 1 << (n - 1), v - (1 << n), v)
        return v
    if t == "tf32":  # tensor cores read the f32 layout and ignore the low 13 bits
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    dt = e.dtype
    if e.container_shift is not None and elem_bits == 8:
        bits = (bits >> e.container_shift) & ((1 << e.bits) - 1)
    return bits.astype(_UNSIGNED[dt.itemsize]).view(dt).astype(np.float64)


def _encode(values: np.ndarray, t: str) -> np.ndarray:
    """Accumulator values (already of the accumulator's dtype) -> uint64 bit patterns."""
    if t == "s32":
        return values.astype(np.int32).view(np.uint32).astype(np.uint64)
    dt = BY_PTX[t].dtype
    return np.ascontiguousarray(values.astype(dt)).view(_UNSIGNED[dt.itemsize]).astype(np.uint64)


@dataclass(frozen=True)
class _Fragment:
    """One operand's registers <-> matrix elements, as flat gather/scatter indices.

    Matrix positions p = (group * rows + row) * cols + col, group being the quad-pair for m8n8k4
    .f16 (four independent products) and 0 otherwise; register words are numbered reg * 32 + lane.
    """

    lay: fragments.FragmentLayout
    groups: int
    src: np.ndarray  # [P]: word holding position p
    shift: np.ndarray  # [P]: bit offset of position p in its word
    dst: np.ndarray  # [regs, 32, per]: position of (reg, lane, slot)

    @property
    def regs(self) -> int:
        return self.lay.regs

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.groups, self.lay.rows, self.lay.cols

    def gather(self, words: np.ndarray) -> np.ndarray:
        """[W, regs*32] words -> [W, groups, rows, cols] element bit patterns (uint64)."""
        w = words.astype(np.uint64, copy=False)[:, self.src]
        if self.lay.elem_bits < 64:
            w = (w >> self.shift) & np.uint64((1 << self.lay.elem_bits) - 1)
        return w.reshape((words.shape[0],) + self.shape)

    def scatter(self, bits: np.ndarray) -> np.ndarray:
        """[W, groups, rows, cols] bit patterns (uint64) -> [W, regs, 32] register words."""
        flat = bits.reshape(bits.shape[0], -1)
        per = self.lay.elems_per_reg
        out = flat[:, self.dst[:, :, 0]]
        for s in range(1, per):
            out = out | (flat[:, self.dst[:, :, s]] << np.uint64(s * self.lay.elem_bits))
        return out.astype(self.lay.word_dtype)


def _fragment(shape: str, operand: str, elem_type: str, major: str | None, quad: bool) -> _Fragment:
    lay = fragments.layout(shape, operand, elem_type, major=major, view="quadpair" if quad else None)
    return _fragment_of(lay, quad)


def _fragment_of(lay: fragments.FragmentLayout, quad: bool = False) -> _Fragment:
    rows, cols = fragments.coords(lay)
    lane = np.arange(32)[:, None]
    group = ((lane >> 2) & 3) if quad else np.zeros_like(lane)
    groups = 4 if quad else 1
    p = (group * lay.rows + rows) * lay.cols + cols  # [32, nvals]
    count = np.bincount(p.ravel(), minlength=groups * lay.rows * lay.cols)
    if count.size != groups * lay.rows * lay.cols or not (count == 1).all():
        raise AssertionError(f"{lay}: fragment does not hold every element exactly once per product")
    per = lay.elems_per_reg
    v = np.arange(lay.nvals)[None, :]
    src = np.empty(count.size, dtype=np.int64)
    shift = np.empty(count.size, dtype=np.uint64)
    src[p] = (v // per) * 32 + lane
    shift[p] = (v % per) * lay.elem_bits
    dst = p.reshape(32, lay.regs, per).transpose(1, 0, 2).copy()
    return _Fragment(lay, groups, src, shift, dst)


def _mma_arith(v: isa.MmaVariant, a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str,
               kept: np.ndarray | None = None, scales: tuple | None = None) -> np.ndarray:
    """D = A @ B + C in D's dtype, the one copy of the arithmetic for dense, (decompressed) sparse
    and block-scaled mma: integers exact (wrapped or .satfinite), f64 a chain of IEEE fmas, the
    other floats as `arch`'s tensor cores add them (`mma_arith`); `kept` marks mma.sp's real
    products, `scales` = (SF_A per element of A, SF_B per element of B, scale type)."""
    if v.dtype == "s32":
        af, bf = a.astype(np.float64), b.astype(np.float64)  # |sums| < 2**25: exact in float64
        if v.bitop == "xor":  # popc(a ^ b) = popc(a) + popc(b) - 2 popc(a & b)
            prod = af.sum(-1)[..., :, None] + bf.sum(-2)[..., None, :] - 2.0 * (af @ bf)
        else:  # .and.popc, and plain integer products
            prod = af @ bf
        total = prod.astype(np.int64) + c
        if v.satfinite:
            return np.clip(total, -(2**31), 2**31 - 1)
        return (total + 2**31) % 2**32 - 2**31
    if v.dtype == "f64":
        return mma_arith.fma_chain(a, b, c, v.rounding)
    model = mma_arith.model_for(arch if v.supported_on(arch) else "sm_120a", v.atype, v.kind, v.shape)
    sa, sb, stype = scales if scales is not None else (None, None, None)
    return mma_arith.fused_mma(a, b, c, model, v.atype, v.btype, v.dtype, kept=kept,
                               scale_a=sa, scale_b=sb, stype=stype)


@dataclass(frozen=True)
class _MmaSemantics:
    """One mma variant: fragment codecs for a, b, c, d, the sparse A decoder where the variant
    is `mma.sp`, and the shared element arithmetic."""

    variant: isa.MmaVariant
    a: _Fragment
    b: _Fragment
    c: _Fragment
    d: _Fragment
    sparse: _SparseA | None = None
    scale: _BlockScale | None = None
    arch: str = mma_arith.DEFAULT_ARCH  # whose tensor-core arithmetic (`mma_arith.MODELS`)

    def __call__(self, a_words: np.ndarray, b_words: np.ndarray, c_words: np.ndarray,
                 e_words: np.ndarray | None = None, selector: int | None = None, *,
                 scale_a: np.ndarray | None = None, ids_a=None,
                 scale_b: np.ndarray | None = None, ids_b=None) -> np.ndarray:
        """[W, regs*32] words of a, b, c (for mma.sp also [W, 32] metadata words and the
        selector; for .block_scale [W, 32] scale words of A and B and their (byte_id, thread_id)
        selectors, one pair for all warps or [W, 2]) -> [W, regs, 32] words of d."""
        v = self.variant
        if (self.sparse is None) != (e_words is None and selector is None):
            raise EmulationError(f"{v.opcode}: the metadata words and selector are needed exactly for mma.sp")
        scaled = (scale_a, ids_a, scale_b, ids_b)
        if (self.scale is None) != all(x is None for x in scaled) or (self.scale and any(x is None for x in scaled)):
            raise EmulationError(f"{v.opcode}: the scale words and selectors of A and B are needed exactly "
                                 "for .block_scale")
        a = _decode(self.a.gather(a_words), v.atype, self.a.lay.elem_bits)
        kept = None
        if self.sparse is not None:
            kept = self.sparse.dense(np.ones_like(a), e_words, selector) != 0
            a = self.sparse.dense(a, e_words, selector)
        b = _decode(self.b.gather(b_words), v.btype, self.b.lay.elem_bits)
        c = _decode(self.c.gather(c_words), v.ctype, self.c.lay.elem_bits)
        scales = None
        if self.scale is not None:
            scales = self.scale.per_element(self.scale.factors("a", scale_a, ids_a),
                                            self.scale.factors("b", scale_b, ids_b))
        d = _mma_arith(v, a, b, c, self.arch, kept, scales)
        return self.d.scatter(_encode(d, v.dtype).reshape(d.shape))


@functools.cache
def mma_semantics(opcode: str, arch: str = mma_arith.DEFAULT_ARCH) -> _MmaSemantics:
    """The decoded semantics of an mma opcode from the ISA table (ValueError if undefined), with
    the floating-point arithmetic of the GPU `arch` (variants it lacks: sm_120a's)."""
    v = isa.parse_opcode(opcode)
    scale = None
    if v.block_scale:
        sv = scale_fragments.default_scale_vec(v.kind, v.scale_vec)
        scale = _BlockScale(sv, v.stype, v.k // scale_fragments.SCALE_VECS[sv].chunks)
    if v.sparse:
        sf = sparse_fragments
        return _MmaSemantics(
            v,
            _fragment_of(sf.compressed_a_layout(v.shape, v.atype)),
            _fragment_of(sf.b_layout(v.shape, v.btype)),
            _fragment_of(sf.accumulator_layout(v.shape, v.ctype)),
            _fragment_of(sf.accumulator_layout(v.shape, v.dtype)),
            _SparseA(sf.sparse_spec(v.shape, v.atype), v.shape, v.atype, v.sparse == "sp::ordered_metadata"),
            scale,
            arch,
        )
    quad = v.shape == "m8n8k4" and v.atype == "f16"
    frag = functools.partial(_fragment, v.shape)
    return _MmaSemantics(
        v,
        frag("a", v.atype, v.alayout, quad),
        frag("b", v.btype, v.blayout, quad),
        frag("c", v.ctype, None, quad),
        frag("d", v.dtype, None, quad),
        scale=scale,
        arch=arch,
    )


def mma_warps(opcode: str, a: np.ndarray, b: np.ndarray, c: np.ndarray,
              e: np.ndarray | None = None, selector: int | None = None, *,
              scale_a: np.ndarray | None = None, ids_a: tuple[int, int] | None = None,
              scale_b: np.ndarray | None = None, ids_b: tuple[int, int] | None = None,
              arch: str = mma_arith.DEFAULT_ARCH) -> np.ndarray:
    """Run one mma on raw registers: a, b, c are [W, 32, regs] (or [32, regs]) words per lane,
    as the fragment tables lay them out; for mma.sp also each lane's metadata word e ([W, 32] or
    [32]) and the sparsity selector; for .block_scale each lane's scale-a-data / scale-b-data
    word ([W, 32] or [32]) and the selectors (byte_id, thread_id) of each. Returns d the same way.
    The semantics `emulate` uses, with the arithmetic of the GPU `arch`."""
    sem = mma_semantics(opcode, arch)
    single = np.ndim(a) == 2

    def flat(x: np.ndarray, frag: _Fragment) -> np.ndarray:
        x = np.asarray(x)
        x = x[None] if x.ndim == 2 else x
        if x.shape[1:] != (32, frag.regs):
            raise ValueError(f"{opcode}: expected [W, 32, {frag.regs}] words, got {x.shape}")
        return x.astype(frag.lay.word_dtype).transpose(0, 2, 1).reshape(x.shape[0], -1)

    def lanes(x, what: str):
        if x is None:
            return None
        x = np.asarray(x)
        x = x[None] if x.ndim == 1 else x
        if x.shape != (args[0].shape[0], 32):
            raise ValueError(f"{opcode}: expected [W, 32] {what} words, got {x.shape}")
        return x.astype(np.uint32)

    args = [flat(a, sem.a), flat(b, sem.b), flat(c, sem.c)]
    if e is not None:
        args.append(lanes(e, "metadata"))
    try:
        d = sem(*args, selector=selector, scale_a=lanes(scale_a, "scale-a-data"), ids_a=ids_a,
                scale_b=lanes(scale_b, "scale-b-data"), ids_b=ids_b).transpose(0, 2, 1)
    except _MetadataError as err:
        raise EmulationError(f"{opcode}, warp {err.warp}: {err}") from None
    return d[0] if single else d
