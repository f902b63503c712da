"""The public Python API without a GPU: compiling from text and from a ModuleOp, the ABI, every
argument check a launch makes before it touches the device, and stream handles."""

import re

import numpy as np
import pytest

import tilemma
from tilemma.compiler.driver import api
from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import parse


def gemm(m=37, n=91, k=64, a="f16", b="f16", acc="f32", **kw) -> str:
    return str(gemm_module(GemmSpec(m, n, k, a, b, acc, **kw)))


STRIDED = """
func.func @strided(%a: memref<32x16xf16, strided<[24, 1], offset: 8>>, %b: memref<16x8xf16, strided<[1, 16]>>,
                   %d: memref<32x8xf16>) {
  %ta = tile.load %a[0, 0] : memref<32x16xf16, strided<[24, 1], offset: 8>> -> !tile.tile<32x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x8xf16, strided<[1, 16]>> -> !tile.tile<16x8xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<32x16xf16>, !tile.tile<16x8xf16> -> !tile.tile<32x8xf16>
  tile.store %td, %d[0, 0] : !tile.tile<32x8xf16>, memref<32x8xf16>
  func.return
}
"""


def entry_params(ptx: str, name: str) -> list[str]:
    body = ptx.split(f".entry {name}(", 1)[1].split(")", 1)[0]
    return re.findall(r"\.param \.u64 (\w+)", body)


# ------------------------------------------------------------------------------------ compiling


def test_version_is_the_installed_metadata():
    from importlib.metadata import version

    assert tilemma.__version__ == version("tilemma") and re.fullmatch(r"\d+\.\d+\.\d+.*", tilemma.__version__)


def test_compile_text_gives_kernels_with_their_abi():
    [k] = tilemma.compile(gemm(), sm="sm_90")
    assert isinstance(k, tilemma.Kernel) and k.name == "gemm_37x91x64_f16_f16_f32"
    assert k.ptx.startswith(".version") and f".entry {k.name}(" in k.ptx and ".target sm_90" in k.ptx
    assert k.sm == "sm_90" and k.instruction in k.ptx
    assert f".maxntid {k.block[0]}, {k.block[1]}, {k.block[2]}" in k.ptx
    assert f"grid ({k.grid[0]}, {k.grid[1]}, {k.grid[2]})" in k.ptx
    assert [p.name for p in k.abi.params] == entry_params(k.ptx, k.name) == ["p_a", "p_b", "p_c", "p_d"]
    a, b, c, d = k.abi.params
    assert (a.shape, a.strides, a.dtype, a.packing, a.roles) == ((37, 64), (64, 1), np.float16, "native", ("a",))
    assert (b.shape, c.shape, d.dtype, d.roles) == ((64, 91), (37, 91), np.float32, ("d",))
    assert all(p.init is None for p in k.abi.params)


