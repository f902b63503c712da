"""tilemma: tile-level matmul IR to PTX tensor-core instructions.

`tilemma.compile(text_or_module, sm="90", **options)` returns `Kernel`s with their PTX, cubin,
launch shape and ABI, launchable on torch / CuPy / DLPack buffers (see `tilemma.compiler.driver.api`).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tilemma")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"


def __getattr__(name: str):
    """The API is imported on first use, so `import tilemma` (and xDSL's plugin discovery, which
    imports this package) stays light."""
    if name in ("compile", "Kernel", "CompileError", "LaunchError"):
        from tilemma.compiler.driver import api

        return getattr(api, name)
    raise AttributeError(f"module 'tilemma' has no attribute {name!r}")


__all__ = ["compile", "Kernel", "CompileError", "LaunchError", "__version__"]
