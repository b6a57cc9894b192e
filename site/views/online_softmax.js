/* The online softmax, one score at a time: the running max m, the running sum l and the output.
 *
 * Placeholder: <div class="tfs-view" data-view="online_softmax" data-step="0"></div>
 * Data: data/online_softmax.js (site/export_views.py): lesson 08's row x and values V, and after
 * each step the package's m and l (T.online_softmax_history), the factor e^(m_old − m_new), the
 * unnormalised output O folded key by key (T.online_attention_update), O / l, and the two-pass
 * softmax of the scores read so far. Nothing is recomputed here.
 */
(function () {
  "use strict";
  var SRC = document.currentScript ? document.currentScript.src : "";
  (window.TFS_VIEWS_PENDING = window.TFS_VIEWS_PENDING || []).push({name: "online_softmax", src: SRC, draw: draw,
    title: "The online softmax, score by score"});
  if (window.TFS_VIEWS) window.TFS_VIEWS.flush();

  var CUR = "#d35400", MAX = "#d62728";

  function draw(root, d, V) {
    var h = V.h, s = V.s, n = d.x.length;
    var st = {t: Math.max(0, Math.min(n, parseInt(root.getAttribute("data-step"), 10) || 0))};

    V.howto(root, "Step through the row with ◀ and ▶ (or Tab to the slider and press the arrow keys); " +
      "▶ play reads it all. Watch l shrink when a new maximum arrives.");
    h("p", {"class": "tfs-small", text: "One query's " + n + " scores xⱼ are read once, left to right. Only m " +
      "(the largest so far), l = Σ e^(xᵢ − m) and the output accumulator O are kept: " +
      "mⱼ = max(mⱼ₋₁, xⱼ),  lⱼ = lⱼ₋₁·e^(mⱼ₋₁ − mⱼ) + e^(xⱼ − mⱼ),  " +
      "Oⱼ = Oⱼ₋₁·e^(mⱼ₋₁ − mⱼ) + e^(xⱼ − mⱼ)·vⱼ."}, root);
    var stepper = V.stepper(root, {label: "scores read", max: n, value: st.t, role: "step", interval: 1000,
      format: function (v) { return v + " / " + n; }, onInput: function (v) { st.t = v; render(); }});
    var caption = h("p", {"class": "tfs-info", "data-role": "online-info"}, root);
    var panels = h("div", {"class": "tfs-panels"}, root);
    var barsBox = h("div", {"class": "tfs-panel"}, panels);
    var stateBox = h("div", {"class": "tfs-panel", style: {maxWidth: "430px"}}, panels);
    var outBox = h("div", {"class": "tfs-section"}, root);

    function render() {
      var t = st.t, step = t > 0 ? d.steps[t - 1] : null;
      stepper.set(t);
      root.setAttribute("data-current-step", t);
      V.clear(caption);
      if (!step) caption.textContent = "Nothing read yet: m = −∞, l = 0, O = 0.";
      else {
        h("b", {text: "Step " + t + ": x" + sub(t) + " = " + d.x[t - 1] + ". "}, caption);
        var rose = step.m_old === null || step.m > step.m_old;
        caption.appendChild(document.createTextNode(step.m_old === null
          ? "The first score: m = x₁, l = e⁰ = 1, O = v₁."
          : rose ? "A new maximum: everything kept so far is multiplied by e^(" + fmt(step.m_old) + " − " +
                   fmt(step.m) + ") = " + step.alpha.toFixed(4) + ", then the new term e⁰ = 1 is added."
                 : "Not a new maximum: nothing to rescale (factor e⁰ = 1); the new term e^(x − m) = " +
                   step.term.toFixed(4) + " is added."));
        if (t === n) caption.appendChild(document.createTextNode(" The whole row is read: O / l is the attention output."));
      }
      drawBars(t, step);
      drawState(t, step);
      drawOutput(t, step);
    }

    // the scores: read (blue), the one read now (orange), not yet read (faint); the running max as a line
    function drawBars(t, step) {
      V.clear(barsBox);
      h("div", {"class": "tfs-panel-title", text: "The row x, and the running max m"}, barsBox);
      var W = 360, H = 190, l = 34, b = 26, top = 12, xmax = Math.max.apply(null, d.x) + 0.5;
      var bw = (W - l - 8) / n;
      function Y(v) { return H - b - (v / xmax) * (H - b - top); }
      var svg = s("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, "class": "tfs-svg", "data-role": "scores"}, barsBox);
      [0, 2, 4, 6].forEach(function (v) {
        if (v > xmax) return;
        s("line", {x1: l, x2: W - 8, y1: Y(v), y2: Y(v), stroke: "#8a8a8a", "stroke-opacity": 0.25}, svg);
        s("text", {x: l - 5, y: Y(v) + 4, "text-anchor": "end", "class": "tfs-axis", text: String(v)}, svg);
      });
      d.x.forEach(function (x, j) {
        var read = j < t, now = j === t - 1;
        var bar = s("rect", {x: l + j * bw + 4, y: Y(x), width: bw - 8, height: Y(0) - Y(x), rx: 2,
                             fill: now ? CUR : read ? V.COLORS.on : V.COLORS.partial, "fill-opacity": read ? 1 : 0.35,
                             "data-role": "score-bar", "data-j": j}, svg);
        s("title", {text: "x" + sub(j + 1) + " = " + x + (read ? "" : " (not read yet)")}, bar);
        s("text", {x: l + j * bw + bw / 2, y: Y(x) - 4, "text-anchor": "middle", "class": "tfs-label",
                   "font-size": "11px", text: String(x)}, svg);
        s("text", {x: l + j * bw + bw / 2, y: H - 8, "text-anchor": "middle", "class": "tfs-axis", text: "x" + sub(j + 1)}, svg);
      });
      if (step) {
        s("line", {x1: l, x2: l + t * bw, y1: Y(step.m), y2: Y(step.m), stroke: MAX, "stroke-width": 2,
                   "stroke-dasharray": "5 3"}, svg);
        var end = l + t * bw, inside = end + 48 > W;  // near the right edge: the label ends at the line's end, above it
        s("text", {x: inside ? end - 3 : end + 3, y: inside ? Y(step.m) - 6 : Y(step.m) + 4, "class": "tfs-label",
                   "text-anchor": inside ? "end" : "start", fill: MAX, "font-weight": 700, text: "m = " + fmt(step.m)}, svg);
      }
    }

    // the state after this step, and the arithmetic that made it
    function drawState(t, step) {
      V.clear(stateBox);
      h("div", {"class": "tfs-panel-title", text: "The state kept: two numbers and O"}, stateBox);
      // tfs-table-notes: on a phone each note goes under its row
      var tbl = h("table", {"class": "tfs-table tfs-table-notes", "data-role": "online-state"}, stateBox);
      var prev = t > 1 ? d.steps[t - 2] : null;
      function row(label, role, value, text, how) {
        var tr = h("tr", {}, tbl);
        h("td", {text: label}, tr);
        h("td", {"data-role": role, "data-value": value === null ? "" : value, text: text}, tr);
        h("td", {"class": "tfs-muted", text: how || ""}, tr);
      }
      if (!step) {
        row("m", "m", null, "−∞"); row("l", "l", 0, "0"); row("O", "O", null, "(0, 0)");
        return;
      }
      var lPrev = prev ? prev.l : 0;
      row("m before", "m-old", step.m_old, step.m_old === null ? "−∞" : fmt(step.m_old));
      row("m", "m", step.m, fmt(step.m), "max(m before, x" + sub(t) + ")");
      row("e^(m before − m)", "alpha", step.alpha, step.m_old === null ? "—" : step.alpha.toFixed(4),
          step.m_old === null ? "nothing to rescale" : step.alpha < 1 ? "< 1: the max rose" : "the max stayed");
      row("e^(x" + sub(t) + " − m)", "term", step.term, step.term.toFixed(4), "the new term");
      row("l", "l", step.l, step.l.toFixed(4),
          (step.m_old === null ? "0" : lPrev.toFixed(4) + " × " + step.alpha.toFixed(4)) + " + " + step.term.toFixed(4));
      row("O", "O", step.O.join(","), vec(step.O), "O·e^(m before − m) + e^(x − m)·v" + sub(t));
      h("p", {"class": "tfs-small tfs-muted", text: "l is always the sum of e^(xᵢ − mⱼ) over i ≤ j: when m rises, one " +
        "multiplication fixes every earlier term at once."}, stateBox);
    }

    // the weights and the output so far: O / l against the two-pass softmax of what was read
    function drawOutput(t, step) {
      V.clear(outBox);
      h("div", {"class": "tfs-panel-title", text: "The output so far, o = O / l"}, outBox);
      if (!step) { h("p", {"class": "tfs-muted", text: "Read a score to start."}, outBox); return; }
      var p = h("p", {}, outBox);
      p.appendChild(document.createTextNode("o = O / l = "));
      h("b", {"data-role": "o", "data-value": step.o.join(","), text: vec(step.o)}, p);
      p.appendChild(document.createTextNode("   softmax(x₁…x" + sub(t) + ") · (v₁…v" + sub(t) + ") = " + vec(step.prefix_out) + " "));
      var same = step.o.every(function (v, c) { return Math.abs(v - step.prefix_out[c]) < 1e-6; });
      h("span", {"class": same ? "tfs-ok" : "tfs-bad", text: same ? "equal ✓" : "different"}, p);
      if (t === n) {
        h("p", {"class": "tfs-small", text: "The full row: softmax(x) · V = " + vec(d.output) + " (T.softmax, two passes)."},
          outBox);
      }
      var bars = h("div", {"class": "tfs-bars", "data-role": "weights", style: {maxWidth: "560px"}}, outBox);
      d.x.forEach(function (x, j) {
        var w = j < t ? step.weights[j] : null;
        h("div", {"class": "tfs-bar-label", text: "p" + sub(j + 1) + " (x = " + x + ")"}, bars);
        var track = h("div", {"class": "tfs-bar-track"}, bars);
        if (w !== null) h("div", {"class": "tfs-bar-after", style: {width: (100 * w) + "%"}}, track);
        h("div", {"class": "tfs-bar-value", "data-role": "weight", "data-j": j, "data-w": w === null ? "" : w,
                  text: w === null ? "not read" : w.toFixed(4)}, bars);
      });
      h("p", {"class": "tfs-small tfs-muted", text: "pᵢ = e^(xᵢ − m) / l over the scores read so far: " +
        "exactly the softmax of that prefix. The last step's are the softmax of the whole row."}, outBox);
    }

    render();
  }

  function fmt(v) { return Number(v) === Math.round(v) ? String(v) : Number(v).toFixed(3); }
  function vec(v) { return "(" + v.map(function (x) { return Number(x).toFixed(4); }).join(", ") + ")"; }
  function sub(k) { return String(k).split("").map(function (c) { return "₀₁₂₃₄₅₆₇₈₉"[Number(c)]; }).join(""); }
})();
