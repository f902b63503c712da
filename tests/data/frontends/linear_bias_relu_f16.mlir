// torch.nn.Linear(64, 91) + ReLU in f16, 37 rows:
//   torch.nn.Sequential(nn.Linear(64, 91), nn.ReLU()).half()
// as torch-mlir lowers it (aten.relu: arith.cmpf ugt + arith.select against 0), then
//   mlir-opt --linalg-fuse-elementwise-ops
//            --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map"
//            --buffer-results-to-out-params="hoist-static-allocs modify-public-functions" --canonicalize
// Elementwise fusion leaves one generic after the matmul (truncation, bias and ReLU).
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @forward(%arg0: memref<37x64xf16>, %arg1: memref<91x64xf16>, %arg2: memref<91xf16>, %arg3: memref<37x91xf16>) {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0.000000e+00 : f16
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<64x91xf16>
    linalg.transpose ins(%arg1 : memref<91x64xf16>) outs(%alloc : memref<64x91xf16>) permutation = [1, 0]
    %alloc_1 = memref.alloc() {alignment = 64 : i64} : memref<37x91xf32>
    linalg.fill ins(%cst : f32) outs(%alloc_1 : memref<37x91xf32>)
    linalg.matmul ins(%arg0, %alloc : memref<37x64xf16>, memref<64x91xf16>) outs(%alloc_1 : memref<37x91xf32>)
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_1, %arg2 : memref<37x91xf32>, memref<91xf16>) outs(%arg3 : memref<37x91xf16>) {
    ^bb0(%in: f32, %in_2: f16, %out: f16):
      %0 = arith.truncf %in : f32 to f16
      %1 = arith.addf %0, %in_2 : f16
      %2 = arith.cmpf ugt, %1, %cst_0 : f16
      %3 = arith.select %2, %1, %cst_0 : f16
      linalg.yield %3 : f16
    }
    return
  }
}
