#!/usr/bin/env bash
# bench/device_run.sh - the one GPU job: build, GPU test suite, sanitizers,
# resource report, benchmarks, Python bench; a short table printed last.
#
#   bash bench/device_run.sh [OUTDIR]        (OUTDIR default: $OUT, else out/)
#
# PART=all (default) | test | bench | suite | profile | check   run part of it
#                                      (separate calls fit the device tool's
#                                      10-minute limit)
# PART=check CHECK_KERNELS=a,b (not in all): the GPU checks of a few kernels
# in about a minute, before they are timed: tests/gpu/test_verify's matrix
# (edge, decode and view shapes, NaN-poisoned C) for them and auto, k30_check
# (the k30 family's split plans, repeats and sanitizer cases) when one of
# them is a k30-family kernel, and bench/sanitize.sh's four tools on them;
# each step stopped after CHECK_TIMEOUT seconds (default 180; exit 124), so
# that a hung new kernel costs one step, not the call.
# PART=suite (also in all): `tilekit bench --suite $SUITE` (default all),
# auto-dispatch against cuBLAS on every shape, fp32 and bf16 C, JSON in
# OUTDIR/suite_fp32.json and suite_bf16.json for bench/plot.py.
# Environment: BUILD (default build), KERNELS (default all), SHAPES (default
# 4096x4096x4096,8192x8192x8192), NT_KERNELS (kernels that only take B as
# N x K, benched again with --op-b t), EXTRA_KERNELS / EXTRA_SHAPES /
# PAD_SHAPES (the fast kernels at the issues' other shapes; PAD_SHAPES with
# padded leading dimensions).
# PART=profile (also in all): `tilekit profile` under Nsight Compute (ncu on
# PATH, or $NCU): k31 against cuBLAS at 4096^3, k10 against k11 (seed 002's
# coalescing question), k03, k04 and k05 (seed 000's K-step); `tilekit
# verify --smem-limit 32768` (the pre-launch refusal) and `--plant ... --png`
# (the error map); bench/profile_docs.py turns them into docs/seeds.md's
# sections (the command is printed last).
# PART=grouped (not in all): the batched and grouped calls (issue 38): their
# GPU tests (test_grouped, test_lab_grouped, the fuzz's grouped cases, the
# Python and torch tests), compute-sanitizer's four tools on the
# k43 kernels (skewed groups and bad offsets: test_grouped's cases), then
# GROUPED_BENCH lines (tilekit bench --groups ...), `bench --suite moe`
# (NO_MOE=1: not), then bench/torch_bench.py's grouped (the moe suite against
# torch._grouped_mm) and bmm (against torch.bmm) modes; each step stopped
# after GROUPED_TIMEOUT seconds (default 240).
# PART=epilogue (not in all): the fused epilogues (issue 39): gpu_test_epilogue,
# the torch side's tests (tests/gpu/test_torch.py's issue-39 ones),
# bench/mlp_bench.py's linear, gated, llama and host tables, EPI_BENCH lines
# (`tilekit bench --epilogue ...`, ';'-separated), `tilekit fuzz --epilogue
# all` (400 cases on auto, k01, k30, k31, k40, k20, k21), compute-sanitizer's
# four tools on its edge shapes through k30, k31, k40, k01_naive, k20 and k21;
# each step stopped after
# EPI_TIMEOUT seconds (default 300).
# PART=fp8 (not in all): FP8 operands (issue 40): tests/gpu/fp8_mma (the FP8
# wgmma's accumulator, measured: the figures lab_compare.c's FP8 tolerance
# rests on), gpu_test_fp8 (every FP8 kernel against the fp64 reference),
# FP8_BENCH lines (`tilekit bench --dtype ...`, ';'-separated), then
# compute-sanitizer memcheck and racecheck on its sweep; then the quantizer:
# gpu_test_quantize (bit for bit against the lab's tk_lab_fp8_quantize),
# memcheck and racecheck on it, build/quant_bench (its DRAM rate against the
# copy rate measured in the same run) and tests/gpu/test_torch.py's fp8_
# tests; each step stopped after FP8_TIMEOUT seconds (default 300).
# PART=deepgemm (not in all): issue 40's peer, DeepGEMM's SM90 FP8 GEMM
# (fp8_gemm_nt: 1 x 128 activation and 128 x 128 weight scales, bf16 out)
# against tilekit.scaled_mm on the same codes and scales in one process, on
# DeepGEMM's shapes (DG_M, default 64,128,...,4096, against DG_NK, default
# DeepSeek-V3's 2112x7168,24576x1536,7168x16384,4096x7168,7168x2048). The
# peer is never committed: its fetch and bench scripts and its source
# tarball live in the ignored .peers/ of the development checkout
# (.peers/deepgemm_fetch.sh makes .peers/deepgemm.tar.gz there) and travel
# with the device call's carry [".peers"]; without them this part says so
# and compares with DeepGEMM's published table alone. Then `tilekit bench
# --kernel auto --dtype e4m3 --scale block` on the same shapes (its own
# harness, x cuBLASLt; NO_DG_CLI=1: not), and bench/peers/deepgemm_table.py's
# markdown table (OUTDIR/deepgemm_table.md). Logs in OUTDIR/deepgemm_logs.tar.gz.
# DG_ARGS: more arguments for the peer's bench script (e.g. --iters 30);
# DG_CLI_BUDGET (default 0.5 s a case) and DG_CLI_TIMEOUT (300 s): the CLI's.
# PART=handle (not in all): the handle's GPU tests (tests/gpu/test_handle.c,
# test_concurrency, test_graph, test_isolation), compute-sanitizer memcheck
# and racecheck on test_handle's flag and capture tests, and the host time
# per call (bench/host_cost.c) against the library of a base tree when
# .ab/base.tar.gz holds one (`git archive BASE | gzip > .ab/base.tar.gz`,
# carried with the call).
# PART=quant (not in all): the quantizer alone (issue 40): gpu_test_quantize,
# compute-sanitizer memcheck and racecheck on it, then build/quant_bench
# (QUANT_SHAPES, default 8192x8192,16384x4096; both formats) against a base
# tree's when .ab/base.tar.gz holds one (`git archive BASE | gzip >
# .ab/base.tar.gz`, carried with the call; built with ARCHS=90a in
# build-base/, which later calls keep and reuse), four rounds in turn (base
# new, new base, base new, new base) into OUTDIR/quant_ab.txt; each step
# stopped after QUANT_TIMEOUT seconds (default 300; the base's build
# QUANT_BUILD_TIMEOUT, default 540).
# PART=dist (not in all; 2 GPUs): the distributed GEMMs (issue 41): the CPU
# test of the plan and checks, tests/gpu/test_dist (both operations against
# the single-GPU product, determinism over 20 runs, bad input, a timeout
# that aborts instead of hanging), compute-sanitizer memcheck on one
# overlapped call of each operation (every process), build/dist_bench on the
# Llama-3-70B projections (JSON in OUTDIR/dist_bench.json; DIST_BENCH_EXTRA:
# more argument lines, ';'-separated, default "--comm-sms 16": the GEMMs
# leave 16 SMs to NCCL; DIST_BENCH_EXTRA= for none), then the
# torchrun test of tilekit.distributed (tests/gpu/test_torch_dist.py) where
# torch is installed. DIST_STEPS (default test,memcheck,bench,torch) picks
# steps, so that two calls fit the 10-minute limit; "llama" (not in the
# default) runs bench/dist_llama.py under torchrun (2 Llama-3-70B layers at
# 2048 and 8192 tokens, tilekit's layers against sequential collectives;
# OUTDIR/dist_llama.json; DIST_LLAMA_ARGS: more arguments); each step stopped after
# DIST_TIMEOUT seconds (default 420). NVLink multicast stays off: the three
# variables below are exported for every part.
# Everything is logged under OUTDIR; bench/readme_table.py turns
# OUTDIR/bench.json, OUTDIR/bench_nt.json and OUTDIR/info.txt into the
# README and docs/seeds.md tables.
set -uo pipefail
cd "$(dirname "$0")/.."
# No NVLink multicast on the device machines (issue 41): NCCL's NVLS, torch's
# symmetric memory and NVSHMEM keep it off in every test and benchmark.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${1:-${OUT:-out}}
mkdir -p "$out"
BUILD=${BUILD:-build}
PART=${PART:-all}
KERNELS=${KERNELS:-all}
SHAPES=${SHAPES:-4096x4096x4096,8192x8192x8192}
NT_KERNELS=${NT_KERNELS:-cublas,k08_4w_128x128_abt,k09_8w_128x128_abt,k10_4w_128x128_k32,k11_4w_128x128_kunroll4,k12_8w_256x128_gregs,k40_skinny}
EXTRA_KERNELS=${EXTRA_KERNELS:-cublas,k21_mma_fastload,k30_wgmma_tma,k31_wgmma_cluster}
EXTRA_SHAPES=${EXTRA_SHAPES:-2048x2048x2048,4096x14336x4096,8192x8192x1024,16384x16384x16384}
PAD_SHAPES=${PAD_SHAPES:-8191x8193x8190}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
tk="$BUILD/tilekit"
summary=()

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader \
    | tee "$out/gpu.txt"
