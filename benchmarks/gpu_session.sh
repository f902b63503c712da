#!/bin/bash
# Everything a GPU session checks, in steps that each fit one device call (10 minutes):
#   bash benchmarks/gpu_session.sh tests|sanitize|configs|check|bench|layouts|fill|attention|bench-epilogue|matrix|profile|wgmma|specialize|sparse|tma|transpose|transpose-first|rounding|prepass
# Run from the repository root with tilemma installed; logs go to $OUT (default ./gpu-logs); each
# step ends with a short summary on stdout.
set -u
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
step=${1:?usage: gpu_session.sh tests|sanitize|configs|check|bench|layouts|fill|attention|bench-epilogue|matrix|profile|wgmma|specialize|sparse|tma|transpose|transpose-first|rounding|prepass}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"

# compute-sanitizer's TOOLS (e.g. "memcheck racecheck") on `tilemma run IR --on gpu FLAGS...`, each
# within SECONDS, one line a tool (LABEL, exit status, the tool's summary, the run's PASS/FAIL);
# logs in $OUT/sanitize-N.TOOL.txt
sanitize_runs=0
sanitize() {
    local label=$1 ir=$2 tools=$3 seconds=$4 tool log; shift 4
    sanitize_runs=$((sanitize_runs + 1))
    for tool in $tools; do
        log="$OUT/sanitize-$sanitize_runs.$tool.txt"
        timeout "$seconds" compute-sanitizer --tool "$tool" --error-exitcode 9 tilemma run "$ir" --on gpu "$@" > "$log" 2>&1
        printf '%-58s %-9s exit %s  %s  %s\n' "$label" "$tool" $? \
            "$(grep -Eo 'ERROR SUMMARY: [0-9]+ errors|RACECHECK SUMMARY: [0-9]+ hazards[^)]*' "$log" | head -1)" \
            "$(grep -Eo 'PASS|FAIL' "$log" | head -1)"
    done
}

# memcheck and racecheck of `tilemma run` on kernels of these sizes ($1) and types/layouts ($2...)
sanitized() {
    local sizes=$1 k; shift
    for k in "$@"; do
        tilemma gemm $sizes $k > /tmp/l.mlir || continue
        sanitize "$k" /tmp/l.mlir "memcheck racecheck" 120
    done
}

case $step in
wgmma)  # warpgroup kernels (--wgmma, sm_90a): their GPU tests, memcheck / racecheck, then the 16-bit
    # families they take at the matrix's shapes against mma.sync, Triton (both paths) and cuBLAS
    # (FAMILIES=sparse-f16-pre: the sparse ones against mma.sp and cuSPARSELt; FAMILIES=s8: 8-bit integers;
    # FAMILIES='tf32 tf32-brow tf32-acol tf32-acol-brow': tf32)
    # BENCH_ONLY=1: the benchmark alone
    [ -n "${BENCH_ONLY:-}" ] || {
    timeout 400 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_wgmma_gpu.py > "$OUT/wgmma_tests.txt" 2>&1
    echo "wgmma tests: $(tail -1 "$OUT/wgmma_tests.txt")"; grep -E "^FAILED|^ERROR" "$OUT/wgmma_tests.txt" | head -5
    for k in "--a f16 --b f16 --acc f32" "--a bf16 --b bf16 --acc f32 --b-layout col" "--a f16 --b f16 --acc f32 --sparse-a compressed" \
             "--a f16 --b f16 --acc f32 --sparse-a compressed --b-layout col" "--a s8 --b s8 --acc s32 --b-layout col" \
             "--a tf32 --b tf32 --acc f32" "--a tf32 --b tf32 --acc f32 --a-layout col --b-layout col --rounding rz"; do
        tilemma gemm --m 200 --n 136 --k 200 --batch 2 $k > /tmp/w.mlir
        sanitize "$k" /tmp/w.mlir "memcheck racecheck" 200 --sm 90a --wgmma
    done
    }
    shapes=$(python3 -c "from benchmarks.matrix import SHAPES; print(' '.join('x'.join(map(str, s)) for s in SHAPES))")
    timeout 560 python3 -m benchmarks.gemm_bench --families ${FAMILIES:-f16 f16-bcol bf16 bf16-bcol} --shapes ${SHAPES:-$shapes} \
        --tilemma-configs '' 'wgmma=1' --samples 6 --warmup-ms 20 --budget ${BUDGET:-420} --csv "$OUT/wgmma.csv" 2>&1 | tail -5
    ;;
