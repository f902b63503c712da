// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-tile-warps' | filecheck %s
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-tile-warps{warps=4x1 warp-tile=1x2}' | filecheck %s --check-prefix=OPT

// 37x91 with m16n8k16: warp tile 2x4 instructions (32x32), 2x2 warps (CTA 64x64), grid 2x1.
// CHECK-LABEL: func.func @odd
// CHECK: tiling = {instr = array<i64: 16, 8, 16>, warp_tile = array<i64: 2, 4>, warps = array<i64: 2, 2>, grid = array<i64: 2, 1, 1>, block = array<i64: 128, 1, 1>}
// OPT:   tiling = {instr = array<i64: 16, 8, 16>, warp_tile = array<i64: 1, 2>, warps = array<i64: 4, 1>, grid = array<i64: 6, 1, 1>, block = array<i64: 128, 1, 1>}
func.func @odd(%a: !tile.tile<37x53xf16>, %b: !tile.tile<53x91xf16>, %c: !tile.tile<37x91xf32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<37x53xf16>, !tile.tile<53x91xf16>, !tile.tile<37x91xf32> -> !tile.tile<37x91xf32>
  func.return
}

// -----
// A small tile gets one warp; the batch becomes grid z; m8n8k4 f16 runs as a 16x16x4 warp op.
// CHECK-LABEL: func.func @small_batched
// CHECK: tiling = {instr = array<i64: 16, 16, 4>, warp_tile = array<i64: 1, 1>, warps = array<i64: 1, 1>, grid = array<i64: 1, 1, 3>, block = array<i64: 32, 1, 1>}
func.func @small_batched(%a: !tile.tile<3x9x4xf16>, %b: !tile.tile<1x4x7xf16>, %c: !tile.tile<3x9x7xf32>) {
  %r = tile.mma %a, %b, %c {mma_shape = "m8n8k4"} : !tile.tile<3x9x4xf16>, !tile.tile<1x4x7xf16>, !tile.tile<3x9x7xf32> -> !tile.tile<3x9x7xf32>
  func.return
}

// -----
// 2048^3 s8: m16n8k32, CTA 64x64, a 32x32 grid.
// CHECK-LABEL: func.func @large
// CHECK: tiling = {instr = array<i64: 16, 8, 32>, warp_tile = array<i64: 2, 4>, warps = array<i64: 2, 2>, grid = array<i64: 32, 32, 1>, block = array<i64: 128, 1, 1>}
func.func @large(%a: !tile.tile<2048x2048xsi8>, %b: !tile.tile<2048x2048xsi8>, %c: !tile.tile<2048x2048xsi32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<2048x2048xsi8>, !tile.tile<2048x2048xsi8>, !tile.tile<2048x2048xsi32> -> !tile.tile<2048x2048xsi32>
  func.return
}
