/* Live mode: a view that takes the reader's own text, when `python -m transformer serve` serves the page.
 *
 * That server adds <meta name="tfs-live-api" content="/api/"> to every page it serves; a static host
 * (or a page opened from file://) has no such tag, and the views keep their precomputed texts, saying
 * so in one line. Nothing here runs a model: the text goes to the API, which answers with the
 * package's own numbers (transformer/cli/serve_api.py), in the shape site/export_views.py exports.
 *
 *   TFS_LIVE.available()                       is the API here?
 *   TFS_LIVE.request(endpoint, body)           -> Promise of the answer's JSON, or an Error(one line)
 *   TFS_LIVE.textBox(parent, V, o)             the text box (data-role="live-text"), its button and a
 *                                              status line; o: {placeholder, submit(text) -> Promise}
 *   TFS_LIVE.fallback(parent, V, what)         the one-line note of a static host
 *
 * The only network request a view makes, and only to the page's own server (same origin).
 */
(function () {
  "use strict";
  function base() {
    var m = document.querySelector('meta[name="tfs-live-api"]');
    return m && /^https?:$/.test(location.protocol) ? m.getAttribute("content") : null;
  }

  function request(endpoint, body) {
    var url = base() + endpoint;
    return window.fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                              body: JSON.stringify(body)})
      .then(function (r) {
        return r.json().then(function (d) {
          if (!r.ok) throw new Error(d && d.error ? d.error : "HTTP " + r.status);
          return d;
        }, function () { throw new Error("the server answered HTTP " + r.status + " without JSON"); });
      }, function () { throw new Error("the server does not answer: is `python -m transformer serve` still running?"); });
  }

  function textBox(parent, V, o) {
    var box = V.h("form", {"class": "tfs-live", "data-role": "live"}, parent);
    var input = V.h("input", {type: "text", "class": "tfs-live-text", "data-role": "live-text", maxlength: 4000,
                              placeholder: o.placeholder || "type a sentence", "aria-label": "your text"}, box);
    var button = V.h("button", {type: "submit", "class": "tfs-button", "data-role": "live-submit",
                                text: "run the model"}, box);
    // role=status: a screen reader says "Running…", then the time or the error, without moving the focus
    var status = V.h("p", {"class": "tfs-small tfs-muted", "data-role": "live-status", role: "status",
                           "aria-live": "polite",
                           text: "Served by python -m transformer serve: type your own text, the real model reads it."},
                     parent);
    box.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var text = input.value;
      if (!text.trim()) { status.textContent = "Type a text first."; return; }
      button.disabled = true;
      status.setAttribute("data-state", "busy");
      status.textContent = "Running the model on your text…";
      var t0 = Date.now();
      o.submit(text).then(function (note) {
        status.setAttribute("data-state", "done");
        status.textContent = "Computed by the package on the real model in " + ((Date.now() - t0) / 1000).toFixed(1) +
          " s." + (note ? " " + note : "");
      }, function (err) {
        status.setAttribute("data-state", "error");
        status.textContent = "Not computed: " + err.message;
      }).then(function () { button.disabled = false; });
    });
    return {input: input, status: status};
  }

  function fallback(parent, V, what) {
    var note = V.h("p", {"class": "tfs-small tfs-muted", "data-role": "live-note",
                         text: "Precomputed " + what + " only: run "}, parent);
    V.h("code", {text: "python -m transformer serve"}, note);
    note.appendChild(document.createTextNode(" and open the page it serves to try your own text."));
    return note;
  }

  window.TFS_LIVE = {available: function () { return !!base(); }, request: request, textBox: textBox,
                     fallback: fallback};
})();
