"""Fused epilogues through `tilemma gemm`, `tilemma run` and the runner.

Three layers:

* the generator: every combination of the epilogue options makes IR that verifies, prints and
  parses back (`tilemma-opt`), with the kernel name encoding the options;
* the runner's plumbing, on a stand-in device (no lowering involved): random epilogue inputs,
  every output checked with the interval rule, windows, --input, --save, and the failures a
  wrong kernel must produce;
* end to end: `tilemma gemm ... | tilemma run -` on the emulator (and on a GPU where there is one)
  for f16, bf16, s8 (dequantised), tf32 and f64 GEMMs at odd sizes, staged and simple schedules.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.inprocess import run_main
from tilemma.compiler.driver import cli
from tilemma.compiler.driver import opt as opt_main
from tilemma.compiler.core.memref_layout import strided_layout
from tilemma.compiler.driver import runner
from tilemma.compiler.driver.gemm_generator import ACTIVATIONS, GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompiledKernel, CompileOptions, _apply, parse
from tilemma.compiler.runtime.abi import KernelABI, Param
from tilemma.compiler.verify import epilogue_reference as er
from tilemma.compiler.verify import reference
from tilemma.dialects.attributes import element_name
from tilemma.passes.tile.gemm_kernel import MemOperand, read_kernel
from tilemma.passes.tile.select_mma import SelectMma


def tilemma(*args, stdin=None):
    """`tilemma ARGS`, run in this process (tests.inprocess: a subprocess costs a second of start-up)."""
    return run_main("tilemma", cli.main, args, stdin)


def opt(*args, stdin=None):
    return run_main("tilemma-opt", opt_main.main, args, stdin)


# --- the generator --------------------------------------------------------------------------

EPILOGUES = [
    dict(zip(("vector_scales", "bias", "act", "out", "aux"), combo))
    for combo in itertools.product((None, "rows", "rows,cols"), (None, "col", "row"), (None, *ACTIVATIONS),
                                   (None, "f16", "bf16", "f32", "e4m3", "e5m2"), (False, True))
    if not (combo[4] and combo[2] is None)
]


@pytest.mark.parametrize("a,acc", [("f16", "f32"), ("si8", None), ("f64", None), ("tf32", None)])
def test_every_option_combination_verifies(a, acc):
    """f16 -> f32 takes every combination (each fourth batched); the other types a cover in which
    every option value meets every other type's (f64 stores f64 or f32). Each module verifies when
    built; every ninth is printed and parsed back."""
    from tilemma.compiler.driver.pipeline import parse as parse_text

    cases = EPILOGUES if a == "f16" else EPILOGUES[::11]
    names = set()
    for i, epi in enumerate(cases):
        if a == "f64" and epi["out"] not in (None, "f32"):
            epi = {**epi, "out": "f32"}
        batch, bcast = ((3, "b") if i % 8 == 1 else (2, None)) if i % 4 == 1 else (None, None)
        spec = GemmSpec(13, 21, 8, a, a, acc, batch, bcast, alpha=0.25 if i % 3 == 0 else None, **epi)
        module = gemm_module(spec)  # verifies
        if i % 9 == 0:
            text = str(module)
            assert str(parse_text(text, "gen.mlir")[0]) == text
        names.add(spec.name)
    assert len(names) == len(cases)  # every combination its own kernel name


def test_gemm_epilogue_text_reads_naturally_and_round_trips():
    g = tilemma("gemm", "--m", "37", "--n", "91", "--k", "53", "--a", "f16", "--b", "f16", "--acc", "f32",
                "--bias", "col", "--act", "gelu", "--out", "f16", "--aux")
    assert g.returncode == 0, g.stderr
    text = g.stdout
    assert ("func.func @gemm_37x91x53_f16_f16_f32_bias_col_gelu_out_f16_aux(%a: memref<37x53xf16>, "
            "%b: memref<53x91xf16>, %c: memref<37x91xf32>, %bias: memref<91xf16>, %d: memref<37x91xf16>, "
            "%pre: memref<37x91xf32>)") in text
    assert "%tbias = tile.broadcast %bias[0] dims [1] : memref<91xf16> -> !tile.tile<37x91xf16>" in text
    for line in ("%z = arith.addf %x, %bv_f32 : f32", "%erf = math.erf %xs : f32",
                 "%y_out = arith.truncf %gelu : f32 to f16", "tile.yield %y_out, %z : f16, f32",
                 "tile.store %td, %d[0, 0]", "tile.store %tpre, %pre[0, 0]"):
        assert line in text, line
    again = opt(stdin=text)
    assert again.returncode == 0 and again.stdout.strip() == text.strip(), again.stderr


def test_gemm_dequant_and_fp8_forms():
    g = tilemma("gemm", "--m", "37", "--n", "91", "--k", "64", "--a", "s8", "--b", "s8", "--scale", "rows,cols",
                "--bias", "col", "--act", "silu", "--out", "e4m3", "--batch", "2", "--bcast", "b", "--no-c")
    assert g.returncode == 0, g.stderr
    text = g.stdout
    assert "@gemm_b2b_37x91x64_si8_si8_si32_noc_scale_rows_cols_bias_col_silu_out_e4m3(" in text
    # the row scale belongs to A's rows (one per batch), the column scale and bias to the shared B
    assert "%scale_rows: memref<2x37xf32>, %scale_cols: memref<91xf32>, %bias: memref<91xf16>" in text
    assert "tile.broadcast %scale_rows[0, 0] dims [0, 1]" in text and "tile.broadcast %bias[0] dims [2]" in text
    assert "%x_f32 = arith.sitofp %x : i32 to f32" in text
    assert "%sig = arith.divf %one, %den : f32" in text
    assert "%td = tile.cast %y : !tile.tile<2x37x91xf32> -> !tile.tile<2x37x91xf8E4M3FN>" in text
    assert opt(stdin=text).returncode == 0
    # only a conversion: tile.cast, no map
    c = tilemma("gemm", "--m", "16", "--n", "8", "--k", "16", "--a", "f16", "--b", "f16", "--acc", "f32",
                "--out", "bf16")
    assert "tile.map" not in c.stdout and "%td = tile.cast %acc : !tile.tile<16x8xf32> -> !tile.tile<16x8xbf16>" in c.stdout


@pytest.mark.parametrize("args,message", [
    (["--aux"], "--aux stores the pre-activation: it needs --act"),
    (["--out", "f64"], "--out f64 needs an f64 GEMM"),
    (["--out", "s8"], "the output type is one of f16, bf16, f32, f64, e4m3, e5m2"),
    (["--scale", "rows,diag"], "--scale rows,diag: expected rows, cols or rows,cols"),
    (["--act", "tanh"], "invalid choice: 'tanh'"),
    (["--alpha", "inf"], "--alpha must be finite"),
])
def test_gemm_epilogue_bad_options(args, message):
    g = tilemma("gemm", "--m", "16", "--n", "8", "--k", "16", "--a", "f16", "--b", "f16", "--acc", "f32", *args)
    assert g.returncode != 0 and message in g.stderr and "Traceback" not in g.stderr, g.stderr


# --- the runner on a stand-in device -------------------------------------------------------


def _fake_compiled(text: str) -> CompiledKernel:
    """The kernel as the runner sees it, without lowering it: the tile IR read after selection
    and an ABI with each argument's memref layout."""
    from xdsl.dialects import func

    module, locations = parse(text, "t.mlir")
    passes = CompileOptions().passes()
    front = next(i for i, p in enumerate(passes) if isinstance(p, SelectMma)) + 1
    _apply(passes[:front], module, locations)
    kernel = next(op for op in module.body.ops if isinstance(op, func.FuncOp))
    g = read_kernel(kernel)
    params = []
    for arg in kernel.body.block.args:
        layout = strided_layout(arg.type)
        params.append(Param(f"p_{arg.name_hint}", (arg.name_hint,), tuple(arg.type.get_shape()),
                            element_name(arg.type.element_type), layout.strides, layout.offset))
    abi = KernelABI(g.name, (1, 1, 1), (32, 1, 1), tuple(params))
    return CompiledKernel(g.name, "// no PTX: a stand-in device runs it", "fake", abi, g)


