#!/usr/bin/env bash
# A learner's workspace holds no answer: `exercises leaks` finds none in a freshly generated workspace (all
# chapters, and one chapter), and finds each kind we plant in a copy: the bug bank (its ALTERNATIVE entries are
# correct solutions) and a reference body pasted, re-indented, into a doc.
# Usage: no_answers.sh EXERCISES_TOOL SOURCE_DIR WORK_DIR
set -euo pipefail
tool=$1 src=$2 work=$3
rm -rf "$work"
"$tool" --root "$src" workspace "$work/all" >/dev/null
"$tool" --root "$src" leaks "$work/all"
[ ! -e "$work/all/tools/exercises/bank" ] || { echo "FAILED: the workspace holds the bug bank"; exit 1; }
"$tool" --root "$src" workspace "$work/ch02" --chapter 2 >/dev/null
"$tool" --root "$src" leaks "$work/ch02" --chapter 2
# A rewritten header keeps `#pragma once` above the includes the rewrite adds.
for h in $(grep -rlE '^ *// EXERCISE [0-9]+\.[0-9]+[: ]' "$work/all/autograd" "$work/all/transformer" --include='*.h'); do
  once=$(grep -n '^#pragma once' "$h" | head -1 | cut -d: -f1) include=$(grep -n '^#include' "$h" | head -1 | cut -d: -f1)
  [ -n "$once" ] && [ "$once" -lt "$include" ] || { echo "FAILED: $h: an #include above #pragma once"; exit 1; }
done
expect_leak() {  # expect_leak WHAT PATTERN: leaks must exit 1 and name PATTERN
  local out
  if out=$("$tool" --root "$src" leaks "$work/all"); then echo "FAILED: $1 went unseen"; exit 1; fi
  grep -q "$2" <<<"$out" || { echo "FAILED: $1: the report does not name '$2':"; echo "$out"; exit 1; }
  echo "planted $1: found"
}
cp -r "$src/tools/exercises/bank" "$work/all/tools/exercises/bank"
expect_leak "the bug bank copied in" "tools/exercises/bank/ch12.txt: exercise 12.5: the bank's ALTERNATIVE"
rm -r "$work/all/tools/exercises/bank"
# Exercise 0.3's reference body, from the line after its marker to the line before END EXERCISE, indented.
sed -n '/EXERCISE 0\.3:/,/END EXERCISE/p' "$src/autograd/src/ops/reduce.cpp" | sed '1d;$d;s/^/    /' \
  >> "$work/all/docs/00_autograd.md"
expect_leak "a reference body in a doc" "docs/00_autograd.md: exercise 0.3: the reference's region 1"
echo "a generated workspace holds no answer; both planted answers were found"
