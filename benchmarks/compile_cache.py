"""Compile times with the compile cache cold and warm, each in a fresh process (issue 22, item 2).

    python -m benchmarks.compile_cache [--runs 5]

For each kernel (a small odd-sized f16 GEMM and a staged 4096^3 one), in a fresh cache folder:
- in process: `import tilemma` and the first `tilemma.compile` in a fresh interpreter, cold (the
  passes run) and warm (served from the cache), and a warm call once the process is up (the
  median of 100);
- the CLI: the wall time of `tilemma compile g.mlir -o g.ptx` as a process, cold and warm, next to
  the interpreter's own start (`python -c pass`) and the time to work out the version key.
Figures are medians over `--runs` fresh processes. No GPU needed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IN_PROCESS = r"""
import json, sys, time
t0 = time.perf_counter()
import tilemma
t1 = time.perf_counter()
text = open(sys.argv[1]).read()
t2 = time.perf_counter()
[k] = tilemma.compile(text)
t3 = time.perf_counter()
served = type(k.compiled).__name__ == "CachedKernel"
laps = []
for _ in range(100 if served else 0):
    began = time.perf_counter()
    tilemma.compile(text)
    laps.append(time.perf_counter() - began)
laps.sort()
print(json.dumps({"import": t1 - t0, "first": t3 - t2, "served": served,
                  "again": laps[len(laps) // 2] if laps else None}))
"""

KEY = r"""
import time
t0 = time.perf_counter()
from tilemma.compiler.core import version
version.version()
t1 = time.perf_counter()
version.source_digest()
t2 = time.perf_counter()
print((t1 - t0) * 1e3, (t2 - t1) * 1e3)
"""


def wall(cmd: list[str], env: dict, cwd: str) -> float:
    began = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)
    from tilemma.compiler.driver.gemm_generator import GemmSpec, gemm_module

    tilemma_exe = shutil.which("tilemma", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                                os.environ.get("PATH", "")]))
    kernels = {"f16 37x91x53": GemmSpec(37, 91, 53, "f16", "f16", "f32"),
               "f16 4096^3 (staged)": GemmSpec(4096, 4096, 4096, "f16", "f16", "f32")}
    work = Path(tempfile.mkdtemp(prefix="tilemma-compile-cache-bench-"))
    env = {**os.environ}
    env.pop("TILEMMA_TUNE_CACHE", None)
    try:
        base = statistics.median(wall([sys.executable, "-c", "pass"], env, str(work)) for _ in range(args.runs))
        keys = [subprocess.run([sys.executable, "-c", KEY], env=env, capture_output=True, text=True, check=True)
                .stdout.split() for _ in range(args.runs)]
        print(f"python -c pass: {base * 1e3:.1f} ms; version key in a fresh process: version "
              f"{statistics.median(float(v) for v, _ in keys):.2f} ms + source digest "
              f"{statistics.median(float(d) for _, d in keys):.2f} ms")
        print(f"{'kernel':<22} {'':<8} {'import':>9} {'1st compile':>12} {'again':>9} {'CLI wall':>10}")
        for name, spec in kernels.items():
            source = work / "g.mlir"
            source.write_text(str(gemm_module(spec)))
            rows: dict[str, list] = {"cold": [], "warm": []}
            for _ in range(args.runs):
                folder = work / "cache"
                env["TILEMMA_CACHE_DIR"] = str(folder)
                shutil.rmtree(folder, ignore_errors=True)
                for state in ("cold", "warm"):
                    out = subprocess.run([sys.executable, "-c", IN_PROCESS, str(source)], env=env, capture_output=True,
                                         text=True, check=True).stdout
                    data = json.loads(out)
                    assert data["served"] == (state == "warm"), data
                    rows[state].append(data)
                shutil.rmtree(folder, ignore_errors=True)
                for state in ("cold", "warm"):
                    rows[state][-1]["cli"] = wall([tilemma_exe, "compile", "g.mlir", "-o", "g.ptx"], env, str(work))
            for state in ("cold", "warm"):
                med = {f: statistics.median(r[f] for r in rows[state]) for f in ("import", "first", "cli")}
                again = [r["again"] for r in rows[state] if r["again"] is not None]
                print(f"{name:<22} {state:<8} {med['import'] * 1e3:>7.1f}ms {med['first'] * 1e3:>10.1f}ms "
                      f"{(statistics.median(again) * 1e3 if again else float('nan')):>7.2f}ms {med['cli'] * 1e3:>8.0f}ms",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
