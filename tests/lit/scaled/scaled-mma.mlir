// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics -p 'tile-select-mma{sm=120a}' | filecheck %s
// Block scaling: every (scale type, block, operand types) of PTX Table 36 maps to one .kind.

// CHECK-LABEL: func.func @mxf4nvf4
// CHECK: variant = #warp.variant<m16n8k64, f32, e2m1, e2m1, f32, block_scale, kind = "mxf4nvf4", scale_vec = "4X", stype = "ue4m3">
func.func @mxf4nvf4(%a: !tile.tile<16x64xf4E2M1FN>, %b: !tile.tile<64x8xf4E2M1FN>, %c: !tile.tile<16x8xf32>, %sa: !tile.tile<16x4x!tile.ue4m3>, %sb: !tile.tile<4x8x!tile.ue4m3>) {
  %r = tile.scaled_mma %a, %b, %c, %sa, %sb {block = 16} : !tile.tile<16x64xf4E2M1FN>, !tile.tile<64x8xf4E2M1FN>, !tile.tile<16x8xf32>, !tile.tile<16x4x!tile.ue4m3>, !tile.tile<4x8x!tile.ue4m3> -> !tile.tile<16x8xf32>
  func.return
}

// -----
// CHECK-LABEL: func.func @mxf4
// CHECK: variant = #warp.variant<m16n8k64, f32, e2m1, e2m1, f32, block_scale, kind = "mxf4", scale_vec = "2X", stype = "ue8m0">
// CHECK: variant = #warp.variant<m16n8k32, f32, e3m2, e2m1, f32, block_scale, kind = "mxf8f6f4", scale_vec = "1X", stype = "ue8m0">
func.func @mxf4(%a: !tile.tile<16x64xf4E2M1FN>, %b: !tile.tile<64x8xf4E2M1FN>, %c: !tile.tile<16x8xf32>, %sa: !tile.tile<16x2xf8E8M0FNU>, %sb: !tile.tile<2x8xf8E8M0FNU>, %x: !tile.tile<16x64xf6E3M2FN>) {
  %r = tile.scaled_mma %a, %b, %c, %sa, %sb {block = 32} : !tile.tile<16x64xf4E2M1FN>, !tile.tile<64x8xf4E2M1FN>, !tile.tile<16x8xf32>, !tile.tile<16x2xf8E8M0FNU>, !tile.tile<2x8xf8E8M0FNU> -> !tile.tile<16x8xf32>
  %s = tile.scaled_mma %x, %b, %c, %sa, %sb {block = 32} : !tile.tile<16x64xf6E3M2FN>, !tile.tile<64x8xf4E2M1FN>, !tile.tile<16x8xf32>, !tile.tile<16x2xf8E8M0FNU>, !tile.tile<2x8xf8E8M0FNU> -> !tile.tile<16x8xf32>
  func.return
}

// -----
// CHECK-LABEL: func.func @sparse_mxf8f6f4
// CHECK: variant = #warp.variant<m16n8k64, f32, e4m3, e2m3, f32, block_scale, sparse = "sp::ordered_metadata", kind = "mxf8f6f4", scale_vec = "1X", stype = "ue8m0">
func.func @sparse_mxf8f6f4(%a: !tile.tile<16x128xf8E4M3FN>, %b: !tile.tile<128x8xf6E2M3FN>, %c: !tile.tile<16x8xf32>, %sa: !tile.tile<16x2xf8E8M0FNU>, %sb: !tile.tile<2x8xf8E8M0FNU>) {
  %s = tile.compress %a {prune} : !tile.tile<16x128xf8E4M3FN> -> !tile.sparse<16x128xf8E4M3FN>
  %r = tile.scaled_mma %s, %b, %c, %sa, %sb {block = 64} : !tile.sparse<16x128xf8E4M3FN>, !tile.tile<128x8xf6E2M3FN>, !tile.tile<16x8xf32>, !tile.tile<16x2xf8E8M0FNU>, !tile.tile<2x8xf8E8M0FNU> -> !tile.tile<16x8xf32>
  func.return
}

