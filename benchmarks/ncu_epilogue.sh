#!/bin/bash
# ncu of epilogue_bench kernels at 4096^3 (plain, bias-relu, bias-gelu, s8-dequant): run from the
# repository root on the GPU machine with tilemma installed; logs to $OUT.
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
m=gpu__time_duration.sum,launch__registers_per_thread,smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active
for c in plain bias-relu bias-gelu s8-dequant; do
  timeout 120 ncu --metrics $m --section WarpStateStats --page raw -k regex:^epi_ --launch-skip 1 --launch-count 1 python3 -m benchmarks.launch_kernel epilogue:$c 4096 > $OUT/ncu_$c.txt 2>&1
  echo "== $c"; grep -E "gpu__time_duration.sum|registers_per_thread|warps_active.avg.per|issue_active.avg.pct|hmma_cycles_active.avg.pct|imma_cycles_active.avg.pct|inst_executed.sum |dram__throughput" $OUT/ncu_$c.txt | awk '{print $1, $(NF-1), $NF}'
  grep -E "smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio" $OUT/ncu_$c.txt | awk '{print $NF, $1}' | sort -rn | head -5
done
