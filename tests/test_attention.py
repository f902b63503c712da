"""Attention (`tile.softmax` between two `tile.mma`s, lowered by `tile-attention`): the kernels
in the emulator against the float64 reference at odd sizes, every element within the bound; the
bound's teeth; the fragment facts the schedule stands on (row slots, the accumulator as the next
A operand); the warp ops' verifiers; shfl in the emulator; and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.utils.exceptions import VerifyException

from tilemma.compiler.driver.attention_generator import AttentionSpec, attention_text
from tilemma.compiler.driver.attention_run import run_attention
from tilemma.compiler.driver.diagnostics import LocatedVerifyError
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text
from tilemma.compiler.layouts import acc_reuse, fragments
from tilemma.compiler.verify.attention_reference import attention_bound, attention_data
from tilemma.compiler.verify.emulator import EmulationError, emulate
from tilemma.compiler.verify.ptx_text import PtxSyntaxError, parse_ptx, print_ptx
from tilemma.dialects import ptx

from tests.test_emulator import _kernel


def _compile(spec: AttentionSpec):
    [kernel] = compile_text(attention_text(spec), "attention.mlir", CompileOptions())
    return kernel


@pytest.mark.parametrize("b, h, s, d, causal, dtype", [
    (1, 2, 100, 64, True, "f16"),  # a ragged last block, causal: both masks at once
    (1, 1, 77, 128, False, "bf16"),
    (2, 1, 70, 64, False, "f16"),  # two heads, a ragged second key block
    (1, 1, 65, 128, True, "bf16"),  # causal at head dim 128: Q staged, a ragged second key block
    (1, 1, 128, 128, False, "f16"),  # blocks inside the tensors: one-offset copies (Q staged, K^T, V)
])
def test_attention_in_the_emulator(b, h, s, d, causal, dtype):
    """Every element of O within the bound of the float64 softmax(scale Q K^T) V, on data with
    per-row magnitudes over 2^-8..2^4 (near one-hot rows), ties and subnormals."""
    result = run_attention(_compile(AttentionSpec(b, h, s, d, causal, dtype)), seed=3, on="emulator")
    assert result.ok, result.detail


def test_the_bound_has_teeth():
    """The kernel's O fails the check against a reference 1% off in scale, or without the causal
    mask: the bound is far below the differences a wrong schedule makes."""
    spec = AttentionSpec(1, 1, 90, 64, True, "f16")
    rng = np.random.default_rng(5)
    q, k, v = (attention_data((1, 90, 64), "f16", rng) for _ in range(3))
    result = run_attention(_compile(spec), seed=0, on="emulator", inputs={"q": q, "k": k, "v": v})
    assert result.ok, result.detail
    got = result.outputs["o"].reshape(1, 90, 64).astype(np.float64)
    for scale, causal in ((spec.softmax_scale * 1.01, True), (spec.softmax_scale, False)):
        want, bound = attention_bound(q, k, v, scale, causal, "f16", "f16")
        assert (np.abs(got - want) > bound).any()
    want, bound = attention_bound(q, k, v, spec.softmax_scale, True, "f16", "f16")
    assert np.max(np.abs(got - want) / bound) > 1e-3  # not vacuous either: errors use part of it


def test_row_slots_of_the_accumulators():
    """m16n8 accumulators: values 0, 1 in row g, 2, 3 in row g + 8; the quad shares them."""
    slots = acc_reuse.row_slots(fragments.layout("m16n8k16", "c", "f32"))
    assert slots == acc_reuse.RowSlots((0, 0, 1, 1), 2, (1, 2))
    with pytest.raises(ValueError, match="hold each element once"):
        acc_reuse.row_slots(fragments.layout("m8n8k4", "c", "f32", view="quadpair"))


@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_two_accumulators_are_one_a_fragment(element):
    """Packed to 16 bits, the accumulators of n8 tiles 2i and 2i + 1 are the k16 A fragment of
    slice i, register for register (checked on every lane and value)."""
    acc = fragments.repacked(fragments.layout("m16n8k16", "c", "f32"), element, 16)
    lhs = fragments.layout("m16n8k16", "a", element)
    assert acc_reuse.lhs_registers(acc, lhs) == ((0, 0), (0, 1), (1, 0), (1, 1))


def test_fp8_accumulators_are_no_a_fragment():
    """fp8's A packs four k a register, the accumulator two columns: a byte permute would be needed."""
    acc = fragments.repacked(fragments.layout("m16n8k32", "c", "f32"), "e4m3", 8)
    with pytest.raises(ValueError, match="byte permute"):
        acc_reuse.lhs_registers(acc, fragments.layout("m16n8k32", "a", "e4m3"))
    with pytest.raises(ValueError, match="cast the accumulator"):
        acc_reuse.lhs_registers(fragments.layout("m16n8k16", "c", "f32"), fragments.layout("m16n8k16", "a", "f16"))


