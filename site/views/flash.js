/* FlashAttention step-through: the tiles of S = Q Kᵀ/√d_h one at a time, with each query row's
 * running max m and sum l, the rescaling factor e^(m_old − m_new), and the slow-memory traffic.
 *
 * Placeholder: <div class="tfs-view" data-view="flash" data-run="0" data-step="0"></div>
 * Data: data/flash.js (site/export_views.py): T.flash_attention's own FlashTrace (m, l of the
 * watched head after every tile) and its IOCounter's loads and stores in the order they happened,
 * plus the exact IO formulas. Nothing is recomputed here.
 */
(function () {
  "use strict";
  var SRC = document.currentScript ? document.currentScript.src : "";
  (window.TFS_VIEWS_PENDING = window.TFS_VIEWS_PENDING || []).push({name: "flash", src: SRC, draw: draw,
    title: "FlashAttention, tile by tile"});
  if (window.TFS_VIEWS) window.TFS_VIEWS.flush();

  var CUR = "#d35400";

  function draw(root, d, V) {
    var h = V.h, s = V.s;
    var st = {run: Math.min(d.runs.length - 1, parseInt(root.getAttribute("data-run"), 10) || 0), step: 0};
    st.step = parseInt(root.getAttribute("data-step"), 10) || 0;
    // short names: the menu fits a phone's width, and the loop order is spelled out beside it
    var names = d.runs.map(function (r) { return "FlashAttention-" + r.version + (r.causal ? ", causal" : ", no mask"); });
    h("p", {"class": "tfs-sentence", text: "n = " + d.n + " queries and keys, d_h = " + d.d_h + ", tiles of B_r = " +
      d.Br + " query rows × B_c = " + d.Bc + " keys (" + d.Br + " does not divide " + d.n +
      ": the last blocks are shorter). One head; the numbers are the package's own trace."}, root);
    var controls = h("div", {"class": "tfs-controls"}, root);
    V.select(controls, {label: "loop", role: "run", value: st.run, options: names.map(function (t, k) { return [k, t]; }),
      onChange: function (v) { st.run = Number(v); st.step = 0; rebuildStepper(); render(); }});
    var order = h("span", {"class": "tfs-muted tfs-small", "data-role": "loop-order"}, controls);
    var stepBox = h("div", {}, root), stepper;
    var caption = h("p", {"class": "tfs-info", "data-role": "flash-info"}, root);
    var panels = h("div", {"class": "tfs-panels"}, root);
    var gridBox = h("div", {"class": "tfs-panel", style: {maxWidth: "380px"}}, panels);
    var rowsBox = h("div", {"class": "tfs-panel", style: {maxWidth: "430px"}}, panels);
    var ioBox = h("div", {"class": "tfs-section"}, root);

    function R() { return d.runs[st.run]; }
    function rebuildStepper() {
      V.clear(stepBox);
      var last = R().steps.length - 1;
      st.step = Math.min(st.step, last);
      stepper = V.stepper(stepBox, {label: "tile step", max: last, value: st.step, role: "step", interval: 800,
        format: function (v) { return v === last ? "done" : v + " / " + (last - 1); },
        onInput: function (v) { st.step = v; render(); }});
    }

    function render() {
      var r = R(), step = r.steps[st.step], done = st.step === r.steps.length - 1;
      stepper.set(st.step);
      root.setAttribute("data-current-step", st.step);
      order.textContent = r.version === 2 ? "query blocks Qᵢ outside, key blocks Kⱼ inside"
                                          : "key blocks Kⱼ outside, query blocks Qᵢ inside";
      V.clear(caption);
      if (done) {
        caption.appendChild(document.createTextNode((r.version === 2
          ? "After the last tile: the last query block's Oᵢ / lᵢ and Lᵢ = mᵢ + log lᵢ are written back. "
          : "After the last tile: nothing is left to write, FlashAttention-1 wrote Oᵢ, lᵢ, mᵢ back after every tile. ") +
          "All " + r.Tr + " × " + r.Tc + " tiles visited: " + countKinds(r) + "."));
      } else {
        h("b", {text: "Step " + st.step + ": tile (i = " + step.i + ", j = " + step.j + ") — "}, caption);
        caption.appendChild(document.createTextNode({
          full: "every query of Q" + sub(step.i) + " may see every key of K" + sub(step.j) + ": no mask needed.",
          diagonal: "the causal diagonal crosses it: scores of keys after their query are masked to −∞.",
          skipped: "every key of K" + sub(step.j) + " comes after every query of Q" + sub(step.i) +
                   ": never loaded, never computed."}[step.kind]));
      }
      drawGrid(r, done ? null : step);
      drawRows(r, done ? null : step);
      drawIO(r, step, done);
    }

    function countKinds(r) {
      var c = {full: 0, diagonal: 0, skipped: 0};
      r.steps.forEach(function (x) { if (x.kind) c[x.kind] += 1; });
      return c.full + " full, " + c.diagonal + " masked inside, " + c.skipped + " skipped";
    }

    // the n × n score matrix in tiles: done, current, skipped, not yet
    function drawGrid(r, step) {
      V.clear(gridBox);
      var n = d.n, c = 22, left = 50, top = 44, width = left + n * c + 8, height = top + n * c + 8;
      h("div", {"class": "tfs-panel-title", text: "S = Q Kᵀ/√d_h, tile by tile"}, gridBox);
      var svg = s("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, "class": "tfs-svg",
                          "data-role": "tile-grid"}, gridBox);
      var state = {};  // "i,j" -> "done" | "skipped"
      var titled = [], at = [];  // the scores computed so far, and each one's [i, j]
      for (var k = 0; k < st.step && k < r.steps.length; k++) {
        var x = r.steps[k];
        if (x.kind) state[x.i + "," + x.j] = x.kind === "skipped" ? "skipped" : "done";
      }
      for (var i = 0; i < n; i++) {
        for (var j = 0; j < n; j++) {
          var ti = Math.floor(i / d.Br), tj = Math.floor(j / d.Bc), key = ti + "," + tj;
          var current = step && step.i === ti && step.j === tj;
          var masked = r.causal && j > i, fill = "#ffffff", op = 1;
          var seen = current ? (step.kind === "skipped" ? "skipped" : "current") : state[key];
          if (seen === "skipped") fill = V.COLORS.off;
          else if (seen === "done" || seen === "current") {
            fill = masked ? "#b4b4b4" : V.rdbu(0.5 + d.S[i][j] / 5);
            op = seen === "current" ? 1 : 0.35;
          }
          var cell = s("rect", {x: left + j * c, y: top + i * c, width: c - 1, height: c - 1, fill: fill,
                                "fill-opacity": op}, svg);
          if (seen === "done" || seen === "current") {
            s("title", {text: masked ? "masked: key " + j + " after query " + i
                                     : "S[" + i + ", " + j + "] = " + d.S[i][j].toFixed(3)}, cell);
            titled.push(cell); at.push([i, j]);
          }
        }
      }
      var readout = h("p", {"class": "tfs-small", "data-role": "score-info"}, gridBox);
      // keyboard: one Tab stop, the arrows walk the scores computed so far (they fill the grid only in part:
      // Up and Down go by each score's row and column)
      V.keys(titled, {at: function (k) { return at[k]; }, label: function (k) {
        return titled[k].querySelector("title").textContent;
      }, show: readout, rest: "Hover a score computed so far, or Tab to the grid and use the arrows, to read it."});
      for (var b = 0; b <= r.Tr; b++) {  // tile borders
        var y = top + Math.min(n, b * d.Br) * c - 0.5;
        s("line", {x1: left - 1, x2: left + n * c, y1: y, y2: y, stroke: "#555", "stroke-width": 1.2}, svg);
      }
      for (var bb = 0; bb <= r.Tc; bb++) {
        var xx = left + Math.min(n, bb * d.Bc) * c - 0.5;
        s("line", {x1: xx, x2: xx, y1: top - 1, y2: top + n * c, stroke: "#555", "stroke-width": 1.2}, svg);
      }
      for (var ib = 0; ib < r.Tr; ib++) {  // block labels: Q_i on the left, K_j V_j on top
        var y0 = top + ib * d.Br * c, y1 = top + Math.min(n, (ib + 1) * d.Br) * c;
        var on = step && step.i === ib;
        s("text", {x: left - 8, y: (y0 + y1) / 2 + 4, "text-anchor": "end", "class": "tfs-label",
                   fill: on ? CUR : null, "font-weight": on ? 700 : null, text: "Q" + sub(ib)}, svg);
      }
      for (var jb = 0; jb < r.Tc; jb++) {
        var x0 = left + jb * d.Bc * c, x1 = left + Math.min(n, (jb + 1) * d.Bc) * c;
        var onj = step && step.j === jb;
        s("text", {x: (x0 + x1) / 2, y: top - 10, "text-anchor": "middle", "class": "tfs-label",
                   fill: onj ? CUR : null, "font-weight": onj ? 700 : null, text: "K" + sub(jb) + " V" + sub(jb)}, svg);
      }
      if (step) {
        var rx = left + step.cols[0] * c - 1.5, ry = top + step.rows[0] * c - 1.5;
        s("rect", {x: rx, y: ry, width: (step.cols[1] - step.cols[0]) * c + 2, height: (step.rows[1] - step.rows[0]) * c + 2,
                   fill: "none", stroke: CUR, "stroke-width": 3}, svg);
      }
      s("text", {x: 2, y: 14, "class": "tfs-axis", text: "query ↓ key →"}, svg);
      V.legend(gridBox, [[V.rdbu(0.85), "score (blue < 0 < red), current tile"],
                         [V.rdbu(0.85), "computed earlier", {opacity: 0.35}],
                         [V.COLORS.off, "skipped tile"], ["#b4b4b4", "masked score"], ["#fff", "not reached yet"]]);
    }

    // each row of the current query block: m_old, m, the rescaling factor, l
    function drawRows(r, step) {
      V.clear(rowsBox);
      h("div", {"class": "tfs-panel-title", text: step ? "The query rows of Q" + sub(step.i) + " after this tile"
                                                       : "Each row's final m and l"}, rowsBox);
      var rows = [];
      if (step && step.kind !== "skipped") {
        for (var k = 0; k < step.m.length; k++) rows.push({r: step.rows[0] + k, m_old: step.m_old[k], m: step.m[k],
                                                          a: step.alpha[k], l: step.l[k]});
      } else if (!step) {  // the end: each row's last recorded m and l
        var last = {};
        r.steps.forEach(function (x) {
          if (!x.m) return;
          for (var k = 0; k < x.m.length; k++) last[x.rows[0] + k] = {r: x.rows[0] + k, m: x.m[k], l: x.l[k]};
        });
        Object.keys(last).sort(function (a, b) { return a - b; }).forEach(function (k) { rows.push(last[k]); });
      }
      if (step && step.kind === "skipped") {
        h("p", {"class": "tfs-muted", text: "Skipped: m and l of rows " + step.rows[0] + "–" + (step.rows[1] - 1) +
          " are untouched, and nothing moves between HBM and fast memory."}, rowsBox);
      } else {
        var tbl = h("table", {"class": "tfs-table", "data-role": "flash-rows"}, rowsBox);
        var head = h("tr", {}, tbl);
        (step ? ["row", "m before", "m after", "α", "l after"] : ["row", "m", "l"])
          .forEach(function (t) { h("th", {text: t}, head); });
        rows.forEach(function (x) {
          var tr = h("tr", {"data-role": "flash-row", "data-row": x.r, "data-m": x.m, "data-l": x.l}, tbl);
          h("td", {text: String(x.r)}, tr);
          if (step) {
            h("td", {text: x.m_old === null ? "−∞" : V.fmt(x.m_old, 4)}, tr);
            h("td", {text: V.fmt(x.m, 4), "class": step && x.m_old !== null && x.m > x.m_old ? "tfs-bad" : null}, tr);
            var a = h("td", {text: x.m_old === null ? "—" : V.fmt(x.a, 4)}, tr);
            if (x.m_old === null) h("span", {"class": "tfs-phone-hide", text: " (first tile)"}, a);  // −∞ before says so
          } else h("td", {text: V.fmt(x.m, 4)}, tr);
          h("td", {text: V.fmt(x.l, 4)}, tr);
        });
      }
      var f = h("div", {"class": "tfs-small", style: {marginTop: "8px"}}, rowsBox);
      (r.version === 2 ? [
        ["m_new = max(m_old, rowmax S_ij)", ""], ["α = e^(m_old − m_new)", "shrinks what came before when the max rises"],
        ["l_new = α · l_old + rowsum e^(S_ij − m_new)", ""], ["O_new = α · O_old + e^(S_ij − m_new) V_j", ""],
        ["out = O / l", "once, after the last key block"]] : [
        ["m̃ = rowmax S_ij,  l̃ = rowsum e^(S_ij − m̃)", "the tile's own softmax state"],
        ["m_new = max(m_old, m̃),  α = e^(m_old − m_new)", ""],
        ["l_new = α · l_old + e^(m̃ − m_new) · l̃", "the merge of two states"],
        ["O_new = (α · l_old · O_old + e^(m̃ − m_new) e^(S_ij − m̃) V_j) / l_new", ""]]).forEach(function (x) {
        var p = h("div", {}, f);
        h("span", {"class": "tfs-formula", text: x[0]}, p);
        if (x[1]) h("span", {"class": "tfs-muted", text: "   " + x[1]}, p);
      });
      if (r.version === 1) {
        h("p", {"class": "tfs-small tfs-muted", text: "FlashAttention-1 keeps O normalised in HBM: it reads Oᵢ, lᵢ, mᵢ " +
          "for every tile and writes them back."}, rowsBox);
      }
      h("p", {"class": "tfs-small tfs-muted", text: "Red m: the tile raised the row's maximum, so α < 1 rescales l and O."},
        rowsBox);
    }

    // slow-memory traffic so far, against the whole run and against standard attention
    function drawIO(r, step, done) {
      V.clear(ioBox);
      h("div", {"class": "tfs-panel-title", text: "HBM traffic in elements, counted by the IOCounter as the loop runs"},
        ioBox);
      var std = r.standard.total, max = Math.max(std, r.total);
      var bars = h("div", {"class": "tfs-bars"}, ioBox);
      function row(label, segments, role, value, text, note) {
        h("div", {"class": "tfs-bar-label", text: label}, bars);
        var track = h("div", {"class": "tfs-bar-track"}, bars), x = 0;
        segments.forEach(function (sg) {
          h("div", {"class": "tfs-bar-before", style: {left: (100 * x / max) + "%", width: (100 * sg[0] / max) + "%",
                                                      background: sg[1]}}, track);
          x += sg[0];
        });
        h("div", {"class": "tfs-bar-value", "data-role": role, "data-elements": value, text: text}, bars);
        if (note) { h("div", {}, bars); h("div", {"class": "tfs-small tfs-muted", text: note}, bars); h("div", {}, bars); }
      }
      var moved = [];
      ["loads", "stores"].forEach(function (kind) {
        Object.keys(step.io[kind]).forEach(function (name) {
          moved.push((kind === "loads" ? "read " : "wrote ") + name + " " + step.io[kind][name]);
        });
      });
      h("span", {"data-role": "io-loads", "data-elements": step.cum_loads, hidden: "hidden"}, ioBox);
      h("span", {"data-role": "io-stores", "data-elements": step.cum_stores, hidden: "hidden"}, ioBox);
      row("so far", [[step.cum_loads, V.COLORS.lines[0]], [step.cum_stores, V.COLORS.lines[1]]], "io-so-far",
          step.cum_loads + step.cum_stores, V.fmtInt(step.cum_loads + step.cum_stores),
          "read " + V.fmtInt(step.cum_loads) + " (blue) + written " + V.fmtInt(step.cum_stores) + " (red); " +
          (done ? "at the end: " : "this step: ") + (moved.length ? moved.join(", ") : "nothing"));
      row("whole tiled run", [[r.total, "#7fb3d5"]], "io-total", r.total, V.fmtInt(r.total),
          "the formula " + (r.version === 2 ? "flash2_io" : "flash1_io") + " gives " + V.fmtInt(r.formula.total) +
          (r.formula.total === r.total ? ": equal ✓" : ": different"));
      row("standard attention", [[std, "#bdbdbd"]], "io-standard", std, V.fmtInt(std),
          "writes S and P (n × n) to HBM and reads them back");
    }

    rebuildStepper();
    render();
  }

  function sub(k) { return String(k).split("").map(function (c) { return "₀₁₂₃₄₅₆₇₈₉"[Number(c)]; }).join(""); }
})();
