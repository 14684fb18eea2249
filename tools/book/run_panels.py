"""The book's Run panels: a chapter's demo, compiled to WebAssembly (CMake preset `wasm`), run in its own page.

A chapter's page gets a panel right after the first shell block that runs its demo (`build/release/bin/NN_name
ARGS`, `--help` lines skipped), with that block's arguments in the form. book.js loads the demo's one .js file
(the wasm inside it: a page opened from disk may load a script but not fetch a file), runs main with the form's
arguments, shows what it prints and the SVG pictures it writes. tools/book/check_page_demos.py proves the page
prints what the native demo prints.
"""
import html
import re
import shutil

# The demos that run in a page: every chapter up to 08 (07's toy task) and 11. Chapter 09 needs cuda-sim and 10
# MPI, neither of which is in the WebAssembly build; 12 trains on a corpus the book does not ship yet.
BROWSER_DEMOS = ("00_autograd", "01_embedding", "02_attention", "03_add_norm", "04_feed_forward", "05_encoder",
                 "06_decoder", "07_transformer", "08_training", "11_mixed_precision")
PLACEHOLDER = "RUNPANELPLACEHOLDER"
FENCE = re.compile(r"^\s*(```|~~~)")


def demo_arguments(markdown, demo):
    """The arguments of the first shell line that runs `demo` (not --help), and the line after its block."""
    line_re = re.compile(r"^\s*(?:\./)?build/release/bin/" + re.escape(demo) + r"(?=\s|$)([^#]*)")
    lines, in_fence, found = markdown.split("\n"), False, None
    for i, line in enumerate(lines):
        if FENCE.match(line):
            if in_fence and found is not None:
                return found, i + 1
            in_fence = not in_fence
            continue
        m = line_re.match(line) if in_fence and found is None else None
        if m and m.group(1).strip() != "--help":
            found = m.group(1).strip()
    return None, None


def add_placeholder(markdown, demo):
    """The chapter's Markdown with a placeholder paragraph after its demo's shell block; and the arguments."""
    args, after = demo_arguments(markdown, demo)
    if args is None:
        return markdown, None
    lines = markdown.split("\n")
    return "\n".join(lines[:after] + ["", PLACEHOLDER, ""] + lines[after:]), args


def panel(demo, args):
    return (f'<section class="run-demo" data-demo="{demo}" data-status="idle">'
            f'<form><label><span class="prompt">bin/{demo}</span> <input name="args" value="{html.escape(args)}" '
            f'aria-label="arguments" placeholder="no arguments: the defaults (--help lists the options)"></label> <button type="submit">Run in this page</button> '
            f'<span class="run-status"></span></form>'
            f'<pre class="run-output" aria-live="polite"></pre><div class="run-figures"></div></section>')


def fill(page_html, demo, args):
    return page_html.replace(f"<p>{PLACEHOLDER}</p>", panel(demo, args))


def copy_programs(wasm_bin, out):
    """Copies each browser demo's .js into out/wasm; returns the demos copied. A missing one is an error: the
    caller asked for the WebAssembly book."""
    (out / "wasm").mkdir(parents=True, exist_ok=True)
    for demo in BROWSER_DEMOS:
        source = wasm_bin / f"{demo}.js"
        if not source.exists():
            raise SystemExit(f"build_book: {source} is missing (cmake --build --preset wasm builds it)")
        shutil.copy(source, out / "wasm" / source.name)
    return set(BROWSER_DEMOS)