def _warp_ir(body: str) -> str:
    v = "#warp.variant<m16n8k16, f32, f16, f16, f32>"
    return f"""builtin.module {{
  func.func @k(%a: !warp.frag<acc, f16, {v}>, %b: !warp.frag<acc, f16, {v}>, %s: !warp.frag<acc, f32, {v}>) {{
    {body.replace("V", v)}
    func.return
  }}
}}"""


@pytest.mark.parametrize("body, message", [
    ("%x = warp.to_lhs %a : !warp.frag<acc, f16, V> -> !warp.frag<a, f16, V>", "made of 2 accumulator tiles, not 1"),
    ("%x = warp.to_lhs %s, %s : !warp.frag<acc, f32, V>, !warp.frag<acc, f32, V> -> !warp.frag<a, f16, V>",
     "warp.cast them first"),
    ("%x = warp.row_reduce %a {kind = \"max\"} : !warp.frag<acc, f16, V> -> !warp.rows<f32, V>", "f32 accumulator"),
    ("%x = warp.row_reduce %s {kind = \"min\"} : !warp.frag<acc, f32, V> -> !warp.rows<f32, V>", "kind must be"),
])
def test_warp_verifiers(body, message):
    from tilemma.compiler.driver.pipeline import parse

    with pytest.raises((LocatedVerifyError, VerifyException), match=message):
        parse(_warp_ir(body), "k.mlir")


def test_shfl_bfly_in_the_emulator():
    """shfl.sync.bfly.b32 swaps values between lanes i and i ^ mask within each warp; a partial
    member mask or another mode is refused."""
    lines = [
        ".reg .b32 %r<8>;", ".reg .b64 %rd<8>;",
        "mov.u32 %r0, %tid.x;", "mul.wide.u32 %rd4, %r0, 4;",
        "ld.param.u64 %rd0, [p_x];", "add.s64 %rd5, %rd0, %rd4;", "ld.global.b32 %r1, [%rd5];",
        "shfl.sync.bfly.b32 %r2, %r1, 1, 31, 0xffffffff;", "shfl.sync.bfly.b32 %r3, %r1, 18, 31, 0xffffffff;",
        "mul.lo.u32 %r3, %r3, 1000;", "add.u32 %r2, %r2, %r3;",
        "ld.param.u64 %rd0, [p_out];", "add.s64 %rd5, %rd0, %rd4;", "st.global.b32 [%rd5], %r2;", "ret;",
    ]  # fmt: skip
    x = np.random.default_rng(2).integers(0, 1000, 64).astype(np.uint32)
    [_, _, _, out] = emulate(_kernel(lines), "k", 1, 64, [x, x, x, np.zeros(64, np.uint32)])
    t = np.arange(64)
    assert out.tolist() == (x[t ^ 1] + 1000 * x[t ^ 18]).tolist()
    for bad in ("shfl.sync.bfly.b32 %r2, %r1, 1, 31, 0xffff;", "shfl.sync.up.b32 %r2, %r1, 1, 0, 0xffffffff;"):
        with pytest.raises(EmulationError, match="shfl"):
            emulate(_kernel([bad if ln.startswith("shfl.sync.bfly.b32 %r2") else ln for ln in lines]), "k", 1, 64,
                    [x, x, x, np.zeros(64, np.uint32)])


def _refused(text: str, message: str) -> None:
    with pytest.raises(LocatedVerifyError, match=message) as e:
        compile_text(text, "attention.mlir", CompileOptions())
    assert "attention.mlir:" in str(e.value)


