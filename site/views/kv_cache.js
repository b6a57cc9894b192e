/* KV cache step-through: SmolLM2-135M generating greedily, one decode step at a time.
 *
 * Placeholder: <div class="tfs-view" data-view="kv_cache" data-step="0"></div>
 * Data: data/kv_cache.js (site/export_views.py): per step the cache length, its bytes by the
 * package's formula (Llama.kv_cache_bytes) and measured (.nbytes of the written slices and of the
 * whole allocation), and the new query's attention row in a few layers. Nothing is recomputed here.
 */
(function () {
  "use strict";
  var SRC = document.currentScript ? document.currentScript.src : "";
  (window.TFS_VIEWS_PENDING = window.TFS_VIEWS_PENDING || []).push({name: "kv_cache", src: SRC, draw: draw,
    title: "The KV cache, step by step through a real generation"});
  if (window.TFS_VIEWS) window.TFS_VIEWS.flush();

  var GEN = "#d35400", PREFILL = "#1f4e79", DECODED = "#4292c6";

  function draw(root, d, V) {
    var h = V.h, s = V.s, S = d.steps.length - 1;
    var st = {step: Math.min(S, parseInt(root.getAttribute("data-step"), 10) || 0), layer: 2, head: 1,
              kept: null};  // the weight cell a click (or Enter) keeps read out, or null
    st.layer = Math.min(d.layers.length - 1, Math.max(0, d.layers.indexOf(12)));

    h("p", {"class": "tfs-sentence", text: d.model + " continues “" + d.prompt + "” greedily. " +
      "Step 0 is the prefill: the " + d.n_prompt + " prompt tokens go through at once and fill the cache. " +
      "Each later step feeds one new token: one query row, one key and one value per layer appended."}, root);
    var controls = h("div", {"class": "tfs-controls"}, root);
    V.select(controls, {label: "layer", role: "layer", value: st.layer,
      options: d.layers.map(function (l, k) { return [k, String(l)]; }),
      onChange: function (v) { st.layer = Number(v); render(); }});
    V.slider(controls, {label: "head", min: 0, max: d.h - 1, value: st.head, role: "head",
      format: function (v) { return v + " (0–" + (d.h - 1) + ")"; }, onInput: function (v) { st.head = v; render(); }});
    var stepper = V.stepper(root, {label: "step", max: S, value: st.step, role: "step",
      format: function (v) { return v === 0 ? "0 (prefill)" : v + " / " + S; },
      onInput: function (v) { st.step = v; render(); }});
    var caption = h("p", {"class": "tfs-info", "data-role": "step-info"}, root);
    var strip = h("div", {"class": "tfs-section"}, root);
    V.legend(root, [[PREFILL, "written at prefill"], [DECODED, "appended by a decode step"],
                    [GEN, "written by this step"], [V.COLORS.off, "allocated, still empty"]]);
    var panels = h("div", {"class": "tfs-panels tfs-section"}, root);
    var memory = h("div", {"class": "tfs-panel"}, panels);
    var chart = h("div", {"class": "tfs-panel", style: {maxWidth: "400px"}}, panels);
    var bytes = h("div", {"class": "tfs-section"}, root);

    function render() {
      stepper.set(st.step);
      var step = d.steps[st.step], n = step.length, q = n - 1, tokens = d.tokens;
      root.setAttribute("data-current-step", st.step);
      V.clear(caption);
      caption.appendChild(document.createTextNode(st.step === 0
        ? "Prefill: " + n + " queries at once (shown: the last one, whose logits give the first new token). "
        : "Decode step " + st.step + ": the new token “" + tokens[q] + "” at position " + q +
          " is one query over all " + n + " keys in the cache. "));
      h("b", {"data-role": "cache-length", "data-length": n, text: "cache.length = " + n}, caption);
      caption.appendChild(document.createTextNode(st.step < S ? "; it produces “" + tokens[q + 1] + "”."
                                                               : "; it produces “" + d.next + "”."));
      drawStrip(step, q);
      drawMemory(n, q);
      drawBytes(step);
    }

    // the tokens in cache positions, with the query's weights over them above
    function drawStrip(step, q) {
      V.clear(strip);
      var row = step.rows[st.layer][st.head], N = d.n_max, left = 86;
      var avail = Math.max(500, Math.min(root.clientWidth || 860, 900) - 40);
      var c = Math.max(24, Math.min(48, Math.floor((avail - left) / N))), width = left + N * c + 30, height = 150;
      h("div", {"class": "tfs-panel-title", text: "The query of “" + d.tokens[q] + "” over the cache: layer " +
        d.layers[st.layer] + ", head " + st.head + " (reads key/value head " +
        Math.floor(st.head / (d.h / d.h_kv)) + ")"}, strip);
      var svg = s("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, "class": "tfs-svg",
                          "data-role": "query-row"}, strip);
      s("text", {x: left - 8, y: 30, "text-anchor": "end", "class": "tfs-label", text: "weight"}, svg);
      s("text", {x: left - 8, y: 66, "text-anchor": "end", "class": "tfs-label", text: "position"}, svg);
      var best = 0;
      row.forEach(function (w, j) { if (w > row[best]) best = j; });
      for (var j = 0; j < N; j++) {
        var x = left + j * c, filled = j <= q;
        if (filled) {
          var w = row[j];
          var cell = s("rect", {x: x + 1, y: 12, width: c - 2, height: 28, fill: V.blues(w),
                                stroke: j === best ? GEN : "#d0d7de", "stroke-width": j === best ? 2 : 1,
                                "data-role": "weight", "data-j": j, "data-w": w, "class": "tfs-hover"}, svg);
          s("title", {text: d.tokens[q] + " → " + d.tokens[j] + ": " + w.toFixed(4)}, cell);
          s("text", {x: x + c / 2, y: 30, "text-anchor": "middle", "class": "tfs-cell-label",
                     fill: w > 0.55 ? "#fff" : "#222", text: w >= 0.005 ? V.short(w) : ""}, svg);
        }
        var kind = !filled ? "empty" : isNew(j, q) ? "new" : j < d.n_prompt ? "prefill" : "decoded";
        var fill = {empty: "#fff", "new": GEN, prefill: PREFILL, decoded: DECODED}[kind];
        s("rect", {x: x + 1, y: 48, width: c - 2, height: 28, rx: 3, fill: fill,
                   "fill-opacity": kind === "empty" ? 1 : 0.85, stroke: kind === "empty" ? "#bbb" : fill,
                   "stroke-dasharray": kind === "empty" ? "3 3" : null}, svg);
        s("text", {x: x + c / 2, y: 66, "text-anchor": "middle", "class": "tfs-cell-label",
                   fill: kind === "empty" ? "#999" : "#fff", text: String(j)}, svg);
        if (filled) {
          var cx = x + c / 2, cy = 90;
          s("text", {x: cx, y: cy, transform: "rotate(-55 " + cx + " " + cy + ")", "text-anchor": "end",
                     "class": "tfs-tok-label", fill: j === q ? GEN : null, text: clip(d.tokens[j], 11)}, svg);
        }
      }
      // a cell read out below: hovered or focused, or kept by a click or Enter (Space) until clicked again
      var readout = h("p", {"class": "tfs-small", "data-role": "cell-info"}, strip);
      function show(j) {  // j: the position read out; null: the strongest key, and how to read the others
        var k = j === null ? best : j, was = k < d.n_prompt ? "written at prefill"
          : isNew(k, q) ? "written by this step" : "appended at decode step " + (k - d.n_prompt + 1);
        readout.setAttribute("data-j", j === null ? "" : j);
        readout.setAttribute("data-w", j === null ? "" : row[j]);
        readout.setAttribute("data-kept", j !== null && st.kept === j ? "true" : "false");
        readout.textContent = (j === null ? "Strongest key: " : "“" + d.tokens[q] + "” → ") + "position " + k +
          " “" + d.tokens[k] + "” (" + was + "), weight " + row[k].toFixed(4) + (j === null
            ? ". Hover a weight, or Tab to it and use the arrows; a click or Enter keeps it."
            : st.kept === j ? ". Kept: click it or press Enter again (or Escape) to let go." : ".");
      }
      var cells = Array.prototype.slice.call(svg.querySelectorAll('[data-role="weight"]'));  // positions 0 … q
      cells.forEach(function (cell, j) {
        cell.addEventListener("mouseenter", function () { if (st.kept === null) show(j); });
        cell.addEventListener("mouseleave", function () { if (st.kept === null) show(null); });
        cell.addEventListener("click", function () { st.kept = st.kept === j ? null : j; show(j); });
      });
      if (st.kept !== null && st.kept > q) st.kept = null;  // a step back: that position is not written yet
      show(st.kept);
      V.keys(cells, {  // keyboard: one Tab stop, arrows along it; focus reads out as hovering does, Enter as a click
        label: function (k) { return d.tokens[q] + " → " + d.tokens[k] + ": weight " + row[k].toFixed(4); },
        escape: function () { st.kept = null; }});  // Escape lets go of the kept weight: the strongest key again
    }

    function isNew(j, q) { return st.step === 0 ? j <= q : j === q; }  // written by this step

    // every layer's K and V slices, filled up to cache.length
    function drawMemory(n, q) {
      V.clear(memory);
      var N = d.n_max, cw = Math.max(6, Math.min(14, Math.floor(340 / N))), ch = 3, left = 24, gap = 12;
      var band = d.L * ch, width = left + N * cw + 6, height = 18 + 2 * band + gap + 18;
      h("div", {"class": "tfs-panel-title", text: "The cache in memory: K and V, " + d.L + " layers × " + N +
        " positions"}, memory);
      var svg = s("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, "class": "tfs-svg",
                          "data-role": "cache-memory"}, memory);
      ["K", "V"].forEach(function (name, b) {
        var y0 = 14 + b * (band + gap);
        s("text", {x: left - 8, y: y0 + band / 2 + 4, "text-anchor": "end", "class": "tfs-label", text: name}, svg);
        for (var j = 0; j < N; j++) {
          var fill = j > q ? V.COLORS.off : isNew(j, q) ? GEN : j < d.n_prompt ? PREFILL : DECODED;
          s("rect", {x: left + j * cw, y: y0, width: cw - 1, height: band, fill: fill}, svg);
        }
        for (var l = 1; l < d.L; l++) {  // thin white lines between the layers
          s("line", {x1: left, x2: left + N * cw, y1: y0 + l * ch, y2: y0 + l * ch, stroke: "#fff",
                     "stroke-opacity": 0.5, "stroke-width": 0.6}, svg);
        }
      });
      s("text", {x: left, y: height - 3, "class": "tfs-axis", text: "position 0 … " + (N - 1) + " →"}, svg);
      h("div", {"class": "tfs-small tfs-muted", text: "a band: " + d.L + " layers, each (b, h_kv, n_max, d_h) = (1, " +
        d.h_kv + ", " + N + ", " + d.d_h + ")"}, memory);
    }

    function drawBytes(step) {
      V.clear(bytes);
      var n = step.length, per = d.bytes_per_token;
      h("div", {"class": "tfs-panel-title", text: "Bytes: the formula against the arrays"}, bytes);
      var tbl = h("table", {"class": "tfs-table tfs-table-notes"}, bytes);  // a phone: each note under its row
      var tr = h("tr", {}, tbl);
      ["", "bytes", ""].forEach(function (t) { h("th", {text: t}, tr); });
      function line(label, value, role, note) {
        var r = h("tr", {}, tbl);
        h("td", {text: label}, r);
        h("td", {"data-role": role, "data-bytes": value, text: V.fmtInt(value)}, r);
        h("td", {"class": "tfs-muted", text: note}, r);
      }
      line("formula 2·L·h_kv·d_h·" + d.itemsize + "·n", step.formula_bytes, "bytes-formula",
           "2·" + d.L + "·" + d.h_kv + "·" + d.d_h + "·" + d.itemsize + "·" + n + " (" + V.fmtBytes(step.formula_bytes) + ")");
      line("measured: .nbytes of k[l][:, :, :n], v[l][:, :, :n]", step.measured_bytes, "bytes-measured",
           step.measured_bytes === step.formula_bytes ? "= formula ✓" : "≠ formula");
      line("allocated once (n_max = " + d.n_max + "): .nbytes", step.allocated_bytes, "bytes-allocated",
           V.fmtBytes(step.allocated_bytes));
      h("p", {"class": "tfs-small tfs-muted", text: V.fmtInt(per) + " bytes per token (" + d.dtype + "): only the " +
        d.h_kv + " key/value heads are kept, not the " + d.h + " query heads (GQA)."}, bytes);
      V.clear(chart);
      h("div", {"class": "tfs-panel-title", text: "Bytes against n: formula (line), measured (dots)"}, chart);
      drawChart(chart, step);
    }

    function drawChart(parent, step) {  // measured bytes per step (dots) on the formula's line
      var W = 380, H = 190, l = 62, r = 12, t = 10, b = 34, N = d.n_max;
      var maxB = d.bytes_per_token * N;
      var svg = s("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "class": "tfs-svg",
                          "data-role": "bytes-chart"}, parent);
      function X(n) { return l + (n / N) * (W - l - r); }
      function Y(v) { return H - b - (v / maxB) * (H - t - b); }
      s("line", {x1: l, x2: W - r, y1: H - b, y2: H - b, stroke: "#999"}, svg);
      s("line", {x1: l, x2: l, y1: t, y2: H - b, stroke: "#999"}, svg);
      [0, 0.5, 1].forEach(function (f) {
        s("text", {x: l - 6, y: Y(f * maxB) + 4, "text-anchor": "end", "class": "tfs-axis",
                   text: (f * maxB / 1024).toFixed(0) + " KiB"}, svg);
      });
      [0, Math.round(N / 2), N].forEach(function (n) {
        s("text", {x: X(n), y: H - b + 16, "text-anchor": "middle", "class": "tfs-axis", text: String(n)}, svg);
      });
      s("text", {x: (l + W - r) / 2, y: H - 3, "text-anchor": "middle", "class": "tfs-axis",
                 text: "tokens in the cache n"}, svg);
      s("line", {x1: X(0), y1: Y(0), x2: X(N), y2: Y(maxB), stroke: V.COLORS.lines[0], "stroke-width": 2}, svg);
      s("line", {x1: X(0), y1: Y(step.allocated_bytes), x2: X(N), y2: Y(step.allocated_bytes), stroke: "#999",
                 "stroke-dasharray": "5 4"}, svg);
      d.steps.forEach(function (p, k) {
        if (k > st.step) return;
        s("circle", {cx: X(p.length), cy: Y(p.measured_bytes), r: k === st.step ? 5.5 : 3.5,
                     fill: k === st.step ? GEN : V.COLORS.lines[1], stroke: "#fff"}, svg);
      });
      V.legend(parent, [[V.COLORS.lines[0], "formula, 2·L·h_kv·d_h·4·n"], [V.COLORS.lines[1], "measured .nbytes"],
                        [GEN, "this step"],
                        ["none", "allocated once", {height: "0", border: "0", borderTop: "2px dashed #999"}]]);
    }

    render();
  }

  function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }
})();
