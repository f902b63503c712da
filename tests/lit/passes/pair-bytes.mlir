// An 8-bit B stored with N contiguous, read by byte-pair ldmatrix (`#warp.schedule` pair_bytes = b,
// the default; `tile-to-warp{pair-bytes=false}` transposes it with the fill instead). Its stage is
// K x N as stored, copied by cp.async (no transpose); each `warp.ldmatrix {trans}` gives two B
// fragments, the even and the odd columns of 16; C goes into that column order before the K loop
// (`warp.pair_columns`) and the results come back after it (`warp.unpair_columns`). The B stage's
// swizzle folds row bit 3 into bit 1 (`#warp.swizzled<1, fold>`): a pair matrix's rows are 4i and
// 4i + 1 of 16. The PTX has .x4.trans, two prmt selectors (0x6420 = 25632 the even bytes of a row pair,
// 0x7531 = 30001 the odd ones), and two shfl.sync.bfly rounds (lane masks 1 and 2) per row of
// an accumulator pair, before the loop and after it.
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp,warp-swizzle-shared' | filecheck %s
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp,warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{pair-bytes=false}' | filecheck %s --check-prefix=FILL

// CHECK-LABEL: func.func @pairs
// CHECK-SAME:  pair_bytes = b>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x128x128xsi8, #warp.swizzled<1, fold>, 3 : i64>
// CHECK:       warp.pair_columns
// CHECK:       scf.for
// CHECK:       warp.copy_async %b[{{.*}}], %[[SB]][{{.*}}] {window = array<i64: 0, 0>, extent = array<i64: 1, 512, 256>, threads = 128 : i64, vector = 16 : i64, in_bounds = array<i64: 1, 1>}
// CHECK:       warp.ldmatrix %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>, trans} : memref<3x128x128xsi8, #warp.swizzled<1, fold>, 3 : i64> -> !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>, !warp.frag<b, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>
// CHECK:       warp.unpair_columns
// CHECK:       warp.store

// PTX-LABEL:   .entry pairs(
// PTX:         shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 2, 31, 4294967295;
// PTX:         shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 1, 31, 4294967295;
// PTX:         ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {[[X0:%r[0-9]+]], [[Y0:%r[0-9]+]], [[X1:%r[0-9]+]], [[Y1:%r[0-9]+]]}, [{{%r[0-9]+}}+0];
// PTX-NEXT:    prmt.b32 {{%r[0-9]+}}, [[X0]], [[Y0]], 25632;
// PTX-NEXT:    prmt.b32 {{%r[0-9]+}}, [[X0]], [[Y0]], 30001;
// PTX-NEXT:    prmt.b32 {{%r[0-9]+}}, [[X1]], [[Y1]], 25632;
// PTX-NEXT:    prmt.b32 {{%r[0-9]+}}, [[X1]], [[Y1]], 30001;
// PTX:         mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
// PTX:         bra.uni $k_loop_
// PTX:         shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 1, 31, 4294967295;
// PTX:         shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 2, 31, 4294967295;
// PTX:         st.global

// FILL-LABEL:  func.func @pairs
// FILL-SAME:   fill = b>
// FILL-NOT:    pair_columns
// FILL:        warp.fill_load %b
func.func @pairs(%a: memref<256x512xsi8>, %b: memref<512x256xsi8>, %c: memref<256x256xsi32>, %d: memref<256x256xsi32>) {
  %ta = tile.load %a[0, 0] : memref<256x512xsi8> -> !tile.tile<256x512xsi8>
  %tb = tile.load %b[0, 0] : memref<512x256xsi8> -> !tile.tile<512x256xsi8>
  %tc = tile.load %c[0, 0] : memref<256x256xsi32> -> !tile.tile<256x256xsi32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<256x512xsi8>, !tile.tile<512x256xsi8>, !tile.tile<256x256xsi32> -> !tile.tile<256x256xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<256x256xsi32>, memref<256x256xsi32>
  func.return
}

// -----
// An M-major 8-bit A the same way (pair_bytes = a; B K-major here): one .x4.trans an A fragment,
// whose rows g and g + 8 are rows 2g and 2g + 1 of its 16; C's rows into that order before the
// loop (`warp.pair_rows`) and back after it (`warp.unpair_rows`: three shfl.sync.bfly rounds,
// lane masks 4, 8 and 16).
// CHECK-LABEL: func.func @rows
// CHECK-SAME:  pair_bytes = a>
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x128x64xsi8, #warp.swizzled<1, fold>, 3 : i64>
// CHECK:       warp.pair_rows
// CHECK:       scf.for
// CHECK:       warp.ldmatrix %[[SA]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>, trans} : memref<3x128x64xsi8, #warp.swizzled<1, fold>, 3 : i64> -> !warp.frag<a, si8, #warp.variant<m16n8k32, s32, s8, s8, s32>>
// CHECK:       warp.unpair_rows
// PTX-LABEL:   .entry rows(
// PTX:         bra.uni $k_loop_
// PTX:         shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 4, 31, 4294967295;
// PTX:         shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 8, 31, 4294967295;
// PTX:         shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 16, 31, 4294967295;
// FILL-LABEL:  func.func @rows
// FILL-SAME:   fill = a>
func.func @rows(%a: memref<256x512xsi8, strided<[1, 256]>>, %b: memref<512x256xsi8, strided<[1, 512]>>, %c: memref<256x256xsi32>, %d: memref<256x256xsi32>) {
  %ta = tile.load %a[0, 0] : memref<256x512xsi8, strided<[1, 256]>> -> !tile.tile<256x512xsi8>
  %tb = tile.load %b[0, 0] : memref<512x256xsi8, strided<[1, 512]>> -> !tile.tile<512x256xsi8>
  %tc = tile.load %c[0, 0] : memref<256x256xsi32> -> !tile.tile<256x256xsi32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<256x512xsi8>, !tile.tile<512x256xsi8>, !tile.tile<256x256xsi32> -> !tile.tile<256x256xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<256x256xsi32>, memref<256x256xsi32>
  func.return
}
