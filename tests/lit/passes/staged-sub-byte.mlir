// 4- and 1-bit operands with a K-major B stage like 8-bit ones: 128 bytes of K a shared row
// (stage-k 256 s4, 1024 b1), the packed rows copied with cp.async and read with ldmatrix .x4
// (m16n8k64 and m16n8k256 fragments are ldmatrix's 8x8 b16 matrices). In the PTX an element
// column becomes a byte offset by a shift, and a copy's bit address a byte address. A K whose
// rows end inside a byte is refused when stages are forced (cp.async zero-fills whole bytes).
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=80},tile-to-warp' | filecheck %s
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=80},tile-to-warp,warp-swizzle-shared,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX
// RUN: not tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=80},tile-to-warp{stages=3}' 2>&1 | filecheck %s --check-prefix=ERR
// On sm_90 (s4 mma slow there) s4 stages the same, and each m16n8k64 fragment read is widened to
// the two m16n8k32 s8 fragments of its K halves (`warp.widen`) right before their mmas.
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp' | filecheck %s --check-prefix=WIDEN
// WIDEN-LABEL: func.func @s4_kmajor
// WIDEN-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 4x8, stages = 4, stage_k = 128, reads = {{[a-z]+}}, group_m = 8
// WIDEN:       warp.ldmatrix {{.*}} : memref<4x128x128xsi4, 3 : i64> -> !warp.frag<a, si4, #warp.variant<m16n8k64, s32, s4, s4, s32>>
// WIDEN:       warp.widen {{.*}} : !warp.frag<a, si4, #warp.variant<m16n8k64, s32, s4, s4, s32>> -> !warp.frag<a, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>, !warp.frag<a, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>
// WIDEN:       warp.widen {{.*}} : !warp.frag<b, si4, {{.*}}> -> !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>,
// WIDEN:       warp.mma {{.*}} : !warp.frag<a, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>

// CHECK-LABEL: func.func @s4_kmajor
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 4x8, stages = 3, stage_k = 256, reads = {{[a-z]+}}, group_m = 8
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x128x256xsi4, 3 : i64>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x128x256xsi4, 3 : i64>
// CHECK:       warp.copy_async %b[{{.*}}], %[[SB]][{{.*}}] {{.*}}vector = 16 : i64, transpose, in_bounds = array<i64: 1, 1>}
// CHECK:       warp.ldmatrix %[[SA]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>} : memref<3x128x256xsi4, 3 : i64> -> !warp.frag<a, si4, #warp.variant<m16n8k64, s32, s4, s4, s32>>
// CHECK:       warp.ldmatrix %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>} : memref<3x128x256xsi4, 3 : i64> -> !warp.frag<b, si4, {{.*}}>, !warp.frag<b, si4,
// PTX-LABEL:   .visible .entry s4_kmajor(
// PTX:         shr.u64 [[BYTE:%rd[0-9]+]], [[BYTE]], 3;
// PTX:         cp.async.cg.shared.global [{{%r[0-9]+}}], [{{%rd[0-9]+}}], 16;
// PTX:         shr.u32 [[COL:%r[0-9]+]], [[COL]], 1;
// PTX:         ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX:         mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32
func.func @s4_kmajor(%a: memref<2048x2048xsi4>, %b: memref<2048x2048xsi4, strided<[1, 2048]>>, %d: memref<2048x2048xsi32>) {
  %ta = tile.load %a[0, 0] : memref<2048x2048xsi4> -> !tile.tile<2048x2048xsi4>
  %tb = tile.load %b[0, 0] : memref<2048x2048xsi4, strided<[1, 2048]>> -> !tile.tile<2048x2048xsi4>
  %z = tile.constant 0 : !tile.tile<2048x2048xsi32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<2048x2048xsi4>, !tile.tile<2048x2048xsi4>, !tile.tile<2048x2048xsi32> -> !tile.tile<2048x2048xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<2048x2048xsi32>, memref<2048x2048xsi32>
  func.return
}

