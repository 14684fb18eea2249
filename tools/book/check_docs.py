#!/usr/bin/env python3
"""Docs that cannot drift: everything README.md and docs/*.md name must exist in today's tree.

    tools/book/check_docs.py [--bin DIR] [--readme FILE --docs DIR]

- links      every relative link names a file that exists, and a #anchor names a heading of that file
- files      every path in code font (`autograd/src/engine.cpp`, `engine.cpp`, `tools/book/`) exists
- names      every function or type in code font (`split_heads()`, `nn::Linear`, `MultiHeadAttention`)
             is a name some source file uses
- tests      a code-font name after the word "test" is (part of) a TEST_CASE or CTest name
- commands   `./run X` names a branch of ./run; `NAME --flag ...` for a program in --bin runs `NAME
             [subcommand] --help`, which must succeed and list every --flag the doc uses
- exercises  every exercise table's points (and exercises.md's needs) are those of tools/exercises/exercises.txt,
             and exercises.md lists every exercise of it
- chapters   every chapter opens with what the reader will be able to do after it
- numbers    a section that quotes a benchmark's time or rate names the machine it ran on and the
             command that measured it
- quotes     a code block right after a line ending in a source file's path and a colon ("`div` in
             `autograd/src/ops/elementwise.cpp`:") is that file's text, line for line up to spacing
- worklog    the prose speaks of the project, not of how it was made: no sessions, issues or lent machines, and
             "this machine" only in a paragraph that names the machine

Prints one line per problem and exits 1 if there is any.
"""
import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
from build_book import github_slug  # noqa: E402  (the book's anchors are GitHub's: one slug function)

SOURCE_DIRS = ("autograd", "nn", "transformer", "distributed", "files", "demos", "tools", "tests", "bench", "fuzz")
TOP = ("autograd/", "nn/", "transformer/", "distributed/", "files/", "demos/", "tools/", "tests/", "bench/",
       "fuzz/", "docs/", "cmake/", ".ci/")
# Files a doc names that live outside this tree, on purpose.
ELSEWHERE = {"zero.cuh": "llm.c's ZeRO code, cited in docs/10", "transformer-pytorch.md": "a seed walkthrough (shared/seeds)",
             "cuda_runtime.h": "CUDA's runtime header, from the toolkit"}
MACHINE = re.compile(r"Zen ?\d|EPYC|Xeon|Sapphire|H100|H200|GPU|cores?\b|this machine|the same machine", re.I)
WORKLOG = re.compile(r"\bsessions?\b|\bthe issue'?s?\b|\bthis issue\b|\bthe [\w-]+ issue\b|\bissue #?\d+\b|"
                     r"\blent (?:gpu|machine)|\bthe lent\b|\blent for\b", re.I)
NAMED_MACHINE = re.compile(r"Zen ?\d|EPYC|Xeon|Sapphire|Core i\d|H100|H200|A100")
MEASURE = re.compile(r"\d[\d,.]*\s?(ms|GFLOP/s|tokens/s|tok/s|µs)\b")


def prose_and_code(text):
    """The doc with fenced blocks removed, and its inline code spans as (line number, span) pairs."""
    kept, in_fence = [], False
    for line in text.split("\n"):
        if re.match(r"\s*(```|~~~)", line):
            in_fence = not in_fence
            kept.append("")
            continue
        kept.append("" if in_fence else line)
    spans = [(n + 1, m.group(2), (kept[n - 1] if n else "") + " " + line[:m.start()]) for n, line in enumerate(kept)
             for m in re.finditer(r"(`+)(.+?)\1", line)]
    return "\n".join(kept), spans


