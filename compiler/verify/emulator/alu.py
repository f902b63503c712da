"""Register-to-register instructions (mov, integer and IEEE arithmetic, bit fields, popc,
comparisons, selp, cvt, cvta): each decoder checks its qualifiers once and returns a closure
that computes on whole register rows."""

from __future__ import annotations

import numpy as np
from tilemma.compiler.verify import mma_arith
from tilemma.compiler.verify.emulator.machine import (
    _FLOAT_TYPES, _IEEE_ARITH, _INT_TYPES, _OFFSET_MASK, _SHARED_SPACE, _SIGNED, _SPACE_SHIFT, _TYPES, _UNSIGNED,
    EmulationError, _per_thread,
)
from tilemma.compiler.verify.emulator.operands import Fn, _Imm, _imm_scalar, _Reg, _one, _reader, _writer


def _dec_mov(d, op, mods, args, where) -> Fn:
    if len(mods) != 1 or mods[0] not in _TYPES:
        raise EmulationError(f"{where}: expected mov.TYPE")
    dst, src = _one(d, op, args, 2, where)
    read, write = _reader(d, src, mods[0], where), _writer(dst, where)
    return lambda m, mask: write(m, read(m), mask)


_BINARY = {
    "add": np.add, "sub": np.subtract, "min": np.minimum, "max": np.maximum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}  # fmt: skip


def _dec_binary(d, op, mods, args, where) -> Fn:
    head = op.opcode.data.split(".")[0]
    rounding = mods[:-1]
    t = mods[-1] if mods else ""
    if t not in _TYPES or any(r != "rn" for r in rounding) or (rounding and t not in _FLOAT_TYPES):
        raise EmulationError(f"{where}: only {head}.TYPE (and .rn for floats) is supported")
    if head in ("and", "or", "xor") and t not in ("pred", "b16", "b32", "b64"):
        raise EmulationError(f"{where}: {head} needs .pred or .bN")
    if head in ("add", "sub", "min", "max") and t not in _INT_TYPES | _IEEE_ARITH:
        raise EmulationError(f"{where}: {head}.{t} is not supported")
    if head in ("min", "max") and t in _FLOAT_TYPES:
        raise EmulationError(f"{where}: float {head} (NaN rules) is not supported by the emulator")
    dst, a, b = _one(d, op, args, 3, where)
    ra, rb, write, f = _reader(d, a, t, where), _reader(d, b, t, where), _writer(dst, where), _BINARY[head]
    if t == "pred" and head == "and":
        f = np.logical_and
    elif t == "pred" and head == "or":
        f = np.logical_or
    elif t == "pred" and head == "xor":
        f = np.logical_xor
    return lambda m, mask: write(m, f(ra(m), rb(m)), mask)


def _dec_not(d, op, mods, args, where) -> Fn:
    if len(mods) != 1 or mods[0] not in ("pred", "b16", "b32", "b64"):
        raise EmulationError(f"{where}: expected not.pred or not.bN")
    dst, a = _one(d, op, args, 2, where)
    ra, write = _reader(d, a, mods[0], where), _writer(dst, where)
    f = np.logical_not if mods[0] == "pred" else np.invert
    return lambda m, mask: write(m, f(ra(m)), mask)


def _widen(t: str) -> np.dtype:
    dt = _TYPES[t]
    return (_SIGNED if dt.kind == "i" else _UNSIGNED)[dt.itemsize * 2]


