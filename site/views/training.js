/* Training from scratch, snapshot by snapshot: the loss, the held-out accuracy, and every head's
 * attention map on one held-out sequence, as the induction heads form.
 *
 * Placeholder: <div class="tfs-view" data-view="training" data-snapshot="0"></div>
 * Data: data/training.js (site/export_views.py): T.train_induction(seed=0), lesson 19's run (in the
 * site's fast build: its first steps only): the loss of every step, and at every snapshot the
 * held-out accuracy, the previous-token and induction scores (T.induction_head_scores) and the
 * attention maps (T.attention_maps) on the held-out probe t₁…t₁₂ t₁…t₁₂. Nothing is recomputed here.
 */
(function () {
  "use strict";
  var SRC = document.currentScript ? document.currentScript.src : "";
  (window.TFS_VIEWS_PENDING = window.TFS_VIEWS_PENDING || []).push({name: "training", src: SRC, draw: draw,
    title: "Training from scratch: scrub through the run"});
  if (window.TFS_VIEWS) window.TFS_VIEWS.flush();

  var CUR = "#d35400", TARGET = "#d62728";

  function draw(root, d, V) {
    var h = V.h, s = V.s, K = d.snap_steps.length - 1, n = d.n, m = d.n_half, tri = n * (n + 1) / 2;
    var st = {k: Math.max(0, Math.min(K, parseInt(root.getAttribute("data-snapshot"), 10) || 0))};
    function w(k, l, hd, i, j) {  // the exported map of snapshot k, layer l, head hd: query i, key j ≤ i
      return j > i ? 0 : d.maps[((k * d.L + l) * d.h + hd) * tri + i * (i + 1) / 2 + j] / d.w_scale;
    }

    V.howto(root, "Move through the run with the slider (Tab to it, then the arrow keys), ◀ ▶ one snapshot at a " +
      "time, or ▶ play. Watch the loss fall and the two kinds of heads form together.");
    h("p", {"class": "tfs-small", text: "The tiny decoder of lesson 18 (L = " + d.L + " layers, h = " + d.h +
      " heads, v = " + d.v + " tokens), trained with seed " + d.seed + " for " + d.steps + " steps" +
      (d.steps < d.full_steps ? " — the site's fast build trains only the first " + d.steps + " of the lesson's " +
        d.full_steps + " steps, before anything has formed" : ", the lesson's own run") +
      ". Every " + (d.snap_steps[1] - d.snap_steps[0]) + " steps: the held-out accuracy, and each head's weights on a " +
      "held-out sequence of " + m + " tokens followed by the same " + m + "."}, root);
    var stepper = V.stepper(root, {label: "snapshot", max: K, value: st.k, role: "snapshot", interval: 500,
      format: function (v) { return "step " + d.snap_steps[v] + " / " + d.steps; }, onInput: function (v) { st.k = v; render(); }});
    var info = h("p", {"class": "tfs-info", "data-role": "train-info"}, root);
    var chartBox = h("div", {"class": "tfs-section"}, root);
    var mapsBox = h("div", {"class": "tfs-section"}, root);

    function render() {
      var k = st.k, step = d.snap_steps[k];
      stepper.set(k);
      root.setAttribute("data-current-snapshot", k);
      V.clear(info);
      var loss = step > 0 ? d.loss[step - 1] : null;
      h("b", {text: "Step " + step + ": "}, info);
      info.appendChild(document.createTextNode("training loss "));
      h("span", {"data-role": "train-loss", "data-value": loss === null ? "" : loss,
                 text: loss === null ? "— (not trained yet)" : loss.toFixed(3)}, info);
      info.appendChild(document.createTextNode(" (chance ln " + (d.v - 1) + " = " + d.chance.toFixed(2) + "), held-out accuracy "));
      h("b", {"data-role": "train-accuracy", "data-value": d.accuracy[k], text: (100 * d.accuracy[k]).toFixed(1) + " %"}, info);
      info.appendChild(document.createTextNode(". " + phase(k)));
      drawChart(k);
      drawMaps(k);
    }

    function phase(k) {
      var a = d.accuracy[k];
      if (d.snap_steps[k] === 0) return "Random weights: every head spreads its weight over the past.";
      if (a < 0.2) return "The slow phase: the model learns what needs no copy; no head has formed yet.";
      if (a < 0.95) return "The drop: the previous-token heads (layer 0) and the induction heads (layer 1) form together.";
      return "Both kinds of heads are sharp: the second copy is predicted almost perfectly.";
    }

    // the loss at every step, the accuracy at every snapshot, and where the scrubber is
    function drawChart(k) {
      V.clear(chartBox);
      h("div", {"class": "tfs-panel-title", text: "Loss per step (blue) and held-out accuracy (green)"}, chartBox);
      var W = 640, H = 200, l = 44, r = 44, t = 10, b = 30, S = d.steps;
      var lmax = Math.max(d.chance, Math.max.apply(null, d.loss)) * 1.05;
      function X(step) { return l + (step / S) * (W - l - r); }
      function Y(v) { return H - b - (v / lmax) * (H - t - b); }
      function A(a) { return H - b - a * (H - t - b); }
      var svg = s("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "class": "tfs-svg", "data-role": "train-chart"},
                  chartBox);
      s("line", {x1: l, x2: W - r, y1: H - b, y2: H - b, stroke: "#8a8a8a"}, svg);
      s("line", {x1: l, x2: l, y1: t, y2: H - b, stroke: "#8a8a8a"}, svg);
      s("line", {x1: W - r, x2: W - r, y1: t, y2: H - b, stroke: "#8a8a8a"}, svg);
      [0, 1, 2, 3].forEach(function (v) {
        if (v > lmax) return;
        s("text", {x: l - 6, y: Y(v) + 4, "text-anchor": "end", "class": "tfs-axis", text: String(v)}, svg);
      });
      [0, 0.5, 1].forEach(function (a) {
        s("text", {x: W - r + 6, y: A(a) + 4, "class": "tfs-axis", text: (100 * a) + " %"}, svg);
      });
      [0, Math.round(S / 2), S].forEach(function (v) {
        s("text", {x: X(v), y: H - b + 16, "text-anchor": "middle", "class": "tfs-axis", text: String(v)}, svg);
      });
      s("text", {x: (l + W - r) / 2, y: H - 2, "text-anchor": "middle", "class": "tfs-axis", text: "training step"}, svg);
      s("line", {x1: l, x2: W - r, y1: Y(d.chance), y2: Y(d.chance), stroke: "#8a8a8a", "stroke-dasharray": "5 4"}, svg);
      s("text", {x: W - r - 4, y: Y(d.chance) + 14, "text-anchor": "end", "class": "tfs-axis",
                 text: "chance: ln " + (d.v - 1) + " = " + d.chance.toFixed(2)}, svg);
      s("polyline", {points: d.loss.map(function (v, i) { return X(i + 1) + "," + Y(v); }).join(" "), fill: "none",
                     stroke: V.COLORS.lines[0], "stroke-width": 1.3}, svg);
      s("polyline", {points: d.accuracy.map(function (a, i) { return X(d.snap_steps[i]) + "," + A(a); }).join(" "),
                     fill: "none", stroke: V.COLORS.lines[2], "stroke-width": 2}, svg);
      d.accuracy.forEach(function (a, i) {
        s("circle", {cx: X(d.snap_steps[i]), cy: A(a), r: i === k ? 5 : 2.2, fill: i === k ? CUR : V.COLORS.lines[2]}, svg);
      });
      s("line", {x1: X(d.snap_steps[k]), x2: X(d.snap_steps[k]), y1: t, y2: H - b, stroke: CUR, "stroke-width": 1.5}, svg);
    }

    // every head's map on the probe; red frames: where a previous-token (layer 0) or induction head should look
    function drawMaps(k) {
      V.clear(mapsBox);
      h("div", {"class": "tfs-panel-title", text: "Every head on the held-out sequence at step " + d.snap_steps[k] +
        " (query ↓, key →; red: where the head's kind should look)"}, mapsBox);
      h("p", {"class": "tfs-small tfs-muted", text: "the sequence: " + d.ids.slice(0, m).join(" ") + "  |  " +
        d.ids.slice(m).join(" ")}, mapsBox);
      var panels = h("div", {"class": "tfs-maps"}, mapsBox);
      var readout = h("p", {"class": "tfs-small", "data-role": "map-info"}, mapsBox);
      var c = 7, pad = 4, size = n * c + 2 * pad;
      for (var l = 0; l < d.L; l++) {
        for (var hd = 0; hd < d.h; hd++) {
          var kind = l === 0 ? "previous token" : "induction";
          var score = d.scores[kind][k][l][hd];
          var box = h("div", {}, panels);
          h("div", {"class": "tfs-small", style: {fontWeight: 600}, text: "layer " + l + ", head " + hd}, box);
          h("div", {"class": "tfs-small tfs-muted", "data-role": "head-score", "data-layer": l, "data-head": hd,
                    "data-score": score, text: kind + " score " + score.toFixed(2)}, box);
          var svg = s("svg", {width: size, height: size, viewBox: "0 0 " + size + " " + size, "class": "tfs-svg",
                              "data-role": "head-map", "data-layer": l, "data-head": hd}, box);
          var cells = [];
          for (var i = 0; i < n; i++) {
            for (var j = 0; j < n; j++) {
              var masked = j > i, wt = w(k, l, hd, i, j);
              var target = l === 0 ? j === i - 1 : (i >= m && i <= 2 * m - 2 && j === i - m + 1);
              var cell = s("rect", {x: pad + j * c, y: pad + i * c, width: c - 0.5, height: c - 0.5,
                                    fill: masked ? V.COLORS.off : V.blues(wt), stroke: target ? TARGET : null,
                                    "stroke-width": target ? 0.9 : null, "data-role": masked ? null : "map-cell",
                                    "data-i": i, "data-j": j, "data-w": masked ? null : wt}, svg);
              if (!masked) s("title", {text: "query " + i + " (" + d.ids[i] + ") → key " + j + " (" + d.ids[j] + "): " +
                                      wt.toFixed(3)}, cell);
              cells.push(cell);
            }
          }
          mapKeys(cells, l, hd, readout);
        }
      }
      V.colorbar(mapsBox, "weight", 1);
    }

    function mapKeys(cells, l, hd, readout) {  // keyboard: a Tab stop per map, arrows across and down its cells
      V.keys(cells, {cols: n, show: readout, label: function (k) {
        var title = cells[k].querySelector("title");
        return "layer " + l + ", head " + hd + ": " + (title ? title.textContent
          : "query " + Math.floor(k / n) + " → key " + k % n + ": masked, a key after its query");
      }, rest: "Hover a map's cell, or Tab to a map and use the arrows, to read its weight."});
    }

    render();
  }
})();
