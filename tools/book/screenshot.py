#!/usr/bin/env python3
"""The README's pictures of the book, in headless Chromium: a chapter page and its annotated source side by side;
or (--run) a chapter page of a book built with --wasm, its demo run in the page beside the text.

    tools/book/screenshot.py BOOK_DIR OUT.png [--chapter 02_attention.html#masks]
                             [--source src/transformer/src/attention.cpp.html#L34]
    tools/book/screenshot.py BOOK_DIR OUT.png --run --chapter 02_attention.html
"""
import argparse
import sys
from pathlib import Path

from check_book import browser, serve
from check_page_demos import open_panel
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def run_panel(book, chapter, out):
    """The chapter opened from disk, its Run panel run, the page scrolled to show the text above the panel."""
    driver = browser()
    try:
        driver.set_window_size(1400, 1000)
        section = open_panel(driver, book / chapter)
        section.find_element(By.CSS_SELECTOR, "button").click()
        WebDriverWait(driver, 300).until(lambda d: section.get_attribute("data-status") in ("done", "failed"))
        driver.execute_script("window.scrollTo(0, arguments[0].getBoundingClientRect().top + scrollY - 260)", section)
        driver.execute_script("return new Promise(r => setTimeout(r, 500))")
        driver.save_screenshot(str(out))
    finally:
        driver.quit()

SIDE_BY_SIDE = """<!DOCTYPE html><html><body style="margin:0;display:flex;gap:6px;background:#888">
<iframe src="{chapter}" style="width:50%;height:100vh;border:0"></iframe>
<iframe src="{source}" style="width:50%;height:100vh;border:0"></iframe></body></html>"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("book", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--chapter", default="02_attention.html#masks")
    parser.add_argument("--source", default="src/transformer/src/attention.cpp.html#L34")
    parser.add_argument("--run", action="store_true", help="the chapter alone, its demo run in the page")
    args = parser.parse_args()
    if args.run:
        run_panel(args.book, args.chapter, args.out)
        print(args.out)
        return 0
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
