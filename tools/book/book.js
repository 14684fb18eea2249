// The book's one script: typeset the math (KaTeX), and on search.html run the query (lunr).
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

// On a narrow window the chapter list and the page's contents sit above the text: fold them, one click opens.
function foldListsWhenNarrow() {
  if (window.innerWidth > 1100) return;
  for (const d of document.querySelectorAll("nav.chapters details, aside.contents details")) d.open = false;
}

document.addEventListener("DOMContentLoaded", () => {
  foldListsWhenNarrow();
  typesetMath();
  if (document.getElementById("search-results")) runSearch();
  document.body.dataset.ready = "1";
});
