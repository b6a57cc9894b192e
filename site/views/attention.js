/* Attention explorer: the real attention weights of SmolLM2-135M and MiniLM-L6.
 *
 * Placeholder: <div class="tfs-view" data-view="attention" data-model="smollm2|minilm"
 *                   data-text="0" data-layer="L" data-head="H"></div>  (all but data-view optional)
 * Data: data/attention.js (site/export_views.py): per model and text the tokens and every layer's
 * and head's weights, exactly as the package computed them; SmolLM2's last rows are the decode
 * rows of the tokens it generated greedily through its KV cache. Nothing is recomputed here.
 * Served by `python -m transformer serve` (live.js), a text box sends the reader's own text to the
 * package, whose answer is a text entry of the same shape; a long text's answer holds one layer
 * ("layers": [l]), and moving to another layer asks for that one.
 */
(function () {
  "use strict";
  var SRC = document.currentScript ? document.currentScript.src : "";
  (window.TFS_VIEWS_PENDING = window.TFS_VIEWS_PENDING || []).push({name: "attention", src: SRC, draw: draw,
    title: "Attention explorer: every layer and head of the real models"});
  if (window.TFS_VIEWS) window.TFS_VIEWS.flush();

  var GEN = "#d35400";  // generated tokens (decode rows)
  var DARK = 0.55;  // a weight whose blue is dark enough that text on it is white (matrix cells, token boxes)

  function intAttr(el, name, fallback) {
    var v = parseInt(el.getAttribute(name), 10);
    return isNaN(v) ? fallback : v;
  }

  function weights(model, text, scale) {  // -> w(layer, head, i, j); 0 in a layer the text does not hold
    var n = text.tokens.length, H = model.h, w = text.w, at = [];
    for (var l = 0; l < model.L; l++) at.push(text.layers ? text.layers.indexOf(l) : l);  // layer -> block of w
    if (model.lower) {
      var tri = n * (n + 1) / 2;
      return function (l, hd, i, j) { return j > i || at[l] < 0 ? 0 : w[(at[l] * H + hd) * tri + i * (i + 1) / 2 + j] / scale; };
    }
    return function (l, hd, i, j) { return at[l] < 0 ? 0 : w[((at[l] * H + hd) * n + i) * n + j] / scale; };
  }
  function holds(text, layer) { return !text.layers || text.layers.indexOf(layer) >= 0; }

  function draw(root, data, V) {
    var h = V.h, s = V.s;
    var models = data.models;
    var want = root.getAttribute("data-model");
    var st = {m: 0, t: 0, layer: 0, head: 0, focus: null, pinned: false};
    models.forEach(function (m, k) { if (m.key === want) st.m = k; });

    var controls = h("div", {"class": "tfs-controls"}, root);
    var modelSel = V.select(controls, {label: "model", role: "model", value: st.m,
      options: models.map(function (m, k) { return [k, m.name]; }),
      onChange: function (v) { st.m = Number(v); st.t = 0; defaults(); build(); }});
    var textBox = h("span", {"class": "tfs-control-group"}, controls);
    var layerBox = h("span", {"class": "tfs-control-group"}, controls);
    var headBox = h("span", {"class": "tfs-control-group"}, controls);
    var live = window.TFS_LIVE && window.TFS_LIVE.available() ? window.TFS_LIVE : null;
    var liveUi = null, layerTimer = null;
    if (live) liveUi = live.textBox(root, V, {placeholder: "type your own sentence, then Enter", submit: runLive});
    else if (window.TFS_LIVE) window.TFS_LIVE.fallback(root, V, "texts");
    var sentence = h("p", {"class": "tfs-sentence", "data-role": "sentence"}, root);
    var panels = h("div", {"class": "tfs-panels"}, root);
    var headPanel = h("div", {"class": "tfs-panel"}, panels);
    var matPanel = h("div", {"class": "tfs-panel"}, panels);
    var info = h("p", {"class": "tfs-info", "data-role": "row-info"}, root);
    var legendBox = h("div", {}, root);
    var overview = h("div", {"class": "tfs-section"}, root);
    var decode = h("div", {"class": "tfs-section"}, root);
    var layerSl, headSl, textSel, thumbs = [];

    function M() { return models[st.m]; }
    function TX() { return M().texts[st.t]; }
    function defaults() {
      var m = M();
      st.layer = Math.min(m.L - 1, intAttr(root, "data-layer", m.key === "minilm" ? 5 : Math.floor(m.L / 3)));
      st.head = Math.min(m.h - 1, intAttr(root, "data-head", 0));
      st.focus = null; st.pinned = false;
    }

    function build() {  // a model or text was picked: rebuild everything
      var m = M();
      st.t = Math.min(st.t, m.texts.length - 1);
      modelSel.value = String(st.m);
      V.clear(textBox); V.clear(layerBox); V.clear(headBox);
      textSel = V.select(textBox, {label: "text", role: "text", value: st.t,
        options: m.texts.map(function (t, k) { return [k, "“" + clip(t.text, 60) + "”" + (t.live ? " (yours)" : "")]; }),
        onChange: function (v) { st.t = Number(v); st.focus = null; st.pinned = false; build(); }});
      layerSl = V.slider(layerBox, {label: "layer", min: 0, max: m.L - 1, value: st.layer, role: "layer",
        format: function (v) { return v + " (0–" + (m.L - 1) + ")"; },
        onInput: function (v) { st.layer = v; needLayer(); refresh(); }});
      headSl = V.slider(headBox, {label: "head", min: 0, max: m.h - 1, value: st.head, role: "head",
        format: function (v) { return v + " (0–" + (m.h - 1) + ")"; },
        onInput: function (v) { st.head = v; refresh(); }});
      drawSentence();
      V.clear(legendBox);
      var items = [[V.blues(0.85), "attention weight (0 white → 1 dark blue)"]];
      if (m.causal) items.push([V.COLORS.off, "masked: a key after its query (causal)"]);
      if (TX().n_prompt < TX().tokens.length) items.push([GEN, "generated token: its row is a decode row"]);
      V.legend(legendBox, items);
      buildOverview();
      refresh();
    }

    function drawSentence() {
      var t = TX(), m = M();
      V.clear(sentence);
      h("span", {"class": "tfs-muted", text: m.causal ? "causal decoder, " : "bidirectional encoder, "}, sentence);
      h("span", {"class": "tfs-muted", text: t.tokens.length + " tokens: "}, sentence);
      t.tokens.forEach(function (tok, i) {
        h("span", {"class": "tfs-token" + (i >= t.n_prompt ? " tfs-gen" : ""), text: tok}, sentence);
      });
      if (t.next) {
        h("span", {"class": "tfs-muted", text: " → next: "}, sentence);
        h("span", {"class": "tfs-token tfs-next", text: t.next}, sentence);
      }
    }

    function refresh() {  // layer, head or focus changed
      layerSl.set(st.layer); headSl.set(st.head);
      thumbs.forEach(function (c) {
        var on = Number(c.getAttribute("data-layer")) === st.layer && Number(c.getAttribute("data-head")) === st.head;
        c.classList.toggle("selected", on);
        if (on) showThumb(c);
      });
      drawHeadView(); drawMatrix(); drawInfo(); drawDecode();
    }

    // a grid wider than its box (30 layers on a phone) scrolls sideways to the selected head, and only sideways:
    // the page itself does not move
    function showThumb(c) {
      var grid = c.parentNode;
      if (!grid || grid.scrollWidth <= grid.clientWidth) return;
      var left = c.getBoundingClientRect().left - grid.getBoundingClientRect().left + grid.scrollLeft;
      var right = left + c.offsetWidth;
      if (left < grid.scrollLeft || right > grid.scrollLeft + grid.clientWidth) {
        grid.scrollLeft = Math.max(0, left - (grid.clientWidth - c.offsetWidth) / 2);
      }
    }

    function setFocus(kind, i, pin) {
      if (pin) {
        var same = st.pinned && st.focus && st.focus.kind === kind && st.focus.index === i;
        st.pinned = !same; st.focus = same ? null : {kind: kind, index: i};
      } else if (!st.pinned) {
        st.focus = i === null ? null : {kind: kind, index: i};
      } else return;
      styleHeadView(); styleMatrix(); drawInfo();  // restyle only: the elements under the pointer stay
    }
    function letGo() { st.pinned = false; setFocus("row", null, false); }  // Escape: no row or column kept

    // --- head view: queries on the left, keys on the right, a line per weight (as bertviz) ---
    var hv = null;  // the head view's lines and token boxes, restyled when the focus moves
    function drawHeadView() {
      var t = TX(), m = M(), n = t.tokens.length, W = weights(m, t, data.w_scale);
      var rowH = n <= 16 ? 22 : Math.max(15, Math.floor(352 / n));
      var width = 330, xl = 118, xr = 212, top = 26, height = top + n * rowH + 6;
      V.clear(headPanel);
      h("div", {"class": "tfs-panel-title", text: "Head view: query → key, line opacity = weight"}, headPanel);
      var svg = s("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height,
                          "class": "tfs-svg", "data-role": "head-view"}, headPanel);
      s("text", {x: xl, y: 14, "text-anchor": "end", "class": "tfs-axis", text: "query"}, svg);
      s("text", {x: xr, y: 14, "class": "tfs-axis", text: "key"}, svg);
      var group = s("g", {}, svg);
      hv = {lines: [], boxes: {query: [], key: []}, labels: {query: [], key: []}, W: W, n: n};
      function y(i) { return top + i * rowH + rowH / 2; }
      for (var i = 0; i < n; i++) {
        for (var j = 0; j < n; j++) {
          var w = W(st.layer, st.head, i, j);
          if (w < 0.005) continue;  // invisible anyway
          hv.lines.push({i: i, j: j, w: w, el: s("line", {x1: xl + 6, y1: y(i), x2: xr - 6, y2: y(j)}, group)});
        }
      }
      for (var kk = 0; kk < n; kk++) (function (k) {  // one scope per token: the listeners keep their own k
        [["query", xl - 110, xl, "end"], ["key", xr, xr + 110, "start"]].forEach(function (side) {
          var kind = side[0] === "query" ? "row" : "col";
          var g = s("g", {"class": "tfs-hover", "data-role": side[0] + "-token", "data-index": k}, svg);
          hv.boxes[side[0]].push(s("rect", {x: side[1], y: top + k * rowH + 1, width: 110, height: rowH - 2, rx: 3,
                                            "stroke-width": 2, "pointer-events": "all"}, g));
          var label = s("text", {x: side[3] === "end" ? side[2] - 4 : side[1] + 4, y: y(k) + 4,
                                 "text-anchor": side[3], "class": "tfs-tok-label", text: clip(t.tokens[k], 13)}, g);
          if (k >= t.n_prompt) label.setAttribute("fill", GEN);
          hv.labels[side[0]].push({el: label, fill: k >= t.n_prompt ? GEN : null});
          s("title", {text: side[0] + " " + k + ": " + t.tokens[k]}, g);
          g.addEventListener("mouseenter", function () { setFocus(kind, k, false); });
          g.addEventListener("mouseleave", function () { setFocus(kind, null, false); });
          g.addEventListener("click", function () { setFocus(kind, k, true); });
        });
      })(kk);
      ["query", "key"].forEach(function (side) {  // keyboard: Tab to a side, arrows along it, Enter pins
        V.keys(hv.boxes[side].map(function (b) { return b.parentNode; }), {cols: 1, escape: letGo,
          label: function (k) { return side + " " + k + ": " + t.tokens[k]; }});
      });
      styleHeadView();
    }

    function styleHeadView() {
      var f = st.focus;
      hv.lines.forEach(function (ln) {
        var shown = !f || (f.kind === "row" ? ln.i === f.index : ln.j === f.index);
        ln.el.setAttribute("display", shown ? "inline" : "none");
        ln.el.setAttribute("stroke", f ? V.COLORS.on : "#2171b5");
        ln.el.setAttribute("stroke-width", f ? 1 + 4 * ln.w : 1.5);
        ln.el.setAttribute("stroke-opacity", f ? Math.min(1, 0.15 + ln.w) : ln.w * 0.8);
      });
      ["query", "key"].forEach(function (side) {
        hv.boxes[side].forEach(function (box, k) {
          var w = null;  // the other side is shaded by the focused row's (or column's) weights
          if (f && f.kind === "row" && side === "key") w = hv.W(st.layer, st.head, f.index, k);
          if (f && f.kind === "col" && side === "query") w = hv.W(st.layer, st.head, k, f.index);
          var active = f && (f.kind === "row") === (side === "query") && f.index === k;
          box.setAttribute("fill", w === null ? "none" : V.blues(w));
          box.setAttribute("stroke", active ? GEN : "none");
          var label = hv.labels[side][k];  // white on a dark box, as the matrix's numbers are
          if (w !== null && w > DARK) label.el.setAttribute("fill", "#fff");
          else if (label.fill) label.el.setAttribute("fill", label.fill);
          else if (w !== null) label.el.setAttribute("fill", "#222");  // on a pale box: dark, in the dark theme too
          else label.el.removeAttribute("fill");
        });
      });
      var shownLines = hv.lines.filter(function (ln) { return ln.el.getAttribute("display") !== "none"; }).length;
      headPanel.setAttribute("data-lines", shownLines);
    }

    // --- matrix view: row i = query i, column j = key j ----------------------------------------
    var mv = null;  // the matrix's geometry and its focus frame
    function drawMatrix() {
      var t = TX(), m = M(), n = t.tokens.length, W = weights(m, t, data.w_scale);
      var c = Math.max(14, Math.min(34, Math.floor(380 / n))), left = 96, top = 78;
      var width = left + n * c + 4, height = top + n * c + 4;
      V.clear(matPanel);
      h("div", {"class": "tfs-panel-title", text: "Matrix: layer " + st.layer + ", head " + st.head +
        (m.h_kv < m.h ? " (reads key/value head " + Math.floor(st.head / (m.h / m.h_kv)) + ")" : "")}, matPanel);
      var svg = s("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height,
                          "class": "tfs-svg", "data-role": "matrix"}, matPanel);
      var names = [];  // each cell's tooltip, read out to the keyboard too
      for (var i = 0; i < n; i++) {
        for (var j = 0; j < n; j++) {
          var masked = m.causal && j > i, w = W(st.layer, st.head, i, j);
          var cell = s("rect", {x: left + j * c, y: top + i * c, width: c - 1, height: c - 1,
                                fill: masked ? V.COLORS.off : V.blues(w), "class": "tfs-cell",
                                "data-i": i, "data-j": j}, svg);
          names.push(masked ? "masked: key " + j + " comes after query " + i : "query " + i + " “" + t.tokens[i] +
                              "” → key " + j + " “" + t.tokens[j] + "”: " + w.toFixed(4));
          s("title", {text: names[names.length - 1]}, cell);
          if (!masked && c >= 30 && w >= 0.005) {
            s("text", {x: left + j * c + (c - 1) / 2, y: top + i * c + c / 2 + 3, "text-anchor": "middle",
                       "class": "tfs-cell-label", fill: w > DARK ? "#fff" : "#222", "pointer-events": "none",
                       text: V.short(w)}, svg);
          }
          (function (i) {
            cell.addEventListener("mouseenter", function () { setFocus("row", i, false); });
            cell.addEventListener("click", function () { setFocus("row", i, true); });
          })(i);
        }
      }
      svg.addEventListener("mouseleave", function () { setFocus("row", null, false); });
      var readout = h("p", {"class": "tfs-small", "data-role": "cell-info"}, matPanel);  // under the matrix
      V.keys(Array.prototype.slice.call(svg.querySelectorAll("rect.tfs-cell")), {cols: n,  // keyboard: arrows move
        label: function (k) { return names[k]; }, show: readout, escape: letGo,
        rest: "Hover a cell, or Tab to the matrix and use the arrows, to read its weight."});
      for (var k = 0; k < n; k++) {
        var gen = k >= t.n_prompt;
        s("text", {x: left - 5, y: top + k * c + c / 2 + 4, "text-anchor": "end", "class": "tfs-tok-label",
                   fill: gen ? GEN : null, text: clip(t.tokens[k], 11)}, svg);
        var cx = left + k * c + c / 2, cy = top - 5;
        s("text", {x: cx, y: cy, transform: "rotate(-55 " + cx + " " + cy + ")", "class": "tfs-tok-label",
                   fill: gen ? GEN : null, text: clip(t.tokens[k], 11)}, svg);
      }
      if (t.n_prompt < n) {  // the decode rows start here
        s("line", {x1: left - 90, x2: left + n * c, y1: top + t.n_prompt * c - 0.5, y2: top + t.n_prompt * c - 0.5,
                   stroke: GEN, "stroke-width": 1.5, "stroke-dasharray": "4 3"}, svg);
      }
      s("text", {x: 4, y: top - 8, "class": "tfs-axis", text: "query ↓  key →"}, svg);
      mv = {left: left, top: top, c: c, n: n,
            frame: s("rect", {fill: "none", stroke: GEN, "stroke-width": 2, "pointer-events": "none"}, svg)};
      styleMatrix();
    }

    function styleMatrix() {
      var f = st.focus;
      mv.frame.setAttribute("display", f ? "inline" : "none");
      if (!f) return;
      var box = f.kind === "row" ? [mv.left - 1, mv.top + f.index * mv.c - 1, mv.n * mv.c + 1, mv.c + 1]
                                 : [mv.left + f.index * mv.c - 1, mv.top - 1, mv.c + 1, mv.n * mv.c + 1];
      ["x", "y", "width", "height"].forEach(function (a, k) { mv.frame.setAttribute(a, box[k]); });
    }

    function drawInfo() {
      var t = TX(), m = M(), n = t.tokens.length, W = weights(m, t, data.w_scale), f = st.focus;
      V.clear(info);
      ["data-query", "data-key", "data-top-key", "data-top-weight", "data-top-query"].forEach(function (a) {
        info.removeAttribute(a);
      });
      if (!f) {
        info.textContent = "Hover a token or a cell to see one row (what a query reads) or one column " +
                           "(who reads a key); click to keep it (Enter from the keyboard), Escape to let go.";
        return;
      }
      var best = -1, bw = -1, sum = 0;
      for (var k = 0; k < n; k++) {
        var w = f.kind === "row" ? W(st.layer, st.head, f.index, k) : W(st.layer, st.head, k, f.index);
        sum += w;
        if (w > bw) { bw = w; best = k; }
      }
      if (f.kind === "row") {
        info.setAttribute("data-query", f.index);
        info.setAttribute("data-top-key", best);
        h("b", {text: "query " + f.index + " “" + t.tokens[f.index] + "”"}, info);
        info.appendChild(document.createTextNode(" reads most from key " + best + " “" + t.tokens[best] + "”: "));
        h("b", {"data-role": "top-weight", text: bw.toFixed(4)}, info);
        info.appendChild(document.createTextNode("  (layer " + st.layer + ", head " + st.head +
          "; the row sums to " + sum.toFixed(3) + (f.index >= t.n_prompt ? "; a decode row" : "") + ")"));
      } else {
        info.setAttribute("data-key", f.index);
        info.setAttribute("data-top-query", best);
        h("b", {text: "key " + f.index + " “" + t.tokens[f.index] + "”"}, info);
        info.appendChild(document.createTextNode(" is read most by query " + best + " “" + t.tokens[best] + "”: "));
        h("b", {"data-role": "top-weight", text: bw.toFixed(4)}, info);
        info.appendChild(document.createTextNode("  (layer " + st.layer + ", head " + st.head + ")"));
      }
      info.setAttribute("data-top-weight", bw.toFixed(4));
    }

    // --- every layer and head at once: small multiples, click to select ---------------------
    // one orientation for every model: a column per layer (depth reads left to right), a row per head
    function buildOverview() {
      var t = TX(), m = M(), n = t.tokens.length, W = weights(m, t, data.w_scale);
      var cols = m.L, rows = m.h;
      var width = Math.min(root.clientWidth || 800, 900) - 80;
      var size = Math.max(14, Math.min(40, Math.floor(width / cols) - 3));
      V.clear(overview);
      h("div", {"class": "tfs-panel-title", text: "All " + m.L + " layers × " + m.h + " heads on this text" +
        " (click one to select it)"}, overview);
      var grid = h("div", {"class": "tfs-thumbs", "data-role": "overview",
                           style: {gridTemplateColumns: "56px repeat(" + cols + ", " + (size + 3) + "px)"}}, overview);
      h("span", {"class": "tfs-thumb-label tfs-thumb-rowlabel tfs-thumb-axis", "data-role": "overview-columns",
                 text: "layer →"}, grid);
      for (var c = 0; c < cols; c++) {
        h("span", {"class": "tfs-thumb-label", text: (c % (cols > 12 ? 3 : 1) === 0) ? String(c) : ""}, grid);
      }
      thumbs = [];
      for (var head = 0; head < rows; head++) {
        h("span", {"class": "tfs-thumb-label tfs-thumb-rowlabel", text: "head " + head}, grid);
        for (var layer = 0; layer < cols; layer++) {
          var cv = h("canvas", {width: n, height: n, "class": "tfs-thumb", "data-role": "thumb",
                                "data-layer": layer, "data-head": head, title: "layer " + layer + ", head " + head,
                                style: {width: size + "px", height: size + "px"}}, grid);
          paintThumb(cv, W, m, layer, head, n);
          (function (layer, head) {
            cv.addEventListener("click", function () { st.layer = layer; st.head = head; needLayer(); refresh(); });
          })(layer, head);
          thumbs.push(cv);
        }
      }
      V.keys(thumbs, {cols: cols, start: (st.head || 0) * cols + (st.layer || 0),  // Tab reaches the selected head
        label: function (k) { return thumbs[k].getAttribute("title"); }});  // one Tab stop, arrows across, Enter selects
      h("div", {"class": "tfs-muted tfs-small", text: "columns: layers 0–" + (m.L - 1) + ", rows: heads 0–" +
        (m.h - 1) + "; each square is one n × n map, query down, key across."}, overview);
    }

    function paintThumb(cv, W, m, layer, head, n) {
      var ctx = cv.getContext("2d"), img = ctx.createImageData(n, n);
      for (var i = 0; i < n; i++) {
        for (var j = 0; j < n; j++) {
          var rgb = m.causal && j > i ? [230, 230, 230] : V.bluesRgb(W(layer, head, i, j)), o = 4 * (i * n + j);
          img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
        }
      }
      ctx.putImageData(img, 0, 0);
    }

    // --- the decode rows: each generated token's query over the whole context so far -----------
    function drawDecode() {
      var t = TX(), m = M(), n = t.tokens.length, W = weights(m, t, data.w_scale);
      V.clear(decode);
      if (t.n_prompt >= n) return;
      h("div", {"class": "tfs-panel-title", text: "Decode rows, layer " + st.layer + ", head " + st.head +
        ": after the prefill, each generated token is one query against every key in the KV cache"}, decode);
      var c = Math.max(16, Math.min(40, Math.floor(560 / n))), left = 150, top = 74;
      var first = t.n_prompt - 1, rows = n - first;
      var width = left + n * c + 8, height = top + rows * (c + 4) + 4;
      var svg = s("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, "class": "tfs-svg",
                          "data-role": "decode-rows"}, decode);
      for (var k = 0; k < n; k++) {
        var cx = left + k * c + c / 2, cy = top - 6;
        s("text", {x: cx, y: cy, transform: "rotate(-55 " + cx + " " + cy + ")", "class": "tfs-tok-label",
                   fill: k >= t.n_prompt ? GEN : null, text: clip(t.tokens[k], 11)}, svg);
      }
      var cells = [];
      for (var r = 0; r < rows; r++) {
        var i = first + r, y = top + r * (c + 4), best = 0;
        for (var j = 0; j <= i; j++) if (W(st.layer, st.head, i, j) > W(st.layer, st.head, i, best)) best = j;
        s("text", {x: left - 6, y: y + c / 2 + 4, "text-anchor": "end", "class": "tfs-tok-label",
                   fill: r === 0 ? null : GEN,
                   text: r === 0 ? "prefill, last row" : "step " + r + ": " + clip(t.tokens[i], 9)}, svg);
        for (var jj = 0; jj < n; jj++) {
          var w = W(st.layer, st.head, i, jj), future = jj > i;
          var cell = s("rect", {x: left + jj * c, y: y, width: c - 1, height: c, fill: future ? "none" : V.blues(w),
                                stroke: future ? "#cfcfcf" : (jj === best ? GEN : "none"),
                                "stroke-dasharray": future ? "2 2" : null, "stroke-width": jj === best ? 2 : 1},
                       svg);
          s("title", {text: (r === 0 ? "prefill, last row “" : "step " + r + " “") + t.tokens[i] + "” → key " + jj +
            (future ? ": not in the cache yet" : " “" + t.tokens[jj] + "”: " + w.toFixed(4))}, cell);
          cells.push(cell);
        }
      }
      V.keys(cells, {cols: n, label: function (k) { return cells[k].querySelector("title").textContent; },
        show: h("p", {"class": "tfs-small", "data-role": "decode-info"}, decode),  // keyboard: Tab, arrows
        rest: "Hover a cell, or Tab to the rows and use the arrows, to read its weight."});
      h("div", {"class": "tfs-muted tfs-small", text: "Orange frame: the key each row reads most. Dashed: " +
        "positions not yet in the cache. Each row equals the same row of the full causal map (lesson 06)."}, decode);
    }

    // --- live: the reader's text, computed by the package (python -m transformer serve) ------------
    function runLive(text, layer) {  // -> Promise of a one-line note for the status
      var m = M(), body = {model: m.key, text: text, layer: layer === undefined ? st.layer : layer};
      if (m.n_new) body.new_tokens = m.n_new;
      return live.request("attention", body).then(function (d) {
        var entry = d.text, k = -1;
        entry.live = true;
        m.texts.forEach(function (t, i) { if (t.live) k = i; });  // one text of the reader's per model
        if (k < 0) { m.texts.push(entry); k = m.texts.length - 1; } else m.texts[k] = entry;
        st.t = k; st.focus = null; st.pinned = false;
        if (!holds(entry, st.layer)) st.layer = entry.layers[0];
        build();
        root.setAttribute("data-live", "ready");
        var one = entry.layers.length < m.L ? "A long text: one layer at a time (moving the layer computes it)." : "";
        return [d.note || "", one].join(" ").trim();
      });
    }
    function needLayer() {  // a long text holds one layer: ask for the one just picked (once the slider rests)
      var t = TX();
      if (!live || !t.live || holds(t, st.layer)) return;
      clearTimeout(layerTimer);
      layerTimer = setTimeout(function () {
        liveUi.status.textContent = "Computing layer " + st.layer + "…";
        runLive(t.text, st.layer).then(function (note) { liveUi.status.textContent = "Layer " + st.layer + " computed. " + note; },
                                       function (err) { liveUi.status.textContent = "Not computed: " + err.message; });
      }, 300);
    }

    defaults();
    st.t = Math.max(0, Math.min(M().texts.length - 1, intAttr(root, "data-text", 0)));
    build();
  }

  function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }
})();
