"""What the `warp-to-ptx` patterns share while they run, and how a fragment type maps to registers.

PTX registers are names, not SSA values, so while the patterns run, each lowered value is
replaced by a `ptx.regs` op that names its registers (or holds an immediate): `regs`/`reg` read
them, and a pattern fires once its operands have them. `_finish` puts the PTX a pattern emitted
in front of its op and replaces the op's results by their registers. `LoweringState` holds what
outlives one rewrite: each kernel's register file, lane register, shared memory size and
thread-invariant registers (`_Kernel`), and the registers of the `scf.for` loops being lowered.
A fragment's registers (how many, which bank) come from its type's layout (`_layout`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from xdsl.dialects import func, scf
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.layouts import fragments
from tilemma.compiler.runtime.tensor_map import TensorMap
from tilemma.dialects import ptx, warp
from tilemma.dialects.ptx_builder import RegisterFile
from tilemma.dialects.tile import element_name
from tilemma.passes.warp_to_ptx import fragment_io as fio

# What a lowered body holds: the PTX ops (a pattern on a region waits for these alone).
_PTX_OPS = (ptx.InstOp, ptx.MmaOp, ptx.LabelOp, ptx.CommentOp, ptx.RegsOp)


SHARED_SYMBOL = "smem"  # the kernel's dynamic shared memory (.extern .shared)


@dataclass
class _Kernel:
    regs: RegisterFile
    lane: str
    shared_bytes: int = 0
    shared_align: int = 128  # of the dynamic shared memory: its most aligned buffer
    entry: Operation | None = None  # the last op of the preamble: thread-invariant code goes after it
    hoisted: dict[tuple, list] = field(default_factory=dict)
    # a kernel argument with `?` sizes or strides, by its pointer register: their registers
    memrefs: dict[str, fio.Symbols] = field(default_factory=dict)
    # each kernel argument's pointer register: (its index, its parameter's name)
    args: dict[str, tuple[int, str]] = field(default_factory=dict)
    # the tensor maps the TMA's copies read (`tensor_map`), by the name of their parameter
    tensor_maps: dict[str, TensorMap] = field(default_factory=dict)

    def tensor_map(self, pointer: str, tmap: TensorMap) -> str:
        """The register holding the generic address of the tensor-map parameter of `tmap` (a map
        of the argument whose pointer register is `pointer`), one parameter per distinct map,
        named after the argument's: the first `<param>_map<i>` no other parameter has (an
        argument may itself be called `a_map0`)."""
        name = next((n for n, m in self.tensor_maps.items() if m == tmap), None)
        if name is None:
            param = self.args[pointer][1]
            taken = {p for _, p in self.args.values()} | set(self.tensor_maps)
            name = next(n for i in itertools.count() if (n := f"{param}_map{i}") not in taken)
            self.tensor_maps[name] = tmap

        def address(e: fio.Emitter) -> list[str]:
            r = e.reg("b64")
            e.emit("mov.b64", r, name)
            e.emit("cvta.param.u64", r, r)
            return [r]
        return self.thread_invariant(("tensor-map", name), address)[0]

    def thread_invariant(self, key: tuple, build) -> list:
        """Registers computed once at the kernel's entry by `build(emitter)` (shared by every op
        asking with the same key): values that depend only on the thread index."""
        if key not in self.hoisted:
            e = fio.Emitter(self.regs)
            self.hoisted[key] = build(e)
            assert self.entry is not None
            anchor = self.entry
            block = anchor.parent_block()
            assert block is not None
            for o in e.ops:
                block.insert_op_after(o, anchor)
                anchor = o
            self.entry = anchor
        return self.hoisted[key]


@dataclass
class _Loop:
    iv: str
    carried: list[list[str]]


@dataclass
class LoweringState:
    """What the patterns of one pass run share: each kernel's register file and lane register,
    and the registers of the loops being lowered."""

    kernels: dict[func.FuncOp, _Kernel] = field(default_factory=dict)
    loops: dict[scf.ForOp, _Loop] = field(default_factory=dict)

    def kernel(self, op: Operation) -> _Kernel:
        parent = op.parent_op()
        while not isinstance(parent, func.FuncOp):
            assert parent is not None
            parent = parent.parent_op()
        return self.kernels[parent]


def regs(value: SSAValue) -> list[str] | None:
    """The registers of a lowered value (None while it is not lowered yet)."""
    return value.owner.names() if isinstance(value.owner, ptx.RegsOp) else None


def reg(value: SSAValue) -> str | None:
    r = regs(value)
    return r[0] if r else None


def all_regs(values: Iterable[SSAValue]) -> list[list[str]] | None:
    """The registers of each value, None while one of them is not lowered."""
    out = []
    for v in values:
        r = regs(v)
        if r is None:
            return None
        out.append(r)
    return out


def all_reg(values: Iterable[SSAValue]) -> list[str] | None:
    """The register (or immediate) of each single-register value, None while one of them is not
    lowered: the index operands of an op."""
    out = []
    for v in values:
        r = reg(v)
        if r is None:
            return None
        out.append(r)
    return out


def _finish(op: Operation, rewriter: PatternRewriter, e: fio.Emitter, results: list[list[str]] | None = None) -> None:
    """Insert the emitted PTX before the matched op; replace its results by their registers."""
    rewriter.insert(e.ops, InsertPoint.before(op))
    if results is None:
        rewriter.erase(op)
        return
    new = [ptx.RegsOp(r, res.type) for r, res in zip(results, op.results)]
    rewriter.replace(op, new, [n.result for n in new])


# ---------------------------------------------------------------------------------------------
# Fragment types: layout, PTX type, register bank and count.
# ---------------------------------------------------------------------------------------------


def _layout(frag: warp.FragType) -> fragments.FragmentLayout:
    """The fragment's layout (`FragType.layout`)."""
    return frag.layout()


def _ptx_type(frag: warp.FragType) -> str:
    return ELEMENTS[element_name(frag.element)].ptx


def _bank_of(frag: warp.FragType) -> str:
    """Register bank of a fragment: .f32/.f64 for float accumulators and f32 data, .f64 for
    64-bit operands, else .b32 (packed and integer data)."""
    if frag.role in (warp.Operand.META, warp.Operand.SCALE_A, warp.Operand.SCALE_B):
        return "b32"  # (a metadata word's element is i32, which has no PTX operand type)
    t = _ptx_type(frag)
    if t == "f64":
        return "f64"
    if t == "f32" and (frag.role == warp.Operand.ACC or _layout(frag).reg_bits == 32):
        return "f32"
    return "b32"


def _count(frag: warp.FragType) -> int:
    if frag.role in (warp.Operand.META, warp.Operand.SCALE_A, warp.Operand.SCALE_B):
        return 1
    return _layout(frag).regs

