#!/bin/sh
# The book's browser test must go red for each defect it names: build the planted book (tests/docs/planted_book),
# move one definition link to a line that defines nothing (a book built from older code), read it in
# Chromium, and require tools/book/check_book.py to fail with every expected report.
#   planted_book.sh SOURCE_DIR OUT_DIR
set -u
src=$1 out=$2
/usr/bin/python3 "$src/tools/book/build_book.py" --readme "$src/tests/docs/planted_book/README.md" \
  --docs "$src/tests/docs/planted_book" --out "$out" >/dev/null || exit 1
sed -i -E 's/(data-name="scaled_dot_product_attention" href="[^"#]*#L)[0-9]+/\11/' "$out/planted.html"
report=$(/usr/bin/python3 "$src/tools/book/check_book.py" "$out")
status=$?
printf "%s\n" "$report"
[ "$status" = 1 ] || { echo "FAIL: check_book.py exited $status, not 1"; exit 1; }
missing=0
for expected in "bad formula: planted.html: ParseError: KaTeX parse error" \
                "missing image: planted.html: images/not_drawn.svg" \
                "broken link: planted.html: nowhere.html does not exist" \
                "broken link: planted.html: index.html has no anchor #no-such-section" \
                "stale source: planted.html: scaled_dot_product_attention"; do
  printf '%s\n' "$report" | grep -qF "$expected" || { echo "FAIL: no report \"$expected\""; missing=1; }
done
[ "$missing" = 0 ] && echo "every planted defect was reported"
exit "$missing"
