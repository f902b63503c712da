// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90}' | filecheck %s --check-prefix=SEL
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90 sparse-form=sp}' | filecheck %s --check-prefix=SP
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp,warp-split-tf32,cse,warp-to-ptx' -t ptx > %t.ptx
// RUN: filecheck %s --input-file %t.ptx
// RUN: %if ptxas %{ ptxas -arch=sm_90 %t.ptx -o %t.cubin %}
// RUN: not %tilemma-opt %s -p 'tile-select-mma{sm=75}' 2>&1 | filecheck %s --check-prefix=SM75

// SEL: tile.mma %sa, %tb, %tc {variant = #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp::ordered_metadata">}
// SP:  tile.mma %sa, %tb, %tc {variant = #warp.variant<m16n8k32, f32, f16, f16, f32, sparse = "sp">}
// SM75: no mma.sp variant for f16 x f16 -> f32 on sm_75 with PTX 9.0: m16n8k16: needs sm_80 or newer; m16n8k32: needs sm_80 or newer

// A checked compress gets an error word parameter; the metadata nibble comes from a table lookup.
// CHECK:      .param .u64 p_sparsity_error
// CHECK:      mov.b64 %rd{{[0-9]+}}, 0x{{[0-9A-F]+}};
// CHECK:      popc.b32
// CHECK:      @%p{{[0-9]+}} atom.global.min.u32
// CHECK:      mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {[[D0:%f[0-9]+]], [[D1:%f[0-9]+]], [[D2:%f[0-9]+]], [[D3:%f[0-9]+]]}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, {[[D0]], [[D1]], [[D2]], [[D3]]}, %r{{[0-9]+}}, 0;
func.func @sparse(%a: memref<37x150xf16>, %b: memref<150x91xf16>, %c: memref<37x91xf32>, %d: memref<37x91xf32>) {
  %ta = tile.load %a[0, 0] : memref<37x150xf16> -> !tile.tile<37x150xf16>
  %tb = tile.load %b[0, 0] : memref<150x91xf16> -> !tile.tile<150x91xf16>
  %tc = tile.load %c[0, 0] : memref<37x91xf32> -> !tile.tile<37x91xf32>
  %sa = tile.compress %ta : !tile.tile<37x150xf16> -> !tile.sparse<37x150xf16>
  %td = tile.mma %sa, %tb, %tc : !tile.sparse<37x150xf16>, !tile.tile<150x91xf16>, !tile.tile<37x91xf32> -> !tile.tile<37x91xf32>
  tile.store %td, %d[0, 0] : !tile.tile<37x91xf32>, memref<37x91xf32>
  func.return
}
