"""`tilemma compile --emit gpu-binary`: compiled kernels as an MLIR module that upstream MLIR's gpu
pipeline launches (`mlir-opt --gpu-to-llvm`, then `mlir-translate --mlir-to-llvmir`).

The module holds a `gpu.binary` whose one `#gpu.object` is the PTX (`assembly`, JIT-compiled by
the CUDA driver when the module loads) and, per kernel, a host `func.func` that takes the
kernel's buffers as memrefs and does `gpu.launch_func` with the grid, block and dynamic shared
memory of its ABI (`compiler/abi.py`). Written as text: xDSL 0.74 has neither `gpu.binary` nor
`#gpu.object`/`#nvvm.target`; the syntax is MLIR 19's (checked with mlir-opt 19).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tilemma.compiler.core.elements import ELEMENTS
from tilemma.compiler.runtime.abi import KernelABI, Param
from tilemma.compiler.driver.pipeline import CompiledKernel

# Element types MLIR 19 cannot spell, as the storage integer of the same width. Only the pointer
# reaches the kernel, so the host memref's element type documents the buffer and nothing more.
STORAGE_IN_MLIR19 = {
    name: f"i{ELEMENTS[name].storage_bits}" for name in ("ue4m3", "f8E8M0FNU", "f6E3M2FN", "f6E2M3FN", "f4E2M1FN")
}

# PTX JIT optimisation level (the `O` property gpu-to-llvm hands to mgpuModuleLoadJIT, which
# otherwise uses 0); 3 is ptxas's default, what `--emit cubin` gets.
JIT_OPT_LEVEL = 3


def mlir_string(text: str) -> str:
    """`text` as an MLIR string literal: printable ASCII stays, `"` and `\\` and every other byte
    become `\\XX` (hex), as MLIR prints strings."""
    out = []
    for byte in text.encode():
        ch = chr(byte)
        out.append(ch if 0x20 <= byte < 0x7F and ch not in '"\\' else f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


def _element(name: str) -> str:
    """The host memref's element type: signless integers (MLIR's convention; the signedness is
    the kernel's business) and storage integers where MLIR 19 lacks the type."""
    name = STORAGE_IN_MLIR19.get(name, name)
    if name[:2] in ("si", "ui"):
        return "i" + name[2:]
    return name


def host_memref(p: Param) -> str:
    """The memref type of parameter `p` in the host function (its ABI shape and layout)."""
    dims = "x".join(str(d) for d in p.shape)
    identity = [1] * len(p.shape)
    for i in range(len(p.shape) - 2, -1, -1):
        identity[i] = identity[i + 1] * p.shape[i + 1]
    layout = ""
    if list(p.strides) != identity or p.offset:
        layout = f", strided<[{', '.join(map(str, p.strides))}], offset: {p.offset}>"
    return f"memref<{dims}x{_element(p.element)}{layout}>"


def _ssa_name(p: Param, i: int) -> str:
    name = p.name.removeprefix("p_")
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"arg{i}"


def _host_function(abi: KernelABI, binary: str) -> list[str]:
    names = [_ssa_name(p, i) for i, p in enumerate(abi.params)]
    types = [host_memref(p) for p in abi.params]
    sig = ", ".join(f"%{n}: {t}" for n, t in zip(names, types))
    body = []
    consts: dict[int, str] = {}
    for v in (*abi.grid, *abi.block, *(v for first in abi.prologue for v in (*first.grid, *first.block))):
        if v not in consts:
            consts[v] = f"%c{v}"
            body.append(f"%c{v} = arith.constant {v} : index")
    body.append(f"%shared = arith.constant {abi.shared_bytes} : i32")
    # The PTX entry takes each buffer as one .u64 pointer, so the launch passes the memrefs'
    # aligned pointers as i64 (not the memrefs: gpu-to-llvm would expand each into its whole
    # descriptor, 3 + 2 x rank parameters). The aligned pointer is where the kernel's addressing
    # starts: it adds the layout's offset and strides itself, as MLIR's descriptor does.
    for n, t in zip(names, types):
        body.append(f"%{n}_index = memref.extract_aligned_pointer_as_index %{n} : {t} -> index")
        body.append(f"%{n}_ptr = arith.index_cast %{n}_index : index to i64")
    body.append("%t0 = gpu.wait async")
    token = "%t0"
    for n, t, p in zip(names, types, abi.params):
        if p.init is None:
            continue
        # A word the kernel reports into (the sparsity check) or counts in (split-K) must hold its
        # initial value.
        assert p.element in ("ui32", "si32", "i32"), p
        value = p.init - (1 << 32) if p.init >= 1 << 31 else p.init
        body.append(f"%{n}_init = arith.constant {value} : i32")
        body.append(f"%{n}_set = gpu.memset async [{token}] %{n}, %{n}_init : {t}, i32")
        token = f"%{n}_set"
    for j, first in enumerate(abi.prologue):  # the kernels each launch runs first (`KernelABI.prologue`)
        grid = ", ".join(consts[v] for v in first.grid)
        block = ", ".join(consts[v] for v in first.block)
        args = ", ".join(f"%{names[i]}_ptr : i64" for i in first.args)
        body.append(f"%first{j} = gpu.launch_func async [{token}] @{binary}::@{first.entry} blocks in ({grid}) "
                    f"threads in ({block}) args({args})")
        token = f"%first{j}"
    grid = ", ".join(consts[v] for v in abi.grid)
    block = ", ".join(consts[v] for v in abi.block)
    args = ", ".join(f"%{n}_ptr : i64" for n in names)
    body.append(
        f"%done = gpu.launch_func async [{token}] @{binary}::@{abi.name} blocks in ({grid}) "
        f"threads in ({block}) dynamic_shared_memory_size %shared args({args})"
    )
    body.append("gpu.wait [%done]")
    body.append("return")
    return [f"func.func @{abi.name}({sig}) {{", *(f"  {line}" for line in body), "}"]


def gpu_binary_module(kernels: Sequence[CompiledKernel], chip: str) -> str:
    """The MLIR text of a module holding `kernels` (of one PTX module, for target `chip`, e.g.
    "sm_90") as a `gpu.binary` plus one launching host function per kernel, named like it."""
    modules = {k.ptx for k in kernels}
    if len(modules) != 1:
        raise ValueError("--emit gpu-binary takes an input whose kernels make one PTX module")
    for k in kernels:  # gpu.launch_func passes i64 pointers: it has no 128-byte map argument to give
        if k.abi.tensor_maps:
            raise ValueError(f"--emit gpu-binary does not pass tensor maps yet, and kernel {k.name} takes "
                             f"{len(k.abi.tensor_maps)}: compile it without TMA copies")
    binary = f"{kernels[0].name}_module"
    # The driver's JIT reads the PTX as a C string: MLIR 19 embeds the object as given, so the
    # terminating NUL is part of it (newer MLIR adds one more; a second is harmless).
    ptx = mlir_string(modules.pop() + "\0")
    lines = [
        f"// tilemma: {len(kernels)} kernel(s) for {chip} as a gpu.binary (PTX, JIT-compiled at load) and",
        "// a host function per kernel that launches it: lower with mlir-opt --gpu-to-llvm.",
        "module attributes {gpu.container_module} {",
        f"  gpu.binary @{binary} [#gpu.object<#nvvm.target<chip = \"{chip}\">, "
        f"properties = {{O = {JIT_OPT_LEVEL} : i32}}, assembly = {ptx}>]",
    ]
    for k in kernels:
        lines += [f"  {line}" for line in _host_function(k.abi, binary)]
    lines.append("}")
    return "\n".join(lines) + "\n"
