// RUN: %tilemma-opt %s | filecheck %s
// RUN: %tilemma-opt %s | %tilemma-opt | filecheck %s
// RUN: %tilemma-opt %s --print-op-generic | %tilemma-opt | filecheck %s

// CHECK-LABEL: func.func @gemm_f16
// CHECK-SAME:  (%a: memref<37x53xf16>, %b: memref<53x91xf16>, %c: memref<37x91xf32>)
func.func @gemm_f16(%a: memref<37x53xf16>, %b: memref<53x91xf16>, %c: memref<37x91xf32>) {
  // CHECK-NEXT: %ta = tile.load %a[0, 0] : memref<37x53xf16> -> !tile.tile<37x53xf16>
  %ta = tile.load %a[0, 0] : memref<37x53xf16> -> !tile.tile<37x53xf16>
  // CHECK-NEXT: %tb = tile.load %b[0, 0] : memref<53x91xf16> -> !tile.tile<53x91xf16>
  %tb = tile.load %b[0, 0] : memref<53x91xf16> -> !tile.tile<53x91xf16>
  // CHECK-NEXT: %z = tile.constant 0.0 : !tile.tile<37x91xf32>
  %z = tile.constant 0.0 : !tile.tile<37x91xf32>
  // CHECK-NEXT: %r = tile.mma %ta, %tb, %z : !tile.tile<37x53xf16>, !tile.tile<53x91xf16>, !tile.tile<37x91xf32> -> !tile.tile<37x91xf32>
  %r = tile.mma %ta, %tb, %z : !tile.tile<37x53xf16>, !tile.tile<53x91xf16>, !tile.tile<37x91xf32> -> !tile.tile<37x91xf32>
  // CHECK-NEXT: %h = tile.matmul %ta, %tb : !tile.tile<37x53xf16>, !tile.tile<53x91xf16> -> !tile.tile<37x91xf16>
  %h = tile.matmul %ta, %tb : !tile.tile<37x53xf16>, !tile.tile<53x91xf16> -> !tile.tile<37x91xf16>
  // CHECK-NEXT: tile.store %r, %c[0, 0] : !tile.tile<37x91xf32>, memref<37x91xf32>
  tile.store %r, %c[0, 0] : !tile.tile<37x91xf32>, memref<37x91xf32>
  func.return
}

