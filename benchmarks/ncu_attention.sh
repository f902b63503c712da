#!/bin/bash
# ncu and SASS of one attention shape: tilemma's kernel and SDPA's flash kernel (FA2) side by side.
# Run from the repository root on the GPU machine with tilemma installed; logs to $OUT.
#   SHAPE=16,16,1024,128 CAUSAL=no bash benchmarks/ncu_attention.sh
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
shape=${SHAPE:-16,16,1024,128}; causal=${CAUSAL:-no}
m=gpu__time_duration.sum,launch__registers_per_thread,smsp__warps_active.avg.per_cycle_active,smsp__warps_eligible.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__sass_thread_inst_executed_op_fp32_pred_on.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_global_st.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum,smsp__sass_inst_executed_op_local_ld.sum
for who in "tilemma:regex:^attention_" "fa2:regex:flash_fwd"; do
  name=${who%%:*}; k=${who#*:}
  timeout 200 ncu --metrics $m --section WarpStateStats --page raw -k $k --launch-skip 3 --launch-count 1 \
    python3 -m benchmarks.attention_bench --shapes $shape --causal $causal > $OUT/ncu_att_$name.txt 2>&1
  echo "== $name"; grep -E "gpu__time_duration.sum|registers_per_thread|warps_active.avg.per|warps_eligible|issue_active.avg.pct|hmma_cycles_active.avg.pct|inst_executed.sum |fp32_pred_on|bank_conflicts|op_shared_ld|op_global_st|global_op_st|op_local_ld" $OUT/ncu_att_$name.txt | awk '{print $1, $(NF-1), $NF}'
  grep -E "smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio" $OUT/ncu_att_$name.txt | awk '{print $NF, $1}' | sort -rn | head -6
done
# tilemma's SASS: the instruction mix of the kernel (loops included)
IFS=, read b h s d <<< "$shape"
tilemma attention --b $b --h $h --s $s --d $d $([ $causal = yes ] && echo --causal) | tilemma compile - --sm 90 -o /tmp/att.ptx
ptxas -arch=sm_90 -v /tmp/att.ptx -o /tmp/att.cubin 2>&1 | grep -E "registers|spill"
cuobjdump -sass /tmp/att.cubin > $OUT/att.sass
echo "SASS opcodes (whole kernel):"; grep -Eo '^\s+/\*[0-9a-f]+\*/\s+[@!P0-9 ]*[A-Z][A-Z0-9._]+' $OUT/att.sass | awk '{print $NF}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -24 | tr '\n' ' '; echo