def _dec_mul_mad(d, op, mods, args, where) -> Fn:
    head = op.opcode.data.split(".")[0]
    n = 3 if head == "mul" else 4
    t = mods[-1] if mods else ""
    mode = mods[0] if len(mods) == 2 else None
    if t in _IEEE_ARITH and head == "mul" and mode in (None, "rn"):
        dst, a, b = _one(d, op, args, 3, where)
        ra, rb, write = _reader(d, a, t, where), _reader(d, b, t, where), _writer(dst, where)
        return lambda m, mask: write(m, np.multiply(ra(m), rb(m)), mask)
    if t not in _INT_TYPES or t.startswith("b") or mode not in ("lo", "hi", "wide") or len(mods) != 2:
        raise EmulationError(f"{where}: expected {head}.lo/.hi/.wide with an integer type")
    ops = _one(d, op, args, n, where)
    dst, srcs = ops[0], ops[1:]
    dt = _TYPES[t]
    if mode in ("hi", "wide") and dt.itemsize == 8:
        raise EmulationError(f"{where}: 128-bit products (.{mode} on 64-bit types) are not supported")
    ra, rb = _reader(d, srcs[0], t, where), _reader(d, srcs[1], t, where)
    wide = _widen(t) if mode != "lo" else None
    rc = None
    if head == "mad":
        ctype = ("s" if dt.kind == "i" else "u") + str(wide.itemsize * 8) if mode == "wide" else t
        rc = _reader(d, srcs[2], ctype, where)
    write = _writer(dst, where)
    bits = dt.itemsize * 8

    def run(m, mask):
        a, b = ra(m), rb(m)
        if mode == "lo":
            p = np.multiply(a, b, dtype=dt)
        else:
            p = np.multiply(np.asarray(a).astype(wide), np.asarray(b).astype(wide))
            if mode == "hi":
                p = (p >> bits).astype(dt)
        if rc is not None:
            p = np.add(p, rc(m), dtype=p.dtype)
        write(m, p, mask)

    return run


def _dec_div_rem(d, op, mods, args, where) -> Fn:
    head = op.opcode.data.split(".")[0]
    if len(mods) != 1 or mods[0] not in _INT_TYPES or mods[0].startswith("b"):
        raise EmulationError(f"{where}: expected {head}.uN or {head}.sN (float division is not supported)")
    t = mods[0]
    dt = _TYPES[t]
    dst, a, b = _one(d, op, args, 3, where)
    ra, rb, write = _reader(d, a, t, where), _reader(d, b, t, where), _writer(dst, where)
    wide = np.dtype(np.int64) if dt.kind == "i" else np.dtype(np.uint64)

    def run(m, mask):
        x = _per_thread(np.asarray(ra(m)).astype(wide), m.T)
        y = _per_thread(np.asarray(rb(m)).astype(wide), m.T)
        zero = (y == 0) if mask is None else ((y == 0) & mask)
        if zero.any():
            raise EmulationError(f"{where}: division by zero in {m.thread(int(np.flatnonzero(zero)[0]))} "
                                 "(PTX leaves the result unspecified)")
        y = np.where(y == 0, wide.type(1), y)
        if dt.kind == "u":
            r = x // y if head == "div" else x % y
        else:
            rem = np.fmod(x, y)
            r = (x - rem) // y if head == "div" else rem
        write(m, r.astype(dt), mask)

    return run


def _dec_shift(d, op, mods, args, where) -> Fn:
    head = op.opcode.data.split(".")[0]
    if len(mods) != 1 or mods[0] not in _INT_TYPES or _TYPES[mods[0]].itemsize < 2:
        raise EmulationError(f"{where}: expected {head}.bN/.uN/.sN")
    t = mods[0]
    if head == "shl" and t not in ("b16", "b32", "b64"):
        raise EmulationError(f"{where}: shl takes .b16/.b32/.b64")
    dt = _TYPES[t]
    bits = dt.itemsize * 8
    dst, a, b = _one(d, op, args, 3, where)
    if head == "shr" and t.startswith("b"):
        t = "u" + t[1:]
        dt = _TYPES[t]
    ra, rb, write = _reader(d, a, t, where), _reader(d, b, "u32", where), _writer(dst, where)
    arithmetic = dt.kind == "i"
    if isinstance(b, _Imm):  # the common case: the count known when decoding
        count = int(_imm_scalar(b, "u32", where))
        shift, f = dt.type(min(count, bits - 1)), np.left_shift if head == "shl" else np.right_shift
        if count >= bits and (head == "shl" or not arithmetic):
            return lambda m, mask: write(m, np.zeros_like(f(ra(m), shift)), mask)
        return lambda m, mask: write(m, f(ra(m), shift), mask)

    def run(m, mask):
        x, s = ra(m), np.asarray(rb(m))
        big = s >= bits
        sh = np.minimum(s, bits - 1).astype(dt)
        if head == "shl":
            r = np.left_shift(x, sh)
            r = np.where(big, dt.type(0), r)
        else:
            r = np.right_shift(x, sh)
            if not arithmetic:
                r = np.where(big, dt.type(0), r)
        write(m, r, mask)

    return run