// -----
func.func @ue4m3_needs_block_16(%a: !tile.tile<16x64xf4E2M1FN>, %b: !tile.tile<64x8xf4E2M1FN>, %c: !tile.tile<16x8xf32>, %sa: !tile.tile<16x2x!tile.ue4m3>, %sb: !tile.tile<2x8x!tile.ue4m3>) {
  %r = tile.scaled_mma %a, %b, %c, %sa, %sb {block = 32} : !tile.tile<16x64xf4E2M1FN>, !tile.tile<64x8xf4E2M1FN>, !tile.tile<16x8xf32>, !tile.tile<16x2x!tile.ue4m3>, !tile.tile<2x8x!tile.ue4m3> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: tile.scaled_mma: scale type ue4m3 with block 32 is not a valid block scaling for a dense A (PTX Table 36: f8E8M0FNU with block 32, f8E8M0FNU with block 16, ue4m3 with block 16)

// -----
func.func @fp8_in_blocks_of_16(%a: !tile.tile<16x64xf8E4M3FN>, %b: !tile.tile<64x8xf8E4M3FN>, %c: !tile.tile<16x8xf32>, %sa: !tile.tile<16x4x!tile.ue4m3>, %sb: !tile.tile<4x8x!tile.ue4m3>) {
  %r = tile.scaled_mma %a, %b, %c, %sa, %sb {block = 16} : !tile.tile<16x64xf8E4M3FN>, !tile.tile<64x8xf8E4M3FN>, !tile.tile<16x8xf32>, !tile.tile<16x4x!tile.ue4m3>, !tile.tile<4x8x!tile.ue4m3> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: tile.scaled_mma: left operand f8E4M3FN cannot be block-scaled by ue4m3 in blocks of 16 (PTX Table 36 allows f4E2M1FN)

// -----
func.func @scale_shape(%a: !tile.tile<16x64xf4E2M1FN>, %b: !tile.tile<64x8xf4E2M1FN>, %c: !tile.tile<16x8xf32>, %sa: !tile.tile<16x3xf8E8M0FNU>, %sb: !tile.tile<2x8xf8E8M0FNU>) {
  %r = tile.scaled_mma %a, %b, %c, %sa, %sb {block = 32} : !tile.tile<16x64xf4E2M1FN>, !tile.tile<64x8xf4E2M1FN>, !tile.tile<16x8xf32>, !tile.tile<16x3xf8E8M0FNU>, !tile.tile<2x8xf8E8M0FNU> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: tile.scaled_mma: scale_a must be 16x2 (one scale per 32 elements of K=64), got 16x3

// -----
func.func @f16_accumulator(%a: !tile.tile<16x32xf8E4M3FN>, %b: !tile.tile<32x8xf8E4M3FN>, %c: !tile.tile<16x8xf16>, %sa: !tile.tile<16x1xf8E8M0FNU>, %sb: !tile.tile<1x8xf8E8M0FNU>) {
  %r = tile.scaled_mma %a, %b, %c, %sa, %sb {block = 32} : !tile.tile<16x32xf8E4M3FN>, !tile.tile<32x8xf8E4M3FN>, !tile.tile<16x8xf16>, !tile.tile<16x1xf8E8M0FNU>, !tile.tile<1x8xf8E8M0FNU> -> !tile.tile<16x8xf16>
  func.return
}
// CHECK: tile.scaled_mma: block-scaled mma accumulates in f32, got f16

// -----
// ue8m0 in blocks of 16 is mxf4nvf4 .scale_vec::4X with .ue8m0, which needs PTX ISA 9.1.
func.func @needs_ptx_91(%a: !tile.tile<16x64xf4E2M1FN>, %b: !tile.tile<64x8xf4E2M1FN>, %c: !tile.tile<16x8xf32>, %sa: !tile.tile<16x4xf8E8M0FNU>, %sb: !tile.tile<4x8xf8E8M0FNU>) {
  %r = tile.scaled_mma %a, %b, %c, %sa, %sb {block = 16} : !tile.tile<16x64xf4E2M1FN>, !tile.tile<64x8xf4E2M1FN>, !tile.tile<16x8xf32>, !tile.tile<16x4xf8E8M0FNU>, !tile.tile<4x8xf8E8M0FNU> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: tile.scaled_mma: no mma.sync variant for e2m1 x e2m1 -> f32 scaled by ue8m0 on sm_120a with PTX 9.0: m16n8k64 .kind::mxf4nvf4: needs PTX ISA 9.1 or newer
