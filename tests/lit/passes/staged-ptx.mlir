// The staged schedule in PTX. Each thread's part of a copy (its chunk's row, column, global and
// swizzled shared offsets) depends only on %tid.x: it is computed once, at the kernel's entry,
// before any loop; in the K loop a copy is the tile origin (uniform) plus that offset. The
// refill is a uniform branch around the copies (scf.if). Tiles inside the matrix copy whole
// 16-byte chunks; at a ragged edge the source size is clamped (zero-fill, nothing read past it).
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{pair-bytes=false},warp-swizzle-shared,warp-split-tf32,cse,warp-to-ptx' -t ptx | filecheck %s

// CHECK-LABEL: .entry exact(
// CHECK:       mov.u32 %r0, %laneid;
// CHECK-NEXT:  mov.u32 [[TID:%r[0-9]+]], %tid.x;
// CHECK-NEXT:  add.u32 [[C:%r[0-9]+]], [[TID]], 0;
// CHECK-NEXT:  shr.u32 [[ROW:%r[0-9]+]], [[C]], 3;
// CHECK:       mul.wide.u32 [[OFF:%rd[0-9]+]], [[ROW]], 1024;
// CHECK-NOT:   $k_loop
// CHECK:       cp.async.cg.shared.global [{{%r[0-9]+}}], [{{%rd[0-9]+}}], 16;
// CHECK:       cp.async.wait_group 1;
// CHECK-NEXT:  bar.sync 0;
// CHECK:       $k_loop_{{[0-9]+}}:
// CHECK:       setp.lt.u32 [[MORE:%p[0-9]+]], {{%r[0-9]+}}, 512;
// CHECK:       @!{{%p[0-9]+}} bra.uni $skip_[[SKIP:[0-9]+]];
// CHECK-NOT:   shr.u32 {{%r[0-9]+}}, {{%r[0-9]+}}, 3;
// CHECK:       add.s64 [[SRC:%rd[0-9]+]], {{%rd[0-9]+}}, [[OFF]];
// CHECK-NEXT:  add.u32 [[DST:%r[0-9]+]], {{%r[0-9]+}}, {{%r[0-9]+}};
// CHECK-NEXT:  cp.async.cg.shared.global [[[DST]]], [[[SRC]]], 16;
// CHECK:       $skip_[[SKIP]]:
// CHECK-NEXT:  cp.async.commit_group;
// CHECK:       ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK:       mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK:       bra.uni $k_loop
// CHECK:       cp.async.wait_group 0;
// D's neighbouring columns of a lane leave as one 8-byte store (the column index is a multiple of
// 8: col_align; even row stride and column count).
// CHECK:       st.global.v2.f32 [{{%rd[0-9]+}}+{{[0-9]+}}], {{{%f[0-9]+}}, {{%f[0-9]+}}};
// CHECK-NOT:   st.global.f32
func.func @exact(%a: memref<512x512xf16>, %b: memref<512x512xf16>, %d: memref<512x512xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %z = tile.constant 0.0 : !tile.tile<512x512xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<512x512xf16>, !tile.tile<512x512xf16>, !tile.tile<512x512xf32> -> !tile.tile<512x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x512xf32>, memref<512x512xf32>
  func.return
}

// -----
// CHECK-LABEL: .entry ragged(
// CHECK:       $k_loop_{{[0-9]+}}:
// CHECK:       setp.lt.u32 {{%p[0-9]+}}, {{%r[0-9]+}}, 200;
// CHECK:       sub.s32 [[SIZE:%r[0-9]+]], 200, {{%r[0-9]+}};
// CHECK-NEXT:  mul.lo.s32 [[SIZE]], [[SIZE]], 2;
// CHECK-NEXT:  min.s32 [[SIZE]], [[SIZE]], 16;
// CHECK-NEXT:  max.s32 [[SIZE]], [[SIZE]], 0;
// CHECK:       setp.lt.u32 [[IN:%p[0-9]+]], {{%r[0-9]+}}, 130;
// CHECK-NEXT:  selp.b32 [[SIZE]], [[SIZE]], 0, [[IN]];
// CHECK:       cp.async.cg.shared.global [{{%r[0-9]+}}], [{{%rd[0-9]+}}], 16, [[SIZE]];
// CHECK:       @{{%p[0-9]+}} st.global.v2.f32
func.func @ragged(%a: memref<130x200xf16>, %b: memref<200x72xf16>, %d: memref<130x72xf32>) {
  %ta = tile.load %a[0, 0] : memref<130x200xf16> -> !tile.tile<130x200xf16>
  %tb = tile.load %b[0, 0] : memref<200x72xf16> -> !tile.tile<200x72xf16>
  %z = tile.constant 0.0 : !tile.tile<130x72xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<130x200xf16>, !tile.tile<200x72xf16>, !tile.tile<130x72xf32> -> !tile.tile<130x72xf32>
  tile.store %td, %d[0, 0] : !tile.tile<130x72xf32>, memref<130x72xf32>
  func.return
}

