// f64 (m16n8k16 on sm_90) takes the staged schedule: cp.async copies into swizzled stages of
// 32 f64 (256 bytes) of K, and since ldmatrix moves only 16-byte rows of a fragment, each A and
// B fragment is a `warp.load_shared` (one ld.shared.f64 per register, at its place in the
// fragment table). B may be row-major (a K x N stage) or K-major (transposed into N x K).
// The default is sm_90's 64-bit one in compiler/configs.py's DEFAULTS: 4x2 warps of 2x4, 3 stages of K 32.
// On sm_80 f64 is m8n8k4, which is not staged: forcing stages there is a located error.
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp,warp-swizzle-shared' | filecheck %s
// RUN: tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp,warp-swizzle-shared,warp-split-tf32,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX
// RUN: not tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=80},tile-to-warp{stages=3}' 2>&1 | filecheck %s --check-prefix=SM80
// RUN: not tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90},tile-to-warp{warps=2x4 warp-tile=2x4 stages=5 stage-k=64}' 2>&1 | filecheck %s --check-prefix=BIG

// Every buffer takes the phase multiplier 5: 8-byte loads are served a half-warp at a time, and
// with the plain XOR a half-warp's 16 lanes of an A fragment (rows g, K columns t) fall in 16 banks.
// CHECK-LABEL: func.func @f64_rowmajor
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 4x2, warp_tile = 2x4, stages = 3, stage_k = 32, reads = {{[a-z]+}}, group_m = 8
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x128x32xf64, #warp.swizzled<5>, 3 : i64>
// CHECK:       %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x32x64xf64, #warp.swizzled<5>, 3 : i64>
// CHECK:       warp.copy_async %a[{{.*}}], %[[SA]][{{.*}}] {{.*}}vector = 16 : i64{{.*}}} : memref<1024x1024xf64>, memref<3x128x32xf64, #warp.swizzled<5>, 3 : i64>
// CHECK:       warp.copy_async %b[{{.*}}], %[[SB]][{{.*}}] {{.*}}vector = 16 : i64{{.*}}} : memref<1024x1024xf64>, memref<3x32x64xf64, #warp.swizzled<5>, 3 : i64>
// CHECK:       warp.load_shared %[[SA]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>} : memref<3x128x32xf64, #warp.swizzled<5>, 3 : i64> -> !warp.frag<a, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
// CHECK-NEXT:  warp.load_shared %[[SA]][{{.*}}] after %{{.*}} {offsets = array<i64: 16, 0>} : memref<3x128x32xf64, #warp.swizzled<5>, 3 : i64>
// CHECK-NEXT:  warp.load_shared %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>} : memref<3x32x64xf64, #warp.swizzled<5>, 3 : i64> -> !warp.frag<b, f64, #warp.variant<m16n8k16, f64, f64, f64, f64>>
// CHECK-NEXT:  warp.load_shared %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 8>} : memref<3x32x64xf64, #warp.swizzled<5>, 3 : i64>
// CHECK-NEXT:  warp.load_shared %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 16>} : memref<3x32x64xf64, #warp.swizzled<5>, 3 : i64>
// CHECK-NEXT:  warp.load_shared %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 24>} : memref<3x32x64xf64, #warp.swizzled<5>, 3 : i64>
// CHECK:       warp.mma
// A (256-byte rows): rows g and g + 8 share one address (8 rows: 2048 bytes, a whole swizzle
// period: an immediate), each K column t, t + 4, t + 8, t + 12 its own, the phase the row times
// 5. B (512-byte rows): k rows t and t + 8 share one address, t + 4 and t + 12 another.
// PTX-LABEL:   .entry f64_rowmajor(
// PTX:         $k_loop_{{[0-9]+}}:
// PTX:         mul.lo.u32 [[AO:%r[0-9]+]], [[AO]], 5;
// PTX-NEXT:    and.b32 [[AO]], [[AO]], 7;
// PTX:         xor.b32 [[AO]], [[AO]], {{%r[0-9]+}};
// PTX-NEXT:    mad.lo.u32 [[AO]], {{%r[0-9]+}}, 256, [[AO]];
// PTX-NEXT:    add.u32 [[A:%r[0-9]+]], {{%r[0-9]+}}, [[AO]];
// PTX-NEXT:    ld.shared.f64 {{%fd[0-9]+}}, [[[A]]+0];
// PTX-NEXT:    ld.shared.f64 {{%fd[0-9]+}}, [[[A]]+2048];
// PTX:         mad.lo.u32 [[BO:%r[0-9]+]], {{%r[0-9]+}}, 512, [[BO]];
// PTX-NEXT:    add.u32 [[B:%r[0-9]+]], {{%r[0-9]+}}, [[BO]];
// PTX-NEXT:    ld.shared.f64 {{%fd[0-9]+}}, [[[B]]+0];
// PTX:         mad.lo.u32 [[BO4:%r[0-9]+]], {{%r[0-9]+}}, 512, [[BO4]];
// PTX-NEXT:    add.u32 [[B4:%r[0-9]+]], {{%r[0-9]+}}, [[BO4]];
// PTX-NEXT:    ld.shared.f64 {{%fd[0-9]+}}, [[[B4]]+0];
// PTX-NEXT:    ld.shared.f64 {{%fd[0-9]+}}, [[[B]]+4096];
// PTX-NEXT:    ld.shared.f64 {{%fd[0-9]+}}, [[[B4]]+4096];
// PTX:         mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64
// PTX-NOT:     ld.global.f64
// PTX:         bra.uni $k_loop
// SM80:        staged-f64.mlir:[[# @LINE + 8]]:3
// SM80:        stages=3: this kernel cannot be staged through shared memory: f64 staging needs m16n8k16 (sm_90); m8n8k4's K of 4 is a 32-byte shared row
// BIG:         staged-f64.mlir:[[# @LINE + 6]]:3
// BIG:         5 stages of K 64 with a 64x128 CTA tile need 491520 bytes of shared memory; a CTA has at most 232448 on sm_90 (227 KiB): use fewer stages or a smaller stage-k
func.func @f64_rowmajor(%a: memref<1024x1024xf64>, %b: memref<1024x1024xf64>, %d: memref<1024x1024xf64>) {
  %ta = tile.load %a[0, 0] : memref<1024x1024xf64> -> !tile.tile<1024x1024xf64>
  %tb = tile.load %b[0, 0] : memref<1024x1024xf64> -> !tile.tile<1024x1024xf64>
  %z = tile.constant 0.0 : !tile.tile<1024x1024xf64>
  %td = tile.mma %ta, %tb, %z : !tile.tile<1024x1024xf64>, !tile.tile<1024x1024xf64>, !tile.tile<1024x1024xf64> -> !tile.tile<1024x1024xf64>
  tile.store %td, %d[0, 0] : !tile.tile<1024x1024xf64>, memref<1024x1024xf64>
  func.return
}

