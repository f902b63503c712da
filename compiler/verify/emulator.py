"""An exact CPU emulator of the PTX tilemma emits: numerics checked without a GPU.

CI and most users have no GPU, and no GPU we can reach runs the sm_120a-only instructions, so the
project needs a second, independent way to run what it emits. `emulate` runs one `.entry` of a
PTX module (the text `tilemma compile` prints, or the `ptx` dialect ops it is printed from) for a
whole grid with NumPy and returns the final contents of the argument arrays, like
`cuda_runtime.run_kernel`.

How it runs, and why:

* Vectorized across threads. Every register is a NumPy row holding that register for all threads
  of a chunk of CTAs (all CTAs at once unless the register file would exceed a memory budget), so
  each PTX instruction is a handful of NumPy operations, not a Python loop over threads. Each
  instruction is decoded once into a closure (operand readers, result writer, precomputed
  immediates); running the kernel is a loop over those closures.
* One program counter. The emitted kernels branch uniformly (the K loop's `bra.uni`), so all
  threads run in lockstep; a branch that some live threads take and others do not raises
  `EmulationError` instead of being executed wrongly. Guards (`@%p` / `@!%p`) become masks.
* Memory is the argument arrays, addressed through fake 64-bit pointers (argument i lives at
  (i + 1) << 40). Every load and store of a thread whose guard holds is checked against its
  buffer: an out-of-bounds or misaligned access raises, naming the instruction, its line, the
  thread and the offending offset. Predicated-off threads never touch memory.
* Shared memory: `.shared` buffers in declaration order from shared address 0x400 (kernels must
  not assume 0), `.extern .shared` ones after them, `shared_bytes` long, one copy per CTA. ld/st
  .shared of every width and .v2/.v4, `mov` of a buffer's name, cvta.shared, cp.async (.ca 4/8/16,
  .cg 16; src-size bytes read, the rest zero-filled), commit/wait groups, ldmatrix (x1/x2/x4,
  .trans), bar.sync. All threads run in lockstep, so a barrier orders nothing here and a kernel
  missing one would still compute the right answer; instead every shared byte remembers the
  thread that wrote it and the thread(s) that read it since the last barrier, and whether a
  cp.async to it is in flight (a copy lands only when its thread waits for its group). An access
  that would race on the GPU (another thread's write before a read or write, another thread's
  read before a write or a copy) or touch bytes with a copy in flight raises, naming both threads.
* `mma` is decoded from the ISA table (`isa.parse_opcode`) and the fragment table
  (`fragments.layout` / `coords`): each warp's registers are gathered into A, B, C matrices, D is
  computed with the GPU's own arithmetic, and D is scattered back. The per-variant gather/scatter
  indices are computed once. Arithmetic (`mma_arith`, per GPU `arch`, sm_90 by default): float
  mma as the tensor cores add (exact products aligned to the largest exponent, each term truncated
  to F fraction bits, one truncation to f32 or RNE to f16; canonical NaNs), fp8 and m8n8k4 .f16 as
  the FFMA/HMMA sequences ptxas emits for sm_90, f64 as a chain of IEEE fmas in k order honouring
  .rn/.rz/.rm/.rp; all of it word for word the H100's (tests/test_mma_arith_replay.py). Integers
  exact then wrapped to s32, or clamped with .satfinite; b1 as popc of AND/XOR. m8n8k4 .f16 runs
  as the ISA defines it: four independent 8x8x4 products, one per quad-pair. tf32 operands ignore
  the low 13 register bits.
* `mma.sp` / `mma.sp::ordered_metadata` (every variant `sparse_fragments` has a table row for):
  A's registers are the compressed M x K/2 A, the metadata words `e` of the lanes the selector
  picks give each kept element's position (`sparse_fragments.metadata_layout`, the layout read
  off an H200), A is decompressed and the dense arithmetic above runs on its kept products. Metadata
  the ISA leaves undefined raises instead of computing something: repeated indices, a tf32 index
  other than 0b0100/0b1110, an undefined selector, and decreasing pairs under ::ordered_metadata
  (plain mma.sp runs them, as the H200 does).
* Block-scaled `mma` / `mma.sp::ordered_metadata` (`.kind::mxf8f6f4`, `mxf4`, `mxf4nvf4` with
  `.block_scale`; every variant of Table 36, dense and sparse): operands after c (after e, f for
  sparse) are `scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}`,
  the selectors immediates or 16-bit registers (the same in every lane of a warp). The scale bytes
  are read where `scale_fragments` puts them (positions measured by others on sm_120, not by us),
  decoded (.ue8m0 2**(e-127); .ue4m3 e4m3 with the sign bit ignored), and D = (A * SF_A)(B * SF_B)
  + C with the scales joining the product exponents (`mma_arith`, sm_120's published model); the
  scale block is K / chunks of the logical K (sparse A is decompressed first). A and B elements:
  fp4/fp6 in 8-bit containers under .kind::mxf8f6f4 / f8f6f4 (e2m1 bits 2..5, e3m2/e2m3 bits
  0..5, padding ignored), packed e2m1 under .kind::mxf4 / mxf4nvf4. Selectors outside Table 37
  raise. No GPU we can reach runs these instructions, so this is our reading of the ISA only.
* `atom.global.min/max` applies threads one after another in thread order (the GPU's order is
  unspecified; the final memory is the same for every order, the returned old values are those
  of this order).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from tilemma.compiler.layouts import fragments, scale_fragments, sparse_fragments
from tilemma.compiler.core import isa
from tilemma.compiler.verify import mma_arith
from tilemma.compiler.verify.ptx_text import ParsedPtx, parse_ptx_modules, print_ptx
from tilemma.compiler.core.progress import Progress
from tilemma.dialects import ptx
from xdsl.dialects.builtin import ModuleOp

__all__ = ["EmulationError", "Program", "RunStats", "compile_entry", "emulate", "mma_semantics", "mma_warps"]


class EmulationError(RuntimeError):
    """The kernel did something the emulator refuses to guess about (out-of-bounds access,
    non-uniform branch, unsupported instruction, ...); the message names the instruction."""


# ---------------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------------

# Register declarations -> storage of the bits (registers are untyped bit containers).
_STORAGE = {
    "pred": np.dtype(np.bool_),
    "b16": np.dtype(np.uint16), "u16": np.dtype(np.uint16), "s16": np.dtype(np.uint16),
    "f16": np.dtype(np.uint16),
    "b32": np.dtype(np.uint32), "u32": np.dtype(np.uint32), "s32": np.dtype(np.uint32),
    "f32": np.dtype(np.uint32),
    "b64": np.dtype(np.uint64), "u64": np.dtype(np.uint64), "s64": np.dtype(np.uint64),
    "f64": np.dtype(np.uint64),
}  # fmt: skip

# Instruction type suffixes -> the NumPy type the instruction computes in.
_TYPES = {
    "pred": np.dtype(np.bool_),
    "b8": np.dtype(np.uint8), "u8": np.dtype(np.uint8), "s8": np.dtype(np.int8),
    "b16": np.dtype(np.uint16), "u16": np.dtype(np.uint16), "s16": np.dtype(np.int16),
    "f16": np.dtype(np.float16),
    "b32": np.dtype(np.uint32), "u32": np.dtype(np.uint32), "s32": np.dtype(np.int32),
    "f32": np.dtype(np.float32),
    "b64": np.dtype(np.uint64), "u64": np.dtype(np.uint64), "s64": np.dtype(np.int64),
    "f64": np.dtype(np.float64),
}  # fmt: skip
_UNSIGNED = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
_SIGNED = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}
_INT_TYPES = {t for t, d in _TYPES.items() if d.kind in "iu"}
_FLOAT_TYPES = {"f16", "f32", "f64"}
_IEEE_ARITH = {"f32", "f64"}  # NumPy rounds these exactly like PTX's default .rn (f16 would round twice)

_SPACE_SHIFT = 40  # argument i occupies addresses [(i + 1) << 40, (i + 2) << 40)
_OFFSET_MASK = (1 << _SPACE_SHIFT) - 1
_SHARED_SPACE = 0xFE  # cvta.shared puts shared address x at generic (0xFF << 40) | x
_SHARED_BASE = 1024  # the first shared byte's address; kernels must not assume 0


def _as_storage(value, storage: np.dtype):
    """`value` (array or NumPy scalar of an instruction type) as register bits of `storage`:
    same width is a reinterpretation, a narrower integer is zero/sign-extended by its own
    signedness, a wider one truncated (what PTX does when a register is wider than the type)."""
    v = np.asarray(value)
    if v.dtype == storage:
        return v
    if v.dtype.itemsize == storage.itemsize and storage.kind != "b":
        return v.view(storage)
    if v.dtype.kind in "iub" and storage.kind in "ub":
        return v.astype(storage)
    raise EmulationError(f"cannot hold a {v.dtype} value in a {storage} register")


# ---------------------------------------------------------------------------------------------
# Operands
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Reg:
    name: str
    bank: str  # prefix, e.g. "%rd"
    index: int
    rtype: str  # declared type, e.g. "b64"

    @property
    def storage(self) -> np.dtype:
        return _STORAGE[self.rtype]


@dataclass(frozen=True)
class _Imm:
    text: str
    value: int | float
    fbits: int = 0  # 32/64: a 0f/0d literal whose bit pattern is `value`


@dataclass(frozen=True)
class _Special:
    name: str


@dataclass(frozen=True)
class _Addr:
    base: _Reg | str  # register, or a parameter name (ld.param) or shared buffer (ld.shared)
    offset: int


@dataclass(frozen=True)
class _Vec:
    items: tuple  # `{%r1, %r2, ...}`: the registers of a vector load/store or ldmatrix


_SPECIALS = {
    f"%{s}.{c}" for s in ("tid", "ntid", "ctaid", "nctaid") for c in "xyz"
} | {"%laneid", "%warpid", "%nwarpid"}
_REG_RE = re.compile(r"^(%[A-Za-z_$][A-Za-z_$]*?)(\d+)$")
_ADDR_RE = re.compile(r"^\[([%A-Za-z_$][\w$]*)(?:\+(-?\d+)|-(\d+))?\]$")


class _Decode:
    """Per-entry decoding context: registers, labels, parameters; operand parsing."""

    def __init__(self, entry: ptx.EntryOp, lines: dict, source: str, arch: str):
        self.entry, self.lines, self.source, self.arch = entry, lines, source, arch
        module = entry.parent_op()
        self.target = module.target.data if isinstance(module, ptx.ModuleOp_) else None
        self.version = module.version.data if isinstance(module, ptx.ModuleOp_) else None
        self.banks: dict[str, tuple[str, int]] = {}
        self.labels: dict[str, int] = {}
        self.params: list[tuple[str, str]] = []
        self.shared: dict[str, int] = {}  # shared buffer -> its shared address (set by Program)
        for p in entry.params.data:
            parts = p.data.split()
            if len(parts) != 2 or not parts[0].startswith(".") or parts[0][1:] not in _TYPES:
                raise EmulationError(f"{source}: kernel {entry.sym_name.data}: cannot read parameter {p.data!r}")
            self.params.append((parts[0][1:], parts[1]))

    def where(self, op) -> str:
        line = self.lines.get(op)
        at = f"{self.source}:{line}" if line else self.source
        text = op.text() if hasattr(op, "text") else op.name
        return f"{at}: `{text}`"

    def reg(self, text: str, op) -> _Reg:
        m = _REG_RE.match(text)
        if not m or m.group(1) not in self.banks:
            raise EmulationError(f"{self.where(op)}: {text!r} is not a declared register")
        rtype, count = self.banks[m.group(1)]
        index = int(m.group(2))
        if index >= count:
            raise EmulationError(f"{self.where(op)}: {text} is beyond `.reg .{rtype} {m.group(1)}<{count}>`")
        return _Reg(text, m.group(1), index, rtype)

    def operand(self, text: str, op):
        if text.startswith("{") and text.endswith("}"):
            return _Vec(tuple(self.operand(x.strip(), op) for x in text[1:-1].split(",")))
        if text in self.shared:
            return _Imm(text, self.shared[text])
        if text in _SPECIALS:
            return _Special(text)
        if text.startswith("%"):
            return self.reg(text, op)
        if text.startswith("["):
            m = _ADDR_RE.match(text)
            if not m:
                raise EmulationError(f"{self.where(op)}: cannot read address {text!r}")
            base_text = m.group(1)
            offset = int(m.group(2)) if m.group(2) else -int(m.group(3)) if m.group(3) else 0
            base: _Reg | str
            if base_text.startswith("%"):
                base = self.reg(base_text, op)
            else:
                if base_text not in {n for _, n in self.params} | set(self.shared):
                    raise EmulationError(f"{self.where(op)}: {base_text!r} is neither a parameter nor a shared buffer")
                base = base_text
            return _Addr(base, offset)
        t = text
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", t):
            return _Imm(t, int(t[2:], 16), 32)
        if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", t):
            return _Imm(t, int(t[2:], 16), 64)
        if re.fullmatch(r"-?0[xX][0-9a-fA-F]+", t):
            return _Imm(t, int(t, 16))
        if re.fullmatch(r"-?\d+[uU]?", t):
            return _Imm(t, int(t.rstrip("uU")))
        if re.fullmatch(r"-?\d+\.\d*([eE][+-]?\d+)?", t):
            return _Imm(t, float(t))
        raise EmulationError(f"{self.where(op)}: cannot read operand {text!r}")


# ---------------------------------------------------------------------------------------------
# The machine state of one chunk of CTAs
# ---------------------------------------------------------------------------------------------


class _Memory:
    """The argument buffers as bytes, with bounds-checked gathers and scatters."""

    def __init__(self, args: Sequence):
        self.bufs: dict[int, np.ndarray] = {}
        self.sizes: dict[int, int] = {}
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                padded = np.zeros(-(-max(raw.size, 1) // 8) * 8, dtype=np.uint8)
                padded[: raw.size] = raw
                self.bufs[i] = padded
                self.sizes[i] = raw.size

    @staticmethod
    def pointer(i: int) -> int:
        return (i + 1) << _SPACE_SHIFT

    def locate(self, addr: np.ndarray, size: int, fail: Callable[[int, str, str], None],
               unit: int | None = None) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Split addresses into (argument, index of `unit`-byte elements (default `size`), positions)
        groups, after checking that every `size`-byte access lies inside its argument and is
        aligned; `fail(position, what, why)` raises."""
        space = (addr >> np.uint64(_SPACE_SHIFT)).astype(np.int64) - 1
        offset = (addr & np.uint64(_OFFSET_MASK)).astype(np.int64)
        first = int(space[0]) if space.size else 0
        groups = []
        spaces = [first] if space.size and (space == first).all() else np.unique(space).tolist()
        for s in spaces:
            pos = None if len(spaces) == 1 else np.flatnonzero(space == s)
            off = offset if pos is None else offset[pos]
            if s not in self.bufs:
                p = 0 if pos is None else int(pos[0])
                if s == _SHARED_SPACE:
                    fail(p, "unsupported", f"address {int(addr[p]):#x} is a generic address of shared memory; "
                         "the emulator reads shared memory only through ld.shared/st.shared")
                fail(p, "out-of-bounds", f"address {int(addr[p]):#x} is outside every argument buffer")
            limit = self.sizes[s]
            bad = (off < 0) | (off + size > limit)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                p = k if pos is None else int(pos[k])
                fail(p, "out-of-bounds", f"byte offset {int(off[k])} (+{size} bytes) is out of bounds of argument {s} "
                        f"({limit} bytes); {int(bad.sum())} such accesses")
            if size > 1:
                mis = (off % size) != 0
                if mis.any():
                    k = int(np.flatnonzero(mis)[0])
                    p = k if pos is None else int(pos[k])
                    fail(p, "misaligned", f"byte offset {int(off[k])} of argument {s} is not aligned to {size} bytes")
            groups.append((s, off // (unit or size), pos))
        return groups


@dataclass
class RunStats:
    """What one `Program.run` did (for the speed benchmark and for curiosity)."""

    threads: int = 0
    ctas: int = 0
    chunks: int = 0
    instructions: int = 0  # instructions issued (each counts once for all threads of a chunk)
    mma: int = 0  # mma instructions executed (each for every warp of the chunk)
    seconds: float = 0.0


class _Machine:
    """Registers, special registers and liveness for one chunk of CTAs."""

    def __init__(self, prog: Program, memory: _Memory, params: dict[str, np.ndarray],
                 grid: tuple[int, int, int], block: tuple[int, int, int], cta0: int, nctas: int,
                 shared_size: int | None = None):
        self.prog, self.memory, self.params = prog, memory, params
        bx, by, bz = block
        per_cta = bx * by * bz
        self.per_cta = -(-per_cta // 32) * 32  # CTAs padded to whole warps
        self.T = T = nctas * self.per_cta
        self.cta0, self.grid, self.block, self.nctas = cta0, grid, block, nctas
        self.banks = {p: np.zeros((count, T), dtype=_STORAGE[t]) for p, (t, count) in prog.banks.items()}
        t = np.arange(T, dtype=np.int64)
        local = t % self.per_cta
        cta = cta0 + t // self.per_cta
        u = np.uint32
        self.specials = {
            "%tid.x": (local % bx).astype(u), "%tid.y": (local // bx % by).astype(u),
            "%tid.z": (local // (bx * by)).astype(u),
            "%ntid.x": u(bx), "%ntid.y": u(by), "%ntid.z": u(bz),
            "%ctaid.x": (cta % grid[0]).astype(u), "%ctaid.y": (cta // grid[0] % grid[1]).astype(u),
            "%ctaid.z": (cta // (grid[0] * grid[1])).astype(u),
            "%nctaid.x": u(grid[0]), "%nctaid.y": u(grid[1]), "%nctaid.z": u(grid[2]),
            "%laneid": (local & 31).astype(u), "%warpid": (local >> 5).astype(u),
            "%nwarpid": u(self.per_cta // 32),
        }  # fmt: skip
        self.active: np.ndarray | None = None if per_cta == self.per_cta else local < per_cta
        self.done = False
        self.mma_count = 0
        self.shared = None if shared_size is None else _Shared(self, shared_size)

    def thread(self, t: int) -> str:
        """Thread t of the chunk, as a user reads it."""
        local, cta = t % self.per_cta, self.cta0 + t // self.per_cta
        g, b = self.grid, self.block
        c = (cta % g[0], cta // g[0] % g[1], cta // (g[0] * g[1]))
        return (f"thread ({local % b[0]}, {local // b[0] % b[1]}, {local // (b[0] * b[1])}) "
                f"of CTA ({c[0]}, {c[1]}, {c[2]})")


# ---------------------------------------------------------------------------------------------
# Instruction decoders: each returns fn(machine, mask) -> next pc or None
# ---------------------------------------------------------------------------------------------

Fn = Callable[[_Machine, "np.ndarray | None"], "int | None"]


def _imm_scalar(imm: _Imm, t: str, where: str):
    dt = _TYPES[t]
    if imm.fbits:
        if dt.kind != "f" or dt.itemsize * 8 != imm.fbits:
            raise EmulationError(f"{where}: {imm.text} is an f{imm.fbits} literal, the instruction is .{t}")
        return np.array(imm.value, dtype=_UNSIGNED[dt.itemsize]).view(dt)[()]
    if dt.kind == "f":
        return dt.type(imm.value)
    if dt.kind == "b":
        return np.bool_(int(imm.value) != 0)
    if isinstance(imm.value, float):
        raise EmulationError(f"{where}: float literal {imm.text} for .{t}")
    bits = int(imm.value) & ((1 << (8 * dt.itemsize)) - 1)
    return np.array(bits, dtype=_UNSIGNED[dt.itemsize]).view(dt)[()]


def _reader(d: _Decode, operand, t: str, where: str) -> Callable[[_Machine], object]:
    """A function giving the operand's value as the instruction's type `t` (array or scalar)."""
    dt = _TYPES[t]
    if isinstance(operand, _Imm):
        value = _imm_scalar(operand, t, where)
        return lambda m: value
    if isinstance(operand, _Special):
        name = operand.name
        if dt.kind not in "iu":
            raise EmulationError(f"{where}: special register {name} read as .{t}")
        if dt.itemsize == 4:
            return lambda m: np.asarray(m.specials[name]).view(dt)
        return lambda m: np.asarray(m.specials[name]).astype(dt)
    if isinstance(operand, _Reg):
        st = operand.storage
        bank, i = operand.bank, operand.index
        if st == dt:
            return lambda m: m.banks[bank][i]
        if st.itemsize == dt.itemsize and dt.kind != "b" and st.kind != "b":
            return lambda m: m.banks[bank][i].view(dt)
        if st.itemsize > dt.itemsize and dt.kind in "iu" and st.kind == "u":
            narrow = _UNSIGNED[dt.itemsize]
            return lambda m: m.banks[bank][i].astype(narrow).view(dt)
        raise EmulationError(f"{where}: register {operand.name} (.{operand.rtype}) cannot be read as .{t}")
    raise EmulationError(f"{where}: operand {operand!r} cannot be read here")


def _writer(operand, where: str) -> Callable[[_Machine, object, np.ndarray | None], None]:
    if not isinstance(operand, _Reg):
        raise EmulationError(f"{where}: the destination must be a register")
    bank, i, st = operand.bank, operand.index, operand.storage

    def write(m: _Machine, value, mask) -> None:
        v = _as_storage(value, st)
        dst = m.banks[bank][i]
        if mask is None:
            dst[...] = v
        else:
            np.copyto(dst, v, where=mask)

    return write


def _one(d: _Decode, op, args: list[str], n: int, where: str) -> list:
    if len(args) != n:
        raise EmulationError(f"{where}: expected {n} operands, got {len(args)}")
    return [d.operand(a, op) for a in args]


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
        x = np.broadcast_to(np.asarray(ra(m)).astype(wide), (m.T,))
        y = np.broadcast_to(np.asarray(rb(m)).astype(wide), (m.T,))
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
    return lambda m, mask: write(m, np.broadcast_to(_popcount(ra(m)), (m.T,)), mask)


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
        write(m, np.broadcast_to(neg if head == "neg" else np.where(x < 0, neg, x), (m.T,)), mask)

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
    return lambda m, mask: write(m, np.broadcast_to(f(ra(m), rb(m)), (m.T,)), mask)


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
    if mods in (["to", "global", "u64"], ["global", "u64"]):
        return lambda m, mask: write(m, ra(m), mask)
    if mods == ["shared", "u64"]:
        return lambda m, mask: write(m, np.asarray(ra(m)) | window, mask)
    if mods == ["to", "shared", "u64"]:
        def run(m, mask):
            x = np.broadcast_to(np.asarray(ra(m)), (m.T,))
            bad = (x >> np.uint64(_SPACE_SHIFT)) != np.uint64(_SHARED_SPACE + 1)
            bad = bad if mask is None else bad & mask
            if bad.any():
                t = int(np.flatnonzero(bad)[0])
                raise EmulationError(f"{where}: {m.thread(t)}: {int(x[t]):#x} is not a generic shared address")
            write(m, x & np.uint64(_OFFSET_MASK), mask)
        return run
    raise EmulationError(f"{where}: expected cvta[.to].global.u64 or cvta[.to].shared.u64")


_CACHE_OPS = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc"}


def _mem_type(mods: list[str], where: str, what: str) -> tuple[str, int, str]:
    """(space, vector length, type) of ld/st qualifiers; generic addresses are global ones here."""
    rest = [x for x in mods if x not in _CACHE_OPS]
    space = "global"
    if rest and rest[0] in ("global", "param", "shared", "shared::cta"):
        space = rest.pop(0).split("::")[0]
    n = int(rest.pop(0)[1]) if rest and rest[0] in ("v2", "v4") else 1
    if len(rest) != 1 or rest[0] not in _TYPES or rest[0] == "pred":
        raise EmulationError(f"{where}: expected {what}[.global|.shared|.param][.v2|.v4].TYPE")
    return space, n, rest[0]


def _fail(m: _Machine, where: str, access: str, mask, position: int, what: str, why: str):
    t = position if mask is None else int(np.flatnonzero(mask)[position])
    raise EmulationError(f"{where}: {what} {access} by {m.thread(t)}: {why}")


def _addresses(d, addr: _Addr, where: str) -> Callable[[_Machine], np.ndarray]:
    if not isinstance(addr.base, _Reg):
        raise EmulationError(f"{where}: a global address needs a register base")
    base = _reader(d, addr.base, "u64", where)
    off = np.uint64(addr.offset & 0xFFFFFFFFFFFFFFFF)
    return lambda m: np.broadcast_to(np.asarray(base(m)) + off, (m.T,))


def _vector(d, operand, n: int, where: str, what: str) -> list:
    """The n registers of a `{..}` operand (or the one operand when n == 1)."""
    items = list(operand.items) if isinstance(operand, _Vec) else [operand]
    if len(items) != n or (n > 1) != isinstance(operand, _Vec):
        raise EmulationError(f"{where}: {what} needs {'{' + ', '.join(['%r'] * n) + '}' if n > 1 else 'one operand'}")
    return items


def _threads(m: _Machine, mask) -> np.ndarray:
    return np.arange(m.T) if mask is None else np.flatnonzero(mask)


def _put(m: _Machine, writes: list, vals: np.ndarray, dt: np.dtype, mask) -> None:
    """Write column j of vals ([threads executing, n] as `dt`) to register j."""
    for j, write in enumerate(writes):
        v = vals[:, j]
        if mask is None:
            write(m, v, None)
        else:
            full = np.zeros(m.T, dtype=dt)
            full[mask] = v
            write(m, full, mask)


def _dec_ld(d, op, mods, args, where) -> Fn:
    space, n, t = _mem_type(mods, where, "ld")
    dst, addr = _one(d, op, args, 2, where)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: ld needs an address in brackets")
    dt = _TYPES[t]
    size = dt.itemsize
    if space == "param":
        if not isinstance(addr.base, str) or n > 1:
            raise EmulationError(f"{where}: ld.param reads a parameter by name, one value")
        write = _writer(dst, where)
        name, off = addr.base, addr.offset

        def run_param(m, mask):
            raw = m.params[name]
            if off < 0 or off + size > raw.size:
                raise EmulationError(f"{where}: reads {size} bytes at offset {off} of a {raw.size}-byte parameter")
            write(m, raw[off:off + size].view(dt)[0], mask)

        return run_param
    regs = _vector(d, dst, n, where, "the destination")
    for r in regs:
        if not isinstance(r, _Reg):
            raise EmulationError(f"{where}: the destination must be a register")
        if r.storage.itemsize < size or (r.storage.itemsize > size and dt.kind == "f"):
            raise EmulationError(f"{where}: .{t} does not fit register {r.name} (.{r.rtype})")
    writes = [_writer(r, where) for r in regs]
    unsigned = _UNSIGNED[size]
    if space == "shared":
        saddr = _shared_addresses(d, addr, where)

        def run_shared(m, mask):
            sh = _shared_of(m, where)
            threads = _threads(m, mask)
            a = saddr(m) if mask is None else saddr(m)[mask]
            idx = sh.bytes(m, where, "load", a, threads, n * size)
            sh.touch(m, where, "load", idx, threads, write=False)
            _put(m, writes, sh.data[idx].view(unsigned).view(dt), dt, mask)

        return run_shared
    addresses = _addresses(d, addr, where)
    lanes = np.arange(n)

    def run(m, mask):
        a = addresses(m)
        if mask is not None:
            a = a[mask]
        out = np.empty((a.size, n), dtype=unsigned)
        for s, idx, pos in m.memory.locate(a, n * size, lambda p, what, why: _fail(m, where, "load", mask, p, what, why),
                                           unit=size):
            buf = m.memory.bufs[s].view(unsigned)
            vals = buf[idx][:, None] if n == 1 else buf[idx[:, None] + lanes]
            if pos is None:
                out = vals
            else:
                out[pos] = vals
        _put(m, writes, out.view(dt), dt, mask)

    return run


def _dec_st(d, op, mods, args, where) -> Fn:
    space, n, t = _mem_type(mods, where, "st")
    if space == "param":
        raise EmulationError(f"{where}: st.param is not supported (kernel parameters are read-only)")
    addr, src = _one(d, op, args, 2, where)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: st needs an address in brackets")
    dt = _TYPES[t]
    size = dt.itemsize
    unsigned = _UNSIGNED[size]
    reads = []
    for s in _vector(d, src, n, where, "the source"):
        if isinstance(s, _Reg) and s.storage.itemsize > size and dt.kind in "iu":
            reads.append(_reader(d, s, "u" + str(8 * size), where))  # store the low bits
        else:
            reads.append(_reader(d, s, t, where))

    def values(m, mask) -> np.ndarray:  # [threads executing, n] as unsigned
        cols = [np.broadcast_to(np.asarray(r(m)), (m.T,)).view(unsigned) for r in reads]
        v = cols[0][:, None] if n == 1 else np.stack(cols, 1)
        return v if mask is None else v[mask]

    if space == "shared":
        saddr = _shared_addresses(d, addr, where)

        def run_shared(m, mask):
            sh = _shared_of(m, where)
            threads = _threads(m, mask)
            a = saddr(m) if mask is None else saddr(m)[mask]
            idx = sh.bytes(m, where, "store", a, threads, n * size)
            sh.touch(m, where, "store", idx, threads, write=True)
            sh.data[idx] = np.ascontiguousarray(values(m, mask)).view(np.uint8)

        return run_shared
    addresses = _addresses(d, addr, where)
    lanes = np.arange(n)

    def run(m, mask):
        a = addresses(m)
        v = values(m, mask)
        if mask is not None:
            a = a[mask]
        for s, idx, pos in m.memory.locate(a, n * size, lambda p, what, why: _fail(m, where, "store", mask, p, what, why),
                                           unit=size):
            buf = m.memory.bufs[s].view(unsigned)
            vals = v if pos is None else v[pos]
            if n == 1:
                buf[idx] = vals[:, 0]
            else:
                buf[idx[:, None] + lanes] = vals

    return run


# ---------------------------------------------------------------------------------------------
# Shared memory: ld/st.shared, cp.async, ldmatrix, bar.sync
# ---------------------------------------------------------------------------------------------


class _Shared:
    """The shared memory of one chunk of CTAs, plus what makes the GPU's undefined cases visible
    although all threads run in lockstep here: per byte, the thread that wrote it and the
    thread that read it (-2: several) since the last barrier, and whether a cp.async to it is
    in flight; and the copies issued but not yet waited for. A copy lands only when its thread
    waits for its group, so a kernel that forgets a wait reads stale data on the GPU, here an error."""

    def __init__(self, m: _Machine, size: int):
        n = m.nctas * size
        self.size = size
        self.data = np.full(n, 0xA5, np.uint8)  # not zeros: a missing zero fill must show
        self.writer = np.full(n, -1, np.int32)
        self.reader = np.full(n, -1, np.int32)
        self.inflight = np.zeros(n, bool)
        self.committed = np.zeros(m.T, np.int64)  # groups each thread has committed
        self.copies: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # thread, bytes, data, group

    def address(self, byte: int) -> str:
        return f"{_SHARED_BASE + byte % self.size:#x}"

    def bytes(self, m: _Machine, where: str, access: str, addr: np.ndarray, threads: np.ndarray,
              size: int) -> np.ndarray:
        """[k, size] byte indices of `size`-byte accesses at shared addresses `addr` by `threads`,
        after checking that each is aligned to `size` and lies in its CTA's shared memory."""
        mis = (addr % size) != 0
        if mis.any():
            k = int(np.flatnonzero(mis)[0])
            raise EmulationError(f"{where}: misaligned shared {access} by {m.thread(int(threads[k]))}: shared "
                                 f"address {int(addr[k]):#x} is not aligned to {size} bytes")
        off = addr - _SHARED_BASE
        bad = (off < 0) | (off + size > self.size)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise EmulationError(
                f"{where}: out-of-range shared {access} by {m.thread(int(threads[k]))}: shared address "
                f"{int(addr[k]):#x} (+{size} bytes) is outside the CTA's {self.size} bytes of shared memory "
                f"[{_SHARED_BASE:#x}, {_SHARED_BASE + self.size:#x}); {int(bad.sum())} such accesses")
        return ((threads // m.per_cta) * self.size + off)[:, None] + np.arange(size)

    def touch(self, m: _Machine, where: str, access: str, idx: np.ndarray, threads: np.ndarray, write: bool) -> None:
        """Check and record `threads` reading or writing bytes `idx` ([k, size])."""
        busy = self.inflight[idx]
        if busy.any():
            k, j = (int(x) for x in np.argwhere(busy)[0])
            raise EmulationError(
                f"{where}: {'write' if write else 'read'} of shared memory with a cp.async in flight: "
                f"{m.thread(int(threads[k]))} {access}s shared address {self.address(int(idx[k, j]))} that "
                "a cp.async has not yet landed on; missing cp.async.wait_group?")
        me = threads[:, None].astype(np.int32)
        w = self.writer[idx]
        bad = (w >= 0) & (w != me)
        if bad.any():
            k, j = (int(x) for x in np.argwhere(bad)[0])
            self._race(m, where, threads[k], "reads" if not write else "writes", idx[k, j], "wrote", w[k, j])
        r = self.reader[idx]
        if write:
            bad = (r != -1) & (r != me)
            if bad.any():
                k, j = (int(x) for x in np.argwhere(bad)[0])
                self._race(m, where, threads[k], "writes", idx[k, j], "read", r[k, j])
            self.writer[idx] = np.broadcast_to(me, idx.shape)
            clash = self.writer[idx] != me
            if clash.any():
                k, j = (int(x) for x in np.argwhere(clash)[0])
                self._race(m, where, threads[k], "writes", idx[k, j], "also writes in the same instruction",
                           self.writer[idx[k, j]], window="")
        else:
            new = np.where((r == -1) | (r == me), me, np.int32(-2))
            self.reader[idx] = new
            clash = self.reader[idx] != new  # another thread of this instruction read it too
            if clash.any():
                self.reader[idx[clash]] = -2

    def _race(self, m: _Machine, where: str, t, verb: str, byte, other_verb: str, other,
              window: str = " since the last bar.sync") -> None:
        who = "other threads" if other == -2 else m.thread(int(other))
        raise EmulationError(
            f"{where}: shared-memory race: {m.thread(int(t))} {verb} shared address {self.address(int(byte))}, "
            f"which {who} {other_verb}{window}; missing bar.sync?")

    def barrier(self, ctas: np.ndarray | None) -> None:
        """bar.sync by every live thread of `ctas` (bool per CTA; None: all): forget the marks."""
        if ctas is None:
            self.writer.fill(-1)
            self.reader.fill(-1)
        else:
            self.writer.reshape(ctas.size, -1)[ctas] = -1
            self.reader.reshape(ctas.size, -1)[ctas] = -1

    def issue(self, m: _Machine, where: str, threads: np.ndarray, idx: np.ndarray, data: np.ndarray) -> None:
        """A cp.async by `threads` of `data` to bytes `idx`: in flight until its group is waited for."""
        if self.inflight[idx].any():
            k = int(np.flatnonzero(self.inflight[idx].any(1))[0])
            raise EmulationError(f"{where}: cp.async by {m.thread(int(threads[k]))} to shared memory that another "
                                 "cp.async has not yet landed on; missing cp.async.wait_group?")
        me = threads[:, None].astype(np.int32)
        for marks, verb in ((self.writer, "wrote"), (self.reader, "read")):
            other = marks[idx]
            bad = (other != -1) & (other != me)
            if bad.any():
                k, j = (int(x) for x in np.argwhere(bad)[0])
                self._race(m, where, threads[k], "copies to", idx[k, j], verb, other[k, j])
        flat = idx.ravel()
        if np.unique(flat).size != flat.size:
            byte = int(flat[np.flatnonzero(np.bincount(flat) > 1)[0]])
            both = threads[np.flatnonzero((idx == byte).any(1))[:2]]
            self._race(m, where, both[1], "copies to", byte, "also copies to in the same instruction", both[0], window="")
        self.inflight[idx] = True
        self.copies.append((threads, idx, data, self.committed[threads]))

    def commit(self, threads: np.ndarray) -> None:
        self.committed[threads] += 1

    def wait(self, threads: np.ndarray, pending: int) -> None:
        """cp.async.wait_group by `threads`: their copies of all but the `pending` newest committed
        groups land (copies not yet committed stay in flight)."""
        waiting = np.zeros(self.committed.size, bool)
        waiting[threads] = True
        limit = self.committed - pending
        keep = []
        for t, idx, data, group in self.copies:
            land = waiting[t] & (group < limit[t])
            if land.any():
                self.data[idx[land]] = data[land]
                self.inflight[idx[land]] = False
                self.writer[idx[land]] = np.broadcast_to(t[land, None].astype(np.int32), idx[land].shape)
            if not land.all():
                keep.append((t[~land], idx[~land], data[~land], group[~land]))
        self.copies = keep


def _shared_of(m: _Machine, where: str) -> _Shared:
    if m.shared is None:
        raise EmulationError(f"{where}: the kernel declares no shared memory (.shared or .extern .shared)")
    return m.shared


def _shared_addresses(d, addr: _Addr, where: str) -> Callable[[_Machine], np.ndarray]:
    """Shared addresses (int64, per thread) of `[buffer+off]` or `[%r+off]` (32- or 64-bit %r)."""
    off = addr.offset
    if isinstance(addr.base, str):
        if addr.base not in d.shared:
            raise EmulationError(f"{where}: {addr.base!r} is not a shared buffer")
        at = np.int64(d.shared[addr.base] + off)
        return lambda m: np.full(m.T, at)
    if addr.base.storage.itemsize not in (4, 8) or addr.base.storage.kind == "b":
        raise EmulationError(f"{where}: a shared address is a 32- or 64-bit register, not {addr.base.name}")
    base = _reader(d, addr.base, "u32" if addr.base.storage.itemsize == 4 else "u64", where)
    return lambda m: np.broadcast_to(np.asarray(base(m)).astype(np.int64) + off, (m.T,))


def _whole_warps(m: _Machine, mask, where: str, what: str) -> np.ndarray | None:
    """Warps executing a warp-wide instruction (None: all); a partly active warp is an error."""
    if mask is None:
        return None
    lanes = mask.reshape(-1, 32)
    partial = lanes.any(1) & ~lanes.all(1)
    if partial.any():
        w = int(np.flatnonzero(partial)[0])
        raise EmulationError(f"{where}: only {int(lanes[w].sum())} of 32 lanes of the warp of {m.thread(w * 32)} "
                             f"execute this {what} (.sync.aligned needs the whole warp)")
    return np.flatnonzero(lanes.all(1))


_CP_ASYNC = re.compile(r"^cp\.async\.(ca|cg)\.shared(?:::cta)?\.global(?:\.L2::(?:64|128|256)B)?$")


def _dec_cp(d, op, mods, args, where) -> Fn:
    """cp.async copies, commit_group, wait_group N, wait_all (see `_Shared`)."""
    opcode = op.opcode.data
    if opcode in ("cp.async.commit_group", "cp.async.wait_all"):
        if args:
            raise EmulationError(f"{where}: {opcode} takes no operands")
        if opcode == "cp.async.commit_group":
            return lambda m, mask: _shared_of(m, where).commit(_threads(m, mask))

        def run_all(m, mask):
            sh, threads = _shared_of(m, where), _threads(m, mask)
            sh.commit(threads)
            sh.wait(threads, 0)

        return run_all
    if opcode == "cp.async.wait_group":
        (n,) = _one(d, op, args, 1, where)
        if not isinstance(n, _Imm) or isinstance(n.value, float) or n.fbits or n.value < 0:
            raise EmulationError(f"{where}: cp.async.wait_group takes a non-negative integer constant")
        pending = int(n.value)
        return lambda m, mask: _shared_of(m, where).wait(_threads(m, mask), pending)
    match = _CP_ASYNC.match(opcode)
    if not match or len(args) not in (3, 4):
        raise EmulationError(f"{where}: expected cp.async.{{ca,cg}}.shared[::cta].global[.L2::128B] [dst], [src], "
                             "CP-SIZE[, SRC-SIZE] (or commit_group / wait_group N / wait_all)")
    ops = [d.operand(a, op) for a in args]
    dst, src, cp = ops[:3]
    if not (isinstance(dst, _Addr) and isinstance(src, _Addr)):
        raise EmulationError(f"{where}: cp.async needs [shared address], [global address]")
    if not isinstance(cp, _Imm) or cp.value not in ((16,) if match.group(1) == "cg" else (4, 8, 16)):
        raise EmulationError(f"{where}: cp-size must be {'16 for .cg' if match.group(1) == 'cg' else '4, 8 or 16'}")
    size = int(cp.value)
    if len(ops) == 4 and isinstance(ops[3], _Imm) and not 0 <= ops[3].value <= size:
        raise EmulationError(f"{where}: src-size {ops[3].text} is not in 0..{size}")
    src_size = _reader(d, ops[3], "u32", where) if len(ops) == 4 else (lambda m: np.uint32(size))
    saddr, gaddr = _shared_addresses(d, dst, where), _addresses(d, src, where)
    cols = np.arange(size)

    def run(m, mask):
        sh, threads = _shared_of(m, where), _threads(m, mask)
        sa, ga = saddr(m), gaddr(m)
        n = np.broadcast_to(np.asarray(src_size(m)).astype(np.int64), (m.T,))
        if mask is not None:
            sa, ga, n = sa[mask], ga[mask], n[mask]
        idx = sh.bytes(m, where, "cp.async destination", sa, threads, size)
        if (n > size).any():
            k = int(np.flatnonzero(n > size)[0])
            raise EmulationError(f"{where}: {m.thread(int(threads[k]))}: src-size {int(n[k])} exceeds cp-size {size}")
        mis = (ga % np.uint64(size)) != 0
        if mis.any():
            k = int(np.flatnonzero(mis)[0])
            raise EmulationError(f"{where}: misaligned cp.async source by {m.thread(int(threads[k]))}: global "
                                 f"address {int(ga[k]):#x} is not aligned to {size} bytes")
        data = np.zeros((threads.size, size), np.uint8)
        some = np.flatnonzero(n > 0)  # src-size 0 reads nothing (the whole copy is zero fill)
        if some.size:
            first, last = ga[some], ga[some] + (n[some] - 1).astype(np.uint64)

            def fail(p, what, why):
                raise EmulationError(f"{where}: {what} cp.async source read by {m.thread(int(threads[some[p]]))}: {why}")

            m.memory.locate(last, 1, fail)
            for s, off, pos in m.memory.locate(first, 1, fail):
                rows = some if pos is None else some[pos]
                got = np.take(m.memory.bufs[s], off[:, None] + cols, mode="clip")
                data[rows] = np.where(cols < n[rows, None], got, 0)
        sh.issue(m, where, threads, idx, data)

    return run


_LDMATRIX = re.compile(r"^ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.shared(?:::cta)?\.b16$")


def _dec_ldmatrix(d, op, mods, args, where) -> Fn:
    """ldmatrix: lane 8i + r gives the address of row r (16 bytes) of matrix i; register i of
    lane l gets elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i (of its
    transpose with .trans), the first in the low half. x1 / x2 ignore the addresses of lanes 8 / 16 up."""
    match = _LDMATRIX.match(op.opcode.data)
    if not match:
        raise EmulationError(f"{where}: expected ldmatrix.sync.aligned.m8n8.{{x1,x2,x4}}[.trans].shared[::cta].b16")
    count, trans = int(match.group(1)), bool(match.group(2))
    dst, addr = _one(d, op, args, 2, where)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: ldmatrix needs a shared address in brackets")
    regs = list(dst.items) if isinstance(dst, _Vec) else [dst]
    if len(regs) != count:
        raise EmulationError(f"{where}: ldmatrix .x{count} writes {count} registers")
    for r in regs:
        if not isinstance(r, _Reg) or r.storage != np.dtype(np.uint32):
            raise EmulationError(f"{where}: ldmatrix writes 32-bit registers, got {getattr(r, 'name', r)}")
    saddr = _shared_addresses(d, addr, where)
    providers = np.arange(8 * count)

    def run(m, mask):
        sh = _shared_of(m, where)
        warps = _whole_warps(m, mask, where, "ldmatrix")
        wid = np.arange(m.T // 32) if warps is None else warps
        threads = (wid[:, None] * 32 + providers).reshape(-1)
        idx = sh.bytes(m, where, "ldmatrix row load", saddr(m)[threads], threads, 16)
        sh.touch(m, where, "load", idx, threads, write=False)
        mats = sh.data[idx].view(np.uint16).reshape(wid.size, count, 8, 8)
        if trans:
            mats = mats.transpose(0, 1, 3, 2)
        words = np.ascontiguousarray(mats).view(np.uint32).reshape(wid.size, count, 32)
        for i, r in enumerate(regs):
            row = m.banks[r.bank][r.index].reshape(-1, 32)
            if warps is None:
                row[...] = words[:, i]
            else:
                row[warps] = words[:, i]

    return run


def _dec_bar(d, op, mods, args, where) -> Fn:
    """bar.sync 0 / barrier.sync[.aligned] 0 [, N]: all warps run in lockstep, so the barrier's
    work here is to end the race-detection window (and to refuse a barrier in divergent code)."""
    head = op.opcode.data.split(".")[0]
    if mods not in (["sync"], ["sync", "aligned"]) or (head == "bar" and mods != ["sync"]):
        raise EmulationError(f"{where}: expected bar.sync 0 or barrier.sync[.aligned] 0 (optionally ', N')")
    ops = [d.operand(a, op) for a in args]
    if len(ops) not in (1, 2) or not all(isinstance(x, _Imm) and not isinstance(x.value, float) for x in ops) \
            or ops[0].value != 0:
        raise EmulationError(f"{where}: only barrier 0 with a constant thread count is supported")
    count = int(ops[1].value) if len(ops) == 2 else None

    def run(m, mask):
        if count is not None and count != m.per_cta:
            raise EmulationError(f"{where}: thread count {count} is not the CTA's {m.per_cta} threads (whole warps); "
                                 "the emulator runs all warps in lockstep and supports only whole-CTA barriers")
        live = np.ones(m.T, bool) if m.active is None else m.active
        there = live if mask is None else mask
        arrived, expected = there.reshape(m.nctas, -1).sum(1), live.reshape(m.nctas, -1).sum(1)
        partial = (arrived > 0) & (arrived < expected)
        if partial.any():
            c = int(np.flatnonzero(partial)[0])
            missing = int(np.flatnonzero(live & ~there)[0])
            raise EmulationError(f"{where}: only {int(arrived[c])} of the {int(expected[c])} live threads of the CTA of "
                                 f"{m.thread(missing)} reach this barrier (a barrier in divergent code hangs the GPU)")
        if m.shared is not None:
            m.shared.barrier(None if mask is None else arrived > 0)

    return run


def _dec_atom(d, op, mods, args, where) -> Fn:
    """atom[.global].{min,max}.{u32,s32} d, [a], b: d gets the old word, memory min/max(old, b).

    Threads of a chunk (and chunks, in CTA order) apply one after another in thread order, so the
    result is that of a sequential loop: every thread's old value is the running min/max, up to it,
    of the words earlier threads offered at the same address (a segmented scan). On the GPU the
    order is unspecified; the final memory is the same for any order, the old values are not."""
    rest = mods[1:] if mods[:1] == ["global"] else mods  # generic addresses are global ones here
    if len(rest) != 2 or rest[0] not in ("min", "max") or rest[1] not in ("u32", "s32"):
        raise EmulationError(f"{where}: expected atom[.global].min/.max.u32/.s32 (other atomics are not supported)")
    how, t = rest
    dst, addr, src = _one(d, op, args, 3, where)
    if not isinstance(addr, _Addr):
        raise EmulationError(f"{where}: atom needs an address in brackets")
    dt, size = _TYPES[t], 4
    read, write, addresses = _reader(d, src, t, where), _writer(dst, where), _addresses(d, addr, where)
    bias = 2**31 if t == "s32" else 0  # order-preserving map of both types onto 0 .. 2**32 - 1

    def key(x: np.ndarray) -> np.ndarray:
        k = x.astype(np.int64) + bias
        return k if how == "min" else (2**32 - 1) - k  # max = min of reversed keys

    def unkey(k: np.ndarray) -> np.ndarray:
        k = k if how == "min" else (2**32 - 1) - k
        return (k - bias).astype(dt)

    def run(m, mask):
        a = addresses(m)
        v = np.broadcast_to(np.asarray(read(m)), (m.T,))
        if mask is not None:
            a, v = a[mask], v[mask]
        old = np.empty(a.size, dtype=dt)
        for s, idx, pos in m.memory.locate(a, size, lambda p, what, why: _fail(m, where, "atomic", mask, p, what, why)):
            mine = v if pos is None else v[pos]
            buf = m.memory.bufs[s].view(dt)
            order = np.argsort(idx, kind="stable")  # same address together, thread order kept
            at, offered = idx[order], key(mine[order])
            first = np.ones(at.size, bool)
            first[1:] = at[1:] != at[:-1]
            seg = np.cumsum(first) - 1
            lift = (seg[-1] - seg) << 32  # earlier segments above every later key: one scan for all
            upto = np.minimum.accumulate(offered + lift) - lift  # inclusive running min per address
            before = np.where(first, np.int64(2**32), np.roll(upto, 1))
            start = key(buf[at])
            seen = unkey(np.minimum(start, before))
            last = np.ones(at.size, bool)
            last[:-1] = first[1:]
            buf[at[last]] = unkey(np.minimum(start[last], upto[last]))
            got = np.empty_like(seen)
            got[order] = seen
            if pos is None:
                old = got
            else:
                old[pos] = got
        if mask is None:
            write(m, old, None)
        else:
            full = np.zeros(m.T, dtype=dt)
            full[mask] = old
            write(m, full, mask)

    return run


# ---------------------------------------------------------------------------------------------
# mma
# ---------------------------------------------------------------------------------------------

_FLOAT_ELEMS = {
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
    "e3m2": ml_dtypes.float6_e3m2fn, "e2m3": ml_dtypes.float6_e2m3fn, "e2m1": ml_dtypes.float4_e2m1fn,
}  # fmt: skip
_INT_ELEMS = {"s8": (8, True), "u8": (8, False), "s4": (4, True), "u4": (4, False), "b1": (1, False),
              "s32": (32, True)}
# .kind::f8f6f4 8-bit containers: (shift, width) of the element inside (ISA: e2m1 in the middle
# four bits, e3m2/e2m3 in the low six; the padding is ignored).
_CONTAINER = {"e3m2": (0, 6), "e2m3": (0, 6), "e2m1": (2, 4)}


def _decode(bits: np.ndarray, t: str, elem_bits: int) -> np.ndarray:
    """Element values (float64, or int64 for integers) of raw element bit patterns."""
    if t in _INT_ELEMS:
        n, signed = _INT_ELEMS[t]
        v = bits.astype(np.int64)
        if signed:
            v = np.where(v >= 1 << (n - 1), v - (1 << n), v)
        return v
    if t == "tf32":  # tensor cores read the f32 layout and ignore the low 13 bits
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    dt = np.dtype(_FLOAT_ELEMS[t])
    if t in _CONTAINER and elem_bits == 8:
        shift, w = _CONTAINER[t]
        bits = (bits >> shift) & ((1 << w) - 1)
    return bits.astype(_UNSIGNED[dt.itemsize]).view(dt).astype(np.float64)


def _encode(values: np.ndarray, t: str) -> np.ndarray:
    """Accumulator values (already of the accumulator's dtype) -> uint64 bit patterns."""
    if t == "s32":
        return values.astype(np.int32).view(np.uint32).astype(np.uint64)
    dt = np.dtype(_FLOAT_ELEMS[t])
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


class _MetadataError(EmulationError):
    """Sparse metadata the ISA leaves undefined, found in warp `warp` of a call."""

    def __init__(self, warp: int, message: str):
        self.warp = warp
        super().__init__(message)


@functools.cache
def _metadata_gather(shape: str, atype: str, selector: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane, bit shift) of the `e` field holding each (row, field) of A's M x fields_per_row
    two-bit unit indices, inverted once from `sparse_fragments.metadata_layout` (the table the
    H200 confirmed), so decoding a call is one gather for all warps."""
    lay = sparse_fragments.metadata_layout(shape, atype, selector)
    m = lay.spec.mnk[0]
    lane = np.full((m, lay.spec.fields_per_row), -1, np.int64)
    shift = np.zeros(lane.shape, np.uint32)
    live = np.argwhere(lay.row >= 0)
    for ln, v in live:
        r, f = lay.row[ln, v], lay.field[ln, v]
        assert lane[r, f] < 0, (shape, atype, selector, r, f)
        lane[r, f], shift[r, f] = ln, sparse_fragments.FIELD_BITS * v
    assert (lane >= 0).all(), (shape, atype, selector)
    return lane, shift


@dataclass(frozen=True)
class _SparseA:
    """`mma.sp`'s A operand: the compressed M x K/2 values plus each warp's metadata give the
    dense M x K A that the shared arithmetic multiplies (`sparse_fragments` is the source of
    truth for the layouts; this only vectorizes its `metadata_indices` over warps)."""

    spec: sparse_fragments.SparseSpec
    shape: str
    atype: str
    ordered: bool  # ::ordered_metadata: decreasing pairs are undefined, so refused

    def check_selector(self, selector: int) -> None:
        try:
            sparse_fragments.check_selector(self.spec, selector)
        except ValueError as e:
            raise EmulationError(str(e)) from None

    def indices(self, e_words: np.ndarray, selector: int) -> np.ndarray:
        """[W, 32] metadata words -> [W, M, K/2] element indices of the compressed A (position
        of each kept element in its chunk); `_MetadataError` where the ISA leaves it undefined."""
        self.check_selector(selector)
        spec, pat = self.spec, self.spec.pattern
        lane, shift = _metadata_gather(self.shape, self.atype, selector)
        e = np.asarray(e_words).astype(np.uint32, copy=False)
        units = ((e[:, lane] >> shift) & np.uint32(3)).astype(np.int64)  # [W, M, fields]
        w, m = units.shape[:2]
        eb, ub = spec.elem_bits, spec.unit_bits
        if eb >= ub:  # an element is eb // ub units (tf32: two, which must form one element)
            r = eb // ub
            u = units.reshape(w, m, -1, r)
            whole = (u == u[..., :1] + np.arange(r)).all(-1) & (u[..., 0] % r == 0)
            if not whole.all():
                wi, row, col = (int(x) for x in np.argwhere(~whole)[0])
                raise _MetadataError(wi, f"metadata units {u[wi, row, col].tolist()} of A row {row}, compressed "
                                     f"column {col} do not select one whole .{self.atype} element (only "
                                     "0b0100 and 0b1110 are meaningful)")
            idx = u[..., 0] // r
        else:  # a unit is ub // eb elements (4-bit pairs)
            r = ub // eb
            idx = (units[..., None] * r + np.arange(r)).reshape(w, m, -1)
        if pat.kept_atoms == 2:
            first = idx.reshape(w, m, -1, 2, pat.atom)[..., 0]  # [W, M, chunks, 2]
            bad = first[..., 0] == first[..., 1]
            why = "the same index twice (0b0000, 0b0101, 0b1010, 0b1111 are invalid)"
            if self.ordered and not bad.any():
                bad = first[..., 1] < first[..., 0]
                why = ("decreasing indices, which mma.sp::ordered_metadata leaves undefined (plain mma.sp "
                       "accepts them)")
            if bad.any():
                wi, row, g = (int(x) for x in np.argwhere(bad)[0])
                fields = (2 * g, 2 * g + 1)  # a chunk's two kept units
                src = ", ".join(f"lane {int(lane[row, j])} bits {int(shift[row, j]) + 1}..{int(shift[row, j])}"
                                for j in fields)
                lo = g * pat.chunk
                raise _MetadataError(wi, f"metadata of A row {row}, chunk {g} (columns {lo}..{lo + pat.chunk - 1}) "
                                     f"is {[int(units[wi, row, j]) for j in fields]} ({src}): {why}")
        return idx

    def dense(self, values: np.ndarray, e_words: np.ndarray, selector: int) -> np.ndarray:
        """[W, 1, M, K/2] kept values -> [W, 1, M, K] dense A (`sparse_fragments.decompress`)."""
        idx = self.indices(e_words, selector)
        w, _, m, half = values.shape
        flat = sparse_fragments.decompress(values.reshape(w * m, half), idx.reshape(w * m, half), self.spec.pattern)
        return flat.reshape(w, 1, m, 2 * half)


@functools.cache
def _scale_gather(operand: str, scale_vec: str, byte_id: int, thread_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane, bit shift) of the byte holding each (row or column, chunk) scale, inverted once from
    `scale_fragments.scale_layout` (the source of truth), so decoding a call is one gather."""
    index, chunk = scale_fragments.scale_layout(operand, scale_vec, byte_id, thread_id)
    size, chunks = scale_fragments.extent(operand), scale_fragments.SCALE_VECS[scale_vec].chunks
    lane = np.full((size, chunks), -1, np.int64)
    shift = np.zeros((size, chunks), np.uint32)
    for ln, byte in np.argwhere(index >= 0):
        i, j = index[ln, byte], chunk[ln, byte]
        assert lane[i, j] < 0, (operand, scale_vec, byte_id, thread_id, i, j)
        lane[i, j], shift[i, j] = ln, 8 * byte
    assert (lane >= 0).all(), (operand, scale_vec, byte_id, thread_id)
    return lane, shift


@dataclass(frozen=True)
class _BlockScale:
    """The scale operands of a `.block_scale` variant: which bytes hold SF_A / SF_B for given
    selectors, what they mean, and how many K elements each one scales."""

    scale_vec: str  # "1X" / "2X" / "4X" (the ISA default filled in)
    stype: str  # "ue8m0" / "ue4m3"
    block: int  # K elements per scale: the logical K (dense A's) / chunks

    def check(self, operand: str, ids) -> tuple[int, int]:
        """(byte_id, thread_id) as ints; EmulationError where Table 37 leaves them undefined."""
        try:
            bid, tid = (int(x) for x in np.ravel(ids))
        except (TypeError, ValueError):
            raise EmulationError(f"scale selectors of {operand.upper()} must be (byte_id, thread_id), "
                                 f"got {ids!r}") from None
        try:
            scale_fragments.scale_layout(operand, self.scale_vec, bid, tid)
        except ValueError as e:
            raise EmulationError(str(e)) from None
        return bid, tid

    def factors(self, operand: str, words: np.ndarray, ids) -> np.ndarray:
        """[W, 32] scale words and the selectors ((byte_id, thread_id), or [W, 2] per warp) ->
        [W, M or N, chunks] scale values (float64)."""
        words = np.asarray(words).astype(np.uint32, copy=False)
        ids = np.asarray(ids, dtype=np.int64)
        per_warp = ids.reshape(-1, 2) if ids.ndim == 2 else np.broadcast_to(ids, (words.shape[0], 2))
        size, chunks = scale_fragments.extent(operand), scale_fragments.SCALE_VECS[self.scale_vec].chunks
        out = np.empty((words.shape[0], size, chunks))
        for sel in np.unique(per_warp, axis=0):
            bid, tid = self.check(operand, sel)
            lane, shift = _scale_gather(operand, self.scale_vec, bid, tid)
            warps = np.flatnonzero((per_warp == sel).all(1))
            raw = (words[warps][:, lane] >> shift) & np.uint32(0xFF)
            out[warps] = scale_fragments.scale_values(raw, self.stype)
        return out

    def per_element(self, sa: np.ndarray, sb: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
        """The scale of every element of A and B: [W, 1, M, K], [W, 1, K, N], and their type."""
        sa_k = np.repeat(sa, self.block, axis=-1)[:, None]
        sb_k = np.repeat(sb.transpose(0, 2, 1), self.block, axis=-2)[:, None]
        return sa_k, sb_k, self.stype


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


def _scale_word_operand(d: _Decode, op, text: str, where: str) -> tuple[str, int]:
    """scale-a-data / scale-b-data: a 32-bit register, bare or as a one-register vector `{%r}`."""
    inner = text[1:-1].strip() if text.startswith("{") and text.endswith("}") else text
    r = d.operand(inner, op) if "," not in inner else None
    if not isinstance(r, _Reg) or r.storage.itemsize != 4 or r.storage.kind == "b":
        raise EmulationError(f"{where}: the scale operand {text} must be a 32-bit register")
    return r.bank, r.index


def _selector_pair(d: _Decode, op, text: str, where: str) -> list:
    """{byte-id, thread-id}: each an integer constant or a 16-bit register (ISA: .u16 values)."""
    if not (text.startswith("{") and text.endswith("}")) or text.count(",") != 1:
        raise EmulationError(f"{where}: expected a selector pair {{byte-id, thread-id}}, got {text!r}")
    out = []
    for part in (x.strip() for x in text[1:-1].split(",")):
        x = d.operand(part, op)
        if isinstance(x, _Imm) and not isinstance(x.value, float) and not x.fbits and 0 <= int(x.value) < 1 << 16:
            out.append(int(x.value))
        elif isinstance(x, _Reg) and x.storage.itemsize == 2 and x.rtype != "f16":
            out.append((x.bank, x.index))
        else:
            raise EmulationError(f"{where}: selector {part!r} in {text} must be an unsigned 16-bit constant "
                                 "or a 16-bit integer register")
    return out


def _dec_mma(d: _Decode, op: ptx.MmaOp, where: str) -> Fn:
    try:
        sem = mma_semantics(op.opcode.data, d.arch)
    except (ValueError, EmulationError) as e:
        raise EmulationError(f"{where}: {e}") from None
    if d.target is not None:  # what ptxas would refuse, the emulator does not run either
        why = sem.variant.legal(d.target, d.version)
        if why:
            raise EmulationError(f"{where}: not available on {d.target} with PTX {d.version}: {'; '.join(why)}")
    groups = op.groups()
    extra = groups["extra"]
    want = []
    if sem.sparse is not None:
        want += ["the metadata register e", "the sparsity selector f"]
    if sem.scale is not None:
        want += ["scale-a-data", "{byte-id-a, thread-id-a}", "scale-b-data", "{byte-id-b, thread-id-b}"]
    if len(extra) != len(want):
        if not want:
            raise EmulationError(f"{where}: unexpected operands after c: {extra}")
        if sem.scale is None:
            raise EmulationError(f"{where}: mma.sp needs the metadata register and the sparsity selector "
                                 f"after c, got {extra}")
        raise EmulationError(f"{where}: expected {', '.join(want)} after c, got {extra}")
    selector, meta = None, None
    if sem.sparse is not None:
        e, f = (d.operand(x, op) for x in extra[:2])
        if not isinstance(e, _Reg) or e.storage.itemsize != 4 or e.storage.kind == "b":
            raise EmulationError(f"{where}: the metadata operand {extra[0]} must be a 32-bit register")
        if not isinstance(f, _Imm) or isinstance(f.value, float) or f.fbits:
            raise EmulationError(f"{where}: the sparsity selector {extra[1]} must be an integer constant")
        selector, meta = int(f.value), (e.bank, e.index)
        try:
            sem.sparse.check_selector(selector)
        except EmulationError as err:
            raise EmulationError(f"{where}: {err}") from None
    scales = {}  # operand -> ((bank, index) of the scale word, [byte-id, thread-id] constants or registers)
    if sem.scale is not None:
        rest = extra[-4:]
        for operand, word, ids in (("a", rest[0], rest[1]), ("b", rest[2], rest[3])):
            pair = _selector_pair(d, op, ids, where)
            if all(isinstance(x, int) for x in pair):
                try:
                    sem.scale.check(operand, pair)
                except EmulationError as err:
                    raise EmulationError(f"{where}: {err}") from None
            scales[operand] = (_scale_word_operand(d, op, word, where), pair)
    regs = {}
    for name, frag in (("d", sem.d), ("a", sem.a), ("b", sem.b), ("c", sem.c)):
        rs = [d.reg(r, op) for r in groups[name]]
        if len(rs) != frag.regs:
            raise EmulationError(f"{where}: {name} needs {frag.regs} registers, got {len(rs)}")
        for r in rs:
            if r.storage.itemsize * 8 != frag.lay.reg_bits or r.storage.kind == "b":
                raise EmulationError(f"{where}: {r.name} (.{r.rtype}) is not a {frag.lay.reg_bits}-bit register")
        regs[name] = [(r.bank, r.index) for r in rs]

    def gather(m: _Machine, name: str, warps) -> np.ndarray:
        words = np.stack([m.banks[bk][i] for bk, i in regs[name]])  # [regs, T]
        words = words.reshape(len(regs[name]), -1, 32)
        if warps is not None:
            words = words[:, warps]
        return words.transpose(1, 0, 2).reshape(words.shape[1], -1)

    def lane_words(m: _Machine, bank_index: tuple[str, int], warps) -> np.ndarray:
        w = m.banks[bank_index[0]][bank_index[1]].reshape(-1, 32)
        return w if warps is None else w[warps]

    def selector_values(m: _Machine, operand: str, warps) -> np.ndarray:
        """[W, 2] (byte-id, thread-id) per warp; a register must hold one value across its warp
        (the ISA gives one selector per instruction), and the value must be one Table 37 defines."""
        cols = []
        for x in scales[operand][1]:
            if isinstance(x, int):
                cols.append(np.full(m.T // 32 if warps is None else len(warps), x, np.int64))
                continue
            v = lane_words(m, x, warps).astype(np.int64)
            split = (v != v[:, :1]).any(1)
            if split.any():
                w = int(np.flatnonzero(split)[0])
                w = w if warps is None else int(warps[w])
                raise EmulationError(f"{where}: the warp of {m.thread(w * 32)}: selector register of "
                                     f"{operand.upper()} differs across lanes ({sorted(set(v[split][0].tolist()))})")
            cols.append(v[:, 0])
        ids = np.stack(cols, 1)
        for sel in np.unique(ids, axis=0):
            try:
                sem.scale.check(operand, sel)
            except EmulationError as err:
                w = int(np.flatnonzero((ids == sel).all(1))[0])
                w = w if warps is None else int(warps[w])
                raise EmulationError(f"{where}: the warp of {m.thread(w * 32)}: {err}") from None
        return ids

    def run(m: _Machine, mask):
        warps = None
        if mask is not None:
            lanes = mask.reshape(-1, 32)
            some, every = lanes.any(1), lanes.all(1)
            partial = some & ~every
            if partial.any():
                w = int(np.flatnonzero(partial)[0])
                raise EmulationError(
                    f"{where}: only {int(lanes[w].sum())} of 32 lanes of the warp of "
                    f"{m.thread(w * 32)} execute this mma (.sync.aligned needs the whole warp)")
            warps = np.flatnonzero(every)
        e_words = None if meta is None else lane_words(m, meta, warps)
        kw = {}
        if scales:
            kw = {"scale_a": lane_words(m, scales["a"][0], warps), "ids_a": selector_values(m, "a", warps),
                  "scale_b": lane_words(m, scales["b"][0], warps), "ids_b": selector_values(m, "b", warps)}
        try:
            out = sem(gather(m, "a", warps), gather(m, "b", warps), gather(m, "c", warps),
                      e_words, selector, **kw)  # [W, regs, 32]
        except _MetadataError as err:
            w = err.warp if warps is None else int(warps[err.warp])
            raise EmulationError(f"{where}: the warp of {m.thread(w * 32)}: {err}") from None
        for j, (bk, i) in enumerate(regs["d"]):
            row = m.banks[bk][i].reshape(-1, 32)
            if warps is None:
                row[...] = out[:, j, :]
            else:
                row[warps] = out[:, j, :]
        m.mma_count += 1

    return run


# ---------------------------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------------------------

_DECODERS = {
    "mov": _dec_mov, "add": _dec_binary, "sub": _dec_binary, "min": _dec_binary, "max": _dec_binary,
    "and": _dec_binary, "or": _dec_binary, "xor": _dec_binary, "not": _dec_not,
    "mul": _dec_mul_mad, "mad": _dec_mul_mad, "div": _dec_div_rem, "rem": _dec_div_rem,
    "shl": _dec_shift, "shr": _dec_shift, "bfe": _dec_bfe, "bfi": _dec_bfi, "setp": _dec_setp,
    "selp": _dec_selp, "cvt": _dec_cvt, "cvta": _dec_cvta, "ld": _dec_ld, "st": _dec_st,
    "popc": _dec_popc, "abs": _dec_abs_neg, "neg": _dec_abs_neg, "atom": _dec_atom,
    "cp": _dec_cp, "ldmatrix": _dec_ldmatrix, "bar": _dec_bar, "barrier": _dec_bar,
}  # fmt: skip


@dataclass
class _Step:
    fn: Fn | None
    kind: str  # "op", "bra", "ret"
    guard: tuple[str, int, bool] | None  # (bank, index, negated)
    where: str
    target: int = -1


class Program:
    """One kernel decoded for emulation; `run` executes it for a grid."""

    def __init__(self, entry: ptx.EntryOp, lines: dict | None = None, source: str = "<ptx>",
                 arch: str = mma_arith.DEFAULT_ARCH):
        self.name = entry.sym_name.data
        d = _Decode(entry, lines or {}, source, arch)
        self.params = d.params
        self.max_threads = int(entry.max_threads.data) if entry.max_threads is not None else None
        body = list(entry.body.ops)
        for op in body:
            if isinstance(op, ptx.RegOp):
                prefix = op.prefix.data
                if prefix in d.banks:
                    raise EmulationError(f"{d.where(op)}: register prefix {prefix} declared twice")
                d.banks[prefix] = (op.type.data, int(op.count.data))
        self._layout_shared(d, [op for op in body if isinstance(op, ptx.SharedOp)])
        code = [op for op in body if isinstance(op, (ptx.InstOp, ptx.MmaOp, ptx.LabelOp))]
        index = 0
        for op in code:
            if isinstance(op, ptx.LabelOp):
                if op.label.data in d.labels:
                    raise EmulationError(f"{d.where(op)}: label defined twice")
                d.labels[op.label.data] = index
            else:
                index += 1
        self.banks = dict(d.banks)
        self.steps: list[_Step] = [self._decode(d, op) for op in code if not isinstance(op, ptx.LabelOp)]

    def _layout_shared(self, d: _Decode, decls: list) -> None:
        """Static buffers in declaration order from `_SHARED_BASE`, each at its alignment; every
        `.extern` buffer at the end, where the launch's dynamic shared memory starts."""
        at = _SHARED_BASE
        for op in decls:
            name = op.sym_name.data
            if name in d.shared:
                raise EmulationError(f"{d.where(op)}: shared buffer {name} declared twice")
            if not op.dynamic:
                at = -(-at // int(op.align.data)) * int(op.align.data)
                d.shared[name] = at
                at += int(op.size.data)
        align = max([16] + [int(op.align.data) for op in decls if op.dynamic])
        self.static_shared = at - _SHARED_BASE
        self.dynamic_at = -(-at // align) * align
        for op in decls:
            if op.dynamic:
                d.shared.setdefault(op.sym_name.data, self.dynamic_at)
        self.has_shared = bool(decls)
        self.target = d.target

    @staticmethod
    def _decode(d: _Decode, op) -> _Step:
        where = d.where(op)
        if isinstance(op, ptx.MmaOp):
            return _Step(_dec_mma(d, op, where), "op", None, where)
        guard = None
        if op.guard is not None:
            g = op.guard.data
            r = d.reg(g.lstrip("!"), op)
            if r.rtype != "pred":
                raise EmulationError(f"{where}: guard {g} is not a .pred register")
            guard = (r.bank, r.index, g.startswith("!"))
        opcode = op.opcode.data
        parts = opcode.split(".")
        args = op.arg_values()
        if parts[0] == "bra":
            if parts[1:] not in ([], ["uni"]) or len(args) != 1 or args[0] not in d.labels:
                raise EmulationError(f"{where}: expected bra[.uni] LABEL with a label of this kernel")
            return _Step(None, "bra", guard, where, d.labels[args[0]])
        if parts[0] in ("ret", "exit"):
            if len(parts) > 1 or args:
                raise EmulationError(f"{where}: expected plain {parts[0]}")
            return _Step(None, "ret", guard, where)
        decoder = _DECODERS.get(parts[0])
        if decoder is None:
            raise EmulationError(f"{where}: the emulator does not implement {parts[0]!r}")
        return _Step(decoder(d, op, parts[1:], args, where), "op", guard, where)

    def run(self, grid, block, args: Sequence, *, shared_bytes: int = 0, max_steps: int = 10_000_000,
            memory_budget: int = 256 << 20) -> list[np.ndarray]:
        """Run the kernel for `grid` x `block` on `args` (like `cuda_runtime.run_kernel`): the
        final contents of every ndarray argument, in order. Scalars are passed by value;
        `shared_bytes` is the dynamic shared memory per CTA (what `.extern .shared` names)."""
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        threads = block[0] * block[1] * block[2]
        if threads > 1024:
            raise EmulationError(f"block {block} has {threads} threads; at most 1024 per CTA")
        if self.max_threads is not None and threads > self.max_threads:
            raise EmulationError(f"{self.name}: block {block} exceeds .maxntid {self.max_threads}")
        if len(args) != len(self.params):
            raise EmulationError(f"{self.name} takes {len(self.params)} parameters, got {len(args)} arguments")
        shared_size = self._shared_size(shared_bytes)
        memory = _Memory(args)
        params = {}
        for i, ((ptype, pname), arg) in enumerate(zip(self.params, args)):
            size = _TYPES[ptype].itemsize
            if isinstance(arg, np.ndarray):
                if size != 8:
                    raise EmulationError(f"parameter {pname} is .{ptype}; an array argument is a 64-bit pointer")
                value = np.array([memory.pointer(i)], dtype=np.uint64)
            elif isinstance(arg, np.generic):
                if arg.dtype.itemsize != size:
                    raise EmulationError(f"parameter {pname} is .{ptype}, argument {i} has {arg.dtype.itemsize} bytes")
                value = np.array([arg])
            else:
                raise TypeError(f"kernel argument {i} is {type(arg).__name__}; pass an np.ndarray or a NumPy scalar")
            params[pname] = value.view(np.uint8)
        per_cta = -(-threads // 32) * 32
        bytes_per_thread = sum(_STORAGE[t].itemsize * n for t, n in self.banks.values()) + 64
        bytes_per_thread += 10 * (shared_size or 0) // per_cta + (8 if shared_size is not None else 0)
        ctas = grid[0] * grid[1] * grid[2]
        chunk = max(1, min(ctas, memory_budget // max(1, bytes_per_thread * per_cta)))
        stats = RunStats(threads=ctas * threads, ctas=ctas)
        start = time.perf_counter()
        with Progress(f"emulating {self.name}", ctas, "CTAs") as progress:  # only on a terminal
            for cta0 in range(0, ctas, chunk):
                m = _Machine(self, memory, params, grid, block, cta0, min(chunk, ctas - cta0), shared_size)
                stats.instructions += self._execute(m, max_steps)
                stats.mma += m.mma_count
                stats.chunks += 1
                progress.advance(m.nctas)
        stats.seconds = time.perf_counter() - start
        self.stats = stats
        out = []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                host = np.ascontiguousarray(a)
                raw = memory.bufs[i][: memory.sizes[i]]
                out.append(raw.view(host.dtype).reshape(host.shape).copy() if host.size else host.copy())
        return out

    def _shared_size(self, shared_bytes: int) -> int | None:
        """Bytes of shared memory per CTA (None: the kernel uses none), within the target's limit."""
        if not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
            raise EmulationError(f"shared_bytes must be a non-negative integer, got {shared_bytes!r}")
        if not self.has_shared and not shared_bytes:
            return None
        from tilemma.compiler.core.targets import max_shared_per_cta

        target = self.target or "sm_90"
        try:
            limit = max_shared_per_cta(target)
        except ValueError as err:
            raise EmulationError(f"{self.name}: {err}") from None
        if self.static_shared + shared_bytes > limit:
            raise EmulationError(
                f"{self.name}: {self.static_shared} bytes of static and {shared_bytes} bytes of dynamic shared memory "
                f"exceed the {limit} bytes ({limit // 1024} KiB) one CTA may use on {target}")
        return self.dynamic_at - _SHARED_BASE + int(shared_bytes)

    def _execute(self, m: _Machine, max_steps: int) -> int:
        steps, n, pc, count = self.steps, len(self.steps), 0, 0
        while pc < n and not m.done:
            step = steps[pc]
            count += 1
            if count > max_steps:
                raise EmulationError(f"{step.where}: more than {max_steps} instructions executed; an endless loop?")
            mask = m.active
            if step.guard is not None:
                bank, i, neg = step.guard
                p = m.banks[bank][i]
                p = ~p if neg else p
                if mask is not None:
                    p = p & mask
                if not p.any():
                    pc += 1
                    continue
                mask = None if (mask is None and p.all()) else p
            if step.kind == "op":
                step.fn(m, mask)
                pc += 1
            elif step.kind == "bra":
                if mask is not None and (m.active is None or not np.array_equal(mask, m.active)):
                    live = m.active if m.active is not None else np.ones(m.T, bool)
                    off = np.flatnonzero(live & ~mask)
                    raise EmulationError(
                        f"{step.where}: non-uniform branch: {int(mask.sum())} live threads take it, "
                        f"{off.size} do not (first: {m.thread(int(off[0]))}); the emulator runs "
                        "all threads in lockstep")
                pc = step.target
            else:  # ret / exit
                if mask is None:
                    m.done = True
                else:
                    m.active = (m.active if m.active is not None else np.ones(m.T, bool)) & ~mask
                    m.done = not m.active.any()
                pc += 1
        return count


def _dims(d, what: str) -> tuple[int, int, int]:
    t = tuple(int(x) for x in (d if isinstance(d, (tuple, list)) else (d,)))
    t = t + (1,) * (3 - len(t))
    if len(t) != 3 or min(t) < 1:
        raise EmulationError(f"{what} must be 1 to 3 positive sizes, got {d!r}")
    return t  # type: ignore[return-value]


def _parsed(source) -> ParsedPtx:
    if isinstance(source, str):
        return parse_ptx_modules(source)
    if isinstance(source, ptx.ModuleOp_):
        return parse_ptx_modules(print_ptx(source))
    if isinstance(source, ModuleOp):
        found = [op for op in source.walk() if isinstance(op, ptx.ModuleOp_)]
        if not found:
            raise EmulationError("no ptx.module in the input; lower tile IR first")
        return parse_ptx_modules("\n".join(print_ptx(p) for p in found))
    raise TypeError(f"expected PTX text or a ptx.module, got {type(source).__name__}")


def compile_entry(ptx_text_or_module, entry: str | None = None, arch: str = mma_arith.DEFAULT_ARCH) -> Program:
    """Decode kernel `entry` (the only one when None) of PTX text or a ptx.module, for a GPU
    `arch` (whose tensor-core arithmetic mma follows). Modules are printed and read back, so
    error messages point at lines of the PTX the GPU would get."""
    parsed = _parsed(ptx_text_or_module)
    try:
        e = parsed.entry(entry)
    except ValueError as err:
        raise EmulationError(str(err)) from None
    return Program(e, parsed.lines, parsed.source, arch)


def emulate(ptx_text_or_module, entry: str, grid, block, args: list, *, arch: str = mma_arith.DEFAULT_ARCH,
            **options) -> list[np.ndarray]:
    """Run `entry` of a PTX module on the CPU, mirroring `cuda_runtime.run_kernel` on a GPU `arch`
    (sm_90 by default): arrays are copied in, the grid runs, and the final contents of every
    ndarray argument come back."""
    return compile_entry(ptx_text_or_module, entry, arch).run(grid, block, args, **options)
