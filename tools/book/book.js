// The book's one script: typeset the math (KaTeX), on search.html run the query (lunr), and run a chapter's
// demo in its page (the Run panels of tools/book/run_panels.py).
"use strict";

function typesetMath() {
  for (const el of document.querySelectorAll(".math")) {
    // throwOnError false: a bad formula shows as a red .katex-error in place (the browser test looks for it)
    katex.render(el.textContent, el, {displayMode: el.classList.contains("display"), throwOnError: false});
  }
}

// The first sentence of `text` that holds a word of the query (any case), cut to about 240 characters around it.
function matchingSentence(text, query) {
  const words = query.toLowerCase().split(/\s+/).filter(w => w.length > 0);
  const sentences = text.split(/(?<=[.!?:;])\s+/);
  const hit = sentences.find(s => words.some(w => s.toLowerCase().includes(w))) || sentences[0] || "";
  if (hit.length <= 240) return hit;
  const found = words.map(w => hit.toLowerCase().indexOf(w)).filter(i => i >= 0);
  const at = found.length ? Math.max(0, Math.min(...found) - 80) : 0;
  return (at > 0 ? "\u2026" : "") + hit.slice(at, at + 240) + "\u2026";
}

function runSearch() {
  const query = new URLSearchParams(location.search).get("q") || "";
  const status = document.getElementById("search-status");
  const list = document.getElementById("search-results");
  document.querySelector("header input").value = query;
  if (!query) { status.textContent = "Type a word in the box above."; return; }
  const index = lunr(function () {
    this.ref("n");
    this.field("title", {boost: 5});
    this.field("text");
    this.field("tex");
    SEARCH_DATA.forEach((doc, n) => this.add({n: n, title: doc.title, text: doc.text, tex: doc.tex}));
  });
  let hits = [];
  try { hits = index.search(query); } catch (e) { hits = index.search(query.replace(/[:~^+*-]/g, " ")); }
  status.textContent = hits.length + " section" + (hits.length === 1 ? "" : "s") + " mention \u201c" + query + "\u201d";
  for (const hit of hits.slice(0, 50)) {
    const doc = SEARCH_DATA[hit.ref];
    const li = document.createElement("li");
    const a = document.createElement("a");
    a.href = doc.page + (doc.id ? "#" + doc.id : "");
    a.textContent = doc.title;
    li.appendChild(a);
    const snippet = document.createElement("p");
    snippet.className = "snippet";
    snippet.textContent = matchingSentence(doc.text, query);
    li.appendChild(snippet);
    list.appendChild(li);
  }
}

// The form's text as arguments: words split at spaces, "..." or '...' kept whole.
function splitArguments(text) {
  const out = [];
  for (const m of text.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

// What a demo's worker runs: a fresh instance of the program (main runs once per instance), the files the demo
// reads written into its file system, main called with the arguments, each printed line posted as it is printed,
// each SVG posted when the demo says it wrote it ("wrote DIR/NAME.svg") and the rest of `out` at the end, then
// the exit code.
const WORKER_MAIN = `
onmessage = event => {
  let instance = null;
  const sent = new Set();
  const send = path => {
    if (sent.has(path)) return;
    try { postMessage({figure: {path: path, svg: instance.FS.readFile(path, {encoding: "utf8"})}}); sent.add(path); }
    catch (e) {}
  };
  const post = line => {
    postMessage({line: line});
    const wrote = /^wrote (\\S+\\.svg)$/.exec(line);
    if (wrote && instance) send(wrote[1]);
  };
  const loading = performance.now();
  Module({print: post, printErr: post}).then(created => {
    instance = created;
    for (const [name, text] of Object.entries(event.data.files)) instance.FS.writeFile(name, text);
    const started = performance.now();
    let code;
    try { code = instance.callMain(event.data.args); } catch (e) { post(String(e)); code = -1; }
    const seconds = (performance.now() - started) / 1000;
    try {
      for (const name of instance.FS.readdir(event.data.out).filter(n => n.endsWith(".svg")).sort())
        send(event.data.out + "/" + name);
    } catch (e) {}
    postMessage({done: true, code: code, seconds: seconds, startup: (started - loading) / 1000});
  });
};`;

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.onload = resolve;
    script.onerror = () => reject(new Error("cannot load " + src));
    document.head.appendChild(script);
  });
}

