// A persistent TMA kernel (`tile-plan{producers=4 tma=1 persistent=3}`, `warp-specialize`): 3 CTAs
// (the grid) over the 16 tiles of 128 x 128. Each role loops over the tiles from the CTA's index by
// 3, and the ops that make the tile's origin from that index are cloned into each loop with the
// tile for it. The ring runs on: a tile's stage kt is the ring's base + kt (base: the loops'
// carried count, 8 stages a tile, a multiple of the 4 of the ring), its barrier and phase; the
// consumers release the stage still in flight after each tile's loop.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{wgmma=true producers=4 tma=1 persistent=3},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-specialize' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=4 tma=1 persistent=3},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @ws
// CHECK-SAME:  copy = tma, persistent = 3>, warp.grid = array<i64: 3, 1, 1>
// CHECK:       %[[PID:.*]] = "gpu.block_id"() <{dimension = #gpu<dim x>}>
// CHECK:       warp.set_max_registers {count = 40 : i64}
// CHECK-NEXT:  %{{.*}} = scf.for %[[PT:.*]] = %[[PID]] to %{{.*}} step %{{.*}} iter_args(%[[PBASE:.*]] = %{{.*}}) -> (index) {
// CHECK:         arith.divui %[[PT]]
// CHECK:         scf.for %[[PK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[PG:.*]] = arith.addi %[[PK]], %[[PBASE]] : index
// CHECK:           warp.mbarrier_wait
// CHECK:           warp.copy_tma %a
// CHECK:         scf.yield
// CHECK:       warp.retire
// CHECK:       warp.set_max_registers {count = 232 : i64, increase}
// CHECK-NEXT:  %{{.*}} = scf.for %[[CT:.*]] = %[[PID]] to %{{.*}} step %{{.*}} iter_args(%[[CBASE:.*]] = %{{.*}}) -> (index) {
// CHECK:         arith.divui %[[CT]]
// CHECK:         scf.for %[[CK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK-NEXT:      arith.addi %[[CK]], %[[CBASE]] : index
// CHECK:           warp.mbarrier_wait
// CHECK:           warp.wgmma
// CHECK:         warp.wgmma_wait
// CHECK:         warp.mbarrier_arrive
// CHECK:         warp.store
// CHECK:         scf.yield

// PTX-LABEL:   .visible .entry ws(
// PTX:         mov.u32 [[PID:%r[0-9]+]], %ctaid.x;
// PTX-NOT:     %ctaid.x
// PTX:         setp.ge.u32 {{%p[0-9]+}}, [[PID]], 16;
// PTX:         cp.async.bulk.tensor.2d
// PTX:         setp.ge.u32 {{%p[0-9]+}}, [[PID]], 16;
// PTX:         wgmma.mma_async
func.func @ws(%a: memref<512x512xf16>, %b: memref<512x512xf16>, %d: memref<512x512xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %zero = tile.constant 0.0 : !tile.tile<512x512xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<512x512xf16>, !tile.tile<512x512xf16>, !tile.tile<512x512xf32> -> !tile.tile<512x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x512xf32>, memref<512x512xf32>
  func.return
}