t0=$(date +%s)
if ! make -j"$(nproc)" BUILD="$BUILD" all > "$out/build.log" 2>&1; then
    tail -n 60 "$out/build.log"; echo "BUILD FAILED"; exit 1
fi
summary+=("build: ok in $(( $(date +%s) - t0 )) s")

if [ "$PART" = all ] || [ "$PART" = test ]; then
    t0=$(date +%s)
    bash tests/run_gpu.sh "$BUILD" > "$out/gpu-test.log" 2>&1
    summary+=("gpu-test: $(tail -n 1 "$out/gpu-test.log") in $(( $(date +%s) - t0 )) s")
    huge=$(grep -m 1 '^huge: largest verified' "$out/gpu-test.log")
    [ -n "$huge" ] && summary+=("$huge")
    grep -E '^(FAIL|   \()' "$out/gpu-test.log" | head -n 20
    # Every registry kernel under memcheck, racecheck, synccheck and initcheck
    # at three odd shapes, tight and padded (bench/sanitize.sh).
    t0=$(date +%s)
    bash bench/sanitize.sh "$BUILD" "$out" > "$out/sanitize.txt" 2>&1
    summary+=("sanitize sweep (bench/sanitize.sh): exit $? in $(( $(date +%s) - t0 )) s, $(grep -c ': exit 0 ' "$out/sanitize.txt") of $(grep -c '^sanitize ' "$out/sanitize.txt") runs clean")
    cat "$out/sanitize.txt"
    # k40's staged-token path and its TMA ring (9 and 32 x 1000 x 16360: four
    # splits of 15-16 stages, ragged rows and a K edge, in the padded NT runs)
    # need larger weight streams than the sweep's shapes.
    mkdir -p "$out/san-k40xs"
    SAN_KERNELS=k40_skinny SAN_SHAPES=24x2048x4104,40x4096x2056,9x1000x16360,32x1000x16360 bash bench/sanitize.sh "$BUILD" \
        "$out/san-k40xs" > "$out/sanitize-k40xs.txt" 2>&1
    summary+=("sanitize k40 staged tokens and ring: exit $?, $(tail -n 1 "$out/sanitize-k40xs.txt")")
    # The Hopper kernels under memcheck and racecheck at a small and a medium
    # shape, against k01_naive (racecheck flags cuBLAS's own kernels).
    if [ -x "$BUILD/tests/gpucu_k30_check" ]; then
        for tool in memcheck racecheck; do
            TK_K30_REF=k01_naive compute-sanitizer --tool $tool --error-exitcode 9 \
                "$BUILD/tests/gpucu_k30_check" k30_sanitize > "$out/sanitize-$tool.log" 2>&1
            summary+=("compute-sanitizer $tool (k30_sanitize): exit $? -- $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-$tool.log" | tail -n 1)")
        done
    fi
