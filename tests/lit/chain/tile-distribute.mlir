// tile-distribute: the planned kernel as the simple warp loop (fragments from global memory,
// one instruction's K an iteration), whatever the schedule stages later; the grid flattened
// and CTAs grouped where the schedule says group_m. The accumulators leave the loop as
// warp.distributed, and the tile ops after the mma (here the store) are carried over for
// tile-distribute-epilogue.
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=2x1 warp-tile=2x2 stages=3 stage-k=32}' | %tilemma-opt -p tile-distribute | filecheck %s
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=2x1 warp-tile=2x2 stages=0}' | %tilemma-opt -p tile-distribute | filecheck %s --check-prefix=SIMPLE
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90}' | not %tilemma-opt -p tile-distribute 2>&1 | filecheck %s --check-prefix=NOPLAN

// CHECK-LABEL: func.func @g(%a: memref<64x96xf16> {warp.role = ["a"]}, %b: memref<96x32xf16> {warp.role = ["b"]}, %d: memref<64x32xf16> {warp.role = ["d"]})
// CHECK-SAME:  warp.grid = array<i64: 2, 1, 1>, warp.block = array<i64: 64, 1, 1>
// CHECK:       %[[PID:.*]] = "gpu.block_id"() <{dimension = #gpu<dim x>}>
// CHECK:       arith.minui
// CHECK:       %[[ACC:.*]] = warp.constant 0.000000e+00 : f64
// CHECK:       scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[ACC]], %{{.*}} = %[[ACC]], %{{.*}} = %[[ACC]], %{{.*}} = %[[ACC]])
// CHECK-COUNT-2: warp.load %a[%{{.*}}, %{{.*}}, %[[K]]]
// CHECK-COUNT-2: warp.load %b[%{{.*}}, %[[K]], %{{.*}}]
// CHECK-COUNT-4: warp.mma
// CHECK:       scf.yield
// CHECK:       %[[T:.*]] = warp.distributed %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} at[%{{.*}}] [%{{.*}}, %{{.*}}] [%{{.*}}, %{{.*}}] {in_bounds = array<i64: 1, 1>, col_align = 8 : i64}
// CHECK-SAME:  -> !tile.tile<64x32xf16>
// CHECK:       tile.store %[[T]], %d[0, 0]
// CHECK-NOT:   warp.copy_async

// Simple schedule: the grid as tiles (x: columns, y: rows), CTAs in that order.
// SIMPLE:      warp.grid = array<i64: 2, 1, 1>
// SIMPLE-NOT:  arith.minui
// SIMPLE:      scf.for

// NOPLAN:      error: tile.mma: run tile-plan before tile-distribute (no warp.schedule on the kernel)
func.func @g(%a: memref<64x96xf16>, %b: memref<96x32xf16>, %d: memref<64x32xf16>) {
  %ta = tile.load %a[0, 0] : memref<64x96xf16> -> !tile.tile<64x96xf16>
  %tb = tile.load %b[0, 0] : memref<96x32xf16> -> !tile.tile<96x32xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<64x96xf16>, !tile.tile<96x32xf16> -> !tile.tile<64x32xf16>
  tile.store %td, %d[0, 0] : !tile.tile<64x32xf16>, memref<64x32xf16>
  func.return
}
