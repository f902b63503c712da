// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics -p 'tile-select-mma{sm=90}' | filecheck %s
// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics -p 'tile-select-mma{sm=80}' | filecheck %s --check-prefix=SM80

// The largest exact instruction wins; matmul becomes mma with a zero accumulator.
// CHECK-LABEL: func.func @f16_matmul
// CHECK-SAME:  attributes {warp.target = #warp.target<"sm_90", "9.0">}
// CHECK:       %[[Z:.*]] = tile.constant 0.0 : !tile.tile<37x91xf16>
// CHECK-NEXT:  tile.mma %a, %b, %[[Z]] {variant = #warp.variant<m16n8k16, f16, f16, f16, f16>}
// SM80-LABEL:  func.func @f16_matmul
// SM80-SAME:   warp.target = #warp.target<"sm_80"
// SM80:        tile.mma %a, %b, %{{.*}} {variant = #warp.variant<m16n8k16, f16, f16, f16, f16>}
func.func @f16_matmul(%a: !tile.tile<37x53xf16>, %b: !tile.tile<53x91xf16>) {
  %r = tile.matmul %a, %b : !tile.tile<37x53xf16>, !tile.tile<53x91xf16> -> !tile.tile<37x91xf16>
  func.return
}

// -----
// int4 is emulated on sm_90 (28x slower than int8): exact widening to the s8 instruction there,
// native s4 on sm_80.
// CHECK-LABEL: func.func @s4_widened
// CHECK:      %[[A:.*]] = tile.cast %a : !tile.tile<16x64xsi4> -> !tile.tile<16x64xsi8>
// CHECK-NEXT: %[[B:.*]] = tile.cast %b : !tile.tile<64x8xui4> -> !tile.tile<64x8xui8>
// CHECK-NEXT: tile.mma %[[A]], %[[B]], %c {variant = #warp.variant<m16n8k32, s32, s8, u8, s32>}
// SM80-LABEL: func.func @s4_widened
// SM80-NOT:   tile.cast
// SM80:       tile.mma %a, %b, %c {variant = #warp.variant<m16n8k64, s32, s4, u4, s32>}
func.func @s4_widened(%a: !tile.tile<16x64xsi4>, %b: !tile.tile<64x8xui4>, %c: !tile.tile<16x8xsi32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<16x64xsi4>, !tile.tile<64x8xui4>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
  func.return
}

// -----
// A shape hint picks that instruction; satfinite and popc select the matching forms.
// CHECK-LABEL: func.func @hints
// CHECK: {mma_shape = "m8n8k4", variant = #warp.variant<m8n8k4, f32, f16, f16, f32>}
// CHECK: variant = #warp.variant<m16n8k16, s32, s8, s8, s32, satfinite>
// CHECK: variant = #warp.variant<m16n8k256, s32, b1, b1, s32, bitop = "and">
// CHECK: {variant = #warp.variant<m16n8k32, f32, e4m3, e5m2, f32>}
// SM80: select-mma.mlir:{{[0-9]+}}:3
// SM80: no mma.sync variant for e4m3 x e5m2 -> f32 on sm_80 with PTX 9.0: m16n8k16: needs sm_89 or newer; m16n8k32: needs sm_89 or newer
func.func @hints(%a: !tile.tile<16x16xf16>, %b: !tile.tile<16x16xf16>, %c: !tile.tile<16x16xf32>,
                 %x: !tile.tile<16x32xsi8>, %y: !tile.tile<32x8xsi8>, %z: !tile.tile<16x8xsi32>,
                 %p: !tile.tile<16x512xi1>, %q: !tile.tile<512x8xi1>,
                 %e: !tile.tile<16x64xf8E4M3FN>, %f: !tile.tile<64x8xf8E5M2>, %g: !tile.tile<16x8xf32>) {
  %0 = tile.mma %a, %b, %c {mma_shape = "m8n8k4"} : !tile.tile<16x16xf16>, !tile.tile<16x16xf16>, !tile.tile<16x16xf32> -> !tile.tile<16x16xf32>
  %1 = tile.mma %x, %y, %z {satfinite, mma_shape = "m16n8k16"} : !tile.tile<16x32xsi8>, !tile.tile<32x8xsi8>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
  %2 = tile.mma %p, %q, %z {popc = #tile<popc and>} : !tile.tile<16x512xi1>, !tile.tile<512x8xi1>, !tile.tile<16x8xsi32> -> !tile.tile<16x8xsi32>
  %3 = tile.mma %e, %f, %g : !tile.tile<16x64xf8E4M3FN>, !tile.tile<64x8xf8E5M2>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  func.return
}

// -----
// f32 operands only on request: 3xtf32 keeps f32 inputs and marks the split; tf32 rounds them.
// RUN: %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90 f32-precision=3xtf32}' | filecheck %s --check-prefix=SPLIT
// RUN: %tilemma-opt %s --split-input-file -p 'tile-select-mma{sm=90 f32-precision=tf32}' | filecheck %s --check-prefix=TF32
// CHECK:       f32 x f32 has no exact tensor-core instruction
// SM80:        f32 x f32 has no exact tensor-core instruction
// SPLIT-LABEL: func.func @f32_operands
// SPLIT-NOT:   tile.cast
// SPLIT:       tile.mma %a, %b, %c {split_tf32, variant = #warp.variant<m16n8k8, f32, tf32, tf32, f32>}
// TF32-LABEL:  func.func @f32_operands
// TF32:        %[[A:.*]] = tile.cast %a {rounding = #tile<rounding rna>} : !tile.tile<16x8xf32> -> !tile.tile<16x8xtf32>
// TF32:        tile.mma %[[A]], %{{.*}}, %c {variant = #warp.variant<m16n8k8, f32, tf32, tf32, f32>}
func.func @f32_operands(%a: !tile.tile<16x8xf32>, %b: !tile.tile<8x8xf32>, %c: !tile.tile<16x8xf32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<16x8xf32>, !tile.tile<8x8xf32>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  func.return
}