class Device:
    """Computes what a correct kernel stores (the reference GEMM, then the epilogue on the point
    accumulator), optionally wrong in a chosen way; records the arguments it was given."""

    def __init__(self, kernel: CompiledKernel, wrong=None):
        self.kernel, self.wrong, self.seen = kernel, wrong, None

    def __call__(self, ptx, name, grid, block, args, shared_bytes=0, arch=None, ahead="leaders"):
        g = self.kernel.gemm
        self.seen = [a.copy() for a in args]
        view = lambda i, mem, r, c: runner._view(args[i].reshape(-1), mem, g, r, c)  # noqa: E731
        a, at = runner._logical(view(g.a.param, g.a, g.m, g.k), g.a)
        b, bt = runner._logical(view(g.b.param, g.b, g.k, g.n), g.b)
        c = view(g.c.param, g.c, g.m, g.n) if isinstance(g.c, MemOperand) else np.full(
            (1, g.m, g.n), g.c, reference.element_type(g.acc_type).dtype)
        want = reference.mma_reference(a, b, np.broadcast_to(c, (g.batch, g.m, g.n)), a_type=at, b_type=bt,
                                       acc_type=g.acc_type)
        inputs = {op: np.broadcast_to(view(mem.param, mem, g.m, g.n), (g.batch, g.m, g.n)) for op, mem in g.inputs}
        env = er.evaluate_epilogue(g.epilogue, g.mma.results[0], er.Interval.point(want, g.acc_type), inputs)
        outs = [x.copy() for x in args]
        for store, mem in g.outputs:
            flat = outs[mem.param].reshape(-1)
            at_ = runner._view(np.arange(flat.size), mem, g, g.m, g.n)
            value = env[store.value]
            flat[at_] = np.where(np.isnan(value.lo), np.nan, value.lo).astype(flat.dtype)
        if self.wrong:
            self.wrong(g, outs)
        return outs


