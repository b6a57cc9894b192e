/* The mask picker: who may attend to whom, and what it costs.
 *
 * Placeholder: <div class="tfs-view" data-view="masks" data-mask="causal" data-n="16"></div>
 * Data: data/masks.js (site/export_views.py): each mask built by the package's own function
 * (T.causal_mask, T.padding_mask, T.sliding_window_mask, T.strided_mask, T.global_mask, …) for
 * n = 8, 16, 32 and every value of its parameter, with T.attended_pairs of each. Nothing is
 * recomputed here; the closed forms of lesson 05 are shown beside the counts, as a check.
 */
(function () {
  "use strict";
  var SRC = document.currentScript ? document.currentScript.src : "";
  (window.TFS_VIEWS_PENDING = window.TFS_VIEWS_PENDING || []).push({name: "masks", src: SRC, draw: draw,
    title: "Masks: who may attend to whom, and what it costs"});
  if (window.TFS_VIEWS) window.TFS_VIEWS.flush();

  var CUR = "#d35400";

  function bit(row, j) { return (parseInt(row.charAt(j >> 2), 16) >> (3 - (j & 3))) & 1; }

  // lesson 05's hand counts, p the parameter: a check on T.attended_pairs, shown beside it
  var FORMULAS = {
    causal: function (n) { return [n * (n + 1) / 2, "n(n+1)/2"]; },
    bidirectional: function (n) { return [n * n, "n²"]; },
    padding: function (n, p) { return [n * p, "n·len (the pad queries' rows are still computed)"]; },
    causal_padding: function (n, p) { return [p * (p + 1) / 2 + (n - p) * p, "len(len+1)/2 + (n−len)·len"]; },
    window: function (n, w) { return [n * w - w * (w - 1) / 2, "n·w − w(w−1)/2"]; },
    strided: function (n, l) {
      var q = Math.floor(n / l), s = n % l;
      return [l * (l + 1) / 2 + (n - l) * l + l * q * (q - 1) / 2 + s * q, "ℓ(ℓ+1)/2 + (n−ℓ)ℓ + ℓ·q(q−1)/2 + s·q, n = qℓ + s"];
    },
    global: function (n, g) { return [n * n - (n - g) * (n - g), "n² − (n − g)²"]; }
  };

  function draw(root, d, V) {
    var h = V.h, s = V.s;
    var st = {k: 0, n: String(parseInt(root.getAttribute("data-n"), 10) || d.n), p: 0, focus: null};
    d.masks.forEach(function (m, k) { if (m.key === root.getAttribute("data-mask")) st.k = k; });
    if (!d.masks[st.k].sizes[st.n]) st.n = String(d.n);

    V.howto(root, "Pick a mask and its size (Tab to a menu, arrow keys to change it), then move its slider. " +
      "Hover a cell, or Tab into the grid and use the arrows, to read one query's row.");
    var controls = h("div", {"class": "tfs-controls"}, root);
    V.select(controls, {label: "mask", role: "mask", value: st.k,
      options: d.masks.map(function (m, k) { return [k, m.label]; }),
      onChange: function (v) { st.k = Number(v); st.p = M().sizes[st.n].default; build(); }});
    V.select(controls, {label: "n", role: "n", value: st.n, options: d.ns.map(function (n) { return [n, String(n)]; }),
      onChange: function (v) { var old = Number(st.n); st.n = v; rescale(old); build(); }});
    var paramBox = h("span", {"class": "tfs-control-group"}, controls);
    var panels = h("div", {"class": "tfs-panels"}, root);
    var gridBox = h("div", {"class": "tfs-panel"}, panels);
    var costBox = h("div", {"class": "tfs-panel", style: {maxWidth: "420px"}}, panels);
    var info = h("p", {"class": "tfs-info", "data-role": "mask-info"}, root);
    var slider = null, cells = [];

    function M() { return d.masks[st.k]; }
    function S() { return M().sizes[st.n]; }
    function rescale(old) {  // keep the parameter's share of n when n changes
      if (M().param === null) return;
      var v = S().values.length;
      st.p = Math.max(0, Math.min(v - 1, Math.round((st.p + 1) * Number(st.n) / old) - 1));
    }

    function build() {
      var m = M(), z = S();
      st.p = Math.max(0, Math.min(z.values.length - 1, st.p));
      V.clear(paramBox);
      slider = null;
      if (m.param !== null) {
        slider = V.slider(paramBox, {label: m.param, min: 0, max: z.values.length - 1, value: st.p, role: "param",
          format: function (v) { return String(z.values[v]); }, onInput: function (v) { st.p = v; st.focus = null; render(); }});
      }
      st.focus = null;
      render();
    }

    function render() {
      var m = M(), z = S(), n = Number(st.n), rows = z.rows[st.p], pairs = z.pairs[st.p], p = z.values[st.p];
      root.setAttribute("data-current", m.key + "/" + n + "/" + (p === null ? "" : p));
      drawGrid(rows, n);
      drawCost(m, n, p, pairs, rows);
      drawInfo(rows, n);
    }

    function drawGrid(rows, n) {
      V.clear(gridBox);
      var c = n <= 8 ? 28 : n <= 16 ? 18 : 10, left = 30, top = 24, right = 42;  // right: room for "count"
      var width = left + n * c + right, height = top + n * c + 6;
      h("div", {"class": "tfs-panel-title", text: "query i ↓ may attend to key j →"}, gridBox);
      var svg = s("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, "class": "tfs-svg",
                          "data-role": "mask-grid"}, gridBox);
      var every = n <= 8 ? 1 : n <= 16 ? 3 : 5;
      for (var t = 0; t < n; t += every) {
        s("text", {x: left + t * c + c / 2, y: top - 6, "text-anchor": "middle", "class": "tfs-axis", text: String(t)}, svg);
        s("text", {x: left - 4, y: top + t * c + c / 2 + 4, "text-anchor": "end", "class": "tfs-axis", text: String(t)}, svg);
      }
      s("text", {x: left + n * c + 6, y: top - 6, "class": "tfs-axis", text: "count"}, svg);
      cells = [];
      for (var i = 0; i < n; i++) {
        var count = 0;
        for (var j = 0; j < n; j++) {
          var on = bit(rows[i], j);
          count += on;
          var cell = s("rect", {x: left + j * c, y: top + i * c, width: c - 1, height: c - 1,
                                fill: on ? V.COLORS.on : V.COLORS.off, "class": "tfs-cell",
                                "data-role": "mask-cell", "data-i": i, "data-j": j, "data-on": on}, svg);
          (function (i, j) {
            cell.addEventListener("mouseenter", function () { st.focus = [i, j]; drawInfo(rows, n); frame(); });
            cell.addEventListener("click", function () { st.focus = [i, j]; drawInfo(rows, n); frame(); });
          })(i, j);
          cells.push(cell);
        }
        s("text", {x: left + n * c + 6, y: top + i * c + c / 2 + 3, "data-role": "row-count",  // rows of 10 px at n = 32
                   "class": n > 16 ? "tfs-axis tfs-axis-small" : "tfs-axis", text: String(count)}, svg);
      }
      var rowFrame = s("rect", {fill: "none", stroke: CUR, "stroke-width": 2, "pointer-events": "none", display: "none"}, svg);
      function frame() {
        if (!st.focus) { rowFrame.setAttribute("display", "none"); return; }
        rowFrame.setAttribute("display", "inline");
        rowFrame.setAttribute("x", left - 1); rowFrame.setAttribute("y", top + st.focus[0] * c - 1);
        rowFrame.setAttribute("width", n * c + 1); rowFrame.setAttribute("height", c + 1);
      }
      V.keys(cells, {cols: n, label: function (k) {
        var i = Math.floor(k / n), j = k % n;
        return "query " + i + ", key " + j + ": " + (bit(rows[i], j) ? "attends" : "masked");
      }, escape: function () { st.focus = null; drawInfo(rows, n); frame(); }});  // Escape: no row read out
      frame();
      V.legend(gridBox, [[V.COLORS.on, "attended: a score is computed"], [V.COLORS.off, "masked"]]);
    }

    function drawCost(m, n, p, pairs, rows) {
      V.clear(costBox);
      h("div", {"class": "tfs-panel-title", text: "Cost: the pairs attention computes"}, costBox);
      var line = h("p", {}, costBox);
      line.appendChild(document.createTextNode("T.attended_pairs(mask) = "));
      h("span", {"class": "tfs-count", "data-role": "pairs", "data-pairs": pairs, text: V.fmtInt(pairs)}, line);
      line.appendChild(document.createTextNode(" of n² = " + V.fmtInt(n * n) + " ("));
      h("span", {"data-role": "share", text: (100 * pairs / (n * n)).toFixed(1) + " %"}, line);
      line.appendChild(document.createTextNode(")"));
      var meter = h("div", {"class": "tfs-meter", title: pairs + " of " + n * n}, costBox);
      h("span", {style: {width: (100 * pairs / (n * n)) + "%"}}, meter);
      var f = FORMULAS[m.key] && FORMULAS[m.key](n, p);
      if (f) {
        var fp = h("p", {"class": "tfs-small"}, costBox);
        h("span", {"class": "tfs-formula", text: f[1]}, fp);
        fp.appendChild(document.createTextNode(" = " + V.fmtInt(f[0]) + " "));
        h("span", {"class": f[0] === pairs ? "tfs-ok" : "tfs-bad", "data-role": "formula-check",
                   text: f[0] === pairs ? "= the count ✓" : "≠ the count"}, fp);
      }
      var per = [];
      for (var i = 0; i < n; i++) { var c = 0; for (var j = 0; j < n; j++) c += bit(rows[i], j); per.push(c); }
      h("p", {"class": "tfs-small tfs-muted", text: "Keys per query row: from " + Math.min.apply(null, per) + " to " +
        Math.max.apply(null, per) + " (the numbers right of the grid). Each attended pair is one score " +
        "q_i·k_j to compute and, without FlashAttention, one weight to store."}, costBox);
      h("p", {"class": "tfs-small tfs-muted", text: NOTES[m.key] || ""}, costBox);
    }

    function drawInfo(rows, n) {
      V.clear(info);
      if (!st.focus) {
        info.removeAttribute("data-query");
        info.textContent = "Hover a cell (or Tab into the grid) to read its query's row.";
        return;
      }
      var i = st.focus[0], j = st.focus[1], seen = [];
      for (var k = 0; k < n; k++) if (bit(rows[i], k)) seen.push(k);
      info.setAttribute("data-query", i);
      h("b", {text: "query " + i + ", key " + j + ": " + (bit(rows[i], j) ? "attended" : "masked") + ". "}, info);
      info.appendChild(document.createTextNode("Query " + i + " reads " + seen.length + " key" +
        (seen.length === 1 ? "" : "s") + ": " + ranges(seen) + "."));
    }

    st.p = M().sizes[st.n].default;
    build();
  }

  var NOTES = {
    causal: "A decoder: query i sees keys j ≤ i, the lower triangle. Half of n², still quadratic.",
    bidirectional: "An encoder: every query sees every key.",
    padding: "A batch padded to n: the pad keys are hidden from every query; the pad queries' rows are " +
             "still computed and thrown away afterwards.",
    causal_padding: "A decoder in a padded batch: causal & padding, both must allow a pair.",
    window: "Each query sees its w most recent keys, itself included: about n·w pairs, linear in n.",
    strided: "The last ℓ keys, plus every key at a distance that is a multiple of ℓ: about n√n with ℓ = √n.",
    global: "The first g tokens see every key and are seen by every query (Longformer's [CLS]); here " +
            "without a window beside them."
  };

  function ranges(list) {  // [0, 1, 2, 5, 7, 8] -> "0–2, 5, 7–8"
    var out = [], a = null, b = null;
    list.forEach(function (v) {
      if (a === null) { a = b = v; return; }
      if (v === b + 1) { b = v; return; }
      out.push(a === b ? String(a) : a + "–" + b); a = b = v;
    });
    if (a !== null) out.push(a === b ? String(a) : a + "–" + b);
    return out.length ? out.join(", ") : "none";
  }
})();
