// The accumulators of a warpgroup kernel stored through shared memory (`warp-stage-stores`): each
// run of four m16n8 stores of a 16-row block (32 columns) becomes one `warp.store_staged` through
// the warp's slot (thread / 32) of an 8 x 16 x 32 f32 buffer swizzled by the row times 5. Rows cut
// by the edge (500) keep the rows' guard (in_bounds 0, 1); columns that are not whole 16-byte
// pieces (510) keep their stores.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true},warp-stage-stores' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true},warp-stage-stores,warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @whole
// CHECK:         %[[BUF:.*]] = memref.alloc() {alignment = 128 : i64} : memref<8x16x32xf32, #warp.swizzled<5>, 3 : i64>
// CHECK-NEXT:    %[[TID:.*]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK-NEXT:    %[[LANES:.*]] = arith.constant 32 : index
// CHECK-NEXT:    %[[SLOT:.*]] = arith.divui %[[TID]], %[[LANES]] : index
// CHECK-NOT:     warp.store {{.*}}
// CHECK-COUNT-4: warp.store_staged %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} via %[[BUF]][%[[SLOT]]] to %d[{{.*}}] {window = array<i64: 0, 0>, extent = array<i64: 1, 512, 512>, col_align = 8 : i64, in_bounds = array<i64: 1, 1>}
// CHECK-NOT:     warp.store {{.*}}
// CHECK-LABEL: func.func @ragged
// CHECK-COUNT-4: warp.store_staged {{.*}} {window = array<i64: 0, 0>, extent = array<i64: 1, 500, 512>, col_align = 8 : i64, in_bounds = array<i64: 0, 1>}
// CHECK-LABEL: func.func @narrow
// CHECK-NOT:     memref<8x16x32xf32
// CHECK-COUNT-16: warp.store %{{.*}}, %d[{{.*}}] {window = array<i64: 0, 0>, extent = array<i64: 1, 512, 510>
// CHECK-NOT:     warp.store_staged
// A 16-bit D: eight fragments a 128-byte row, a 16 x 64 slot.
// CHECK-LABEL: func.func @half
// CHECK:         %[[HBUF:.*]] = memref.alloc() {alignment = 128 : i64} : memref<8x16x64xf16, #warp.swizzled<5>, 3 : i64>
// CHECK-COUNT-2: warp.store_staged %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} via %[[HBUF]][%{{.*}}] to %d[{{.*}}] {{.*}} : memref<8x16x64xf16

// A lane writes its pairs of rows g and g + 8 (the second 1 KiB on), each fragment's 32 bytes
// further by an XOR of the address; the warp meets; each lane reads 16 bytes of 4 rows and
// stores them whole, 2 KiB of rows (4 x 512 floats) apart; then meets again before the slot is
// written anew. At the ragged edge each piece is guarded.
// PTX-LABEL:   .visible .entry whole(
// PTX-NOT:     st.global.v2
// PTX:         st.shared.v2.f32 [[[W0:%r[0-9]+]]], {{{%f[0-9]+}}, {{%f[0-9]+}}};
// PTX-NEXT:    st.shared.v2.f32 [[[W8:%r[0-9]+]]], {{{%f[0-9]+}}, {{%f[0-9]+}}};
// PTX-NEXT:    xor.b32 [[W1:%r[0-9]+]], [[W0]], 32;
// PTX-NEXT:    st.shared.v2.f32 [[[W1]]], {{{%f[0-9]+}}, {{%f[0-9]+}}};
// PTX:         bar.warp.sync -1;
// PTX:         ld.shared.v4.f32 {[[V:%f[0-9]+]], {{%f[0-9]+}}, {{%f[0-9]+}}, {{%f[0-9]+}}}, [{{%r[0-9]+}}];
// PTX-NEXT:    st.global.v4.f32 [[[G:%rd[0-9]+]]+0], {[[V]], {{%f[0-9]+}}, {{%f[0-9]+}}, {{%f[0-9]+}}};
// PTX:         st.global.v4.f32 [[[G]]+8192],
// PTX:         st.global.v4.f32 [[[G]]+16384],
// PTX:         st.global.v4.f32 [[[G]]+24576],
// PTX-NEXT:    bar.warp.sync -1;
// PTX-LABEL:   .visible .entry ragged(
// PTX-NOT:     st.global.v2
// PTX:         @{{%p[0-9]+}} st.global.v4.f32
// PTX-LABEL:   .visible .entry narrow(
// PTX-NOT:     st.global.v4
// PTX-NOT:     bar.warp.sync
// PTX:         st.global.v2.f32
// One register (two halves) a row piece, 16 bytes further a fragment; rows stored as 16-byte pieces.
// PTX-LABEL:   .visible .entry half(
// PTX-NOT:     st.global.b32
// PTX:         st.shared.b32 [[[H0:%r[0-9]+]]], {{%r[0-9]+}};
// PTX-NEXT:    st.shared.b32 [{{%r[0-9]+}}], {{%r[0-9]+}};
// PTX-NEXT:    xor.b32 [[H1:%r[0-9]+]], [[H0]], 16;
// PTX:         bar.warp.sync -1;
// PTX:         ld.shared.v4.b32
// PTX-NEXT:    st.global.v4.b32
func.func @whole(%a: memref<512x512xf16>, %b: memref<512x512xf16>, %d: memref<512x512xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %zero = tile.constant 0.0 : !tile.tile<512x512xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<512x512xf16>, !tile.tile<512x512xf16>, !tile.tile<512x512xf32> -> !tile.tile<512x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x512xf32>, memref<512x512xf32>
  func.return
}
func.func @ragged(%a: memref<500x512xf16>, %b: memref<512x512xf16>, %d: memref<500x512xf32>) {
  %ta = tile.load %a[0, 0] : memref<500x512xf16> -> !tile.tile<500x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %zero = tile.constant 0.0 : !tile.tile<500x512xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<500x512xf16>, !tile.tile<512x512xf16>, !tile.tile<500x512xf32> -> !tile.tile<500x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<500x512xf32>, memref<500x512xf32>
  func.return
}
func.func @narrow(%a: memref<512x512xf16>, %b: memref<512x510xf16>, %d: memref<512x510xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x510xf16> -> !tile.tile<512x510xf16>
  %zero = tile.constant 0.0 : !tile.tile<512x510xf32>
  %td = tile.mma %ta, %tb, %zero : !tile.tile<512x512xf16>, !tile.tile<512x510xf16>, !tile.tile<512x510xf32> -> !tile.tile<512x510xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x510xf32>, memref<512x510xf32>
  func.return
}
func.func @half(%a: memref<256x64xf16>, %b: memref<64x256xf16>, %d: memref<256x256xf16>) {
  %ta = tile.load %a[0, 0] : memref<256x64xf16> -> !tile.tile<256x64xf16>
  %tb = tile.load %b[0, 0] : memref<64x256xf16> -> !tile.tile<64x256xf16>
  %zero = tile.constant 0.0 : !tile.tile<256x256xf32>
  %acc = tile.mma %ta, %tb, %zero : !tile.tile<256x64xf16>, !tile.tile<64x256xf16>, !tile.tile<256x256xf32> -> !tile.tile<256x256xf32>
  %td = tile.cast %acc : !tile.tile<256x256xf32> -> !tile.tile<256x256xf16>
  tile.store %td, %d[0, 0] : !tile.tile<256x256xf16>, memref<256x256xf16>
  func.return
}