def _run(monkeypatch, text, wrong=None, **kw):
    from tilemma.compiler.verify import emulator

    kernel = _fake_compiled(text)
    device = Device(kernel, wrong)
    monkeypatch.setattr(emulator, "emulate", device)
    return runner.run_compiled(kernel, kw.pop("seed", 0), "emulator", **kw), device, kernel


BIAS_RELU = """
func.func @k(%a: memref<37x53xf16>, %b: memref<53x91xf16>, %bias: memref<91xf16>, %d: memref<40x91xf16>,
             %pre: memref<37x91xf32>) {
  %ta = tile.load %a[0, 0] : memref<37x53xf16> -> !tile.tile<37x53xf16>
  %tb = tile.load %b[0, 0] : memref<53x91xf16> -> !tile.tile<53x91xf16>
  %z = tile.constant 0.0 : !tile.tile<37x91xf32>
  %acc = tile.mma %ta, %tb, %z : !tile.tile<37x53xf16>, !tile.tile<53x91xf16>, !tile.tile<37x91xf32> -> !tile.tile<37x91xf32>
  %bb = tile.broadcast %bias[0] dims [1] : memref<91xf16> -> !tile.tile<37x91xf16>
  %y, %s = tile.map %acc, %bb : !tile.tile<37x91xf32>, !tile.tile<37x91xf16> -> !tile.tile<37x91xf16>, !tile.tile<37x91xf32> {
  ^bb0(%x: f32, %bv: f16):
    %bf = arith.extf %bv : f16 to f32
    %s1 = arith.addf %x, %bf : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %s1, %zero : f32
    %o = arith.truncf %r : f32 to f16
    tile.yield %o, %s1 : f16, f32
  }
  tile.store %y, %d[2, 0] : !tile.tile<37x91xf16>, memref<40x91xf16>
  tile.store %s, %pre[0, 0] : !tile.tile<37x91xf32>, memref<37x91xf32>
  func.return
}
"""


def test_fused_kernel_passes_with_every_output(monkeypatch):
    result, device, kernel = _run(monkeypatch, BIAS_RELU)
    assert result.ok, result.detail
    assert set(result.outputs) == {"d", "pre"}
    assert result.outputs["d"].shape == (40, 91) and result.outputs["pre"].shape == (37, 91)
    d = result.outputs["d"]
    assert np.isnan(d[:2]).all() and np.isnan(d[39]).all()  # outside the window: the sentinel, untouched
    pre = result.outputs["pre"]
    assert (pre < 0).any() and (pre > 0).any()  # relu sees both sides
    assert np.array_equal(d[2:39], np.maximum(pre, 0).astype(np.float16))
    bias = device.seen[2]
    assert np.isfinite(bias).all()  # read entirely: random values, no sentinel
    assert {2.0**14, -(2.0**14), 2.0**-14} <= set(bias.astype(np.float64).tolist())
    assert any(v == 0 and np.signbit(v) for v in bias)  # -0 among them


