#!/bin/sh
# The docs' drift check must go red for each kind of drift it names: run tools/book/check_docs.py on a doc with
# one of each planted (tests/docs/planted_drift) and require every expected report.
#   planted_drift.sh SOURCE_DIR BIN_DIR
set -u
src=$1 bin=$2 planted=tests/docs/planted_drift
report=$(/usr/bin/python3 "$src/tools/book/check_docs.py" --bin "$bin" --readme "$src/$planted/README.md" --docs "$src/$planted")
status=$?
printf '%s\n' "$report"
[ "$status" = 1 ] || { echo "FAIL: check_docs.py exited $status, not 1"; exit 1; }
missing=0
for expected in "README.md:4: link to 03_drift.md#no-such-heading: 03_drift.md has no heading #no-such-heading" \
                "03_drift.md:4: \`autograd/src/ops/nowhere.cpp\` does not exist" \
                "03_drift.md:4: \`scaled_dot_product_attentoin()\`: no source file uses the name" \
                "03_drift.md:5: \`every mask blocks what it should and nothing more ever\`: no test has that name" \
                "03_drift.md:6: \`07_transformer numerals --steps 100 --no-such-option\`: 07_transformer numerals has no option --no-such-option" \
                "03_drift.md:6: \`./run everything\`: ./run has no 'everything'" \
                "section '## Measured' quotes measurements without naming the machine" \
                "section '## Measured' quotes measurements without the command that made them" \
                "03_drift.md:16: exercise 2.3: 9 points here, 6 in the source" \
                "03_drift.md:3: the chapter does not open with **After this chapter** you can" \
                "03_drift.md:21: \`build/release/bin/02_attention --heads 2 --no-such-flag\`: 02_attention has no option --no-such-flag"; do
  printf '%s\n' "$report" | grep -qF "$expected" || { echo "FAIL: no report \"$expected\""; missing=1; }
done
[ "$missing" = 0 ] && echo "every planted drift was reported"
exit "$missing"
