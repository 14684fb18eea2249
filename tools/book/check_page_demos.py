#!/usr/bin/env python3
"""Run every chapter demo of the book in its own page, in headless Chromium, and compare what it prints with the
native demo run with the same arguments (the seed is the demos' default, 1).

    tools/book/check_page_demos.py BOOK_DIR --bin build/release/bin [--only 02_attention] [--plant 02_attention]

The book is opened from disk (file://), as a reader without a server opens it. Each page's Run panel runs with the
arguments it shows; it must end with exit 0, print the same lines as the native demo, and its numbers must equal
the native ones: exactly, or within the tolerance TOLERANCES states, where the page's kernels differ from the
native ones (the portable GEMM micro-kernel and WASM SIMD in the page, AVX-512 natively: sums in another order).
Pictures must show as they are written (PICTURES_EARLY); a run given a bad argument must fail with the native
demo's typed error (ERROR_RUNS). Step mode (STEP_RUNS) must show one stage per click with the pictures that stage wrote, and then the whole output;
and the pages with panels must fit the window at 800, 1280 and 1920 px (check_book's layout check).
--plant N changes one number of demo N's native output before comparing: the check must then fail (the CTest
that plants it expects failure).
"""
import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from check_book import NEEDS, browser, layout, report, wait_ready

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    By = None

NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")

# Lines the two builds word differently on purpose, mapped to one form: the page has no graphviz (the native
# demo draws the figure, or says how to get graphviz; the page says it wrote the .dot).
SAME_MEANING = [
    (re.compile(r"^wrote (\S+)\.svg$"), r"figure \1"),
    (re.compile(r"^\(install graphviz to draw (\S+)\.svg: .*\)$"), r"figure \1"),
    (re.compile(r"^\(wrote (\S+)\.dot; graphviz draws it outside the browser\)$"), r"figure \1"),
]

# What the clock decides, in either build: speeds, MFU (the page shows none), the time left, a run's seconds
# ("trained in 3s", "(0.1s)" after chapter 12's tokens), and chapter 12's cached decoding against the uncached loop.
CLOCK = re.compile(r"\s+[\d.]+ tok/s|\s+MFU\s+[\d.]+%|\s+ETA\s+\S+|(?<=trained in )\d+s| \([\d.]+s\)$"
                   r"| \([\d.]+x\)")

# Where the page's numbers may differ from the native ones, and why: (line pattern, tolerance), the first pattern
# a line matches setting its tolerance. A tolerance is relative (a float), LAST_DIGIT (one unit in the last printed
# place: a sum taken in another order rounds the other way), or ("below", bound) (both are round-off under the
# bound). A line no pattern matches must print the same digits.
LAST_DIGIT = "last digit"
TOLERANCES = {
    # the round-off of a position computed alone against the batch, printed to show it is round-off (below 1e-9)
    "04_feed_forward": [(re.compile(r"^each position computed alone"), ("below", 1e-9))],
    # the real tokens' memory with more PAD after them: 0 where the GEMMs sum each row alike at both lengths,
    # float32 round-off where a kernel's path depends on the number of rows
    "05_encoder": [(re.compile(r"^memory moves by at most"), ("below", 1e-6))],
    # the greedy decode's log-probabilities: float32 sums in another order, one unit in the sixth decimal
    "06_decoder": [(re.compile(r".*"), LAST_DIGIT)],
    # 150 toy steps with dropout: GEMM sums in another order move the loss by up to 0.9% (step 125, measured);
    # the translations after training are the same
    "07_transformer": [(re.compile(r"^\[[#.]+\] step"), 0.02)],
    # Adam's final losses after 300 steps: float32 GEMMs summed in another order, one unit in the fifth decimal.
    "08_training": [(re.compile(r".*"), LAST_DIGIT)],
    "11_mixed_precision": [
        # the float32 sum of 10,000 products: float32 adds in another order (2.4e-7 relative measured)
        (re.compile(r"^float32 sum"), 1e-6),
        # 150 steps of bf16 training: each step's rounding to bfloat16 turns a last-bit difference into another
        # path; the native runs with and without vdpbf16ps differ from each other by as much (17% measured at
        # step 75). Step 1 differs by 1.6e-4 relative (3.7107 against 3.7101: vdpbf16ps's sums against widened
        # ones, then rounded to bfloat16 in the attention); STEPFORMER_NO_BF16_DOT=1 makes the native demo print 3.7101.
        (re.compile(r"^\s+1\s+[\d.]+\s+[\d.]+\s+[\d.]+$"), 5e-4),
        (re.compile(r"^\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+$"), 0.25),
        (re.compile(r"^weights stored in bfloat16"), 0.25),
    ],
}


def normalise(text):
    lines = []
    for line in text.rstrip("\n").split("\n"):
        for pattern, replacement in SAME_MEANING:
            if pattern.match(line):
                line = pattern.sub(replacement, line)
                break
        lines.append(CLOCK.sub("", line))
    return lines


def tolerance(demo, line):
    for pattern, tol in TOLERANCES.get(demo, []):
        if pattern.match(line):
            return tol
    return 0.0


