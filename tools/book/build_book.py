#!/usr/bin/env python3
"""Build the book: README.md and docs/*.md as static HTML, each chapter beside its annotated source.

    tools/book/build_book.py [--readme FILE] [--docs DIR] [--out DIR] [--wasm build/wasm/bin]

The tools, all Debian packages, and why:
- cmark-gfm renders the Markdown. It is GitHub's own parser, and the docs are written for GitHub (lists
  straight after a paragraph, two-space nesting, pipe tables), so the book shows what GitHub shows;
  Python-Markdown and pandoc each read those constructs differently.
- Pygments highlights the code, at build time, so a page needs no script to show code.
- KaTeX (libjs-katex) typesets $...$ and $$...$$ in the reader's browser, from files copied into the book:
  nothing is fetched at read time. Math is taken out before cmark-gfm sees it (its _ and * would become
  emphasis) and put back as the TeX source inside <span class="math">.
- lunr (libjs-lunr) searches every section of every page; the index is built in the browser from
  search_data.js.
Annotated source (the docco/pycco layout): each source file a doc links to becomes a page with its comments
as prose beside the code they precede. A doc's `name` or `name()` in code font links to the definition of
that name (in the chapter's own files first, else where it is the only definition), and each definition
lists the doc sections that explain it.
With --wasm, the chapters whose demos run in a browser get a Run panel (tools/book/run_panels.py).
"""
import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

import run_panels

ROOT = Path(__file__).resolve().parents[2]
LIBRARY_DIRS = ("autograd", "nn", "transformer", "distributed", "files", "demos")
COMMON = {"forward", "backward", "step", "operator", "main", "size", "shape"}
SOURCE_SUFFIXES = {".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake", ".txt"}
# $$display$$, and $inline$ (it may wrap onto the next line of its paragraph, as GitHub allows).
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$(?=\S)((?:[^$\n]|\n(?!\n))+?)(?<=\S)\$(?![\w$])", re.S)
FENCE = re.compile(r"^(```|~~~)")


