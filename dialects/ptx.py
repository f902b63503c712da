"""The `ptx` dialect: PTX instructions and registers as operations, one-to-one with PTX text.

PTX registers are mutable and a kernel loops by branching to labels, so registers here are
names (`%r12`), declared by `ptx.reg`, rather than SSA values: each operation prints exactly one
PTX line and the text reads back into the same operations (see `tilemma.compiler.verify.ptx_text`).
`ptx.module` carries the `.version`/`.target`/`.address_size` header, `ptx.entry` a kernel with
its parameters. The `ptx` target (`-t ptx`) prints every module as a complete PTX file.
"""

from __future__ import annotations

import re

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, UNKNOWN_LOC, i64
from xdsl.ir import Attribute, Dialect, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
)
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.target import Target

REGISTER_TYPES = ("pred", "b16", "b32", "b64", "u32", "u64", "s32", "s64", "f16", "f32", "f64")


@cache
def _string(value: str) -> StringAttr:
    """A StringAttr per distinct text (attributes are immutable): warp-to-ptx writes thousands
    of instructions over a few hundred register names and opcodes."""
    return StringAttr(value)


def _strings(values: Sequence[str]) -> ArrayAttr[StringAttr]:
    return ArrayAttr(tuple(_string(v) for v in values))


@irdl_op_definition
class ModuleOp_(IRDLOperation):
    """A PTX module: `.version`, `.target` and `.address_size`, then its kernels."""

    name = "ptx.module"
    version = prop_def(StringAttr)
    target = prop_def(StringAttr)
    address_size = prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "attr-dict-with-keyword $body"

    def __init__(self, version: str, target: str, entries: Sequence[IRDLOperation] = ()):
        super().__init__(
            properties={
                "version": StringAttr(version),
                "target": StringAttr(target),
                "address_size": StringAttr("64"),
            },
            regions=[Region([])],
        )
        from xdsl.ir import Block

        self.body.add_block(Block(entries))

    def header(self) -> str:
        return (
            f".version {self.version.data}\n.target {self.target.data}\n"
            f".address_size {self.address_size.data}\n"
        )


@irdl_op_definition
class EntryOp(IRDLOperation):
    """A kernel (`.visible .entry`); `params` are `.param` declarations like `.u64 a`. Kernels
    lowered from the warp level keep their launch shape (`grid`, `block`) and, per parameter,
    its `abi` record (name, roles, memref type, initial value) for `compiler.abi.KernelABI`.

    `tensor_maps`: one record per tensor-map parameter (`.align 64 .b8 NAME[128]`, what
    `cp.async.bulk.tensor` copies by), in the order those parameters appear in `params`: last,
    after the `.u64` pointers and the `.u32` size parameters. Each record (written and read by
    `compiler.runtime.abi.tensor_map_record` / `tensor_map_from_record`) holds `of` (i64: the
    index of the pointer parameter, i.e. the kernel argument, the map is of), `element_bytes`
    (i64), `dims` (i64 dense array, elements, innermost first), `strides` (i64 dense array, bytes,
    one per outer dimension), `box` (i64 dense array), `swizzle` (i64: 0, 32, 64 or 128) and
    `offset` (i64: bytes from argument `of`'s address to the map's base, e.g. a window's origin).
    Launches encode each map for the address of its argument (`compiler.runtime.tensor_map`)."""

    name = "ptx.entry"
    sym_name = prop_def(StringAttr)
    params = prop_def(ArrayAttr[StringAttr])
    max_threads = opt_prop_def(StringAttr)
    min_ctas = opt_prop_def(IntegerAttr)  # `.minnctapersm`: CTAs an SM is to hold at once
    max_registers = opt_prop_def(IntegerAttr)  # `.maxnreg`: registers a thread holds at entry
    cluster = opt_prop_def(IntegerAttr)  # `.reqnctapercluster N, 1, 1`: CTAs (along x) a cluster holds
    persistent = opt_prop_def(IntegerAttr)  # a grid of that many CTAs loops over the tiles (no directive)
    grid = opt_prop_def(DenseArrayBase)
    block = opt_prop_def(DenseArrayBase)
    abi = opt_prop_def(ArrayAttr[DictionaryAttr])
    shared_bytes = opt_prop_def(IntegerAttr)  # dynamic shared memory the launch must provide
    tiling = opt_prop_def(DenseArrayBase)  # warps (2), warp tile (2), shared stages: how it was built
    # sizes known at launch: per grid axis [count, [symbol, tile], ...] (`?` in `grid`), and the
    # multiple the kernel assumes of its `?` strides (`tile.stride_multiple`)
    grid_sizes = opt_prop_def(ArrayAttr)
    stride_multiple = opt_prop_def(IntegerAttr)
    size_multiple = opt_prop_def(DenseArrayBase)  # of M, N, K
    tensor_maps = opt_prop_def(ArrayAttr[DictionaryAttr])  # per tensor-map parameter (see above)
    # kernels of the same module every launch of this one runs first, in order, on its stream: per
    # kernel `entry` (its name), `grid`, `block` (i64 dense arrays) and `args` (i64 dense array:
    # the index of this kernel's parameter each of its parameters is), e.g. `tile-transpose-first`'s
    prologue = opt_prop_def(ArrayAttr[DictionaryAttr])
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$sym_name $params attr-dict-with-keyword $body"

    def __init__(self, name: str, params: Sequence[str], body: Region, max_threads: int | None = None,
                 launch: tuple[Sequence[int], Sequence[int]] | None = None,
                 abi: Sequence[DictionaryAttr] | None = None):
        props: dict[str, Attribute] = {"sym_name": StringAttr(name), "params": _strings(params)}
        if max_threads is not None:
            props["max_threads"] = StringAttr(str(max_threads))
        if launch is not None:
            props["grid"] = DenseArrayBase.from_list(i64, list(launch[0]))
            props["block"] = DenseArrayBase.from_list(i64, list(launch[1]))
        if abi is not None:
            props["abi"] = ArrayAttr(abi)
        super().__init__(properties=props, regions=[body])


