#!/bin/sh
# The book's browser test must go red for each defect it names: build the planted book (tests/docs/planted_book),
# move one definition link to a line that defines nothing (a book built from older code), point the front page's
# "next" back at itself (a broken chain), read it in
# Chromium, and require tools/book/check_book.py to report every line of planted_book/expected.txt.
#   planted_book.sh SOURCE_DIR OUT_DIR
set -u
src=$1 out=$2 planted=$1/tests/docs/planted_book
/usr/bin/python3 "$src/tools/book/build_book.py" --readme "$planted/README.md" --docs "$planted" --out "$out" >/dev/null ||
  exit 1
sed -i -E 's/(data-name="scaled_dot_product_attention" href="[^"#]*#L)[0-9]+/\11/' "$out/planted.html"
sed -i -E 's/<a rel="next" href="README.html">/<a rel="next" href="index.html">/' "$out/index.html"  # a chain that loops
# The heading's formula left as TeX in the page's contents and in the search data; search results without the
# sentence that holds the word.
sed -i -E 's#(<li class="l2"><a href="\#why-divide-by-sqrtd_k">Why divide by )<span class="math inline">([^<]*)</span>#\1\2#' \
  "$out/planted.html"
sed -i 's/\\u221ad_k/\\\\sqrt{d_k}/g' "$out/search_data.js"  # in the JSON: \u221a is the root sign, \\ a backslash
sed -i 's/snippet.textContent = matchingSentence(doc.text, query);//' "$out/book.js"
# A wide table that widens the page instead of scrolling in its own box.
sed -i 's/^main table:not(.annotated) { display: block; overflow-x: auto; max-width: 100%; }$//' "$out/book.css"
echo 'aside.contents { display: none; }' >>"$out/book.css"  # the page's contents hidden
# and a browser that has no font for Chinese (its fontconfig lists DejaVu alone).
FONTCONFIG_FILE=$(cd "$src" && pwd)/tests/docs/no_cjk_font.conf exec sh "$src/tests/docs/expect_reports.sh" "$planted/expected.txt" /usr/bin/python3 "$src/tools/book/check_book.py" "$out" \
  --search divide=planted.html --search typesets=planted.html
