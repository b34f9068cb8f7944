// Filters by domain, tool, source and error. The state lives in location.hash
// ("#domain=terminal&source=fault&error=1"), so a filtered view is a link.
(function () {
  "use strict";
  var names = ["domain", "tool", "source", "error"];

  function readHash() {
    var state = {};
    var text = window.location.hash.replace(/^#/, "");
    if (text.indexOf("=") < 0) return state;  // a plain anchor, not a filter
    text.split("&").forEach(function (part) {
      var kv = part.split("=");
      if (kv.length === 2 && names.indexOf(kv[0]) >= 0) state[kv[0]] = decodeURIComponent(kv[1]);
    });
    return state;
  }

  function apply(state) {
    var shown = 0;
    document.querySelectorAll(".episode").forEach(function (episode) {
      var visible = 0;
      episode.querySelectorAll(".step").forEach(function (step) {
        var ok = names.every(function (n) {
          return !state[n] || step.getAttribute("data-" + n) === state[n];
        });
        step.hidden = !ok;
        if (ok) visible += 1;
      });
      episode.hidden = visible === 0;
      var entry = document.querySelector('.toc li[data-episode="' + episode.id + '"]');
      if (entry) entry.hidden = visible === 0;
      shown += visible;
    });
    var count = document.getElementById("shown-count");
    count.textContent = String(shown);
    count.setAttribute("data-shown", String(shown));
  }

  function fromControls() {
    var state = {};
    names.forEach(function (n) {
      var value = document.getElementById("filter-" + n).value;
      if (value) state[n] = value;
    });
    return state;
  }

  function toControls(state) {
    names.forEach(function (n) {
      document.getElementById("filter-" + n).value = state[n] || "";
    });
  }

  function onChange() {
    var state = fromControls();
    var parts = names.filter(function (n) { return state[n]; }).map(function (n) {
      return n + "=" + encodeURIComponent(state[n]);
    });
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : window.location.pathname);
    apply(state);
  }

  names.forEach(function (n) {
    document.getElementById("filter-" + n).addEventListener("change", onChange);
  });
  document.getElementById("filter-reset").addEventListener("click", function () {
    toControls({});
    onChange();
  });
  window.addEventListener("hashchange", function () {
    var state = readHash();
    toControls(state);
    apply(state);
  });
  var initial = readHash();
  toControls(initial);
  apply(initial);

  var refresh = Number(document.body.getAttribute("data-refresh"));
  if (refresh > 0) {
    // The live page: reload (keeping the filters in the hash) unless the reader is selecting.
    setInterval(function () {
      if (!String(window.getSelection())) window.location.reload();
    }, refresh * 1000);
  }
})();
