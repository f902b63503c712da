// RUN: %tilemma-opt %s | filecheck %s --check-prefix=ROUND
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp{stage-k=32}' | filecheck %s --check-prefix=WARP
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp,warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp{stages=0},cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=SIMPLE
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp{stage-k=64},warp-swizzle-shared,cse,warp-to-ptx' -t ptx > %t.ptx
// RUN: %if ptxas %{ ptxas -arch=sm_90 %t.ptx -o %t.cubin %}

// A pre-compressed 2:4 A (compiler/sparse_format.py): values 2 x 37 x 48 (K = 75 padded to 96,
// halved), metadata 2 x 3 x 64 words; B a broadcast batch of 1.
// ROUND: tile.sparse_from %av, %am : memref<2x37x48xbf16>, memref<2x3x64xui32> -> !tile.sparse<2x37x75xbf16>

// Staged with 4 stages of K 32 (the default has K 64, configs.DEFAULTS): the values' stage is M x (stage K / 2)
// and reads as a dense A (ldmatrix .x4); each k32 B fragment is one ldmatrix .x4.trans; the
// metadata is staged with them (a third ring: 16 lanes a 16-row tile, a lane's words for the
// stage's k32 steps) and read from the stage, one load per instruction row.
// WARP:      func.func @pre(%av: memref<2x37x48xbf16> {warp.role = ["a_values"]}, %am: memref<2x3x64xui32> {warp.role = ["a_meta"]}
// WARP:      memref.alloc() {alignment = 128 : i64} : memref<4x32x16xbf16, 3 : i64>
// WARP:      memref.alloc() {alignment = 128 : i64} : memref<4x32x128xbf16, 3 : i64>
// WARP:      [[META:%[0-9]+]] = memref.alloc() {alignment = 128 : i64} : memref<4x32x1xui32, 3 : i64>
// WARP:      warp.copy_async %av[{{.*}}] {window = array<i64: 0, 0, 0>, extent = array<i64: 2, 37, 48>, threads = 128 : i64, vector = 16 : i64{{.*}}}
// WARP:      warp.copy_meta_async %am[{{.*}}], [[META]][{{.*}}] {threads = 128 : i64} : memref<2x3x64xui32>, memref<4x32x1xui32, 3 : i64>
// WARP:      warp.async_commit
// WARP:      [[TOKEN:%[0-9]+]] = warp.async_wait
// WARP:      warp.ldmatrix {{.*}} -> !warp.frag<a, bf16, #warp.variant<m16n8k32, f32, bf16, bf16, f32, sparse = "sp::ordered_metadata">>
// WARP:      warp.ldmatrix {{.*}} {offsets = array<i64: 0, 0>, trans} : memref<4x32x128xbf16, 3 : i64> -> !warp.frag<b, bf16, #warp.variant<m16n8k32,
// WARP:      warp.load_meta_shared [[META]][{{.*}}] after [[TOKEN]] : memref<4x32x1xui32, 3 : i64> -> !warp.frag<meta, i32, #warp.variant<m16n8k32, f32, bf16, bf16, f32, sparse = "sp::ordered_metadata">>{{$}}
// WARP:      scf.for
// WARP:        warp.copy_meta_async %am
// WARP:        warp.mma {{.*}} meta
// WARP:        warp.load_meta_shared [[META]]
// WARP-NOT:  warp.load_meta %am

// With stage K 64 (the default), a lane's words of a stage's two k32 steps are one 8-byte
// cp.async (the tile clamped to the memref's last, 2: rows 32..63 of a 37-row A read tile 2's)
// and one v2 shared load per instruction row.
// CHECK:      .param .u64 p_av,
// CHECK-NEXT: .param .u64 p_am,
// CHECK:      cp.async.cg.shared.global
// CHECK:      min.u32 [[TILE:%r[0-9]+]], [[TILE]], 2;
// CHECK:      cp.async.ca.shared.global [%r{{[0-9]+}}], [%rd{{[0-9]+}}], 8;
// CHECK-NEXT: cp.async.commit_group;
// CHECK:      ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK:      ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// CHECK:      ld.shared.v2.u32 {%r{{[0-9]+}}, %r{{[0-9]+}}}, [%r{{[0-9]+}}];
// CHECK:      mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {{.*}}, %r{{[0-9]+}}, 0;
// CHECK-NOT:  ld.global.v2.u32
// CHECK-NOT:  atom.global

// Simple: the values are a plain fragment load at column k / 2, the metadata one word per lane.
// SIMPLE:      ld.global.v2.f32
// SIMPLE:      ld.global.u16
// SIMPLE:      @%p{{[0-9]+}} ld.global.u32 %r{{[0-9]+}}, [%rd{{[0-9]+}}];
// SIMPLE:      mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32
// SIMPLE-NOT:  ldmatrix
func.func @pre(%av: memref<2x37x48xbf16>, %am: memref<2x3x64xui32>, %b: memref<1x75x92xbf16>, %c: memref<2x37x92xf32>, %d: memref<2x37x92xf32>) {
  %ta = tile.sparse_from %av, %am : memref<2x37x48xbf16>, memref<2x3x64xui32> -> !tile.sparse<2x37x75xbf16>
  %tb = tile.load %b[0, 0, 0] : memref<1x75x92xbf16> -> !tile.tile<1x75x92xbf16>
  %tc = tile.load %c[0, 0, 0] : memref<2x37x92xf32> -> !tile.tile<2x37x92xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.sparse<2x37x75xbf16>, !tile.tile<1x75x92xbf16>, !tile.tile<2x37x92xf32> -> !tile.tile<2x37x92xf32>
  tile.store %td, %d[0, 0, 0] : !tile.tile<2x37x92xf32>, memref<2x37x92xf32>
  func.return
}