specialize)  # warp-specialized warpgroup kernels (--producers 4): the mbarrier kernel and their GPU tests,
    # memcheck / racecheck, then FAMILIES at SHAPES unspecialized and specialized against cuBLAS (and Triton
    # unless SKIP says otherwise). BENCH_ONLY=1: the benchmark alone
    [ -n "${BENCH_ONLY:-}" ] || {
    timeout 300 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_specialize_gpu.py tests/test_emulator_mbarrier.py \
        > "$OUT/specialize_tests.txt" 2>&1
    echo "specialize tests: $(tail -1 "$OUT/specialize_tests.txt")"; grep -E "^FAILED|^ERROR" "$OUT/specialize_tests.txt" | head -5
    for k in "--a f16 --b f16 --acc f32" "--a f16 --b f16 --acc f32 --sparse-a compressed" "--a s8 --b s8 --acc s32 --b-layout col" \
             "--a tf32 --b tf32 --acc f32 --b-layout col"; do
        tilemma gemm --m 200 --n 136 --k 400 --batch 2 $k > /tmp/w.mlir
        sanitize "$k" /tmp/w.mlir "memcheck racecheck synccheck" 200 --sm 90a --wgmma --producers 4
    done
    }
    timeout 560 python3 -m benchmarks.gemm_bench --sm 90a --families ${FAMILIES:-f16 tf32 tf32-trunc s8 sparse-f16-pre} \
        --shapes ${SHAPES:-4096x4096x4096 8192x8192x8192} --tilemma-configs '' 'wgmma=1,producers=4' ${SKIP:-} \
        --samples 6 --warmup-ms 20 --budget ${BUDGET:-420} --csv "$OUT/specialize.csv" 2>&1 | tail -${TAIL:-40}
    ;;
sparse)  # sparse warpgroups with a stage in flight (warp-unroll-sparse): their GPU tests, memcheck /
    # racecheck of an unrolled kernel with one stage left over, pipelined and specialized, then CONFIGS
    # (and the default) at SHAPES against cuSPARSELt and cuBLAS (dense). BENCH_ONLY=1: the benchmark alone
    [ -n "${BENCH_ONLY:-}" ] || {
    timeout 300 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_wgmma_gpu.py -k sparse \
        tests/gpu/test_specialize_gpu.py > "$OUT/sparse_tests.txt" 2>&1
    echo "sparse tests: $(tail -1 "$OUT/sparse_tests.txt")"; grep -E "^FAILED|^ERROR" "$OUT/sparse_tests.txt" | head -5
    tilemma gemm --m 200 --n 136 --k 1000 --a f16 --b f16 --acc f32 --sparse-a compressed > /tmp/s.mlir
    for p in 0 4; do
        sanitize "producers $p" /tmp/s.mlir "memcheck racecheck" 200 --sm 90a --wgmma --producers $p
    done
    }
    read -ra configs <<< "${CONFIGS:-}"  # besides the default: e.g. CONFIGS='producers=4 stages=3'
    timeout 560 python3 -m benchmarks.gemm_bench --sm 90a --families ${FAMILIES:-sparse-f16-pre sparse-f16-pre-bcol} \
        --shapes ${SHAPES:-4096x4096x4096 8192x8192x8192} --tilemma-configs '' "${configs[@]}" --skip triton triton-mma.sync \
        --samples 5 --warmup-ms 15 --budget ${BUDGET:-480} --csv "$OUT/sparse.csv" 2>&1 | tail -${TAIL:-40}
    ;;
