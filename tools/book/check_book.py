#!/usr/bin/env python3
"""Read the built book in headless Chromium (Debian's chromium + chromium-driver, through python3-selenium)
and report what a reader would trip over:

- console error   anything the page logs at error level (a script that failed, a file that did not load)
- bad formula     a KaTeX error box, a .math element KaTeX did not typeset, or raw $$ left in the text
- missing image   an <img> with no decoded pixels
- broken link     an internal link to a file that is not there, or to an anchor the page does not have
- stale source    a definition link whose line, in today's source file, does not define the name it shows
- search          search.html?q=WORD finds no section, or none on the page expected, or a result without the
                  sentence that holds the word
- raw TeX         the page's contents or a search result show TeX instead of a typeset (or plain) formula
- missing font    Chinese (the seed sentence 我 有 一 个 好 朋 友) draws as the empty box of a missing glyph: no CJK
                  font (Debian's fonts-wqy-microhei, which ./run book and ./run test install)
- too wide        at 800, 1280 or 1920 px a page is wider than the window (a wide table must scroll in its own box)
- contents hidden at 1280 x 800 the page's contents are not in the first screen
- broken chain    clicking "next" from the front page does not visit every page of the chapter list in its order
                  (each page's "previous" leading back), or ends early

    tools/book/check_book.py BOOK_DIR [--search softmax=02_attention.html]

Exit status 0 when every page is clean, 1 with one line per problem (category first) otherwise. The book is
served over HTTP on the loopback address, as `./run book --serve` serves it.
"""
import argparse
import functools
import http.server
import re
import sys
import threading
import urllib.parse
from pathlib import Path

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    webdriver = None

NEEDS = "Debian's chromium, chromium-driver and python3-selenium (./run test installs them)"
NEEDS_FONT = "Debian's fonts-wqy-microhei: ./run book and ./run test install it"
ROOT = Path(__file__).resolve().parents[2]

PAGE_REPORT = """
const out = {katexErrors: [], untypeset: 0, rawMath: false, tocTex: "", images: [], links: [], defs: []};
for (const e of document.querySelectorAll('.katex-error')) out.katexErrors.push(e.getAttribute('title') || e.textContent);
for (const e of document.querySelectorAll('.math')) if (!e.querySelector('.katex')) out.untypeset++;
const clone = document.querySelector('main').cloneNode(true);
for (const e of clone.querySelectorAll('pre, code')) e.remove();
// $$ or $x$ left as text: a formula the build did not hand to KaTeX
out.rawMath = /\\$\\$|(^|[^\\\\\\w])\\$[^\\s$][^$]*[^\\s$]\\$/.test(clone.textContent);
// the contents beside the text: formulas typeset (KaTeX keeps the TeX only inside .katex), never left as TeX
const toc = document.querySelector('aside .toc');
if (toc) {
  const bare = toc.cloneNode(true);
  for (const e of bare.querySelectorAll('.katex')) e.remove();
  const tex = bare.textContent.match(/\\\\[A-Za-z]+|\\$/);
  if (tex) out.tocTex = tex[0];
}
for (const img of document.images) if (!img.complete || img.naturalWidth === 0) out.images.push(img.getAttribute('src'));
for (const a of document.querySelectorAll('a[href]')) out.links.push(a.href);
for (const a of document.querySelectorAll('a.def')) out.defs.push([a.href, a.dataset.name]);
return out;
"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory):
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def ids_in(path, cache={}):
    if path not in cache:
        cache[path] = set(re.findall(r'\sid="([^"]+)"', path.read_text(errors="replace")))
    return cache[path]


def defines(source_line, name):
    """Does this line of today's source define `name` (a function, constructor or type)?"""
    return re.search(r"(^|[\s:*&~])" + re.escape(name) + r"\s*\(", source_line) is not None or \
        re.search(r"\b(class|struct)\s+(\[\[\w+\]\]\s*)?" + re.escape(name) + r"\b", source_line) is not None


