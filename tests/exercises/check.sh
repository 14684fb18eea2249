#!/usr/bin/env bash
# The exercises' CI proof (docs/exercises.md), run by CTest, on a workspace with two builds as ./run grade
# makes them (the tests with g++; cuda_tests in cuda-sim's checking build, where chapter 09 is counted):
#  1. a fresh workspace builds (warnings are errors) and scores 0, every exercise failing with NotImplemented;
#  2. the same workspace with every body of each marked region in one build, chosen at run time by
#     STEPFORMER_EXERCISE_BODIES (an incremental rebuild: only the marked files): each exercise's tests pass
#     exactly when it and the exercises it needs are restored, and every other exercise still fails; then the
#     bug bank (tools/exercises/bank): every wrong solution scores 0 with a first failure naming its mistake,
#     every alternative solution full points. The bank's table is written to WORK_DIR.bank.md;
#  3. with every body the reference's, it scores full points.
# Usage: check.sh SOURCE_DIR REFERENCE_BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 ref=$2 work=$3
tool=$ref/bin/exercises
kernels=(-DCMAKE_CXX_COMPILER=clang++ -DSTEPFORMER_CUDASIM_CHECK=ON)  # chapter 09 is graded on cuda-sim's counters
configure() {  # configure DIR [options]: the grade builds, as ./run grade makes them
  cmake -S "$work" -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DSTEPFORMER_CUDA=OFF \
        -DSTEPFORMER_BUILD_DEMOS=OFF -DSTEPFORMER_EXERCISE_WORKSPACE=ON -DSTEPFORMER_WERROR=ON "${@:2}" >/dev/null
}
builds=(--build "$work/build/grade" --kernel-build "$work/build/grade-kernels")
# Chapter 10's tests exist where CMake found MPI (./run test installs it).
test_targets() {
  local t=(autograd_tests nn_tests transformer_tests)
  # not grep -q: it would stop reading, and pipefail would count cmake's SIGPIPE as a failure
  cmake --build "$work/build/grade" --target help | grep -w distributed_tests >/dev/null && t+=(distributed_tests)
  echo "${t[@]}"
}
echo "== 1. a fresh workspace"
rm -rf "$work"
"$tool" --root "$src" workspace "$work"
configure "$work/build/grade"
configure "$work/build/grade-kernels" "${kernels[@]}"
cmake --build "$work/build/grade" -j2 --target $(test_targets) exercises
cmake --build "$work/build/grade-kernels" -j2 --target cuda_tests
"$tool" --root "$work" grade "${builds[@]}" --expect stubbed
# WORKSPACE.md locates each exercise by file, function and marker (a workspace's stubs move every line): no
# line numbers, and each row's file holds its marker and a definition of each function it names.
guide=$work/WORKSPACE.md
! grep -nE '\.(cpp|h|cu|cuh):[0-9]+' "$guide" || { echo "FAILED: $guide cites line numbers"; exit 1; }
rows=0
while IFS='|' read -r _ number _ file functions _; do
  number=$(echo $number) file=$(echo "$file" | tr -d '` ')
  [ -f "$work/$file" ] && grep -q "// EXERCISE $number (" "$work/$file" ||
    { echo "FAILED: WORKSPACE.md: exercise $number's marker is not in $file"; exit 1; }
  for f in $(echo "$functions" | grep -o '`[^`]*`' | tr -d '`'); do
    grep -rqE "^[^ /].*\b${f//\(\)/\\(\\)} *\(" "$work/autograd" "$work/nn" "$work/transformer" "$work/distributed" ||
      { echo "FAILED: WORKSPACE.md: exercise $number names $f, defined nowhere in the library"; exit 1; }
  done
  rows=$((rows + 1))
done < <(grep -E '^\| [0-9]+\.[0-9]+ \|' "$guide")
[ "$rows" -gt 0 ] || { echo "FAILED: WORKSPACE.md lists no exercise"; exit 1; }
echo "WORKSPACE.md: $rows exercises, each by file, function and marker"
echo "== 2. each exercise restored alone, then the bug bank"
"$tool" --root "$src" workspace "$work" --bank --marked-only
cmake --build "$work/build/grade" -j2 --target $(test_targets)
cmake --build "$work/build/grade-kernels" -j2 --target cuda_tests
"$tool" --root "$src" prove "${builds[@]}" --table "$work.bank.md"
echo "== 3. the reference: every body the repository's, full points"
STEPFORMER_EXERCISE_BODIES='*=reference' "$tool" --root "$src" grade "${builds[@]}" --json "$work.reference.json" \
  --expect pass