def test_wrong_element_is_caught(monkeypatch):
    def flip(g, outs):
        outs[3].reshape(40, 91)[2 + 5, 7] += np.float16(0.5)
    result, _, _ = _run(monkeypatch, BIAS_RELU, flip)
    assert not result.ok and "d: 1 of 3367 elements outside the reference's intervals; first at (0, 5, 7)" in result.detail


def test_wrong_bias_column_is_caught(monkeypatch):
    def shift(g, outs):
        pre = outs[4].reshape(37, 91)
        pre[:, 10] = pre[:, 11]
    result, _, _ = _run(monkeypatch, BIAS_RELU, shift)
    assert not result.ok and "pre:" in result.detail and "first at (0, 0, 10)" in result.detail


def test_write_outside_the_window_is_caught(monkeypatch):
    def spill(g, outs):
        outs[3].reshape(40, 91)[0, 0] = 1
    result, _, _ = _run(monkeypatch, BIAS_RELU, spill)
    assert not result.ok and result.detail == "elements of d outside the stored tile changed"


def test_given_epilogue_input_is_used_as_is(monkeypatch):
    bias = (np.arange(91) % 7 - 3).astype(np.float16)
    result, device, _ = _run(monkeypatch, BIAS_RELU, inputs={"bias": bias})
    assert result.ok and np.array_equal(device.seen[2], bias)


RESIDUAL_IN_PLACE = """
func.func @r(%a: memref<2x20x16xbf16>, %b: memref<1x16x24xbf16>, %d: memref<2x20x24xbf16>, %alpha: memref<1xf32>) {
  %ta = tile.load %a[0, 0, 0] : memref<2x20x16xbf16> -> !tile.tile<2x20x16xbf16>
  %tb = tile.load %b[0, 0, 0] : memref<1x16x24xbf16> -> !tile.tile<1x16x24xbf16>
  %z = tile.constant 0.0 : !tile.tile<2x20x24xf32>
  %acc = tile.mma %ta, %tb, %z : !tile.tile<2x20x16xbf16>, !tile.tile<1x16x24xbf16>, !tile.tile<2x20x24xf32> -> !tile.tile<2x20x24xf32>
  %res = tile.load %d[0, 0, 0] : memref<2x20x24xbf16> -> !tile.tile<2x20x24xbf16>
  %al = tile.broadcast %alpha[0] dims [] : memref<1xf32> -> !tile.tile<2x20x24xf32>
  %y = tile.map %acc, %res, %al : !tile.tile<2x20x24xf32>, !tile.tile<2x20x24xbf16>, !tile.tile<2x20x24xf32> -> !tile.tile<2x20x24xbf16> {
  ^bb0(%x: f32, %r: bf16, %s: f32):
    %rf = arith.extf %r : bf16 to f32
    %t = math.fma %x, %s, %rf : f32
    %o = arith.truncf %t : f32 to bf16
    tile.yield %o : bf16
  }
  tile.store %y, %d[0, 0, 0] : !tile.tile<2x20x24xbf16>, memref<2x20x24xbf16>
  func.return
}
"""


def test_in_place_residual_and_scalar_argument(monkeypatch):
    """D = alpha * acc + D, the residual read from the output itself, alpha a one-element
    argument: the reference reads D's values before the kernel."""
    result, device, kernel = _run(monkeypatch, RESIDUAL_IN_PLACE)
    assert result.ok, result.detail
    before = device.seen[2].reshape(2, 20, 24).astype(np.float64)
    alpha = float(device.seen[3][0])
    after = result.outputs["d"].astype(np.float64)
    assert np.isfinite(before).all() and not np.array_equal(before, after)
    acc = after - before  # roughly alpha * A B: the residual was added
    assert np.abs(acc).max() > 0

    def stale(g, outs):  # forgot the residual in one element
        outs[2].reshape(2, 20, 24)[1, 3, 4] = outs[2].reshape(2, 20, 24)[1, 3, 4] - device.seen[2].reshape(2, 20, 24)[1, 3, 4]
    result, _, _ = _run(monkeypatch, RESIDUAL_IN_PLACE, stale)
    assert not result.ok and "first at (1, 3, 4)" in result.detail, result.detail


