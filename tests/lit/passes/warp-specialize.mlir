// A warpgroup kernel with a producer warpgroup copying by cp.async (`tile-plan{producers=4 tma=0}`,
// `warp-specialize`; by the TMA: warp-specialize-tma.mlir): the
// staged loop `warp-stage-shared` writes (copies dealt to threads 256-383, wait, barrier, wgmma) is
// split in two. Thread 0 makes two arrays of 4 mbarriers (full: 128 producer arrivals a phase;
// empty: 256 consumer arrivals), a CTA barrier publishes them; the producers (thread id >= 256)
// give back registers and loop over the stages plus the 2 they run ahead: wait for the stage's
// empty phase, copy it, commit, and from the third iteration on wait until 2 groups remain (the
// stage two back landed, fenced for the async proxy) and arrive at its full barrier; then they
// retire. The consumers take the registers, wait for each stage's full phase, multiply it (one
// stage's products in flight) and arrive at the empty barrier of the stage before.
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-plan{wgmma=true producers=4 tma=0},tile-distribute,tile-distribute-epilogue,warp-stage-shared,warp-specialize' | filecheck %s
// RUN: tilemma-opt %s -p 'tile-select-mma{sm=90a},tile-to-warp{wgmma=true producers=4 tma=0},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @ws
// CHECK-SAME:  stages = 4, stage_k = 64, {{.*}}mma = wgmma, producers = 4>{{.*}}warp.block = array<i64: 384, 1, 1>
// CHECK:       %[[FULL:.*]] = memref.alloc() {alignment = 8 : i64} : memref<4xi64, 3 : i64>
// CHECK:       %[[EMPTY:.*]] = memref.alloc() {alignment = 8 : i64} : memref<4xi64, 3 : i64>
// CHECK:       warp.mbarrier_init %[[FULL]] {count = 128 : i64}
// CHECK:       warp.mbarrier_init %[[EMPTY]] {count = 256 : i64}
// CHECK-NEXT:  "gpu.barrier"() : () -> ()
// CHECK:       %[[P:.*]] = arith.cmpi uge, %{{.*}}, %{{.*}} : index
// CHECK:       scf.if %[[P]] {
// CHECK-NEXT:    warp.set_max_registers {count = 40 : i64}
// CHECK:         scf.for
// CHECK:           scf.if
// CHECK:             warp.mbarrier_wait %[[EMPTY]][%{{.*}}], %{{.*}}
// CHECK:             warp.copy_async {{.*}}threads = 128 : i64, first_thread = 256 : i64
// CHECK:           warp.async_commit
// CHECK:           scf.if
// CHECK:             warp.async_wait {pending = 2 : i64, proxy_fence}
// CHECK:             warp.mbarrier_arrive %[[FULL]][%{{.*}}]
// CHECK:       warp.retire %[[P]]
// CHECK-NEXT:  warp.set_max_registers {count = 232 : i64, increase}
// CHECK:       scf.for
// CHECK:         %[[T:.*]] = warp.mbarrier_wait %[[FULL]][%{{.*}}], %{{.*}}
// CHECK:         warp.wgmma {{.*}} after %[[T]], {{.*}}pending = 1 : i64
// CHECK:         scf.if
// CHECK:           warp.mbarrier_arrive %[[EMPTY]][%{{.*}}]
// CHECK:       warp.wgmma_wait

// PTX:         .maxntid 384, 1, 1
// PTX:         mbarrier.init.shared::cta.b64 [{{%r[0-9]+}}], 128;
// PTX:         mbarrier.init.shared::cta.b64 [{{%r[0-9]+}}], 256;
// PTX:         bar.sync 0;
// PTX:         setmaxnreg.dec.sync.aligned.u32 40;
// PTX:         [[W:\$wait_[0-9]+]]:
// PTX-NEXT:    mbarrier.try_wait.parity.shared::cta.b64 [[D:%p[0-9]+]], [{{%r[0-9]+}}], {{%r[0-9]+}};
// PTX-NEXT:    @![[D]] bra.uni [[W]];
// PTX:         cp.async.cg.shared.global
// PTX:         cp.async.commit_group;
// PTX:         cp.async.wait_group 2;
// PTX-NEXT:    fence.proxy.async.shared::cta;
// PTX:         mbarrier.arrive.shared::cta.b64
// PTX:         ret;
// PTX-NEXT:    setmaxnreg.inc.sync.aligned.u32 232;
// PTX:         mbarrier.try_wait.parity.shared::cta.b64
// PTX:         wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// PTX:         wgmma.wait_group.sync.aligned 1;
// PTX:         mbarrier.arrive.shared::cta.b64
// PTX-NOT:     bar.sync
// PTX:         wgmma.wait_group.sync.aligned 0;
func.func @ws(%a: memref<512x512xf16>, %b: memref<512x512xf16>, %c: memref<512x512xf32>, %d: memref<512x512xf32>) {
  %ta = tile.load %a[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tb = tile.load %b[0, 0] : memref<512x512xf16> -> !tile.tile<512x512xf16>
  %tc = tile.load %c[0, 0] : memref<512x512xf32> -> !tile.tile<512x512xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<512x512xf16>, !tile.tile<512x512xf16>, !tile.tile<512x512xf32> -> !tile.tile<512x512xf32>
  tile.store %td, %d[0, 0] : !tile.tile<512x512xf32>, memref<512x512xf32>
  func.return
}