// -----
// A K-major B: copies transpose it into N x K stages, read `transposed`.
// CHECK-LABEL: func.func @f64_kmajor
// CHECK:       memref.alloc() {alignment = 128 : i64} : memref<3x128x32xf64, #warp.swizzled<5>, 3 : i64>
// CHECK-NEXT:  %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<3x64x32xf64, #warp.swizzled<5>, 3 : i64>
// CHECK:       warp.copy_async %b[{{.*}}], %[[SB]][{{.*}}] {{.*}}transpose{{.*}}} : memref<1024x1024xf64, strided<[1, 1024]>>, memref<3x64x32xf64, #warp.swizzled<5>, 3 : i64>
// CHECK:       warp.load_shared %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>, transposed} : memref<3x64x32xf64, #warp.swizzled<5>, 3 : i64> -> !warp.frag<b, f64,
// PTX-LABEL:   .entry f64_kmajor(
// PTX:         ld.shared.f64
// PTX-NOT:     ld.global.f64
// PTX:         bra.uni $k_loop
func.func @f64_kmajor(%a: memref<1024x1024xf64>, %b: memref<1024x1024xf64, strided<[1, 1024]>>, %d: memref<1024x1024xf64>) {
  %ta = tile.load %a[0, 0] : memref<1024x1024xf64> -> !tile.tile<1024x1024xf64>
  %tb = tile.load %b[0, 0] : memref<1024x1024xf64, strided<[1, 1024]>> -> !tile.tile<1024x1024xf64>
  %z = tile.constant 0.0 : !tile.tile<1024x1024xf64>
  %td = tile.mma %ta, %tb, %z : !tile.tile<1024x1024xf64>, !tile.tile<1024x1024xf64>, !tile.tile<1024x1024xf64> -> !tile.tile<1024x1024xf64>
  tile.store %td, %d[0, 0] : !tile.tile<1024x1024xf64>, memref<1024x1024xf64>
  func.return
}

