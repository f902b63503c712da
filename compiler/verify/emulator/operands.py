"""PTX operands, read once when a kernel is decoded: what each operand's text is (register,
immediate, special register, address, vector), and the closures that read it from the machine as
the type an instruction computes in, or write a result back under a guard mask."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tilemma.compiler.verify.emulator.machine import (
    _STORAGE, _TYPES, _UNSIGNED, MAP_PARAM, EmulationError, _as_storage, _Machine, param_address,
)
from tilemma.dialects import ptx


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
} | {"%laneid", "%warpid", "%nwarpid", "%cluster_ctarank", "%cluster_nctarank"}
_REG_RE = re.compile(r"^(%[A-Za-z_$][A-Za-z_$]*?)(\d+)$")
_MAP_PARAM = re.compile(r"\.align\s+64\s+\.b8\s+([A-Za-z_$][\w$]*)\[128\]")
_ADDR_RE = re.compile(r"^\[([%A-Za-z_$][\w$]*)(?:\+(-?\d+)|-(\d+))?\]$")


class _Where:
    """Where an instruction is, for error messages: `source:line: `its text``. Written out only
    when a message uses it (in an f-string, as a str): decoding thousands of instructions, each
    keeping its own for the errors it may raise, uses almost none."""

    __slots__ = ("_decode", "_op", "_text")

    def __init__(self, decode: _Decode, op):
        self._decode, self._op, self._text = decode, op, None

    def __str__(self) -> str:
        if self._text is None:
            d, op = self._decode, self._op
            line = d.lines.get(op)
            at = f"{d.source}:{line}" if line else d.source
            self._text = f"{at}: `{op.text() if hasattr(op, 'text') else op.name}`"
        return self._text

    def __repr__(self) -> str:
        return repr(str(self))


class _Decode:
    """Per-entry decoding context: registers, labels, parameters; operand parsing.

    Operands, registers and readers are memoised by their text (and type): a kernel names a few
    hundred registers thousands of times, and what a text means is fixed once the registers and
    shared buffers are declared (decoding starts after that). Only what decodes is kept, so a bad
    operand raises, naming its own instruction, wherever it appears."""

    def __init__(self, entry: ptx.EntryOp, lines: dict, source: str, arch: str):
        self.entry, self.lines, self.source, self.arch = entry, lines, source, arch
        module = entry.parent_op()
        self.target = module.target.data if isinstance(module, ptx.ModuleOp_) else None
        self.version = module.version.data if isinstance(module, ptx.ModuleOp_) else None
        self.banks: dict[str, tuple[str, int]] = {}
        self.labels: dict[str, int] = {}
        self.params: list[tuple[str, str]] = []
        self.shared: dict[str, int] = {}  # shared buffer -> its shared address (set by Program)
        self.approximate: set[str] = set()  # `.approx` instructions decoded (modelled within the ISA's bound)
        self._regs: dict[str, _Reg] = {}
        self._operands: dict[str, object] = {}
        self.readers: dict[tuple, Callable] = {}  # (operand, type) -> its reader (see `_reader`)
        for p in entry.params.data:
            parts = p.data.split()
            if m := _MAP_PARAM.fullmatch(p.data):  # a tensor map (cp.async.bulk.tensor's)
                self.params.append((MAP_PARAM, m.group(1)))
                continue
            if len(parts) != 2 or not parts[0].startswith(".") or parts[0][1:] not in _TYPES:
                raise EmulationError(f"{source}: kernel {entry.sym_name.data}: cannot read parameter {p.data!r}")
            self.params.append((parts[0][1:], parts[1]))

    def where(self, op) -> _Where:
        return _Where(self, op)

    def reg(self, text: str, op) -> _Reg:
        r = self._regs.get(text)
        if r is None:
            r = self._regs[text] = self._reg(text, op)
        return r

    def _reg(self, text: str, op) -> _Reg:
        m = _REG_RE.match(text)
        if not m or m.group(1) not in self.banks:
            raise EmulationError(f"{self.where(op)}: {text!r} is not a declared register")
        rtype, count = self.banks[m.group(1)]
        index = int(m.group(2))
        if index >= count:
            raise EmulationError(f"{self.where(op)}: {text} is beyond `.reg .{rtype} {m.group(1)}<{count}>`")
        return _Reg(text, m.group(1), index, rtype)

    def operand(self, text: str, op):
        known = self._operands.get(text)
        if known is None:
            known = self._operands[text] = self._operand(text, op)
        return known

    def _operand(self, text: str, op):
        if text.startswith("{") and text.endswith("}"):
            return _Vec(tuple(self.operand(x.strip(), op) for x in text[1:-1].split(",")))
        if text in self.shared:
            return _Imm(text, self.shared[text])
        maps = [n for t, n in self.params if t == MAP_PARAM]
        if text in maps:  # its address (`mov.b64 %rd, NAME`)
            return _Imm(text, param_address([n for _, n in self.params].index(text)))
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


# Instruction decoders: each returns fn(machine, mask) -> next pc or None

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
    """A function giving the operand's value as the instruction's type `t` (array or scalar);
    one per distinct (operand, type) of the kernel."""
    key = (operand, t)
    read = d.readers.get(key)
    if read is None:
        read = d.readers[key] = _new_reader(operand, t, where)
    return read


def _new_reader(operand, t: str, where: str) -> Callable[[_Machine], object]:
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


def _group_count(d: _Decode, op, args: list[str], where: str, name: str) -> int:
    """The one operand of a `NAME N` wait (cp.async.wait_group, wgmma.wait_group): groups left
    pending, a non-negative integer constant."""
    (n,) = _one(d, op, args, 1, where)
    if not isinstance(n, _Imm) or isinstance(n.value, float) or n.fbits or n.value < 0:
        raise EmulationError(f"{where}: {name} takes a non-negative integer constant")
    return int(n.value)
