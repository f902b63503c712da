// RUN: %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp' | filecheck %s
// RUN: %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{warps=4x1 warp-tile=1x2}' | filecheck %s --check-prefix=OPT
// RUN: not %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{warps=64x64}' 2>&1 | filecheck %s --check-prefix=BIG
// RUN: not %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{warp-tile=100x100}' 2>&1 | filecheck %s --check-prefix=REGS
// RUN: %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp,warp-swizzle-shared' | filecheck %s --check-prefix=SWZ
// RUN: %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{stages=0}' | filecheck %s --check-prefix=SIMPLE

// 37x91x53 with m16n8k16: rows that are not 4-byte aligned (K = 53, N = 91 f16 elements) are
// gathered into shared memory by default; on the simple schedule (forced, SIMPLE): warp tile 2x4
// instructions (32x32), 2x2 warps (CTA 64x64), grid 2x1. The kernel at warp level: ids, each
// warp's origin, C fragments, the K loop carrying the accumulators, A and B fragments loaded and
// multiplied in it, D stored.
// CHECK-LABEL: func.func @odd
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 1x8, stages = 4, stage_k = 32, reads = ahead, group_m = 8, gather = ab>
// SIMPLE-LABEL: func.func @odd
// SIMPLE-SAME:  %a: memref<37x53xf16> {warp.role = ["a"]}
// SIMPLE-SAME:  %d: memref<37x91xf32> {warp.role = ["d"]}
// SIMPLE-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 2x4, stages = 0>
// SIMPLE-SAME:  warp.grid = array<i64: 2, 1, 1>, warp.block = array<i64: 128, 1, 1>
// SIMPLE:       %[[TID:.*]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}>
// SIMPLE:       %[[BZ:.*]] = "gpu.block_id"() <{dimension = #gpu<dim z>}>
// SIMPLE:       %[[C0:.*]] = warp.load %c[%[[BZ]], %[[ROW:.*]], %[[COL:.*]]] {window = array<i64: 0, 0>, extent = array<i64: 1, 37, 91>, col_align = 8 : i64} : memref<37x91xf32> -> !warp.frag<acc, f32, #warp.variant<m16n8k16, f32, f16, f16, f32>>
// SIMPLE:       scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[C0]],
// SIMPLE:         %[[A:.*]] = warp.load %a[%[[BZ]], %[[ROW]], %[[K]]] {{.*}}extent = array<i64: 1, 37, 53>{{.*}} -> !warp.frag<a, f16,
// SIMPLE:         %[[B:.*]] = warp.load %b[%[[BZ]], %[[K]], %[[COL]]] {{.*}} -> !warp.frag<b, f16,
// SIMPLE:         warp.mma %[[A]], %[[B]], %[[ACC]] :
// SIMPLE:         scf.yield
// SIMPLE-COUNT-8: warp.store
// SIMPLE:       func.return
// OPT-LABEL:   func.func @odd
// OPT-SAME:  warp.schedule = #warp.schedule<warps = 4x1, warp_tile = 1x2, stages = 4, stage_k = 32, reads = ahead, group_m = 8, gather = ab>
// OPT-SAME:    warp.grid = array<i64: 6, 1, 1>, warp.block = array<i64: 128, 1, 1>
// BIG:         tile-warps.mlir:[[# @LINE + 8]]:3
// BIG:         warps 64x64 make a CTA of 131072 threads; a CTA holds at most 1024 (32 warps)
// REGS:        tile-warps.mlir:[[# @LINE + 6]]:3
// REGS:        warp tile 100x100 holds {{[0-9]+}} fragment registers per thread
func.func @odd(%a: memref<37x53xf16>, %b: memref<53x91xf16>, %c: memref<37x91xf32>, %d: memref<37x91xf32>) {
  %ta = tile.load %a[0, 0] : memref<37x53xf16> -> !tile.tile<37x53xf16>
  %tb = tile.load %b[0, 0] : memref<53x91xf16> -> !tile.tile<53x91xf16>
  %tc = tile.load %c[0, 0] : memref<37x91xf32> -> !tile.tile<37x91xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<37x53xf16>, !tile.tile<53x91xf16>, !tile.tile<37x91xf32> -> !tile.tile<37x91xf32>
  tile.store %td, %d[0, 0] : !tile.tile<37x91xf32>, memref<37x91xf32>
  func.return
}