tma)  # the producers' copies by the TMA (--tma 1), clusters sharing B (--cluster 2) and persistent CTAs
    # (--persistent N): the tensor-map launch paths', the cluster probe's and the TMA kernels' GPU tests, memcheck /
    # racecheck / synccheck of TMA, cluster and persistent kernels, then FAMILIES at SHAPES with cp.async producers,
    # the TMA's, clusters and persistent CTAs against cuBLAS / cuSPARSELt (Triton when SKIP is cleared).
    # BENCH_ONLY=1: the benchmark alone
    [ -n "${BENCH_ONLY:-}" ] || {
    timeout 300 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_tma_gpu.py tests/gpu/test_tma_launch_gpu.py \
        "tests/gpu/test_specialize_gpu.py::test_tma_like_the_mma_sync_kernel" \
        "tests/gpu/test_specialize_gpu.py::test_like_the_simpler_kernel" \
        "tests/gpu/test_specialize_gpu.py::test_cluster_like_the_mma_sync_kernel" \
        "tests/gpu/test_specialize_gpu.py::test_persistent_like_the_mma_sync_kernel" > "$OUT/tma_tests.txt" 2>&1
    echo "tma tests: $(tail -1 "$OUT/tma_tests.txt")"; grep -E "^FAILED|^ERROR" "$OUT/tma_tests.txt" | head -5
    for k in "--a f16 --b f16 --acc f32" "--a f16 --b f16 --acc f32 --sparse-a compressed" "--a s8 --b s8 --acc s32 --b-layout col" \
             "--a bf16 --b bf16 --acc f32 --a-layout col --b-layout col"; do
        tilemma gemm --m 200 --n 136 --k 400 --batch 2 $k > /tmp/w.mlir
        sanitize "$k" /tmp/w.mlir "memcheck racecheck synccheck" 200 --sm 90a --wgmma --producers 4 --tma 1
    done
    for k in "--a f16 --b f16 --acc f32" "--a f16 --b f16 --acc f32 --sparse-a compressed"; do  # clusters of 2
        tilemma gemm --m 256 --n 136 --k 400 --batch 2 $k > /tmp/w.mlir
        sanitize "cluster 2: $k" /tmp/w.mlir "memcheck racecheck synccheck" 200 --sm 90a --wgmma --producers 4 --tma 1 --cluster 2
    done
    for k in "--a f16 --b f16 --acc f32 --sparse-a compressed" "--a f16 --b f16 --acc f32 --b-layout col"; do  # 2 CTAs, 8 tiles
        tilemma gemm --m 256 --n 256 --k 512 $k > /tmp/w.mlir
        sanitize "persistent 2: $k" /tmp/w.mlir "memcheck racecheck synccheck" 200 --sm 90a --wgmma --producers 4 --tma 1 \
            --persistent 2 --warps 8x1 --warp-tile 1x8
    done
    }
    timeout 560 python3 -m benchmarks.gemm_bench --sm 90a --families ${FAMILIES:-sparse-f16-pre sparse-f16-pre-bcol f16 s8} \
        --shapes ${SHAPES:-4096x4096x4096 8192x8192x8192} --tilemma-configs ${CONFIGS:-'' 'wgmma=1,producers=4,tma=0' 'wgmma=1,producers=4,tma=1' 'wgmma=1,producers=4,tma=1,cluster=2' 'wgmma=1,producers=4,tma=1,persistent=132'} \
        ${SKIP:---skip triton triton-mma.sync} --samples 5 --warmup-ms 15 --budget ${BUDGET:-420} --csv "$OUT/tma.csv" 2>&1 | tail -${TAIL:-40}
    ;;
transpose)  # an 8-bit N-major B transposed in shared memory (`#warp.schedule` transpose): its GPU tests,
    # memcheck / racecheck / synccheck of one odd batched kernel, then s8 with A M-major and B N-major at
    # SHAPES by default against the kernel without it (mma.sync), samples interleaved
    timeout 300 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_transpose_stage_gpu.py > "$OUT/transpose_tests.txt" 2>&1
    echo "transpose tests: $(tail -1 "$OUT/transpose_tests.txt")"; grep -E "^FAILED|^ERROR" "$OUT/transpose_tests.txt" | head -5
    tilemma gemm --m 200 --n 272 --k 456 --batch 2 --a s8 --b s8 --acc s32 --a-layout col > /tmp/t.mlir
    sanitize "s8 A col, B row (transposed in shared)" /tmp/t.mlir "memcheck racecheck synccheck" 200 --sm 90a --wgmma
    timeout 330 python3 -m benchmarks.config_ab --family s8-acol-brow --sm 90a --rounds 2 --csv "$OUT/transpose-ab.csv" \
        --shapes ${SHAPES:-4096 512x4096x4096 4096x11008x4096 4096x4096x11008 512x11008x4096 2048x2048x256} \
        --configs '' 'shared-transpose=0' 2>&1 | grep -E "x[0-9]|tilemma|cublas"
    ;;
