// RUN: tilemma compile %s --sm 90 --emit gpu-binary | filecheck %s
// RUN: tilemma compile %s --sm 90 --emit gpu-binary -o %t && filecheck %s < %t
// The kernel as an MLIR gpu.binary (PTX assembly, NUL-terminated) and a host function that
// launches it with the ABI's grid, block and dynamic shared memory (its odd rows are gathered into
// 16 KiB of stages), passing each memref's aligned pointer as i64.

func.func @k(%a: memref<37x45xf16>, %b: memref<45x29xf16>, %c: memref<37x29xf32, strided<[32, 1], offset: 3>>) {
  linalg.matmul ins(%a, %b : memref<37x45xf16>, memref<45x29xf16>) outs(%c : memref<37x29xf32, strided<[32, 1], offset: 3>>)
  func.return
}

// CHECK:      module attributes {gpu.container_module} {
// CHECK-NEXT:   gpu.binary @k_module [#gpu.object<#nvvm.target<chip = "sm_90">, properties = {O = 3 : i32}, assembly = ".version 9.0\0A.target sm_90\0A.address_size 64\0A\0A.extern .shared .align 128 .b8 smem[];\0A\0A.visible .entry k(\0A    .param .u64 p_a,\0A    .param .u64 p_b,\0A    .param .u64 p_c\0A)
// CHECK-SAME:   mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-SAME:   }\0A\00">]
// CHECK-NEXT:   func.func @k(%a: memref<37x45xf16>, %b: memref<45x29xf16>, %c: memref<37x29xf32, strided<[32, 1], offset: 3>>) {
// CHECK-DAG:      %c2 = arith.constant 2 : index
// CHECK-DAG:      %c1 = arith.constant 1 : index
// CHECK-DAG:      %c64 = arith.constant 64 : index
// CHECK-DAG:      %shared = arith.constant 16384 : i32
// CHECK:          %a_index = memref.extract_aligned_pointer_as_index %a : memref<37x45xf16> -> index
// CHECK-NEXT:     %a_ptr = arith.index_cast %a_index : index to i64
// CHECK:          %c_index = memref.extract_aligned_pointer_as_index %c : memref<37x29xf32, strided<[32, 1], offset: 3>> -> index
// CHECK:          %t0 = gpu.wait async
// CHECK-NEXT:     %done = gpu.launch_func async [%t0] @k_module::@k blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) dynamic_shared_memory_size %shared args(%a_ptr : i64, %b_ptr : i64, %c_ptr : i64)
// CHECK-NEXT:     gpu.wait [%done]
// CHECK-NEXT:     return
// CHECK-NEXT:   }
// CHECK-NEXT: }