def github_slug(text, seen):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, each space a hyphen, repeats -1, -2."""
    slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


def protect_math(markdown):
    """Replace math outside code with placeholders cmark-gfm leaves alone; return the text and the formulas."""
    formulas, result, chunk, in_fence = [], [], [], False

    def flush():
        text = "\n".join(chunk)
        parts = re.split(r"(`+[^`]*?`+)", text)  # keep inline code as it is
        for i in range(0, len(parts), 2):
            def keep(m):
                formulas.append((m.group(1) is not None, m.group(1) if m.group(1) is not None else m.group(2)))
                return f"MATHPLACEHOLDER{len(formulas) - 1}X"
            parts[i] = MATH.sub(keep, parts[i])
        result.append("".join(parts))
        chunk.clear()

    for line in markdown.split("\n"):
        if FENCE.match(line.lstrip()):
            if not in_fence:
                flush()
            in_fence = not in_fence
            result.append(line)
            continue
        (result if in_fence else chunk).append(line)
    flush()
    return "\n".join(result), formulas


def restore_math(page_html, formulas):
    def put(m):
        display, tex = formulas[int(m.group(1))]
        cls = "math display" if display else "math inline"
        return f'<span class="{cls}">{html.escape(tex, quote=False)}</span>'
    return re.sub(r"MATHPLACEHOLDER(\d+)X", put, page_html)


def cmark(markdown):
    return subprocess.run(["cmark-gfm", "--unsafe", "-e", "table", "-e", "autolink", "-e", "strikethrough"],
                          input=markdown, capture_output=True, text=True, check=True).stdout


def highlight_blocks(page_html):
    def colour(m):
        lang, code = m.group(1) or "text", html.unescape(m.group(2))
        try:
            lexer = get_lexer_for_filename("x." + {"sh": "sh", "cpp": "cpp", "cuda": "cu", "python": "py"}.get(lang, lang))
        except ClassNotFound:
            return m.group(0)
        return '<pre class="code">' + highlight(code, lexer, HtmlFormatter(nowrap=True)) + "</pre>"
    return re.sub(r'<pre><code(?: class="language-([\w+-]+)")?>(.*?)</code></pre>', colour, page_html, flags=re.S)


TEX_SYMBOLS = {"sqrt": "√", "infty": "∞", "cdot": "·", "times": "×", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥",
               "approx": "≈", "sum": "Σ", "prod": "Π", "partial": "∂", "in": "∈", "to": "→", "odot": "⊙", "top": "ᵀ",
               "ne": "≠", "neq": "≠", "pm": "±", "ldots": "…", "dots": "…", "alpha": "α", "beta": "β", "gamma": "γ",
               "delta": "δ", "epsilon": "ε", "theta": "θ", "lambda": "λ", "mu": "μ", "pi": "π", "sigma": "σ",
               "omega": "ω", "Delta": "Δ", "Sigma": "Σ", "quad": " ", "qquad": " "}


def tex_to_text(tex):
    """A formula as readable plain text, for the places KaTeX does not reach (search data): \\sqrt{d_k} -> √d_k."""
    text = re.sub(r"\\(?:left|right|big|Big|,|;|!|displaystyle)", "", tex)
    text = re.sub(r"\\(?:mathrm|text|mathbf|mathit|operatorname|mathcal)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: TEX_SYMBOLS.get(m.group(1), m.group(1)), text)
    return re.sub(r"\s+", " ", text.replace("{", "").replace("}", "")).strip()


def plain_text(fragment):
    """An HTML fragment's text, each typeset-to-be formula as tex_to_text's plain text."""
    fragment = re.sub(r'<span class="math[^"]*">(.*?)</span>', lambda m: tex_to_text(html.unescape(m.group(1))),
                      fragment, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def add_heading_ids(page_html):
    """GitHub's anchors on every heading; returns the page and its (level, id, title, title as HTML) outline: the
    HTML keeps a heading's formulas for KaTeX (the contents beside the text typeset them as the heading does)."""
    seen, outline = {}, []

    def tag(m):
        level, inner = m.group(1), m.group(2)
        slug = github_slug(html.unescape(re.sub(r"<[^>]+>", "", inner)), seen)
        outline.append((int(level), slug, plain_text(inner), re.sub(r"</?a\b[^>]*>", "", inner)))
        return f'<h{level} id="{slug}"><a class="anchor" href="#{slug}">{inner}</a></h{level}>'
    return re.sub(r"<h([1-6])>(.*?)</h\1>", tag, page_html), outline


# ---- source files: definitions and the annotated pages ---------------------------------------------------

DEFINITION = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:[\w:<>,*&~\[\] ]+?\s+[*&]?)?((?:\w+::)*~?\w+)\s*\(")
TYPE = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:class|struct)\s+(?:\[\[\w+\]\]\s*)?(\w+)\b[^;]*$")
NOT_NAMES = {"if", "for", "while", "switch", "return", "catch", "sizeof", "defined", "TEST_CASE", "SECTION"}


def definitions(path, lines):
    """(name, line number) for each function or type defined at namespace or class level in a C++ file."""
    if path.suffix not in {".cpp", ".h", ".cu", ".cuh"}:
        return []
    found = []
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if indent > 2 or not text or text.startswith(("//", "#", "}", "return", "using", "namespace", "*")):
            continue
        m = TYPE.match(text)
        if m:
            found.append((m.group(1), i + 1))
            continue
        m = DEFINITION.match(text)
        if not m or m.group(1).split("::")[-1] in NOT_NAMES:
            continue
        rest = "\n".join(lines[i:i + 12])
        brace, semi = rest.find("{"), rest.find(";")
        if brace != -1 and (semi == -1 or brace < semi):
            found.append((m.group(1), i + 1))
    return found


def header_of(rel):
    """transformer/src/rope.cpp -> transformer/include/transformer/rope.h: a chapter that links the header owns both."""
    m = re.fullmatch(r"(\w+)/src/(\w+)\.(?:cpp|cu)", rel)
    return f"{m.group(1)}/include/{m.group(1)}/{m.group(2)}.h" if m else None