rounding)  # issue 23's tf32-acol-brow cells: the rna kernel against its truncating twin at SHAPE (default
    # 512x4096x4096): SASS opcode counts (cuobjdump) and ncu's instruction counts, issue and tensor-pipe use
    shape=${SHAPE:-512x4096x4096}; IFS=x read -r M N K <<< "$shape"
    m=gpu__time_duration.sum,launch__registers_per_thread,smsp__inst_executed.sum,smsp__inst_executed_pipe_alu.sum
    m=$m,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_lsu.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
    m=$m,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
    for r in rna trunc; do
        tilemma gemm --m $M --n $N --k $K --a tf32 --b tf32 --acc f32 --a-layout col --rounding $r --no-c > /tmp/tf32_$r.mlir
        python3 -m benchmarks.sass_check --ir /tmp/tf32_$r.mlir --sm 90a --sass-dir "$OUT/sass_$r" > "$OUT/sass_$r.txt" 2>&1
        fam=tf32-acol-brow; [ $r = trunc ] && fam=tf32-acol-brow-trunc
        timeout 150 ncu --metrics $m --section WarpStateStats --page raw -k regex:^gemm_ --launch-skip 1 --launch-count 1 \
            python3 -m benchmarks.launch_kernel $fam $shape --sm 90a > "$OUT/ncu_$r.txt" 2>&1
    done
    for r in rna trunc; do
        s=$(ls "$OUT"/sass_$r/*.sass); echo "== $r $shape: $(grep -m1 -E 'gemm' "$OUT/sass_$r.txt" | tr -s ' ')"
        echo "SASS: $(grep -oE '^\s*/\*[0-9a-f]+\*/\s+(@!?U?P[T0-9]+\s+)?[A-Z][A-Z0-9_.]*' "$s" | awk '{print $NF}' | sed 's/\..*//' \
            | sort | uniq -c | sort -rn | awk '{printf "%s %s, ", $2, $1}' | head -c 600)"
        grep -E "^  [a-z]" "$OUT/ncu_$r.txt" | grep -E "duration|registers|inst_executed|issue_active|gmma|dram" | awk '{print $1, $(NF-1), $NF}'
        grep -E "smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio" "$OUT/ncu_$r.txt" | awk '{print $NF, $1}' | sort -rn | head -4
    done
    ;;
prepass)  # issue 23's s8 with both operands MN-major: B transposed by a kernel of its own (Triton's, torch's)
    # into a K-major workspace, then the A-M-major kernel, against the in-kernel transpose and the K-major kernel
    timeout 400 python3 -m benchmarks.transpose_prepass ${SHAPES:+--shapes $SHAPES} --csv "$OUT/prepass.csv" 2>&1 | tail -12
    ;;
transpose-first)  # an 8-bit N-major B transposed first by a kernel of its own (`tile-transpose-first`): its GPU
    # tests and the launch paths' (two shards at once), memcheck / racecheck of both launches, then transpose_prepass
    timeout 300 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_transpose_first_gpu.py \
        tests/gpu/test_transpose_stage_gpu.py > "$OUT/transpose_first_tests.txt" 2>&1 &
    timeout 300 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_api_gpu.py tests/gpu/test_launch_torch_gpu.py \
        tests/gpu/test_split_k_gpu.py > "$OUT/launch_tests.txt" 2>&1
    wait
    for f in transpose_first_tests launch_tests; do
        echo "$f: $(tail -1 "$OUT/$f.txt")"; grep -E "^FAILED|^ERROR" "$OUT/$f.txt" | head -5
    done
    tilemma gemm --m 200 --n 272 --k 464 --a s8 --b s8 --acc s32 --a-layout col > /tmp/t.mlir
    sanitize "s8 A col, B row (transposed first)" /tmp/t.mlir "memcheck racecheck" 200 --sm 90a --transpose-first 1
    timeout 300 python3 -m benchmarks.transpose_prepass ${SHAPES:+--shapes $SHAPES} --csv "$OUT/prepass.csv" 2>&1 | tail -8
    ;;