fi
if [ "$PART" = check ]; then
    ck=${CHECK_KERNELS:?PART=check needs CHECK_KERNELS=name,name}
    t0=$(date +%s)
    lim=${CHECK_TIMEOUT:-180}
    TK_VERIFY_KERNELS="$ck,auto" timeout "$lim" "$BUILD/tests/gpu_test_verify" > "$out/check-verify.log" 2>&1
    summary+=("test_verify ($ck,auto): exit $?, $(tail -n 1 "$out/check-verify.log") in $(( $(date +%s) - t0 )) s")
    grep -E '^FAIL' "$out/check-verify.log" | head -n 20
    if echo ",$ck," | grep -qE ',(k3[0-9]|k42)_'; then
        t0=$(date +%s)
        TK_K30_KERNELS=$(echo "$ck" | tr ',' '\n' | grep -E '^(k3[0-9]|k42)_' | paste -sd,) \
            timeout "$lim" "$BUILD/tests/gpucu_k30_check" > "$out/check-k30.log" 2>&1
        summary+=("k30_check: exit $?, $(tail -n 1 "$out/check-k30.log") in $(( $(date +%s) - t0 )) s")
        grep -E '^FAIL|differ from the first' "$out/check-k30.log" | head -n 20
    fi
    t0=$(date +%s)
    SAN_KERNELS=$ck timeout "$lim" bash bench/sanitize.sh "$BUILD" "$out" > "$out/check-sanitize.txt" 2>&1
    summary+=("sanitize ($ck): exit $? in $(( $(date +%s) - t0 )) s, $(tail -n 1 "$out/check-sanitize.txt")")
