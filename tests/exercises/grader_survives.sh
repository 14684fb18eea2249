#!/usr/bin/env bash
# The grader survives what a learner's code can do to a test program: a crash, a hang. A fake build whose
# autograd_tests crashes for [ex0.1], hangs for [ex0.2] and passes [ex0.3]: the grader must report each,
# go on to the next exercise, and write them to the JSON.
# Usage: grader_survives.sh EXERCISES_TOOL SOURCE_DIR WORK_DIR
set -euo pipefail
tool=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work/bin"
cat > "$work/bin/autograd_tests" <<'FAKE'
#!/bin/sh
case "$1" in
  "[ex0.1]") kill -SEGV $$ ;;
  "[ex0.2]") exec sleep 60 ;;
  "[ex0.3]") echo "Passed 1 test case with 1 assertion." ; exit 0 ;;
  *) echo "No tests ran" ; exit 0 ;;
esac
FAKE
chmod +x "$work/bin/autograd_tests"
out=$(STEPFORMER_GRADE_TIMEOUT=2 "$tool" --root "$src" grade --build "$work" --chapter 0 --json "$work/grade.json")
echo "$out"
grep -q "0.1 .*FAIL .*crashed (signal 11)" <<<"$out"
grep -q "0.2 .*FAIL .*timed out after 2 s" <<<"$out"
grep -q "0.3 .*5/5 .*pass" <<<"$out"
grep -q "0.4 .*FAIL .*no test carries the tag" <<<"$out"
grep -q '"total": 5' "$work/grade.json"
echo "the grader reported the crash, the hang and the pass, and went on"