tests)  # every GPU test (pytest -m gpu) in five shards at once, and what was skipped and why (H200,
    # 2026-11-28: the specialize + wgmma + TMA files in one shard took 505 s of 540, now two shards)
    late="tests/gpu/test_specialize_gpu.py tests/gpu/test_wgmma_gpu.py"
    tma="tests/gpu/test_tma_gpu.py tests/gpu/test_tma_launch_gpu.py"
    shards=("tests/gpu/test_dense_gpu.py" "tests/gpu --ignore=tests/gpu/test_dense_gpu.py $(printf -- ' --ignore=%s' $late $tma)"
            "$late" "$tma" "tests --ignore=tests/gpu")
    for i in 0 1 2 3 4; do
        timeout 540 python3 -m pytest -q -m gpu -rs -p no:cacheprovider ${shards[$i]} > "$OUT/gpu_tests$i.txt" 2>&1 &
    done
    wait
    for i in 0 1 2 3 4; do echo "shard $i: $(tail -1 "$OUT/gpu_tests$i.txt")"; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests$i.txt" | head -5; done
    ;;
check)  # tests, sanitize and the forced-configuration checks at once (all correctness, one call)
    BUNDLE= bash "$0" tests > "$OUT/step_tests.txt" 2>&1 &
    BUNDLE= bash "$0" sanitize > "$OUT/step_sanitize.txt" 2>&1 &
    BUNDLE= SKIP_TIMING=1 bash "$0" configs > "$OUT/step_configs.txt" 2>&1 &
    wait
    cat "$OUT/step_tests.txt" "$OUT/step_sanitize.txt" "$OUT/step_configs.txt"
    ;;
sanitize)  # memcheck + racecheck, odd batched sizes, one kernel per schedule/family
    kernels=(
        "--a f16 --b f16 --acc f32"
        "--a bf16 --b bf16 --acc f32 --b-layout col"
        "--a s8 --b s8 --acc s32 --b-layout col"
        "--a e4m3 --b e4m3 --acc f32 --b-layout col"
        "--a tf32 --b tf32 --acc f32 --b-layout col"
        "--a tf32 --b tf32 --acc f32"
        "--a f64 --b f64 --acc f64"
        "--a f64 --b f64 --acc f64 --b-layout col"
        "--a f16 --b f16 --acc f32 --sparse-a compressed"
        "--a s8 --b s8 --acc s32"
        "--a f16 --b f16 --acc f32 --sparse-a 2:4 --prune"
        "--a b1 --b b1 --acc s32 --b-layout col --popc xor --k 544"
        "--a s4 --b s4 --acc s32 --b-layout col --shape m16n8k64"
        "--a s4 --b s4 --acc s32 --b-layout col"
        "--a s8 --b u8 --acc s32 --a-layout col"
        "--a s4 --b u4 --acc s32 --a-layout col --m 136 --n 72"
        "--a s8 --b s8 --acc s32 --m 136 --n 80"  # byte-pair reads of B (rows of 16-byte copies)
        "--a s8 --b u8 --acc s32 --a-layout col --m 136 --n 80"  # ... and of A
    )
    i=0
    for k in "${kernels[@]}"; do
        i=$((i + 1))
        tilemma gemm --m 130 --n 70 --k 200 --batch 2 $k > "$OUT/s$i.mlir" || continue
        sanitize "$k" "$OUT/s$i.mlir" "memcheck racecheck" 200
    done
    ;;
configs)  # odd shapes under forced configurations on the GPU (and other targets' PTX, JIT-compiled
    # for this GPU: the 99 KiB targets' fitted defaults), then the candidates timed at 4096
    S=$OUT/configs_check.txt; : > "$S"
    while IFS='|' read -r shape options; do  # tilemma gemm options | tilemma run options
        tilemma gemm $shape > /tmp/g.mlir && timeout 60 tilemma run /tmp/g.mlir --on gpu $options >> "$S" 2>&1
        echo "[$shape|$options] exit $?" >> "$S"
    done <<'LIST'
