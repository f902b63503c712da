// RUN: not tilemma compile %s 2>&1 | filecheck %s
// RUN: not tilemma run %s --on emulator 2>&1 | filecheck %s
// A kernel written as a gpu.func is refused where it stands, saying what is supported (it used
// to be skipped with "no kernel" or "run tile-select-mma first").

builtin.module attributes {gpu.container_module} {
  "gpu.module"() <{sym_name = "kernels"}> ({
    "gpu.func"() ({
    ^bb0(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32>):
      %ta = tile.load %a[0, 0] : memref<16x16xf16> -> !tile.tile<16x16xf16>
      %tb = tile.load %b[0, 0] : memref<16x8xf16> -> !tile.tile<16x8xf16>
      %tc = tile.load %c[0, 0] : memref<16x8xf32> -> !tile.tile<16x8xf32>
      %td = tile.mma %ta, %tb, %tc : !tile.tile<16x16xf16>, !tile.tile<16x8xf16>, !tile.tile<16x8xf32> -> !tile.tile<16x8xf32>
      tile.store %td, %c[0, 0] : !tile.tile<16x8xf32>, memref<16x8xf32>
      "gpu.return"() : () -> ()
    }) {function_type = (memref<16x16xf16>, memref<16x8xf16>, memref<16x8xf32>) -> (), sym_name = "k", gpu.kernel} : () -> ()
  }) : () -> ()
}
// CHECK: {{.*}}gpu-func-kernel.mlir:8:5: error: gpu.func: kernels inside gpu.module/gpu.func are not supported: write the kernel as a top-level func.func taking its memrefs
// CHECK-NEXT: "gpu.func"() ({
