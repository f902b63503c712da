// tile-transpose-product on tf32: a K-major A and an N-major B (row-major f32, each cast to tf32
// alike) from 512 rows are computed as D^T = B^T A^T, the casts carried with their tiles, so that
// tile-plan fills A' = B^T (M-major, a 128-row stage) and copies B' = A^T K-major; at 128 rows the
// product stays as written (configs.TRANSPOSED_MIN_ROWS).
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-transpose-product' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-transpose-product,tile-plan' | filecheck %s --check-prefix=PLAN

// CHECK-LABEL: func.func @brow(%a: memref<512x4096xf32>, %b: memref<4096x4096xf32>, %d: memref<512x4096xf32>)
// CHECK:       %[[AT:.*]] = tile.transpose_view %a : memref<512x4096xf32> -> memref<4096x512xf32, strided<[1, 4096]>>
// CHECK:       %[[LB:.*]] = tile.load %[[AT]][0, 0] : {{.*}} -> !tile.tile<4096x512xf32>
// CHECK:       %[[TB:.*]] = tile.cast %[[LB]] {rounding = #tile<rounding rna>} : !tile.tile<4096x512xf32> -> !tile.tile<4096x512xtf32>
// CHECK:       %[[BT:.*]] = tile.transpose_view %b : memref<4096x4096xf32> -> memref<4096x4096xf32, strided<[1, 4096]>>
// CHECK:       %[[LA:.*]] = tile.load %[[BT]][0, 0] : {{.*}} -> !tile.tile<4096x4096xf32>
// CHECK:       %[[TA:.*]] = tile.cast %[[LA]] {rounding = #tile<rounding rna>} : {{.*}} -> !tile.tile<4096x4096xtf32>
// CHECK:       %[[TD:.*]] = tile.mma %[[TA]], %[[TB]], {{.*}} -> !tile.tile<4096x512xf32>
// CHECK:       %[[DT:.*]] = tile.transpose_view %d : memref<512x4096xf32> -> memref<4096x512xf32, strided<[1, 4096]>>
// CHECK:       tile.store %[[TD]], %[[DT]][0, 0]

// CHECK-LABEL: func.func @decode
// CHECK-NOT:   tile.transpose_view
// CHECK:       tile.mma %ta, %tb

// PLAN-LABEL: func.func @brow
// PLAN-SAME:  fill = a, {{.*}}mma = wgmma
// PLAN-LABEL: func.func @decode
// PLAN-NOT:   fill = a,
func.func @brow(%a: memref<512x4096xf32>, %b: memref<4096x4096xf32>, %d: memref<512x4096xf32>) {
  %0 = tile.load %a[0, 0] : memref<512x4096xf32> -> !tile.tile<512x4096xf32>
  %ta = tile.cast %0 {rounding = #tile<rounding rna>} : !tile.tile<512x4096xf32> -> !tile.tile<512x4096xtf32>
  %1 = tile.load %b[0, 0] : memref<4096x4096xf32> -> !tile.tile<4096x4096xf32>
  %tb = tile.cast %1 {rounding = #tile<rounding rna>} : !tile.tile<4096x4096xf32> -> !tile.tile<4096x4096xtf32>
  %zero = tile.constant 0.0 : !tile.tile<512x4096xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<512x4096xtf32>, !tile.tile<4096x4096xtf32>, !tile.tile<512x4096xf32> -> !tile.tile<512x4096xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x4096xf32>, memref<512x4096xf32>
  func.return
}

func.func @decode(%a: memref<128x4096xf32>, %b: memref<4096x4096xf32>, %d: memref<128x4096xf32>) {
  %0 = tile.load %a[0, 0] : memref<128x4096xf32> -> !tile.tile<128x4096xf32>
  %ta = tile.cast %0 {rounding = #tile<rounding rna>} : !tile.tile<128x4096xf32> -> !tile.tile<128x4096xtf32>
  %1 = tile.load %b[0, 0] : memref<4096x4096xf32> -> !tile.tile<4096x4096xf32>
  %tb = tile.cast %1 {rounding = #tile<rounding rna>} : !tile.tile<4096x4096xf32> -> !tile.tile<4096x4096xtf32>
  %zero = tile.constant 0.0 : !tile.tile<128x4096xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<128x4096xtf32>, !tile.tile<4096x4096xtf32>, !tile.tile<128x4096xf32> -> !tile.tile<128x4096xf32>
  tile.store %td, %d[0, 0] : !tile.tile<128x4096xf32>, memref<128x4096xf32>
  func.return
}
