"""The swizzle as the shared buffer's type (`#warp.swizzled<mult>`, dialects/swizzle.py).

`warp-swizzle-shared` writes it on the `memref.alloc`; the copies that fill the buffer and the
ldmatrix / `warp.load_shared` reads of it are lowered from that one type, so whatever odd
multiplier a buffer carries, writer and readers agree and the kernel stays right. That is checked
here by forcing multipliers the bank model would not pick and running the PTX in the emulator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, NoneAttr, f16, i64
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text, lower, parse
from tilemma.compiler.driver.runner import run_compiled
from tilemma.dialects import warp
from tilemma.passes.warp.swizzle_shared import SwizzleShared


@dataclass(frozen=True)
class ForceSwizzle(ModulePass):
    """Gives every shared buffer that can be swizzled the layout `#warp.swizzled<mult>`,
    whatever its readers' bank patterns: a stand-in for `warp-swizzle-shared`'s choice."""

    name = "test-force-swizzle"
    mult: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for alloc in [o for o in op.walk() if isinstance(o, memref.AllocOp)]:
            ref = alloc.memref.type
            if isinstance(ref, MemRefType) and warp.is_shared(ref) and warp.swizzles(ref):
                typed = MemRefType(ref.element_type, ref.shape, warp.SwizzledLayoutAttr(self.mult), ref.memory_space)
                Rewriter.replace_value_with_new_type(alloc.memref, typed)


@dataclass(frozen=True)
class Forced(CompileOptions):
    """The pipeline with `ForceSwizzle(mult)` where `warp-swizzle-shared` would run."""

    mult: int = 1

    def passes(self) -> list[ModulePass]:
        return [ForceSwizzle(self.mult) if isinstance(p, SwizzleShared) else p for p in super().passes()]


def _multipliers(ptx: str) -> set[int]:
    """The constant factors of the swizzle's `mul.lo.u32` (the phase multipliers, the phase then
    taken modulo 8) in the PTX."""
    return {int(m) for _, m in re.findall(r"mul\.lo\.u32 (%r\d+), %r\d+, ([357]);\s+and\.b32 \1, \1, 7;", ptx)}


@pytest.mark.parametrize("spec", [
    GemmSpec(70, 40, 200, "f16", "f16", "f32"),  # ldmatrix reads (the pass picks 1)
    GemmSpec(70, 45, 72, "f64", "f64", "f64"),  # warp.load_shared reads (the pass picks 5)
], ids=["f16", "f64"])
@pytest.mark.parametrize("mult", [3, 7])
def test_any_multiplier_on_the_type_keeps_writer_and_readers_agreeing(spec, mult):
    [kernel] = compile_text(str(gemm_module(spec)), spec.name, Forced(sm="90", mult=mult))
    assert "cp.async" in kernel.ptx and _multipliers(kernel.ptx) == {mult}
    res = run_compiled(kernel, seed=3, on="emulator")
    assert res.ok, res.line()


def _warp_level(spec: GemmSpec) -> ModuleOp:
    module, locations = parse(str(gemm_module(spec)), spec.name)
    lower(module, locations, CompileOptions(sm="90"), warp_level=True)
    return module


def test_the_pass_types_the_alloc_and_every_op_sees_it():
    module = _warp_level(GemmSpec(130, 70, 200, "f64", "f64", "f64"))
    allocs = [o for o in module.walk() if isinstance(o, memref.AllocOp)]
    assert len(allocs) == 2
    for alloc in allocs:
        assert warp.swizzle_mult(alloc.memref.type) == 5
        users = {type(u.operation) for u in alloc.memref.uses}
        assert users == {warp.CopyAsyncOp, warp.LoadSharedOp}
        for use in alloc.memref.uses:
            assert use.operation.operands[use.index].type == alloc.memref.type


BUFFER = """func.func @k(%g: memref<64x64xf16>, %i: index) {{
  %s = memref.alloc() {{alignment = 128 : i64}} : memref<2x64x64xf16{layout}, 3>
  warp.copy_async %g[%i, %i, %i], %s[%i] {{window = array<i64: 0, 0>, extent = array<i64: 1, 64, 64>, threads = 128 : i64, vector = 16 : i64}} : memref<64x64xf16>, memref<2x64x64xf16{layout}, 3>
  %t = warp.async_wait {{pending = 0 : i64}}
  %a = warp.ldmatrix %s[%i, %i, %i] after %t {{offsets = array<i64: 0, 0>}} : memref<2x64x64xf16{layout}, 3> -> !warp.frag<a, f16, #warp.variant<m16n8k16, f32, f16, f16, f32>>
  {extra}
  func.return
}}"""


def _swizzle(text: str) -> memref.AllocOp:
    module, _ = parse(text, "k")
    SwizzleShared().apply(Context(), module)
    module.verify()
    return next(o for o in module.walk() if isinstance(o, memref.AllocOp))


def test_the_pass_leaves_buffers_it_cannot_type_alone():
    assert warp.swizzle_mult(_swizzle(BUFFER.format(layout="", extra="")).memref.type) == 1
    # another user would not know the swizzle: the buffer stays row-major
    dealloc = "memref.dealloc %s : memref<2x64x64xf16, 3>"
    assert isinstance(_swizzle(BUFFER.format(layout="", extra=dealloc)).memref.type.layout, NoneAttr)
    # a multiplier written already is kept
    assert warp.swizzle_mult(_swizzle(BUFFER.format(layout=", #warp.swizzled<3>", extra="")).memref.type) == 3


def test_the_layout_attribute():
    swizzled = MemRefType(f16, [2, 64, 64], warp.SwizzledLayoutAttr(5), IntegerAttr(warp.SHARED, i64))
    assert str(swizzled) == "memref<2x64x64xf16, #warp.swizzled<5>, 3 : i64>"
    assert warp.swizzle_mult(swizzled) == 5
    assert warp.swizzle_mult(MemRefType(f16, [2, 64, 64])) is None
    for bad in (0, 2, 4, 9):
        with pytest.raises(VerifyException, match=f"must be odd, 1..7 .*got {bad}"):
            warp.SwizzledLayoutAttr(bad)
    with pytest.raises(DiagnosticException, match="no affine map"):
        swizzled.get_affine_map()


def test_a_kernel_argument_cannot_be_swizzled():
    """Only shared buffers take the layout: global memory is addressed by strides."""
    text = str(gemm_module(GemmSpec(64, 64, 64, "f16", "f16", "f32")))
    text = text.replace("%a: memref<64x64xf16>", "%a: memref<64x64xf16, #warp.swizzled<1>>").replace(
        "%a[0, 0] : memref<64x64xf16>", "%a[0, 0] : memref<64x64xf16, #warp.swizzled<1>>")
    assert text.count("#warp.swizzled") == 2
    with pytest.raises(LocatedVerifyError, match="#warp.swizzled<1> is not supported"):
        compile_text(text, "g", CompileOptions(sm="90"))
