/* clefgate console: the Live chart (uPlot), and the actions posted as JSON with the page's CSRF token. */
(function () {
  "use strict";
  var csrf = (document.querySelector("meta[name=csrf-token]") || {}).content || "";

  function post(url, body) {
    return fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (data) { return {ok: r.ok, status: r.status, data: data}; });
    });
  }
  function say(box, ok, text, items) {
    if (!box) return;
    box.textContent = "";
    var p = document.createElement("p");
    p.className = ok ? "ok" : "problem";
    p.setAttribute("role", ok ? "status" : "alert");
    p.textContent = text;
    box.appendChild(p);
    if (items && items.length) {
      var ul = document.createElement("ul");
      items.forEach(function (t) { var li = document.createElement("li"); li.textContent = t; ul.appendChild(li); });
      box.appendChild(ul);
    }
  }
  function problems(res) { return (res.data && (res.data.problems || [res.data.error])) || ["HTTP " + res.status]; }

  // ---- signing in and out with JSON (a plain form post works too, without JavaScript)
  var login = document.getElementById("login");
  if (login) login.addEventListener("submit", function (ev) {
    ev.preventDefault();
    post("/console/login", {token: login.token.value, next: login.next.value}).then(function (res) {
      if (res.ok) { location.assign(res.data.next); return; }
      var box = login.querySelector(".problem") || document.createElement("p");
      box.className = "problem"; box.setAttribute("role", "alert");
      box.textContent = (res.data && res.data.error) || ("HTTP " + res.status);
      login.insertBefore(box, login.firstChild);
    });
  });
  var logout = document.querySelector("form.logout");
  if (logout) logout.addEventListener("submit", function (ev) {
    ev.preventDefault();
    post("/console/logout", {}).then(function (res) { location.assign((res.data && res.data.next) || "/console/login"); });
  });

  // ---- Live chart
  var colours = {forward: ["#2e7d32", "#66bb6a", "#1b5e20", "#a5d6a7"], challenge: ["#b26a00", "#f9a825", "#8d4e00", "#ffcc80"],
                 block: ["#c62828", "#ef5350", "#8e0000", "#ef9a9a"]};
  var used = {};
  function colour(key) {
    var action = key.split("/")[0];
    var list = colours[action] || ["#455a64"];
    used[action] = used[action] || {};
    if (!(key in used[action])) used[action][key] = Object.keys(used[action]).length;
    return list[used[action][key] % list.length];
  }
  var chartBox = document.getElementById("chart");
  var plot = null;
  function draw(data) {
    if (!chartBox || !window.uPlot) return;
    var keys = Object.keys(data.series);
    var rows = [data.x].concat(keys.map(function (k) { return data.series[k]; }));
    var width = Math.max(300, chartBox.clientWidth);
    if (plot && plot.series.length === keys.length + 1) { plot.setData(rows); return; }
    if (plot) plot.destroy();
    var series = [{}].concat(keys.map(function (k) {
      return {label: k, stroke: colour(k), width: 2, points: {show: false}, value: function (u, v) { return v == null ? "–" : v.toFixed(2) + "/s"; }};
    }));
    plot = new window.uPlot({width: width, height: 260, series: series, axes: [{}, {label: "req/s"}],
                             scales: {x: {time: true}}, legend: {live: true}}, rows, chartBox);
  }
  var initial = document.getElementById("live-data");
  if (initial) {
    draw(JSON.parse(initial.textContent));
    setInterval(function () {
      fetch("/console/api/live", {credentials: "same-origin"}).then(function (r) { return r.ok ? r.json() : null; })
        .then(function (d) { if (d) draw(d.series); }).catch(function () {});
    }, 10000);
  }

  // ---- What if: replay under an edited policy
  var replay = document.getElementById("replay");
  if (replay) replay.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var box = document.getElementById("replay-result");
    say(box, true, "Replaying…");
    post("/console/api/replay", {policy: replay.policy.value, count: parseInt(replay.count.value, 10)}).then(function (res) {
      if (!res.ok) return say(box, false, "The replay did not run.", problems(res));
      var d = res.data;
      var lines = Object.keys(d.matrix).sort().map(function (k) { return k + ": " + d.matrix[k]; });
      say(box, true, d.replayed + " decisions replayed" + (d.model ? " with " + d.model : " without a model") +
          (d.model_error ? " (model: " + d.model_error + ")" : "") + "; " + d.changed_count + " would change (was→now):", lines);
      if (d.changed.length) {
        var table = document.createElement("table");
        table.innerHTML = "<thead><tr><th scope=col>reference</th><th scope=col>request</th><th scope=col>was</th>" +
          "<th scope=col>now</th><th scope=col>now because</th></tr></thead>";
        var body = document.createElement("tbody");
        d.changed.forEach(function (c) {
          var tr = document.createElement("tr");
          [c.request_id, c.request, c.was, c.now, c.now_reason].forEach(function (v, i) {
            var td = document.createElement("td");
            if (i === 0) { var a = document.createElement("a"); a.href = "/console/decision/" + encodeURIComponent(v); a.textContent = v; td.appendChild(a); }
            else td.textContent = v;
            if (i === 2 || i === 3) td.className = "v-" + v;
            tr.appendChild(td);
          });
          body.appendChild(tr);
        });
        table.appendChild(body);
        box.appendChild(table);
      }
    });
  });

  // ---- Actions
  var result = document.getElementById("action-result");
  function reloadSoon() { setTimeout(function () { location.reload(); }, 800); }
  var override = document.getElementById("override");
  if (override) {
    var wanted = new URLSearchParams(location.search).get("network");
    if (wanted) override.network.value = wanted;
    override.addEventListener("submit", function (ev) {
      ev.preventDefault();
      post("/console/api/override", {network: override.network.value, action: override.action.value,
                                     minutes: parseFloat(override.minutes.value), note: override.note.value}).then(function (res) {
        if (!res.ok) return say(result, false, "Not applied.", problems(res));
        say(result, true, "Applied: " + res.data.override.action + " " + res.data.override.network + ".");
        reloadSoon();
      });
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("[data-remove]"), function (button) {
    button.addEventListener("click", function () {
      post("/console/api/override/remove", {id: button.getAttribute("data-remove")}).then(function (res) {
        if (!res.ok) return say(result, false, "Not removed.", problems(res));
        say(result, true, "Removed."); reloadSoon();
      });
    });
  });
  var reload = document.getElementById("reload");
  if (reload) reload.addEventListener("submit", function (ev) {
    ev.preventDefault();
    say(result, true, "Reloading…");
    post("/console/api/reload", {}).then(function (res) {
      if (!res.ok) return say(result, false, "The reload was refused; the running config stays in force.", problems(res));
      say(result, true, "Reloaded: config generation " + res.data.generation + ".");
    });
  });
  var model = document.getElementById("model");
  if (model) model.addEventListener("submit", function (ev) {
    ev.preventDefault();
    say(result, true, "Loading the model…");
    post("/console/api/model", {version: model.version.value}).then(function (res) {
      if (!res.ok) return say(result, false, "The swap was refused; the running model stays.", problems(res));
      say(result, true, "Swapped: " + JSON.stringify(res.data.model));
    });
  });
})();
