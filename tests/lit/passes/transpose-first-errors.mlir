// A `tile.transpose_first` written by hand that does not name B and its K-major copy is refused at
// the kernel by tile-distribute; transpose-first=1 where B cannot be transposed first, at the mma.
// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics -p 'tile-select-mma{sm=90a},tile-plan{tune-cache=""},tile-distribute' | filecheck %s
// RUN: not %tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-transpose-first{transpose-first=1}' 2>&1 | filecheck %s --check-prefix=FORCED

// CHECK: error: func.func: tile.transpose_first = [1, 7]: expected the indices of an argument holding a K x N B and of its K-major copy
func.func @out_of_range(%a: memref<64x64xsi8, strided<[1, 64]>>, %b: memref<64x64xsi8>, %d: memref<64x64xsi32>) attributes {tile.transpose_first = array<i64: 1, 7>} {
  %ta = tile.load %a[0, 0] : memref<64x64xsi8, strided<[1, 64]>> -> !tile.tile<64x64xsi8>
  %tb = tile.load %b[0, 0] : memref<64x64xsi8> -> !tile.tile<64x64xsi8>
  %zero = tile.constant 0 : !tile.tile<64x64xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<64x64xsi8>, !tile.tile<64x64xsi8>, !tile.tile<64x64xsi32> -> !tile.tile<64x64xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<64x64xsi32>, memref<64x64xsi32>
  func.return
}

// -----

// CHECK: error: func.func: tile.transpose_first = [1, 2]
func.func @not_a_copy(%a: memref<64x64xsi8, strided<[1, 64]>>, %b: memref<64x64xsi8>, %d: memref<64x64xsi32>) attributes {tile.transpose_first = array<i64: 1, 2>} {
  %ta = tile.load %a[0, 0] : memref<64x64xsi8, strided<[1, 64]>> -> !tile.tile<64x64xsi8>
  %tb = tile.load %b[0, 0] : memref<64x64xsi8> -> !tile.tile<64x64xsi8>
  %zero = tile.constant 0 : !tile.tile<64x64xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<64x64xsi8>, !tile.tile<64x64xsi8>, !tile.tile<64x64xsi32> -> !tile.tile<64x64xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<64x64xsi32>, memref<64x64xsi32>
  func.return
}

// -----

// (tile-distribute: a kernel as any other)
// FORCED: error: tile.mma: transpose-first: B cannot be transposed first: B is K-major already
func.func @k_major(%a: memref<64x64xsi8, strided<[1, 64]>>, %b: memref<64x64xsi8, strided<[1, 64]>>, %d: memref<64x64xsi32>) {
  %ta = tile.load %a[0, 0] : memref<64x64xsi8, strided<[1, 64]>> -> !tile.tile<64x64xsi8>
  %tb = tile.load %b[0, 0] : memref<64x64xsi8, strided<[1, 64]>> -> !tile.tile<64x64xsi8>
  %zero = tile.constant 0 : !tile.tile<64x64xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<64x64xsi8>, !tile.tile<64x64xsi8>, !tile.tile<64x64xsi32> -> !tile.tile<64x64xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<64x64xsi32>, memref<64x64xsi32>
  func.return
}