// -----
// CHECK-LABEL: func.func @b1_kmajor
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 4x8, stages = 3, stage_k = 1024, reads = {{[a-z]+}}, group_m = 8
// CHECK:       warp.ldmatrix {{.*}} : memref<3x128x1024xi1, 3 : i64> -> !warp.frag<a, i1, #warp.variant<m16n8k256, s32, b1, b1, s32, bitop = "xor">>
// PTX-LABEL:   .visible .entry b1_kmajor(
// PTX:         shr.u32 [[COL:%r[0-9]+]], [[COL]], 3;
// PTX:         mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc
func.func @b1_kmajor(%a: memref<2048x2048xi1>, %b: memref<2048x2048xi1, strided<[1, 2048]>>, %d: memref<2048x2048xsi32>) {
  %ta = tile.load %a[0, 0] : memref<2048x2048xi1> -> !tile.tile<2048x2048xi1>
  %tb = tile.load %b[0, 0] : memref<2048x2048xi1, strided<[1, 2048]>> -> !tile.tile<2048x2048xi1>
  %z = tile.constant 0 : !tile.tile<2048x2048xsi32>
  %td = tile.mma %ta, %tb, %z {popc = #tile<popc xor>} : !tile.tile<2048x2048xi1>, !tile.tile<2048x2048xi1>, !tile.tile<2048x2048xsi32> -> !tile.tile<2048x2048xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<2048x2048xsi32>, memref<2048x2048xsi32>
  func.return
}

// -----
// CHECK-LABEL: func.func @s4_odd_k
// CHECK-NOT:   memref.alloc
// ERR:         staged-sub-byte.mlir:[[# @LINE + 6]]:3
// ERR:         stages=3: this kernel cannot be staged through shared memory: K = 201 4-bit elements end inside a byte
func.func @s4_odd_k(%a: memref<64x201xsi4, strided<[208, 1]>>, %b: memref<201x64xsi4, strided<[1, 208]>>, %d: memref<64x64xsi32>) {
  %ta = tile.load %a[0, 0] : memref<64x201xsi4, strided<[208, 1]>> -> !tile.tile<64x201xsi4>
  %tb = tile.load %b[0, 0] : memref<201x64xsi4, strided<[1, 208]>> -> !tile.tile<201x64xsi4>
  %z = tile.constant 0 : !tile.tile<64x64xsi32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<64x201xsi4>, !tile.tile<201x64xsi4>, !tile.tile<64x64xsi32> -> !tile.tile<64x64xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<64x64xsi32>, memref<64x64xsi32>
  func.return
}

// -----
// A row-major 4-bit B (N contiguous) is staged by the transposing fill (fill = b) into the K-major
// stage a K-major B has: 8 words a chunk (8 rows of K, 8 columns a word, 512 bytes apart), their
// nibbles interleaved in pairs (shift by 4 under the masks 0x0F0F0F0F / 0xF0F0F0F0), then
// transposed by bytes with prmt and stored a 32-bit word a line.
// CHECK-LABEL: func.func @s4_row_b
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 4x2, warp_tile = 2x8, stages = 4, stage_k = 128, {{.*}}fill = b
// CHECK:       memref.alloc() {alignment = 128 : i64} : memref<4x128x128xsi4, 3 : i64>
// CHECK-NEXT:  %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<4x128x128xsi4, 3 : i64>
// CHECK:       %[[W:.*]] = warp.fill_load %b[{{.*}}] {{{.*}}shape = array<i64: 128, 128>, threads = 256 : i64, aligned = array<i64: 1, 0>, transpose, {{.*}}} : memref<1024x1024xsi4> -> !warp.staged<8>
// CHECK-NEXT:  warp.fill_store %[[W]], %[[SB]][{{.*}}] {threads = 256 : i64} : !warp.staged<8>, memref<4x128x128xsi4, 3 : i64>
// WIDEN-LABEL: func.func @s4_row_b
// WIDEN:       warp.fill_load %b{{.*}} -> !warp.staged<8>
// WIDEN:       warp.widen {{.*}} : !warp.frag<b, si4, {{.*}}> -> !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>,
// PTX-LABEL:   .visible .entry s4_row_b(
// PTX:         ld.global.b32 [[W0:%r[0-9]+]], [[[P:%rd[0-9]+]]];
// PTX:         ld.global.b32 [[W1:%r[0-9]+]], [[[P]]+512];
// PTX:         shl.b32 [[T:%r[0-9]+]], [[W1]], 4;
// PTX-NEXT:    and.b32 [[T]], [[T]], 4042322160;
// PTX-NEXT:    and.b32 [[U:%r[0-9]+]], [[W0]], 252645135;
// PTX-NEXT:    or.b32 {{%r[0-9]+}}, [[U]], [[T]];
// PTX:         prmt.b32
// PTX:         st.shared.b32
// PTX:         mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32
func.func @s4_row_b(%a: memref<1024x1024xsi4>, %b: memref<1024x1024xsi4>, %d: memref<1024x1024xsi32>) {
  %ta = tile.load %a[0, 0] : memref<1024x1024xsi4> -> !tile.tile<1024x1024xsi4>
  %tb = tile.load %b[0, 0] : memref<1024x1024xsi4> -> !tile.tile<1024x1024xsi4>
  %z = tile.constant 0 : !tile.tile<1024x1024xsi32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<1024x1024xsi4>, !tile.tile<1024x1024xsi4>, !tile.tile<1024x1024xsi32> -> !tile.tile<1024x1024xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<1024x1024xsi32>, memref<1024x1024xsi32>
  func.return
}
