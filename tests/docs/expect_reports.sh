#!/bin/sh
# A checker must go red for each defect planted for it: run COMMAND, require exit status 1 and, in its output,
# every line of EXPECTED (each one planted defect's report).
#   expect_reports.sh EXPECTED COMMAND [ARG...]
set -u
expected=$1
shift
report=$("$@")
status=$?
printf '%s\n' "$report"
[ "$status" = 1 ] || { echo "FAIL: $1 exited $status, not 1"; exit 1; }
missing=0
while IFS= read -r line; do
  printf '%s\n' "$report" | grep -qF -- "$line" || { echo "FAIL: no report \"$line\""; missing=1; }
done <"$expected"
[ "$missing" = 0 ] && echo "every planted defect was reported ($(grep -c . "$expected") expected)"
exit "$missing"
