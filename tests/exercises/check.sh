#!/usr/bin/env bash
# The exercises' CI proof (docs/exercises.md), run by CTest, on a workspace with two builds as ./run grade
# makes them (the tests with g++; cuda_tests in cuda-sim's checking build, where chapter 09 is counted), but
# unity builds: they compile in 244 s where the learner's per-file builds take 386 s (2-core AMD EPYC Zen 3), and
# the proof never rebuilds (a learner's edit recompiles one file). The proof builds once: a --bank workspace
# holds every body of each marked region (the reference's, each bug-bank entry's, the stub), chosen at run time
# by STEPFORMER_EXERCISE_BODIES (none named: the stub).
#  1. with no body named it scores 0, every exercise failing with NotImplemented, as a fresh workspace does;
#     a fresh workspace (stubs only) compiles, warnings being errors: each source its stubs reach (below) is
#     compiled from a fresh copy with -fsyntax-only by the g++ build's own command, the kernels (.cu) by clang's
#     too (every other source is the same file in both workspaces);
#  2. each exercise's tests pass when it and the exercises it needs are restored (the others stubs), and fail at
#     its stub when every other exercise is restored; then the bug bank (tools/exercises/bank): every wrong solution scores 0 with a first
#     failure naming its mistake, every alternative solution full points. The bank's table goes to WORK_DIR.bank.md;
#  3. with every body the reference's, it scores full points.
# Usage: check.sh SOURCE_DIR REFERENCE_BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 ref=$2 work=$3 fresh=$3.fresh
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
# Build DIR's compile commands (compile_commands.json, JSON escapes undone) of the sources that match PATTERN,
# reading the fresh copy.
fresh_commands() {
  grep -E '^ *"command": ' "$1/compile_commands.json" | sed -E 's/^ *"command": "(.*)",?$/\1/; s/\\"/"/g; s/\\\\/\\/g' |
    grep -E " -c $work/$2\$" | sed "s#$work/#$fresh/#g; s#$fresh/build/#$work/build/#g"
}
# The sources a fresh workspace's stubs can break: the marked ones, and those that include a marked header
# (directly or through other headers of the library). bfloat16.h is left out of the headers: its exercise is an
# inline function, not a template, so any source that includes it (every marked one does) compiles it whole.
stub_sources() {
  local trees=(autograd nn transformer distributed tests) marked headers names found
  includers() { [ -z "$names" ] || (cd "$fresh" && grep -rlE "#include [\"<]([^\">]*/)?($names)[\">]" "${trees[@]}" "$@" || true); }
  marked=$(cd "$fresh" && grep -rlE '^ *// EXERCISE [0-9]+\.[0-9]+[: ]' "${trees[@]}")
  headers=$(grep -E '\.(h|cuh)$' <<<"$marked" | { grep -v '/bfloat16\.h$' || true; } | sort -u)
  while :; do
    names=$(for h in $headers; do basename "$h"; done | sort -u | sed 's/\./\\./g' | paste -sd'|')
    found=$( (echo "$headers"; includers --include='*.h' --include='*.cuh') | sed '/^$/d' | sort -u)
    [ "$found" = "$headers" ] && break
    headers=$found
  done
  (grep -E '\.(cpp|cu)$' <<<"$marked"; includers --include='*.cpp' --include='*.cu') | sort -u | sed 's/\./\\./g' |
    paste -sd'|' | sed 's/.*/(&)/'
}
echo "== 1. one build of a --bank workspace; with no body named it scores 0, and a fresh workspace compiles"
rm -rf "$work" "$fresh"
"$tool" --root "$src" workspace "$work" --bank
configure "$work/build/grade" -DCMAKE_UNITY_BUILD=ON
configure "$work/build/grade-kernels" "${kernels[@]}" -DCMAKE_UNITY_BUILD=ON
# configured, never built: their compile_commands.json name each source (a unity build's name its bundles)
configure "$work/build/commands"
configure "$work/build/commands-kernels" "${kernels[@]}"
# (not the workspace's own exercises tool: its sources are the project's, which the release build compiles)
cmake --build "$work/build/grade" -j2 --target $(test_targets)
cmake --build "$work/build/grade-kernels" -j2 --target cuda_tests
env -u STEPFORMER_EXERCISE_BODIES "$tool" --root "$src" grade "${builds[@]}" --expect stubbed
"$tool" --root "$src" workspace "$fresh"
sources=$(stub_sources)
commands=$( (fresh_commands "$work/build/commands" "$sources"; fresh_commands "$work/build/commands-kernels" ".*\.cu") )
for f in transformer/src/attention.cpp autograd/backends/cpu/loss.cpp; do  # a marked source; one that instantiates
  grep -q " -c $fresh/$f\$" <<<"$commands" || { echo "FAILED: no compile command reads the fresh copy's $f"; exit 1; }
done
# Compiled in the background while step 2 grades: its chapter 10 runs mostly wait on mpirun, leaving the CPU idle.
xargs -d '\n' -P2 -I{} sh -c '{} -fsyntax-only' <<<"$commands" >"$work.syntax.log" 2>&1 &
syntax=$!
# WORKSPACE.md locates each exercise by file, function and marker (a workspace's stubs move every line): no
# line numbers, and each row's file holds its marker and a definition of each function it names.
guide=$fresh/WORKSPACE.md
! grep -nE '\.(cpp|h|cu|cuh):[0-9]+' "$guide" || { echo "FAILED: $guide cites line numbers"; exit 1; }
rows=0
while IFS='|' read -r _ number _ _ file functions _; do
  number=$(echo $number) file=$(echo "$file" | tr -d '` ')
  [ -f "$fresh/$file" ] && grep -q "// EXERCISE $number:" "$fresh/$file" ||
    { echo "FAILED: WORKSPACE.md: exercise $number's marker is not in $file"; exit 1; }
  for f in $(echo "$functions" | grep -o '`[^`]*`' | tr -d '`'); do
    # a definition at the left margin: after its return type, or first on the line (a constructor)
    grep -rqE "^([^ /].*\b)?${f//\(\)/\\(\\)} *\(" "$fresh/autograd" "$fresh/nn" "$fresh/transformer" "$fresh/distributed" ||
      { echo "FAILED: WORKSPACE.md: exercise $number names $f, defined nowhere in the library"; exit 1; }
  done
  rows=$((rows + 1))
done < <(grep -E '^\| [0-9]+\.[0-9]+ \|' "$guide")
[ "$rows" -gt 0 ] || { echo "FAILED: WORKSPACE.md lists no exercise"; exit 1; }
echo "WORKSPACE.md: $rows exercises, each by file, function and marker"
echo "== 2. each exercise restored alone, then the bug bank"
"$tool" --root "$src" prove "${builds[@]}" --table "$work.bank.md"
wait "$syntax" || { cat "$work.syntax.log"; echo "FAILED: a fresh workspace's library does not compile (above)"; exit 1; }
echo "the fresh workspace's stubs compile: $(grep -c . <<<"$commands") compilations of the sources they reach"
echo "== 3. the reference: every body the repository's, full points"
STEPFORMER_EXERCISE_BODIES='*=reference' "$tool" --root "$src" grade "${builds[@]}" --json "$work.reference.json" \
  --expect pass
