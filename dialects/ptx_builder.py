"""Builds the body of a `ptx.entry`: allocates typed registers and appends instructions.

Registers live in one bank per PTX register type (`%r` .b32, `%rd` .b64, `%f` .f32, `%fd` .f64,
`%p` .pred); the `.reg` declarations are written once the body is complete and the counts are
known.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from xdsl.ir import Block, Region

from tilemma.dialects import ptx

BANKS = {"b32": "%r", "b64": "%rd", "f32": "%f", "f64": "%fd", "pred": "%p", "b16": "%h"}


def f32_literal(value: float) -> str:
    """PTX's exact spelling of an f32 constant (`0f3F800000`)."""
    return "0f" + struct.pack(">f", value).hex().upper()


def f64_literal(value: float) -> str:
    return "0d" + struct.pack(">d", value).hex().upper()


class RegisterFile:
    """Names of one kernel's registers, one bank per PTX register type, and its labels."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(BANKS, 0)
        self.labels = 0

    def reg(self, bank: str) -> str:
        name = f"{BANKS[bank]}{self.counts[bank]}"
        self.counts[bank] += 1
        return name

    def label(self, stem: str) -> str:
        self.labels += 1
        return f"${stem}_{self.labels}"

    def declarations(self) -> list[ptx.RegOp]:
        return [ptx.RegOp(t, BANKS[t], n) for t, n in self.counts.items() if n]


class PtxBuilder:
    """A whole kernel body written by hand (the probes and tests): a register file plus the ops."""

    def __init__(self) -> None:
        self.ops: list = []
        self.file = RegisterFile()

    def reg(self, bank: str) -> str:
        return self.file.reg(bank)

    def regs(self, bank: str, n: int) -> list[str]:
        return [self.reg(bank) for _ in range(n)]

    def label(self, stem: str) -> str:
        return self.file.label(stem)

    def emit(self, opcode: str, *args: str | int, guard: str | None = None) -> None:
        self.ops.append(ptx.InstOp(opcode, [str(a) for a in args], guard))

    def place_label(self, name: str) -> None:
        self.ops.append(ptx.LabelOp(name))

    def comment(self, text: str) -> None:
        self.ops.append(ptx.CommentOp(text))

    def mma(
        self,
        opcode: str,
        d: Sequence[str],
        a: Sequence[str],
        b: Sequence[str],
        c: Sequence[str],
        extra: Sequence[str] = (),
    ) -> None:
        self.ops.append(ptx.MmaOp(opcode, d, a, b, c, extra))

    # Small idioms used by the lowering -----------------------------------------------------

    def const_u32(self, value: int) -> str:
        r = self.reg("b32")
        self.emit("mov.u32", r, value)
        return r

    def special(self, name: str) -> str:
        r = self.reg("b32")
        self.emit("mov.u32", r, name)
        return r

    def entry(self, name: str, params: Sequence[str], max_threads: int | None = None) -> ptx.EntryOp:
        body = Region(Block([*self.file.declarations(), *self.ops]))
        return ptx.EntryOp(name, params, body, max_threads)
