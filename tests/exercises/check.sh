#!/usr/bin/env bash
# The exercises' CI proof (docs/exercises.md), run by CTest:
#  1. the reference build scores 100/100;
#  2. a fresh workspace builds (warnings are errors) and scores 0, every exercise failing with NotImplemented;
#  3. the same workspace with every body of each marked region in one build, chosen at run time by
#     STEPFORMER_EXERCISE_BODIES (an incremental rebuild: only the marked files): each exercise's tests pass
#     exactly when it and the exercises it needs are restored, and every other exercise still fails; then the
#     bug bank (tools/exercises/bank): every wrong solution scores 0 with a first failure naming its mistake,
#     every alternative solution full points. The bank's table is written to WORK_DIR.bank.md.
# Usage: check.sh SOURCE_DIR REFERENCE_BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 ref=$2 work=$3
tool=$ref/bin/exercises
echo "== 1. the reference"
"$tool" --root "$src" grade --build "$ref" --json "$work.reference.json" --expect pass
echo "== 2. a fresh workspace"
rm -rf "$work"
"$tool" --root "$src" workspace "$work"
cmake -S "$work" -B "$work/build/grade" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DSTEPFORMER_CUDA=OFF -DSTEPFORMER_BUILD_DEMOS=OFF \
      -DSTEPFORMER_EXERCISE_WORKSPACE=ON -DSTEPFORMER_WERROR=ON >/dev/null
cmake --build "$work/build/grade" -j2 --target autograd_tests nn_tests transformer_tests cuda_tests exercises
"$tool" --root "$work" grade --build "$work/build/grade" --expect stubbed
echo "== 3. each exercise restored alone, then the bug bank"
"$tool" --root "$src" workspace "$work" --bank --marked-only
cmake --build "$work/build/grade" -j2 --target autograd_tests nn_tests transformer_tests cuda_tests
"$tool" --root "$src" prove --build "$work/build/grade" --table "$work.bank.md"