// The files a demo reads (run_panels.py's DEMO_FILES), from wasm/<demo>.files.js, which sets DEMO_FILES.
const demoFiles = {};
function loadFiles(section) {
  const demo = section.dataset.files;
  if (!demo) return Promise.resolve({});
  if (!demoFiles[demo]) demoFiles[demo] = loadScript("wasm/" + demo + ".files.js").then(() => window.DEMO_FILES);
  return demoFiles[demo];
}

const demoWorkers = {};
function loadDemo(demo) {
  if (!demoWorkers[demo]) demoWorkers[demo] = loadScript("wasm/" + demo + ".js").then(() => {
    const source = "var _scriptDir = undefined;\nvar Module = " + window.Module.toString() + ";\n" + WORKER_MAIN;
    window.Module = undefined;  // a `var` of the script: it cannot be deleted
    return URL.createObjectURL(new Blob([source], {type: "text/javascript"}));
  });
  return demoWorkers[demo];
}

function showFigure({path, svg}, figures) {
  const figure = document.createElement("figure");
  figure.dataset.file = path;
  const img = document.createElement("img");
  img.src = URL.createObjectURL(new Blob([svg], {type: "image/svg+xml"}));
  img.alt = path;
  const caption = document.createElement("figcaption");
  caption.textContent = path;
  figure.append(img, caption);
  figures.appendChild(figure);
}

// Step: the next stage of a finished run, a stage being what the demo printed from one "== heading" to the next
// (what comes before the first heading goes with it), and the pictures it says it wrote ("wrote DIR/NAME.svg").
function showNextStage(section) {
  const stages = section.stages;
  const shown = Number(section.dataset.shown) + 1;
  const text = stages.slice(0, shown).flat().join("\n") + "\n";
  const output = section.querySelector(".run-output");
  output.textContent = text;
  output.scrollTop = output.scrollHeight;
  for (const figure of section.querySelectorAll(".run-figures figure"))
    figure.hidden = shown < stages.length && !text.includes(figure.dataset.file);
  section.dataset.shown = String(shown);
  const step = section.querySelector("button.step");
  step.textContent = shown < stages.length ? "Next stage (" + (shown + 1) + " of " + stages.length + ")" : "Step";
  if (shown >= stages.length) delete section.dataset.shown;  // the next click runs it again
}

function stagesOf(text) {
  const stages = [];
  for (const line of text.replace(/\n$/, "").split("\n")) {
    if (line.startsWith("== ") && stages.length && stages[stages.length - 1].some(l => l.startsWith("== ")))
      stages.push([]);
    if (!stages.length) stages.push([]);
    stages[stages.length - 1].push(line);
  }
  return stages;
}

