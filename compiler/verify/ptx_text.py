"""Reads the PTX text tilemma prints back into `ptx` dialect operations.

The `ptx` dialect prints one PTX line per operation (`tilemma.dialects.ptx.print_module`), so the
text a user keeps, edits or pipes into `tilemma run` can be turned back into the very operations
it came from: the emulator then runs exactly what the GPU would receive, and a test can check that
print -> parse -> print is the identity. This is deliberately a small line-based reader for the
subset the printer writes, not a general PTX parser: anything else is rejected with its line
number and text, rather than guessed at.

The subset, per line (leading indentation is free; the printer uses four spaces):

    .version V / .target T / .address_size N          module header, in this order
    .extern .shared .align A .b8 NAME[];               ptx.shared (dynamic) of the kernel that follows
    .visible .entry NAME(  .param DECL, ...  )         a kernel, one parameter per line
    .maxntid N, 1, 1                                   optional, before the body
    .maxnreg N                                         optional, after .maxntid
    .minnctapersm N                                    optional, after those
    .reqnctapercluster N, 1, 1                         optional, last
    {  ...  }                                          the body, one operation per line:
    .reg .TYPE %PREFIX<COUNT>;                         ptx.reg
    .shared .align A .b8 NAME[SIZE];                   ptx.shared (static)
    // text                                            ptx.comment
    LABEL:                                             ptx.label
    [@[!]%p] opcode arg, arg, ...;                     ptx.inst (an arg may be a vector {%r1, %r2})
    mma.... {d..}, {a..}, {b..}, {c..}[, extra...];    ptx.mma (mma.sp: extra = %rE, F; .block_scale:
                                                       then %rSA, {BA, TA}, %rSB, {BB, TB})
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tilemma.dialects import ptx
from xdsl.dialects.builtin import IntegerAttr, StringAttr
from xdsl.ir import Block, Operation, Region
from xdsl.utils.exceptions import VerifyException

__all__ = ["ParsedPtx", "PtxSyntaxError", "parse_ptx", "parse_ptx_modules", "print_ptx"]


class PtxSyntaxError(ValueError):
    """A line that tilemma's PTX printer could not have written; names the line and its text."""

    def __init__(self, source: str, line: int, text: str, message: str):
        self.source, self.line, self.text = source, line, text
        super().__init__(f"{source}:{line}: {message}: {text.strip()!r}")


@dataclass
class ParsedPtx:
    """Parsed modules plus the source line of every operation (for located emulator errors)."""

    modules: list[ptx.ModuleOp_]
    lines: dict[Operation, int]
    source: str

    def entry(self, name: str | None = None) -> ptx.EntryOp:
        """The kernel called `name` (or the only kernel when `name` is None)."""
        entries = [e for m in self.modules for e in m.body.ops if isinstance(e, ptx.EntryOp)]
        if name is None:
            if len(entries) != 1:
                raise ValueError(f"{self.source}: {len(entries)} kernels; name the entry to use")
            return entries[0]
        for e in entries:
            if e.sym_name.data == name:
                return e
        have = ", ".join(e.sym_name.data for e in entries) or "none"
        raise ValueError(f"{self.source}: no kernel {name!r} (kernels: {have})")


_HEADER = (("version", re.compile(r"^\.version\s+(\d+\.\d+)$")),
           ("target", re.compile(r"^\.target\s+([\w,\s]+?)$")),
           ("address_size", re.compile(r"^\.address_size\s+(\d+)$")))  # fmt: skip
