"""tilemma kernels as torch operators: `custom_op(kernel, "mylib::gemm")` registers a
`torch.library` custom op that `torch.compile(fullgraph=True)` traces through and CUDA graphs
capture.

    import torch, tilemma, tilemma.torch
    [k] = tilemma.compile(text)
    gemm = tilemma.torch.custom_op(k, "mylib::gemm")
    d = gemm(a, b, c)                       # or torch.ops.mylib.gemm(a, b, c)
    d = torch.compile(f, fullgraph=True)(a, b, c)   # where f calls gemm

The op's inputs are the kernel's read operands (A, B, C, scale factors, a pre-compressed A's
metadata), in ABI order; its outputs are the operands it writes (D, and a checked sparse kernel's
error word, an int32 holding `init` before the launch: decode it with `kernel.sparsity_error`),
allocated inside with the ABI's shape, dtype and strides on the inputs' device (as is a split-K
kernel's scratch, zeroed counters included, which the op does not return). The fake (meta)
implementation makes the same tensors from the ABI, and checks the inputs' shapes and dtypes as
the launch would, so a mismatch is an error when the graph is traced. An input whose strides
differ from the ABI's is copied into its layout first (as a contiguous() would), never refused.
The launch goes on torch's current stream. torch is imported by this module, not by `tilemma`.
"""

from __future__ import annotations

import dataclasses

from typing import Any

import torch

from tilemma.compiler.driver.api import Kernel, LaunchError
from tilemma.compiler.runtime.abi import OUTPUT_ROLES, SCRATCH_ROLES

__all__ = ["custom_op", "ABI_OUTPUT_ROLES"]

#: Parameters with these roles (those the kernel writes) are the op's outputs; every other
#: parameter is an input.
ABI_OUTPUT_ROLES = OUTPUT_ROLES


