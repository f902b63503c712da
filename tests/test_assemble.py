"""In-process assembly through nvJitLink against the ptxas executable: the same cubin format and
the same error text (ptxas' messages, each quoting the PTX line it points at)."""

import pytest

from tilemma.compiler.runtime import ptxas
from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module
from tilemma.compiler.driver.pipeline import CompileOptions, compile_text

both = pytest.mark.skipif(
    ptxas.find_ptxas() is None or ptxas.nvjitlink_unavailable() is not None,
    reason=f"needs ptxas and nvJitLink ({ptxas.nvjitlink_unavailable()})",
)


def kernel_ptx(spec=GemmSpec(37, 91, 64, "f16", "f16", "f32")) -> tuple[str, str]:
    [k] = compile_text(str(gemm_module(spec)), "k", CompileOptions())
    return k.ptx, k.name


@pytest.mark.ptxas
@both
@pytest.mark.parametrize("spec", [GemmSpec(37, 91, 64, "f16", "f16", "f32"),
                                  GemmSpec(16, 8, 32, "f16", "f16", "f32", sparse_a=True)], ids=["f16", "sparse"])
def test_both_assemblers_give_a_cubin_of_the_kernel(spec):
    text, name = kernel_ptx(spec)
    for assembler in ("nvjitlink", "ptxas"):
        cubin = ptxas.assemble(text, "sm_90", assembler)
        assert cubin[:4] == b"\x7fELF" and name.encode() in cubin, assembler


@pytest.mark.ptxas
@both
def test_both_assemblers_report_the_same_errors():
    text, _ = kernel_ptx()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "mma.sync" in line and not line.lstrip().startswith("//"))
    lines[at] = lines[at].replace("m16n8k16", "m16n8k24")
    lines.insert(at, "    frobnicate.s32 %r1, %r1;")
    bad = "\n".join(lines) + "\n"
    errors = {}
    for assembler in ("nvjitlink", "ptxas"):
        with pytest.raises(ptxas.PtxasError) as e:
            ptxas.assemble(bad, "sm_90", assembler)
        errors[assembler] = e.value
    assert errors["nvjitlink"].diagnostics == errors["ptxas"].diagnostics
    assert str(errors["nvjitlink"]) == str(errors["ptxas"])
    quoted = [source for _, source in errors["ptxas"].diagnostics if source]
    assert f"{at + 1}: {lines[at]}" in quoted and any("m16n8k24" in q for q in quoted)
    assert "ptxas <ptx>, line" in str(errors["nvjitlink"])


def test_assembler_choice(monkeypatch):
    with pytest.raises(ValueError, match="assembler 'nvcc': expected one of auto, nvjitlink, ptxas"):
        ptxas.assemble("", "sm_90", "nvcc")
    monkeypatch.setattr(ptxas, "nvjitlink_unavailable", lambda: "ImportError: no module")
    with pytest.raises(FileNotFoundError, match=r"nvJitLink is not usable \(ImportError: no module\)"):
        ptxas.assemble("", "sm_90", "nvjitlink")
    used = []
    monkeypatch.setattr(ptxas, "run_ptxas", lambda ptx, arch: used.append(arch) or ptxas.PtxasResult(True, b"x", ""))
    assert ptxas.assemble("", "sm_80") == b"x" and used == ["sm_80"]  # auto falls back to ptxas
    monkeypatch.setenv("TILEMMA_ASSEMBLER", "nvjitlink")
    with pytest.raises(FileNotFoundError):
        ptxas.assemble("", "sm_80")
