/* The soft lookup: one query dragged over a few keys, and what attention makes of it.
 *
 * Placeholder: <div class="tfs-view" data-view="soft_lookup"></div>
 * Data: data/soft_lookup.js (site/export_views.py): lesson 03's q, keys and values, and for that q
 * the scores (T.attention_scores), weights (T.softmax) and output (T.scaled_dot_product_attention)
 * the package computed. As q moves, the page redoes the formula it draws:
 *     s_j = q·k_j / √d_k,   p = softmax(s),   o = Σ_j p_j v_j.
 */
(function () {
  "use strict";
  var SRC = document.currentScript ? document.currentScript.src : "";
  (window.TFS_VIEWS_PENDING = window.TFS_VIEWS_PENDING || []).push({name: "soft_lookup", src: SRC, draw: draw,
    title: "A soft dictionary lookup: one query over three keys"});
  if (window.TFS_VIEWS) window.TFS_VIEWS.flush();

  var QUERY = "#d35400";

  // the formula, as drawn: the scores, the weights (the row max subtracted first), the output
  function lookup(q, K, V, dk) {  // [d_k], [n][d_k], [n][d_v] -> {s, p, o}
    var s = K.map(function (k) { return (q[0] * k[0] + q[1] * k[1]) / Math.sqrt(dk); });
    var m = Math.max.apply(null, s);
    var e = s.map(function (x) { return Math.exp(x - m); });
    var l = e.reduce(function (a, b) { return a + b; }, 0);
    var p = e.map(function (x) { return x / l; });
    var o = V[0].map(function (_, c) { return V.reduce(function (acc, v, j) { return acc + p[j] * v[c]; }, 0); });
    return {s: s, p: p, o: o};
  }

  function draw(root, d, V) {
    var h = V.h, s = V.s, K = d.keys, Vals = d.values, n = K.length, E = d.extent;
    var st = {q: d.query.slice()};
    var colours = K.map(function (_, j) { return V.COLORS.lines[j]; });

    V.howto(root, "Drag the orange query q (or Tab to it and move it with the arrow keys; Shift moves " +
      "further, Home puts it back). The scores, the weights and the output follow.");
    h("p", {"class": "tfs-small", text:
      "Three keys and their values (d_k = " + d.d_k + "): s_j = q·k_j / √" + d.d_k + ", p = softmax(s), " +
      "o = Σ_j p_j v_j. A key that matches q much better than the others takes almost all the weight " +
      "(a dict lookup); keys that match equally share it (an average)."}, root);
    var panels = h("div", {"class": "tfs-panels"}, root);
    var left = h("div", {"class": "tfs-panel"}, panels);
    var right = h("div", {"class": "tfs-panel"}, panels);
    var tableBox = h("div", {"class": "tfs-section"}, root);
    var info = h("p", {"class": "tfs-info", "data-role": "lookup-info"}, root);
    var reset = h("button", {type: "button", "class": "tfs-button", text: "put q back at (" + d.query.join(", ") + ")"},
                  root);
    reset.addEventListener("click", function () { st.q = d.query.slice(); render(); });

    // --- the key plane: keys as arrows, q as a draggable arrow ------------------------------------
    var size = 270, pad = 22, unit = (size - 2 * pad) / (2 * E);
    function X(v) { return pad + (v + E) * unit; }
    function Y(v) { return size - pad - (v + E) * unit; }
    h("div", {"class": "tfs-panel-title", text: "Query and keys (line width = weight)"}, left);
    var plane = s("svg", {width: size, height: size, viewBox: "0 0 " + size + " " + size, "class": "tfs-svg tfs-plane",
                          "data-role": "key-plane"}, left);
    arrowHead(plane);
    grid(plane, X, Y, E, size, pad);
    var keyLines = K.map(function (k, j) {
      var line = s("line", {x1: X(0), y1: Y(0), x2: X(k[0]), y2: Y(k[1]), stroke: colours[j],
                            "marker-end": "url(#tfs-head-" + j + ")"}, plane);
      s("text", {x: X(k[0]) + (k[0] > 0 ? 6 : -6), y: Y(k[1]) - 6, "text-anchor": k[0] > 0 ? "start" : "end",
                 "class": "tfs-label", fill: colours[j], text: "k" + sub(j) + " " + d.names[j]}, plane);
      return line;
    });
    var qLine = s("line", {x1: X(0), y1: Y(0), stroke: QUERY, "stroke-width": 3, "marker-end": "url(#tfs-head-q)"}, plane);
    var qLabel = s("text", {"class": "tfs-label", fill: QUERY, "font-weight": 700, text: "q"}, plane);
    var handle = s("circle", {r: 9, fill: QUERY, "fill-opacity": 0.25, stroke: QUERY, "stroke-width": 2,
                              "class": "tfs-drag", tabindex: 0, role: "slider", "data-role": "query-handle",
                              "aria-label": "the query q: arrow keys move it"}, plane);

    // --- the value plane: values as points, o as their weighted mean -------------------------------
    var vmin = -1, vmax = 5, vunit = (size - 2 * pad) / (vmax - vmin);
    function VX(v) { return pad + (v - vmin) * vunit; }
    function VY(v) { return size - pad - (v - vmin) * vunit; }
    h("div", {"class": "tfs-panel-title", text: "Values, and the output o = Σ p_j v_j"}, right);
    var vplane = s("svg", {width: size, height: size, viewBox: "0 0 " + size + " " + size, "class": "tfs-svg",
                           "data-role": "value-plane"}, right);
    grid(vplane, VX, VY, null, size, pad, [vmin, vmax]);
    s("polygon", {points: Vals.map(function (v) { return VX(v[0]) + "," + VY(v[1]); }).join(" "), fill: V.COLORS.partial,
                  "fill-opacity": 0.15, stroke: V.COLORS.partial, "stroke-dasharray": "3 3"}, vplane);
    var pulls = Vals.map(function (v, j) {
      return s("line", {x1: VX(v[0]), y1: VY(v[1]), stroke: colours[j], "stroke-dasharray": "4 3"}, vplane);
    });
    var dots = Vals.map(function (v, j) {
      s("text", {x: VX(v[0]) + 10, y: VY(v[1]) + 4, "class": "tfs-label", fill: colours[j], text: "v" + sub(j)}, vplane);
      return s("circle", {cx: VX(v[0]), cy: VY(v[1]), fill: colours[j], stroke: "#fff"}, vplane);
    });
    var oDot = s("circle", {r: 6, fill: QUERY, stroke: "#fff", "stroke-width": 1.5}, vplane);
    var oLabel = s("text", {"class": "tfs-label", fill: QUERY, "font-weight": 700, text: "o"}, vplane);
    h("div", {"class": "tfs-small tfs-muted", text: "o always lies inside the dashed triangle: a weighted mean of the values."},
      right);

    // --- dragging and keys --------------------------------------------------------------------------
    function toPlane(evt) {
      var pt = plane.createSVGPoint();
      pt.x = evt.clientX; pt.y = evt.clientY;
      var p = pt.matrixTransform(plane.getScreenCTM().inverse());
      return [clamp((p.x - pad) / unit - E), clamp((size - pad - p.y) / unit - E)];
    }
    function clamp(v) { return Math.max(-E, Math.min(E, Math.round(v * 20) / 20)); }
    var dragging = false;
    plane.addEventListener("pointerdown", function (e) {
      dragging = true;
      if (plane.setPointerCapture) plane.setPointerCapture(e.pointerId);
      st.q = toPlane(e); render(); handle.focus({preventScroll: true});
      e.preventDefault();
    });
    plane.addEventListener("pointermove", function (e) { if (dragging) { st.q = toPlane(e); render(); } });
    ["pointerup", "pointercancel"].forEach(function (t) { plane.addEventListener(t, function () { dragging = false; }); });
    handle.addEventListener("keydown", function (e) {
      var by = e.shiftKey ? 1 : d.step, dx = {ArrowLeft: -by, ArrowRight: by}[e.key] || 0,
          dy = {ArrowDown: -by, ArrowUp: by}[e.key] || 0;
      if (e.key === "Home") st.q = d.query.slice();
      else if (!dx && !dy) return;
      e.preventDefault();
      st.q = [clamp(st.q[0] + dx), clamp(st.q[1] + dy)];
      render();
    });

    function render() {
      var q = st.q, r = lookup(q, K, Vals, d.d_k);
      root.setAttribute("data-q", q.join(","));
      qLine.setAttribute("x2", X(q[0])); qLine.setAttribute("y2", Y(q[1]));
      handle.setAttribute("cx", X(q[0])); handle.setAttribute("cy", Y(q[1]));
      handle.setAttribute("aria-valuetext", "q = (" + q[0].toFixed(2) + ", " + q[1].toFixed(2) + ")");
      qLabel.setAttribute("x", X(q[0]) + 11); qLabel.setAttribute("y", Y(q[1]) + 16);
      keyLines.forEach(function (ln, j) { ln.setAttribute("stroke-width", 1 + 6 * r.p[j]); });
      oDot.setAttribute("cx", VX(r.o[0])); oDot.setAttribute("cy", VY(r.o[1]));
      oLabel.setAttribute("x", VX(r.o[0]) + 9); oLabel.setAttribute("y", VY(r.o[1]) - 7);
      dots.forEach(function (dot, j) { dot.setAttribute("r", 3 + 7 * Math.sqrt(r.p[j])); });
      pulls.forEach(function (ln, j) {
        ln.setAttribute("x2", VX(r.o[0])); ln.setAttribute("y2", VY(r.o[1]));
        ln.setAttribute("stroke-opacity", 0.15 + 0.85 * r.p[j]); ln.setAttribute("stroke-width", 0.5 + 3 * r.p[j]);
      });
      drawTable(q, r);
      V.clear(info);
      var best = r.p.indexOf(Math.max.apply(null, r.p));
      h("b", {text: "q = (" + q[0].toFixed(2) + ", " + q[1].toFixed(2) + ") → o = " + vec(r.o, 3) + ": "}, info);
      info.appendChild(document.createTextNode(r.p[best] > 0.9
        ? "k" + sub(best) + " “" + d.names[best] + "” takes " + (100 * r.p[best]).toFixed(0) + " % of the weight: " +
          "almost a hard lookup, o ≈ v" + sub(best) + "."
        : Math.max.apply(null, r.p) - Math.min.apply(null, r.p) < 0.1
          ? "the keys match about equally: o is close to the mean of the values."
          : "the weight is shared; the best match, k" + sub(best) + " “" + d.names[best] + "”, takes " +
            (100 * r.p[best]).toFixed(0) + " %."));
      if (q[0] === d.query[0] && q[1] === d.query[1]) {
        info.appendChild(document.createTextNode(" This is lesson 03's q: the weights are those " +
          "T.softmax gave at build, " + d.weights.map(function (w) { return w.toFixed(3); }).join(", ") + "."));
      }
    }

    function drawTable(q, r) {
      V.clear(tableBox);
      var tbl = h("table", {"class": "tfs-table", "data-role": "lookup-table"}, tableBox);
      // a phone keeps key, s_j and p_j in sight: it drops the vectors (drawn above; o is in the line below) and
      // shortens the headers' formulas
      var head = h("tr", {}, tbl), WIDE = "tfs-phone-hide";
      [["key"], ["k_j", WIDE], ["s_j = q·k_j/√" + d.d_k, "s_j"], ["p_j = softmax(s)_j", "p_j"], ["v_j", WIDE],
       ["p_j v_j", WIDE]].forEach(function (t) {
        var th = h("th", {"class": t[1] === WIDE ? WIDE : null}, head);
        if (t[1] && t[1] !== WIDE) {
          h("span", {"class": WIDE, text: t[0]}, th);
          h("span", {"class": "tfs-phone-only", text: t[1]}, th);
        } else th.textContent = t[0];
      });
      for (var j = 0; j < n; j++) {
        var tr = h("tr", {"data-role": "lookup-row", "data-j": j, "data-s": r.s[j], "data-p": r.p[j]}, tbl);
        h("td", {text: d.names[j], style: {color: colours[j], fontWeight: 600}}, tr);
        h("td", {"class": WIDE, text: vec(K[j], 0)}, tr);
        h("td", {text: r.s[j].toFixed(3)}, tr);
        var cell = h("td", {style: {whiteSpace: "nowrap"}}, tr);
        h("span", {"class": "tfs-pbar", style: {width: Math.round(60 * r.p[j]) + "px", marginRight: "6px"}}, cell);
        h("span", {"data-role": "weight", text: r.p[j].toFixed(3)}, cell);
        h("td", {"class": WIDE, text: vec(Vals[j], 0)}, tr);
        h("td", {"class": WIDE, text: vec(Vals[j].map(function (v) { return r.p[j] * v; }), 3)}, tr);
      }
      var last = h("tr", {}, tbl);
      h("td", {text: "sum", style: {fontWeight: 600}}, last);
      h("td", {"class": WIDE}, last); h("td", {}, last);
      h("td", {text: r.p.reduce(function (a, b) { return a + b; }, 0).toFixed(3)}, last);
      h("td", {"class": WIDE}, last);
      h("td", {"class": WIDE, "data-role": "lookup-output", "data-o": r.o.join(","), text: "o = " + vec(r.o, 3),
               style: {color: QUERY, fontWeight: 700}}, last);
    }

    render();
  }

  function grid(svg, X, Y, E, size, pad, range) {  // axes through 0 and a light grid, one line per unit
    var lo = range ? range[0] : -E, hi = range ? range[1] : E;
    for (var v = Math.ceil(lo); v <= hi; v++) {
      var on = v === 0;
      s2(svg, "line", {x1: X(v), x2: X(v), y1: Y(lo), y2: Y(hi), stroke: on ? "#8a8a8a" : "#8a8a8a",
                       "stroke-opacity": on ? 0.9 : 0.22, "stroke-width": on ? 1 : 0.8});
      s2(svg, "line", {x1: X(lo), x2: X(hi), y1: Y(v), y2: Y(v), stroke: "#8a8a8a",
                       "stroke-opacity": on ? 0.9 : 0.22, "stroke-width": on ? 1 : 0.8});
      if (v !== 0 && v % (hi - lo > 6 ? 2 : 1) === 0) {
        s2(svg, "text", {x: X(v), y: Y(0) + 13 > size - 2 ? size - 2 : Y(0) + 13, "text-anchor": "middle",
                         "class": "tfs-axis", text: String(v)});
        s2(svg, "text", {x: X(0) - 4, y: Y(v) + 4, "text-anchor": "end", "class": "tfs-axis", text: String(v)});
      }
    }
  }

  function arrowHead(svg) {  // one marker per colour: SVG 1.1 markers do not take the line's colour
    var defs = s2(svg, "defs", {});
    var V = window.TFS_VIEWS.api;
    V.COLORS.lines.slice(0, 3).concat([QUERY]).forEach(function (c, j) {
      var m = s2(defs, "marker", {id: "tfs-head-" + (j < 3 ? j : "q"), viewBox: "0 0 10 10", refX: 8, refY: 5,
                                  markerWidth: 11, markerHeight: 11, markerUnits: "userSpaceOnUse", orient: "auto"});
      s2(m, "path", {d: "M 0 0 L 10 5 L 0 10 z", fill: c});
    });
  }

  function s2(parent, tag, attrs) { return window.TFS_VIEWS.api.s(tag, attrs, parent); }
  function vec(v, digits) { return "(" + v.map(function (x) { return Number(x).toFixed(digits); }).join(", ") + ")"; }
  function sub(k) { return String(k).split("").map(function (c) { return "₀₁₂₃₄₅₆₇₈₉"[Number(c)]; }).join(""); }
})();