// -----
// A small tile gets one warp; the batch becomes grid z; m8n8k4 f16 runs as a 16x16x4 warp op; a
// constant accumulator is a splat fragment; exact sizes need no predicate (in_bounds).
// CHECK-LABEL: func.func @small_batched
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 1x1, warp_tile = 1x1, stages = 0>
// CHECK-SAME:  warp.grid = array<i64: 1, 1, 3>, warp.block = array<i64: 32, 1, 1>
// CHECK:       warp.constant 0.000000e+00 : f64 : !warp.frag<acc, f32, #warp.variant<m8n8k4, f32, f16, f16, f32>>
// CHECK:       warp.load %b[{{.*}}] {window = array<i64: 0, 0, 0>, extent = array<i64: 1, 4, 7>, in_bounds = array<i64: 1, 0>}
func.func @small_batched(%a: memref<3x9x4xf16>, %b: memref<1x4x7xf16>, %d: memref<3x9x7xf32>) {
  %ta = tile.load %a[0, 0, 0] : memref<3x9x4xf16> -> !tile.tile<3x9x4xf16>
  %tb = tile.load %b[0, 0, 0] : memref<1x4x7xf16> -> !tile.tile<1x4x7xf16>
  %z = tile.constant 0.0 : !tile.tile<3x9x7xf32>
  %td = tile.mma %ta, %tb, %z {mma_shape = "m8n8k4"} : !tile.tile<3x9x4xf16>, !tile.tile<1x4x7xf16>, !tile.tile<3x9x7xf32> -> !tile.tile<3x9x7xf32>
  tile.store %td, %d[0, 0, 0] : !tile.tile<3x9x7xf32>, memref<3x9x7xf32>
  func.return
}

// -----
// A checked 2:4 sparse A: compressed in registers, with an extra argument for the error word.
// CHECK-LABEL: func.func @sparse
// CHECK-SAME:  %sparsity_error: memref<1xui32> {warp.role = ["sparsity_error"], warp.init = 4294967295 : i64}
// CHECK:       %{{.*}}, %[[E:.*]] = warp.load_sparse_a %a[{{.*}}] error %sparsity_error : memref<1xui32> {{.*}} -> !warp.frag<a, f16, #warp.variant<m16n8k32, f16, f16, f16, f16, sparse = "sp::ordered_metadata">>, !warp.frag<meta, i32,
// CHECK:       warp.mma {{.*}} meta %[[E]] :
func.func @sparse(%a: memref<32x64xf16>, %b: memref<64x16xf16>, %d: memref<32x16xf16>) {
  %ta = tile.load %a[0, 0] : memref<32x64xf16> -> !tile.tile<32x64xf16>
  %sa = tile.compress %ta : !tile.tile<32x64xf16> -> !tile.sparse<32x64xf16>
  %tb = tile.load %b[0, 0] : memref<64x16xf16> -> !tile.tile<64x16xf16>
  %td = tile.matmul %sa, %tb : !tile.sparse<32x64xf16>, !tile.tile<64x16xf16> -> !tile.tile<32x16xf16>
  tile.store %td, %d[0, 0] : !tile.tile<32x16xf16>, memref<32x16xf16>
  func.return
}

