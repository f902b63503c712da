// 8-bit operands take the staged schedule when B is K-major (column-major): its copies transpose
// the K x N tile into an N x K stage (each shared row one contiguous run of a column of B), and
// both operands' fragments are plain ldmatrix .x4 (ldmatrix's .trans moves 16-bit elements: a
// row-major 8-bit B takes the transposing fill, below). stage-k is
// automatic: 128 bytes of K per shared row. Stages that do not fit in shared memory are refused.
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp' | filecheck %s
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{pair-bytes=false}' | filecheck %s --check-prefix=FILL
// RUN: not tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{stages=3}' 2>&1 | filecheck %s --check-prefix=ROW
// RUN: not tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{warps=2x4 warp-tile=4x8 stages=5 stage-k=128}' 2>&1 | filecheck %s --check-prefix=BIG

// CHECK-LABEL: func.func @s8_kmajor
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 4x8, stages = 3, stage_k = 128, reads = {{[a-z]+}}, group_m = 8
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x128x128xsi8, 3 : i64>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x128x128xsi8, 3 : i64>
// CHECK:       warp.copy_async %b[{{.*}}], %[[SB]][{{.*}}] {{.*}}vector = 16 : i64, transpose, in_bounds = array<i64: 1, 1>}
// CHECK:       warp.ldmatrix %[[SA]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>} : memref<3x128x128xsi8, 3 : i64> -> !warp.frag<a, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>
// CHECK:       warp.ldmatrix %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>} : memref<3x128x128xsi8, 3 : i64> -> !warp.frag<b, si8, {{.*}}>, !warp.frag<b, si8,
// BIG:         staged-8bit.mlir:[[# @LINE + 6]]:3
// BIG:         5 stages of K 128 with a 128x256 CTA tile need 245760 bytes of shared memory; a CTA has at most 232448
func.func @s8_kmajor(%a: memref<2048x2048xsi8>, %b: memref<2048x2048xsi8, strided<[1, 2048]>>, %d: memref<2048x2048xsi32>) {
  %ta = tile.load %a[0, 0] : memref<2048x2048xsi8> -> !tile.tile<2048x2048xsi8>
  %tb = tile.load %b[0, 0] : memref<2048x2048xsi8, strided<[1, 2048]>> -> !tile.tile<2048x2048xsi8>
  %z = tile.constant 0 : !tile.tile<2048x2048xsi32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<2048x2048xsi8>, !tile.tile<2048x2048xsi8>, !tile.tile<2048x2048xsi32> -> !tile.tile<2048x2048xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<2048x2048xsi32>, memref<2048x2048xsi32>
  func.return
}

// -----
// A row-major 8-bit B (N contiguous) is copied as stored and read by byte-pair ldmatrix .trans by
// default (pair_bytes = b; tests/lit/passes/pair-bytes.mlir); with pair-bytes=false (FILL) it is
// staged by the transposing fill (fill = b): its stage is
// K-major, as a K-major B's, and read with the same ldmatrix. warp-pipeline runs the fill's
// stores an iteration behind its loads: the prologue stores stages 0 .. S - 3 and carries stage
// S - 2's words into the loop, whose iterations first store the words the last one loaded (right
// after the barrier the prefetch put at the end of the iteration before), then load the next
// stage's. K is whole stages, so each stage lies wholly inside K or past it (`aligned` on K):
// its loads share one guard. A keeps its cp.async. (Its default: 4 stages of K 64; at 1024^3 the default CTAs leave
// SMs idle even with their rows halved, so they keep 128 rows and narrow to 64 columns:
// configs.SMALL_TILES, 4x2 warps of 2x4.)
// CHECK-LABEL: func.func @s8_rowmajor
// CHECK-SAME:  pair_bytes = b
// CHECK-NOT:   warp.fill_load %b
// FILL-LABEL: func.func @s8_rowmajor
// FILL-SAME:  warp.schedule = #warp.schedule<warps = 4x2, warp_tile = 2x4, stages = 4, stage_k = 64, {{.*}}fill = b
// FILL:       memref.alloc() {alignment = 128 : i64} : memref<4x128x64xsi8, 3 : i64>
// FILL-NEXT:  %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<4x64x64xsi8, 3 : i64>
// FILL:       %[[W0:.*]] = warp.fill_load %b
// FILL-NEXT:  warp.fill_store %[[W0]], %[[SB]]
// FILL:       %[[W1:.*]] = warp.fill_load %b
// FILL-NEXT:  warp.fill_store %[[W1]], %[[SB]]
// FILL:       %[[W2:.*]] = warp.fill_load %b
// FILL-NOT:   warp.fill_store
// FILL:       "gpu.barrier"() : () -> ()
// FILL:       scf.for {{.*}}%[[C:[0-9]+]] = %[[W2]], {{.*}} -> ({{.*}}!warp.staged<4>
// FILL:         warp.fill_store %[[C]], %[[SB]][%{{.*}}] {threads = 256 : i64} : !warp.staged<4>, memref<4x64x64xsi8, 3 : i64>
// FILL:         warp.copy_async %a
// FILL:         %[[W:.*]] = warp.fill_load %b[{{.*}}] {{{.*}}shape = array<i64: 64, 64>, threads = 256 : i64, aligned = array<i64: 1, 0>, transpose, in_bounds = array<i64: 0, 1>} : memref<1024x1024xsi8> -> !warp.staged<4>
// FILL:         warp.mma
// FILL:         warp.ldmatrix %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>} : memref<4x64x64xsi8, 3 : i64> -> !warp.frag<b, si8,
// FILL:         scf.yield {{.*}}, %[[W]], {{.*}} :
func.func @s8_rowmajor(%a: memref<1024x1024xsi8>, %b: memref<1024x1024xsi8>, %d: memref<1024x1024xsi32>) {
  %ta = tile.load %a[0, 0] : memref<1024x1024xsi8> -> !tile.tile<1024x1024xsi8>
  %tb = tile.load %b[0, 0] : memref<1024x1024xsi8> -> !tile.tile<1024x1024xsi8>
  %z = tile.constant 0 : !tile.tile<1024x1024xsi32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<1024x1024xsi8>, !tile.tile<1024x1024xsi8>, !tile.tile<1024x1024xsi32> -> !tile.tile<1024x1024xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<1024x1024xsi32>, memref<1024x1024xsi32>
  func.return
}

