/* The paged KV cache: a pool of blocks shared by requests that arrive, grow and finish.
 *
 * Placeholder: <div class="tfs-view" data-view="paged_kv" data-event="0"></div>
 * Data: data/paged_kv.js (site/export_views.py): a scripted stream of requests replayed on a real
 * T.PagedKVCache, and after every event its block tables, free list and memory_report(), with
 * T.paged_memory_report's contiguous preallocation beside it. Nothing is recomputed here.
 */
(function () {
  "use strict";
  var SRC = document.currentScript ? document.currentScript.src : "";
  (window.TFS_VIEWS_PENDING = window.TFS_VIEWS_PENDING || []).push({name: "paged_kv", src: SRC, draw: draw,
    title: "The paged KV cache: requests arrive, grow and finish"});
  if (window.TFS_VIEWS) window.TFS_VIEWS.flush();

  function draw(root, d, V) {
    var h = V.h, s = V.s, E = d.events.length - 1;
    var colour = {};
    d.requests.split("").forEach(function (r, k) { colour[r] = V.COLORS.lines[k]; });
    var st = {e: Math.min(E, parseInt(root.getAttribute("data-event"), 10) || 0)};

    h("p", {"class": "tfs-sentence", text: "A pool of " + d.n_blocks + " blocks of B = " + d.block_size +
      " positions, with SmolLM2's shapes (L = " + d.L + ", h_kv = " + d.h_kv + ", d_h = " + d.d_h + ", " + d.dtype +
      "): " + V.fmtInt(d.bytes_per_token) + " bytes per token, " + V.fmtBytes(d.block_size * d.bytes_per_token) +
      " per block. Requests arrive with a prompt, decode one token per step, and finish."}, root);
    var stepper = V.stepper(root, {label: "event", max: E, value: st.e, role: "event", interval: 1100,
      format: function (v) { return (v + 1) + " / " + (E + 1); }, onInput: function (v) { st.e = v; render(); }});
    var caption = h("p", {"class": "tfs-info", "data-role": "paged-info"}, root);
    var pool = h("div", {"class": "tfs-section"}, root);
    V.legend(root, [["#888", "slot holding a token's K and V (request colour)"],
                    ["#fff", "reserved, not yet filled", {border: "2px solid #888",
                      background: "repeating-linear-gradient(45deg, #fff 0 3px, #bbb 3px 4px)"}],
                    [V.COLORS.off, "free block"]]);
    var panels = h("div", {"class": "tfs-panels tfs-section"}, root);
    var tables = h("div", {"class": "tfs-panel"}, panels);
    var stats = h("div", {"class": "tfs-panel"}, panels);

    function describe(ev, prev) {
      var taken = function (r) {
        var before = (prev && prev.tables[r]) || [];
        return (ev.tables[r] || []).filter(function (b) { return before.indexOf(b) < 0; });
      };
      if (ev.what === "arrive") {
        return "Request " + ev.who + " arrives with a " + ev.tokens + "-token prompt (prefill): it takes blocks " +
               list(taken(ev.who)) + " from the free list.";
      }
      if (ev.what === "finish") {
        var freed = prev.tables[ev.who];
        return "Request " + ev.who + " finishes: its blocks " + list(freed) + " go back on the free list.";
      }
      var grew = ev.who.split("").map(function (r) {
        var t = taken(r);
        return r + (t.length ? " takes block " + list(t) + " (its last block was full)" : " fits in its last block");
      });
      return "Decode step: " + ev.who.split("").join(", ") + " each store one more token. " + grew.join("; ") + ".";
    }

    function render() {
      stepper.set(st.e);
      root.setAttribute("data-current-event", st.e);
      var ev = d.events[st.e], prev = st.e > 0 ? d.events[st.e - 1] : null;
      caption.textContent = describe(ev, prev);
      drawPool(ev);
      drawTables(ev);
      drawStats(ev);
    }

    function drawPool(ev) {
      V.clear(pool);
      var B = d.block_size, sw = 14, gap = 10, bw = B * sw, left = 4, top = 26;
      var avail = Math.max(480, Math.min(root.clientWidth || 860, 900) - 40);
      var perRow = Math.max(1, Math.min(d.n_blocks, Math.floor((avail - left) / (bw + gap))));
      var rows = Math.ceil(d.n_blocks / perRow), rh = 64;
      var width = left + perRow * (bw + gap), height = rows * rh + 6;
      h("div", {"class": "tfs-panel-title", text: "The pool: block ids 0–" + (d.n_blocks - 1) + ", one table serves all " +
        d.L + " layers"}, pool);
      var svg = s("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, "class": "tfs-svg",
                          "data-role": "pool"}, pool);
      var defs = s("defs", {}, svg);
      Object.keys(colour).forEach(function (r) {
        var p = s("pattern", {id: "tfs-hatch-" + r + "-" + uid, width: 5, height: 5, patternUnits: "userSpaceOnUse",
                              patternTransform: "rotate(45)"}, defs);
        s("rect", {width: 5, height: 5, fill: "#fff"}, p);
        s("line", {x1: 0, y1: 0, x2: 0, y2: 5, stroke: colour[r], "stroke-width": 1.5, "stroke-opacity": 0.6}, p);
      });
      var owner = {}, filled = {};
      Object.keys(ev.tables).forEach(function (r) {
        ev.tables[r].forEach(function (b, k) {
          owner[b] = r;
          filled[b] = Math.max(0, Math.min(B, ev.lengths[r] - k * B));
        });
      });
      for (var b = 0; b < d.n_blocks; b++) {
        var x0 = left + (b % perRow) * (bw + gap), y0 = Math.floor(b / perRow) * rh + top - 20, r = owner[b];
        var g = s("g", {"data-role": "block", "data-block": b, "data-owner": r || "", "data-filled": r ? filled[b] : 0},
                  svg);
        for (var k = 0; k < B; k++) {
          var used = r && k < filled[b];
          s("rect", {x: x0 + k * sw + 0.5, y: y0 + 14, width: sw - 2, height: 24, rx: 2,
                     fill: used ? colour[r] : r ? "url(#tfs-hatch-" + r + "-" + uid + ")" : V.COLORS.off,
                     stroke: r ? colour[r] : "#cfcfcf", "stroke-width": 1.2}, g);
        }
        s("text", {x: x0 + bw / 2, y: y0 + 52, "text-anchor": "middle", "class": "tfs-axis", text: "block " + b}, g);
        if (r) {
          s("text", {x: x0 + bw / 2, y: y0 + 10, "text-anchor": "middle", "class": "tfs-label", fill: colour[r],
                     "font-weight": 700, text: r}, g);
        }
        s("title", {text: r ? "block " + b + ": request " + r + ", " + filled[b] + " of " + B + " slots filled"
                            : "block " + b + ": free"}, g);
      }
      blockKeys(svg, perRow);
    }

    function blockKeys(svg, perRow) {  // keyboard: one Tab stop on the pool, arrows across and down its rows
      var blocks = Array.prototype.slice.call(svg.querySelectorAll('[data-role="block"]'));
      V.keys(blocks, {cols: perRow, label: function (k) { return blocks[k].querySelector("title").textContent; },
        show: h("p", {"class": "tfs-small", "data-role": "block-info"}, pool),
        rest: "Hover a block, or Tab to the pool and use the arrows, to read it."});
    }

    function drawTables(ev) {
      V.clear(tables);
      h("div", {"class": "tfs-panel-title", text: "Block tables (position p → block table[p // " + d.block_size +
        "], slot p % " + d.block_size + ")"}, tables);
      var names = Object.keys(ev.tables);
      if (!names.length) h("p", {"class": "tfs-muted", text: "no request is running"}, tables);
      names.forEach(function (r) {
        var line = h("div", {"class": "tfs-table-line", "data-role": "paged-table", "data-request": r,
                             "data-blocks": ev.tables[r].join(","), "data-length": ev.lengths[r]}, tables);
        h("span", {"class": "tfs-req", style: {background: colour[r]}, text: r}, line);
        h("span", {"class": "tfs-muted", text: ev.lengths[r] + " tokens → "}, line);
        ev.tables[r].forEach(function (b) { h("span", {"class": "tfs-blockid", style: {borderColor: colour[r]}, text: b}, line); });
      });
      var free = h("div", {"class": "tfs-table-line", "data-role": "paged-free", "data-blocks": ev.free.join(",")}, tables);
      h("span", {"class": "tfs-req", style: {background: "#9a9a9a"}, text: "free"}, free);
      h("span", {"class": "tfs-muted", text: ev.free.length + " blocks, a stack → "}, free);
      ev.free.forEach(function (b, k) {
        h("span", {"class": "tfs-blockid" + (k === ev.free.length - 1 ? " tfs-next-block" : ""), text: b}, free);
      });
      if (ev.free.length) h("span", {"class": "tfs-muted tfs-small", text: " ← handed out next"}, free);
    }

    function drawStats(ev) {
      V.clear(stats);
      var rep = ev.report;
      h("div", {"class": "tfs-panel-title", text: "Memory (measured on the PagedKVCache)"}, stats);
      var tbl = h("table", {"class": "tfs-table tfs-table-notes"}, stats);  // a phone: each note under its row
      function line(label, value, role, note) {
        var tr = h("tr", {}, tbl);
        h("td", {text: label}, tr);
        h("td", {"data-role": role, "data-bytes": value, text: value === null ? "—" : V.fmtBytes(value)}, tr);
        h("td", {"class": "tfs-muted", text: note || ""}, tr);
      }
      line("used", rep.used, "paged-used", rep.tokens + " tokens × " + V.fmtInt(rep.bytes_per_token) + " B");
      line("reserved (whole blocks)", rep.paged_reserved, "paged-reserved",
           rep.blocks + " blocks × " + d.block_size + " × " + V.fmtInt(rep.bytes_per_token) + " B");
      line("waste: unfilled last slots", rep.paged_waste, "paged-waste",
           rep.paged_reserved ? "utilisation " + (100 * rep.used / rep.paged_reserved).toFixed(0) + " %" : "");
      line("contiguous, n_max = " + d.n_max + " each", ev.contiguous_reserved, "contiguous-reserved",
           ev.contiguous_reserved ? "paged_memory_report: " + (ev.contiguous_reserved / rep.paged_reserved).toFixed(1) +
                                    "× the paged reservation" : "");
      line("the pool (.nbytes)", rep.pool, "pool-bytes", d.n_blocks + " blocks, allocated once");
    }

    render();
  }

  var uid = Math.random().toString(36).slice(2, 8);  // pattern ids unique on the page
  function list(a) { return a && a.length ? a.join(", ") : "none"; }
})();