--m 37 --n 45 --k 83 --batch 3 --a f64 --b f64 --acc f64 |
--m 130 --n 70 --k 200 --a f64 --b f64 --acc f64 | --warps 2x4 --warp-tile 2x4 --stages 4
--m 130 --n 70 --k 200 --a f64 --b f64 --acc f64 | --warps 4x4 --warp-tile 2x2 --stages 3 --stage-k 32
--m 257 --n 129 --k 1000 --a f64 --b f64 --acc f64 | --warps 1x1 --warp-tile 1x1 --stages 5 --stage-k 64
--m 1000 --n 1000 --k 1000 --a f64 --b f64 --acc f64 |
--m 130 --n 70 --k 200 --batch 2 --bcast b --a f16 --b f16 --acc f32 --sparse-a compressed | --stages 0
--m 130 --n 70 --k 200 --a bf16 --b bf16 --acc f32 --b-layout col --sparse-a compressed | --warps 2x4 --warp-tile 4x8 --stage-k 32 --stages 4
--m 130 --n 70 --k 200 --a f16 --b f16 --acc f32 --no-c | --warps 2x2 --warp-tile 4x4 --stages 3
--m 130 --n 70 --k 200 --a tf32 --b tf32 --acc f32 --b-layout col --rounding rn |
--m 257 --n 129 --k 1056 --a b1 --b b1 --acc s32 --b-layout col --popc and | --warps 2x4 --warp-tile 2x4 --stages 4 --stage-k 256
--m 257 --n 129 --k 328 --batch 2 --a u4 --b u4 --acc s32 --b-layout col --shape m16n8k64 | --stages 5 --stage-k 64
--m 1000 --n 1000 --k 1000 --a f16 --b f16 --acc f32 | --sm 86 --warps 2x4 --warp-tile 4x8 --stages 3 --stage-k 32
--m 1000 --n 1000 --k 1000 --a bf16 --b bf16 --acc f32 --b-layout col | --sm 80
--m 1000 --n 1000 --k 1000 --a tf32 --b tf32 --acc f32 | --sm 86 --warps 2x4 --warp-tile 2x8 --stages 2 --stage-k 32
--m 1000 --n 520 --k 1000 --a e4m3 --b e4m3 --acc f32 --b-layout col | --sm 89
--m 2048 --n 2048 --k 2048 --a s4 --b s4 --acc s32 --b-layout col | --sm 80
LIST
    grep -E "PASS|FAIL|error|exit" "$S" | cut -c1-160
    [ -n "${SKIP_TIMING:-}" ] && exit 0
    timeout 400 python3 -m benchmarks.gemm_bench --sizes 4096 --skip triton triton-mma.sync --budget 380 \
        --families ${FAMILIES:-f64 sparse-f16-pre f16} --csv "$OUT/configs.csv" --tilemma-configs '' \
        'warps=2x2,warp-tile=2x4,stages=4' 'warps=2x2,warp-tile=2x4,stages=3,stage-k=32' 'warps=2x4,warp-tile=2x4,stages=3' \
        'warps=2x4,warp-tile=4x8,stages=4,stage-k=32' 'warps=2x4,warp-tile=4x4,stages=4' 'warps=2x2,warp-tile=4x4,stages=3' \
        > "$OUT/configs.txt" 2>&1
    sed -n '/^family/,$p' "$OUT/configs.txt" | head -40
    ;;
bench)  # tilemma, cuBLAS, Triton (wgmma and mma.sync) in one run, clocks logged meanwhile
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/clocks.csv" &
    smi=$!
    timeout 570 python3 -m benchmarks.gemm_bench --csv "$OUT/gemm.csv" --plot "$OUT/gemm.png" --budget 540 \
        ${FAMILIES:+--families $FAMILIES} > "$OUT/bench.txt" 2>&1
    kill $smi
    sed -n '/^family/,$p' "$OUT/bench.txt" | head -60
    echo "SM clock (MHz) under load: $(awk -F', ' 'NR>1 && $3+0 > 300 {print $2+0}' "$OUT/clocks.csv" | sort -n | uniq -c | sort -rn | head -3 | tr '\n' ' ')"
    ;;
layouts)  # the operand orders: their GPU chain tests, sanitizers, then one benchmark run at 4096
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_pass_chain_gpu.py > "$OUT/chain.txt" 2>&1
    echo "pass chain on the GPU: $(tail -1 "$OUT/chain.txt")"; grep -E "^FAILED" "$OUT/chain.txt" | head -5
    sanitized "--m 130 --n 70 --k 200 --batch 2" "--a f16 --b f16 --acc f32 --a-layout col" \
        "--a bf16 --b bf16 --acc f32 --a-layout col --b-layout col" "--a tf32 --b tf32 --acc f32 --a-layout col" \
        "--a f64 --b f64 --acc f64 --a-layout col --b-layout col"
    timeout 420 python3 -m benchmarks.gemm_bench --sizes 4096 --budget 400 --csv "$OUT/layouts.csv" \
        --families ${FAMILIES:-f16 f16-acol f16-acol-bcol f16-bcol bf16-acol tf32 tf32-brow tf32-acol f64-acol} > "$OUT/layouts.txt" 2>&1
    sed -n '/^family/,$p' "$OUT/layouts.txt" | head -40
    ;;