@irdl_op_definition
class RegOp(IRDLOperation):
    """`.reg .TYPE %PREFIX<COUNT>;` — a bank of registers named PREFIX0 .. PREFIX(COUNT-1)."""

    name = "ptx.reg"
    type = prop_def(StringAttr)
    prefix = prop_def(StringAttr)
    count = prop_def(StringAttr)

    assembly_format = "$type $prefix $count attr-dict"

    def __init__(self, type: str, prefix: str, count: int):
        super().__init__(
            properties={
                "type": StringAttr(type),
                "prefix": StringAttr(prefix),
                "count": StringAttr(str(count)),
            }
        )

    def verify_(self) -> None:
        if self.type.data not in REGISTER_TYPES:
            raise VerifyException(
                f"ptx.reg: unknown register type .{self.type.data}; known: {', '.join(REGISTER_TYPES)}"
            )
        if not self.count.data.isdigit() or int(self.count.data) <= 0:
            raise VerifyException(f"ptx.reg: count must be a positive integer, got {self.count.data}")

    def text(self) -> str:
        return f".reg .{self.type.data} {self.prefix.data}<{self.count.data}>;"


_SYMBOL = re.compile(r"^[A-Za-z_$][\w$]*$")


@irdl_op_definition
class SharedOp(IRDLOperation):
    """A CTA's shared buffer: `.shared .align A .b8 NAME[SIZE];`, or without `size` the dynamic
    shared memory `.extern .shared .align A .b8 NAME[];` sized at launch. It sits in the kernel's
    body; PTX accepts `.extern` only at module scope, so the printer writes that one just above
    the kernel (and the reader gives it back to the kernel that follows)."""

    name = "ptx.shared"
    sym_name = prop_def(StringAttr)
    align = prop_def(StringAttr)
    size = opt_prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$sym_name $align attr-dict"

    def __init__(self, name: str, align: int, size: int | None = None):
        props: dict[str, Attribute] = {"sym_name": StringAttr(name), "align": StringAttr(str(align))}
        if size is not None:
            props["size"] = StringAttr(str(size))
        super().__init__(properties=props)

    @property
    def dynamic(self) -> bool:
        return self.size is None

    def verify_(self) -> None:
        name, align = self.sym_name.data, self.align.data
        if not _SYMBOL.match(name):
            raise VerifyException(f"ptx.shared: {name!r} is not a PTX identifier")
        if not align.isdigit() or int(align) == 0 or int(align) & (int(align) - 1):
            raise VerifyException(f"ptx.shared {name}: .align must be a power of two, got {align}")
        if self.size is not None and (not self.size.data.isdigit() or int(self.size.data) <= 0):
            raise VerifyException(f"ptx.shared {name}: size must be a positive integer, got {self.size.data}")

    def text(self) -> str:
        head = f".shared .align {self.align.data} .b8 {self.sym_name.data}"
        return f".extern {head}[];" if self.dynamic else f"{head}[{self.size.data}];"