def test_refusals_name_what_is_supported():
    spec = AttentionSpec(1, 1, 40, 64)
    text = attention_text(spec)
    _refused(attention_text(AttentionSpec(1, 1, 40, 80)), "head dim 80 of Q and K is not supported")
    _refused(text.replace("    %out = tile.cast", "    tile.store %p, %x[0, 0, 0] : !tile.tile<1x40x40xf32>, "
                                                  "memref<1x40x40xf32>\n    %out = tile.cast")
             .replace("%o: memref<1x40x64xf16>)", "%o: memref<1x40x64xf16>, %x: memref<1x40x40xf32>)"),
             "exactly one use")
    _refused(text.replace("{scale = 0.125 : f32}", "{scale = -1.0 : f32}"), "scale must be a positive finite number")
    _refused(text.replace("%out = tile.cast %acc : !tile.tile<1x40x64xf32> -> !tile.tile<1x40x64xf16>",
                          "%out = tile.cast %acc : !tile.tile<1x40x64xf32> -> !tile.tile<1x40x64xf8E4M3FN>")
             .replace("tile.store %out, %o[0, 0, 0] : !tile.tile<1x40x64xf16>, memref<1x40x64xf16>",
                      "tile.store %out, %o[0, 0, 0] : !tile.tile<1x40x64xf8E4M3FN>, memref<1x40x64xf8E4M3FN>")
             .replace("%o: memref<1x40x64xf16>)", "%o: memref<1x40x64xf8E4M3FN>)"), "O is stored as f16, bf16 or f32")
    _refused(text.replace("%p = tile.softmax %s", "%p = tile.softmax %zs"), "must take the result of tile.mma")
    _refused(text.replace("    func.return", "    %x = tile.constant 1.0 : !tile.tile<1x40x64xf32>\n    func.return"),
             "a kernel holds the attention alone")


def test_the_casts_roundings_are_honoured():
    """A `tile.cast {rounding rz}` of P and of O becomes cvt.rz in the PTX, and the check's bound
    takes the directed rounding's unit."""
    text = attention_text(AttentionSpec(1, 1, 40, 64))
    for cast in ("%ph = tile.cast %p", "%out = tile.cast %acc"):
        text = text.replace(f"{cast} :", f"{cast} {{rounding = #tile<rounding rz>}} :")
    [kernel] = compile_text(text, "attention.mlir", CompileOptions())
    assert kernel.ptx.count("cvt.rz.f16.f32") and "cvt.rn.f16.f32" not in kernel.ptx
    result = run_attention(kernel, seed=2, on="emulator")
    assert result.ok, result.detail


def test_ctas_per_sm_reach_ptxas_and_are_checked():
    """`attention_ctas` becomes `.minnctapersm` (PTX that our parser reads back with it), and a
    count the SM's shared memory cannot hold is a located error."""
    text = attention_text(AttentionSpec(1, 1, 128, 128))
    [kernel] = compile_text(text, "attention.mlir", CompileOptions(attention_rows=16, attention_q_shared="no",
                                                                   attention_ctas=3))
    assert ".maxntid 128, 1, 1\n.minnctapersm 3\n{" in kernel.ptx
    [entry] = [e for e in parse_ptx(kernel.ptx).body.ops if isinstance(e, ptx.EntryOp)]
    assert entry.min_ctas is not None and entry.min_ctas.value.data == 3
    assert print_ptx(parse_ptx(kernel.ptx)) == kernel.ptx
    with pytest.raises(PtxSyntaxError, match=r"<ptx>:14: expected '\.minnctapersm N'"):
        parse_ptx(kernel.ptx.replace(".minnctapersm 3", ".minnctapersm three"))
    for options, message in (
            (CompileOptions(attention_rows=16, attention_ctas=3),  # Q staged: 80 KiB a CTA
             r"3 CTAs an SM need 3 x \(81920 \+ 1024\) bytes of shared memory; an SM has 233472 on sm_90"),
            (CompileOptions(sm="80", attention_ctas=2),  # 96 KiB a CTA on a 164 KiB SM
             r"2 CTAs an SM need 2 x \(98304 \+ 1024\) bytes of shared memory; an SM has 167936 on sm_80")):
        with pytest.raises(LocatedVerifyError, match=message) as e:
            compile_text(text, "attention.mlir", options)
        assert "attention.mlir:" in str(e.value)
