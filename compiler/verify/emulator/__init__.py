"""An exact CPU emulator of the PTX tilemma emits: numerics checked without a GPU.

CI and most users have no GPU, and no GPU we can reach runs the sm_120a-only instructions, so the
project needs a second, independent way to run what it emits. `emulate` runs one `.entry` of a
PTX module (the text `tilemma compile` prints, or the `ptx` dialect ops it is printed from) for a
whole grid with NumPy and returns the final contents of the argument arrays, like
`cuda_runtime.run_kernel`.

How it runs, and why:

* Vectorized across threads. Every register is a NumPy row holding that register for all threads
  of a chunk of CTAs (all CTAs at once unless the register file would exceed a memory budget), so
  each PTX instruction is a handful of NumPy operations, not a Python loop over threads. Each
  instruction is decoded once into a closure (operand readers, result writer, precomputed
  immediates); running the kernel is a loop over those closures.
* One program counter a context. The emitted kernels branch uniformly per CTA (the K loop's `bra.uni`), so
  the threads of a CTA run in lockstep; where whole CTAs part (a split-K kernel's last split runs
  fewer K steps), the side behind runs first and the others wait where both meet again (a
  forward branch's target, the instruction after a backward one). A branch that parts whole warps
  of a CTA (a warp-specialized kernel's roles) starts contexts of their own, one a warpgroup of
  either side, the first warpgroup of a role ahead of the others (see `mbarrier` below;
  `ahead="laggards"` for the others ahead of it, `warpgroups_apart=False` for one context a
  side); one that parts the lanes of a
  warp raises `EmulationError` instead of being executed wrongly. Guards (`@%p` / `@!%p`) become
  masks.
* Memory is the argument arrays, addressed through fake 64-bit pointers (argument i lives at
  (i + 1) << 40). Every load and store of a thread whose guard holds is checked against its
  buffer: an out-of-bounds or misaligned access raises, naming the instruction, its line, the
  thread and the offending offset. Predicated-off threads never touch memory.
* Shared memory: `.shared` buffers in declaration order from shared address 0x400 (kernels must
  not assume 0), each at its declared alignment of the address (`.align 1024` for wgmma's
  swizzle), `.extern .shared` ones after them, `shared_bytes` long, one copy per CTA. ld/st
  .shared of every width and .v2/.v4, `mov` of a buffer's name, cvta.shared, cp.async (.ca 4/8/16,
  .cg 16; src-size bytes read, the rest zero-filled), commit/wait groups, ldmatrix (x1/x2/x4,
  .trans), bar.sync. All threads run in lockstep, so a barrier orders nothing here and a kernel
  missing one would still compute the right answer; instead every shared byte remembers the
  thread that wrote it and the thread(s) that read it since the last barrier, and whether a
  cp.async to it is in flight (a copy lands only when its thread waits for its group). An access
  that would race on the GPU (another thread's write before a read or write, another thread's
  read before a write or a copy) or touch bytes with a copy in flight raises, naming both threads.
* `mma` is decoded from the ISA table (`isa.parse_opcode`) and the fragment table
  (`fragments.layout` / `coords`): each warp's registers are gathered into A, B, C matrices, D is
  computed with the GPU's own arithmetic, and D is scattered back. The per-variant gather/scatter
  indices are computed once. Arithmetic (`mma_arith`, per GPU `arch`, sm_90 by default): float
  mma as the tensor cores add (exact products aligned to the largest exponent, each term truncated
  to F fraction bits, one truncation to f32 or RNE to f16; canonical NaNs), fp8 and m8n8k4 .f16 as
  the FFMA/HMMA sequences ptxas emits for sm_90, f64 as a chain of IEEE fmas in k order honouring
  .rn/.rz/.rm/.rp; all of it word for word the H100's (tests/test_mma_arith_replay.py). Integers
  exact then wrapped to s32, or clamped with .satfinite; b1 as popc of AND/XOR. m8n8k4 .f16 runs
  as the ISA defines it: four independent 8x8x4 products, one per quad-pair. tf32 operands ignore
  the low 13 register bits.
* `mma.sp` / `mma.sp::ordered_metadata` (every variant `sparse_fragments` has a table row for):
  A's registers are the compressed M x K/2 A, the metadata words `e` of the lanes the selector
  picks give each kept element's position (`sparse_fragments.metadata_layout`, the layout read
  off an H200), A is decompressed and the dense arithmetic above runs on its kept products. Metadata
  the ISA leaves undefined raises instead of computing something: repeated indices, a tf32 index
  other than 0b0100/0b1110, an undefined selector, and decreasing pairs under ::ordered_metadata
  (plain mma.sp runs them, as the H200 does).
* Block-scaled `mma` / `mma.sp::ordered_metadata` (`.kind::mxf8f6f4`, `mxf4`, `mxf4nvf4` with
  `.block_scale`; every variant of Table 36, dense and sparse): operands after c (after e, f for
  sparse) are `scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}`,
  the selectors immediates or 16-bit registers (the same in every lane of a warp). The scale bytes
  are read where `scale_fragments` puts them (positions measured by others on sm_120, not by us),
  decoded (.ue8m0 2**(e-127); .ue4m3 e4m3 with the sign bit ignored), and D = (A * SF_A)(B * SF_B)
  + C with the scales joining the product exponents (`mma_arith`, sm_120's published model); the
  scale block is K / chunks of the logical K (sparse A is decompressed first). A and B elements:
  fp4/fp6 in 8-bit containers under .kind::mxf8f6f4 / f8f6f4 (e2m1 bits 2..5, e3m2/e2m3 bits
  0..5, padding ignored), packed e2m1 under .kind::mxf4 / mxf4nvf4. Selectors outside Table 37
  raise. No GPU we can reach runs these instructions, so this is our reading of the ISA only.
* `wgmma` (sm_90a; `wgmma_ops`): fence, commit_group, wait_group N and mma_async m64nNk16 f32 +=
  f16/bf16 with A and B from shared-memory descriptors in the 128-byte swizzle, by whole
  warpgroups (4 warps), with mma.sync's arithmetic (both checked bit-exact on an H200 by
  tools/wgmma_probe.py). D is computed at issue; the operand bytes stay held until the
  wait_group that retires the group, and a store or copy to them before then raises; so does a
  write to a .sp's metadata register before then (an H200 computed wrong products so).
  `setmaxnreg` moves registers between a warpgroup and its CTA's pool; an .inc waits for them.
* `mbarrier` (`mbarrier_ops`): init, arrive and try_wait.parity on shared::cta barriers. Threads
  that a branch parts by whole warps (a warp-specialized kernel's roles) run as contexts that take
  turns: one runs until it ends or waits for a phase (or registers) it cannot have yet; when no
  context can go on, the kernel deadlocks on the GPU and raises here. A wait orders the arrivers'
  shared accesses before the waiter's (their race marks cleared), and a context that completes a
  phase yields to its waiters, so a role that forgets a wait meets the other's marks.
* `atom.global.min/max` and `atom.global.add.u32` apply threads one after another in thread order
  (the GPU's order is unspecified; the final memory is the same for every order, the returned old
  values are those of this order: split-K's last CTA to arrive is the one of the highest split
  here, any on the GPU, which is why its sum does not depend on it). `bar.red.or.pred` ORs a
  predicate over a CTA; `fence` (also fence.proxy.async: one proxy here) and `membar` do nothing
  (every store is seen by later loads).

The package has a module per concern, each importing at run time only those listed before it:
`machine` (types, registers, global and shared memory), `operands` (operand reading and writing),
`alu`, `memory_ops` (ld, st, atom), `shared_ops` (cp.async, ldmatrix, bar.sync), `mbarrier_ops`, `mma_sparse`,
`mma_block_scale`, `mma` (the semantics of every variant), `mma_instruction`, `wgmma_ops` (the
warpgroup MMA), and `program` (decoding a kernel, running a grid, `emulate`).
"""

from __future__ import annotations

from tilemma.compiler.verify.emulator.machine import MACS_PER_SECOND, QUICK_MACS, EmulationError, RunStats
from tilemma.compiler.verify.emulator.mma import mma_semantics, mma_warps
from tilemma.compiler.verify.emulator.program import Program, compile_entry, emulate

__all__ = ["MACS_PER_SECOND", "QUICK_MACS", "EmulationError", "Program", "RunStats", "compile_entry", "emulate", "mma_semantics", "mma_warps"]
