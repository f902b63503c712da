// tile-plan writes each kernel's schedule once, as #warp.schedule on the func.func; the IR is
// otherwise left as it was. Input: tile IR after tile-select-mma.
// RUN: %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90}' -o %t.selected.mlir
// RUN: %tilemma-opt %t.selected.mlir --split-input-file -p tile-plan | filecheck %s
// RUN: not %tilemma-opt %t.selected.mlir --split-input-file -p 'tile-plan{warps=2x1 warp-tile=2x2 stages=4 stage-k=32}' 2>&1 | filecheck %s --check-prefix=FORCED
// RUN: not %tilemma-opt %t.selected.mlir --split-input-file -p 'tile-plan{stages=3}' 2>&1 | filecheck %s --check-prefix=ROW
// RUN: %tilemma-opt %t.selected.mlir --split-input-file -p 'tile-plan{stages=0}' | filecheck %s --check-prefix=SIMPLE
// RUN: not %tilemma-opt %t.selected.mlir --split-input-file -p 'tile-plan{warps=2x4 warp-tile=4x8 stages=5 stage-k=256}' 2>&1 | filecheck %s --check-prefix=SHARED
// RUN: not %tilemma-opt %t.selected.mlir --split-input-file -p 'tile-plan{stage-k=16}' 2>&1 | filecheck %s --check-prefix=STAGEK
// RUN: not %tilemma-opt %s --split-input-file -p 'tile-plan' 2>&1 | filecheck %s --check-prefix=ORDER

// f16 with the defaults: staged, interleaved reads, CTAs in groups of 8 tile rows; the
// default 4x8 warp tile's rows halved while the grid is under a wave.
// CHECK-LABEL: func.func @f16
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 2x8, stages = 3, stage_k = 64, reads = interleaved, group_m = 8>
// CHECK:       tile.mma
// FORCED-LABEL: func.func @f16
// FORCED-SAME: warp.schedule = #warp.schedule<warps = 2x1, warp_tile = 2x2, stages = 4, stage_k = 32, reads = interleaved, group_m = 8>
// SIMPLE-LABEL: func.func @f16
// SIMPLE-SAME: warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 2x4, stages = 0>
// SHARED:      error: tile.mma: 5 stages of K 256 with a 128x256 CTA tile need 983040 bytes of shared memory
// ORDER:       error: tile.matmul: run tile-select-mma before tile-plan
func.func @f16(%a: memref<128x256xf16>, %b: memref<256x128xf16>, %d: memref<128x128xf16>) {
  %ta = tile.load %a[0, 0] : memref<128x256xf16> -> !tile.tile<128x256xf16>
  %tb = tile.load %b[0, 0] : memref<256x128xf16> -> !tile.tile<256x128xf16>
  %td = tile.matmul %ta, %tb : !tile.tile<128x256xf16>, !tile.tile<256x128xf16> -> !tile.tile<128x128xf16>
  tile.store %td, %d[0, 0] : !tile.tile<128x128xf16>, memref<128x128xf16>
  func.return
}

// -----

// s4 on sm_90 (select-mma picks the s8 mma): staged as stored and widened to that instruction;
// a 4-bit fragment read covers K 64, so a forced stage K of 16 or 32 is refused.
// CHECK-LABEL: func.func @s4
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 2x8, stages = 4, stage_k = 128, reads = ahead, group_m = 8, widen = #warp.variant<m16n8k32, s32, s8, s8, s32>>
// FORCED:      error: tile.mma: stage-k 32 is not a multiple of the fragments' K (64)
// STAGEK:      error: tile.mma: stage-k 16 is not a multiple of the fragments' K (64)
func.func @s4(%a: memref<128x256xsi4>, %b: memref<256x128xsi4, strided<[1, 256]>>, %d: memref<128x128xsi32>) {
  %ta = tile.load %a[0, 0] : memref<128x256xsi4> -> !tile.tile<128x256xsi4>
  %tb = tile.load %b[0, 0] : memref<256x128xsi4, strided<[1, 256]>> -> !tile.tile<256x128xsi4>
  %zero = tile.constant 0 : !tile.tile<128x128xsi32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<128x256xsi4>, !tile.tile<256x128xsi4>, !tile.tile<128x128xsi32> -> !tile.tile<128x128xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<128x128xsi32>, memref<128x128xsi32>
  func.return
}

// -----

// An 8-bit B stored row-major is staged by the transposing fill; where N is not a multiple of 4
// (here 62: a 32-bit word of a row would straddle the tile's edge) its bytes are loaded one by one
// (gather = b too: `warp.fill_load {by_element}`). The fill itself: tests/lit/passes/staged-8bit.mlir.
// CHECK-LABEL: func.func @s8_row_b
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x1, warp_tile = 2x8, stages = 4, stage_k = 64, {{.*}}fill = b, gather = b>
func.func @s8_row_b(%a: memref<64x64xsi8>, %b: memref<64x62xsi8, strided<[64, 1]>>, %d: memref<64x62xsi32>) {
  %ta = tile.load %a[0, 0] : memref<64x64xsi8> -> !tile.tile<64x64xsi8>
  %tb = tile.load %b[0, 0] : memref<64x62xsi8, strided<[64, 1]>> -> !tile.tile<64x62xsi8>
  %td = tile.matmul %ta, %tb : !tile.tile<64x64xsi8>, !tile.tile<64x62xsi8> -> !tile.tile<64x62xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<64x62xsi32>, memref<64x62xsi32>
  func.return
}

// -----

// A 4-bit B stored row-major is filled a word (8 elements) at a time; with N = 44 its rows are
// not 4-byte aligned and a word would straddle the edge, so the simple schedule, and forcing
// stages is refused with the reason.
// CHECK-LABEL: func.func @s4_row_b
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 2x4, stages = 0>
// ROW:         error: tile.mma: stages=3: this kernel cannot be staged through shared memory: 4-bit B must be K-major
func.func @s4_row_b(%a: memref<64x128xsi4>, %b: memref<128x44xsi4>, %d: memref<64x44xsi32>) {
  %ta = tile.load %a[0, 0] : memref<64x128xsi4> -> !tile.tile<64x128xsi4>
  %tb = tile.load %b[0, 0] : memref<128x44xsi4> -> !tile.tile<128x44xsi4>
  %z = tile.constant 0 : !tile.tile<64x44xsi32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<64x128xsi4>, !tile.tile<128x44xsi4>, !tile.tile<64x44xsi32> -> !tile.tile<64x44xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<64x44xsi32>, memref<64x44xsi32>
  func.return
}
