#!/usr/bin/env python3
"""The README's picture of the book: a chapter page and its annotated source side by side, in headless Chromium.

    tools/book/screenshot.py BOOK_DIR OUT.png [--chapter 02_attention.html#masks]
                             [--source src/transformer/src/attention.cpp.html#L34]
"""
import argparse
import sys
from pathlib import Path

from check_book import browser, serve

SIDE_BY_SIDE = """<!DOCTYPE html><html><body style="margin:0;display:flex;gap:6px;background:#888">
<iframe src="{chapter}" style="width:50%;height:100vh;border:0"></iframe>
<iframe src="{source}" style="width:50%;height:100vh;border:0"></iframe></body></html>"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("book", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--chapter", default="02_attention.html#masks")
    parser.add_argument("--source", default="src/transformer/src/attention.cpp.html#L34")
    args = parser.parse_args()
    page = args.book / "side_by_side.html"
    page.write_text(SIDE_BY_SIDE.format(chapter=args.chapter, source=args.source))
    server = serve(args.book)
    driver = browser()
    try:
        driver.set_window_size(1800, 900)
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/side_by_side.html")
        driver.implicitly_wait(2)
        driver.execute_script("return new Promise(r => setTimeout(r, 1500))")
        driver.save_screenshot(str(args.out))
    finally:
        driver.quit()
        server.shutdown()
        page.unlink()
    print(args.out)


if __name__ == "__main__":
    sys.exit(main())