fi
step() {   # step NAME CMD...: one step (at most $lim s), its log OUTDIR/NAME.log, its last line in the summary
    local name=$1 t0; shift
    t0=$(date +%s)
    timeout "$lim" "$@" > "$out/$name.log" 2>&1
    summary+=("$name: exit $?, $(tail -n 1 "$out/$name.log") in $(( $(date +%s) - t0 )) s")
    grep -E '^FAIL|^ +\(' "$out/$name.log" | head -n 20
}
quant_checks() {   # the quantizer bit for bit against the lab's reference, then memcheck and racecheck on it
    step test_quantize "$BUILD/tests/gpu_test_quantize"
    for tool in memcheck racecheck; do
        step "sanitize-quantize-$tool" compute-sanitizer --tool $tool --error-exitcode 9 \
            "$BUILD/tests/gpu_test_quantize"
        summary+=("  $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-quantize-$tool.log" | tail -n 1)")
    done
}
suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
if [ "$PART" = grouped ]; then
    lim=${GROUPED_TIMEOUT:-240}
    step test_grouped "$BUILD/tests/gpu_test_grouped"
    step test_lab_grouped "$BUILD/tests/gpu_test_lab_grouped"
    step test_fuzz "$BUILD/tests/gpu_test_fuzz"
    k43=$("$tk" info 2>/dev/null | awk '$1 ~ /^k43_/ { print $1 }' | paste -sd,)
    for tool in memcheck racecheck initcheck synccheck; do
        TK_GROUPED_KERNELS=$k43 step "sanitize-grouped-$tool" compute-sanitizer --tool $tool --error-exitcode 9 \
            "$BUILD/tests/gpu_test_grouped"
        summary+=("  $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-grouped-$tool.log" | tail -n 1)")
    done
    TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" TILEKIT_EXT="$PWD/$BUILD/python/_tilekit$suffix" \
        step test_python python3 tests/gpu/test_python.py
    TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" TILEKIT_EXT="$PWD/$BUILD/python/_tilekit$suffix" \
        step test_torch python3 tests/gpu/test_torch.py
    IFS=';' read -ra gb <<< "${GROUPED_BENCH:-}"
    for i in "${!gb[@]}"; do
        # shellcheck disable=SC2086
        step "grouped_bench_$i" "$tk" bench ${gb[$i]} --json "$out/grouped_bench_$i.json"
        cat "$out/grouped_bench_$i.log"
    done
    if [ -z "${NO_MOE:-}" ]; then
        step suite_moe "$tk" bench --suite moe --json "$out/suite_moe.json"
        sed -n '/^summary/,$p' "$out/suite_moe.log"
    fi
    # the same suite against torch._grouped_mm, and attention-like bmm's against torch.bmm (bench/torch_bench.py)
    for w in grouped bmm; do
        TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" TILEKIT_EXT="$PWD/$BUILD/python/_tilekit$suffix" \
            step "torch_$w" python3 bench/torch_bench.py $w --json "$out/torch_$w.json"
        cat "$out/torch_$w.log"
    done