fill)  # the transposing fill (8-bit M-/N-major operands) and the gather (odd rows): GPU tests, sanitizers, the s8 orders at 4096
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_fill_gpu.py > "$OUT/fill.txt" 2>&1
    echo "fill on the GPU: $(tail -1 "$OUT/fill.txt")"; grep -E "^FAILED|^E  " "$OUT/fill.txt" | head -8
    sanitized "--m 132 --n 72 --k 300 --batch 2" "--a s8 --b s8 --acc s32" "--a u8 --b s8 --acc s32 --a-layout col"
    sanitized "--m 130 --n 71 --k 201 --batch 2" "--a f16 --b f16 --acc f32" "--a bf16 --b bf16 --acc f32 --a-layout col"
    timeout ${BENCH_S:-400} python3 -m benchmarks.gemm_bench --sizes ${SIZES:-4096} --budget $(( ${BENCH_S:-400} - 20 )) --csv "$OUT/fill.csv" \
        --families ${FAMILIES:-s8 s8-brow s8-acol s8-acol-brow} ${CONFIGS:+--tilemma-configs $CONFIGS} > "$OUT/fill-bench.txt" 2>&1
    sed -n '/^family/,$p' "$OUT/fill-bench.txt" | head -60
    ;;
attention)  # tile-attention: GPU tests, memcheck/racecheck on two odd kernels, the benchmark against SDPA flash (FA2) and cuDNN
    timeout 240 python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/gpu/test_attention_gpu.py > "$OUT/attention.txt" 2>&1
    echo "attention on the GPU: $(tail -1 "$OUT/attention.txt")"; grep -E "^FAILED|^E  |bit-identical" "$OUT/attention.txt" | head -12
    for a in "--b 1 --h 2 --s 100 --d 64 --causal" "--b 1 --h 2 --s 129 --d 128 --dtype bf16"; do
        tilemma attention $a > /tmp/att.mlir || continue
        sanitize "$a" /tmp/att.mlir "memcheck racecheck" 120
    done
    timeout ${BENCH_S:-360} python3 -m benchmarks.attention_bench ${SHAPES:+--shapes $SHAPES} ${CONFIGS:+--configs $CONFIGS} --csv "$OUT/attention.csv" > "$OUT/attention-bench.txt" 2>&1
    echo "attention_bench exit $?"; cat "$OUT/attention-bench.txt" | tail -40
    ;;
bench-epilogue)  # epilogue_bench.py: tilemma plain and fused, cuBLASLt, unfused torch, Triton (both modes), one run
    # CASES narrows the cases, SIZES the sizes (default 4096; e.g. SIZES="2048 4096 8192x4096x4096")
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/clocks.csv" &
    smi=$!
    timeout 540 python3 -m benchmarks.epilogue_bench --csv "$OUT/epilogue.csv" --budget 510 \
        ${CASES:+--cases $CASES} ${SIZES:+--sizes $SIZES} > "$OUT/epilogue.txt" 2>&1
    echo "epilogue_bench exit $?"
    kill $smi
    sed -n '/^ *case  /,$p' "$OUT/epilogue.txt" | head -80
    echo "SM clock (MHz) under load: $(awk -F', ' 'NR>1 && $3+0 > 300 {print $2+0}' "$OUT/clocks.csv" | sort -n | uniq -c | sort -rn | head -3 | tr '\n' ' ')"
    ;;
