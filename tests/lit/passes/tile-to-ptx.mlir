// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp{stages=0},warp-split-tf32,cse,warp-to-ptx' -o %t.ir.mlir
// RUN: filecheck %s --check-prefix=IR --input-file %t.ir.mlir
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp{stages=0},warp-split-tf32,cse,warp-to-ptx' -t ptx > %t.ptx
// RUN: filecheck %s --input-file %t.ptx
// RUN: %if ptxas %{ ptxas -arch=sm_90 %t.ptx -o %t.cubin %}
// RUN: %tilemma-opt %t.ir.mlir -t ptx | diff - %t.ptx
// The warp level prints and parses back: lowering the printed warp IR gives the same PTX. (The
// simple schedule, forced: these odd rows would otherwise be gathered into shared memory.)
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp{stages=0}' | %tilemma-opt -p 'warp-split-tf32,cse,warp-to-ptx' -t ptx | diff - %t.ptx

// IR: ptx.module attributes {version = "9.0", target = "sm_90", address_size = "64"} {
// IR:   ptx.entry "gemm" [".u64 p_a", ".u64 p_b", ".u64 p_c", ".u64 p_d"]
// IR:     ptx.reg "b32" "%r"
// IR:     ptx.mma "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"

// CHECK:      .version 9.0
// CHECK-NEXT: .target sm_90
// CHECK-NEXT: .address_size 64
// CHECK:      .visible .entry gemm(
// CHECK-NEXT:     .param .u64 p_a,
// CHECK-NEXT:     .param .u64 p_b,
// CHECK-NEXT:     .param .u64 p_c,
// CHECK-NEXT:     .param .u64 p_d
// CHECK-NEXT: )
// CHECK-NEXT: .maxntid 128, 1, 1
// CHECK:      // mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: grid (2, 1, 1), block (128, 1, 1)
// Lane coordinates come from the fragment table: groupID = lane bits 2..4 for A's row.
// CHECK:      mov.u32 [[LANE:%r[0-9]+]], %laneid;
// CHECK:      bfe.u32 %r{{[0-9]+}}, [[LANE]], 2, 1;
// Ragged M, N and K: predicated loads (0 when out of range) ...
// CHECK:      setp.lt.s32 %p{{[0-9]+}}, %r{{[0-9]+}}, {{[0-9]+}};
// CHECK:      @%p{{[0-9]+}} ld.global.f32 %f{{[0-9]+}}, [%rd{{[0-9]+}}+{{[0-9]+}}];
// CHECK:      $k_loop_1:
// CHECK:      @%p{{[0-9]+}} ld.global.u16 %r{{[0-9]+}}, [%rd{{[0-9]+}}+{{[0-9]+}}];
// CHECK:      bfi.b32
// CHECK:      mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {[[D0:%f[0-9]+]], [[D1:%f[0-9]+]], [[D2:%f[0-9]+]], [[D3:%f[0-9]+]]}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}}, {[[D0]], [[D1]], [[D2]], [[D3]]};
// CHECK:      @%p{{[0-9]+}} bra.uni $k_loop_1;
// ... and predicated stores.
// CHECK:      @%p{{[0-9]+}} st.global.f32 [%rd{{[0-9]+}}+{{[0-9]+}}], %f{{[0-9]+}};
// CHECK:      ret;
func.func @gemm(%a: memref<37x53xf16>, %b: memref<53x91xf16>, %c: memref<37x91xf32>, %d: memref<37x91xf32>) {
  %ta = tile.load %a[0, 0] : memref<37x53xf16> -> !tile.tile<37x53xf16>
  %tb = tile.load %b[0, 0] : memref<53x91xf16> -> !tile.tile<53x91xf16>
  %tc = tile.load %c[0, 0] : memref<37x91xf32> -> !tile.tile<37x91xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<37x53xf16>, !tile.tile<53x91xf16>, !tile.tile<37x91xf32> -> !tile.tile<37x91xf32>
  tile.store %td, %d[0, 0] : !tile.tile<37x91xf32>, memref<37x91xf32>
  func.return
}