def test_dequantised_int8_inputs_are_scaled(monkeypatch):
    text = str(gemm_module(GemmSpec(37, 91, 64, "s8", "s8", vector_scales="rows,cols", bias="col",
                                    act="gelu", out="f16", aux=True)))
    result, device, kernel = _run(monkeypatch, text)
    assert result.ok, result.detail
    pre = result.outputs["pre"]
    median = np.median(np.abs(pre))
    assert 2.0**-6 < median < 2.0**6, median  # acc * s_row * s_col lands near 1
    assert (pre < 0).any() and (pre > 0).any()
    assert set(result.outputs) == {"d", "pre"}


def test_plain_kernel_keeps_the_comparison(monkeypatch):
    text = str(gemm_module(GemmSpec(37, 91, 53, "f16", "f16", "f32")))
    result, _, kernel = _run(monkeypatch, text)
    assert not kernel.gemm.fused
    assert result.ok and list(result.outputs) == ["d"]

    def flip(g, outs):
        outs[3].reshape(37, 91)[4, 4] += 1
    result, _, _ = _run(monkeypatch, text, flip)
    assert not result.ok and "f32 accumulation of K=53" in result.detail  # reference.compare's words


def test_run_saves_every_output(monkeypatch, tmp_path, capsys):
    from tilemma.compiler.driver import cli, pipeline
    from tilemma.compiler.verify import emulator

    kernel = _fake_compiled(BIAS_RELU)
    monkeypatch.setattr(pipeline, "compile_text", lambda *a, **k: [kernel])
    monkeypatch.setattr(emulator, "emulate", Device(kernel))
    src = tmp_path / "k.mlir"
    src.write_text(BIAS_RELU)
    bias = tmp_path / "bias.npy"
    np.save(bias, np.ones(91, np.float16))
    assert cli.main(["run", str(src), "--on", "emulator", "--save", str(tmp_path / "out"),
                     "--input", f"bias={bias}"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out
    pre = np.load(tmp_path / "out" / "k.pre.npy")
    d = np.load(tmp_path / "out" / "k.d.npy")
    assert pre.shape == (37, 91) and d.shape == (40, 91)
    assert np.array_equal(d[2:39], np.maximum(pre, 0).astype(np.float16))


# --- end to end ---------------------------------------------------------------------------

# (a, acc, epilogue options, sizes): f16, bf16, s8 dequantised, tf32, f64 where the op applies.
E2E = [
    ("f16", "f32", ["--bias", "col", "--act", "gelu", "--out", "f16"], (37, 91, 53)),
    ("f16", "f32", ["--bias", "row", "--act", "relu", "--out", "f16", "--aux"], (130, 70, 200)),
    ("bf16", "f32", ["--bias", "col", "--act", "gelu-tanh", "--out", "bf16"], (37, 91, 53)),
    ("bf16", "f32", ["--act", "silu", "--out", "e4m3"], (130, 70, 200)),
    ("s8", None, ["--scale", "rows,cols", "--bias", "col", "--act", "gelu", "--out", "f16"], (37, 91, 64)),
    ("s8", None, ["--scale", "cols", "--act", "sigmoid", "--out", "e5m2", "--aux"], (130, 70, 128)),
    ("tf32", None, ["--alpha", "0.5", "--bias", "col", "--act", "relu"], (37, 91, 53)),
    ("f64", None, ["--bias", "col", "--act", "relu", "--out", "f32"], (37, 45, 29)),
]


def _e2e_id(case):
    a, _, opts, (m, n, k) = case
    return f"{a}-{'_'.join(o.lstrip('-').replace(',', '') for o in opts)}-{m}x{n}x{k}"


def _gemm_args(case, extra=()):
    a, acc, opts, (m, n, k) = case
    return ["gemm", "--m", str(m), "--n", str(n), "--k", str(k), "--a", a, "--b", a,
            *(["--acc", acc] if acc else []), *(["--b-layout", "col"] if a == "s8" else []), *opts, *extra]


@pytest.mark.parametrize("schedule", ["staged", "simple"])
@pytest.mark.parametrize("case", E2E, ids=_e2e_id)
def test_gemm_epilogue_runs_on_the_emulator(case, schedule):
    g = tilemma(*_gemm_args(case))
    assert g.returncode == 0, g.stderr
    stages = [] if schedule == "staged" else ["--stages", "0"]
    r = tilemma("run", "-", "--on", "emulator", *stages, stdin=g.stdout)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("act", [("f16", None, ["silu"], None), ("f16", None, ["relu"], None)],
                         ids=lambda c: c[2][0])
def test_batched_broadcast_epilogue_on_the_emulator(act):
    case = ("f16", "f32", ["--scale", "rows", "--bias", "col", "--act", act[2][0], "--out", "f16", "--aux"],
            (37, 45, 40))
    g = tilemma(*_gemm_args(case, ["--batch", "3", "--bcast", "b"]))
    assert g.returncode == 0, g.stderr
    r = tilemma("run", "-", "--on", "emulator", stdin=g.stdout)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


RESIDUAL = """
func.func @r1(%a: memref<20x16xf16>, %b: memref<16x24xf16>, %r: memref<20x24xf16>, %d: memref<20x24xf16>) {
  %ta = tile.load %a[0, 0] : memref<20x16xf16> -> !tile.tile<20x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x24xf16> -> !tile.tile<16x24xf16>
  %z = tile.constant 0.0 : !tile.tile<20x24xf32>
  %acc = tile.mma %ta, %tb, %z : !tile.tile<20x16xf16>, !tile.tile<16x24xf16>, !tile.tile<20x24xf32> -> !tile.tile<20x24xf32>
  %res = tile.load %r[0, 0] : memref<20x24xf16> -> !tile.tile<20x24xf16>
  %y = tile.map %acc, %res : !tile.tile<20x24xf32>, !tile.tile<20x24xf16> -> !tile.tile<20x24xf16> {
  ^bb0(%x: f32, %rv: f16):
    %rf = arith.extf %rv : f16 to f32
    %t = arith.addf %x, %rf : f32
    %o = arith.truncf %t : f32 to f16
    tile.yield %o : f16
  }
  tile.store %y, %d[0, 0] : !tile.tile<20x24xf16>, memref<20x24xf16>
  func.return
}
"""

CONSTANT_INPUT = """
func.func @c1(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %d: memref<16x8xf32>) {
  %ta = tile.load %a[0, 0] : memref<16x16xf16> -> !tile.tile<16x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x8xf16> -> !tile.tile<16x8xf16>
  %z = tile.constant 0.0 : !tile.tile<16x8xf32>
  %acc = tile.mma %ta, %tb, %z : !tile.tile<16x16xf16>, !tile.tile<16x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  %two = tile.constant 2.0 : !tile.tile<16x8xf32>
  %y = tile.map %acc, %two : !tile.tile<16x8xf32>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32> {
  ^bb0(%x: f32, %t: f32):
    %m = arith.mulf %x, %t : f32
    tile.yield %m : f32
  }
  tile.store %y, %d[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32>
  func.return
}
"""


@pytest.mark.parametrize("text", [
    pytest.param(RESIDUAL, id="residual-tile-load"),
    pytest.param(CONSTANT_INPUT, id="tile-constant-input"),
])
def test_epilogue_inputs_lower(text):
    """A residual tile (tile.load) and a tile.constant as map inputs, as gemm_kernel reads them."""
    from tilemma.compiler.driver.pipeline import compile_text

    [kernel] = compile_text(text, "t.mlir", CompileOptions(sm="90", ptx="9.0"))
    assert kernel.gemm.fused


def _gpu():
    from tilemma.compiler.runtime import cuda_runtime

    return cuda_runtime.gpu_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="no GPU")
# the GPU's words are compared with the emulator's (runner._gpu_twin_differs)
@pytest.mark.parametrize("schedule", ["staged", "simple"])
@pytest.mark.parametrize("case", E2E, ids=_e2e_id)
def test_gemm_epilogue_runs_on_the_gpu(case, schedule):
    g = tilemma(*_gemm_args(case))
    assert g.returncode == 0, g.stderr
    stages = [] if schedule == "staged" else ["--stages", "0"]
    r = tilemma("run", "-", "--on", "gpu", *stages, stdin=g.stdout)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