matrix)  # issue 23's benchmark matrix (benchmarks/matrix.py), one part per device call: PART=1/2 (default), 2/2;
    # SM=90a for sm_90a's kernels (an H200 ran all 548 cells in 253 + 286 s, 2026-11-28; on sm_90 the 504 dense
    # cells took 465 s of one run, 2026-11-27, its budget spent before the 44 sparse ones; both parts in one call
    # with BUDGET=235 and 262 left 134 cells, the sparse ones among them, which REDO measured in 136 s);
    # REDO="a.csv b.csv" runs the cells those CSVs lack a measurement of instead. Merge the parts' CSVs anywhere
    # (no GPU): python -m benchmarks.matrix --merge matrix-*.csv --csv matrix.csv --plot matrix.png
    part=${PART:-1/2}; tag=${REDO:+redo}; tag=${tag:-part${part%/*}of${part#*/}}
    # Triton's compiles kept on this machine for the next part (while it stays warm)
    export TILEMMA_BENCH_TRITON_CACHE=${TILEMMA_BENCH_TRITON_CACHE:-/tmp/tilemma-matrix-triton}
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 > "$OUT/clocks-$tag.csv" &
    smi=$!
    timeout ${MATRIX_S:-500} python3 -m benchmarks.matrix --part "$part" --sm ${SM:-90} ${REDO:+--redo $REDO} --budget ${BUDGET:-450} \
        --csv "$OUT/matrix-$tag.csv" > "$OUT/matrix-$tag.txt" 2> "$OUT/matrix-$tag.err"
    echo "benchmarks.matrix exit $?"
    kill $smi
    grep -E "^(device|tilemma /|target)" "$OUT/matrix-$tag.txt"
    grep -E "^matrix part|compiled .* kernels|Triton: |budget left|lack a measurement" "$OUT/matrix-$tag.err" | head -12
    echo "SM clock (MHz) under load: $(awk -F', ' 'NR>1 && $3+0 > 300 {print $2+0}' "$OUT/clocks-$tag.csv" | sort -n | uniq -c | sort -rn | head -3 | tr '\n' ' ')"
    ;;
profile)  # mma.sync issue rate against warps/SM; ncu of the 4096 kernels (occupancy, stalls, bank conflicts)
    if [ -z "${SKIP_MMA_RATE:-}" ]; then  # SKIP_MMA_RATE=1: ncu only
        nvcc -O3 -arch=sm_90 -o /tmp/mma_rate benchmarks/mma_rate.cu && /tmp/mma_rate > "$OUT/mma_rate.txt" 2>&1
    fi
    m=sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,launch__registers_per_thread,smsp__warps_active.avg.per_cycle_active
    m=$m,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
    m=$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
    m=$m,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
    m=$m,smsp__inst_executed_op_ldsm.sum,smsp__sass_inst_executed_op_ldgsts.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
    m=$m,lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
    for job in ${FAMILIES:-f16 s8 tf32 f64 sparse-f16-pre}; do  # FAMILY or FAMILY:CONFIG
        fam=${job%%:*}; config=; [ "$job" != "$fam" ] && config=${job#*:}
        # ^gemm_: tilemma's kernels only (the inputs are made with cuBLAS kernels, sm90_*)
        timeout 120 ncu ${NCU_CLOCK:+--clock-control $NCU_CLOCK} --metrics $m --section WarpStateStats --page raw -k regex:^gemm_ --launch-skip 1 --launch-count 1 \
            python3 -m benchmarks.launch_kernel $fam 4096 $config > "$OUT/ncu_$fam${config:+_$(echo "$config" | tr ',=' '_-')}.txt" 2>&1
    done
    cat "$OUT/mma_rate.txt" 2>/dev/null
    for f in "$OUT"/ncu_*.txt; do
        echo "== $f"; grep -E "^  [a-z]|Profiling" "$f" | grep -E "Profiling|per_second|duration|registers|warps_active|issue_active\.|hmma|bank_conflicts|wavefronts|ldsm|ldgsts|dram__|lts__|sm__throughput" | grep -v "\.max\|\.min\|device__attribute\|\.avg  \|_st\.\|launch__occupancy" | head -16
        # the six largest stall reasons, in warps stalled per issued instruction
        grep -E "smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio" "$f" | awk '{print $NF, $1}' | sort -rn | head -6
    done
    ;;
*) echo "unknown step $step"; exit 2 ;;
esac
# A device call brings back at most 8 files: BUNDLE=1 packs the logs into one archive.
if [ -n "${BUNDLE:-}" ]; then
    tar czf /tmp/logs-$step.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/logs-$step.tgz "$OUT/"
fi
