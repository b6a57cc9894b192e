// The course's page helpers, no library: a "copy" button on each block of code, a figure shown at its
// full size (scrollable) when clicked, as the column shrinks a wide figure's text, a fade on a box
// that scrolls sideways, and the buttons above the article.
(() => {
  "use strict";

  async function copy(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (e) {  // no clipboard API (a page opened from a file): the old way
      const area = document.createElement("textarea");
      area.value = text;
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      const done = document.execCommand("copy");
      area.remove();
      return done;
    }
  }

  function addCopyButtons() {
    document.querySelectorAll("article div.highlight").forEach((block) => {
      const pre = block.querySelector("pre");
      if (!pre || block.querySelector("button.tfs-copy")) return;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "tfs-copy";
      button.textContent = "copy";
      button.title = "copy this code";
      button.addEventListener("click", async () => {
        button.textContent = (await copy(pre.innerText.replace(/\n$/, ""))) ? "copied" : "select and copy";
        setTimeout(() => { button.textContent = "copy"; }, 1500);
      });
      block.appendChild(button);
    });
  }

  function closeZoom() {
    document.querySelectorAll(".tfs-zoom").forEach((e) => e.remove());
  }

  function zoom(img) {
    closeZoom();
    const layer = document.createElement("div");
    layer.className = "tfs-zoom";
    layer.setAttribute("role", "dialog");
    layer.title = "click or press Escape to close";
    const big = document.createElement("img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    layer.appendChild(big);
    layer.addEventListener("click", closeZoom);
    document.body.appendChild(layer);
  }

  // A figure shown smaller than it was drawn says so under it: "click to enlarge", a button (the
  // keyboard reaches it), shown while the column shrinks the figure (a wide one, or any on a phone).
  function enlargeableFigures() {
    const shrunk = new ResizeObserver((entries) => entries.forEach((e) => showHint(e.target)));
    function showHint(img) {
      const hint = img.nextElementSibling;
      if (hint && hint.classList.contains("tfs-enlarge")) {
        hint.hidden = !(img.naturalWidth > img.clientWidth * 1.05);
      }
    }
    const figures = "article .cell_output img, article img.tfs-figure, #figures img, #transformer-from-scratch > p > img";
    document.querySelectorAll(figures).forEach((img) => {  // the last: the home page's picture
      img.classList.add("tfs-zoomable");
      img.title = img.title || "click to see the figure at its full size";
      img.addEventListener("click", () => zoom(img));
      const hint = document.createElement("button");
      hint.type = "button";
      hint.className = "tfs-enlarge";
      hint.textContent = "⤢ click to enlarge";
      hint.title = img.title;
      hint.hidden = true;
      hint.addEventListener("click", () => zoom(img));
      img.after(hint);
      img.addEventListener("load", () => showHint(img));
      shrunk.observe(img);
    });
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeZoom(); });
  }

  // A box that scrolls sideways fades at the edge where more of it lies (site.css): .tfs-more-right
  // while there is more to the right, .tfs-more-left once scrolled. Boxes appear late (a view draws
  // when it nears the screen, MathJax typesets, a folded cell opens): they are looked for again
  // inside whatever changed, and measured again when they change size.
  const SCROLLERS = ["pre", ".pst-scrollable-table-container", ".tfs-table", ".tfs-thumbs", ".tfs-view", ".tfs-svg-scroll",
                     "div.math", "mjx-container[display='true']"].join(", ");

  function markScroll(box) {
    const more = box.scrollWidth - box.clientWidth;
    box.classList.toggle("tfs-more-right", more > 1 && box.scrollLeft < more - 1);
    box.classList.toggle("tfs-more-left", more > 1 && box.scrollLeft > 1);
  }

  function scrollHints() {
    const article = document.querySelector("article");
    if (!article || !window.ResizeObserver) return;
    const seen = new WeakSet();
    const resized = new ResizeObserver((entries) => entries.forEach((e) => markScroll(e.target)));
    function look(root) {
      const boxes = [...root.querySelectorAll(SCROLLERS)];
      if (root.matches && root.matches(SCROLLERS)) boxes.push(root);
      boxes.forEach((box) => {
        if (!seen.has(box)) {
          seen.add(box);
          resized.observe(box);
          box.addEventListener("scroll", () => markScroll(box), {passive: true});
        }
        markScroll(box);
      });
    }
    look(article);
    let changed = new Set(), queued = false;
    new MutationObserver((records) => {
      records.forEach((r) => {
        const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
        if (el) changed.add(el.closest(".tfs-view") || el);
      });
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => {
        const roots = changed;
        changed = new Set();
        queued = false;
        roots.forEach((root) => { if (root.isConnected) look(root); });
      });
    }).observe(article, {childList: true, subtree: true, characterData: true});
  }

  // The search page's snippets: Sphinx takes the text of the page's [role=main], which under this theme
  // holds the buttons above the article and the links below it, and the formulas as TeX. The page is
  // cleaned first: chrome removed, each formula as plain text (\\frac{a}{b} -> a/b, \\sqrt{x} -> √x).
  const CHROME = [".bd-header-article", ".header-article-items", ".prev-next-area", ".prev-next-footer",
                  ".bd-footer-article", ".bd-sidebar-secondary", "#jb-print-docs-body", ".onlyprint", "dialog",
                  ".tfs-lesson-box", "button", "mjx-container"];
  const SYMBOLS = {top: "ᵀ", cdot: "·", times: "×", sqrt: "√", sum: "Σ", le: "≤", ge: "≥", to: "→",
                   infty: "∞", approx: "≈", ldots: "…", dots: "…", in: "∈", alpha: "α", beta: "β",
                   theta: "θ", sigma: "σ", mu: "μ", epsilon: "ε", odot: "⊙", otimes: "⊗"};

  function plainFormula(tex) {
    let t = tex.replace(/^\\[(\[]|\\[)\]]$/g, "").replace(/\$/g, "");
    for (let i = 0; i < 3; i++) {
      t = t.replace(/\\frac\s*{([^{}]*)}\s*{([^{}]*)}/g, "($1)/($2)").replace(/\\sqrt\s*{([^{}]*)}/g, "√($1)");
    }
    t = t.replace(/\\(?:mathrm|mathbf|mathit|text|operatorname|mathbb|boldsymbol)\s*{([^{}]*)}/g, "$1")
         .replace(/\\(left|right|big|Big|bigl|bigr|,|;|!|quad|qquad)/g, " ")
         .replace(/\\([A-Za-z]+)/g, (m, name) => SYMBOLS[name] || name)
         .replace(/[{}]/g, "").replace(/\s+/g, " ");
    return t.trim();
  }

  function cleanSearchSnippets() {
    // searchtools.js declares `const Search`: a global binding, not a property of window
    if (typeof Search === "undefined" || !Search.htmlToText || Search.htmlToText.tfsClean) return;
    const original = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => {
      const doc = new DOMParser().parseFromString(htmlString, "text/html");
      CHROME.forEach((q) => doc.querySelectorAll(q).forEach((e) => e.remove()));
      doc.querySelectorAll(".math").forEach((e) => { e.textContent = plainFormula(e.textContent); });
      return original(doc.documentElement.outerHTML, anchor).replace(/\s+/g, " ");
    };
    Search.htmlToText.tfsClean = true;
  }

  // The buttons above the article, the menu (the sidebar with the lessons) and the in-page contents:
  // the theme binds each to the first .primary-toggle / .secondary-toggle of the page, the one in the
  // top bar that site.css hides; these forward their clicks to it (a dialog below 992 px, the sidebar
  // hidden or shown above).
  function articleHeaderButtons() {
    ["primary-toggle", "secondary-toggle"].forEach((name) => {
      const bound = document.querySelector("." + name);
      document.querySelectorAll(".bd-header-article ." + name).forEach((button) => {
        if (!bound || button === bound) return;
        button.addEventListener("click", (e) => {
          e.preventDefault();
          e.stopPropagation();
          bound.click();
        });
      });
    });
  }

  function ready() {
    articleHeaderButtons();
    addCopyButtons();
    enlargeableFigures();
    scrollHints();
    cleanSearchSnippets();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
