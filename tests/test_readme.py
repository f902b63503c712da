"""The README runs as written: the main job of "Two commands" (without the pip install) and every
line of "Using it", in order, in one fresh directory (their tilemma commands in this process, as
lit runs its RUN lines; `run_line`); and the Python API's examples that need no GPU, each in a
fresh interpreter.

Lines marked `GPU only` run only where there is a GPU; the rest pick the emulator by themselves
there is none (as `tilemma run` does). The test-suite command is left out: it is what runs this.
The Python examples that use torch run on the GPU (tests/gpu/test_api_gpu.py,
tests/gpu/test_launch_torch_gpu.py).
"""

import os
import re
import shutil
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


def run_line(line: str, cwd, env: dict) -> tuple[int, str]:
    """A README line as bash runs it: (exit status, stderr). Its `tilemma` and `tilemma-opt`
    commands run in this process through their console scripts' entry points, with lit's shell
    for the pipes and redirections (tests/lit_inprocess.py, as the lit suite runs them: a
    process of their own costs ~0.6 s of imports each), other commands as processes; a line
    that shell does not model (an assignment before a command) runs in bash."""
    import lit.ShellEnvironment
    import lit.ShUtil

    from tests import lit_inprocess

    command = line.split("  # ")[0].strip()  # the line's comment (none has '  # ' inside quotes)
    cmd = lit.ShUtil.ShParser(command, win32Escapes=False, pipefail=True).parse()
    words = [w for p in _pipelines(cmd) for c in p.commands for w in c.args[:1]]
    tools = {os.path.realpath(path): name for name in ("tilemma", "tilemma-opt")
             if (path := shutil.which(name, path=env["PATH"]))}
    if any("=" in w for w in words) or not lit_inprocess._modelled(cmd):
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=600)
        return proc.returncode, proc.stderr
    results: list = []
    shell = lit_inprocess._Shell(tools, lit.ShellEnvironment.ShellEnvironment(str(cwd), dict(env)), results)
    status = shell.run(cmd)
    return status, "".join(r.stderr for r in results)


def _pipelines(cmd):
    import lit.ShCommands

    if isinstance(cmd, lit.ShCommands.Seq):
        return [*_pipelines(cmd.lhs), *_pipelines(cmd.rhs)]
    return [cmd]


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
        status, stderr = run_line(line, tmp_path, env)
        assert status == 0, f"README line failed ({status}):\n{line}\n{stderr[-3000:]}"
        assert "Traceback" not in stderr, line
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
