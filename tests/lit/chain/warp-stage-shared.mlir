// warp-stage-shared: the simple K loop of tile-distribute (warp IR in) becomes a loop over
// stages of the ring (warp IR out): copy the stage (skipped past K), commit, wait for it,
// barrier, then per K step read A and B from the stage (after the wait's token) and multiply.
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=2x1 warp-tile=2x2 stages=3 stage-k=32},tile-distribute,tile-distribute-epilogue' | %tilemma-opt -p warp-stage-shared | filecheck %s
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{stages=0},tile-distribute,tile-distribute-epilogue' | %tilemma-opt -p warp-stage-shared | filecheck %s --check-prefix=SIMPLE

// CHECK-LABEL: func.func @g
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x64x32xf16, 3 : i64>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x32x16xf16, 3 : i64>
// CHECK:       scf.for %[[KT:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK:         %[[K:.*]] = arith.muli %[[KT]], %{{.*}} : index
// CHECK:         %[[MORE:.*]] = arith.cmpi ult, %[[K]], %{{.*}} : index
// CHECK:         %[[STAGE:.*]] = arith.remui %[[KT]], %{{.*}} : index
// CHECK:         scf.if %[[MORE]] {
// CHECK:           warp.copy_async %a[%{{.*}}, %{{.*}}, %[[K]]], %[[SA]][%{{.*}}] {window = array<i64: 0, 0>, extent = array<i64: 1, 64, 96>, threads = 64 : i64, vector = 16 : i64, in_bounds = array<i64: 1, 1>}
// CHECK:           warp.copy_async %b[%{{.*}}, %[[K]], %{{.*}}], %[[SB]][%{{.*}}]
// CHECK:         warp.async_commit
// CHECK-NEXT:    %[[TOK:.*]] = warp.async_wait {pending = 0 : i64}
// CHECK-NEXT:    "gpu.barrier"() : () -> ()
// CHECK:         warp.ldmatrix %[[SA]][%[[STAGE]], %{{.*}}, %{{.*}}] after %[[TOK]] {offsets = array<i64: 0, 0>}
// CHECK:         warp.ldmatrix %[[SA]][%[[STAGE]], %{{.*}}, %{{.*}}] after %[[TOK]] {offsets = array<i64: 16, 0>}
// CHECK:         warp.ldmatrix %[[SB]][%[[STAGE]], %{{.*}}, %{{.*}}] after %[[TOK]] {offsets = array<i64: 0, 0>, trans}
// CHECK-COUNT-4: warp.mma
// CHECK:         warp.ldmatrix %[[SB]][%[[STAGE]], %{{.*}}, %{{.*}}] after %[[TOK]] {offsets = array<i64: 16, 0>, trans}
// CHECK-COUNT-4: warp.mma
// CHECK-NEXT:    scf.yield
// CHECK-NOT:   warp.load %a

// An M-major A (columns contiguous) is staged as its transpose, K x BM (a transposing copy:
// each shared row one contiguous run of A), and read with ldmatrix .trans; so is its row-major B.
// CHECK-LABEL: func.func @acol
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x32x64xf16, 3 : i64>
// CHECK:       scf.if
// CHECK:         warp.copy_async %a[%{{.*}}], %[[SA]][%{{.*}}] {window = array<i64: 0, 0>, extent = array<i64: 1, 64, 96>, threads = 64 : i64, vector = 16 : i64, transpose, in_bounds = array<i64: 1, 1>}
// CHECK:       %[[TOK:.*]] = warp.async_wait
// CHECK:       warp.ldmatrix %[[SA]][%{{.*}}, %{{.*}}, %{{.*}}] after %[[TOK]] {offsets = array<i64: 0, 0>, trans}
// CHECK:       warp.ldmatrix %[[SA]][%{{.*}}, %{{.*}}, %{{.*}}] after %[[TOK]] {offsets = array<i64: 0, 16>, trans}
// CHECK:       warp.ldmatrix %{{.*}} {offsets = array<i64: 0, 0>, trans}
// CHECK-COUNT-4: warp.mma
// CHECK:       warp.ldmatrix %[[SA]][%{{.*}}, %{{.*}}, %{{.*}}] after %[[TOK]] {offsets = array<i64: 16, 0>, trans}

// A kernel the plan did not stage is left as it is.
// SIMPLE-NOT:  memref.alloc
// SIMPLE:      warp.load %a
func.func @g(%a: memref<64x96xf16>, %b: memref<96x32xf16>, %d: memref<64x32xf16>) {
  %ta = tile.load %a[0, 0] : memref<64x96xf16> -> !tile.tile<64x96xf16>
  %tb = tile.load %b[0, 0] : memref<96x32xf16> -> !tile.tile<96x32xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<64x96xf16>, !tile.tile<96x32xf16> -> !tile.tile<64x32xf16>
  tile.store %td, %d[0, 0] : !tile.tile<64x32xf16>, memref<64x32xf16>
  func.return
}

func.func @acol(%a: memref<64x96xf16, strided<[1, 64]>>, %b: memref<96x32xf16>, %d: memref<64x32xf16>) {
  %ta = tile.load %a[0, 0] : memref<64x96xf16, strided<[1, 64]>> -> !tile.tile<64x96xf16>
  %tb = tile.load %b[0, 0] : memref<96x32xf16> -> !tile.tile<96x32xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<64x96xf16>, !tile.tile<96x32xf16> -> !tile.tile<64x32xf16>
  tile.store %td, %d[0, 0] : !tile.tile<64x32xf16>, memref<64x32xf16>
  func.return
}
