// torch.bmm of f16 batches, 3 x (37 x 48) @ (48 x 29), as torch-mlir lowers aten.bmm (an f32
// accumulator, getDefaultAccType, truncated to f16), then
//   mlir-opt --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map"
//            --buffer-results-to-out-params="hoist-static-allocs modify-public-functions" --canonicalize
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module {
  func.func @forward(%arg0: memref<3x37x48xf16>, %arg1: memref<3x48x29xf16>, %arg2: memref<3x37x29xf16>) {
    %cst = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<3x37x29xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<3x37x29xf32>)
    linalg.batch_matmul ins(%arg0, %arg1 : memref<3x37x48xf16>, memref<3x48x29xf16>) outs(%alloc : memref<3x37x29xf32>)
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%alloc : memref<3x37x29xf32>) outs(%arg2 : memref<3x37x29xf16>) {
    ^bb0(%in: f32, %out: f16):
      %0 = arith.truncf %in : f32 to f16
      linalg.yield %0 : f16
    }
    return
  }
}
