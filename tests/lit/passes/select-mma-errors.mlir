// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics -p 'tile-select-mma{sm=80}' | filecheck %s
// RUN: %tilemma-opt %s --split-input-file --verify-diagnostics -p 'tile-select-mma{sm=75}' | filecheck %s --check-prefix=SM75
// When no instruction fits, the error is located and says why and what would.

func.func @f64_k16(%a: !tile.tile<16x16xf64>, %b: !tile.tile<16x8xf64>, %c: !tile.tile<16x8xf64>) {
  %r = tile.mma %a, %b, %c {mma_shape = "m16n8k16"} : !tile.tile<16x16xf64>, !tile.tile<16x8xf64>, !tile.tile<16x8xf64> -> !tile.tile<16x8xf64>
  func.return
}
// CHECK: select-mma-errors.mlir:6:3
// CHECK: tile.mma: no mma.sync variant for f64 x f64 -> f64 on sm_80 with PTX 9.0: m16n8k16: needs sm_90 or newer; on sm_80 use m8n8k4

// -----
func.func @f32_operands(%a: !tile.tile<16x8xf32>, %b: !tile.tile<8x8xf32>, %c: !tile.tile<16x8xf32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<16x8xf32>, !tile.tile<8x8xf32>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: tile.mma: f32 x f32 has no exact tensor-core instruction: pass f32-precision=3xtf32 (three tf32 mmas on hi/lo parts, close to f32 accuracy) or f32-precision=tf32

// -----
func.func @bf16_on_turing(%a: !tile.tile<16x16xbf16>, %b: !tile.tile<16x8xbf16>) {
  %r = tile.matmul %a, %b : !tile.tile<16x16xbf16>, !tile.tile<16x8xbf16> -> !tile.tile<16x8xf32>
  func.return
}
// SM75: no mma.sync variant for bf16 x bf16 -> f32 on sm_75 with PTX 9.0: {{.*}}needs sm_80 or newer

// -----
func.func @fp8_on_ampere(%a: !tile.tile<16x32xf8E4M3FN>, %b: !tile.tile<32x8xf8E4M3FN>, %c: !tile.tile<16x8xf32>) {
  %r = tile.mma %a, %b, %c : !tile.tile<16x32xf8E4M3FN>, !tile.tile<32x8xf8E4M3FN>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
  func.return
}
// CHECK: no mma.sync variant for e4m3 x e4m3 -> f32 on sm_80 with PTX 9.0: {{.*}}needs sm_89 or newer
