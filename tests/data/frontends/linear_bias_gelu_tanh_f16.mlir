// torch.nn.Linear(64, 91) + GELU(approximate="tanh") in f16, 37 rows:
//   torch.nn.Sequential(nn.Linear(64, 91), nn.GELU(approximate="tanh")).half()
// as torch-mlir lowers it (aten.linear -> aten.t + aten.matmul + aten.add.Tensor; the f16
// matmul accumulates in f32 and is truncated to f16, torch-mlir's getDefaultAccType; the tanh
// GELU's x^3 is math.fpowi), then
//   mlir-opt --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map"
//            --buffer-results-to-out-params=modify-public-functions --buffer-deallocation-pipeline --canonicalize
// Without hoist-static-allocs the result is computed into a buffer and copied to the out
// parameter (memref.copy), and the buffers are freed (memref.dealloc).
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @forward(%arg0: memref<37x64xf16>, %arg1: memref<91x64xf16>, %arg2: memref<91xf16>, %arg3: memref<37x91xf16>) {
    %c3_i64 = arith.constant 3 : i64
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 4.470825e-02 : f16
    %cst_1 = arith.constant 7.978516e-01 : f16
    %cst_2 = arith.constant 1.000000e+00 : f16
    %cst_3 = arith.constant 5.000000e-01 : f16
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<64x91xf16>
    linalg.transpose ins(%arg1 : memref<91x64xf16>) outs(%alloc : memref<64x91xf16>) permutation = [1, 0]
    %alloc_4 = memref.alloc() {alignment = 64 : i64} : memref<37x91xf32>
    linalg.fill ins(%cst : f32) outs(%alloc_4 : memref<37x91xf32>)
    linalg.matmul ins(%arg0, %alloc : memref<37x64xf16>, memref<64x91xf16>) outs(%alloc_4 : memref<37x91xf32>)
    memref.dealloc %alloc : memref<64x91xf16>
    %alloc_5 = memref.alloc() {alignment = 64 : i64} : memref<37x91xf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_4 : memref<37x91xf32>) outs(%alloc_5 : memref<37x91xf16>) {
    ^bb0(%in: f32, %out: f16):
      %0 = arith.truncf %in : f32 to f16
      linalg.yield %0 : f16
    }
    memref.dealloc %alloc_4 : memref<37x91xf32>
    %alloc_6 = memref.alloc() {alignment = 64 : i64} : memref<37x91xf16>
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_5, %arg2 : memref<37x91xf16>, memref<91xf16>) outs(%alloc_6 : memref<37x91xf16>) {
    ^bb0(%in: f16, %in_8: f16, %out: f16):
      %0 = arith.addf %in, %in_8 : f16
      linalg.yield %0 : f16
    }
    memref.dealloc %alloc_5 : memref<37x91xf16>
    %alloc_7 = memref.alloc() {alignment = 64 : i64} : memref<37x91xf16>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc_6 : memref<37x91xf16>) outs(%alloc_7 : memref<37x91xf16>) {
    ^bb0(%in: f16, %out: f16):
      %0 = math.fpowi %in, %c3_i64 : f16, i64
      %1 = arith.mulf %0, %cst_0 : f16
      %2 = arith.addf %in, %1 : f16
      %3 = arith.mulf %cst_1, %2 : f16
      %4 = math.tanh %3 : f16
      %5 = arith.addf %cst_2, %4 : f16
      %6 = arith.mulf %cst_3, %5 : f16
      %7 = arith.mulf %in, %6 : f16
      linalg.yield %7 : f16
    }
    memref.dealloc %alloc_6 : memref<37x91xf16>
    memref.copy %alloc_7, %arg3 : memref<37x91xf16> to memref<37x91xf16>
    memref.dealloc %alloc_7 : memref<37x91xf16>
    return
  }
}