def last_place(token):
    """One unit in the last printed place of a number: 0.00104 -> 1e-5, 37 -> 1."""
    mantissa = re.split(r"[eE]", token)[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(re.split(r"[eE]", token)[1]) if re.search(r"[eE]", token) else 0
    return 10.0 ** (exponent - decimals)


def compare(demo, native, page):
    """The differences, one line each (empty: the same)."""
    a, b = normalise(native), normalise(page)
    if len(a) != len(b):
        return [f"{demo}: the page printed {len(b)} lines, the native demo {len(a)}"]
    problems = []
    for n, (x, y) in enumerate(zip(a, b), 1):
        if NUMBER.sub("#", x) != NUMBER.sub("#", y):
            problems.append(f"{demo} line {n}: native '{x}', page '{y}'")
            continue
        tol = tolerance(demo, x)
        for p, q in zip(NUMBER.findall(x), NUMBER.findall(y)):
            if p == q:
                continue
            diff = abs(float(p) - float(q))
            if isinstance(tol, tuple):  # ("below", bound): both are round-off under the bound
                if max(abs(float(p)), abs(float(q))) < tol[1]:
                    continue
                allowed = 0.0
            elif tol == LAST_DIGIT:
                allowed = last_place(p) * 1.001
            else:
                allowed = tol * max(abs(float(p)), abs(float(q)))
            if diff > allowed:
                problems.append(f"{demo} line {n}: native {p}, page {q} (allowed: {tol}): '{x}'")
    return problems


def run_native(binary, args, files_dir):
    """The native demo in an empty folder holding the files its panel reads (wasm/<demo>/ of the book)."""
    with tempfile.TemporaryDirectory() as cwd:
        if files_dir.is_dir():
            for f in files_dir.iterdir():
                shutil.copy(f, Path(cwd) / f.name)
        done = subprocess.run([str(binary)] + args, cwd=cwd, capture_output=True, text=True, timeout=600,
                              env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    return done.returncode, done.stdout + done.stderr


# Runs set through the options form (the demo's --help as a form) rather than the arguments field: the form must
# write the arguments the native demo is then run with.
FORM_RUNS = {"02_attention": ("--heads", "2"), "07_transformer": ("--steps", "40")}
# Runs that must fail, as the native demo fails, with its typed error in the page (not a WebAssembly abort): the
# arguments typed, and the error's words.
ERROR_RUNS = {"02_attention": ("--heads 3", "02_attention: MultiHeadAttention: d_model 32 is not divisible by n_heads 3")}
# Demos that write pictures seconds before they end (chapter 12: its figures, then 120 steps of training): a picture
# must show while the run goes on.
PICTURES_EARLY = ("12_modern_lm",)
# Demos stepped through one stage per click (with their default arguments): every stage in turn, then the output
# of a whole run.
STEP_RUNS = ("01_embedding", "02_attention")


def open_panel(driver, page):
    """The page opened from disk, typeset; its Run panel."""
    driver.get(page.resolve().as_uri())
    wait_ready(driver)
    return driver.find_element(By.CSS_SELECTOR, "section.run-demo")


def run_in_page(driver, page, form=None, typed=None):
    """One run: the panel's arguments, or an option set through the form, or `typed` into the arguments field."""
    section = open_panel(driver, page)
    if typed is not None:
        field = section.find_element(By.CSS_SELECTOR, "input[name=args]")
        field.clear()
        field.send_keys(typed)
    if form:
        driver.execute_script("const c = arguments[0].querySelector(`[data-option='${arguments[1]}']`);"
                              "c.value = arguments[2]; c.dispatchEvent(new Event('change'));", section, *form)
    args = section.find_element(By.CSS_SELECTOR, "input[name=args]").get_attribute("value")
    section.find_element(By.CSS_SELECTOR, "button").click()
    printed = "return arguments[0].querySelector('.run-output').textContent"
    pictures = "return arguments[0].querySelectorAll('.run-figures img').length"
    streamed, pictured, started = False, False, time.monotonic()
    while section.get_attribute("data-status") not in ("done", "failed"):  # lines shown while it still runs?
        if time.monotonic() - started > 300:
            errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            return args, f"still running after 300 s (console: {errors})", "", 0, "", streamed, pictured
        running = section.get_attribute("data-status") == "running"
        streamed |= running and bool(driver.execute_script(printed, section))
        pictured |= running and driver.execute_script(pictures, section) > 0
        time.sleep(0.2)
    output = driver.execute_script(printed, section)
    # every picture the run wrote, decoded (given 10 s: the blobs decode after the run ends); -1 if one is not
    count = ("const all = [...arguments[0].querySelectorAll('.run-figures img')];"
             "return all.every(i => i.complete) ? [all.every(i => i.naturalWidth > 0) ? all.length : -1] : null")
    figures = WebDriverWait(driver, 10).until(lambda d: d.execute_script(count, section))[0]
    timing = section.find_element(By.CSS_SELECTOR, ".run-status").text
    return args, section.get_attribute("data-status"), output, figures, timing, streamed, pictured


def step_through(driver, page):
    """Step mode: after the run, one stage (from one `== heading` to the next) per click, each with the pictures it
    wrote; the problems, and the whole output once every stage is shown."""
    section = open_panel(driver, page)
    step = section.find_element(By.CSS_SELECTOR, "button.step")
    step.click()
    WebDriverWait(driver, 300, poll_frequency=0.2).until(lambda d: section.get_attribute("data-stages"))
    stages, problems = int(section.get_attribute("data-stages")), []
    state = ("const s = arguments[0]; return [s.querySelector('.run-output').textContent,"
             "[...s.querySelectorAll('.run-figures figure')].filter(f => !f.hidden).length]")
    for shown in range(1, stages + 1):
        text, figures = driver.execute_script(state, section)
        headings = sum(line.startswith("== ") for line in text.split("\n"))
        if headings != shown:
            problems.append(f"{page.stem}: step {shown} of {stages} shows {headings} stages")
        pictures = len(set(re.findall(r"wrote (\S+\.svg)", text)))
        if shown < stages and figures != pictures:
            problems.append(f"{page.stem}: step {shown} shows {figures} pictures, its text wrote {pictures}")
        if shown < stages:
            step.click()
    return problems, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("book", type=Path)
    parser.add_argument("--bin", type=Path, required=True, help="the native demos (build/release/bin)")
    parser.add_argument("--only", action="append", default=[], help="this demo only (repeatable)")
    parser.add_argument("--plant", help="change one number of this demo's native output (the check must fail)")
    args = parser.parse_args()
    if By is None or not Path("/usr/bin/chromium").exists():
        print(f"check_page_demos: cannot start a browser: this needs {NEEDS}")
        return 2
    pages = sorted(p for p in args.book.glob("*.html") if 'class="run-demo"' in p.read_text())
    pages = [p for p in pages if not args.only or p.stem in args.only]
    if not pages:
        print(f"check_page_demos: no page of {args.book} has a Run panel (build_book.py --wasm build/wasm/bin)")
        return 2
    runs = [(p, None) for p in pages] + [(p, FORM_RUNS[p.stem]) for p in pages if p.stem in FORM_RUNS]
    problems, driver = [], browser()
    try:
        for page, form in runs:
            demo = page.stem
            form_args, status, output, figures, timing, streamed, pictured = run_in_page(driver, page, form)
            if demo in PICTURES_EARLY and not pictured:
                problems.append(f"{demo}: no picture showed before the run ended: each must show as it is written")
            if figures == -1:
                problems.append(f"{demo}: a picture the run wrote does not show")
            if form and " ".join(form) not in form_args:
                problems.append(f"{demo}: the form set {' '.join(form)}, the arguments read '{form_args}'")
            seconds = float(re.search(r"in ([\d.]+) s", timing).group(1)) if "in " in timing else 0
            if seconds >= 2 and not streamed:
                problems.append(f"{demo}: ran {seconds} s and showed nothing before it ended: the output must stream")
            code, native = run_native(args.bin / demo, shlex.split(form_args), args.book / "wasm" / demo)
            if args.plant == demo:
                numbers = list(NUMBER.finditer(native))  # the last number printed: a result, not a heading
                last = numbers[-1]
                native = native[:last.start()] + repr(float(last.group(0)) * 1.5 + 1) + native[last.end():]
            if status != "done" or code != 0:
                problems.append(f"{demo}: the page ended '{status}', the native demo with exit {code}")
            found = compare(demo, native, output)
            problems += found
            print(f"{demo} {form_args!r}: {'same' if not found else f'{len(found)} differences'}; "
                  f"{figures} figures shown; {timing}")
        for page in [p for p in pages if p.stem in ERROR_RUNS]:
            typed, error = ERROR_RUNS[page.stem]
            _, status, output, *_ = run_in_page(driver, page, typed=typed)
            code, native = run_native(args.bin / page.stem, shlex.split(typed), args.book / "wasm" / page.stem)
            if status != "failed" or code == 0 or error not in output:
                problems.append(f"{page.stem} {typed}: the page ended '{status}' (native exit {code}), printing "
                                f"{output.strip()[:200]!r}; expected a failure saying '{error}'")
            problems += compare(page.stem, native, output)
            print(f"{page.stem} {typed!r}: {status}, as the native demo (exit {code})")
        # the panels fit the page: at 800, 1280 and 1920 px no page with one is wider than the window
        problems += layout(driver, args.book.resolve().as_uri() + "/", [p.name for p in pages])
        for page in [p for p in pages if p.stem in STEP_RUNS]:
            found, text = step_through(driver, page)
            code, native = run_native(args.bin / page.stem, [], args.book / "wasm" / page.stem)
            found += compare(page.stem, native, text)
            problems += found
            print(f"{page.stem} stepped through: {'as the run' if not found else f'{len(found)} problems'}")
    finally:
        driver.quit()
    return report(problems, f"{len(runs)} runs of {len(pages)} demos in their pages")


if __name__ == "__main__":
    sys.exit(main())
