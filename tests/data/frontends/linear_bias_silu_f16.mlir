// torch.nn.Linear(64, 91) + SiLU in f16, 37 rows:
//   torch.nn.Sequential(nn.Linear(64, 91), nn.SiLU()).half()
// as torch-mlir lowers it (aten.silu decomposed into aten.sigmoid and aten.mul.Tensor: a
// sigmoid generic, then a generic multiplying it by its input), then
//   mlir-opt --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map"
//            --buffer-results-to-out-params="hoist-static-allocs modify-public-functions" --canonicalize
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @forward(%arg0: memref<37x64xf16>, %arg1: memref<91x64xf16>, %arg2: memref<91xf16>, %arg3: memref<37x91xf16>) {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 1.000000e+00 : f16
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<64x91xf16>
    linalg.transpose ins(%arg1 : memref<91x64xf16>) outs(%alloc : memref<64x91xf16>) permutation = [1, 0]
    %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<37x91xf32>
    linalg.fill ins(%cst : f32) outs(%alloc_1 : memref<37x91xf32>)
    linalg.matmul ins(%arg0, %alloc : memref<37x64xf16>, memref<64x91xf16>) outs(%alloc_1 : memref<37x91xf32>)
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<37x91xf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_1 : memref<37x91xf32>) outs(%alloc_2 : memref<37x91xf16>) {
    ^bb0(%in: f32, %out: f16):
      %0 = arith.truncf %in : f32 to f16
      linalg.yield %0 : f16
    }
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<37x91xf16>
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_2, %arg2 : memref<37x91xf16>, memref<91xf16>) outs(%alloc_3 : memref<37x91xf16>) {
    ^bb0(%in: f16, %in_5: f16, %out: f16):
      %0 = arith.addf %in, %in_5 : f16
      linalg.yield %0 : f16
    }
    %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<37x91xf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_3 : memref<37x91xf16>) outs(%alloc_4 : memref<37x91xf16>) {
    ^bb0(%in: f16, %out: f16):
      %0 = arith.negf %in : f16
      %1 = math.exp %0 : f16
      %2 = arith.addf %1, %cst_0 : f16
      %3 = arith.divf %cst_0, %2 : f16
      linalg.yield %3 : f16
    }
    linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_4, %alloc_3 : memref<37x91xf16>, memref<37x91xf16>) outs(%arg3 : memref<37x91xf16>) {
    ^bb0(%in: f16, %in_5: f16, %out: f16):
      %0 = arith.mulf %in, %in_5 : f16
      linalg.yield %0 : f16
    }
    return
  }
}