// -----
// Dense f16 with aligned rows takes the staged schedule (512^3 leaves SMs idle with 128x128 CTAs:
// the CTA is 64x128): two shared rings (memory space 3) of 3 stages of K 64; the prologue fills
// 2 of them with CTA-wide cp.async copies (in_bounds: 512 is a multiple of the tiles), waits for
// the first and reads the fragments a stage starts with, with ldmatrix: A, and B's first two
// pairs of columns (.x4.trans). Each iteration carries the accumulators and those fragments: it
// refills the stage freed last time (only while that stage starts before K: scf.if), then
// multiplies K step by K step, column by column, reading a fragment once the one it replaces is
// dead (register pressure): after a B pair's mmas the pair two on, after a row's mma in a step's
// last column that row's A of the next step. The next stage's first read first waits for it and
// syncs. The last stage is peeled (no refill, no read past K); nothing is in flight at the end.
// CHECK-LABEL: func.func @staged
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 2x8, stages = 3, stage_k = 64, reads = {{[a-z]+}}, group_m = 8
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x64x64xf16, 3 : i64>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x64x128xf16, 3 : i64>
// CHECK:       warp.copy_async %a[{{.*}}], %[[SA]][{{.*}}] {{.*}}threads = 128 : i64, vector = 16 : i64, in_bounds = array<i64: 1, 1>}
// CHECK-COUNT-2: warp.async_commit
// CHECK:       warp.async_wait {pending = 1 : i64}
// CHECK-NEXT:  "gpu.barrier"()
// CHECK:       %[[A0:.*]] = warp.ldmatrix %[[SA]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>} : memref<3x64x64xf16, 3 : i64> -> !warp.frag<a, f16,
// CHECK:       warp.ldmatrix %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>, trans} : memref<3x64x128xf16, 3 : i64> -> !warp.frag<b, f16, {{.*}}>, !warp.frag<b, f16,
// CHECK:       scf.for %[[KT:.*]] = {{.*}} iter_args({{.*}}, %[[A:.*]] = %[[A0]],
// CHECK:         %[[MORE:.*]] = arith.cmpi ult, {{.*}}, %{{.*}} : index
// CHECK:         scf.if %[[MORE]] {
// CHECK:           warp.copy_async %a
// CHECK-NEXT:      warp.copy_async %b
// CHECK-NEXT:    }
// CHECK-NEXT:    warp.async_commit
// CHECK-NEXT:    warp.mma %[[A]], {{.*}}
// CHECK:         warp.ldmatrix %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>, trans}
// CHECK:         warp.mma %[[A]], {{.*}}
// CHECK:         warp.ldmatrix %[[SA]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>}
// CHECK:         warp.async_wait {pending = 1 : i64}
// CHECK-NEXT:    "gpu.barrier"()
// CHECK:         warp.ldmatrix %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>, trans}
// CHECK:         warp.ldmatrix %[[SA]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>}
// CHECK:         scf.yield
// CHECK-NOT:     warp.copy_async
// CHECK-COUNT-64: warp.mma
// CHECK:       warp.async_wait {pending = 0 : i64}
// The swizzle is the shared buffers' type: written on the allocs, seen by every op on them.
// SWZ-LABEL:   func.func @staged
// SWZ:         %[[SA:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x64x64xf16, #warp.swizzled<1>, 3 : i64>
// SWZ-NEXT:    %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x64x128xf16, #warp.swizzled<1>, 3 : i64>
// SWZ-COUNT-4: warp.copy_async {{.*}} : memref<512x512xf16>, memref<3x64x{{64|128}}xf16, #warp.swizzled<1>, 3 : i64>
// SWZ:         warp.ldmatrix %[[SA]]{{.*}} : memref<3x64x64xf16, #warp.swizzled<1>, 3 : i64> ->
// SWZ:         warp.ldmatrix %[[SB]]{{.*}}trans} : memref<3x64x128xf16, #warp.swizzled<1>, 3 : i64> ->
// OPT-LABEL:   func.func @staged
func.func @staged(%a: memref<512x512xf16>, %b: memref<512x512xf16>, %d: memref<512x512xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %z = tile.constant 0.0 : !tile.tile<512x512xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<512x512xf16>, !tile.tile<512x512xf16>, !tile.tile<512x512xf32> -> !tile.tile<512x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x512xf32>, memref<512x512xf32>
  func.return
}