fi
if [ "$PART" = epilogue ]; then
    # issue 39 (the header says what): the tests and the tables first, the
    # fuzz and the sanitizers last (a device call's 600 s cut the end)
    lim=${EPI_TIMEOUT:-300}
    step test_epilogue "$BUILD/tests/gpu_test_epilogue"
    for t in linear_epilogue gated_mlp test_mlp patch_fuse fused_; do
        TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" TILEKIT_EXT="$PWD/$BUILD/python/_tilekit$suffix" \
            step "test_torch_$t" python3 tests/gpu/test_torch.py "$t"
    done
    for w in linear gated llama host; do
        TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" TILEKIT_EXT="$PWD/$BUILD/python/_tilekit$suffix" \
            step "mlp_$w" python3 bench/mlp_bench.py $w --json "$out/mlp_$w.json"
        cat "$out/mlp_$w.log"
    done
    IFS=';' read -ra eb <<< "${EPI_BENCH:-}"
    for i in "${!eb[@]}"; do
        # shellcheck disable=SC2086
        step "epi_bench_$i" "$tk" bench ${eb[$i]} --json "$out/epi_bench_$i.json"
        cat "$out/epi_bench_$i.log"
    done
    step fuzz_epilogue "$tk" fuzz --forms epilogue --epilogue all --cases 400 \
        --kernel auto,k01_naive,k30_wgmma_tma,k31_wgmma_cluster,k40_skinny,k20_mma_sync,k21_mma_fastload \
        --json "$out/fuzz_epilogue.json"
    for tool in memcheck racecheck initcheck synccheck; do
        TK_EPI_KERNELS=k30_wgmma_tma,k31_wgmma_cluster,k40_skinny,k01_naive,k20_mma_sync,k21_mma_fastload \
            step "sanitize-epilogue-$tool" \
            compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/tests/gpu_test_epilogue" shapes
        summary+=("  $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-epilogue-$tool.log" | tail -n 1)")
    done
    summary+=("then: python3 bench/mlp_readme.py $out/mlp_linear.json $out/mlp_gated.json $out/mlp_llama.json --readme README.md")
fi
if [ "$PART" = fp8 ]; then
    lim=${FP8_TIMEOUT:-300}
    step fp8_mma "$BUILD/tests/gpucu_fp8_mma"
    grep -E '^(align|random)' "$out/fp8_mma.log"
    step test_fp8 "$BUILD/tests/gpu_test_fp8"
    # FP8_BENCH: `tilekit bench` argument lines, ';'-separated (--dtype ...: cuBLASLt's FP8 matmul beside)
    IFS=';' read -ra fb <<< "${FP8_BENCH:-}"
    for i in "${!fb[@]}"; do
        # shellcheck disable=SC2086
        step "fp8_bench_$i" "$tk" bench ${fb[$i]} --json "$out/fp8_bench_$i.json"
        cat "$out/fp8_bench_$i.log"
    done
    for tool in memcheck racecheck; do
        step "sanitize-fp8-$tool" compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/tests/gpu_test_fp8" sweep
        summary+=("  $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-fp8-$tool.log" | tail -n 1)")
    done
    # the quantizer (tk_quantize_fp8): bit for bit against the lab's reference,
    # the sanitizers on it, its DRAM rate, then the torch side's fp8_ tests
    quant_checks
    step quant_bench "$BUILD/quant_bench"
    cat "$out/quant_bench.log"
    TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" TILEKIT_EXT="$PWD/$BUILD/python/_tilekit$suffix" \
        step test_torch_fp8 python3 tests/gpu/test_torch.py fp8_