_ENTRY = re.compile(r"^\.visible\s+\.entry\s+([A-Za-z_$][\w$]*)\s*\($")
# a scalar `.TYPE NAME`, or a tensor map `.align 64 .b8 NAME[128]` (compiler/runtime/tensor_map.py)
_PARAM = re.compile(r"^\.param\s+(\.\w+\s+[A-Za-z_$][\w$]*|\.align\s+64\s+\.b8\s+[A-Za-z_$][\w$]*\[128\])\s*(,?)$")
_MAXNTID = re.compile(r"^\.maxntid\s+(\d+)\s*,\s*1\s*,\s*1$")
_MINNCTAPERSM = re.compile(r"^\.minnctapersm\s+(\d+)$")
_MAXNREG = re.compile(r"^\.maxnreg\s+(\d+)$")
_CLUSTER = re.compile(r"^\.reqnctapercluster\s+(\d+)\s*,\s*1\s*,\s*1$")
_REG = re.compile(r"^\.reg\s+\.(\w+)\s+(%[A-Za-z_$][A-Za-z_$]*)<(\d+)>;$")
_SHARED = re.compile(r"^(\.extern\s+)?\.shared\s+\.align\s+(\d+)\s+\.b8\s+([A-Za-z_$][\w$]*)\[(\d*)\];$")
_LABEL = re.compile(r"^([A-Za-z_$][\w$]*):$")
_GUARD = re.compile(r"^@(!?%[A-Za-z_$][\w$]*)\s+")
_OPCODE = re.compile(r"^[a-z][\w.:]*$")
_ARG = re.compile(r"^[^\s,;{}]+$")
_TENSOR_ARG = re.compile(r"^\[\s*([%\w$]+)\s*,\s*\{([^{}]*)\}\s*\]$")
_PLAIN_ARGS = re.compile(r"(?:[^\s,;{}]+(?:\s*,\s*[^\s,;{}]+)*)?")  # operands, no vectors: most lines


