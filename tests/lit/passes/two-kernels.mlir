// Two kernels in one input: one PTX module, one header, two entries, which ptxas assembles.
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp,warp-split-tf32,cse,warp-to-ptx' -t ptx > %t.ptx
// RUN: filecheck %s < %t.ptx
// RUN: %tilemma compile %s --sm 90 | filecheck %s
// RUN: %if ptxas %{ ptxas -arch=sm_90 %t.ptx -o %t.cubin %}
// CHECK:     .version 9.0
// CHECK-NOT: .version
// CHECK:     .visible .entry first(
// CHECK-NOT: .version
// CHECK:     .visible .entry second(
// CHECK-NOT: .version
func.func @first(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %d: memref<16x8xf32>) {
  %ta = tile.load %a[0, 0] : memref<16x16xf16> -> !tile.tile<16x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x8xf16> -> !tile.tile<16x8xf16>
  %z = tile.constant 0.0 : !tile.tile<16x8xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<16x16xf16>, !tile.tile<16x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  tile.store %td, %d[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32>
  func.return
}
func.func @second(%a: memref<16x32xsi8>, %b: memref<32x8xsi8>, %d: memref<16x8xsi32>) {
  %ta = tile.load %a[0, 0] : memref<16x32xsi8> -> !tile.tile<16x32xsi8>
  %tb = tile.load %b[0, 0] : memref<32x8xsi8> -> !tile.tile<32x8xsi8>
  %td = tile.matmul %ta, %tb : !tile.tile<16x32xsi8>, !tile.tile<32x8xsi8> -> !tile.tile<16x8xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<16x8xsi32>, memref<16x8xsi32>
  func.return
}