def _field_mask(n: np.ndarray) -> np.ndarray:
    """(1 << n) - 1 as uint64 for 0 <= n <= 64."""
    n = np.asarray(n, dtype=np.int64)
    one = np.uint64(1)
    return np.where(n >= 64, ~np.uint64(0), (one << np.minimum(n, 63).astype(np.uint64)) - one)


def _dec_bfe(d, op, mods, args, where) -> Fn:
    if len(mods) != 1 or mods[0] not in ("u32", "s32", "u64", "s64"):
        raise EmulationError(f"{where}: expected bfe.u32/.s32/.u64/.s64")
    t = mods[0]
    dt = _TYPES[t]
    bits = dt.itemsize * 8
    signed = dt.kind == "i"
    dst, a, b, c = _one(d, op, args, 4, where)
    ra = _reader(d, a, "u" + t[1:], where)
    rb, rc, write = _reader(d, b, "u32", where), _reader(d, c, "u32", where), _writer(dst, where)
    u64 = np.uint64
    if isinstance(b, _Imm) and isinstance(c, _Imm):  # the common case: position and length known when decoding
        pos, ln = int(_imm_scalar(b, "u32", where)) & 0xFF, int(_imm_scalar(c, "u32", where)) & 0xFF
        n = max(0, min(ln, bits - pos))
        ut = _UNSIGNED[dt.itemsize].type
        shift, field = ut(min(pos, bits - 1)), ut((1 << n) - 1)
        top, ext = ut(max(min(pos + ln - 1, bits - 1), 0)), ut(((1 << bits) - 1) & ~((1 << n) - 1))
        if not signed or ln == 0:
            return lambda m, mask: write(m, (ra(m) >> shift) & field, mask)

        def run_signed(m, mask):
            x = ra(m)
            write(m, ((x >> shift) & field) | np.where((x >> top) & ut(1), ext, ut(0)), mask)

        return run_signed

    def run(m, mask):
        x = np.asarray(ra(m)).astype(u64)
        pos = np.asarray(rb(m)).astype(np.int64) & 0xFF
        ln = np.asarray(rc(m)).astype(np.int64) & 0xFF
        n = np.clip(np.minimum(ln, bits - pos), 0, None)  # bits actually inside the source
        field = (x >> np.minimum(pos, bits - 1).astype(u64)) & _field_mask(n)
        if signed:
            top = np.minimum(pos + ln - 1, bits - 1)
            sbit = np.where(ln == 0, u64(0), (x >> np.maximum(top, 0).astype(u64)) & u64(1))
            field = field | (np.where(sbit == 1, ~_field_mask(n), u64(0)) & _field_mask(np.int64(bits)))
        write(m, field.astype(_UNSIGNED[dt.itemsize]), mask)

    ln = int(_imm_scalar(c, "u32", where)) & 0xFF if isinstance(c, _Imm) else 0
    if ln and not signed:  # a field of known length at a position read per thread
        ut = _UNSIGNED[dt.itemsize].type
        field = ut((1 << ln) - 1) if ln < bits else ut((1 << bits) - 1)

        def run_at(m, mask):
            pos = np.asarray(rb(m)) & np.uint32(0xFF)
            if (pos > bits - ln).any():  # some field reaches past the top bit
                return run(m, mask)
            write(m, (ra(m) >> pos.astype(ut)) & field, mask)

        return run_at
    return run