fi
if [ "$PART" = deepgemm ]; then
    dg_m=${DG_M:-64,128,256,512,1024,2048,4096}
    dg_nk=${DG_NK:-2112x7168,24576x1536,7168x16384,4096x7168,7168x2048}
    dg_shapes=$(for nk in ${dg_nk//,/ }; do for m in ${dg_m//,/ }; do printf '%sx%s,' "$m" "$nk"; done; done)
    dg_shapes=${dg_shapes%,}
    if [ -f .peers/deepgemm.tar.gz ] && [ -f .peers/deepgemm_bench.sh ]; then
        t0=$(date +%s)
        TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" TILEKIT_EXT="$PWD/$BUILD/python/_tilekit$suffix" \
            DG_ARGS="--m $dg_m --nk $dg_nk ${DG_ARGS:-}" bash .peers/deepgemm_bench.sh "$out" > "$out/deepgemm.log" 2>&1
        summary+=("deepgemm peer: exit $?, $(grep -m 1 '^geomean' "$out/deepgemm.log") in $(( $(date +%s) - t0 )) s")
        grep -E '^(deepgemm_bench:|geomean|env:|deep_gemm |tilekit )' "$out/deepgemm.log"
    else
        echo "PART=deepgemm: .peers/deepgemm.tar.gz or .peers/deepgemm_bench.sh is not in this tree, so DeepGEMM is"
        echo "not built or timed: make them with .peers/deepgemm_fetch.sh on the development machine and pass"
        echo "carry [\".peers\"] to the device call. Only tilekit runs; the table compares with DeepGEMM's published figures."
        summary+=("deepgemm peer: NOT RUN (no .peers/deepgemm.tar.gz here; carry [\".peers\"])")
    fi
    if [ -z "${NO_DG_CLI:-}" ]; then
        lim=${DG_CLI_TIMEOUT:-300}
        step tk_deepseek "$tk" bench --kernel auto --dtype e4m3 --scale block --shapes "$dg_shapes" \
            --budget "${DG_CLI_BUDGET:-0.5}" --json "$out/tk_deepseek.json"
    fi
    targs=()
    [ -s "$out/deepgemm.jsonl" ] && targs+=(--peer "$out/deepgemm.jsonl")
    [ -s "$out/tk_deepseek.json" ] && targs+=(--cli "$out/tk_deepseek.json")
    [ -s "$out/deepgemm_env.json" ] && targs+=(--env "$out/deepgemm_env.json")
    python3 bench/peers/deepgemm_table.py ${targs[@]+"${targs[@]}"} > "$out/deepgemm_table.md" 2>&1
    summary+=("deepgemm table: exit $? ($(grep -m 1 -E '^geometric mean' "$out/deepgemm_table.md"))")
    cat "$out/deepgemm_table.md"
    # the logs in one file; the figures stay loose
    (cd "$out" && ls deepgemm_*.log deepgemm_*.txt deepgemm.log tk_deepseek.log 2>/dev/null \
        | tar -czf deepgemm_logs.tar.gz -T - && rm -f deepgemm_jit_*.log deepgemm_build*.log deepgemm_import.log)
fi
if [ "$PART" = dist ]; then
    lim=${DIST_TIMEOUT:-420}
    steps=",${DIST_STEPS:-test,memcheck,bench,torch},"
    nvidia-smi topo -m > "$out/topo.txt" 2>&1 && cat "$out/topo.txt"
    # libtilekit_dist opens libnccl.so.2; where the system has none, a pip wheel's
    if ! ldconfig -p | grep -q 'libnccl.so.2 '; then
        whl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))' 2>/dev/null)
        [ -n "$whl" ] && [ -f "$whl" ] && export TK_DIST_NCCL_LIB="$whl"
    fi
    summary+=("NCCL: ${TK_DIST_NCCL_LIB:-$(ldconfig -p | grep -m 1 'libnccl.so.2 ' | sed 's/.*=> //')}")
    if [[ $steps == *,test,* ]]; then
        step test_dist_cpu "$BUILD/tests/test_dist"
        step test_dist "$BUILD/tests/gpu_test_dist"
    fi
    if [[ $steps == *,memcheck,* ]]; then
        # --report-api-errors no: NCCL's own probes (cudaFuncGetAttributes on kernels
        # not built for this GPU, cuMemCreate where not permitted) are API errors it
        # expects, 28 of them a run (session 33), none tilekit's
        step sanitize-dist-memcheck compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
            --target-processes all \
            "$BUILD/tests/gpu_test_dist" memcheck
        summary+=("  $(grep -E 'ERROR SUMMARY' "$out/sanitize-dist-memcheck.log" | sort | uniq -c | paste -sd';')")
    fi
    if [[ $steps == *,bench,* ]]; then
        step dist_bench "$BUILD/dist_bench" --json "$out/dist_bench.json"
        cat "$out/dist_bench.log"
        IFS=';' read -ra db <<< "${DIST_BENCH_EXTRA---comm-sms 16}"
        for i in "${!db[@]}"; do
            # shellcheck disable=SC2086
            step "dist_bench_$i" "$BUILD/dist_bench" ${db[$i]} --json "$out/dist_bench_$i.json"
            cat "$out/dist_bench_$i.log"
        done
    fi
    if [[ $steps == *,torch,* ]] && python3 -c 'import torch' 2>/dev/null; then
        TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" TILEKIT_EXT="$PWD/$BUILD/python/_tilekit$suffix" \
            TILEKIT_DIST_LIB="$PWD/$BUILD/libtilekit_dist.so" \
            step torch_dist python3 -m torch.distributed.run --standalone --nproc-per-node 2 tests/gpu/test_torch_dist.py
    fi
    if [[ $steps == *,llama,* ]] && python3 -c 'import torch' 2>/dev/null; then
        # shellcheck disable=SC2086
        TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" TILEKIT_EXT="$PWD/$BUILD/python/_tilekit$suffix" \
            TILEKIT_DIST_LIB="$PWD/$BUILD/libtilekit_dist.so" \
            step dist_llama python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/dist_llama.py \
            ${DIST_LLAMA_ARGS:-} --json "$out/dist_llama.json"
        cat "$out/dist_llama.log"
    fi
