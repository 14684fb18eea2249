// The book's one script: typeset the math (KaTeX), and on search.html run the query (lunr).
"use strict";

function typesetMath() {
  for (const el of document.querySelectorAll(".math")) {
    // throwOnError false: a bad formula shows as a red .katex-error in place (the browser test looks for it)
    katex.render(el.textContent, el, {displayMode: el.classList.contains("display"), throwOnError: false});
  }
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
    SEARCH_DATA.forEach((doc, n) => this.add({n: n, title: doc.title, text: doc.text}));
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
    list.appendChild(li);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  typesetMath();
  if (document.getElementById("search-results")) runSearch();
  document.body.dataset.ready = "1";
});