// CHECK-LABEL: func.func @every_element_type
func.func @every_element_type(%m: memref<64x64xf32>) {
  // CHECK: !tile.tile<16x16xf16>
  %f16 = tile.constant 1.5 : !tile.tile<16x16xf16>
  // CHECK: !tile.tile<16x16xbf16>
  %bf16 = tile.constant -2.0 : !tile.tile<16x16xbf16>
  // CHECK: !tile.tile<16x16xtf32>
  %tf32 = tile.constant 0.25 : !tile.tile<16x16xtf32>
  // CHECK: !tile.tile<16x16xf32>
  %f32 = tile.constant 3.0 : !tile.tile<16x16xf32>
  // CHECK: !tile.tile<16x16xf64>
  %f64 = tile.constant 3.0 : !tile.tile<16x16xf64>
  // CHECK: tile.constant -7 : !tile.tile<16x16xsi8>
  %si8 = tile.constant -7 : !tile.tile<16x16xsi8>
  // CHECK: !tile.tile<16x16xui8>
  %ui8 = tile.constant 200 : !tile.tile<16x16xui8>
  // CHECK: !tile.tile<16x16xsi4>
  %si4 = tile.constant -3 : !tile.tile<16x16xsi4>
  // CHECK: !tile.tile<16x16xui4>
  %ui4 = tile.constant 9 : !tile.tile<16x16xui4>
  // CHECK: !tile.tile<16x128xi1>
  %b1 = tile.constant 1 : !tile.tile<16x128xi1>
  // CHECK: !tile.tile<16x16xf8E4M3FN>
  %e4m3 = tile.constant 0.5 : !tile.tile<16x16xf8E4M3FN>
  // CHECK: !tile.tile<16x16xf8E5M2>
  %e5m2 = tile.constant 0.5 : !tile.tile<16x16xf8E5M2>
  // CHECK: !tile.tile<16x16xf6E3M2FN>
  %e3m2 = tile.constant 0.5 : !tile.tile<16x16xf6E3M2FN>
  // CHECK: !tile.tile<16x16xf6E2M3FN>
  %e2m3 = tile.constant 0.5 : !tile.tile<16x16xf6E2M3FN>
  // CHECK: !tile.tile<16x16xf4E2M1FN>
  %e2m1 = tile.constant 0.5 : !tile.tile<16x16xf4E2M1FN>
  // CHECK: !tile.tile<16x2xf8E8M0FNU>
  %ue8m0 = tile.constant 1.0 : !tile.tile<16x2xf8E8M0FNU>
  // CHECK: !tile.tile<16x4x!tile.ue4m3>
  %ue4m3 = tile.constant 1.0 : !tile.tile<16x4x!tile.ue4m3>
  // CHECK: tile.cast %f32 {rounding = #tile<rounding rna>} : !tile.tile<16x16xf32> -> !tile.tile<16x16xtf32>
  %c = tile.cast %f32 {rounding = #tile<rounding rna>} : !tile.tile<16x16xf32> -> !tile.tile<16x16xtf32>
  func.return
}

// CHECK-LABEL: func.func @batched_broadcast
func.func @batched_broadcast(%a: memref<3x16x32xbf16>, %b: memref<1x32x8xbf16>, %c: memref<3x16x8xf32>) {
  %ta = tile.load %a[0, 0, 0] : memref<3x16x32xbf16> -> !tile.tile<3x16x32xbf16>
  %tb = tile.load %b[0, 0, 0] : memref<1x32x8xbf16> -> !tile.tile<1x32x8xbf16>
  // CHECK: tile.matmul %ta, %tb : !tile.tile<3x16x32xbf16>, !tile.tile<1x32x8xbf16> -> !tile.tile<3x16x8xf32>
  %r = tile.matmul %ta, %tb : !tile.tile<3x16x32xbf16>, !tile.tile<1x32x8xbf16> -> !tile.tile<3x16x8xf32>
  // CHECK: tile.store %r, %c[0, 0, 0]
  tile.store %r, %c[0, 0, 0] : !tile.tile<3x16x8xf32>, memref<3x16x8xf32>
  func.return
}

// CHECK-LABEL: func.func @integer_and_bits
func.func @integer_and_bits(%a8: memref<16x32xsi8>, %b8: memref<32x8xui8>, %a1: memref<16x256xi1>, %b1: memref<256x8xi1>, %c: memref<16x8xsi32>) {
  %ta = tile.load %a8[0, 0] : memref<16x32xsi8> -> !tile.tile<16x32xsi8>
  %tb = tile.load %b8[0, 0] : memref<32x8xui8> -> !tile.tile<32x8xui8>
  // CHECK: tile.matmul %ta, %tb {satfinite} : !tile.tile<16x32xsi8>, !tile.tile<32x8xui8> -> !tile.tile<16x8xsi32>
  %r = tile.matmul %ta, %tb {satfinite} : !tile.tile<16x32xsi8>, !tile.tile<32x8xui8> -> !tile.tile<16x8xsi32>
  %x = tile.load %a1[0, 0] : memref<16x256xi1> -> !tile.tile<16x256xi1>
  %y = tile.load %b1[0, 0] : memref<256x8xi1> -> !tile.tile<256x8xi1>
  // CHECK: tile.mma %x, %y, %r {popc = #tile<popc xor>}
  %p = tile.mma %x, %y, %r {popc = #tile<popc xor>} : !tile.tile<16x256xi1>, !tile.tile<256x8xi1>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
  tile.store %p, %c[0, 0] : !tile.tile<16x8xsi32>, memref<16x8xsi32>
  func.return
}
