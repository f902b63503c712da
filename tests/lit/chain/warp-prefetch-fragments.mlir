// warp-prefetch-fragments: the pipelined loop of warp-pipeline (warp IR in). Each stage's head
// (its wait, barrier and first K step's reads) moves to the end of the stage before: into the
// prologue for the first, and for the others to the end of the loop body, reading the next
// stage (kt + 1) mod S, carried into the next iteration with the wait's token. Interleaved
// reads (16-bit): mmas column by column, each read as soon as the registers it replaces are free.
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=2x1 warp-tile=2x2 stages=3 stage-k=32},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-pipeline' | %tilemma-opt -p warp-prefetch-fragments | filecheck %s
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=2x1 warp-tile=2x2 stages=3 stage-k=32},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-pipeline' | not %tilemma-opt -p 'warp-prefetch-fragments{b-ahead=0}' 2>&1 | filecheck %s --check-prefix=OPT

// CHECK-LABEL: func.func @g
// CHECK:       warp.async_commit
// CHECK:       %[[T0:.*]] = warp.async_wait {pending = 1 : i64}
// CHECK-NEXT:  "gpu.barrier"() : () -> ()
// CHECK:       %[[A0:.*]] = warp.ldmatrix %[[SA:.*]][%{{.*}}] after %[[T0]] {offsets = array<i64: 0, 0>}
// CHECK-NEXT:  %[[A1:.*]] = warp.ldmatrix %[[SA]][%{{.*}}] after %[[T0]] {offsets = array<i64: 16, 0>}
// CHECK-NEXT:  %[[B0:.*]], %[[B1:.*]] = warp.ldmatrix %[[SB:.*]][%{{.*}}] after %[[T0]] {offsets = array<i64: 0, 0>, trans}
// CHECK:       scf.for %[[KT:.*]] = {{.*}} iter_args({{.*}}, %[[CA0:.*]] = %[[A0]], %[[CA1:.*]] = %[[A1]], %{{.*}} = %[[B0]], %{{.*}} = %[[B1]], %[[CT:.*]] = %[[T0]])
// CHECK:         %[[STAGE:.*]] = arith.remui %[[KT]], %[[S:.*]] : index
// CHECK-NEXT:    %[[NEXT:.*]] = arith.addi %[[KT]], %{{.*}} : index
// CHECK-NEXT:    %[[FOLLOWING:.*]] = arith.remui %[[NEXT]], %[[S]] : index
// CHECK:         warp.async_commit
// CHECK-NEXT:    warp.mma %[[CA0]]
// CHECK-NEXT:    warp.mma %[[CA1]]
// CHECK-NEXT:    warp.mma %[[CA0]]
// CHECK-NEXT:    warp.ldmatrix %[[SA]][%[[STAGE]], {{.*}} after %[[CT]]
// CHECK:         %[[T1:.*]] = warp.async_wait {pending = 1 : i64}
// CHECK-NEXT:    "gpu.barrier"() : () -> ()
// CHECK-NEXT:    warp.ldmatrix %[[SA]][%[[FOLLOWING]], {{.*}} after %[[T1]]
// CHECK-NEXT:    warp.mma
// CHECK-NEXT:    warp.ldmatrix %[[SA]][%[[FOLLOWING]], {{.*}} after %[[T1]]
// CHECK-NEXT:    warp.ldmatrix %[[SB]][%[[FOLLOWING]], {{.*}} after %[[T1]]
// CHECK-NEXT:    scf.yield {{.*}}, %[[T1]] :
// The last stage: no wait, no barrier, the rest of its reads after the carried token.
// CHECK:       }
// CHECK-NOT:   warp.async_wait {pending = 1
// CHECK:       warp.ldmatrix
// CHECK:       warp.async_wait {pending = 0 : i64}

// OPT:         warp-prefetch-fragments: b-ahead must be positive, got 0
func.func @g(%a: memref<64x96xf16>, %b: memref<96x32xf16>, %d: memref<64x32xf16>) {
  %ta = tile.load %a[0, 0] : memref<64x96xf16> -> !tile.tile<64x96xf16>
  %tb = tile.load %b[0, 0] : memref<96x32xf16> -> !tile.tile<96x32xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<64x96xf16>, !tile.tile<96x32xf16> -> !tile.tile<64x32xf16>
  tile.store %td, %d[0, 0] : !tile.tile<64x32xf16>, memref<64x32xf16>
  func.return
}
