#!/usr/bin/env bash
# The grader on fake builds, whose autograd_tests answers each tag as a case list says.
#  1. It survives what a learner's code can do to a test program: [ex0.1] crashes, [ex0.2] hangs, [ex0.3] passes;
#     it reports each, goes on to the next exercise, and writes them to the JSON.
#  2. It reports like a teacher: [ex0.4] fails with its stub's message and [ex12.3] with a 300-character one;
#     graded alone, chapter 12 still says 12.3 is blocked by 0.4 and 0.5 (chapter 00's, graded with it for that
#     and not listed), and a failure too long for the table's column is printed whole under the table.
# Usage: grader_fakes.sh EXERCISES_TOOL SOURCE_DIR WORK_DIR
set -euo pipefail
tool=$1 src=$2 work=$3
fake_tests() {  # fake_tests CASES: a fresh fake build whose autograd_tests runs `case "$1" in CASES esac`
  rm -rf "$work" && mkdir -p "$work/bin"
  printf '#!/bin/sh\ncase "$1" in\n%s\n  *) echo "No tests ran" ; exit 0 ;;\nesac\n' "$1" >"$work/bin/autograd_tests"
  chmod +x "$work/bin/autograd_tests"
}

echo "== 1. a crash, a hang, a pass"
fake_tests '  "[ex0.1]") kill -SEGV $$ ;;
  "[ex0.2]") exec sleep 60 ;;
  "[ex0.3]") echo "Passed 1 test case with 1 assertion." ; exit 0 ;;'
out=$(STEPFORMER_GRADE_TIMEOUT=2 "$tool" --root "$src" grade --build "$work" --chapter 0 --json "$work/grade.json")
echo "$out"
grep -q "0.1 .*FAIL .*crashed (signal 11)" <<<"$out"
grep -q "0.2 .*FAIL .*timed out after 2 s" <<<"$out"
grep -q "0.3 .*5/5 .*pass" <<<"$out"
grep -q "0.4 .*FAIL .*no test carries the tag" <<<"$out"
grep -q '"total": 5' "$work/grade.json"
echo "the grader reported the crash, the hang and the pass, and went on"

echo "== 2. blockers in another chapter, a failure too long for the table"
long=$(printf 'the gradient of silu at 0.5 is wrong %.0s' {1..8})
fake_tests "  --list-tags) echo '[ex0.4] [ex12.3]' ;;
  '[ex0.4]') echo \"test.cpp:1: failed: unexpected exception with message: 'exercise 0.4: every node reachable'\" ; exit 1 ;;
  '[ex12.3]') echo \"test.cpp:2: failed: close(g, want) for: false with 1 message: '$long END'\" ; exit 1 ;;"
out=$(COLUMNS=100 "$tool" --root "$src" grade --build "$work" --chapter 12 --json "$work/grade.json")
echo "$out"
grep -q "^12 .* 12\.3 .*FAIL .*blocked by 0\.4, 0\.5: " <<<"$out" ||
  { echo "FAILED: 12.3 is not reported as blocked by chapter 00's 0.4 and 0.5"; exit 1; }
! grep -q "^00 " <<<"$out" || { echo "FAILED: chapter 00's exercises are listed in chapter 12's grade"; exit 1; }
awk 'length > 100 && /^12 / { exit 1 }' <<<"$out" || { echo "FAILED: a table line is wider than COLUMNS=100"; exit 1; }
grep -q "^12\.3: blocked by 0\.4, 0\.5: '.*END'" <<<"$out" ||
  { echo "FAILED: 12.3's whole failure is not printed under the table"; exit 1; }
grep -q '"blocked_by": "0.4, 0.5"' "$work/grade.json" || { echo "FAILED: grade.json lacks blocked_by"; exit 1; }
echo "chapter 12 graded alone names its blockers in chapter 00, and the cut failure is printed whole"