def comment_prefix(path):
    return "#" if path.suffix in {".py", ".sh", ".cmake", ".txt"} else "//"


def sections(path, lines):
    """docco's split: a run of whole-line comments is the prose for the code that follows it."""
    prefix, out = comment_prefix(path), [([], [])]
    for n, line in enumerate(lines, 1):
        text = line.strip()
        is_comment = text.startswith(prefix) and not text.startswith("#!") and not text.startswith("#include")
        if is_comment and prefix == "#" and re.match(r"#\s*(pragma|if|endif|define|else)", text):
            is_comment = False
        if is_comment:
            if out[-1][1]:
                out.append(([], []))
            out[-1][0].append(re.sub(r"^" + re.escape(prefix) + r"+ ?", "", text))
        else:
            out[-1][1].append(n)
    return [s for s in out if s[0] or any(lines[n - 1].strip() for n in s[1])]


def lexer_for(path):
    if path.suffix in {".cu", ".cuh"}:
        return CppLexer()
    try:
        return get_lexer_for_filename(path.name)
    except ClassNotFound:
        return get_lexer_for_filename("x.txt")


class Book:
    def __init__(self, readme, docs, out, wasm_bin=None):
        self.docs, self.out, self.wasm_bin = docs, out, wasm_bin
        self.pages = [(readme, "index.html")] + [(p, p.stem + ".html") for p in sorted(docs.glob("*.md"))]
        self.sources = {}      # repo-relative path -> list of lines
        self.defs = {}         # name -> [(repo path, line)]
        self.explained = {}    # (repo path, line) -> [(page, anchor, title)]
        self.chapter_files = {}

    def source_page(self, rel):
        return "src/" + rel + ".html"

    def rewrite_links(self, page_html, md_path, depth):
        up = "../" * depth

        def fix(m):
            attr, target = m.group(1), html.unescape(m.group(2))
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                return m.group(0)
            path, _, anchor = target.partition("#")
            resolved = (md_path.parent / path).resolve()
            try:
                rel = resolved.relative_to(ROOT).as_posix()
            except ValueError:
                return m.group(0)
            anchor = "#" + anchor if anchor else ""
            if resolved.suffix == ".md" and (resolved == self.pages[0][0] or resolved.parent == self.docs):
                new = "index.html" if resolved == self.pages[0][0] else resolved.stem + ".html"
            elif resolved.parent == self.docs / "images" or rel.startswith("docs/images/"):
                new = "images/" + resolved.name
            elif resolved.is_file() and rel in self.sources:
                new = self.source_page(rel)
            elif resolved.is_dir():
                new = "src/" + rel.rstrip("/") + "/index.html"
                self.directories.add(rel.rstrip("/"))
            else:
                new = "missing/" + rel  # a link to nothing: the browser test reports it
            return f'{attr}="{up}{html.escape(new)}{anchor}"'
        return re.sub(r'(href|src)="([^"]*)"', fix, page_html)

    def linked_sources(self, md_path, text):
        """The files a doc points at: its links, and the repository paths it writes in code font (a folder such
        as `distributed/` stands for its C++ sources)."""
        found = []
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            p = (md_path.parent / target).resolve()
            if p.is_file() and p.suffix not in {".md", ".svg", ".png"} and p.is_relative_to(ROOT):
                found.append(p.relative_to(ROOT).as_posix())
        for span in re.findall(r"`([\w.-]+(?:/[\w.-]+)*/?)`", text):
            if "/" not in span or not span.startswith(LIBRARY_DIRS + ("tools/", "tests/", "bench/", "fuzz/")):
                continue
            p = ROOT / span
            if p.is_file() and p.suffix in SOURCE_SUFFIXES:
                found.append(span)
            elif p.is_dir():
                files = sorted(f for f in p.rglob("*") if f.suffix in {".h", ".cpp", ".cu", ".cuh"})
                if len(files) <= 15 and md_path.name != "README.md":
                    found += [f.relative_to(ROOT).as_posix() for f in files]
        return found

    def load_sources(self):
        """Pages for the files the docs link to; definitions from those and from every library and demo source."""
        texts = {md: md.read_text() for md, _ in self.pages}
        for md, name in self.pages:
            files = self.linked_sources(md, texts[md])
            self.chapter_files[name] = list(dict.fromkeys(files))
            for rel in files:
                self.sources.setdefault(rel, (ROOT / rel).read_text(errors="replace").split("\n"))
        library = {p.relative_to(ROOT).as_posix() for d in LIBRARY_DIRS for p in (ROOT / d).rglob("*")
                   if p.suffix in {".cpp", ".h", ".cu", ".cuh"}}
        for rel in sorted(library | set(self.sources)):
            lines = self.sources.get(rel) or (ROOT / rel).read_text(errors="replace").split("\n")
            for name, line in definitions(Path(rel), lines):
                for key in {name, name.split("::")[-1]}:
                    self.defs.setdefault(key, []).append((rel, line, lines))
        return texts

    def find_definition(self, name, page, plain=True):
        """The one definition a doc's name means: in the chapter's own files first; elsewhere only if it is the
        only one (a plain word like `add` or `out` only in the chapter's files: too many things share it)."""
        hits = self.defs.get(name, [])
        files = self.chapter_files.get(page, [])
        own = [h for h in hits if h[0] in files or header_of(h[0]) in files]
        if not own and (plain and re.fullmatch(r"[a-z]+", name) or name in COMMON):
            return None
        pick = own or [h for h in hits if not h[0].startswith("tests/")]
        bodies = [h for h in pick if not h[0].endswith((".h", ".cuh"))]
        if len(bodies) == 1:
            pick = bodies
        if not pick or len({h[0] for h in pick}) > 1:
            return None
        rel, line, lines = pick[0]
        self.sources.setdefault(rel, lines)
        return rel, line

    def link_names(self, page_html, page, outline, depth):
        """Wrap each code-font name that has a definition in a link to it; record where it was explained."""
        up, current = "../" * depth, {"id": "", "title": ""}
        heads = iter(outline)
        pieces = re.split(r"(<h[1-6] id=\"[^\"]+\">.*?</h[1-6]>|<pre.*?</pre>|<a [^>]*>.*?</a>)", page_html, flags=re.S)
        for i, piece in enumerate(pieces):
            if piece.startswith("<h"):
                level, slug, title, _ = next(heads)
                current = {"id": slug, "title": title}
                continue
            if piece.startswith(("<pre", "<a ")):
                continue

            def link(m):
                name = html.unescape(m.group(1))
                bare = re.sub(r"\(.*\)$", "", name)
                if not re.fullmatch(r"(?:\w+::)*~?\w{3,}", bare):
                    return m.group(0)
                plain = bare == name and "::" not in name  # `rope()` or `transformer::rope` says it is a function
                where = self.find_definition(bare, page, plain) or self.find_definition(bare.split("::")[-1], page, plain)
                if not where:
                    return m.group(0)
                self.explained.setdefault(where, []).append((page, current["id"], current["title"]))
                target = f"{up}{self.source_page(where[0])}#L{where[1]}"
                return f'<a class="def" data-name="{html.escape(bare.split("::")[-1])}" href="{target}">{m.group(0)}</a>'
            pieces[i] = re.sub(r"<code>([^<]+)</code>", link, piece)
        return "".join(pieces)

    def pager(self, names, i):
        """Previous and next page, in the chapter list's order: the book read front to back."""
        links = []
        if i > 0:
            links.append(f'<a rel="prev" href="{names[i - 1]}">&larr; {html.escape(self.short(names[i - 1]))}</a>')
        if i + 1 < len(names):
            links.append(f'<a rel="next" href="{names[i + 1]}">{html.escape(self.short(names[i + 1]))} &rarr;</a>')
        return f'<div class="pager" role="navigation">{"".join(links)}</div>'

    def short(self, page):
        """A page's title up to its colon: "02 — attention"."""
        return self.titles[page].split(":")[0]

    # ---- output ---------------------------------------------------------------------------------------

    def layout(self, title, body, depth, toc_html=""):
        """A page: the chapter list on the left, the text, and the page's own contents on the right (sticky: in
        view while the text scrolls); narrower than 1100 px, both lists fold above the text (book.js)."""
        up = "../" * depth
        contents = (f'<aside class="contents"><details open><summary>On this page</summary>{toc_html}</details></aside>'
                    if toc_html else "")
        nav = "".join(f'<li><a href="{up}{name}">{html.escape(self.short(name))}</a></li>' for _, name in self.pages)
        return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} · stepformer</title>
