"""`tilemma compile --emit json` and `--metadata FILE`: the kernels' ABI, checked against the
compiled kernel (its PTX text and its `ptx.entry`)."""

import json
import re

import pytest

from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, lower, parse
from tilemma.dialects import ptx
from tests.inprocess import run_main
from tilemma.compiler.driver import cli

CASES = {
    "f16": GemmSpec(37, 91, 64, "f16", "f16", "f32"),
    "staged_bf16": GemmSpec(128, 128, 64, "bf16", "bf16", "f32"),
    "s4": GemmSpec(19, 24, 70, "si4", "si4", "si32"),
    "sparse": GemmSpec(16, 8, 32, "f16", "f16", "f32", sparse_a=True),
    "batched": GemmSpec(16, 16, 16, "f16", "f16", "f32", batch=3, bcast="b"),
}


def tilemma(*args, stdin=None):
    return run_main("tilemma", cli.main, args, stdin)  # in this process (tests.inprocess)


def entries(text: str) -> dict:
    module, locations = parse(text, "t")
    lower(module, locations, CompileOptions())
    return {e.sym_name.data: (e, pm) for pm in module.body.ops if isinstance(pm, ptx.ModuleOp_)
            for e in pm.body.ops}


@pytest.mark.parametrize("case", sorted(CASES))
def test_json_describes_the_compiled_kernel(case):
    text = str(gemm_module(CASES[case]))
    proc = tilemma("compile", "-", "--emit", "json", stdin=text)
    assert proc.returncode == 0, proc.stderr
    [k] = json.loads(proc.stdout)["kernels"]
    ptx_text = tilemma("compile", "-", stdin=text).stdout
    header, body = ptx_text.split(f".entry {k['name']}(", 1)
    params = re.findall(r"\.param \.u64 (\w+)", body.split(")", 1)[0])
    assert [p["name"] for p in k["params"]] == params
    assert f".version {k['ptx_version']}" in header and f".target {k['sm']}" in header
    assert f".maxntid {', '.join(map(str, k['block']))}" in body
    assert f"{k['instruction']}: grid ({', '.join(map(str, k['grid']))})" in body
    entry, module = entries(text)[k["name"]]
    assert k["grid"] == list(entry.grid.get_values()) and k["block"] == list(entry.block.get_values())
    assert k["shared_bytes"] == (entry.shared_bytes.value.data if entry.shared_bytes else 0)
    assert (k["sm"], k["ptx_version"]) == (module.target.data, module.version.data)
    for p, record in zip(k["params"], entry.abi.data, strict=True):
        memref = record.data["type"]
        assert p["shape"] == list(memref.get_shape()) and p["name"] == record.data["name"].data
        assert p["roles"] == [r.data for r in record.data["role"].data]
    if case == "staged_bf16":
        assert k["shared_bytes"] > 0 and "stages=0" not in k["config"]
    if case == "sparse":
        assert k["params"][-1]["init"] == 0xFFFFFFFF and k["params"][-1]["roles"] == ["sparsity_error"]
    if case == "s4":
        assert k["params"][0]["packing"] == "bits" and k["params"][0]["nbytes"] == (19 * 70 + 1) // 2


def test_metadata_is_written_beside_the_ptx(tmp_path):
    text = str(gemm_module(CASES["f16"]))
    out, meta = tmp_path / "k.ptx", tmp_path / "k.json"
    proc = tilemma("compile", "-", "-o", str(out), "--metadata", str(meta), stdin=text)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == tilemma("compile", "-", stdin=text).stdout
    assert json.loads(meta.read_text()) == json.loads(tilemma("compile", "-", "--emit", "json", stdin=text).stdout)


def test_metadata_with_warp_emit_and_two_kernels(tmp_path):
    two = str(gemm_module(CASES["f16"])).rstrip().removesuffix("}") + str(
        gemm_module(CASES["sparse"])).split("{", 1)[1]
    meta = tmp_path / "m.json"
    proc = tilemma("compile", "-", "--emit", "warp", "--metadata", str(meta), stdin=two)
    assert proc.returncode == 0, proc.stderr
    assert "warp.mma" in proc.stdout
    names = [k["name"] for k in json.loads(meta.read_text())["kernels"]]
    assert names == ["gemm_37x91x64_f16_f16_f32", "gemm_sparse_16x8x32_f16_f16_f32"]


def test_json_of_bad_input_is_a_located_error():
    proc = tilemma("compile", "-", "--emit", "json", stdin="func.func @k() {\n  %x = tile.frob\n}\n")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "<stdin>:3:1" in proc.stderr and "tile.frob is not registered" in proc.stderr
    assert "Traceback" not in proc.stderr