// One run, in a worker so that the page stays live and each line shows as it is printed; the button stops it.
// data-status (running, done, failed, stopped) and data-exit say how it ended, for the reader and for the test.
// stepping: the output stays hidden until the run ends, then shows its first stage (showNextStage).
async function runDemo(section, stepping) {
  const demo = section.dataset.demo;
  const output = section.querySelector(".run-output");
  const status = section.querySelector(".run-status");
  const figures = section.querySelector(".run-figures");
  const button = section.querySelector("button");
  const args = splitArguments(section.querySelector("input[name=args]").value);
  const i = args.indexOf("--out");
  const out = i >= 0 && i + 1 < args.length ? args[i + 1] : "stepformer-out";
  output.textContent = "";
  output.hidden = stepping;
  figures.replaceChildren();
  figures.hidden = stepping;
  delete section.dataset.shown;
  section.dataset.status = "running";
  status.textContent = "loading\u2026";
  const loading = performance.now();
  let url, files;
  try {
    [url, files] = await Promise.all([loadDemo(demo), loadFiles(section)]);
  } catch (e) {
    output.textContent = String(e) + "\n";
    section.dataset.status = "failed";
    status.textContent = "failed";
    return;
  }
  const loaded = (performance.now() - loading) / 1000;
  const worker = new Worker(url);
  const finish = (state, text) => {
    worker.terminate();
    section.dataset.status = state;
    status.textContent = text;
    button.textContent = "Run in this page";
    section.stop = null;
  };
  section.stop = () => finish("stopped", "stopped");
  button.textContent = "Stop";
  status.textContent = "running\u2026";
  worker.onmessage = event => {
    const m = event.data;
    if (m.figure) { showFigure(m.figure, figures); return; }
    if (!m.done) { output.append(m.line + "\n"); return; }
    section.dataset.exit = String(m.code);
    finish(m.code === 0 ? "done" : "failed", (m.code === 0 ? "done" : "exit " + m.code) + " in " +
           m.seconds.toFixed(1) + " s (loaded in " + (loaded + m.startup).toFixed(1) + " s)");
    if (stepping) {
      section.stages = stagesOf(output.textContent);
      section.dataset.stages = String(section.stages.length);
      section.dataset.shown = "0";
      output.hidden = figures.hidden = false;
      showNextStage(section);
    }
  };
  worker.onerror = event => { output.append(String(event.message) + "\n"); finish("failed", "failed"); };
  worker.postMessage({args: args, out: out, files: files});
}

// The options form and the arguments field say the same: editing the form rewrites the field (each option whose
// value is not its default, then the task), and editing the field sets the form.
function argumentsFromForm(section) {
  const words = [];
  for (const control of section.querySelectorAll("[data-option]")) {
    const name = control.dataset.option;
    if ("flag" in control.dataset) { if (control.checked) words.push(name); continue; }
    const value = control.value.trim();
    if (value !== "" && value !== control.dataset.default) words.push(name, /\s/.test(value) ? '"' + value + '"' : value);
  }
  const task = section.querySelector("[data-subcommand]");
  if (task && task.value) words.push(task.value);
  section.querySelector("input[name=args]").value = words.join(" ");
}

function formFromArguments(section) {
  const words = splitArguments(section.querySelector("input[name=args]").value);
  const task = section.querySelector("[data-subcommand]");
  if (task) task.value = words.find(w => [...task.options].some(o => o.value === w && w)) || "";
  for (const control of section.querySelectorAll("[data-option]")) {
    const at = words.indexOf(control.dataset.option);
    if ("flag" in control.dataset) control.checked = at >= 0;
    else control.value = at >= 0 && at + 1 < words.length ? words[at + 1] : control.dataset.default;
  }
}

function setUpRunPanels() {
  for (const section of document.querySelectorAll("section.run-demo")) {
    formFromArguments(section);
    for (const control of section.querySelectorAll("[data-option], [data-subcommand]"))
      control.addEventListener("change", () => argumentsFromForm(section));
    section.querySelector("input[name=args]").addEventListener("change", () => formFromArguments(section));
    section.querySelector("form").addEventListener("submit", event => {
      event.preventDefault();
      if (section.stop) section.stop();
      else if (section.dataset.status !== "running") runDemo(section, false);  // not while it loads
    });
    section.querySelector("button.step").addEventListener("click", () => {
      if (section.dataset.status === "running") return;
      if (section.dataset.shown !== undefined) showNextStage(section);
      else runDemo(section, true);
    });
  }
}

// On a narrow window the chapter list and the page's contents sit above the text: fold them, one click opens.
function foldListsWhenNarrow() {
  if (window.innerWidth > 1100) return;
  for (const d of document.querySelectorAll("nav.chapters details, aside.contents details")) d.open = false;
}

document.addEventListener("DOMContentLoaded", () => {
  foldListsWhenNarrow();
  typesetMath();
  if (document.getElementById("search-results")) runSearch();
  setUpRunPanels();
  document.body.dataset.ready = "1";
});