@irdl_op_definition
class InstOp(IRDLOperation):
    """One PTX instruction: optional guard (`%p3` or `!%p3`), opcode, operands as written (a
    vector operand is one string, `{%r1, %r2}`)."""

    name = "ptx.inst"
    opcode = prop_def(StringAttr)
    args = prop_def(ArrayAttr[StringAttr])
    guard = opt_prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$opcode $args attr-dict"

    def __init__(self, opcode: str, args: Sequence[str] = (), guard: str | None = None):
        props: dict[str, Attribute] = {"opcode": _string(opcode), "args": _strings(args)}
        if guard is not None:
            props["guard"] = _string(guard)
        # What Operation.__init__ would set, and only that: an op with no operands, results,
        # successors or regions keeps those fields' class defaults (empty tuples, no parent),
        # as the generic constructor leaves them, at a fifth of its cost (a compile makes
        # thousands of these and the emulator reads them back from text). xDSL is pinned;
        # tests/test_ptx_dialect.py checks the op equals one the generic constructor builds.
        self.properties = props
        self.attributes = {}
        self.location = UNKNOWN_LOC

    def arg_values(self) -> list[str]:
        return [a.data for a in self.args.data]

    def _verify_fields(self) -> None:
        """What IRDL's generic verifier checks of this op, field by field, at a fifth of its
        cost: a compile verifies thousands of instructions at its end (see below)."""
        if self.operands or self.results or self.regions or self.successors:
            raise VerifyException("ptx.inst has no operands, results, regions or successors")
        props = self.properties
        for key, value in props.items():
            if key not in _INST_PROPS:
                raise VerifyException(f"property '{key}' is not defined by the operation 'ptx.inst'. "
                                      "Use the dictionary attribute to add arbitrary information to the operation.")
            if key == "args":
                if not isinstance(value, ArrayAttr) or not all(isinstance(a, StringAttr) for a in value.data):
                    raise VerifyException(f"ptx.inst: args must be an array of strings, got {value}")
            elif not isinstance(value, StringAttr):
                raise VerifyException(f"ptx.inst: {key} must be a string, got {value}")
        for key in ("opcode", "args"):
            if key not in props:
                raise VerifyException(f"property '{key}' expected in operation 'ptx.inst'")

    def text(self) -> str:
        guard = f"@{self.guard.data} " if self.guard is not None else ""
        args = ", ".join(self.arg_values())
        return f"{guard}{self.opcode.data}{' ' if args else ''}{args};"


_INST_PROPS = frozenset(("opcode", "args", "guard"))
InstOp.verify_ = InstOp._verify_fields  # in place of the generic verifier IRDL installed


@irdl_op_definition
class MmaOp(IRDLOperation):
    """A warp-wide `mma`: the full opcode and its register groups d, a, b, c (and e, f, ...)."""

    name = "ptx.mma"
    opcode = prop_def(StringAttr)
    d = prop_def(ArrayAttr[StringAttr])
    a = prop_def(ArrayAttr[StringAttr])
    b = prop_def(ArrayAttr[StringAttr])
    c = prop_def(ArrayAttr[StringAttr])
    extra = prop_def(ArrayAttr[StringAttr])

    assembly_format = "$opcode $d `,` $a `,` $b `,` $c `,` $extra attr-dict"

    def __init__(
        self,
        opcode: str,
        d: Sequence[str],
        a: Sequence[str],
        b: Sequence[str],
        c: Sequence[str],
        extra: Sequence[str] = (),
    ):
        super().__init__(
            properties={
                "opcode": StringAttr(opcode),
                "d": _strings(d),
                "a": _strings(a),
                "b": _strings(b),
                "c": _strings(c),
                "extra": _strings(extra),
            }
        )

    def verify_(self) -> None:
        if not self.opcode.data.startswith("mma."):
            raise VerifyException(f"ptx.mma: opcode must be an mma instruction, got {self.opcode.data}")

    def groups(self) -> dict[str, list[str]]:
        return {
            name: [s.data for s in getattr(self, name).data] for name in ("d", "a", "b", "c", "extra")
        }

    def text(self) -> str:
        g = self.groups()
        parts = ["{" + ", ".join(g[n]) + "}" for n in ("d", "a", "b", "c")] + g["extra"]
        return f"{self.opcode.data} " + ", ".join(parts) + ";"