def _split_top(text: str) -> list[str]:
    """Split at commas outside braces and brackets; the pieces stripped."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced '}' or ']'")
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError("unbalanced '{' or '['")
    out.append("".join(cur).strip())
    return out


class _Reader:
    def __init__(self, text: str, source: str):
        self.lines = text.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self.source = source
        self.pos = 0  # index of the next line
        self.op_lines: dict[Operation, int] = {}

    def error(self, message: str, index: int | None = None) -> PtxSyntaxError:
        i = self.pos - 1 if index is None else index
        i = max(0, min(i, len(self.lines) - 1)) if self.lines else 0
        text = self.lines[i] if self.lines else ""
        return PtxSyntaxError(self.source, i + 1, text, message)

    def next_nonblank(self) -> str | None:
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            self.pos += 1
            if line.strip():
                return line
        return None

    def expect(self, what: str) -> str:
        line = self.next_nonblank()
        if line is None:
            raise PtxSyntaxError(self.source, len(self.lines), "", f"unexpected end of input: expected {what}")
        return line

    # -- module ---------------------------------------------------------------------------

    def modules(self) -> list[ptx.ModuleOp_]:
        out = []
        while True:
            save = self.pos
            line = self.next_nonblank()
            if line is None:
                break
            self.pos = save
            out.append(self.module())
        if not out:
            raise PtxSyntaxError(self.source, 1, "", "no PTX module: expected '.version'")
        return out

    def module(self) -> ptx.ModuleOp_:
        values = {}
        start = None
        for key, rx in _HEADER:
            line = self.expect(f".{key}")
            m = rx.match(line.strip())
            if not m:
                raise self.error(f"expected '.{key} ...' (the module header is .version, .target, .address_size)")
            values[key] = m.group(1)
            start = self.pos - 1 if start is None else start
        entries, externs = [], []
        while True:
            save = self.pos
            line = self.next_nonblank()
            if line is None or line.strip().startswith(".version"):
                self.pos = save
                break
            if line.strip().startswith(".extern"):
                externs.append(self.shared(line, dynamic=True))
                continue
            self.pos -= 1
            entries.append(self.entry(externs))
            externs = []
        if externs:
            raise self.error("'.extern .shared' must be followed by the kernel that uses it", self.op_lines[externs[-1]] - 1)
        module = ptx.ModuleOp_(values["version"], values["target"], entries)
        module.properties["address_size"] = StringAttr(values["address_size"])
        self.op_lines[module] = (start or 0) + 1
        return self.verified(module)

    def shared(self, line: str, dynamic: bool) -> ptx.SharedOp:
        m = _SHARED.match(line.strip())
        if not m or bool(m.group(1)) != dynamic or (m.group(4) == "") != dynamic:
            want = ".extern .shared .align A .b8 NAME[];" if dynamic else ".shared .align A .b8 NAME[SIZE];"
            raise self.error(f"expected '{want}'")
        _, align, name, size = m.groups()
        op = ptx.SharedOp(name, int(align), int(size) if size else None)
        try:
            op.verify()
        except VerifyException as e:
            raise self.error(str(e)) from None
        self.op_lines[op] = self.pos
        return op

    def entry(self, externs: list[ptx.SharedOp] | None = None) -> ptx.EntryOp:
        line = self.expect("'.visible .entry NAME('")
        m = _ENTRY.match(line.strip())
        if not m:
            raise self.error("expected '.visible .entry NAME(' (or the next module's '.version')")
        name, start = m.group(1), self.pos
        params: list[str] = []
        commas: list[tuple[int, bool]] = []  # line index of each parameter, and whether a ',' followed it
        while True:
            line = self.expect("a '.param' line or ')'")
            s = line.strip()
            if s == ")":
                break
            pm = _PARAM.match(s)
            if not pm:
                raise self.error("expected '.param .TYPE NAME' (one per line) or ')'")
            if params and not commas[-1][1]:
                raise self.error("parameters must be separated by ','", commas[-1][0])
            params.append(pm.group(1))
            commas.append((self.pos - 1, bool(pm.group(2))))
        if commas and commas[-1][1]:
            raise self.error("no ',' after the last parameter", commas[-1][0])
        line = self.expect("'{' or '.maxntid N, 1, 1'")
        max_threads, line = self.directive(line, _MAXNTID, ".maxntid", "'.maxntid N, 1, 1'")
        max_registers, line = self.directive(line, _MAXNREG, ".maxnreg", "'.maxnreg N'")
        min_ctas, line = self.directive(line, _MINNCTAPERSM, ".minnctapersm", "'.minnctapersm N'")
        cluster, line = self.directive(line, _CLUSTER, ".reqnctapercluster", "'.reqnctapercluster N, 1, 1'")
        if line.strip() != "{":
            raise self.error("expected '{' to open the kernel body")
        ops: list[Operation] = list(externs or [])
        while True:
            line = self.expect("'}' to close the kernel body")
            if line.strip() == "}":
                break
            op = self.body_op(line)
            self.op_lines[op] = self.pos
            ops.append(op if isinstance(op, ptx.InstOp) else self.verified(op))
        entry = ptx.EntryOp(name, params, Region(Block(ops)), max_threads)
        if min_ctas is not None:
            entry.min_ctas = IntegerAttr(min_ctas, 64)
        if max_registers is not None:
            entry.max_registers = IntegerAttr(max_registers, 64)
        if cluster is not None:
            entry.cluster = IntegerAttr(cluster, 64)
        self.op_lines[entry] = start
        return self.verified(entry)

    def directive(self, line: str, pattern: re.Pattern[str], word: str, form: str) -> tuple[int | None, str]:
        """An optional performance directive before the body (`.maxntid`, `.maxnreg`, `.minnctapersm`,
        `.reqnctapercluster`): its
        number and the line after it, or None and `line` itself where `line` is not one."""
        m = pattern.match(line.strip())
        if m:
            return int(m.group(1)), self.expect("'{'")
        if line.strip().startswith(word):
            raise self.error(f"expected {form}")
        return None, line

    def verified(self, op: Operation) -> Operation:
        """`op` checked against its definition as it is built, an error naming its line. Not
        `ptx.inst`: its constructor makes it from the line's strings, exactly the properties its
        definition asks for (what `InstOp._verify_fields` would check again), and a kernel has
        thousands."""
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            raise PtxSyntaxError(self.source, self.op_lines.get(op, 1), "", str(e)) from None
        return op

    # -- body -----------------------------------------------------------------------------

    def body_op(self, line: str) -> Operation:
        s = line.strip()
        if s.startswith("//"):
            text = line.lstrip()[2:]
            return ptx.CommentOp(text.removeprefix(" "))
        if s.startswith(".reg"):
            m = _REG.match(s)
            if not m:
                raise self.error("expected '.reg .TYPE %PREFIX<COUNT>;'")
            rtype, prefix, count = m.groups()
            if rtype not in ptx.REGISTER_TYPES:
                raise self.error(f"unknown register type .{rtype} (known: {', '.join(ptx.REGISTER_TYPES)})")
            if int(count) <= 0:
                raise self.error("register count must be positive")
            return ptx.RegOp(rtype, prefix, int(count))
        if s.startswith(".shared"):
            return self.shared(s, dynamic=False)
        m = _LABEL.match(s)
        if m:
            return ptx.LabelOp(m.group(1))
        if s.startswith(".extern"):
            raise self.error("'.extern .shared' belongs at module scope, just above the kernel")
        if s.startswith("."):
            raise self.error("directive not allowed in a kernel body (only '.reg' and '.shared')")
        if not s.endswith(";"):
            raise self.error("an instruction must end with ';'")
        s = s[:-1].rstrip()
        guard = None
        gm = _GUARD.match(s)
        if gm:
            guard, s = gm.group(1), s[gm.end():]
        opcode, _, rest = s.partition(" ")
        if not _OPCODE.match(opcode):
            raise self.error(f"malformed opcode {opcode!r}")
        if _PLAIN_ARGS.fullmatch(rest) and not opcode.startswith("mma."):  # well-formed, nothing to split
            return ptx.InstOp(opcode, [a.strip() for a in rest.split(",")] if rest else [], guard)
        try:
            args = _split_top(rest) if rest.strip() else []
        except ValueError as e:
            raise self.error(str(e)) from None
        if opcode.startswith("mma."):
            return self.mma(opcode, args, guard)
        for i, a in enumerate(args):
            if a.startswith("{") and a.endswith("}"):  # a vector operand
                items = [x.strip() for x in a[1:-1].split(",")]
                if not all(x and _ARG.match(x) for x in items):
                    raise self.error(f"malformed vector operand {a!r}")
                args[i] = "{" + ", ".join(items) + "}"
            elif _TENSOR_ARG.match(a):  # cp.async.bulk.tensor's [map, {coordinates}]
                base, coords = _TENSOR_ARG.match(a).groups()  # type: ignore[union-attr]
                args[i] = f"[{base}, {{{', '.join(x.strip() for x in coords.split(','))}}}]"
            elif not a or not _ARG.match(a):
                raise self.error(f"malformed operand {a!r}")
        return ptx.InstOp(opcode, args, guard)

    def mma(self, opcode: str, args: list[str], guard: str | None) -> Operation:
        if guard is not None:
            raise self.error("a guarded mma is not something tilemma emits (mma is warp-wide)")
        if len(args) < 4:
            raise self.error("mma needs {d}, {a}, {b}, {c} register groups")
        groups = []
        for a in args[:4]:
            if not (a.startswith("{") and a.endswith("}")):
                raise self.error(f"expected a register group in braces, got {a!r}")
            regs = [r.strip() for r in a[1:-1].split(",")]
            if not all(regs):
                raise self.error(f"empty register in group {a!r}")
            groups.append(regs)
        extra = []  # mma.sp: e, f; .block_scale: scale-a-data, {byte-id-a, thread-id-a}, ...
        for a in args[4:]:
            if a.startswith("{") and a.endswith("}"):  # a selector pair (or a one-register vector)
                items = [x.strip() for x in a[1:-1].split(",")]
                if not all(x and _ARG.match(x) for x in items):
                    raise self.error(f"malformed operand group {a!r} after the register groups")
                a = "{" + ", ".join(items) + "}"
            elif not a or not _ARG.match(a):
                raise self.error(f"malformed operand {a!r} after the register groups")
            extra.append(a)
        try:
            return ptx.MmaOp(opcode, *groups, extra)
        except VerifyException as e:  # pragma: no cover - MmaOp's constructor does not verify
            raise self.error(str(e)) from None


def parse_ptx_modules(text: str, source: str = "<ptx>") -> ParsedPtx:
    """Parse every module in `text` (as `-t ptx` prints them, one after another)."""
    reader = _Reader(text, source)
    return ParsedPtx(reader.modules(), reader.op_lines, source)  # every op verified as it was read


def parse_ptx(text: str, source: str = "<ptx>") -> ptx.ModuleOp_:
    """Parse a PTX module that tilemma printed back into a `ptx.module`."""
    parsed = parse_ptx_modules(text, source)
    if len(parsed.modules) != 1:
        raise ValueError(f"{source}: {len(parsed.modules)} PTX modules; expected one")
    return parsed.modules[0]


def print_ptx(module: ptx.ModuleOp_) -> str:
    """The module as PTX text (the printer `-t ptx` uses)."""
    import io

    out = io.StringIO()
    ptx.print_module(module, out)
    return out.getvalue()
