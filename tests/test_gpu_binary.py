"""`tilemma compile --emit gpu-binary`: the structure of the module, the PTX carried byte for byte,
and (where MLIR 19 tools are installed, e.g. Debian's mlir-19-tools) that `mlir-opt --gpu-to-llvm`
accepts it and `mlir-translate` embeds the PTX and launches with the ABI's grid and block."""

import re
import shutil
import subprocess

import pytest

from tilemma.compiler.driver import cli
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.gpu_binary import gpu_binary_module, host_memref, mlir_string
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text


def _tool(name):
    return shutil.which(name) or shutil.which(f"{name}-19")


MLIR_OPT, MLIR_TRANSLATE = _tool("mlir-opt"), _tool("mlir-translate")
needs_mlir = pytest.mark.skipif(
    not (MLIR_OPT and MLIR_TRANSLATE),
    reason="mlir-opt / mlir-translate (MLIR 19, e.g. apt install mlir-19-tools) not on PATH",
)

SPECS = {
    "dense_strided": None,  # linalg input with a strided C (below)
    "staged": GemmSpec(128, 128, 128, "f16", "f16", "f32"),  # dynamic shared memory, 2 CTAs
    "sparse": GemmSpec(16, 8, 32, "f16", "f16", "f32", sparse_a=True),  # the sparsity error word
    "fp4": GemmSpec(16, 8, 64, "e2m1", "e2m1", "f32"),  # an element type MLIR 19 lacks, packed
}
LINALG = """func.func @k(%a: memref<37x45xf16>, %b: memref<45x29xf16>, %c: memref<37x29xf32, strided<[32, 1], offset: 3>>) {
  linalg.matmul ins(%a, %b : memref<37x45xf16>, memref<45x29xf16>) outs(%c : memref<37x29xf32, strided<[32, 1], offset: 3>>)
  func.return
}
"""


def _kernels(case):
    spec = SPECS[case]
    text = LINALG if spec is None else str(gemm_module(spec))
    return compile_text(text, case, CompileOptions(sm="120a" if case == "fp4" else "90"))


def _unescape(literal: str) -> str:
    return re.sub(r"\\([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), literal).encode("latin-1").decode()


def test_mlir_string_escapes_what_mlir_escapes():
    assert mlir_string('a "b" \\c\n\t\0é') == '"a \\22b\\22 \\5Cc\\0A\\09\\00\\C3\\A9"'


@pytest.mark.parametrize("case", SPECS)
def test_module_structure(case):
    kernels = _kernels(case)
    chip = "sm_120a" if case == "fp4" else "sm_90"
    text = gpu_binary_module(kernels, chip)
    [k] = kernels
    [obj] = re.findall(
        rf'gpu.binary @{k.name}_module \[#gpu.object<#nvvm.target<chip = "{chip}">, '
        r'properties = \{O = 3 : i32\}, assembly = "((?:[^"\\]|\\[0-9A-F]{2})*)">\]',
        text,
    )
    assert _unescape(obj) == k.ptx + "\0"  # the PTX, byte for byte, NUL-terminated
    sig = ", ".join(f"%{p.name.removeprefix('p_')}: {host_memref(p)}" for p in k.abi.params)
    assert f"func.func @{k.name}({sig}) {{" in text
    grid = ", ".join(f"%c{v}" for v in k.grid)
    block = ", ".join(f"%c{v}" for v in k.block)
    args = ", ".join(f"%{p.name.removeprefix('p_')}_ptr : i64" for p in k.abi.params)
    launch = (f"@{k.name}_module::@{k.name} blocks in ({grid}) threads in ({block}) "
              f"dynamic_shared_memory_size %shared args({args})")
    assert launch in text
    assert f"%shared = arith.constant {k.abi.shared_bytes} : i32" in text
    for v in (*k.grid, *k.block):
        assert f"%c{v} = arith.constant {v} : index" in text
    if case == "sparse":
        assert "%sparsity_error_init = arith.constant -1 : i32" in text
        assert "gpu.memset async [%t0] %sparsity_error, %sparsity_error_init : memref<1xi32>, i32" in text
    if case == "fp4":
        assert "memref<16x64xi4>" in text  # f4E2M1FN travels as its 4-bit storage
    if case == "dense_strided":
        assert "%c: memref<37x29xf32, strided<[32, 1], offset: 3>>" in text


def test_cli_emits_it(tmp_path, capsys):
    src = tmp_path / "k.mlir"
    src.write_text(LINALG)
    assert cli.main(["compile", str(src), "--emit", "gpu-binary"]) == 0
    [k] = compile_text(LINALG, "k", CompileOptions())
    assert capsys.readouterr().out == gpu_binary_module([k], "sm_90")


def test_cli_keeps_the_automatic_tma_kernels_on_cp_async(tmp_path, capsys):
    """The sparse sm_90a kernels take the TMA by themselves; --emit gpu-binary, which passes no
    tensor maps, keeps them on cp.async (as before), and refuses the TMA where it is asked for."""
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module

    src = tmp_path / "s.mlir"
    src.write_text(str(gemm_module(GemmSpec(4096, 4096, 4096, "f16", "f16", "f32", pre_compressed=True))))
    [k] = compile_text(src.read_text(), "s", CompileOptions(sm="90a"))
    assert k.abi.tensor_maps  # (the default elsewhere)
    assert cli.main(["compile", str(src), "--sm", "90a", "--emit", "gpu-binary"]) == 0
    out = capsys.readouterr().out
    assert "gpu.launch_func" in out and "cp.async.bulk.tensor" not in out and "cp.async.cg" in out
    assert cli.main(["compile", str(src), "--sm", "90a", "--emit", "gpu-binary", "--tma", "1"]) == 1
    assert "--emit gpu-binary does not pass tensor maps yet" in capsys.readouterr().err


@needs_mlir
@pytest.mark.parametrize("case", SPECS)
def test_mlir_gpu_to_llvm_accepts_and_launches(case):
    [k] = _kernels(case)
    text = gpu_binary_module([k], "sm_120a" if case == "fp4" else "sm_90")
    llvm_dialect = subprocess.run(
        [MLIR_OPT, "--gpu-to-llvm", "--reconcile-unrealized-casts", "-"],
        input=text, capture_output=True, text=True,
    )
    assert llvm_dialect.returncode == 0, llvm_dialect.stderr
    ir = subprocess.run([MLIR_TRANSLATE, "--mlir-to-llvmir", "-"], input=llvm_dialect.stdout,
                        capture_output=True, text=True)
    assert ir.returncode == 0, ir.stderr
    [blob] = re.findall(rf'@{k.name}_module_bin_cst = internal constant \[\d+ x i8\] c"((?:[^"])*)"', ir.stdout)
    assert _unescape(blob) == k.ptx + "\0"  # embedded as given, a C string for the JIT
    assert f"@mgpuModuleLoadJIT(ptr @{k.name}_module_bin_cst, i32 3)" in ir.stdout
    gx, gy, gz = k.grid
    bx, by, bz = k.block
    n = len(k.abi.params)
    assert re.search(
        rf"@mgpuLaunchKernel\(ptr %\d+, i64 {gx}, i64 {gy}, i64 {gz}, i64 {bx}, i64 {by}, i64 {bz}, "
        rf"i32 {k.abi.shared_bytes}, ptr %\d+, ptr %\d+, ptr null, i64 {n}\)",
        ir.stdout,
    ), ir.stdout
    if case == "sparse":
        assert re.search(r"@mgpuMemset32\(ptr %\d+, i32 -1, i64 1, ptr %\d+\)", ir.stdout)
