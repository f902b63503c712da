// Rows that are not 4-byte aligned for cp.async (here B's: N = 71 f16 elements, 142 bytes) are
// staged by a gather: the tile copied as stored, its words loaded element by element through
// registers (warp.fill_load / warp.fill_store with `gather`), each element predicated at the
// extent; warp-pipeline runs the stores an iteration after the loads, like a transposing fill's.
// The stage is the one cp.async would have written, read by the same ldmatrix .trans.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp,warp-swizzle-shared,warp-split-tf32,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @odd_n
// CHECK-SAME:  stages = 4, stage_k = 32, {{.*}}gather = b>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<4x32x128xf16, 3 : i64>
// CHECK:       warp.copy_async %a
// CHECK:       %[[W:.*]] = warp.fill_load %b[{{.*}}] {window = array<i64: 0, 0>, extent = array<i64: 1, 256, 71>, shape = array<i64: 32, 128>, threads = 128 : i64, gather} : memref<256x71xf16> -> !warp.staged<16>
// CHECK-NEXT:  warp.fill_store %[[W]], %[[SB]][%{{.*}}] {threads = 128 : i64, gather} : !warp.staged<16>, memref<4x32x128xf16, 3 : i64>
// CHECK:       scf.for
// CHECK:         warp.fill_store %{{.*}}, %[[SB]][%{{.*}}] {threads = 128 : i64, gather}
// CHECK:         warp.ldmatrix %[[SB]][{{.*}}trans}
// PTX-LABEL:   .entry odd_n(
// PTX:         $k_loop_{{[0-9]+}}:
// PTX:         st.shared.b32
// PTX:         @{{%p[0-9]+}} ld.global.u16 [[LO:%r[0-9]+]], [[[BASE:%rd[0-9]+]]];
// PTX:         @{{%p[0-9]+}} ld.global.u16 [[HI:%r[0-9]+]], [[[BASE]]+2];
// PTX-NEXT:    prmt.b32 {{%r[0-9]+}}, [[LO]], [[HI]], 21520;
// PTX:         ld.global.u16 {{%r[0-9]+}}, [[[BASE]]+284];
func.func @odd_n(%a: memref<128x256xf16>, %b: memref<256x71xf16>, %d: memref<128x71xf32>) {
  %ta = tile.load %a[0, 0] : memref<128x256xf16> -> !tile.tile<128x256xf16>
  %tb = tile.load %b[0, 0] : memref<256x71xf16> -> !tile.tile<256x71xf16>
  %z = tile.constant 0.0 : !tile.tile<128x71xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<128x256xf16>, !tile.tile<256x71xf16>, !tile.tile<128x71xf32> -> !tile.tile<128x71xf32>
  tile.store %td, %d[0, 0] : !tile.tile<128x71xf32>, memref<128x71xf32>
  func.return
}