<link rel="stylesheet" href="{up}katex/katex.min.css">
<link rel="stylesheet" href="{up}book.css">
<link rel="stylesheet" href="{up}highlight.css">
<script defer src="{up}katex/katex.min.js"></script>
<script defer src="{up}book.js"></script>
</head><body>
<header><a class="home" href="{up}index.html">stepformer</a>
<form action="{up}search.html"><input name="q" placeholder="search the book" aria-label="search"></form></header>
<div class="page"><nav class="chapters"><details open><summary>Chapters</summary><ol>{nav}</ol></details></nav>
<main>{body}</main>{contents}</div></body></html>
"""

    def build(self):
        if self.out.exists():
            shutil.rmtree(self.out)
        (self.out / "images").mkdir(parents=True)
        self.directories = set()
        texts = self.load_sources()
        self.titles = {name: (re.search(r"^# (.+)$", texts[md], re.M) or [None, md.stem])[1] for md, name in self.pages}
        self.titles["index.html"] = "stepformer"
        search, rendered = [], {}
        demos = run_panels.copy_programs(self.wasm_bin, self.out) if self.wasm_bin else set()
        for md, name in self.pages:
            text, demo_args = texts[md], None
            if md.stem in demos:
                text, demo_args = run_panels.add_placeholder(text, md.stem)
            protected, formulas = protect_math(text)
            body = restore_math(highlight_blocks(cmark(protected)), formulas)
            if demo_args is not None:
                body = run_panels.fill(body, md.stem, demo_args, self.wasm_bin)
            body, outline = add_heading_ids(body)
            body = self.rewrite_links(body, md, 0)
            body = self.link_names(body, name, outline, 0)
            rendered[name] = (body, outline)
            for part in re.split(r"(?=<h[1-6] id=)", body):
                head = re.match(r'<h[1-6] id="([^"]+)">(.*?)</h', part, re.S)
                text = plain_text(re.sub(r"(<[^>]+>)", r" \1", part))
                search.append({"page": name, "id": head.group(1) if head else "",
                               "title": plain_text(self.titles[name] + (" › " + head.group(2) if head else "")),
                               "text": re.sub(r"\s+", " ", text).strip(),
                               # the formulas as written, searched but never shown: `sqrt` finds \sqrt{d_k}
                               "tex": re.sub(r"\W+", " ", " ".join(re.findall(r'<span class="math[^"]*">(.*?)</span>',
                                                                                 html.unescape(part), re.S)))})
        names = [name for _, name in self.pages]
        for md, name in self.pages:
            body, outline = rendered[name]
            files = self.chapter_files.get(name, [])
            if files and name != "index.html":
                items = "".join(f'<li><a href="{self.source_page(f)}">{html.escape(f)}</a></li>' for f in files)
                body += f'<section class="sources"><h2 id="annotated-source">Annotated source</h2><ul>{items}</ul></section>'
            body += self.pager(names, names.index(name))
            toc = "".join(f'<li class="l{lvl}"><a href="#{slug}">{inner}</a></li>' for lvl, slug, t, inner in outline
                          if lvl > 1)
            (self.out / name).write_text(self.layout(self.titles[name], body, 0, f'<ul class="toc">{toc}</ul>'))
        for rel in self.sources:
            self.write_source(rel)
        for rel in sorted(self.directories):
            self.write_directory(rel)
        for image in (self.docs / "images").glob("*"):
            shutil.copy(image, self.out / "images" / image.name)
        shutil.copytree("/usr/share/javascript/katex", self.out / "katex", symlinks=False)
        shutil.copy("/usr/share/javascript/lunr/lunr.min.js", self.out / "lunr.min.js")
        here = Path(__file__).parent
        for asset in ("book.css", "book.js"):
            shutil.copy(here / asset, self.out / asset)
        (self.out / "highlight.css").write_text(HtmlFormatter().get_style_defs(".code"))
        (self.out / "search_data.js").write_text("var SEARCH_DATA = " + json.dumps(search) + ";\n")
        search_body = '<h1>Search</h1><p id="search-status"></p><ol id="search-results"></ol>'
        page = self.layout("Search", search_body, 0).replace(
            '<script defer src="book.js">', '<script defer src="lunr.min.js"></script><script defer src="search_data.js"></script><script defer src="book.js">')
        (self.out / "search.html").write_text(page)
        return self.out / "index.html"

    def write_source(self, rel):
        path, lines = Path(rel), self.sources[rel]
        depth = rel.count("/") + 1
        up = "../" * depth
        defs = {line: name for name, line in definitions(path, lines)}
        code_lines = highlight("\n".join(lines) + "\n", lexer_for(path), HtmlFormatter(nowrap=True)).split("\n")
        parts = sections(path, lines)
        proses = cmark("\n\n<!--section-->\n\n".join("\n".join(p) or " " for p, _ in parts)).split("<!--section-->")
        rows = []
        for (prose, numbers), prose_html in zip(parts, proses):
            back = []
            for n in numbers:
                links = []
                for page, anchor, title in self.explained.get((rel, n), []):
                    section = self.short(page) + (f" › {title}" if title and title != self.titles[page] else "")
                    link = f'<a class="explained" href="{up}{page}#{anchor}">{html.escape(section)}</a>'
                    if link not in links:
                        links.append(link)
                if links:
                    back.append(f"<li><code>{html.escape(defs.get(n, ''))}</code> is explained in {'; '.join(links)}</li>")
            code = "".join(f'<span class="line" id="L{n}"{" data-def=" + chr(34) + html.escape(defs[n].split("::")[-1]) + chr(34) if n in defs else ""}>'
                             f'<a class="ln" href="#L{n}">{n}</a>{code_lines[n - 1] if n - 1 < len(code_lines) else ""}</span>'
                             for n in numbers)
            backs = f'<ul class="backlinks">{"".join(back)}</ul>' if back else ""
            rows.append(f'<tr><td class="prose">{prose_html}{backs}</td><td class="code"><pre class="code">{code}</pre></td></tr>')
        explained_by = [name for name, files in self.chapter_files.items() if rel in files]
        by = ", ".join(f'<a href="{up}{p}">{html.escape(self.titles[p])}</a>' for p in explained_by)
        body = (f'<h1 class="source">{html.escape(rel)}</h1><p class="from">Read with: {by}</p>'
                f'<table class="annotated">{"".join(rows)}</table>')
        target = self.out / self.source_page(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.layout(rel, body, depth))

    def write_directory(self, rel):
        depth = rel.count("/") + 2
        up = "../" * depth
        items = []
        for child in sorted((ROOT / rel).iterdir()):
            child_rel = child.relative_to(ROOT).as_posix()
            href = up + self.source_page(child_rel) if child_rel in self.sources else None
            items.append(f'<li><a href="{href}">{html.escape(child.name)}</a></li>' if href else f"<li>{html.escape(child.name)}</li>")
        target = self.out / "src" / rel / "index.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.layout(rel + "/", f"<h1>{html.escape(rel)}/</h1><ul>{''.join(items)}</ul>", depth))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md", help="the front page (default: README.md)")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs", help="the Markdown pages (default: docs/)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "book", help="where the book goes")
    parser.add_argument("--wasm", type=Path, help="the WebAssembly demos (build/wasm/bin): Run panels in the pages")
    args = parser.parse_args()
    wasm = args.wasm.resolve() if args.wasm else None
    print(Book(args.readme.resolve(), args.docs.resolve(), args.out.resolve(), wasm).build())


if __name__ == "__main__":
    sys.exit(main())