// -----
// An odd number of columns (and so an odd row stride): pairs would straddle the edge or be
// misaligned, so D leaves one value at a time.
// CHECK-LABEL: .entry odd_columns(
// CHECK-NOT:   st.global.v2
// CHECK:       st.global.f32
// CHECK-NOT:   st.global.v2
func.func @odd_columns(%a: memref<64x64xf16>, %b: memref<64x71xf16>, %d: memref<64x71xf32>) {
  %ta = tile.load %a[0, 0] : memref<64x64xf16> -> !tile.tile<64x64xf16>
  %tb = tile.load %b[0, 0] : memref<64x71xf16> -> !tile.tile<64x71xf16>
  %z = tile.constant 0.0 : !tile.tile<64x71xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<64x64xf16>, !tile.tile<64x71xf16>, !tile.tile<64x71xf32> -> !tile.tile<64x71xf32>
  tile.store %td, %d[0, 0] : !tile.tile<64x71xf32>, memref<64x71xf32>
  func.return
}

// -----
// A row-major 8-bit B through the transposing fill (pair-bytes=false above; the default byte-pair
// reads: pair-bytes.mlir): each K iteration first stores the words the
// iteration before loaded (8 prmts a chunk, the selectors in registers: the thread's rotation;
// 4 shared stores), then, after the A copies' branch, loads the next stage's 8 words: 32-bit
// loads at the tile origin plus immediates (4 rows a chunk, 1024 bytes apart; chunks 32 rows
// apart), each predicated by K, in flight under the stage's mmas. (A problem whose default CTAs,
// 128 x 128 here, fill the SMs: smaller ones narrow to 128 x 64 and one chunk, configs.SMALL_TILES.)
// CHECK-LABEL: .entry fill(
// CHECK:       $k_loop_{{[0-9]+}}:
// CHECK-NOT:   mma.sync
// CHECK:       prmt.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, {{%r[0-9]+}}, [[SEL:%r[0-9]+]];
// CHECK:       st.shared.b32 [{{%r[0-9]+}}], {{%r[0-9]+}};
// CHECK-NOT:   mma.sync
// CHECK:       $skip_{{[0-9]+}}:
// CHECK:       @[[P:%p[0-9]+]] ld.global.b32 [[W0:%r[0-9]+]], [[[BASE:%rd[0-9]+]]];
// CHECK:       ld.global.b32 [[W1:%r[0-9]+]], [[[BASE]]+1024];
// CHECK:       ld.global.b32 {{%r[0-9]+}}, [[[BASE]]+3072];
// CHECK:       ld.global.b32 {{%r[0-9]+}}, [[[BASE]]+32768];
// CHECK:       ld.global.b32 {{%r[0-9]+}}, [[[BASE]]+35840];
// CHECK-NOT:   st.shared
// CHECK:       mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
// CHECK-NOT:   st.shared
// CHECK:       bra.uni $k_loop_
func.func @fill(%a: memref<2048x256xsi8>, %b: memref<256x1024xsi8>, %d: memref<2048x1024xsi32>) {
  %ta = tile.load %a[0, 0] : memref<2048x256xsi8> -> !tile.tile<2048x256xsi8>
  %tb = tile.load %b[0, 0] : memref<256x1024xsi8> -> !tile.tile<256x1024xsi8>
  %td = tile.matmul %ta, %tb : !tile.tile<2048x256xsi8>, !tile.tile<256x1024xsi8> -> !tile.tile<2048x1024xsi32>
  tile.store %td, %d[0, 0] : !tile.tile<2048x1024xsi32>, memref<2048x1024xsi32>
  func.return
}
