// A persistent kernel whose tiles are not whole rings: K = 320 is 5 stages of 64 on a ring of 4, so
// the ring's count (base + kt) and a tile's stage kt part ways after the first tile. Both roles
// address their stage's buffers, not only its barriers, by the ring's count: the producers' TMA
// copies and the consumers' wgmma reads of stage kt use buffer (base + kt) mod 4 (`_on_the_ring`).
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{wgmma=true producers=4 tma=1 persistent=3 warps=8x1 warp-tile=1x8},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-specialize' | filecheck %s

// CHECK-LABEL: func.func @ws
// CHECK-SAME:  persistent = 3>, warp.grid = array<i64: 3, 1, 1>
// CHECK:       scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[PBASE:.*]] = %{{.*}}) -> (index) {
// CHECK:         scf.for %[[PK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[PG:.*]] = arith.addi %[[PK]], %[[PBASE]] : index
// CHECK:           warp.mbarrier_wait
// CHECK:           %[[PBUF:.*]] = arith.remui %[[PG]], %{{.*}} : index
// CHECK:           warp.copy_tma %a[{{.*}}], %{{.*}}[%[[PBUF]]], %{{.*}}
// CHECK-NOT:     arith.remui %[[PK]]
// CHECK:       warp.retire
// CHECK:       scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[CBASE:.*]] = %{{.*}}) -> (index) {
// CHECK:         scf.for %[[CK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK-NEXT:      %[[CG:.*]] = arith.addi %[[CK]], %[[CBASE]] : index
// CHECK:           warp.mbarrier_wait
// CHECK-NEXT:      %[[CBUF:.*]] = arith.remui %[[CG]], %{{.*}} : index
// CHECK-NOT:       arith.remui %[[CK]]
// CHECK:           warp.wgmma %{{.*}}[%[[CBUF]], %{{.*}}], %{{.*}} after
func.func @ws(%a: memref<256x320xf16>, %b: memref<320x256xf16>, %d: memref<256x256xf32>) {
  %ta = tile.load %a[0, 0] : memref<256x320xf16> -> !tile.tile<256x320xf16>
  %tb = tile.load %b[0, 0] : memref<320x256xf16> -> !tile.tile<320x256xf16>
  %zero = tile.constant 0.0 : !tile.tile<256x256xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<256x320xf16>, !tile.tile<320x256xf16>, !tile.tile<256x256xf32> -> !tile.tile<256x256xf32>
  tile.store %td, %d[0, 0] : !tile.tile<256x256xf32>, memref<256x256xf32>
  func.return
}
