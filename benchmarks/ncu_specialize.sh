#!/bin/bash
# ncu of warpgroup kernels with and without a producer warpgroup (--producers 4), the same metrics
# side by side (or CONFIGS): FAMILIES (default f16 sparse-f16-pre) at SIZE^3. Run from the repository root on the
# GPU machine with tilemma installed; logs to $OUT.
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
n=${SIZE:-4096}
m=gpu__time_duration.sum,launch__registers_per_thread,smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
for fam in ${FAMILIES:-f16 sparse-f16-pre}; do
  for cfg in ${CONFIGS:-wgmma=1 wgmma=1,producers=4}; do
    f=$OUT/ncu_${fam}_${cfg//[=,]/_}.txt
    timeout 150 ncu --metrics $m --section WarpStateStats --page raw -k regex:^gemm --launch-skip 1 --launch-count 1 \
      python3 -m benchmarks.launch_kernel $fam $n $cfg > $f 2>&1
    echo "== $fam $n $cfg"
    grep -E "gpu__time_duration.sum|registers_per_thread |warps_active.avg.per|issue_active.avg.pct|gmma_cycles_active.avg.pct|sm__throughput.avg|bank_conflicts_pipe_lsu_mem_shared.sum|dram__throughput.avg" $f | awk '{print $1, $(NF-1), $NF}'
    grep -E "smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio" $f | awk '{print $NF, $1}' | sort -rn | head -4
  done
done
