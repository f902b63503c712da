// An int8 linear layer with per-token (row) and per-channel (column) dequantization scales, a
// bias and an f16 output, 37 tokens x 91 channels, K = 64:
//   out[m, n] = f16(f32(sum_k x[m, k] * w[n, k]) * sx[m] * sw[n] + f32(bias[n]))
// in the form IREE's global optimization leaves it (the weight stored N x K, read transposed
// by linalg.matmul's indexing_maps; i8 x i8 accumulated in i32; the dequantization fused into
// one generic), bufferized with
//   mlir-opt --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map"
//            --buffer-results-to-out-params="hoist-static-allocs modify-public-functions" --canonicalize
#map = affine_map<(d0, d1, d2) -> (d0, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0, d1)>
#map4 = affine_map<(d0, d1) -> (d0)>
#map5 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @qlinear(%x: memref<37x64xi8>, %w: memref<91x64xi8>, %sx: memref<37xf32>, %sw: memref<91xf32>, %bias: memref<91xf16>, %out: memref<37x91xf16>) {
    %c0_i32 = arith.constant 0 : i32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<37x91xi32>
    linalg.fill ins(%c0_i32 : i32) outs(%alloc : memref<37x91xi32>)
    linalg.matmul indexing_maps = [#map, #map1, #map2] ins(%x, %w : memref<37x64xi8>, memref<91x64xi8>) outs(%alloc : memref<37x91xi32>)
    linalg.generic {indexing_maps = [#map3, #map4, #map5, #map5, #map3], iterator_types = ["parallel", "parallel"]} ins(%alloc, %sx, %sw, %bias : memref<37x91xi32>, memref<37xf32>, memref<91xf32>, memref<91xf16>) outs(%out : memref<37x91xf16>) {
    ^bb0(%acc: i32, %s_x: f32, %s_w: f32, %b: f16, %o: f16):
      %0 = arith.sitofp %acc : i32 to f32
      %1 = arith.mulf %0, %s_x : f32
      %2 = arith.mulf %1, %s_w : f32
      %3 = arith.extf %b : f16 to f32
      %4 = arith.addf %2, %3 : f32
      %5 = arith.truncf %4 : f32 to f16
      linalg.yield %5 : f16
    }
    return
  }
}
