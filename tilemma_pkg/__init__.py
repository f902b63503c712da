"""tilemma: tile-level matmul IR to PTX tensor-core instructions.

`tilemma.compile(text_or_module, sm="90", **options)` returns `Kernel`s with their PTX, cubin,
launch shape and ABI, launchable on torch / CuPy / DLPack buffers (see `tilemma.compiler.driver.api`);
compiles are kept in a cache on disk (`tilemma.compiler.driver.cache`). `tilemma.torch` makes a
kernel a torch custom op.
"""


def __getattr__(name: str):
    """The API is imported on first use, so `import tilemma` (and xDSL's plugin discovery, which
    imports this package) stays light."""
    if name in ("compile", "Kernel", "CompileError", "LaunchError"):
        from tilemma.compiler.driver import api

        return getattr(api, name)
    if name == "__version__":
        from tilemma.compiler.core.version import version

        return version()
    raise AttributeError(f"module 'tilemma' has no attribute {name!r}")


__all__ = ["compile", "Kernel", "CompileError", "LaunchError", "__version__"]