# Draws 我 and a code point no font has (U+10FFFD, private use) in the body's font on a canvas: the same pixels
# mean 我 is drawn as the missing-glyph box too.
CJK_GLYPH = """
const font = getComputedStyle(document.body).font;
const draw = text => {
  const c = document.createElement('canvas');
  c.width = 64; c.height = 64;
  const g = c.getContext('2d');
  g.font = font.replace(/\\d+px/, '40px');
  g.fillText(text, 4, 48);
  return Array.from(g.getImageData(0, 0, 64, 64).data).join(',');
};
return draw('\u6211') !== draw(String.fromCodePoint(0x10FFFD));
"""


WIDTHS = (800, 1280, 1920)


def layout(driver, base, pages):
    """At 800, 1280 and 1920 px no page is wider than the window (a wide table or output scrolls in its own box),
    and at 1280 x 800 the page's contents are in the first screen beside the text."""
    problems = []
    for width in WIDTHS:
        driver.set_window_size(width, 800)
        for rel in pages:
            driver.get(base + rel)
            wait_ready(driver)
            wide, window = driver.execute_script("const e = document.documentElement; return [e.scrollWidth, e.clientWidth]")
            if wide > window:
                problems.append(f"too wide: {rel} at {width} px: the page is {wide} px wide, the window {window}")
            toc = driver.execute_script("const t = document.querySelector('aside .toc li');"
                                        "if (!t) return null; const r = t.getBoundingClientRect();"
                                        "return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight")
            if width == 1280 and toc is False:
                problems.append(f"contents hidden: {rel} at 1280 x 800: the page's contents are not in the first screen")
    driver.set_window_size(1400, 1000)
    return problems


def wait_ready(driver):
    """Until book.js has typeset the page (or run the search): it sets body's data-ready."""
    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))


def chapter_list(book):
    """The pages of the chapter list, in its order (the front page's)."""
    chapters = re.search(r'<nav class="chapters">.*?<ol>(.*?)</ol>', (book / "index.html").read_text(), re.S)
    return re.findall(r'<li><a href="([^"]+)">', chapters.group(1))


def chain(driver, base, order):
    """Read the book front to back by its "next" links, as a reader clicks them: every page of `order`, the chapter
    list, in its order, and each page's "previous" link back to the page before."""
    problems, here = [], "index.html"
    driver.get(base + here)
    for i, expected in enumerate(order[1:], 1):
        found = driver.find_elements("css selector", 'a[rel="next"]')
        if not found:
            return problems + [f"broken chain: {here} has no next link; {expected} and {len(order) - i - 1} more unreached"]
        found[0].click()
        wait_ready(driver)
        now = urllib.parse.unquote(driver.current_url[len(base):]).split("#")[0]
        if now != expected:
            return problems + [f"broken chain: next from {here} is {now}, not {expected} (the chapter list's order)"]
        back = [a.get_attribute("href") for a in driver.find_elements("css selector", 'a[rel="prev"]')]
        if not back or urllib.parse.unquote(back[0][len(base):]) != here:
            problems.append(f"broken chain: {now}'s previous link is not {here}")
        here = now
    if driver.find_elements("css selector", 'a[rel="next"]'):
        problems.append(f"broken chain: the last page, {here}, has a next link")
    return problems