def headings(md):
    seen = {}
    return {github_slug(re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", h).strip(), seen)
            for h in re.findall(r"^#{1,6} (.+)$", prose_and_code(md.read_text())[0], re.M)}


class Checker:
    def __init__(self, bin_dir):
        self.bin = bin_dir
        self.problems = []
        # Each file read once, at the scan: a test running beside this one may write and rename a file in the
        # tree meanwhile (Python's bytecode cache writes a temporary file in __pycache__, then renames it).
        texts = {}
        for p in (p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*")):
            if "__pycache__" in p.parts or "planted" in p.name or "planted" in p.parent.name:  # not the fixtures
                continue
            try:
                if p.is_file():
                    texts[p] = p.read_text(errors="replace")
            except FileNotFoundError:  # gone since the scan listed it
                continue
        self.basenames = {p.name for p in texts} | {p.name for p in ROOT.iterdir()}
        words = set()
        for p, text in texts.items():
            if p.suffix in {".cpp", ".h", ".cu", ".cuh", ".py", ".txt", ".cmake", ".sh"}:
                words |= set(re.findall(r"[A-Za-z_]\w*", text))
        self.words = words
        self.source_text = "\n".join(text for p, text in texts.items() if p.suffix in {".cpp", ".h", ".cu", ".py", ".sh", ".txt"})
        self.source_text += (ROOT / "run").read_text()
        self.tests = set()
        for text in texts.values():
            self.tests |= set(re.findall(r'TEST_CASE\(\s*"([^"]+)"', text))
            self.tests |= set(n.replace("\\,", ",") for n in re.findall(r'add_test\(NAME\s+"([^"]+)"', text))
        self.run_branches = set(re.findall(r"^  ([\w|]+)\)", (ROOT / "run").read_text(), re.M))
        self.run_branches = {b for group in self.run_branches for b in group.split("|")}
        self.helps = {}

    def report(self, doc, line, what):
        self.problems.append(f"{doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc}:{line}: {what}")

    def links(self, doc, text):
        for n, line in enumerate(prose_and_code(text)[0].split("\n"), 1):
            for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                file = (doc.parent / path).resolve() if path else doc
                if not file.exists():
                    self.report(doc, n, f"link to {path}, which does not exist")
                elif anchor and file.suffix == ".md" and anchor not in headings(file):
                    self.report(doc, n, f"link to {target}: {file.name} has no heading #{anchor}")

    def spans(self, doc, spans):
        for n, span, before in spans:
            span = span.strip()
            if re.fullmatch(r"(\.?\.?/)?[\w.-]+(/[\w.*-]+)+/?", span) and span.startswith(TOP + ("./", "../")):
                path = (doc.parent / span if span.startswith("../") else ROOT / span)
                included = span.endswith((".h", ".cuh")) and any(ROOT.glob(f"**/include/{span}"))
                if "*" not in span and not path.exists() and not included:
                    self.report(doc, n, f"`{span}` does not exist")
            elif re.fullmatch(r"[\w-]+\.(cpp|h|cu|cuh|py|sh|cmake|md|json|txt)", span):
                if span not in self.basenames and span not in self.source_text and span not in ELSEWHERE:
                    self.report(doc, n, f"`{span}`: no file of that name, and no source writes or reads one")
            elif m := re.fullmatch(r"((?:\w+::)*)(~?[A-Za-z_]\w*)(\(\))?", span):
                if (m.group(1) or m.group(3)) and m.group(2).lstrip("~") not in self.words:
                    self.report(doc, n, f"`{span}`: no source file uses the name {m.group(2)}")
            if re.search(r"\btests?\b(?![/:])[^`]{0,30}$", before) and len(span.split()) >= 3 and not re.search(r"[(/=]|--", span):
                name = span.replace("\\,", ",").rstrip(".*").strip()
                if not any(name in t for t in self.tests):
                    self.report(doc, n, f"`{span}`: no test has that name")
            self.command(doc, n, span)

    def command(self, doc, n, span):
        if m := re.match(r"\./run(?: (\w+))?", span):
            if m.group(1) and m.group(1) not in self.run_branches:
                self.report(doc, n, f"`{span}`: ./run has no '{m.group(1)}'")
            return
        try:
            words = shlex.split(span)
        except ValueError:
            return
        if not words:
            return
        program = Path(words[0]).name
        if not self.bin or not (self.bin / program).is_file() or not re.fullmatch(r"[\w-]+", program):
            return
        if program.startswith("fuzz_"):  # libFuzzer's flags: -name=value, listed by -help=1
            help_text = self.help((program,), "-help=1")
            for flag in re.findall(r"(?<![\w-])-([a-z_]+)=", span):
                if help_text is not None and not re.search(r"\b" + flag + r"\b", help_text):
                    self.report(doc, n, f"`{span}`: libFuzzer has no flag -{flag}")
            return
        sub = [words[1]] if len(words) > 1 and re.fullmatch(r"[a-z]+", words[1]) else []
        key = (program, *sub)
        # A subcommand's options are its own and the program's (CLI11 lists them apart).
        helps = [self.help((program,))] + ([self.help(key)] if sub else [])
        if None in helps:
            self.report(doc, n, f"`{span}`: `{' '.join(key)} --help` fails")
            return
        help_text = "\n".join(helps)
        for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", span):
            if not re.search(re.escape(flag) + r"\b", help_text):
                self.report(doc, n, f"`{span}`: {' '.join(key)} has no option {flag}")

    def help(self, command, flag="--help"):
        if command not in self.helps:
            try:
                run = subprocess.run([str(self.bin / command[0]), *command[1:], flag], capture_output=True, text=True,
                                     timeout=60, stdin=subprocess.DEVNULL)
                self.helps[command] = run.stdout + run.stderr if run.returncode == 0 else None
            except subprocess.TimeoutExpired:
                self.helps[command] = None  # reported as a failing --help: it never ends
        return self.helps[command]

    def numbers(self, doc, text):
        """A section quoting a measured time or rate must say where it was measured and with what command."""
        prose, spans = prose_and_code(text)
        for section in re.split(r"\n(?=#{1,4} )", prose):
            if not MEASURE.search(section):
                continue
            title = section.split("\n", 1)[0]
            commands = re.findall(r"`([^`]*(?:_bench|bin/|\./run|\.py|farm-bench)[^`]*)`", section)
            if not MACHINE.search(section):
                self.report(doc, 0, f"section '{title}' quotes measurements without naming the machine")
            if not commands:
                self.report(doc, 0, f"section '{title}' quotes measurements without the command that made them")

    def worklog(self, doc, text):
        """Docs say what the project does and where a number was measured, never how the work went."""
        prose = prose_and_code(text)[0]
        lines = [re.sub(r"(`+).+?\1", "", line) for line in prose.split("\n")]  # a quoted message is not prose
        for n, line in enumerate(lines, 1):
            for m in WORKLOG.finditer(line):
                self.report(doc, n, f"work-log wording '{m.group(0)}': say what the project does, and name the machine "
                                    "and command of a measurement")
        paragraph_start = 0
        for n, line in enumerate(lines + [""], 1):
            if line.strip():
                continue
            paragraph = "\n".join(lines[paragraph_start:n - 1])
            if re.search(r"\bthis machine\b", paragraph, re.I) and not NAMED_MACHINE.search(paragraph):
                first = paragraph_start + 1 + next(i for i, l in enumerate(lines[paragraph_start:n - 1])
                                                   if re.search(r"\bthis machine\b", l, re.I))
                self.report(doc, first, "'this machine' in a paragraph that names no machine: say which")
            paragraph_start = n

    def exercises(self, doc, text):
        # Points and needs from the exercise table (tools/exercises/exercises.txt), which the exercises tool
        # holds to the EXERCISE markers in the sources.
        markers = {}
        for line in (ROOT / "tools/exercises/exercises.txt").read_text().split("\n"):
            fields = line.split()
            if fields and not fields[0].startswith("#"):
                markers[fields[0]] = (fields[1], sorted(fields[2:]))
        listed = set()
        for n, line in enumerate(text.split("\n"), 1):
            row = re.match(r"\| (\d+\.\d+) \| (\d+) \|([^|]*)\|", line)
            if not row:
                continue
            number, points, needs = row.group(1), row.group(2), sorted(row.group(3).split())
            listed.add(number)
            if number not in markers:
                self.report(doc, n, f"exercise {number}: not in tools/exercises/exercises.txt")
            elif points != markers[number][0]:
                self.report(doc, n, f"exercise {number}: {points} points here, {markers[number][0]} in the exercise table")
            elif doc.name == "exercises.md" and needs != markers[number][1]:
                self.report(doc, n, f"exercise {number}: needs {' '.join(needs) or 'nothing'} here, "
                                    f"{' '.join(markers[number][1]) or 'nothing'} in the exercise table")
        if doc.name == "exercises.md":
            for number in sorted(set(markers) - listed):
                self.report(doc, 0, f"exercise {number} is in the exercise table but not in this one")

    def shell_blocks(self, doc, text):
        """Each line of a ```sh block is a command too (after its # comment is cut off)."""
        in_sh = False
        for n, line in enumerate(text.split("\n"), 1):
            fence = re.match(r"\s*```(\w*)", line)
            if fence:
                in_sh = not in_sh and fence.group(1) in {"sh", "bash", "shell"}
                continue
            if in_sh:
                command = re.sub(r"\s+#.*$", "", line).strip()
                command = re.sub(r"^(OMP_NUM_THREADS=\S+\s+)?(mpirun -np \d+\s+)?(time\s+)?", "", command)
                for part in re.split(r"\s*(?:&&|\|)\s*", command):
                    self.command(doc, n, part)

    def quotes(self, doc, text):
        for m in re.finditer(r"`([\w./-]+\.(?:cpp|h|cu|cuh|py))`:\n\n?```\w*\n(.*?)```", text, re.S):
            path = ROOT / m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            if not path.is_file():
                continue  # the files check reports it
            quoted = [" ".join(q.split()) for q in m.group(2).strip("\n").split("\n")]
            source = [" ".join(q.split()) for q in path.read_text(errors="replace").split("\n")]
            if not any(source[i:i + len(quoted)] == quoted for i in range(len(source) - len(quoted) + 1)):
                self.report(doc, line, f"the code quoted from `{m.group(1)}` is not in that file as written")

    def check(self, readme, docs_dir):
        docs = [readme] + sorted(p for p in docs_dir.glob("*.md") if p != readme)
        for doc in docs:
            text = doc.read_text()
            self.links(doc, text)
            self.spans(doc, prose_and_code(text)[1])
            self.shell_blocks(doc, text)
            self.numbers(doc, text)
            self.worklog(doc, text)
            self.quotes(doc, text)
            self.exercises(doc, text)
            if re.match(r"\d\d_", doc.name) and "**After this chapter** you can" not in "\n".join(text.split("\n")[:4]):
                self.report(doc, 3, "the chapter does not open with **After this chapter** you can ...")
        return docs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", type=Path, help="the built programs, to run the commands the docs show with --help")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md", help="the front page (default: README.md)")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs", help="the pages (default: docs/)")
    args = parser.parse_args()
    checker = Checker(args.bin)
    docs = checker.check(args.readme.resolve(), args.docs.resolve())
    for p in checker.problems:
        print(p)
    print(f"{len(docs)} docs checked, {len(checker.helps)} programs asked for --help: {len(checker.problems)} problems")
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())
