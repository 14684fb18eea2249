#!/usr/bin/env bash
# The grader reports like a teacher, on a fake build whose autograd_tests fails [ex0.4] with its stub's message
# and [ex12.3] with a 300-character message: graded alone, chapter 12 still says 12.3 is blocked by 0.4 and 0.5
# (chapter 00's, graded with it for that and not listed), and a failure too long for the table's column is
# printed whole under the table.
# Usage: grader_reports.sh EXERCISES_TOOL SOURCE_DIR WORK_DIR
set -euo pipefail
tool=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work/bin"
long=$(printf 'the gradient of silu at 0.5 is wrong %.0s' {1..8})
cat > "$work/bin/autograd_tests" <<FAKE
#!/bin/sh
case "\$1" in
  --list-tags) echo "[ex0.4] [ex12.3]" ;;
  "[ex0.4]") echo "test.cpp:1: failed: unexpected exception with message: 'exercise 0.4: every node reachable'" ; exit 1 ;;
  "[ex12.3]") echo "test.cpp:2: failed: close(g, want) for: false with 1 message: '$long END'" ; exit 1 ;;
  *) echo "No tests ran" ; exit 0 ;;
esac
FAKE
chmod +x "$work/bin/autograd_tests"
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
