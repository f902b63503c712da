// Numbers that do not fit 32 bits: a row stride of 2^32 elements is multiplied in 64 bits (it was
// written into a 32-bit mul.wide immediate, which ptxas silently truncated to 0), and a tile of
// 2^31 or more elements along a dimension is refused with a located error.
// RUN: not %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp,warp-split-tf32,cse,warp-to-ptx' -t ptx 2>&1 | filecheck %s
// RUN: not %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp,warp-split-tf32,cse,warp-to-ptx' -t ptx 2>&1 | filecheck %s --check-prefix=BIG

// CHECK-LABEL: .visible .entry wide_rows(
// CHECK-NOT:   mul.wide.u32 %rd{{[0-9]+}}, %r{{[0-9]+}}, 4294967296;
// CHECK:       mul.lo.u64 %rd{{[0-9]+}}, %rd{{[0-9]+}}, 4294967296;
func.func @wide_rows(%a: memref<16x4294967296xf16>, %b: memref<16x8xf16>, %d: memref<16x8xf32>) {
  %ta = tile.load %a[0, 0] : memref<16x4294967296xf16> -> !tile.tile<16x16xf16>
  %tb = tile.load %b[0, 0] : memref<16x8xf16> -> !tile.tile<16x8xf16>
  %z = tile.constant 0.0 : !tile.tile<16x8xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<16x16xf16>, !tile.tile<16x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  tile.store %td, %d[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32>
  func.return
}

// -----
// BIG: large-sizes.mlir:[[# @LINE + 5]]:3
// BIG: K = 2147483648: tiles of 2^31 or more elements along a dimension are not supported (coordinates are 32-bit)
func.func @long_k(%a: memref<16x2147483648xf16>, %b: memref<2147483648x8xf16>, %d: memref<16x8xf16>) {
  %ta = tile.load %a[0, 0] : memref<16x2147483648xf16> -> !tile.tile<16x2147483648xf16>
  %tb = tile.load %b[0, 0] : memref<2147483648x8xf16> -> !tile.tile<2147483648x8xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<16x2147483648xf16>, !tile.tile<2147483648x8xf16> -> !tile.tile<16x8xf16>
  tile.store %td, %d[0, 0] : !tile.tile<16x8xf16>, memref<16x8xf16>
  func.return
}
