"""The suite never touches the user's compile cache: the whole run (its xdist workers and the
`tilemma` processes the tests start inherit the environment) shares one fresh cache folder,
removed at the end. The cache stays on, so every test also exercises kernels served from it
(a kernel several tests compile is compiled once); tests of the cache itself point
TILEMMA_CACHE_DIR at their own folders.

The package's bytecode is written once before the tests start: where PYTHONDONTWRITEBYTECODE is
set (as on this project's machines), every `tilemma` process a test starts would otherwise compile the
sources again (about half a second a process)."""

import compileall
import os
import pathlib
import shutil
import tempfile

import tilemma
import tilemma.compiler
import tilemma.dialects
import tilemma.passes


def pytest_configure(config):
    if "TILEMMA_TEST_CACHE_DIR" not in os.environ:  # the controller, or a run without xdist
        folder = tempfile.mkdtemp(prefix="tilemma-test-cache-")
        os.environ["TILEMMA_TEST_CACHE_DIR"] = folder
        config._tilemma_cache_dir = folder
        for package in (tilemma, tilemma.compiler, tilemma.dialects, tilemma.passes):
            for root in package.__path__:
                compileall.compile_dir(pathlib.Path(root), quiet=1)
    os.environ["TILEMMA_CACHE_DIR"] = os.environ["TILEMMA_TEST_CACHE_DIR"]


def pytest_unconfigure(config):
    folder = getattr(config, "_tilemma_cache_dir", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("TILEMMA_TEST_CACHE_DIR", None)


# The longest tests (10 to 50 s each, measured on a 2-core machine) run first: xdist hands out
# tests in collection order, and one of these dealt last keeps a worker busy while the other
# has nothing left (longest first is the classic fix for that tail).
LONGEST_FIRST = (
    "tests/test_readme.py::test_every_readme_line_runs",
    "tests/test_emulator_epilogue.py::test_probe_runs_every_kernel_in_the_emulator",
    "tests/test_isa_ptxas.py::test_every_target_checked",
    "tests/test_fuzz_ir.py::",
    "tests/test_scalar_math.py::test_erf_sweep",
    "tests/test_compile_targets.py::",
    "tests/test_staged_f64.py::test_every_64bit_candidate",
)


def pytest_collection_modifyitems(session, config, items):
    def rank(item) -> int:
        return next((i for i, p in enumerate(LONGEST_FIRST) if item.nodeid.startswith(p)), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order