def custom_op(kernel: Kernel, name: str, *, device_types: str | tuple[str, ...] = "cuda") -> Any:
    """Register `kernel` as the custom op `name` ("namespace::op") and return it (a callable;
    also reachable as `torch.ops.namespace.op`). A name names one kernel per process: asking
    again for the same kernel returns its op, for another kernel is an error."""
    namespace, sep, op_name = name.partition("::")
    if not sep or not namespace.isidentifier() or not op_name.isidentifier():
        raise ValueError(f"custom op name {name!r}: expected 'namespace::name', both Python identifiers")
    if name in _registered:
        op, registered_for, _ = _registered[name]
        if registered_for is kernel:
            return op
        raise ValueError(f"custom op {name} is registered already, for kernel {registered_for.name}; "
                         "give this one another name")
    params = kernel.abi.params
    outputs = [p for p in params if any(r in ABI_OUTPUT_ROLES for r in p.roles)]
    scratch = [p for p in params if set(SCRATCH_ROLES) & set(p.roles)]  # made for each call, not the op's
    inputs = [p for p in params if p not in outputs and p not in scratch]
    if not outputs:
        raise ValueError(f"{kernel.name} writes no operand: nothing for a custom op to return")
    arg_names = [p.name.removeprefix("p_") for p in inputs]
    returns = "Tensor" if len(outputs) == 1 else "(" + ", ".join("Tensor" for _ in outputs) + ")"
    schema = "(" + ", ".join(f"Tensor {n}" for n in arg_names) + f") -> {returns}"
    dtypes = {p.name: _torch_dtype(p) for p in outputs}  # what an output is made of
    accepted = {p.name: _accepted(p) for p in inputs}  # what an input may be (as `Kernel.launch` takes)

    # What the checks read per parameter, worked out once (Param's properties compute): the shape
    # a tensor must have (`?` sizes as symbols; packed sub-byte operands as bytes), and whether
    # it is packed (then its strides are not compared).
    wants = [((p.nbytes,) if p.packing == "bits" else p.shape, p.sizes or ("",) * len(p.shape), p.packing == "bits")
             for p in inputs]
    stream_of = _stream_getter()

    def check(tensors: tuple) -> dict[str, Any]:
        """The inputs checked against the ABI; for a kernel with `?` sizes, their values (the
        launch checks that the inputs agree on them)."""
        if len(tensors) != len(inputs):
            raise LaunchError(f"{name} takes {len(inputs)} tensors ({', '.join(arg_names)}), got {len(tensors)}")
        sizes: dict[str, Any] = {}
        for t, p, arg, (want_shape, symbols, _) in zip(tensors, inputs, arg_names, wants):
            if (len(t.shape) != len(want_shape) or t.dtype not in accepted[p.name]
                    or any(not s and n != w for s, n, w in zip(symbols, t.shape, want_shape))):
                raise LaunchError(f"{name}: {arg} is {t.dtype} {tuple(t.shape)}, expected "
                                  f"{' or '.join(map(str, accepted[p.name]))} "
                                  f"{tuple(s or w for s, w in zip(symbols, want_shape))} ({p.element} elements)")
            for s, n in zip(symbols, t.shape):
                if s:
                    sizes.setdefault(s, n)
        return sizes

    def concrete(p, sizes: dict[str, Any]):
        """A parameter with `?` sizes at these sizes, its `?` strides packed."""
        if not p.dynamic:
            return p
        shape = tuple(sizes[s] if s else n for s, n in zip(p.sizes or ("",) * len(p.shape), p.shape))
        if any(s and s not in sizes for s in p.sizes):
            raise LaunchError(f"{name}: no input says the size {', '.join(s for s in p.sizes if s not in sizes)} "
                              f"of the output {p.name}")
        return dataclasses.replace(p, shape=shape, strides=p.packed_strides(shape), sizes=(), stride_symbols=())

    def allocate(device: torch.device, sizes: dict[str, Any]) -> list[torch.Tensor]:
        made = []
        for p in map(lambda q: concrete(q, sizes), outputs):
            if "sparsity_error" in p.roles:
                word = p.init if p.init is not None else 0
                made.append(torch.full(p.shape, word - (1 << 32) if word >= 1 << 31 else word, dtype=torch.int32,
                                       device=device))
            else:
                made.append(_empty(p, dtypes[p.name], device))
        return made

    def laid_out(t: torch.Tensor, p, packed: bool) -> torch.Tensor:
        if packed or all(s == w for s, w, n in zip(t.stride(), p.strides, p.shape) if n > 1):
            return t
        return _empty(p, t.dtype, t.device).copy_(t)

    def run(*tensors: torch.Tensor):
        sizes = check(tensors)
        device = tensors[0].device if tensors else torch.device("cuda", torch.cuda.current_device())
        made = allocate(device, sizes)
        given = iter(laid_out(t, concrete(p, {**sizes, **dict(zip(p.sizes, t.shape))}) if sizes else p, want[2])
                     for t, p, want in zip(tensors, inputs, wants))
        out = iter(made)
        extra = iter(torch.zeros(p.shape, dtype=torch.int32, device=device) if p.init is not None
                     else torch.empty_strided(p.shape, p.strides, dtype=_torch_dtype(p), device=device) for p in scratch)
        kernel.launch(*[next(out) if p in outputs else next(extra) if p in scratch else next(given) for p in params],
                      stream=stream_of(device))
        return made[0] if len(made) == 1 else tuple(made)

    def fake(*tensors: torch.Tensor):
        sizes = check(tensors)
        device = tensors[0].device if tensors else torch.device("cuda")
        made = [_empty(concrete(p, sizes), torch.int32 if "sparsity_error" in p.roles else dtypes[p.name], device)
                for p in outputs]
        return made[0] if len(made) == 1 else tuple(made)

    # torch.library's low-level registration (define, a CUDA kernel, a fake kernel) rather than
    # torch.library.custom_op: the same op for torch.compile and CUDA graphs, with less Python
    # between an eager call and the launch (custom_op adds its own autograd layer).
    library = torch.library.Library(namespace, "FRAGMENT")
    try:
        library.define(op_name + schema)
    except RuntimeError as e:
        raise ValueError(f"custom op {name}: {str(e).splitlines()[0]}") from None
    for device_type in (device_types,) if isinstance(device_types, str) else device_types:
        library.impl(op_name, run, device_type.upper())
    torch.library.register_fake(name, fake, lib=library)
    op = getattr(getattr(torch.ops, namespace), op_name)
    _registered[name] = (op, kernel, library)
    return op


#: name -> (the op, its kernel, the torch.library.Library that keeps the registration alive)
_registered: dict[str, tuple[Any, Kernel, Any]] = {}


def _stream_getter():
    """device -> the handle of torch's current stream on it: torch's own C accessor where it has
    one (what Triton's launcher reads; a Python `current_stream` costs about 20 us a call)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        return lambda device: torch.cuda.current_stream(device)
    return lambda device: raw(device.index if device.index is not None else torch.cuda.current_device())


def _torch_dtype(p) -> torch.dtype:
    if "sparsity_error" in p.roles:
        return torch.int32
    found = getattr(torch, p.dtype.name, None)
    if not isinstance(found, torch.dtype):
        raise ValueError(f"{p.name}: torch has no dtype {p.dtype.name} ({p.element} elements)")
    return found


def _accepted(p) -> tuple[torch.dtype, ...]:
    from tilemma.compiler.driver.api import _expected

    if p.dynamic:  # the dtypes do not depend on the sizes: those of a one-element stand-in
        p = dataclasses.replace(p, shape=(1,) * len(p.shape), strides=(1,) * len(p.shape), sizes=(),
                                stride_symbols=())
    found = (getattr(torch, n, None) for n in _expected(p).dtypes)
    return tuple(t for t in found if isinstance(t, torch.dtype))


def _empty(p, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A tensor laid out as parameter `p` (its shape and strides, `offset` elements into a buffer
    of `span`)."""
    if p.offset == 0 and p.packing != "bits":
        return torch.empty_strided(p.shape, p.strides, dtype=dtype, device=device)
    if p.packing == "bits":
        return torch.empty(p.nbytes, dtype=dtype, device=device)
    return torch.empty(p.span, dtype=dtype, device=device).as_strided(p.shape, p.strides, p.offset)