@irdl_op_definition
class RegsOp(IRDLOperation):
    """`ptx.regs`: the PTX registers (or an immediate) that hold a value of a higher level while
    `warp-to-ptx` rewrites; its users read the names, and it is erased once it has none. It never
    reaches PTX text."""

    name = "ptx.regs"
    regs = prop_def(ArrayAttr[StringAttr])
    result = result_def()
    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$regs attr-dict `:` type($result)"

    def __init__(self, regs: Sequence[str], type: Attribute):
        super().__init__(properties={"regs": _strings(regs)}, result_types=[type])

    def names(self) -> list[str]:
        return [r.data for r in self.regs.data]


@irdl_op_definition
class LabelOp(IRDLOperation):
    """A branch target `NAME:`."""

    name = "ptx.label"
    label = prop_def(StringAttr)

    assembly_format = "$label attr-dict"

    def __init__(self, label: str):
        super().__init__(properties={"label": StringAttr(label)})

    def text(self) -> str:
        return f"{self.label.data}:"


@irdl_op_definition
class CommentOp(IRDLOperation):
    """A `//` comment line, to keep the emitted kernel readable."""

    name = "ptx.comment"
    comment = prop_def(StringAttr)

    assembly_format = "$comment attr-dict"

    def __init__(self, comment: str):
        super().__init__(properties={"comment": StringAttr(comment)})

    def text(self) -> str:
        return f"// {self.comment.data}"


PTX = Dialect("ptx", [ModuleOp_, EntryOp, RegOp, SharedOp, InstOp, MmaOp, RegsOp, LabelOp, CommentOp], [])


def print_module(module: ModuleOp_, out: IO[str]) -> None:
    """Print one ptx.module as a complete PTX file."""
    out.write(module.header())
    for entry in module.body.ops:
        if not isinstance(entry, EntryOp):
            raise VerifyException(f"ptx.module may only hold ptx.entry, found {entry.name}")
        params = ",\n".join(f"    .param {p.data}" for p in entry.params.data)
        for op in entry.body.ops:  # PTX declares dynamic shared memory at module scope only
            if isinstance(op, SharedOp) and op.dynamic:
                out.write(f"\n{op.text()}\n")
        out.write(f"\n.visible .entry {entry.sym_name.data}(\n{params}\n)\n")
        if entry.max_threads is not None:
            out.write(f".maxntid {entry.max_threads.data}, 1, 1\n")
        if entry.max_registers is not None:
            out.write(f".maxnreg {entry.max_registers.value.data}\n")
        if entry.min_ctas is not None:
            out.write(f".minnctapersm {entry.min_ctas.value.data}\n")
        if entry.cluster is not None:
            out.write(f".reqnctapercluster {entry.cluster.value.data}, 1, 1\n")
        out.write("{\n")
        for op in entry.body.ops:
            if isinstance(op, SharedOp) and op.dynamic:
                continue
            text = op.text()  # type: ignore[attr-defined]
            indent = "" if isinstance(op, LabelOp) else "    "
            out.write(f"{indent}{text}\n")
        out.write("}\n")


@dataclass(frozen=True)
class PTXTarget(Target):
    """`-t ptx`: every `ptx.module` in the input, printed as PTX text."""

    name = "ptx"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        found = [op for op in module.walk() if isinstance(op, ModuleOp_)]
        if not found:
            raise VerifyException(
                "-t ptx: no ptx.module in the input; lower tile IR first "
                "(e.g. -p tile-select-mma{sm=90},tile-to-warp,warp-split-tf32,cse,warp-to-ptx)"
            )
        for i, ptx_module in enumerate(found):
            if i:
                output.write("\n")
            print_module(ptx_module, output)
