// warp-widen-int4: s4 on sm_90 (select-mma picks the s8 mma; the schedule says widen). Before
// it, the kernel multiplies the stored 4-bit m16n8k64 fragments; after it, each K step's mmas
// are the widened fragments' (warp.widen: both K halves) on the s8 m16n8k32 instruction, half
// 0 then half 1, and the accumulators are that instruction's fragments.
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=1x1 warp-tile=2x2 stages=2 stage-k=128},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-pipeline,warp-prefetch-fragments' | filecheck %s --check-prefix=BEFORE
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{warps=1x1 warp-tile=2x2 stages=2 stage-k=128},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-pipeline,warp-prefetch-fragments' | %tilemma-opt -p warp-widen-int4 | filecheck %s

// BEFORE:      warp.mma {{.*}} : !warp.frag<a, si4, #warp.variant<m16n8k64, s32, s4, s4, s32>>
// BEFORE-NOT:  warp.widen

// CHECK-LABEL: func.func @s4
// CHECK-SAME:  widen = #warp.variant<m16n8k32, s32, s8, s8, s32>
// CHECK:       scf.for
// CHECK:       %[[A0L:.*]], %[[A0H:.*]] = warp.widen %{{.*}} : !warp.frag<a, si4, #warp.variant<m16n8k64, s32, s4, s4, s32>> -> !warp.frag<a, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>, !warp.frag<a, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>
// CHECK-NEXT:  %[[A1L:.*]], %[[A1H:.*]] = warp.widen
// CHECK-NEXT:  %[[B0L:.*]], %[[B0H:.*]] = warp.widen %{{.*}} : !warp.frag<b, si4
// CHECK-NEXT:  %[[B1L:.*]], %[[B1H:.*]] = warp.widen
// CHECK-NEXT:  %[[C00:.*]] = warp.mma %[[A0L]], %[[B0L]], %{{.*}} : !warp.frag<a, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>, !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>, !warp.frag<acc, si32, #warp.variant<m16n8k32, s32, s8, s8, s32>>
// CHECK-NEXT:  warp.mma %[[A0L]], %[[B1L]]
// CHECK-NEXT:  warp.mma %[[A1L]], %[[B0L]]
// CHECK-NEXT:  warp.mma %[[A1L]], %[[B1L]]
// CHECK-NEXT:  warp.mma %[[A0H]], %[[B0H]], %[[C00]]
// CHECK-NEXT:  warp.mma %[[A0H]], %[[B1H]]
// CHECK-NEXT:  warp.mma %[[A1H]], %[[B0H]]
// CHECK-NEXT:  warp.mma %[[A1H]], %[[B1H]]
// CHECK-NOT:   m16n8k64, s32, s4, s4, s32>> -> !warp.frag<acc
// CHECK:       warp.store {{.*}} : !warp.frag<acc, si32, #warp.variant<m16n8k32, s32, s8, s8, s32>>
func.func @s4(%a: memref<32x256xsi4>, %b: memref<256x16xsi4, strided<[1, 256]>>, %d: memref<32x16xsi32>) {
  %ta = tile.load %a[0, 0] : memref<32x256xsi4> -> !tile.tile<32x256xsi4>
  %tb = tile.load %b[0, 0] : memref<256x16xsi4, strided<[1, 256]>> -> !tile.tile<256x16xsi4>
  %zero = tile.constant 0 : !tile.tile<32x16xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<32x256xsi4>, !tile.tile<256x16xsi4>, !tile.tile<32x16xsi32> -> !tile.tile<32x16xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<32x16xsi32>, memref<32x16xsi32>
  func.return
}
