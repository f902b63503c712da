#!/bin/bash
# The GPU checks of the staged f64 (and tf32 row-major B) path, in two device calls of < 7 minutes:
#   bash benchmarks/gpu_f64.sh check   # correctness sweep, sanitizer, SASS, ncu bank conflicts, config timings
#   bash benchmarks/gpu_f64.sh bench   # gemm_bench f64 (and tf32) against cuBLAS and Triton, 1024..8192
# Run from the repository root with tilemma installed; logs go to $OUT (default ./gpu-logs).
set -u
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
case ${1:?usage: gpu_f64.sh check|bench} in
check)
    S=$OUT/sweep.txt; : > "$S"
    sweep() { tilemma gemm $1 > /tmp/g.mlir && timeout 60 tilemma run /tmp/g.mlir --sm 90 --on gpu $2 >> "$S" 2>&1; echo "[$1 | $2] exit $?" >> "$S"; }
    sweep "--m 130 --n 70 --k 200 --a f64 --b f64 --acc f64" ""
    sweep "--m 130 --n 70 --k 200 --a f64 --b f64 --acc f64 --b-layout col" ""
    sweep "--m 37 --n 45 --k 83 --batch 3 --a f64 --b f64 --acc f64" ""
    sweep "--m 130 --n 70 --k 200 --a f64 --b f64 --acc f64" "--warps 2x4 --warp-tile 2x4 --stages 4"
    sweep "--m 130 --n 70 --k 200 --a f64 --b f64 --acc f64" "--warps 4x4 --warp-tile 2x2 --stages 3 --stage-k 32"
    sweep "--m 257 --n 129 --k 1000 --a f64 --b f64 --acc f64" "--warps 1x1 --warp-tile 1x1 --stages 5 --stage-k 64"
    sweep "--m 1000 --n 1000 --k 1000 --a f64 --b f64 --acc f64" ""
    sweep "--m 130 --n 70 --k 200 --batch 2 --a tf32 --b tf32 --acc f32" ""
    echo "== sweep"; grep -E "PASS|FAIL|error|exit" "$S" | cut -c1-160
    tilemma gemm --m 130 --n 70 --k 200 --batch 2 --a f64 --b f64 --acc f64 > "$OUT/s.mlir"
    for tool in memcheck racecheck; do
        timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 tilemma run "$OUT/s.mlir" --on gpu > "$OUT/san.$tool.txt" 2>&1
        echo "sanitizer $tool exit $? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors|RACECHECK SUMMARY: [0-9]+ hazards[^)]*' "$OUT/san.$tool.txt" | head -1)"
    done
    timeout 40 python3 -m benchmarks.sass_check --families f64 --size 4096 > "$OUT/sass.txt" 2>&1; echo "== sass"; tail -4 "$OUT/sass.txt"
    m=gpu__time_duration.sum,launch__registers_per_thread,smsp__warps_active.avg.per_cycle_active
    m=$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
    m=$m,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
    timeout 80 ncu --metrics $m --section WarpStateStats -k regex:gemm --launch-skip 1 --launch-count 1 \
        python3 -m benchmarks.launch_kernel f64 4096 > "$OUT/ncu_f64.txt" 2>&1
    echo "== ncu"; grep -E "duration|registers|warps_active|bank_conflicts|wavefronts|Stall [A-Z]" "$OUT/ncu_f64.txt" | head -20
    timeout 170 python3 -m benchmarks.gemm_bench --families f64 --sizes 4096 --skip triton triton-mma.sync --budget 160 \
        --tilemma-configs '' 'stages=0' 'warps=2x2,warp-tile=2x4,stages=4' 'warps=2x2,warp-tile=2x4,stages=3,stage-k=32' \
        'warps=2x4,warp-tile=2x4,stages=3' 'warps=4x2,warp-tile=2x4,stages=3' 'warps=2x2,warp-tile=4x2,stages=3' \
        'warps=4x4,warp-tile=2x2,stages=3' > "$OUT/configs.txt" 2>&1
    echo "== configs 4096"; sed -n '/^family/,$p' "$OUT/configs.txt" | head -20
    ;;
bench)
    timeout 400 python3 -m benchmarks.gemm_bench --families f64 --sizes 1024 2048 4096 8192 --budget 390 \
        --csv "$OUT/gemm_f64.csv" > "$OUT/bench.txt" 2>&1
    sed -n '/^family/,$p' "$OUT/bench.txt" | head -40
    ;;
esac