// -----
// ... and where N is not a multiple of 4 (a word of a row would straddle the tile's edge) the
// fill loads B a byte at a time (gather = b too: `by_element`), each byte zero past the edge,
// and transposes the words it packs as before.
// CHECK-LABEL: func.func @s8_rowmajor_ragged
// CHECK-SAME:  fill = b, gather = b
// CHECK:       warp.fill_load %b[{{.*}}] {{{.*}}transpose, by_element{{.*}}} : memref<64x62xsi8, strided<[64, 1]>> -> !warp.staged<
func.func @s8_rowmajor_ragged(%a: memref<64x64xsi8>, %b: memref<64x62xsi8, strided<[64, 1]>>, %d: memref<64x62xsi32>) {
  %ta = tile.load %a[0, 0] : memref<64x64xsi8> -> !tile.tile<64x64xsi8>
  %tb = tile.load %b[0, 0] : memref<64x62xsi8, strided<[64, 1]>> -> !tile.tile<64x62xsi8>
  %z = tile.constant 0 : !tile.tile<64x62xsi32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<64x64xsi8>, !tile.tile<64x62xsi8>, !tile.tile<64x62xsi32> -> !tile.tile<64x62xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<64x62xsi32>, memref<64x62xsi32>
  func.return
}

// -----
// A B with neither its rows nor its columns contiguous: the simple schedule, and forcing stages is
// refused with the reason.
// CHECK-LABEL: func.func @s8_strided_both
// CHECK-NOT:   memref.alloc
// CHECK:       warp.load %b
// ROW:         staged-8bit.mlir:[[# @LINE + 6]]:3
// ROW:         stages=3: this kernel cannot be staged through shared memory: B must have contiguous rows or columns
func.func @s8_strided_both(%a: memref<64x64xsi8>, %b: memref<64x64xsi8, strided<[128, 2]>>, %d: memref<64x64xsi32>) {
  %ta = tile.load %a[0, 0] : memref<64x64xsi8> -> !tile.tile<64x64xsi8>
  %tb = tile.load %b[0, 0] : memref<64x64xsi8, strided<[128, 2]>> -> !tile.tile<64x64xsi8>
  %z = tile.constant 0 : !tile.tile<64x64xsi32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<64x64xsi8>, !tile.tile<64x64xsi8>, !tile.tile<64x64xsi32> -> !tile.tile<64x64xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<64x64xsi32>, memref<64x64xsi32>
  func.return
}

// -----
// tf32 (f32 in memory, tile.cast rna): a K-major B stages the same way; ldmatrix reads the f32
// stage and rounds the fragments to tf32 in registers. 128 bytes of K: stage-k 32.
// CHECK-LABEL: func.func @tf32_kmajor
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 4x8, stages = 3, stage_k = 32, reads = {{[a-z]+}}, group_m = 8
// CHECK:       warp.copy_async %b[{{.*}}] {{.*}}transpose
// CHECK:       warp.ldmatrix {{.*}}rounding = #tile<rounding rna>{{.*}} : memref<3x128x32xf32, 3 : i64> -> !warp.frag<a, tf32, #warp.variant<m16n8k8, f32, tf32, tf32, f32>>
// CHECK:       warp.ldmatrix {{.*}}rounding = #tile<rounding rna>{{.*}} : memref<3x128x32xf32, 3 : i64> -> !warp.frag<b, tf32, {{.*}}>, !warp.frag<b, tf32,
func.func @tf32_kmajor(%a: memref<2048x2048xf32>, %b: memref<2048x2048xf32, strided<[1, 2048]>>, %d: memref<2048x2048xf32>) {
  %la = tile.load %a[0, 0] : memref<2048x2048xf32> -> !tile.tile<2048x2048xf32>
  %ta = tile.cast %la {rounding = #tile<rounding rna>} : !tile.tile<2048x2048xf32> -> !tile.tile<2048x2048xtf32>
  %lb = tile.load %b[0, 0] : memref<2048x2048xf32, strided<[1, 2048]>> -> !tile.tile<2048x2048xf32>
  %tb = tile.cast %lb {rounding = #tile<rounding rna>} : !tile.tile<2048x2048xf32> -> !tile.tile<2048x2048xtf32>
  %z = tile.constant 0.0 : !tile.tile<2048x2048xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<2048x2048xtf32>, !tile.tile<2048x2048xtf32>, !tile.tile<2048x2048xf32> -> !tile.tile<2048x2048xf32>
  tile.store %td, %d[0, 0] : !tile.tile<2048x2048xf32>, memref<2048x2048xf32>
  func.return
}
