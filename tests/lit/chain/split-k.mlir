// Split-K through the chain: tile-plan writes the split into the schedule (at most what
// split-k asks, whole stages each), tile-distribute gives grid z to the split, runs the loop over
// its part of K (loads at base + k) from zero and ends it with warp.split_k_publish, appending the
// workspace and the counters, and warp.split_k_sum, which adds the partials to C (loaded before
// the publish here: a thread holds both; test_split_k has kernels that load it after);
// warp-stage-shared stages that part from its base; warp-to-ptx stores the partials, counts the CTA and lets the last add them in order.
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{split-k=3}' | filecheck %s --check-prefix=PLAN
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{split-k=3},tile-distribute' | filecheck %s --check-prefix=DIST
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{split-k=3},tile-distribute,tile-distribute-epilogue,warp-stage-shared' | filecheck %s --check-prefix=STAGE
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-to-warp{split-k=3},warp-swizzle-shared,cse,warp-to-ptx' -t ptx | filecheck %s --check-prefix=PTX
// RUN: %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{split-k=3 stages=0},tile-distribute' | filecheck %s --check-prefix=SIMPLE
// RUN: not %tilemma-opt %s -p 'tile-select-mma{sm=90},tile-plan{split-k=17}' 2>&1 | filecheck %s --check-prefix=RANGE

func.func @g(%a: memref<64x1000xf16>, %b: memref<1000x32xf16>, %c: memref<64x32xf32>, %d: memref<64x32xf32>) {
  %ta = tile.load %a[0, 0] : memref<64x1000xf16> -> !tile.tile<64x1000xf16>
  %tb = tile.load %b[0, 0] : memref<1000x32xf16> -> !tile.tile<1000x32xf16>
  %tc = tile.load %c[0, 0] : memref<64x32xf32> -> !tile.tile<64x32xf32>
  %td = tile.mma %ta, %tb, %tc : !tile.tile<64x1000xf16>, !tile.tile<1000x32xf16>, !tile.tile<64x32xf32> -> !tile.tile<64x32xf32>
  tile.store %td, %d[0, 0] : !tile.tile<64x32xf32>, memref<64x32xf32>
  func.return
}

// 16 stages of K 64: three splits of 6 stages (384 elements), the last one 4.
// PLAN:        warp.schedule = #warp.schedule<{{.*}}stage_k = 64{{.*}}split_k = 3, split_chunk = 384>

// DIST-LABEL:  func.func @g(
// DIST-SAME:   %split_workspace: memref<{{[0-9]+}}xf32> {warp.role = ["split_workspace"]}, %split_counters: memref<1xui32> {warp.role = ["split_counters"], warp.init = 0 : i64}
// DIST-SAME:   warp.grid = array<i64: 1, 1, 3>
// DIST:        %[[Z:.*]] = "gpu.block_id"() <{dimension = #gpu<dim z>}>
// DIST:        %[[SPLIT:.*]] = arith.remui %[[Z]], %{{.*}} : index
// DIST:        %[[ZERO:.*]] = warp.constant 0.000000e+00
// DIST:        %[[BASE:.*]] = arith.muli %[[SPLIT]], %{{.*}}
// DIST:        %[[LEN:.*]] = arith.minui
// DIST:        scf.for %[[K:.*]] = %{{.*}} to %[[LEN]] step %{{.*}} iter_args(%{{.*}} = %[[ZERO]]
// DIST:        %[[AT:.*]] = arith.addi %[[BASE]], %[[K]]
// DIST:        warp.load %a[%{{.*}}, %{{.*}}, %[[AT]]]
// DIST:        scf.yield
// DIST:        warp.load %c
// DIST:        warp.split_k_publish({{.*}}) split %[[SPLIT]] of 3 : i64 tile %[[TILE:[0-9]+]] in %split_workspace, %split_counters
// DIST-NEXT:   warp.split_k_sum({{.*}}) of 3 : i64 tile %[[TILE]] in %split_workspace
// DIST-NEXT:   warp.distributed

// STAGE:       %[[Z:.*]] = "gpu.block_id"() <{dimension = #gpu<dim z>}>
// STAGE:       %[[SPLIT:.*]] = arith.remui %[[Z]], %{{.*}} : index
// STAGE:       %[[BASE:.*]] = arith.muli %[[SPLIT]], %{{.*}} : index
// STAGE:       scf.for %[[KT:.*]] = %{{.*}} to %{{.*}}
// STAGE:       %[[SCALED:.*]] = arith.muli %[[KT]], %{{.*}} : index
// STAGE-NEXT:  %[[K:.*]] = arith.addi %[[SCALED]], %[[BASE]] : index
// STAGE:       warp.copy_async %a[%{{.*}}, %{{.*}}, %[[K]]]
// STAGE:       warp.split_k_publish
// STAGE:       warp.split_k_sum

// PTX:         .visible .entry g(
// PTX:         .param .u64 p_split_workspace,
// PTX-NEXT:    .param .u64 p_split_counters
// PTX:         ld.global.v2.f32
// PTX:         // split-K: 3 CTAs meet in the workspace; the last adds the partials in split order
// PTX:         st.global.f32
// PTX:         fence.acq_rel.gpu;
// PTX-NEXT:    bar.sync 0;
// PTX:         atom.global.add.u32 %r{{[0-9]+}}, [%rd{{[0-9]+}}], 1;
// PTX-NEXT:    setp.eq.u32 [[LAST:%p[0-9]+]], %r{{[0-9]+}}, 2;
// PTX:         bar.red.or.pred [[LAST]], 0, [[LAST]];
// PTX-NEXT:    @![[LAST]] ret;
// PTX-NEXT:    st.global.u32 [%rd{{[0-9]+}}], 0;
// PTX:         ld.global.cg.f32
// PTX-NEXT:    add.rn.f32

// On the simple schedule the split covers whole instructions' K: 63 steps of 16, 21 a split.
// SIMPLE:      warp.schedule = #warp.schedule<warps = {{.*}}, stages = 0, split_k = 3, split_chunk = 336>
// SIMPLE:      warp.split_k_publish
// SIMPLE:      warp.split_k_sum

// RANGE:       split-k must be 0 (automatic), 1 (none) or up to 16, got 17