// -----
// tf32 with a row-major B takes the same B path: A through ldmatrix (rounded in registers), B
// from its K x N stage with warp.load_shared (ld.shared.b32, then rna: half a tf32 ulp added to a finite word), the phase
// multiplier 5 putting a fragment's 4 k rows x 32 bytes in 4 bank groups; the warp's columns start
// on a 128-byte line, so each n8 tile's column offset is an XOR of its row's address (`xor_columns`).
// Four stages: its 128 CTAs stay resident with them and K runs 32 stages (`configs.MORE_STAGES`).
// CHECK-LABEL: func.func @tf32_rowmajor
// CHECK-SAME:  warp.schedule = #warp.schedule<warps = 2x2, warp_tile = 2x8, stages = 4, stage_k = 32, reads = {{[a-z]+}}, group_m = 8
// CHECK:       %[[SA:.*]] = memref.alloc() {alignment = 128 : i64} : memref<4x64x32xf32, #warp.swizzled<1>, 3 : i64>
// CHECK-NEXT:  %[[SB:.*]] = memref.alloc() {alignment = 128 : i64} : memref<4x32x128xf32, #warp.swizzled<5>, 3 : i64>
// CHECK:       warp.ldmatrix %[[SA]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>, rounding = #tile<rounding rna>} : memref<4x64x32xf32, #warp.swizzled<1>, 3 : i64>
// CHECK:       warp.load_shared %[[SB]][{{.*}}] after %{{.*}} {offsets = array<i64: 0, 0>, xor_columns, rounding = #tile<rounding rna>} : memref<4x32x128xf32, #warp.swizzled<5>, 3 : i64> -> !warp.frag<b, tf32, #warp.variant<m16n8k8, f32, tf32, tf32, f32>>
// PTX-LABEL:   .entry tf32_rowmajor(
// PTX:         ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX:         ld.shared.b32 [[B0:%r[0-9]+]], [{{%r[0-9]+}}+0];
// PTX:         ld.shared.b32 [[B1:%r[0-9]+]], [{{%r[0-9]+}}+0];
// PTX-NEXT:    abs.f32 [[M0:%r[0-9]+]], [[B0]];
// PTX-NEXT:    setp.lt.f32 [[P0:%p[0-9]+]], [[M0]], 0f7F800000;
// PTX-NEXT:    @[[P0]] add.s32 [[B0]], [[B0]], 4096;
// PTX-NEXT:    abs.f32 [[M1:%r[0-9]+]], [[B1]];
// PTX-NEXT:    setp.lt.f32 [[P1:%p[0-9]+]], [[M1]], 0f7F800000;
// PTX-NEXT:    @[[P1]] add.s32 [[B1]], [[B1]], 4096;
// PTX:         mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// PTX-NOT:     ld.global.f32
// PTX:         bra.uni $k_loop
func.func @tf32_rowmajor(%a: memref<1024x1024xf32>, %b: memref<1024x1024xf32>, %d: memref<1024x1024xf32>) {
  %la = tile.load %a[0, 0] : memref<1024x1024xf32> -> !tile.tile<1024x1024xf32>
  %ta = tile.cast %la {rounding = #tile<rounding rna>} : !tile.tile<1024x1024xf32> -> !tile.tile<1024x1024xtf32>
  %lb = tile.load %b[0, 0] : memref<1024x1024xf32> -> !tile.tile<1024x1024xf32>
  %tb = tile.cast %lb {rounding = #tile<rounding rna>} : !tile.tile<1024x1024xf32> -> !tile.tile<1024x1024xtf32>
  %z = tile.constant 0.0 : !tile.tile<1024x1024xf32>
  %td = tile.mma %ta, %tb, %z : !tile.tile<1024x1024xtf32>, !tile.tile<1024x1024xtf32>, !tile.tile<1024x1024xf32> -> !tile.tile<1024x1024xf32>
  tile.store %td, %d[0, 0] : !tile.tile<1024x1024xf32>, memref<1024x1024xf32>
  func.return
}
