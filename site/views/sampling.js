/* Next-token probabilities of SmolLM2-135M under temperature, top-k and top-p.
 *
 * Placeholder: <div class="tfs-view" data-view="sampling" data-prompt="0"></div>
 * Data: data/sampling.js (site/export_views.py): the last position's logits of a few prompts,
 * the 1,000 largest exactly (in the order the filters visit them) and the rest as a histogram.
 *
 * To follow the controls, this file redoes softmax(z / T), top-k and top-p as
 * transformer/core/sampling.py defines them (filters in that order; ties at the k-th value kept;
 * top-p keeps a token when the mass of the likelier tokens is still below p). That is a second
 * implementation, for drawing only: tests/test_site_views.py sets T, k and p in a browser and
 * checks the bars against T.next_token_probs within 1e-3.
 * Served by `python -m transformer serve` (live.js), a text box sends the reader's own prompt to the
 * package, which answers with that prompt's logits in the same shape (and its own probabilities
 * under the current settings, quoted in the status line).
 */
(function () {
  "use strict";
  var SRC = document.currentScript ? document.currentScript.src : "";
  (window.TFS_VIEWS_PENDING = window.TFS_VIEWS_PENDING || []).push({name: "sampling", src: SRC, draw: draw,
    title: "Next-token probabilities: temperature, top-k, top-p"});
  if (window.TFS_VIEWS) window.TFS_VIEWS.flush();

  var SHOWN = 15;  // bars drawn

  // The sampler's distribution over the exported tokens: p after temperature only ("before") and
  // after top-k and top-p, renormalised ("after"). The tail bins stand for their tokens in the sums.
  function distribution(P, T, k, p) {
    var z = P.logits, n = z.length, tail = P.tail, v = P.v, i, b;
    var before = new Array(n), after = new Array(n);
    if (T === 0) {  // greedy: all the mass on the argmax (the first of the order)
      for (i = 0; i < n; i++) { before[i] = after[i] = i === 0 ? 1 : 0; }
      return {before: before, after: after, kept: 1, tailBefore: 0, tailAfter: 0, approx: false};
    }
    var x0 = z[0] / T, e = new Array(n), te = new Array(tail.length), Z = 0;
    for (i = 0; i < n; i++) { e[i] = Math.exp(z[i] / T - x0); Z += e[i]; }  // e^(z/T − max), one term per token
    for (b = 0; b < tail.length; b++) { te[b] = Math.exp(tail[b][0] / T - x0); Z += tail[b][1] * te[b]; }
    for (i = 0; i < n; i++) before[i] = e[i] / Z;
    var tailBefore = 0;
    for (b = 0; b < tail.length; b++) tailBefore += tail[b][1] * te[b] / Z;
    var keep = new Array(n), tkeep = new Array(tail.length), approx = false;
    for (i = 0; i < n; i++) keep[i] = true;
    for (b = 0; b < tail.length; b++) tkeep[b] = tail[b][1];
    // top-k: keep the logits ≥ the k-th largest (ties included)
    if (k > 0 && k < v) {
      var kth;
      if (k <= n) kth = z[k - 1];
      else {
        var seen = n;
        for (b = 0; b < tail.length && seen < k; b++) { seen += tail[b][1]; kth = tail[b][0]; }
      }
      for (i = 0; i < n; i++) keep[i] = z[i] >= kth;
      for (b = 0; b < tail.length; b++) if (tail[b][0] < kth) tkeep[b] = 0;
    }
    // top-p on the distribution after top-k: keep a token while the mass before it is < p
    if (p < 1) {
      var Z1 = 0, mass = 0;
      for (i = 0; i < n; i++) if (keep[i]) Z1 += e[i];
      for (b = 0; b < tail.length; b++) Z1 += tkeep[b] * te[b];
      for (i = 0; i < n; i++) {
        if (!keep[i]) continue;
        keep[i] = mass < p;
        mass += e[i] / Z1;
      }
      for (b = 0; b < tail.length; b++) {
        if (!tkeep[b]) continue;
        var q = te[b] / Z1, c = tkeep[b];
        tkeep[b] = mass >= p ? 0 : Math.min(c, Math.ceil((p - mass) / q));  // tokens t with mass + t·q < p
        approx = approx || (tkeep[b] > 0 && tkeep[b] < c);  // the nucleus ends inside a bin: its count is estimated
        mass += c * q;
      }
    }
    var Z2 = 0, kept = 0, tailAfter = 0;
    for (i = 0; i < n; i++) if (keep[i]) { Z2 += e[i]; kept += 1; }
    for (b = 0; b < tail.length; b++) { Z2 += tkeep[b] * te[b]; kept += tkeep[b]; }
    for (i = 0; i < n; i++) after[i] = keep[i] ? e[i] / Z2 : 0;
    for (b = 0; b < tail.length; b++) tailAfter += tkeep[b] * te[b] / Z2;
    return {before: before, after: after, kept: kept, tailBefore: tailBefore, tailAfter: tailAfter, approx: approx};
  }

  function draw(root, d, V) {
    var h = V.h;
    var st = {prompt: Math.min(d.prompts.length - 1, parseInt(root.getAttribute("data-prompt"), 10) || 0),
              T: 1, k: 0, p: 1};
    var controls = h("div", {"class": "tfs-controls"}, root);
    var promptSel = V.select(controls, {label: "prompt", role: "prompt", value: st.prompt,
      options: d.prompts.map(function (P, k) { return [k, "“" + P.prompt + "”"]; }),
      onChange: function (v) { st.prompt = Number(v); render(); }});
    var live = window.TFS_LIVE && window.TFS_LIVE.available() ? window.TFS_LIVE : null;
    if (live) live.textBox(root, V, {placeholder: "type your own prompt, then Enter", submit: runLive});
    else if (window.TFS_LIVE) window.TFS_LIVE.fallback(root, V, "prompts");
    var row2 = h("div", {"class": "tfs-controls"}, root);
    var tS = V.slider(row2, {label: "temperature T", min: 0, max: 2.5, step: 0.05, value: st.T, role: "temperature",
      format: function (v) { return v === 0 ? "0 (greedy)" : v.toFixed(2); }, wideValue: true,
      onInput: function (v) { st.T = v; render(); }});
    var kS = V.slider(row2, {label: "top-k", min: 0, max: 100, step: 1, value: st.k, role: "top-k",
      format: function (v) { return v === 0 ? "off" : String(v); }, onInput: function (v) { st.k = v; render(); }});
    var pS = V.slider(row2, {label: "top-p", min: 0.05, max: 1, step: 0.01, value: st.p, role: "top-p",
      format: function (v) { return v >= 1 ? "off" : v.toFixed(2); }, onInput: function (v) { st.p = v; render(); }});
    var presets = h("div", {"class": "tfs-controls"}, root);
    h("span", {"class": "tfs-control-label", text: "settings of lesson 11:"}, presets);
    [["greedy", 0, 0, 1], ["T = 0.7", 0.7, 0, 1], ["T = 1.5", 1.5, 0, 1], ["top-p 0.9 (T = 1)", 1, 0, 0.9],
     ["top-k 5 (T = 1)", 1, 5, 1]].forEach(function (x) {
      h("button", {type: "button", "class": "tfs-button", text: x[0], onclick: function () {
        st.T = x[1]; st.k = x[2]; st.p = x[3]; tS.set(st.T); kS.set(st.k); pS.set(st.p); render();
      }}, presets);
    });
    var summary = h("p", {"class": "tfs-info", "data-role": "sampling-info"}, root);
    var head = h("div", {"class": "tfs-bars tfs-sampling-bars"}, root);
    var bars = h("div", {"class": "tfs-bars tfs-sampling-bars", "data-role": "bars"}, root);
    var barInfo = h("p", {"class": "tfs-small", "data-role": "bar-info"}, root);
    V.legend(root, [["#c6dbef", "softmax(z / T): temperature only"],
                    [V.COLORS.on, "after top-k and top-p, renormalised: what the sampler draws from"]]);
    h("p", {"class": "tfs-small tfs-muted", text: "The logits are SmolLM2's own; this page redoes softmax, top-k and top-p " +
      "to follow the controls, checked against T.next_token_probs by the test suite."}, root);

    function render() {
      var P = d.prompts[st.prompt], D = distribution(P, st.T, st.k, st.p);
      root.setAttribute("data-temperature", st.T); root.setAttribute("data-top-k", st.k);
      root.setAttribute("data-top-p", st.p);
      var n = Math.min(SHOWN, P.logits.length), top = 0, shown = 0;
      for (var i = 0; i < n; i++) { top = Math.max(top, D.before[i], D.after[i]); shown += D.after[i]; }
      var scale = [0.05, 0.1, 0.2, 0.25, 0.5, 1].filter(function (x) { return x >= top; })[0] || 1;
      V.clear(summary);
      var what = st.T === 0 ? "greedy: the argmax only" :
        "T = " + st.T.toFixed(2) + (st.k ? ", top-k " + st.k : "") + (st.p < 1 ? ", top-p " + st.p.toFixed(2) : "");
      summary.appendChild(document.createTextNode(what + " → the sampler keeps "));
      h("b", {"data-role": "kept", "data-kept": D.kept, text: (D.approx ? "about " : "") +
        V.fmtInt(D.kept) + " of " + V.fmtInt(P.v) + " tokens"}, summary);
      summary.appendChild(document.createTextNode("; the " + n + " most likely, shown, hold " + (100 * shown).toFixed(1) +
        " % of what it draws from. At this temperature the " + V.fmtInt(P.v - P.logits.length) +
        " least likely tokens (past the " + V.fmtInt(P.logits.length) + " this page holds) hold " +
        (100 * D.tailBefore).toFixed(2) + " % before the filters." +
        (scale < 1 ? " The bars' axis runs to " + scale + ", not 1: zoomed ×" + Math.round(1 / scale) +
         " so that small probabilities show." : "")));
      V.clear(head);
      h("div", {"class": "tfs-bar-label tfs-muted", text: "next token"}, head);
      var axis = h("div", {"class": "tfs-bar-axis"}, head);
      [0, 0.5, 1].forEach(function (f) {
        h("span", {style: {left: (100 * f) + "%"}, text: (f * scale).toFixed(scale < 0.1 ? 3 : 2)}, axis);
      });
      h("div", {"class": "tfs-bar-value tfs-muted", text: "p"}, head);
      V.clear(bars);
      var tracks = [];
      for (var j = 0; j < n; j++) {
        var dropped = D.after[j] === 0;
        h("div", {"class": "tfs-bar-label" + (dropped ? " tfs-dropped" : ""), text: P.tokens[j]}, bars);
        var track = h("div", {"class": "tfs-bar-track", "data-role": "bar", title: P.tokens[j] + ": logit " +
          P.logits[j].toFixed(3) + ", softmax(z/T) " + D.before[j].toFixed(4) + ", after the filters " +
          D.after[j].toFixed(4)}, bars);
        tracks.push(track);
        h("div", {"class": "tfs-bar-before", style: {width: Math.min(100, 100 * D.before[j] / scale) + "%"}}, track);
        h("div", {"class": "tfs-bar-after", style: {width: Math.min(100, 100 * D.after[j] / scale) + "%"}}, track);
        h("div", {"class": "tfs-bar-value", "data-role": "prob", "data-token-id": P.ids[j], "data-index": j,
                  "data-p": D.after[j].toPrecision(6), "data-p-temp": D.before[j].toPrecision(6),
                  text: dropped ? "dropped" : D.after[j].toFixed(4)}, bars);
      }
      V.keys(tracks, {cols: 1, label: function (k) { return tracks[k].title; }, show: barInfo,  // keyboard: Tab, arrows
        rest: "Hover a bar, or Tab to the bars and use the arrows, to read its logit and both probabilities."});
    }
    // the reader's prompt: its logits from the package (python -m transformer serve), one per view
    function runLive(text) {  // -> Promise of a one-line note for the status
      return live.request("next", {text: text, temperature: st.T, top_k: st.k, top_p: st.p}).then(function (a) {
        var entry = {prompt: a.prompt, ids: a.ids, tokens: a.tokens, logits: a.logits, tail: a.tail, v: a.v, live: true};
        var k = -1;
        d.prompts.forEach(function (P, i) { if (P.live) k = i; });
        if (k < 0) { d.prompts.push(entry); k = d.prompts.length - 1; } else d.prompts[k] = entry;
        V.clear(promptSel);
        d.prompts.forEach(function (P, i) {
          h("option", {value: String(i), text: "“" + P.prompt.slice(0, 60) + "”" + (P.live ? " (yours)" : "")}, promptSel);
        });
        st.prompt = k; promptSel.value = String(k);
        render();
        root.setAttribute("data-live", "ready");
        return "At these settings the package's sampler keeps " + V.fmtInt(a.kept) + " tokens; likeliest “" +
          a.top[0][1] + "”, p = " + Number(a.top[0][2]).toFixed(4) + ".";
      });
    }
    render();
  }
})();
