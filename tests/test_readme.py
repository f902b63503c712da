"""The README runs as written: the main job of "Two commands" (without the pip install) and every
line of "Using it", in order, in one fresh directory; and the Python API's examples that need no
GPU, each in a fresh interpreter.

Lines marked `GPU only` run only where there is a GPU; the rest pick the emulator by themselves
there is none (as `tilemma run` does). The test-suite command is left out: it is what runs this.
The Python examples that use torch run on the GPU (tests/gpu/test_api_gpu.py,
tests/gpu/test_launch_torch_gpu.py).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tilemma.compiler.runtime import cuda_runtime
from tilemma.compiler.runtime.ptxas import find_ptxas

README = Path(__file__).resolve().parents[1] / "README.md"


def sh_blocks(section: str) -> list[str]:
    """The ```sh blocks of one `## section` of the README."""
    text = README.read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", body, re.S)


def python_blocks(section: str) -> list[str]:
    """The ```python blocks of one `## section` of the README (its subsections included)."""
    text = README.read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, re.S)


def readme_commands() -> list[str]:
    first = sh_blocks("Two commands")[0].strip()
    main_job = " && ".join(part for part in first.split(" && ") if " pip install " not in part)
    using = [line for line in sh_blocks("Using it")[0].splitlines() if line.strip()]
    return [main_job, *using]


def test_readme_lists_what_this_test_runs():
    commands = readme_commands()
    assert commands[0].startswith("tilemma gemm ") and "pip" not in commands[0]
    assert any("--scale ue4m3" in c and "--acc f32" in c for c in commands)
    assert any(c.startswith("tilemma-opt ") for c in commands)
    assert all("..." not in c.split("#")[0] for c in commands)  # no placeholders left


@pytest.mark.skipif(find_ptxas() is None, reason="the README assembles with ptxas; not on PATH")
def test_every_readme_line_runs(tmp_path):
    gpu = cuda_runtime.gpu_available()
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    env.pop("TILEMMA_TUNE_CACHE", None)
    ran = 0
    for line in readme_commands():
        if "GPU only" in line and not gpu:
            continue
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"README line failed ({proc.returncode}):\n{line}\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr, line
        ran += 1
    assert ran >= 15
    # The files the lines say they write are there and are what they claim.
    assert ".entry gemm_37x91x53_f16_f16_f32" in (tmp_path / "g.ptx").read_text()
    assert (tmp_path / "g.cubin").read_bytes()[:4] == b"\x7fELF"
    assert "Pass execution timing report" in (tmp_path / "passes.log").read_text()
    assert ".entry gemm_37x91x53_f16_f16_f32" in (tmp_path / "g-opt.ptx").read_text()
    saved = list((tmp_path / "out").glob("*.npy"))
    assert [p.name for p in saved] == ["gemm_37x91x53_f16_f16_f32.d.npy"]


def test_python_examples_without_a_gpu_run_as_written(tmp_path):
    """Every Python API example that does not use torch (the emulator's) runs as written, in a
    fresh interpreter that sees no GPU."""
    blocks = [b for b in python_blocks("Python API") if "torch" not in b]
    assert blocks and any("kernel.emulate(" in b for b in blocks)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    for code in blocks:
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, f"README example failed ({proc.returncode}):\n{code}\n{proc.stderr[-3000:]}"
