// An 8-bit N-major B transposed first (`tile-transpose-first`): s8 with A M-major and B N-major on
// sm_90a, 512 rows and up, where tile-plan would transpose B in shared memory. The kernel gains B's
// K-major workspace as its last argument and loads B from it; `tile.transpose_first` names the two
// arguments. Fewer rows (@few) and a K-major B (@kmajor) are left alone. warp-to-ptx then puts the
// transposing kernel in the module and names it in the GEMM entry's prologue.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-transpose-first' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{tune-cache=""},warp-swizzle-shared,cse,warp-to-ptx' | filecheck %s --check-prefix=ENTRY
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{tune-cache=""},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @both(%a: memref<4096x512xsi8, strided<[1, 4096]>>, %b: memref<512x1024xsi8>, %d: memref<4096x1024xsi32>, %transposed_b: memref<512x1024xsi8, strided<[1, 512]>>)
// CHECK-SAME:    tile.transpose_first = array<i64: 1, 3>
// CHECK:         tile.load %transposed_b[0, 0] : memref<512x1024xsi8, strided<[1, 512]>> -> !tile.tile<512x1024xsi8>
// CHECK-LABEL: func.func @few(%a: memref<256x512xsi8, strided<[1, 256]>>, %b: memref<512x1024xsi8>, %d: memref<256x1024xsi32>)
// CHECK-NOT:     transpose_first
// CHECK:         tile.load %b[0, 0]
// CHECK-LABEL: func.func @kmajor(
// CHECK-NOT:     transpose_first
// CHECK:         func.return

// ENTRY:       ptx.entry "both_transpose_b" [".u64 p_b", ".u64 p_transposed_b"]
// ENTRY:       ptx.entry "both" [".u64 p_a", ".u64 p_b", ".u64 p_d", ".u64 p_transposed_b"]
// ENTRY-SAME:    role = ["transposed_b"]
// ENTRY-SAME:    prologue = [{entry = "both_transpose_b", grid = array<i64: 8, 4, 1>, block = array<i64: 256, 1, 1>, args = array<i64: 1, 3>}]
// ENTRY-NOT:   prologue
// ENTRY:       ptx.entry "few"

// PTX-LABEL: .visible .entry both_transpose_b(
// PTX:         .shared .align 16 .b8 transpose_tile[16384];
// PTX:         ld.global.v4.u32
// PTX:         bar.sync 0;
// PTX:         prmt.b32 {{.*}}, 20800;
// PTX:         st.global.v4.u32
// PTX-LABEL: .visible .entry both(
// PTX:         wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k32.s32.s8.s8

func.func @both(%a: memref<4096x512xsi8, strided<[1, 4096]>>, %b: memref<512x1024xsi8>, %d: memref<4096x1024xsi32>) {
  %ta = tile.load %a[0, 0] : memref<4096x512xsi8, strided<[1, 4096]>> -> !tile.tile<4096x512xsi8>
  %tb = tile.load %b[0, 0] : memref<512x1024xsi8> -> !tile.tile<512x1024xsi8>
  %zero = tile.constant 0 : !tile.tile<4096x1024xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<4096x512xsi8>, !tile.tile<512x1024xsi8>, !tile.tile<4096x1024xsi32> -> !tile.tile<4096x1024xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<4096x1024xsi32>, memref<4096x1024xsi32>
  func.return
}

func.func @few(%a: memref<256x512xsi8, strided<[1, 256]>>, %b: memref<512x1024xsi8>, %d: memref<256x1024xsi32>) {
  %ta = tile.load %a[0, 0] : memref<256x512xsi8, strided<[1, 256]>> -> !tile.tile<256x512xsi8>
  %tb = tile.load %b[0, 0] : memref<512x1024xsi8> -> !tile.tile<512x1024xsi8>
  %zero = tile.constant 0 : !tile.tile<256x1024xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<256x512xsi8>, !tile.tile<512x1024xsi8>, !tile.tile<256x1024xsi32> -> !tile.tile<256x1024xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<256x1024xsi32>, memref<256x1024xsi32>
  func.return
}

func.func @kmajor(%a: memref<4096x512xsi8, strided<[1, 4096]>>, %b: memref<512x1024xsi8, strided<[1, 512]>>, %d: memref<4096x1024xsi32>) {
  %ta = tile.load %a[0, 0] : memref<4096x512xsi8, strided<[1, 4096]>> -> !tile.tile<4096x512xsi8>
  %tb = tile.load %b[0, 0] : memref<512x1024xsi8, strided<[1, 512]>> -> !tile.tile<512x1024xsi8>
  %zero = tile.constant 0 : !tile.tile<4096x1024xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<4096x512xsi8>, !tile.tile<512x1024xsi8>, !tile.tile<4096x1024xsi32> -> !tile.tile<4096x1024xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<4096x1024xsi32>, memref<4096x1024xsi32>
  func.return
}
