/* clefgate challenge page: run the proof-of-work in Web Workers, show progress, post the answer. */
(function () {
  "use strict";
  // the puzzle's progress is shown only once this script runs: without JavaScript the page says what really happens
  document.getElementById("cg-js").hidden = false;
  var form = document.getElementById("cg-form");
  var status = document.getElementById("cg-status");
  var bar = document.getElementById("cg-bar");
  var nonce = form.getAttribute("data-nonce");
  var difficulty = parseInt(form.getAttribute("data-difficulty"), 10);
  var expected = Math.pow(2, difficulty), tried = 0, done = false, workers = [];

  function show() {
    // the probability of having found a solution by now: honest, monotone, never 100% early
    var pct = Math.min(99, Math.floor(100 * (1 - Math.exp(-tried / expected))));
    bar.value = pct;
    status.textContent = form.getAttribute("data-progress").replace("{pct}", pct);
  }
  function finish(counter) {
    if (done) return;
    done = true;
    workers.forEach(function (w) { w.terminate(); });
    bar.value = 100;
    status.textContent = form.getAttribute("data-done");
    document.getElementById("cg-counter").value = String(counter);
    form.submit();
  }
  function fail() {
    if (!done) status.textContent = form.getAttribute("data-failed");
  }
  function onPage() {  // no Web Workers: solve on the page in slices, staying responsive
    var counter = 0;
    (function slice() {
      var r = clefgatePow(nonce, difficulty, counter, 1, 20000);
      if (r.found !== undefined) return finish(r.found);
      tried += r.tried; counter = r.next; show();
      setTimeout(slice, 0);
    })();
  }

  show();
  var count = Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1));
  try {
    var url = URL.createObjectURL(new Blob([document.getElementById("cg-worker").textContent], {type: "text/javascript"}));
    for (var i = 0; i < count; i++) {
      var w = new Worker(url);
      w.onmessage = function (ev) {
        if (ev.data.found !== undefined) finish(ev.data.found);
        else { tried += ev.data.tried; show(); }
      };
      w.onerror = function (ev) { ev.preventDefault(); if (!done && workers.length) { workers = []; onPage(); } else fail(); };
      w.postMessage({nonce: nonce, difficulty: difficulty, start: i, step: count});
      workers.push(w);
    }
  } catch (e) {
    onPage();
  }
})();
