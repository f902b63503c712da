#!/bin/bash
# One GPU session (one device call, under 7 minutes) for the pre-compressed sparse A: its GPU tests,
# compute-sanitizer memcheck + racecheck on an odd batched kernel (staged; memcheck also simple), the SASS
# of 4096^3 kernels (registers, spills, HMMA.SP), gemm_bench sparse-f16-pre at 1024..8192 and a
# configuration sweep at 4096 and 8192. Run from the repository root with tilemma installed:
#   OUT=logs bash benchmarks/sparse_pre_gpu.sh
set -u
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
s0=$SECONDS
timeout 130 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/gpu/test_sparse_precompressed_gpu.py > "$OUT/tests.txt" 2>&1
echo "pytest exit $? ($((SECONDS - s0)) s): $(grep -E 'passed|failed|error' "$OUT/tests.txt" | tail -1)"
grep -E "PASS|FAIL" "$OUT/tests.txt" | head -3
s0=$SECONDS
tilemma gemm --m 130 --n 70 --k 200 --batch 2 --a f16 --b f16 --acc f32 --sparse-a compressed > "$OUT/s.mlir"
for run in "memcheck -1" "racecheck -1" "memcheck 0"; do
    set -- $run
    timeout 90 compute-sanitizer --tool $1 --error-exitcode 9 tilemma run "$OUT/s.mlir" --on gpu --stages $2 > "$OUT/s.$1.$2.txt" 2>&1
    echo "sanitizer $1 stages=$2 exit $? $(grep -Eo 'ERROR SUMMARY: [0-9]+ errors|RACECHECK SUMMARY: [0-9]+ hazards[^)]*' "$OUT/s.$1.$2.txt" | head -1) $(grep -Eo 'PASS|FAIL' "$OUT/s.$1.$2.txt" | head -1)"
done
echo "sanitizer: $((SECONDS - s0)) s"
tilemma gemm --m 4096 --n 4096 --k 4096 --a f16 --b f16 --acc f32 --sparse-a compressed > "$OUT/big.mlir"
for cfg in "" "--warps 2x4 --warp-tile 4x8 --stage-k 32 --stages 4" "--warps 2x4 --warp-tile 4x8"; do
    tilemma compile "$OUT/big.mlir" --sm 90 $cfg --emit cubin -o "$OUT/big.cubin" || continue
    echo "SASS [$cfg]: $(cuobjdump -res-usage "$OUT/big.cubin" 2>&1 | grep -Eo 'REG:[0-9]+|STACK:[0-9]+|SHARED:[0-9]+' | tr '\n' ' ') HMMA.SP=$(cuobjdump -sass "$OUT/big.cubin" | grep -c 'HMMA.SP') HMMA(all)=$(cuobjdump -sass "$OUT/big.cubin" | grep -c 'HMMA') LDSM=$(cuobjdump -sass "$OUT/big.cubin" | grep -c 'LDSM') LDG=$(cuobjdump -sass "$OUT/big.cubin" | grep -c 'LDG') LDL=$(cuobjdump -sass "$OUT/big.cubin" | grep -c 'LDL')"
done
cuobjdump -sass "$OUT/big.cubin" > "$OUT/big_4x8.sass" 2>&1
s0=$SECONDS
timeout 110 python3 -m benchmarks.gemm_bench --families sparse-f16-pre --sizes 1024 2048 4096 8192 \
    --skip triton triton-mma.sync --csv "$OUT/bench.csv" --budget 95 > "$OUT/bench.txt" 2>&1
echo "bench exit $? ($((SECONDS - s0)) s)"
s0=$SECONDS
timeout 110 python3 -m benchmarks.gemm_bench --families sparse-f16-pre --sizes 4096 8192 --skip triton triton-mma.sync \
    --tilemma-configs "warps=2x4,warp-tile=4x8,stages=4,stage-k=32" "warps=2x4,warp-tile=4x4,stages=4" \
    "warps=2x4,warp-tile=4x4,stages=3,stage-k=128" "warps=4x2,warp-tile=4x4,stages=4" \
    --csv "$OUT/sweep.csv" --budget 95 > "$OUT/sweep.txt" 2>&1
echo "sweep exit $? ($((SECONDS - s0)) s)"
sed -n '/^family/,$p' "$OUT/bench.txt" | head -30
sed -n '/^family/,$p' "$OUT/sweep.txt" | head -40