fi
if [ "$PART" = handle ]; then
    for t in gpu_test_handle gpu_test_concurrency gpu_test_graph gpu_test_isolation; do
        t0=$(date +%s)
        timeout 300 "$BUILD/tests/$t" > "$out/$t.log" 2>&1
        summary+=("$t: exit $?, $(tail -n 1 "$out/$t.log") in $(( $(date +%s) - t0 )) s")
        grep -E '^FAIL|^ +\(' "$out/$t.log" | head -n 20
    done
    for tool in memcheck racecheck; do
        TK_UNDER_SANITIZER=1 TK_IG_REF=k01_naive TK_HANDLE_ONLY=${SAN_HANDLE_ONLY:-flags} timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 \
            "$BUILD/tests/gpu_test_handle" > "$out/sanitize-handle-$tool.log" 2>&1
        summary+=("compute-sanitizer $tool (test_handle ${SAN_HANDLE_ONLY:-flags}): exit $? -- $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-handle-$tool.log" | tail -n 1)")
    done
    cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -I/usr/local/cuda/include bench/host_cost.c -L"$BUILD" -ltilekit \
        -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,"$PWD/$BUILD" -o /tmp/host_cost_new
    if [ -f .ab/base.tar.gz ]; then
        rm -rf /tmp/tk_base && mkdir -p /tmp/tk_base && tar -C /tmp/tk_base -xzf .ab/base.tar.gz
        make -C /tmp/tk_base -j"$(nproc)" ARCHS=90a lib > "$out/base-build.log" 2>&1
        cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -I/usr/local/cuda/include bench/host_cost.c -L/tmp/tk_base/build \
            -ltilekit -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/tmp/tk_base/build -o /tmp/host_cost_base
    fi
    for r in 1 2 3 4; do   # base new, new base, base new, new base
        for v in $([ $((r % 2)) = 1 ] && echo "base new" || echo "new base"); do
            [ -x /tmp/host_cost_$v ] && /tmp/host_cost_$v | sed "s/^/$v round $r: /" | tee -a "$out/host_cost.txt"
        done
    done
fi
if [ "$PART" = quant ]; then
    lim=${QUANT_TIMEOUT:-300}
    quant_checks
    qb_base=
    if [ -f .ab/base.tar.gz ]; then
        [ -f build-base/Makefile ] || { mkdir -p build-base && tar -C build-base -xzf .ab/base.tar.gz; }
        lim=${QUANT_BUILD_TIMEOUT:-540} step base_build make -C build-base -j"$(nproc)" ARCHS=90a build/quant_bench
        [ -x build-base/build/quant_bench ] && qb_base=build-base/build/quant_bench
    fi
    for r in 1 2 3 4; do   # base new, new base, base new, new base
        for v in $([ $((r % 2)) = 1 ] && echo "base new" || echo "new base"); do
            q=$([ "$v" = new ] && echo "$BUILD/quant_bench" || echo "$qb_base")
            [ -n "$q" ] || continue
            for f in e4m3 e5m2; do
                timeout "$lim" "$q" --shapes "${QUANT_SHAPES:-8192x8192,16384x4096}" --format $f 2>&1 \
                    | sed "s/^/$v round $r: /" | tee -a "$out/quant_ab.txt"
            done
        done
    done
fi
if [ "$PART" = suite ] || [ "$PART" = all ]; then
    for o in fp32 bf16; do
        t0=$(date +%s)
        echo "$tk bench --suite ${SUITE:-all} --out $o" > "$out/suite_$o.cmd"
        "$tk" bench --suite "${SUITE:-all}" --out $o --json "$out/suite_$o.json" > "$out/suite_$o.txt" \
            2> "$out/suite_$o.err"
        summary+=("suite $o: exit $? in $(( $(date +%s) - t0 )) s")
    done
