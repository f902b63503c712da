#!/bin/bash
# ncu of one GEMM family at n^3: tilemma's kernel (its default configuration) and Triton's mma.sync
# path (DISABLE_MMA_V3=1) at one configuration, the same metrics side by side, and tilemma's SASS
# opcode mix. Run from the repository root on the GPU machine with tilemma installed; logs to $OUT.
#   FAMILY=tf32-brow SIZE=4096 TRITON=128,256,32,8,3 bash benchmarks/ncu_gemm.sh   (TRITON=none: tilemma only)
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
fam=${FAMILY:-tf32-brow}; n=${SIZE:-4096}; tcfg=${TRITON:-128,256,32,8,3}
m=gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_registers,smsp__warps_active.avg.per_cycle_active,smsp__warps_eligible.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_ldsm.sum,smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
show() {
  grep -E "gpu__time_duration.sum|registers_per_thread |occupancy_limit_registers|warps_active.avg.per|warps_eligible.avg|issue_active.avg.pct|hmma_cycles_active.avg.pct|inst_executed.sum |bank_conflicts_pipe_lsu_mem_shared.sum|op_shared_ld.sum|op_ldsm.sum|op_local_ld.sum|op_global_ld.sum|op_shared_st.sum|wavefronts_mem_shared_op_ld.sum|dram__throughput.avg" "$1" | awk '{print $1, $(NF-1), $NF}'
  grep -E "smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio" "$1" | awk '{print $NF, $1}' | sort -rn | head -6
}
timeout 200 ncu --metrics $m --section WarpStateStats --page raw -k regex:^gemm --launch-skip 1 --launch-count 1 \
  python3 -m benchmarks.launch_kernel $fam $n > $OUT/ncu_${fam}_tilemma.txt 2>&1
echo "== tilemma $fam $n"; show $OUT/ncu_${fam}_tilemma.txt; grep -E "^gemm" $OUT/ncu_${fam}_tilemma.txt | tail -1
python3 -m benchmarks.sass_check --families $fam --size $n --sass-dir $OUT | tail -4
[ "$tcfg" = none ] && exit 0
DISABLE_MMA_V3=1 timeout 200 ncu --metrics $m --section WarpStateStats --page raw -k regex:_matmul --launch-skip 1 --launch-count 1 \
  python3 -m benchmarks.launch_kernel $fam $n --triton $tcfg > $OUT/ncu_${fam}_triton.txt 2>&1
echo "== triton mma.sync $fam $n $tcfg"; show $OUT/ncu_${fam}_triton.txt; grep -E "^triton" $OUT/ncu_${fam}_triton.txt | tail -1
