// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics | filecheck %s
// warp.load_meta, warp.copy_meta_async, warp.load_meta_shared and the sparse forms of warp.ldmatrix, each broken once.

func.func @not_words(%m: memref<1x64xf32>, %i: index) {
  %e = warp.load_meta %m[%i, %i, %i] : memref<1x64xf32> -> !warp.frag<meta, i32, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp::ordered_metadata">>
  func.return
}
// CHECK: load-meta-errors.mlir:[[# @LINE - 3]]:3: error: warp.load_meta: reads a [batch x] tiles x words ui32 memref, got memref<1x64xf32>

// -----
func.func @three(%m: memref<1x64xui32>, %i: index) {
  %e:3 = warp.load_meta %m[%i, %i, %i] : memref<1x64xui32> -> !warp.frag<meta, i32, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp::ordered_metadata">>, !warp.frag<meta, i32, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp::ordered_metadata">>, !warp.frag<meta, i32, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp::ordered_metadata">>
  func.return
}
// CHECK: warp.load_meta: 1, 2 or 4 metadata fragments of one type (a v1/v2/v4 load)

// -----
func.func @other_shape(%m: memref<1x64xui32>, %i: index) {
  %e = warp.load_meta %m[%i, %i, %i] : memref<1x64xui32> -> !warp.frag<meta, i32, #warp.variant<m16n8k16, f32, f16, f16, f32, sparse = "sp::ordered_metadata">>
  func.return
}
// CHECK: warp.load_meta: loads metadata of the 16-bit m16n8k32 mma.sp, not meta of mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// -----
func.func @row_groups(%m: memref<1x32xui32>, %i: index) {
  %e = warp.load_meta %m[%i, %i, %i] : memref<1x32xui32> -> !warp.frag<meta, i32, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp::ordered_metadata">>
  func.return
}
// CHECK: warp.load_meta: a metadata row holds groups of 64 words, got memref<1x32xui32>

// -----
func.func @sparse_b_pair(%s: memref<3x64x64xf16, 3 : i64>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %b:2 = warp.ldmatrix %s[%i, %i, %i] after %t {offsets = array<i64: 0, 0>, trans} : memref<3x64x64xf16, 3 : i64> -> !warp.frag<b, f16, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp::ordered_metadata">>, !warp.frag<b, f16, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp::ordered_metadata">>
  func.return
}
// CHECK: warp.ldmatrix: sparse m16n8k32 fragments are one per .x4, of 16-bit elements

// -----
func.func @meta_stage_steps(%m: memref<1x64xui32>, %s: memref<4x32x3xui32, 3 : i64>, %i: index) {
  warp.copy_meta_async %m[%i, %i, %i], %s[%i] {threads = 128 : i64} : memref<1x64xui32>, memref<4x32x3xui32, 3 : i64>
  func.return
}
// CHECK: load-meta-errors.mlir:[[# @LINE - 3]]:3: error: warp.copy_meta_async destination: 16 rows a tile and 1, 2 or 4 k32 steps a stage (one cp.async of a lane's words), not 32 x 3

// -----
func.func @meta_stage_global(%m: memref<1x64xui32>, %s: memref<4x32x2xui32>, %i: index) {
  warp.copy_meta_async %m[%i, %i, %i], %s[%i] {threads = 128 : i64} : memref<1x64xui32>, memref<4x32x2xui32>
  func.return
}
// CHECK: warp.copy_meta_async destination must be a row-major 3-d shared ui32 memref (stages x rows x steps)

// -----
func.func @meta_read_steps(%s: memref<4x32x2xui32, 3 : i64>, %i: index) {
  %t = warp.async_wait {pending = 0 : i64}
  %e = warp.load_meta_shared %s[%i, %i] after %t : memref<4x32x2xui32, 3 : i64> -> !warp.frag<meta, i32, #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp::ordered_metadata">>
  func.return
}
// CHECK: warp.load_meta_shared: one fragment for each of the stage's 2 k32 steps