def check(book, searches):
    book = book.resolve()
    server = serve(book)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    problems, to_visit, visited = [], ["index.html"], set()
    for page in sorted(book.glob("*.html")):
        to_visit.append(page.name)
    driver = browser()
    try:
        while to_visit:
            rel = to_visit.pop(0)
            if rel in visited:
                continue
            visited.add(rel)
            driver.get(base + rel)
            wait_ready(driver)
            report = driver.execute_script(PAGE_REPORT)
            for entry in driver.get_log("browser"):
                if entry["level"] == "SEVERE":
                    problems.append(f"console error: {rel}: {entry['message']}")
            for message in report["katexErrors"]:
                problems.append(f"bad formula: {rel}: {message}")
            if report["untypeset"]:
                problems.append(f"bad formula: {rel}: {report['untypeset']} formulas not typeset")
            if report["tocTex"]:
                problems.append(f"raw TeX: {rel}: the page's contents show {report['tocTex']} untypeset")
            if report["rawMath"] and not rel.startswith("src/"):  # source comments hold shell's $x, not TeX
                problems.append(f"bad formula: {rel}: TeX left as text ($$ or $...$): a formula never typeset")
            for src in report["images"]:
                problems.append(f"missing image: {rel}: {src}")
            for href in report["links"]:
                if not href.startswith(base):
                    continue  # the web: not this book's to check
                target, _, anchor = urllib.parse.unquote(href[len(base):]).partition("#")
                target = target.split("?")[0] or "index.html"
                file = book / target
                if not file.is_file():
                    problems.append(f"broken link: {rel}: {target} does not exist")
                elif anchor and anchor not in ids_in(file):
                    problems.append(f"broken link: {rel}: {target} has no anchor #{anchor}")
                elif target.endswith(".html") and (target.count("/") == 0 or target.startswith("src/")):
                    to_visit.append(target)
            for href, name in report["defs"]:
                target, _, anchor = urllib.parse.unquote(href[len(base):]).partition("#")
                source = ROOT / re.sub(r"^src/|\.html$", "", target)
                line = int(anchor[1:]) if anchor.startswith("L") and anchor[1:].isdigit() else 0
                lines = source.read_text(errors="replace").split("\n") if source.is_file() else []
                if not 0 < line <= len(lines) or not defines(lines[line - 1], name):
                    problems.append(f"stale source: {rel}: {name} -> {target}#{anchor} is not its definition today")
        problems += chain(driver, base, chapter_list(book))
        problems += layout(driver, base, chapter_list(book))
        driver.get(base + "index.html")
        if not driver.execute_script(CJK_GLYPH):
            problems.append(f"missing font: Chinese draws as empty boxes: no CJK font ({NEEDS_FONT})")
        for word, expected in searches:
            driver.get(base + "search.html?q=" + urllib.parse.quote(word))
            wait_ready(driver)
            hits = driver.execute_script("return [...document.querySelectorAll('#search-results a')].map(a => a.getAttribute('href'))")
            if not any(h.split("#")[0] == expected for h in hits):
                problems.append(f"search: '{word}' found {len(hits)} sections, none on {expected}")
            shown = driver.execute_script("return [...document.querySelectorAll('#search-results li')].map(li => "
                                          "[li.querySelector('a').textContent, (li.querySelector('.snippet') || {}).textContent || ''])")
            for title, snippet in shown:
                tex = re.search(r"\\[A-Za-z]+|\$", title + " " + snippet)
                if tex:
                    problems.append(f"raw TeX: search '{word}': a result shows {tex.group(0)} ({title})")
                    break
            if any(word.lower() not in snippet.lower() for title, snippet in shown if word.lower() not in title.lower()):
                problems.append(f"search: '{word}': a result shows no sentence holding the word")
    finally:
        driver.quit()
        server.shutdown()
    return problems, len(visited)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("book", type=Path)
    parser.add_argument("--search", action="append", default=[], metavar="WORD=PAGE",
                        help="a word search must find on PAGE (repeatable)")
    args = parser.parse_args()
    if webdriver is None or not Path("/usr/bin/chromium").exists() or not Path("/usr/bin/chromedriver").exists():
        print(f"check_book: cannot start a browser: this needs {NEEDS}")
        return 2
    if not (args.book / "index.html").is_file():
        print(f"check_book: {args.book} holds no book (tools/book/build_book.py --out {args.book})")
        return 2
    problems, pages = check(args.book, [tuple(s.split("=", 1)) for s in args.search])
    return report(problems, f"{pages} pages read in Chromium")


def report(problems, summary):
    """One line per problem, then the summary with their count; the exit status (1 when any)."""
    for p in problems:
        print(p)
    print(f"{summary}: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