def test_abi_of_packed_sparse_and_strided_kernels():
    [s4] = tilemma.compile(gemm(19, 24, 70, "si4", "si4", "si32"))
    a = s4.abi.params[0]
    assert (a.element, a.packing, a.dtype, a.nbytes) == ("si4", "bits", np.uint8, (19 * 70 + 1) // 2)
    assert s4.abi.params[2].dtype == np.int32
    [sp] = tilemma.compile(gemm(16, 8, 32, sparse_a=True))
    word = sp.abi.params[-1]
    assert word.roles == ("sparsity_error",) and word.init == 0xFFFFFFFF and word.dtype == np.uint32
    assert entry_params(sp.ptx, sp.name)[-1] == word.name
    [st] = tilemma.compile(STRIDED)
    a, b, _ = st.abi.params
    assert (a.strides, a.offset, a.span) == ((24, 1), 8, 8 + 31 * 24 + 16)
    assert (b.strides, b.offset) == ((1, 16), 0)


def test_abi_json_round_trips_every_field():
    import json

    [k] = tilemma.compile(gemm(16, 8, 32, sparse_a=True))
    d = json.loads(k.abi.to_json())
    assert d == k.abi.to_dict()
    assert (d["name"], d["sm"], d["grid"], d["block"]) == (k.name, "sm_90", list(k.grid), list(k.block))
    assert d["ptx_version"] in k.ptx.splitlines()[0] and d["instruction"] == k.instruction
    assert d["params"][-1] == {"name": "p_sparsity_error", "roles": ["sparsity_error"], "shape": [1],
                               "element": "ui32", "dtype": "uint32", "packing": "native", "strides": [1],
                               "offset": 0, "nbytes": 4, "init": 0xFFFFFFFF}


def test_compile_module_op_clones_and_matches_text():
    text = gemm(16, 16, 32, "bf16", "bf16", "f32")
    module, _ = parse(text, "m")
    before = str(module)
    [from_module] = tilemma.compile(module, sm="90", stages=0)
    [from_text] = tilemma.compile(text, sm="90", stages=0)
    assert str(module) == before  # the caller's module is not lowered in place
    assert from_module.ptx == from_text.ptx and from_module.abi == from_text.abi


def test_options_are_compile_options_fields():
    [k] = tilemma.compile(gemm(64, 64, 64), warps="1x2", warp_tile="2x2", stages=0)
    assert k.abi.config == "warps=1x2 warp-tile=2x2 stages=0"
    with pytest.raises(TypeError, match="unknown option.*warpz; valid: ptx, f32_precision, .*warps"):
        tilemma.compile(gemm(), warpz="2x2")
    with pytest.raises(TypeError, match="text or an xDSL ModuleOp, not bytes"):
        tilemma.compile(b"module {}")


def test_bad_ir_raises_compile_error_with_location():
    with pytest.raises(tilemma.CompileError) as e:
        tilemma.compile("func.func @k(%a: memref<4x4xf16>) {\n  %t = tile.frob %a\n}\n", filename="k.mlir")
    assert str(e.value).startswith("k.mlir:2:") and "^" in str(e.value)
    bad_types = gemm(16, 8, 16).replace("tile.tile<16x8xf32>", "tile.tile<16x8xf16>", 1)
    with pytest.raises(tilemma.CompileError, match=r"<input>:\d+:\d+"):
        tilemma.compile(bad_types)
    with pytest.raises(tilemma.CompileError, match="f64 operands.*sm_80|needs sm_"):
        tilemma.compile(gemm(16, 8, 16, "f64", "f64", "f64"), sm="75")
    with pytest.raises(tilemma.CompileError, match="unknown SM target 'sm_91'"):
        tilemma.compile(gemm(), sm="91")
    assert issubclass(tilemma.CompileError, ValueError)


def test_module_op_that_does_not_verify_is_a_compile_error():
    from xdsl.dialects.builtin import IntegerAttr, i32

    module, _ = parse(gemm(16, 8, 16), "m")
    kernel = next(iter(module.body.ops))
    mma = next(op for op in module.walk() if op.name == "tile.mma")
    mma.operands = [mma.operands[0], mma.operands[0], mma.operands[2]]  # A in place of B
    with pytest.raises(tilemma.CompileError, match="^<module>: in tile.mma: "):
        tilemma.compile(module)
    kernel.properties["sym_name"] = IntegerAttr(1, i32)  # not a symbol name
    with pytest.raises(tilemma.CompileError, match="^<module>: in func.func: 1 : i32 should be a string"):
        tilemma.compile(module)


# ------------------------------------------------------------------------- launch argument checks


class Fake:
    """A device buffer as a library describes it (no memory behind it: the checks never read)."""

    def __init__(self, shape, typestr="<f2", strides=None, address=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "strides": strides,
                                         "data": (address, False), "version": 3}


def fakes(k):
    return [Fake(p.shape, np.dtype(p.dtype).str) if p.packing != "bits" else Fake((p.nbytes,), "|u1")
            for p in k.abi.params]


@pytest.fixture(scope="module")
def f16():
    return tilemma.compile(gemm())[0]


def launch_error(k, args, **kw):
    with pytest.raises(tilemma.LaunchError) as e:
        k.launch(*args, **kw)
    return str(e.value)


def test_argument_count(f16):
    msg = launch_error(f16, fakes(f16)[:3])
    assert msg == f"{f16.name} takes 4 arguments (p_a, p_b, p_c, p_d), got 3"


def test_wrong_dtype_names_the_parameter(f16):
    args = fakes(f16)
    args[1] = Fake((64, 91), "<f4")
    assert launch_error(f16, args) == ("argument 1 (b), a __cuda_array_interface__: dtype float32, "
                                       "expected float16 (f16 elements)")


def test_wrong_shape(f16):
    args = fakes(f16)
    args[3] = Fake((91, 37), "<f4")
    assert "argument 3 (d)" in (msg := launch_error(f16, args)) and "shape (91, 37), expected (37, 91)" in msg


def test_wrong_strides_transposed_view(f16):
    args = fakes(f16)
    args[0] = Fake((37, 64), "<f2", strides=(2, 74))  # a column-major view
    msg = launch_error(f16, args)
    assert "argument 0 (a)" in msg and "strides (1, 37) elements, expected (64, 1): row-major" in msg


def test_strides_that_are_not_whole_elements(f16):
    args = fakes(f16)
    args[0] = Fake((37, 64), "<f2", strides=(129, 2))
    assert "strides (129, 2) bytes are not whole float16 elements" in launch_error(f16, args)


def test_misaligned_buffer(f16):
    args = fakes(f16)
    args[2] = Fake((37, 91), "<f4", address=0x7F0000000004)
    assert "not on a 16-byte boundary" in launch_error(f16, args)


def test_not_a_buffer(f16):
    args = fakes(f16)
    args[0] = [[1.0]]
    assert "argument 0 (a): list is not a device buffer" in launch_error(f16, args)
    args[0] = -1
    assert "not a 64-bit device address" in launch_error(f16, args)


def test_host_dlpack_array_is_refused(f16):
    args = fakes(f16)
    args[0] = np.zeros((37, 64), np.float16)  # NumPy speaks DLPack, from host memory
    assert "argument 0 (a): DLPack device type 1 is not CUDA memory" in launch_error(f16, args)


def test_cpu_torch_like_tensor_is_refused(f16):
    class Device:
        type, index = "cpu", None

        def __str__(self):
            return "cpu"

    Tensor = type("Tensor", (), {"__module__": "torch", "device": Device(), "data_ptr": lambda self: 0})
    args = fakes(f16)
    args[1] = Tensor()
    assert "argument 1 (b): a torch tensor on cpu; the kernel needs CUDA device memory" in launch_error(f16, args)


def test_strided_memref_takes_a_view_and_passes_its_buffer_start():
    [k] = tilemma.compile(STRIDED)
    base = 0x7F0000000000
    a = Fake((32, 16), "<f2", strides=(48, 2), address=base + 8 * 2)  # a view 8 elements in
    b = Fake((16, 8), "<f2", strides=(2, 32), address=base)  # column-major
    d = Fake((32, 8), "<f2", address=base)
    buffers = [api._read(x, i, p, 0) for i, (x, p) in enumerate(zip((a, b, d), k.abi.params))]
    assert [api._check(x, i, p) for i, (x, p) in enumerate(zip(buffers, k.abi.params))] == [base] * 3
    assert "expected (1, 16): the memref's layout" in launch_error(k, [a, Fake((16, 8), "<f2"), d])


def test_packed_operands_take_whole_uint8_buffers():
    [k] = tilemma.compile(gemm(19, 24, 70, "si4", "si4", "si32"))
    args = fakes(k)
    args[0] = Fake((19, 70), "|i1")
    assert "dtype int8, expected uint8 (si4 elements)" in launch_error(k, args)
    args[0] = Fake((19 * 70 // 2 - 1,), "|u1")
    assert "expected a contiguous uint8 buffer of 665 bytes (1330 si4 elements packed" in launch_error(k, args)
    args[0] = Fake((5, 133), "|u1", strides=(266, 1))
    assert "not contiguous" in launch_error(k, args)


def test_fp8_takes_its_dtype_or_bytes():
    [k] = tilemma.compile(gemm(16, 8, 32, "f8E4M3FN", "f8E4M3FN", "f32"))
    a = k.abi.params[0]
    assert api._expected(a).dtypes == ("float8_e4m3fn", "uint8")
    args = fakes(k)
    args[0] = Fake(a.shape, "|i1")
    assert "dtype int8, expected float8_e4m3fn or uint8" in launch_error(k, args)


def test_error_word_is_a_one_element_word():
    [k] = tilemma.compile(gemm(16, 8, 32, sparse_a=True))
    args = fakes(k)
    args[-1] = Fake((1,), "<f4")
    assert "argument 4 (sparsity_error)" in (msg := launch_error(k, args)) and "expected uint32 or int32" in msg
    args[-1] = Fake((2,), "<i4")
    assert "shape (2,), expected (1,)" in launch_error(k, args)
    assert k.sparsity_error(0xFFFFFFFF) is None
    assert "row 3, group 5 (columns 20..23)" in k.sparsity_error(3 * 8 + 5)
    with pytest.raises(ValueError, match="has no sparsity error word"):
        tilemma.compile(gemm(16, 8, 16))[0].sparsity_error(0)


@pytest.mark.skipif(cuda_runtime.gpu_available(), reason="checks the no-GPU path")
def test_well_formed_arguments_reach_the_device(f16):
    with pytest.raises(cuda_runtime.NoGpuError, match="no GPU available"):
        f16.launch(*fakes(f16))
    with pytest.raises(cuda_runtime.NoGpuError):
        f16.launch(*[0x7F0000000000] * 4)


def test_stream_handles():
    class TorchStream:
        cuda_stream = 1234

    class CupyStream:
        ptr = 99

    class Protocol:
        def __cuda_stream__(self):
            return (0, 77)

    assert api.stream_handle(None) == 0 and api.stream_handle(5) == 5
    assert [api.stream_handle(s) for s in (TorchStream(), CupyStream(), Protocol())] == [1234, 99, 77]
    try:
        from cuda.bindings import driver
    except ImportError:
        pass
    else:
        assert api.stream_handle(driver.CUstream(4321)) == 4321
    with pytest.raises(TypeError, match="stream: str is not a CUDA stream"):
        api.stream_handle("default")


def test_readme_example_compiles_to_the_tensors_it_passes():
    import pathlib

    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    code = text.split("## Python API", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    setup = code.split("\na, b = ", 1)[0].replace("import torch, tilemma", "import tilemma")
    scope: dict = {}
    exec(setup, scope)
    kernel = scope["kernel"]
    assert [p.shape for p in kernel.abi.params] == [(256, 64), (64, 128), (256, 128), (256, 128)]
    assert [p.dtype.name for p in kernel.abi.params] == ["float16", "float16", "float32", "float32"]


@pytest.mark.parametrize("name", ['"k\\n.visible .entry evil()"', '"../../tmp/x"', '"two words"', '"9lives"'])
def test_names_ptx_cannot_spell_are_refused(name):
    """A kernel name goes into the PTX text and may name an output file: only identifiers pass."""
    text = str(gemm_module(GemmSpec(16, 8, 16, "f16", "f16", "f32"))).replace(
        "@gemm_16x8x16_f16_f16_f32", f"@{name}")
    with pytest.raises(tilemma.CompileError, match="is not a PTX identifier"):
        tilemma.compile(text, sm="90")
    ok = tilemma.compile(text.replace(f"@{name}", "@k_1"), sm="90")
    assert ".visible .entry k_1(" in ok[0].ptx
