// warp-pipeline: the staged loop of warp-stage-shared (warp IR in), 3 stages: a prologue that
// fills stages 0 and 1, a loop over the iterations with a successor that waits for its stage
// (one group may stay in flight), refills the slot the previous iteration read right after
// the barrier, then reads and multiplies; the last iteration peeled without its copies; nothing
// in flight at the end.
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=2x1 warp-tile=2x2 stages=3 stage-k=32},tile-distribute,tile-distribute-epilogue,warp-stage-shared' | %tilemma-opt -p warp-pipeline | filecheck %s
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=2x1 warp-tile=2x2 stages=3 stage-k=32},tile-distribute,tile-distribute-epilogue' | not %tilemma-opt -p warp-pipeline 2>&1 | filecheck %s --check-prefix=ORDER

// CHECK-LABEL: func.func @g
// CHECK:       %[[SA:.*]] = memref.alloc()
// CHECK:       %[[SB:.*]] = memref.alloc()
// CHECK:       warp.copy_async %a[%{{.*}}], %[[SA]][%[[S0:.*]]]
// CHECK:       warp.copy_async %b[%{{.*}}], %[[SB]][%[[S0]]]
// CHECK-NEXT:  warp.async_commit
// CHECK:       warp.copy_async %a[%{{.*}}], %[[SA]][%[[S1:.*]]]
// CHECK:       warp.copy_async %b[%{{.*}}], %[[SB]][%[[S1]]]
// CHECK-NEXT:  warp.async_commit
// CHECK-NOT:   warp.ldmatrix
// CHECK:       scf.for %[[KT:.*]] = %{{.*}} to %[[TWO:.*]] step
// CHECK-NEXT:    %[[AHEAD:.*]] = arith.addi %[[KT]], %{{.*}} : index
// CHECK-NEXT:    %[[K:.*]] = arith.muli %[[AHEAD]], %{{.*}} : index
// CHECK-NEXT:    %[[MORE:.*]] = arith.cmpi ult, %[[K]], %{{.*}} : index
// CHECK-NEXT:    %[[STAGE:.*]] = arith.remui %[[KT]], %{{.*}} : index
// CHECK-NEXT:    %[[TOK:.*]] = warp.async_wait {pending = 1 : i64}
// CHECK-NEXT:    "gpu.barrier"() : () -> ()
// CHECK-NEXT:    scf.if %[[MORE]] {
// CHECK-NEXT:      %[[SLOT:.*]] = arith.remui %[[AHEAD]], %{{.*}} : index
// CHECK-NEXT:      warp.copy_async %a[%{{.*}}, %{{.*}}, %[[K]]], %[[SA]][%[[SLOT]]]
// CHECK-NEXT:      warp.copy_async %b[%{{.*}}, %[[K]], %{{.*}}], %[[SB]][%[[SLOT]]]
// CHECK-NEXT:    }
// CHECK-NEXT:    warp.async_commit
// CHECK-NEXT:    warp.ldmatrix %[[SA]][%[[STAGE]], %{{.*}}] after %[[TOK]]
// CHECK-COUNT-8: warp.mma
// CHECK:         scf.yield
// The peeled last iteration: no copies, no commit.
// CHECK:       %[[LAST:.*]] = warp.async_wait {pending = 1 : i64}
// CHECK-NEXT:  "gpu.barrier"() : () -> ()
// CHECK-NOT:   warp.copy_async
// CHECK-NOT:   warp.async_commit
// CHECK:       warp.ldmatrix %[[SA]][%{{.*}}] after %[[LAST]]
// CHECK-COUNT-8: warp.mma
// CHECK-NEXT:  warp.async_wait {pending = 0 : i64}
// CHECK-NEXT:  warp.store

// ORDER:       error: scf.for: run warp-stage-shared before warp-pipeline (the K loop has no copies)
func.func @g(%a: memref<64x96xf16>, %b: memref<96x32xf16>, %d: memref<64x32xf16>) {
  %ta = tile.load %a[0, 0] : memref<64x96xf16> -> !tile.tile<64x96xf16>
  %tb = tile.load %b[0, 0] : memref<96x32xf16> -> !tile.tile<96x32xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<64x96xf16>, !tile.tile<96x32xf16> -> !tile.tile<64x32xf16>
  tile.store %td, %d[0, 0] : !tile.tile<64x32xf16>, memref<64x32xf16>
  func.return
}
