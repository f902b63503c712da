// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=80},tile-to-warp{stages=0},warp-split-tf32,cse,warp-to-ptx' -t ptx | filecheck %s
// Sizes that are multiples of the CTA tile and of K need no predicates at all; tf32 operands are
// loaded as f32 and rounded with cvt.rna (the simple path: fragments from global memory).

// CHECK:     .target sm_80
// CHECK-NOT: setp.lt.s32
// CHECK:     ld.global.f32 %f{{[0-9]+}}, [%rd{{[0-9]+}}+{{[0-9]+}}];
// CHECK:     cvt.rna.tf32.f32 %r{{[0-9]+}}, %f{{[0-9]+}};
// CHECK:     mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// CHECK-NOT: @%p{{[0-9]+}} st.global
func.func @exact(%a: memref<128x64xf32>, %b: memref<64x128xf32>, %d: memref<128x128xf32>) {
  %ta = tile.load %a[0, 0] : memref<128x64xf32> -> !tile.tile<128x64xf32>
  %tb = tile.load %b[0, 0] : memref<64x128xf32> -> !tile.tile<64x128xf32>
  %ca = tile.cast %ta {rounding = #tile<rounding rna>} : !tile.tile<128x64xf32> -> !tile.tile<128x64xtf32>
  %cb = tile.cast %tb {rounding = #tile<rounding rna>} : !tile.tile<64x128xf32> -> !tile.tile<64x128xtf32>
  %r = tile.matmul %ca, %cb : !tile.tile<128x64xtf32>, !tile.tile<64x128xtf32> -> !tile.tile<128x128xf32>
  tile.store %r, %d[0, 0] : !tile.tile<128x128xf32>, memref<128x128xf32>
  func.return
}
