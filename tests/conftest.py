"""The suite never touches the user's compile cache: the whole run (its xdist workers and the
`tilemma` processes the tests start inherit the environment) shares one fresh cache folder,
removed at the end. The cache stays on, so every test also exercises kernels served from it
(a kernel several tests compile is compiled once); tests of the cache itself point
TILEMMA_CACHE_DIR at their own folders."""

import os
import shutil
import tempfile


def pytest_configure(config):
    if "TILEMMA_TEST_CACHE_DIR" not in os.environ:  # the controller, or a run without xdist
        folder = tempfile.mkdtemp(prefix="tilemma-test-cache-")
        os.environ["TILEMMA_TEST_CACHE_DIR"] = folder
        config._tilemma_cache_dir = folder
    os.environ["TILEMMA_CACHE_DIR"] = os.environ["TILEMMA_TEST_CACHE_DIR"]


def pytest_unconfigure(config):
    folder = getattr(config, "_tilemma_cache_dir", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("TILEMMA_TEST_CACHE_DIR", None)
