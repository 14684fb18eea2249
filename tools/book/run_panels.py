"""The book's Run panels: a chapter's demo, compiled to WebAssembly (CMake preset `wasm`), run in its own page.

A chapter's page gets a panel right after the first shell block that runs its demo (`build/release/bin/NN_name
ARGS`, `--help` lines skipped), with that block's arguments in the form. book.js loads the demo's one .js file
(the wasm inside it: a page opened from disk may load a script but not fetch a file), runs main with the form's
arguments, shows what it prints and the SVG pictures it writes; or (Step) shows the run one stage per click, a
stage being what the demo prints from one `== heading` to the next, with the pictures that stage wrote. tools/book/check_page_demos.py proves the page
prints what the native demo prints.
"""
import html
import json
import re
import shutil
import subprocess

# The demos that run in a page: every chapter up to 08 (07's toy task), 11 and 12 (on characters of a part of the
# Bible the book ships). Chapter 09 needs cuda-sim and 10 MPI, neither of which is in the WebAssembly build.
BROWSER_DEMOS = ("00_autograd", "01_embedding", "02_attention", "03_add_norm", "04_feed_forward", "05_encoder",
                 "06_decoder", "07_transformer", "08_training", "11_mixed_precision", "12_modern_lm")
# The files a demo's panel reads, made at build time by a command (the page has no `bible`): written next to the
# demo's script and into its worker's file system before main runs.
DEMO_FILES = {"12_modern_lm": {"kjv-part.txt": ["bible", "-f", "Gen1:1-Gen3:24", "Ruth1:1-Ruth1:22"]}}
# A chapter whose panel runs another command than the first one it shows marks that line so.
PANEL_MARK = "# the book's Run panel"
PLACEHOLDER = "RUNPANELPLACEHOLDER"
FENCE = re.compile(r"^\s*(```|~~~)")


def demo_arguments(markdown, demo):
    """The arguments of the shell line marked PANEL_MARK, else of the first one that runs `demo` (not --help); and
    the line after its block."""
    line_re = re.compile(r"^\s*(?:\./)?build/release/bin/" + re.escape(demo) + r"(?=\s|$)([^#]*)")
    marked = PANEL_MARK in markdown
    lines, in_fence, found = markdown.split("\n"), False, None
    for i, line in enumerate(lines):
        if FENCE.match(line):
            if in_fence and found is not None:
                return found, i + 1
            in_fence = not in_fence
            continue
        m = line_re.match(line) if in_fence and found is None else None
        if m and m.group(1).strip() != "--help" and (not marked or line.rstrip().endswith(PANEL_MARK)):
            found = m.group(1).strip()
    return None, None


def add_placeholder(markdown, demo):
    """The chapter's Markdown with a placeholder paragraph after its demo's shell block; and the arguments."""
    args, after = demo_arguments(markdown, demo)
    if args is None:
        return markdown, None
    lines = markdown.split("\n")
    return "\n".join(lines[:after] + ["", PLACEHOLDER, ""] + lines[after:]), args


# A line of CLI11's --help: "  --steps INT=0   training steps", "  --precision TEXT:{fp32,bf16}=fp32",
# "  --heads INT:INT in [1 - 64]=4", "  --threads INT:INT in [1 - 1024]=all cores", a flag "  --detect-anomaly
# check ...", or a subcommand "  toy   seed 000's three pairs". A description too long for its column continues on
# the next line, indented; one that fits is two or more spaces after the option.
HELP_LINE = re.compile(r"^  (?:-\w,)?(--[\w-]+)(?: (\w+)(?::(?:\{([^}]*)\}|[^=]*?))?(?:=(.*?))?)?(?:\s{2,}(.*))?$")
SUBCOMMAND_LINE = re.compile(r"^  (\w+)\s{2,}(.*)$")
CONTINUED = re.compile(r"^\s{20,}(\S.*)$")
# The demo's --help, run under node (emscripten's dependency); with the wasm inside the .js nothing is fetched.
NODE_HELP = "require(process.argv[1])({print: console.log, printErr: console.log}).then(m => m.callMain(['--help']))"


