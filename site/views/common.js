/* The course's interactive views: what every view shares.
 *
 * A view is a placeholder in a lesson, <div class="tfs-view" data-view="NAME"></div>, and a
 * script NAME.js beside this one that registers {name, src, draw(el, data, V)}. When the
 * placeholder comes near the screen, its data file data/NAME.js (written by
 * site/export_views.py from the package's own numbers) is loaded with a <script> tag, found
 * relative to the view script's URL: a page opened from file:// may not fetch a file. Then
 * draw() builds the view with plain DOM and SVG. No dependency, no network.
 *
 * The scripts may load in any order: a view script queues itself in TFS_VIEWS_PENDING and this
 * file starts everything queued, now or later.
 */
(function () {
  "use strict";
  if (window.TFS_VIEWS && window.TFS_VIEWS.flush) { window.TFS_VIEWS.flush(); return; }

  var SVG_NS = "http://www.w3.org/2000/svg";
  // The figures' colours (transformer/plotting/style.py)
  var COLORS = {
    on: "#1f4e79", off: "#e6e6e6", partial: "#7fb3d5", text: "#222222", muted: "#6b6b6b",
    lines: ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
  };
  // matplotlib's "Blues" (weights: 0 white, 1 dark blue) and "RdBu_r" (scores: negative blue, positive red)
  var BLUES = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"];
  var RDBU_R = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582",
                "#d6604d", "#b2182b", "#67001f"];

  function hexRgb(h) { return [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)]; }
  function ramp(stops) {
    var rgb = stops.map(hexRgb);
    return function (t) {  // t in [0, 1] -> [r, g, b]
      t = Math.max(0, Math.min(1, isFinite(t) ? t : 0)) * (rgb.length - 1);
      var i = Math.min(rgb.length - 2, Math.floor(t)), f = t - i;
      return [0, 1, 2].map(function (c) { return Math.round(rgb[i][c] + f * (rgb[i + 1][c] - rgb[i][c])); });
    };
  }
  var bluesRgb = ramp(BLUES), rdbuRgb = ramp(RDBU_R);
  function css(rgb) { return "rgb(" + rgb[0] + "," + rgb[1] + "," + rgb[2] + ")"; }

  // --- DOM and SVG builders ------------------------------------------------------------------
  function setAttrs(node, attrs) {
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === "text") node.textContent = v;
      else if (k === "style" && typeof v === "object") Object.keys(v).forEach(function (s) { node.style[s] = v[s]; });
      else if (k.slice(0, 2) === "on" && typeof v === "function") node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    });
    return node;
  }
  function h(tag, attrs, parent) {  // an HTML element
    var node = setAttrs(document.createElement(tag), attrs);
    if (parent) parent.appendChild(node);
    return node;
  }
  // A drawing shrinks with a narrow column, but not below MIN_SCALE of its size: on a phone its labels (10-12.5 px)
  // would fall to 6 px. A wider drawing scrolls sideways in a box of its own (which fades at the edge that has
  // more, site.js), so the card's text around it still wraps at the card's width.
  var MIN_SCALE = 0.8, SHRINKS_FREELY = 300;  // px: a drawing this narrow fits a phone's column anyway
  function s(tag, attrs, parent) {  // an SVG element
    var node = setAttrs(document.createElementNS(SVG_NS, tag), attrs);
    var width = Number(attrs && attrs.width);
    if (tag === "svg" && parent && width > SHRINKS_FREELY && /\btfs-svg\b/.test(attrs["class"] || "")) {
      node.style.minWidth = Math.round(MIN_SCALE * width) + "px";
      parent = h("div", {"class": "tfs-svg-scroll"}, parent);
    }
    if (parent) parent.appendChild(node);
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  // --- numbers -------------------------------------------------------------------------------
  function fmtInt(n) { return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function fmtBytes(n) {
    if (n >= 1048576) return (n / 1048576).toFixed(2) + " MiB";
    if (n >= 1024) return (n / 1024).toFixed(1) + " KiB";
    return fmtInt(n) + " B";
  }
  function short(w) {  // a weight in [0, 1] in a small cell: ".42", "1"
    var t = w.toFixed(2);
    return t === "1.00" ? "1" : t.slice(1);
  }
  function fmt(x, digits) {  // a number for a label; "—" for none
    if (x === null || x === undefined || !isFinite(x)) return "—";
    return Number(x).toFixed(digits === undefined ? 3 : digits);
  }

  // --- controls ------------------------------------------------------------------------------
  function control(parent, label) {
    var box = h("label", {"class": "tfs-control"}, parent);
    h("span", {"class": "tfs-control-label", text: label}, box);
    return box;
  }
  function select(parent, o) {  // o: {label, options: [[value, text]], value, role, onChange}
    var box = control(parent, o.label);
    var sel = h("select", {"data-role": o.role}, box);
    o.options.forEach(function (opt) { h("option", {value: String(opt[0]), text: opt[1]}, sel); });
    sel.value = String(o.value);
    sel.addEventListener("change", function () {
      var had = document.activeElement === sel, view = sel.closest(".tfs-view");
      o.onChange(sel.value);
      // a change that redrew the menu itself (the explorer's text menu): the focus goes to the new one, not the page
      if (had && !sel.isConnected && view && (!document.activeElement || document.activeElement === document.body)) {
        var twin = view.querySelector('select[data-role="' + o.role + '"]');
        if (twin) twin.focus();
      }
    });
    return sel;
  }
  function slider(parent, o) {  // o: {label, min, max, step, value, role, format(v), onInput(v), wideValue}
    var box = control(parent, o.label);
    var input = h("input", {type: "range", min: o.min, max: o.max, step: o.step || 1, value: o.value,
                            "data-role": o.role}, box);
    var out = h("output", {"class": "tfs-control-value"}, box);
    if (o.wideValue) out.classList.add("tfs-control-value-wide");  // room for "0 (greedy)": the next sliders stay put
    function show() { out.textContent = o.format ? o.format(Number(input.value)) : input.value; }
    input.addEventListener("input", function () { show(); o.onInput(Number(input.value)); });
    show();
    return {input: input, box: box, set: function (v) { input.value = v; show(); }, refresh: show};
  }
  // A slider over steps with back / forward / play buttons
  function stepper(parent, o) {  // o: {label, max, value, role, format(v), onInput(v)}
    var row = h("div", {"class": "tfs-stepper"}, parent);
    var back = h("button", {type: "button", "class": "tfs-button", title: "one step back", text: "◀"}, row);
    var play = h("button", {type: "button", "class": "tfs-button", title: "play", text: "▶ play"}, row);
    var fwd = h("button", {type: "button", "class": "tfs-button", title: "one step forward", text: "▶"}, row);
    var sl = slider(row, {label: o.label, min: 0, max: o.max, value: o.value || 0, role: o.role,
                          format: o.format, onInput: function (v) { stop(); o.onInput(v); }});
    sl.box.classList.add("tfs-stepper-slider");
    var timer = null;
    function go(v) { v = Math.max(0, Math.min(o.max, v)); sl.set(v); o.onInput(v); }
    function stop() { if (timer) { clearInterval(timer); timer = null; play.textContent = "▶ play"; } }
    back.addEventListener("click", function () { stop(); go(Number(sl.input.value) - 1); });
    fwd.addEventListener("click", function () { stop(); go(Number(sl.input.value) + 1); });
    play.addEventListener("click", function () {
      if (timer) { stop(); return; }
      if (Number(sl.input.value) >= o.max) go(0);
      play.textContent = "❚❚ pause";
      timer = setInterval(function () {
        if (Number(sl.input.value) >= o.max) { stop(); return; }
        go(Number(sl.input.value) + 1);
      }, o.interval || 900);
    });
    return sl;
  }
  function legend(parent, items) {  // items: [[colour, text, extra css]]
    var box = h("div", {"class": "tfs-legend"}, parent);
    items.forEach(function (it) {
      var item = h("span", {"class": "tfs-legend-item"}, box);
      h("span", {"class": "tfs-swatch", style: Object.assign({background: it[0]}, it[2] || {})}, item);
      h("span", {text: it[1]}, item);
    });
    return box;
  }
  // A colour bar for weights in [0, vmax]
  function colorbar(parent, label, vmax) {
    var box = h("div", {"class": "tfs-colorbar"}, parent);
    h("span", {text: label + " 0"}, box);
    var bar = h("span", {"class": "tfs-colorbar-ramp"}, box);
    bar.style.background = "linear-gradient(to right, " + BLUES.join(", ") + ")";
    h("span", {text: String(vmax === undefined ? 1 : vmax)}, box);
    return box;
  }

  // What to do with a view, in one line under its title
  function howto(parent, text) { return h("p", {"class": "tfs-howto", "data-role": "howto", text: text}, parent); }

  // --- keyboard ------------------------------------------------------------------------------
  // A group of cells or tokens that a pointer can hover and click, reached with ONE Tab stop (a
  // roving tabindex): the arrows move between them (Left/Right by one, Up/Down by a row of `cols`);
  // in a grid (rows of `cols`, or o.at below) Home/End go to the first/last item of the current
  // row and Ctrl+Home/Ctrl+End (Cmd on a Mac) to the first/last of the whole grid, and PageDown/
  // PageUp PAGE rows down/up the column, as WAI-ARIA's grid pattern has it; in a group of one row
  // or one column, Home/End go to its ends. Focus does what hovering does (a "mouseenter"), Enter
  // or Space what a click does, Escape lets go of what a click kept
  // (o.escape) and reads out nothing, as a pointer leaving does; Escape on the view's other controls
  // does the same for each of its groups (letGoFrom). The view's own pointer listeners
  // serve both. With o.show, an element under the group reads out the item hovered or focused (its
  // label), and o.rest when there is none: what a tooltip (a <title>) shows a pointer.
  // A group that only partly fills its grid (the tiles computed so far) gives each item's place,
  // o.at(k) = [row, column]: Up/Down go to the nearest row above or below that has an item, to its
  // item nearest the column.
  // A redraw (a step of ▶ play) that replaces the group holding the focus gives the focus to the
  // same place in the new group, not to the page.
  var held = null;  // the item that has the focus: {view, where, k, at, el}
  var PAGE = 5;  // rows a PageDown or PageUp moves in a grid
  document.addEventListener("focusin", function (e) { if (held && e.target !== held.el) held = null; });
  function keys(items, o) {  // items: elements in reading order; o: {cols, at(k), label(k): the name read aloud,
    o = o || {};             // show, rest, start: the item Tab reaches first (default 0), escape(k)}
    if (!items.length) return items;
    var cols = o.cols || items.length, start = Math.min(Math.max(o.start || 0, 0), items.length - 1);
    var view = items[0].closest(".tfs-view"), where = place(items[0]);
    function rest() { o.show.textContent = o.rest || ""; o.show.setAttribute("data-k", ""); }
    function vertical(k, down) {  // the item of the nearest row below (above) with one, nearest the column
      var p = o.at(k), best = -1, bestRow = 0, bestCol = 0;
      items.forEach(function (x, m) {
        var q = o.at(m), dr = down ? q[0] - p[0] : p[0] - q[0], dc = Math.abs(q[1] - p[1]);
        if (dr <= 0) return;
        if (best < 0 || dr < bestRow || (dr === bestRow && dc < bestCol)) { best = m; bestRow = dr; bestCol = dc; }
      });
      return best < 0 ? undefined : best;
    }
    var grid = !!o.at || (cols > 1 && cols < items.length);  // rows and columns, not one line of items
    function spot(k) { return o.at ? o.at(k) : [Math.floor(k / cols), k % cols]; }  // [row, column]
    function edge(k, last, whole) {  // the first (last) item of k's row, or of the whole group
      var row = spot(k)[0], best = -1, bp = null;
      items.forEach(function (x, m) {
        var q = spot(m);
        if (!whole && q[0] !== row) return;
        var after = bp && (q[0] !== bp[0] ? q[0] > bp[0] : q[1] > bp[1]);
        if (best < 0 || after === last) { best = m; bp = q; }
      });
      return best;
    }
    function page(k, down) {  // PAGE rows down (up) in the same column, or as far as the grid goes
      var to = k;
      for (var r = 0; r < PAGE; r++) {
        var next = o.at ? vertical(to, down) : to + (down ? cols : -cols);
        if (next === undefined || next < 0 || next >= items.length) break;
        to = next;
      }
      return to === k ? undefined : to;
    }
    function target(k, e) {
      var key = e.key;
      if (o.at && (key === "ArrowDown" || key === "ArrowUp")) return vertical(k, key === "ArrowDown");
      if (grid && (key === "PageDown" || key === "PageUp")) return page(k, key === "PageDown");
      if (key === "Home" || key === "End") return edge(k, key === "End", !grid || e.ctrlKey || e.metaKey);
      return {ArrowRight: k + 1, ArrowLeft: k - 1, ArrowDown: k + cols, ArrowUp: k - cols}[key];
    }
    var again = null;  // the redrawn group's item that takes the focus back
    if (held && held.view === view && held.where === where && !held.el.isConnected &&
        (!document.activeElement || document.activeElement === document.body)) {
      again = Math.min(held.k, items.length - 1);
      if (o.at && held.at) {
        items.forEach(function (x, m) { var q = o.at(m); if (q[0] === held.at[0] && q[1] === held.at[1]) again = m; });
      }
      start = again;
    }
    if (o.show) rest();
    items.forEach(function (el, k) {
      el.setAttribute("tabindex", k === start ? "0" : "-1");
      if (o.label) el.setAttribute("aria-label", o.label(k));
      if (!el.getAttribute("role")) el.setAttribute("role", "button");
      if (o.show) {
        el.addEventListener("mouseenter", function () {
          o.show.textContent = o.label(k);
          o.show.setAttribute("data-k", k);
        });
        el.addEventListener("mouseleave", rest);
      }
      el.addEventListener("focus", function () {
        items.forEach(function (x) { x.setAttribute("tabindex", x === el ? "0" : "-1"); });
        held = {view: view, where: where, k: k, at: o.at ? o.at(k) : null, el: el};
        el.dispatchEvent(new MouseEvent("mouseenter"));
      });
      el.addEventListener("blur", function () {
        el.dispatchEvent(new MouseEvent("mouseleave"));
        setTimeout(function () {  // the reader moved on (not a redraw that removed it): nothing to give back
          if (held && held.el === el && el.isConnected && document.activeElement !== el) held = null;
        }, 0);
      });
      el.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          el.dispatchEvent(new MouseEvent("click", {bubbles: true}));
          return;
        }
        if (e.key === "Escape") {
          if (o.escape) o.escape(k);
          el.dispatchEvent(new MouseEvent("mouseleave"));
          return;
        }
        var to = target(k, e);
        if (to === undefined || to < 0 || to >= items.length) return;
        e.preventDefault();
        items[to].focus();
      });
    });
    if (again !== null) items[again].focus({preventScroll: true});
    if (o.escape && view) letGoFrom(view, items, o.escape);
    return items;
  }
  // Escape pressed on another control of the view (its slider, a select, a button) lets go of what
  // a click kept in each of its groups too, as a pointer leaving them would: the readouts go back to
  // what they say with nothing hovered.
  function letGoFrom(view, items, escape) {
    var groups = view.tfsEscapes || (view.tfsEscapes = []);
    groups.push({items: items, escape: escape});
    if (view.tfsEscapeBound) return;
    view.tfsEscapeBound = true;
    view.addEventListener("keydown", function (e) {
      if (e.key !== "Escape") return;
      view.tfsEscapes = view.tfsEscapes.filter(function (g) { return g.items[0].isConnected; });  // redrawn: gone
      if (view.tfsEscapes.some(function (g) { return g.items.indexOf(e.target) >= 0; })) return;  // its item's own
      view.tfsEscapes.forEach(function (g) {
        g.escape(-1);
        g.items[0].dispatchEvent(new MouseEvent("mouseleave"));
      });
    });
  }
  function place(el) {  // where a group sits in its view: its box's role (and layer, head), its items' role
    var box = el.parentNode && el.parentNode.closest ? el.parentNode.closest("[data-role]") : null;
    return [box ? box.getAttribute("data-role") : "", box ? box.getAttribute("data-layer") : "",
            box ? box.getAttribute("data-head") : "", el.getAttribute("data-role") || el.tagName].join("|");
  }

  // --- loading the data and starting the views -----------------------------------------------
  var loads = {};
  function dataUrl(name, src) {
    var base = (src || "").replace(/[?#].*$/, "").replace(/[^\/]*$/, "");  // the view script's folder
    return base + "data/" + name + ".js";
  }
  function loadData(name, src) {
    if (!loads[name]) {
      loads[name] = new Promise(function (resolve, reject) {
        var have = window.TFS_VIEWS_DATA && window.TFS_VIEWS_DATA[name];
        if (have) { resolve(have); return; }
        var tag = document.createElement("script");
        tag.src = dataUrl(name, src);
        tag.async = true;
        tag.onload = function () {
          var d = window.TFS_VIEWS_DATA && window.TFS_VIEWS_DATA[name];
          if (d) resolve(d); else reject(new Error("the file did not define its data"));
        };
        tag.onerror = function () { reject(new Error("not found")); };
        document.head.appendChild(tag);
      });
    }
    return loads[name];
  }
  function message(el, text) {
    clear(el);
    h("p", {"class": "tfs-message", text: text}, el);
  }
  var api = {COLORS: COLORS, BLUES: BLUES, blues: function (t) { return css(bluesRgb(t)); }, bluesRgb: bluesRgb,
             rdbu: function (t) { return css(rdbuRgb(t)); }, h: h, s: s, clear: clear, fmt: fmt, short: short,
             fmtInt: fmtInt, fmtBytes: fmtBytes, select: select, slider: slider, stepper: stepper,
             legend: legend, colorbar: colorbar, message: message, howto: howto, keys: keys};

  function start(view, el) {
    el.setAttribute("data-state", "loading");
    message(el, "Loading the view…");
    loadData(view.name, view.src).then(function (data) {
      clear(el);
      el.classList.add("tfs-view-" + view.name);
      if (view.title) h("div", {"class": "tfs-title", text: view.title}, el);
      try {
        view.draw(el, data, api);
        el.setAttribute("data-state", "ready");
      } catch (err) {
        message(el, "This view could not be drawn (" + err.message + ").");
        el.setAttribute("data-state", "error");
      }
    }, function () {
      message(el, "The data of this view (data/" + view.name + ".js) is missing: build the site with `make site`.");
      el.setAttribute("data-state", "missing");
    });
  }

  var registered = {};
  var observer = ("IntersectionObserver" in window) ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      if (!e.isIntersecting) return;
      observer.unobserve(e.target);
      var view = registered[e.target.getAttribute("data-view")];
      if (view) start(view, e.target);
    });
  }, {rootMargin: "800px 0px"}) : null;

  function scan() {
    var els = document.querySelectorAll("div.tfs-view[data-view]");
    Array.prototype.forEach.call(els, function (el) {
      var view = registered[el.getAttribute("data-view")];
      if (!view || el.getAttribute("data-state")) return;
      el.setAttribute("data-state", "waiting");
      if (observer) observer.observe(el); else start(view, el);  // lazily: only near the screen
    });
  }
  function flush() {
    var pending = window.TFS_VIEWS_PENDING || [];
    while (pending.length) { var v = pending.shift(); registered[v.name] = v; }
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", scan);
    else scan();
  }
  window.TFS_VIEWS = {flush: flush, api: api, dataUrl: dataUrl};
  flush();
})();