def _dec_bfi(d, op, mods, args, where) -> Fn:
    if len(mods) != 1 or mods[0] not in ("b32", "b64"):
        raise EmulationError(f"{where}: expected bfi.b32/.b64")
    t = mods[0]
    bits = _TYPES[t].itemsize * 8
    dst, a, b, c, e = _one(d, op, args, 5, where)
    ra, rb = _reader(d, a, t, where), _reader(d, b, t, where)
    rc, re_, write = _reader(d, c, "u32", where), _reader(d, e, "u32", where), _writer(dst, where)
    u64 = np.uint64
    const = isinstance(c, _Imm) and isinstance(e, _Imm)
    if const:  # the common case: position and length known when decoding
        pos, ln = int(c.value) & 0xFF, int(e.value) & 0xFF
        n = max(0, min(ln, bits - pos))
        fmask = ((1 << n) - 1) << pos if n else 0
        dtu = _UNSIGNED[bits // 8]
        keep, ins, sh = dtu.type(~fmask & ((1 << bits) - 1)), dtu.type(fmask), dtu.type(pos if n else 0)

        def run_const(m, mask):
            write(m, (rb(m) & keep) | ((ra(m) << sh) & ins), mask)

        return run_const

    def run(m, mask):
        x, y = np.asarray(ra(m)).astype(u64), np.asarray(rb(m)).astype(u64)
        pos = np.asarray(rc(m)).astype(np.int64) & 0xFF
        ln = np.asarray(re_(m)).astype(np.int64) & 0xFF
        n = np.clip(np.minimum(ln, bits - pos), 0, None)
        sh = np.where(n > 0, pos, 0).astype(u64)
        fm = _field_mask(n) << sh
        r = (y & ~fm) | ((x << sh) & fm)
        write(m, r.astype(_UNSIGNED[bits // 8]), mask)

    return run


def _dec_prmt(d, op, mods, args, where) -> Fn:
    """prmt.b32 d, a, b, c (the default mode): byte i of d is byte (c >> 4i) & 7 of the 8 bytes
    {b, a} (a's bytes 0-3, b's 4-7), or that byte's sign bit copied through the byte where bit 3
    of the selector nibble is set. The modes (.f4e, .b4e, .rc8, .ecl, .ecr, .rc16) are refused."""
    if mods != ["b32"]:
        raise EmulationError(f"{where}: expected prmt.b32 (the default mode; {'.'.join(mods)} is not supported)")
    dst, a, b, c = _one(d, op, args, 4, where)
    ra, rb, rc, write = _reader(d, a, "b32", where), _reader(d, b, "b32", where), _reader(d, c, "b32", where), _writer(dst, where)
    u64 = np.uint64

    def run(m, mask):
        x = np.asarray(ra(m)).astype(u64) | (np.asarray(rb(m)).astype(u64) << u64(32))
        sel = np.asarray(rc(m)).astype(u64)
        out = np.zeros(np.broadcast(x, sel).shape, dtype=u64)
        for i in range(4):
            nib = (sel >> u64(4 * i)) & u64(0xF)
            byte = (x >> ((nib & u64(7)) * u64(8))) & u64(0xFF)
            byte = np.where(nib & u64(8), np.where(byte & u64(0x80), u64(0xFF), u64(0)), byte)
            out |= byte << u64(8 * i)
        write(m, _per_thread(out.astype(np.uint32), m.T), mask)

    return run


def _popcount(x: np.ndarray) -> np.ndarray:
    """Set bits of each unsigned integer, as uint32 (NumPy >= 2 has it built in)."""
    x = np.asarray(x)
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x).astype(np.uint32)
    v = x.astype(np.uint64)  # SWAR popcount for older NumPy
    v = v - ((v >> np.uint64(1)) & np.uint64(0x5555555555555555))
    v = (v & np.uint64(0x3333333333333333)) + ((v >> np.uint64(2)) & np.uint64(0x3333333333333333))
    v = (v + (v >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((v * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.uint32)


def _dec_popc(d, op, mods, args, where) -> Fn:
    if mods not in (["b32"], ["b64"]):
        raise EmulationError(f"{where}: expected popc.b32 or popc.b64")
    dst, a = _one(d, op, args, 2, where)
    if not isinstance(dst, _Reg) or dst.storage.itemsize != 4 or dst.storage.kind == "b":
        raise EmulationError(f"{where}: popc writes a .u32 register")
    ra, write = _reader(d, a, mods[0], where), _writer(dst, where)
    return lambda m, mask: write(m, _per_thread(_popcount(ra(m)), m.T), mask)


def _dec_abs_neg(d, op, mods, args, where) -> Fn:
    """abs/neg of signed integers, two's complement: abs and neg of the most negative value give
    it back (the ISA's wrap-around), which plain NumPy only does with an overflow warning."""
    head = op.opcode.data.split(".")[0]
    if len(mods) != 1 or mods[0] not in ("s16", "s32", "s64"):
        raise EmulationError(f"{where}: expected {head}.s16/.s32/.s64 (float {head} is not supported)")
    t = mods[0]
    u = _UNSIGNED[_TYPES[t].itemsize]
    dst, a = _one(d, op, args, 2, where)
    ra, write = _reader(d, a, t, where), _writer(dst, where)

    def run(m, mask):
        x = np.asarray(ra(m))
        neg = (u.type(0) - x.view(u)).view(_TYPES[t])  # modular
        write(m, _per_thread(neg if head == "neg" else np.where(x < 0, neg, x), m.T), mask)

    return run


_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}  # fmt: skip


def _dec_setp(d, op, mods, args, where) -> Fn:
    if len(mods) != 2 or mods[0] not in _CMP or mods[1] not in _TYPES or mods[1] == "pred":
        raise EmulationError(f"{where}: expected setp.CMP.TYPE p, a, b (CMP in {', '.join(_CMP)})")
    cmp, t = mods
    if cmp in ("lo", "ls", "hi", "hs") and _TYPES[t].kind != "u":
        raise EmulationError(f"{where}: setp.{cmp} needs an unsigned type")
    if "|" in args[0]:
        raise EmulationError(f"{where}: the p|q destination form is not supported")
    dst, a, b = _one(d, op, args, 3, where)
    ra, rb, write, f = _reader(d, a, t, where), _reader(d, b, t, where), _writer(dst, where), _CMP[cmp]
    if t in _FLOAT_TYPES and cmp == "ne":  # ordered: false when either is NaN
        def run_ne(m, mask):
            x, y = ra(m), rb(m)
            write(m, (x != y) & ~np.isnan(x) & ~np.isnan(y), mask)
        return run_ne
    return lambda m, mask: write(m, _per_thread(f(ra(m), rb(m)), m.T), mask)


def _dec_selp(d, op, mods, args, where) -> Fn:
    if len(mods) != 1 or mods[0] not in _TYPES or mods[0] == "pred":
        raise EmulationError(f"{where}: expected selp.TYPE")
    t = mods[0]
    dst, a, b, c = _one(d, op, args, 4, where)
    ra, rb, rc = _reader(d, a, t, where), _reader(d, b, t, where), _reader(d, c, "pred", where)
    write = _writer(dst, where)
    return lambda m, mask: write(m, np.where(rc(m), ra(m), rb(m)).astype(_TYPES[t]), mask)


def _round_tf32_bits(bits: np.ndarray, mode: str) -> np.ndarray:
    """f32 bit patterns -> tf32 bit patterns (low 13 bits zero) as cvt.{rna,rn,rz}.tf32.f32."""
    return mma_arith.round_tf32(np.asarray(bits, dtype=np.uint32).view(np.float32), mode).view(np.uint32)


def _dec_cvt(d, op, mods, args, where) -> Fn:
    dst, a = _one(d, op, args, 2, where)
    write = _writer(dst, where)
    if len(mods) == 3 and mods[1:] == ["tf32", "f32"] and mods[0] in ("rna", "rn", "rz"):
        mode = mods[0]
        ra = _reader(d, a, "f32", where)
        return lambda m, mask: write(m, _round_tf32_bits(np.asarray(ra(m)).view(np.uint32), mode), mask)
    if len(mods) == 2 and mods[0] in _INT_TYPES and mods[1] in _INT_TYPES:
        dt = _TYPES[mods[0]]
        ra = _reader(d, a, mods[1], where)
        return lambda m, mask: write(m, np.asarray(ra(m)).astype(dt), mask)
    floats = {("f32", "f16"): None, ("f64", "f32"): None, ("rn", "f16", "f32"): "rn",
              ("rn", "f32", "f64"): "rn", ("rn", "f16", "f64"): "rn"}
    key = tuple(mods)
    if key in floats:
        dt, st = _TYPES[mods[-2]], mods[-1]
        ra = _reader(d, a, st, where)

        def run(m, mask):
            with np.errstate(over="ignore"):
                write(m, np.asarray(ra(m)).astype(dt), mask)

        return run
    raise EmulationError(f"{where}: conversion cvt.{'.'.join(mods)} is not supported by the emulator")


def _dec_cvta(d, op, mods, args, where) -> Fn:
    """Global addresses are generic ones here; shared address x is generic (0xFF << 40) | x."""
    dst, a = _one(d, op, args, 2, where)
    ra, write = _reader(d, a, "u64", where), _writer(dst, where)
    window = np.uint64((_SHARED_SPACE + 1) << _SPACE_SHIFT)
    if mods in (["to", "global", "u64"], ["global", "u64"], ["param", "u64"]):  # (a parameter's: as `mov` gave it)
        return lambda m, mask: write(m, ra(m), mask)
    if mods == ["shared", "u64"]:
        return lambda m, mask: write(m, np.asarray(ra(m)) | window, mask)
    if mods == ["to", "shared", "u64"]:
        def run(m, mask):
            x = _per_thread(ra(m), m.T)
            bad = (x >> np.uint64(_SPACE_SHIFT)) != np.uint64(_SHARED_SPACE + 1)
            bad = bad if mask is None else bad & mask
            if bad.any():
                t = int(np.flatnonzero(bad)[0])
                raise EmulationError(f"{where}: {m.thread(t)}: {int(x[t]):#x} is not a generic shared address")
            write(m, x & np.uint64(_OFFSET_MASK), mask)
        return run
    raise EmulationError(f"{where}: expected cvta[.to].global.u64, cvta[.to].shared.u64 or cvta.param.u64")


def _dec_shfl(d, op, mods, args, where) -> Fn:
    """shfl.sync.bfly.b32 d, a, b, c, membermask: lane i gets a of lane i ^ b, the whole warp taking
    part. What the lowering emits, and nothing else: the butterfly mode, c = 0x1f (no segments,
    every source lane in range), a full member mask, and both lanes of every exchange running it."""
    if mods != ["sync", "bfly", "b32"]:
        raise EmulationError(f"{where}: expected shfl.sync.bfly.b32 (the other modes are not emulated)")
    dst, a, b, c, members = _one(d, op, args, 5, where)
    if not (isinstance(c, _Imm) and isinstance(members, _Imm) and c.value == 0x1F
            and int(members.value) & 0xFFFFFFFF == 0xFFFFFFFF):
        raise EmulationError(f"{where}: shfl.sync.bfly is emulated with c = 0x1f and a full member mask only")
    ra, rb, write = _reader(d, a, "b32", where), _reader(d, b, "u32", where), _writer(dst, where)

    def run(m, mask):
        lane_mask = np.asarray(rb(m)).astype(np.int64) & 31
        src = np.arange(m.T, dtype=np.int64) ^ lane_mask
        if mask is not None and not np.array_equal(mask, mask[src]):
            raise EmulationError(f"{where}: a shfl.sync exchange with a lane that does not run it")
        write(m, _per_thread(np.asarray(ra(m)), m.T)[src], mask)

    return run