def demo_help(program):
    done = subprocess.run(["node", "-e", NODE_HELP, str(program)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"build_book: {program} --help failed under node: {done.stderr.strip()}")
    return done.stdout


def parse_help(text):
    """The options (name, type or None for a flag, choices, default, description) and the subcommands."""
    options, subcommands, section = [], [], None
    for line in text.split("\n"):
        if line.endswith(":") and not line.startswith(" "):
            section = line[:-1]
            continue
        more = CONTINUED.match(line)
        if more and (options or subcommands):
            last = options[-1] if section == "Options" else subcommands[-1]
            last["help"] = (last["help"] + " " + more.group(1)).strip()
            continue
        m = HELP_LINE.match(line) if section == "Options" else None
        if m and m.group(1) != "--help":
            options.append({"name": m.group(1), "type": m.group(2), "choices": (m.group(3) or "").split(",")
                            if m.group(3) else [], "default": m.group(4) or "", "help": m.group(5) or ""})
        m = SUBCOMMAND_LINE.match(line) if section == "Subcommands" else None
        if m:
            subcommands.append({"name": m.group(1), "help": m.group(2)})
    return options, subcommands


def options_form(options, subcommands):
    """The --help as a form: book.js writes the arguments from it (each value that is not the default)."""
    rows = []
    if subcommands:
        choices = '<option value="">(none)</option>' + "".join(
            f'<option value="{c["name"]}">{c["name"]}: {html.escape(c["help"])}</option>' for c in subcommands)
        rows.append(f'<tr><td>task</td><td><select data-subcommand>{choices}</select></td><td></td></tr>')
    for o in options:
        name, default = html.escape(o["name"]), html.escape(o["default"])
        if o["type"] is None:
            control = f'<input type="checkbox" data-option="{name}" data-flag>'
        elif o["choices"]:
            control = f'<select data-option="{name}" data-default="{default}">' + "".join(
                f'<option>{html.escape(c)}</option>' for c in o["choices"]) + "</select>"
        else:
            control = f'<input data-option="{name}" data-default="{default}" placeholder="{default}">'
        rows.append(f'<tr><td><code>{name}</code></td><td>{control}</td><td>{html.escape(o["help"])}</td></tr>')
    return (f'<details class="run-options"><summary>Options (the demo\'s --help as a form)</summary>'
            f'<table>{"".join(rows)}</table></details>')


def panel(demo, args, form):
    files = f' data-files="{demo}"' if demo in DEMO_FILES else ""
    return (f'<section class="run-demo" data-demo="{demo}" data-status="idle"{files}>'
            f'<form><label><span class="prompt">bin/{demo}</span> <input name="args" value="{html.escape(args)}" '
            f'aria-label="arguments" placeholder="no arguments: the defaults"></label> '
            f'<button type="submit">Run in this page</button> <button type="button" class="step">Step</button> '
            f'<span class="run-status"></span>{form}</form>'
            f'<pre class="run-output" aria-live="polite"></pre><div class="run-figures"></div></section>')


def fill(page_html, demo, args, wasm_bin):
    form = options_form(*parse_help(demo_help(wasm_bin / f"{demo}.js")))
    return page_html.replace(f"<p>{PLACEHOLDER}</p>", panel(demo, args, form))


def copy_programs(wasm_bin, out):
    """Copies each browser demo's .js into out/wasm; returns the demos copied. A missing one is an error: the
    caller asked for the WebAssembly book."""
    (out / "wasm").mkdir(parents=True, exist_ok=True)
    for demo in BROWSER_DEMOS:
        source = wasm_bin / f"{demo}.js"
        if not source.exists():
            raise SystemExit(f"build_book: {source} is missing (cmake --build --preset wasm builds it)")
        shutil.copy(source, out / "wasm" / source.name)
    for demo, files in DEMO_FILES.items():
        write_files(demo, files, out / "wasm")
    return set(BROWSER_DEMOS)


def write_files(demo, files, wasm_dir):
    """Each file as wasm/<demo>/<name> (check_page_demos gives them to the native demo) and all of them in
    wasm/<demo>.files.js, which book.js loads as a script (a page opened from disk cannot fetch a file)."""
    contents = {}
    for name, command in files.items():
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        except FileNotFoundError:
            done = None
        if done is None or done.returncode != 0 or not done.stdout:
            raise SystemExit(f"build_book: `{' '.join(command)}` for {demo}'s {name} failed: install Debian's "
                             f"bible-kjv (./run book --wasm does)")
        (wasm_dir / demo).mkdir(exist_ok=True)
        (wasm_dir / demo / name).write_text(done.stdout)
        contents[name] = done.stdout
    (wasm_dir / f"{demo}.files.js").write_text(f"var DEMO_FILES = {json.dumps(contents)};\n")