fi
if [ "$PART" = all ] || [ "$PART" = bench ]; then
    "$tk" info --kernel "$KERNELS" > "$out/info.txt" 2>&1
    run_bench() {   # run_bench NAME ARGS...: one bench, JSON to OUTDIR/NAME.json
        local name=$1; shift
        echo "$tk bench $*" > "$out/$name.cmd"
        "$tk" bench "$@" --json "$out/$name.json" > "$out/$name.txt" 2> "$out/$name.err"
        summary+=("$name: exit $?")
    }
    run_bench bench --kernel "$KERNELS" --shapes "$SHAPES"
    run_bench bench_nt --kernel "$NT_KERNELS" --shapes "$SHAPES" --op-b t
    run_bench bench_extra --kernel "$EXTRA_KERNELS" --shapes "$EXTRA_SHAPES"
    run_bench bench_pad --kernel "$EXTRA_KERNELS" --shapes "$PAD_SHAPES" --pad
    run_bench bench_bf16 --kernel "$EXTRA_KERNELS" --shapes 8192x8192x8192 --out bf16
    TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" python3 python/bench.py --m 4096 --n 4096 --k 4096 \
        > "$out/python_bench.txt" 2>&1
    summary+=("python bench: exit $?")
    # PyTorch: host time per call against torch.matmul, and a Llama step
    # patched through tilekit.patch against the unpatched model.
    for w in overhead llama; do
        TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" python3 bench/torch_bench.py $w > "$out/torch_$w.txt" 2>&1
        summary+=("torch_bench $w: exit $?")
    done
    echo "=== info"; cat "$out/info.txt"
    for f in bench bench_nt bench_extra bench_pad bench_bf16 python_bench torch_overhead torch_llama; do
        [ -f "$out/$f.txt" ] && { echo "=== $f"; cat "$out/$f.txt"; }
    done
fi
if [ "$PART" = all ] || [ "$PART" = profile ]; then
    run_profile() {   # run_profile NAME ARGS...: one screen, JSON to OUTDIR/NAME.json
        local name=$1; shift
        echo "$tk profile $*" > "$out/$name.cmd"
        "$tk" profile "$@" --json "$out/$name.json" > "$out/$name.txt" 2> "$out/$name.err"
        summary+=("$name: exit $?")
    }
    t0=$(date +%s)
    run_profile profile_k31_cublas --kernel k31_wgmma_cluster --vs cublas --m 4096 --n 4096 --k 4096
    run_profile profile_k10_k11 --kernel k10_4w_128x128_k32 --vs k11_4w_128x128_kunroll4 \
        --m 4096 --n 4096 --k 4096 --op-b t
    run_profile profile_k03_k04 --kernel k03_wg_64x64_k16 --vs k04_wg_64x64_k32 --m 4096 --n 4096 --k 4096
    run_profile profile_k05 --kernel k05_wg_64x64_k64 --m 4096 --n 4096 --k 4096
    summary+=("profiles: $(( $(date +%s) - t0 )) s")
    # seed 002's budget: 32 KiB per block; k10 fits, k11 and k12 are refused before launch
    smem=(verify --kernel k10_4w_128x128_k32,k11_4w_128x128_kunroll4,k12_8w_256x128_gregs --op-b t
          --m 1024 --n 1024 --k 1024 --smem-limit 32768)
    echo "$tk ${smem[*]}" > "$out/verify_smem.cmd"
    "$tk" "${smem[@]}" > "$out/verify_smem.txt" 2>&1
    summary+=("verify --smem-limit: exit $? (0: k10 passed, the others skipped)")
    # one element of C changed after the kernel ran: one failing tile (exit 1 expected)
    plant=(verify --kernel k31_wgmma_cluster --m 2048 --n 2048 --k 512 --plant 1000,1500)
    echo "$tk ${plant[*]} --png docs/error_map.png" > "$out/error_map.cmd"
    "$tk" "${plant[@]}" --png "$out/error_map.png" > "$out/error_map.txt" 2>&1
    summary+=("verify --plant --png: exit $? (1 expected: the planted tile fails)")
    for f in profile_k31_cublas profile_k10_k11 profile_k03_k04 profile_k05 verify_smem error_map; do
        echo "=== $f"; cat "$out/$f.txt"; [ -s "$out/$f.err" ] && tail -n 20 "$out/$f.err"
    done
    summary+=("then: python3 bench/profile_docs.py --docs docs/seeds.md --readme README.md --coalescing $out/profile_k10_k11.json --occupancy $out/profile_k03_k04.json $out/profile_k05.json --smem $out/verify_smem.txt --error-map $out/error_map.png")
fi
for o in fp32 bf16; do
    # the suite's summary: everything after the table
    [ -f "$out/suite_$o.txt" ] && { echo "=== suite $o"; sed -n '/^summary/,$p' "$out/suite_$o.txt"; }
done
echo "=== summary"; printf '%s\n' "${summary[@]}"
