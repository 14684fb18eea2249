#!/usr/bin/env bash
# The exercise table (tools/exercises/exercises.txt: points and needs) and the EXERCISE markers in the sources
# agree: `exercises list` reads them both, and stops with the file and line at each disagreement we plant in a
# copy — a marker without a row, a row without a marker, a need that is no exercise, a row without points.
# Usage: table.sh EXERCISES_TOOL SOURCE_DIR WORK_DIR
set -euo pipefail
tool=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work/tools/exercises"
cp -r "$src/autograd" "$src/nn" "$src/transformer" "$src/distributed" "$work/"
table=$work/tools/exercises/exercises.txt
cp "$src/tools/exercises/exercises.txt" "$table"
"$tool" --root "$work" list >/dev/null
expect_stop() {  # expect_stop WHAT MESSAGE: list must fail and name MESSAGE; the table is restored after
  local out
  if out=$("$tool" --root "$work" list 2>&1); then echo "FAILED: $1 went unseen"; exit 1; fi
  grep -qF "$2" <<<"$out" || { echo "FAILED: $1: the error does not say '$2':"; echo "$out"; exit 1; }
  echo "planted $1: $out"
  cp "$src/tools/exercises/exercises.txt" "$table"
}
sed -i '/^2\.5 /d' "$table"
expect_stop "a marker without a row" "exercise 2.5 has no row in tools/exercises/exercises.txt"
echo "13.1 2" >>"$table"
expect_stop "a row without a marker" "exercise 13.1: no // EXERCISE marker in the sources"
sed -i 's/^\(2\.5 .*\)2\.4$/\12.9/' "$table"
expect_stop "a need that is no exercise" "exercise 2.5 needs 2.9, which is no exercise"
sed -i 's/^\(3\.1 *\)[0-9]*/\1/' "$table"
expect_stop "a row without points" "expected \`number points [needs ...]\`"
echo "the exercise table and the markers agree; each planted disagreement stopped exercises list"
