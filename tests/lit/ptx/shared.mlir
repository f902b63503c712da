// ptx.shared in a kernel: a static buffer prints inside the kernel, the dynamic one (.extern)
// just above it (PTX accepts .extern only at module scope); a bad alignment is a located error.
// RUN: %tilemma-opt %s -t ptx | filecheck %s
// RUN: not %tilemma-opt %S/Inputs/shared-bad-align.mlir 2>&1 | filecheck %s --check-prefix=ERR

builtin.module {
  ptx.module attributes {version = "8.0", target = "sm_90", address_size = "64"} {
    ptx.entry "k" [".u64 a"] {
      ptx.shared "dyn" "128"
      ptx.reg "b32" "%r" "8"
      ptx.shared "buf" "16" {size = "1024"}
      ptx.inst "mov.u32" ["%r1", "buf"]
      ptx.inst "mov.u32" ["%r2", "dyn"]
      ptx.inst "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" ["{%r3, %r4}", "[%r1]"]
      ptx.inst "ret" []
    }
  }
}

// CHECK:      .address_size 64
// CHECK-EMPTY:
// CHECK-NEXT: .extern .shared .align 128 .b8 dyn[];
// CHECK-EMPTY:
// CHECK-NEXT: .visible .entry k(
// CHECK:      {
// CHECK-NEXT:     .reg .b32 %r<8>;
// CHECK-NEXT:     .shared .align 16 .b8 buf[1024];
// CHECK-NEXT:     mov.u32 %r1, buf;
// CHECK-NEXT:     mov.u32 %r2, dyn;
// CHECK-NEXT:     ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r3, %r4}, [%r1];

// ERR: shared-bad-align.mlir:4:7
// ERR: ptx.shared buf: .align must be a power of two, got 24
