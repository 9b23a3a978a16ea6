// The console's operator actions, and its live pages. The API token is
// typed once, kept in this tab's sessionStorage and sent as a bearer token
// to the JSON API; it never goes into a URL. Everything from the API is
// written with textContent, never as HTML; a live page swaps in parts of
// the same page, rendered and escaped by the server.
"use strict";
(function () {
  var KEY = "gitfleet-api-token";
  function token() { return sessionStorage.getItem(KEY) || ""; }
  function $(id) { return document.getElementById(id); }

  function say(text, failed) {
    var p = $("action-result");
    p.textContent = text;
    p.className = failed ? "result failed" : "result";
    p.hidden = false;
  }

  function showToken() {
    var has = token() !== "";
    $("token-state").textContent = has ? "operator" : "read-only";
    $("token-input").hidden = has;
    $("token-save").hidden = has;
    $("token-forget").hidden = !has;
    document.querySelectorAll("button.op").forEach(function (b) {
      b.title = has ? "" : "needs the API token";
    });
  }

  // call sends an API request with the token and returns the decoded JSON
  // answer (or null) and the status.
  function call(method, url) {
    var headers = {};
    if (token()) { headers.Authorization = "Bearer " + token(); }
    return fetch(url, { method: method, headers: headers, credentials: "omit", cache: "no-store" })
      .then(function (resp) {
        return resp.text().then(function (text) {
          var body = null;
          try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
          return { status: resp.status, ok: resp.ok, body: body };
        });
      });
  }

  function errorOf(r) {
    return (r.body && r.body.error) ? r.body.error : "HTTP " + r.status;
  }

  // A task of "fetch now": followed until it ends, with its cancel button.
  var current = null;
  function follow(id) {
    current = id;
    var state = $("task-state"), cancel = $("cancel-task");
    if (cancel) {
      cancel.disabled = false;
      cancel.dataset.url = "/api/v1/tasks/" + encodeURIComponent(id) + "/cancel";
      cancel.dataset.method = "POST";
    }
    function poll() {
      if (current !== id) { return; }
      call("GET", "/api/v1/tasks/" + encodeURIComponent(id) + "?wait=10s").then(function (r) {
        if (!r.ok) { state.textContent = "task " + id + ": " + errorOf(r); return; }
        var t = r.body;
        state.textContent = "task " + t.id + ": " + t.state + (t.error ? " (" + t.error + ")" : "");
        state.dataset.state = t.state;
        if (t.state === "queued" || t.state === "running") {
          setTimeout(poll, 500);
        } else if (cancel) {
          cancel.disabled = true;
        }
      }, function (e) { state.textContent = "task " + id + ": " + e; });
    }
    poll();
  }

  function act(b) {
    if (!token()) { say("Enter the API token first (top right).", true); $("token-input").focus(); return; }
    if (b.dataset.confirm && !window.confirm(b.dataset.confirm)) { return; }
    b.disabled = true;
    call(b.dataset.method, b.dataset.url).then(function (r) {
      b.disabled = false;
      if (!r.ok) {
        var msg = errorOf(r);
        if (r.status === 404 && b.dataset.action === "cancel") { msg = "cancelling is not available on this mirror (" + msg + ")"; }
        say(b.textContent + ": " + msg, true);
        return;
      }
      switch (b.dataset.action) {
        case "fetch": say("Fetch requested: task " + r.body.id + "."); follow(r.body.id); break;
        case "cancel": say("Cancel requested."); if (b.closest("tr")) { loadTasks(); } break;
        case "remove": say("Removed from the mirror."); break;
        case "revoke": say("Node revoked."); break;
        case "confirm-purge": say((r.body && r.body.message) || "Removals confirmed."); break;
        default: say("Done.");
      }
    }, function (e) { b.disabled = false; say(b.textContent + ": " + e, true); });
  }

  function loadTasks() {
    var state = $("tasks-state"), table = $("task-table");
    call("GET", "/api/v1/tasks").then(function (r) {
      if (r.status === 404) {
        state.textContent = "This mirror's API has no task listing (GET /api/v1/tasks answers 404).";
        return;
      }
      if (!r.ok) { state.textContent = "Could not read the tasks: " + errorOf(r); return; }
      var tasks = Array.isArray(r.body) ? r.body : (r.body && r.body.tasks) || [];
      var body = table.tBodies[0];
      body.textContent = "";
      tasks.forEach(function (t) {
        var tr = document.createElement("tr");
        [t.id, t.key, t.state, t.created, t.error || ""].forEach(function (v, i) {
          var td = document.createElement("td");
          if (i === 1) {
            var a = document.createElement("a");
            a.href = "/-/repos/" + String(v).split("/").map(encodeURIComponent).join("/");
            a.textContent = v;
            td.appendChild(a);
          } else {
            td.textContent = v;
          }
          tr.appendChild(td);
        });
        var td = document.createElement("td");
        if (t.state === "queued" || t.state === "running") {
          var b = document.createElement("button");
          b.className = "op danger";
          b.textContent = "Cancel";
          b.dataset.action = "cancel";
          b.dataset.method = "POST";
          b.dataset.url = "/api/v1/tasks/" + encodeURIComponent(t.id) + "/cancel";
          td.appendChild(b);
        }
        tr.appendChild(td);
        body.appendChild(tr);
      });
      state.textContent = tasks.length + " tasks.";
      table.hidden = false;
    }, function (e) { state.textContent = "Could not read the tasks: " + e; });
  }

  // details shows the operator the error texts that public pages show as
  // classes only, read from the API with the token: the repository's last
  // error, and its log's errors, entry by entry.
  function details() {
    var box = $("repo-actions");
    if (!box || !token()) { return; }
    call("GET", box.dataset.api).then(function (r) {
      var last = $("last-error");
      if (r.ok && r.body && last && r.body.last_error) { last.textContent = r.body.last_error; }
    });
    var log = $("log");
    if (!log || !log.dataset.api) { return; }
    call("GET", log.dataset.api).then(function (r) {
      if (!r.ok || !r.body || !Array.isArray(r.body.entries)) { return; }
      var byID = {};
      r.body.entries.forEach(function (e) { if (e.error) { byID[e.id] = e.error; } });
      log.querySelectorAll("tr[data-id]").forEach(function (tr) {
        var cell = tr.querySelector("td.log-error");
        if (cell && byID[tr.dataset.id]) { cell.textContent = byID[tr.dataset.id]; }
      });
    });
  }

  // live keeps a page's live parts (the elements with data-live and an
  // id) up to date: when the full node's event stream says that refs
  // changed (on a repository's page: its own), and every LIVE_EVERY for
  // what the stream does not tell (checks that change nothing, the time
  // since verified_at), the page is fetched again and those parts are
  // swapped for the new ones. The server's HTML is parsed into an inert
  // document: nothing in it runs. Without EventSource the page polls.
  var LIVE_EVERY = 30000;
  function live() {
    if (!document.querySelector("[data-live]")) { return; }
    var state = $("live-state"), keyed = document.querySelector("[data-key]");
    var key = keyed ? keyed.dataset.key : "", busy = false, again = "", timer = null;
    function show(text, on) {
      state.textContent = text;
      state.className = on ? "live" : "live off";
      state.hidden = false;
    }
    // done ends an update, and starts the one asked for meanwhile.
    function done() {
      busy = false;
      if (again) { var why = again; again = ""; refresh(why); }
    }
    function refresh(why) {
      if (busy) { again = again === "event" ? again : why; return; }
      busy = true;
      fetch(location.href, { credentials: "omit", cache: "no-store" }).then(function (resp) {
        return resp.ok ? resp.text() : null;
      }).then(function (text) {
        if (text === null) { done(); return; }
        var doc = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live], #rendered").forEach(function (el) {
          var fresh = el.id ? doc.getElementById(el.id) : null;
          if (fresh) { el.replaceWith(document.importNode(fresh, true)); }
        });
        // How many updates came of each cause (data-event, data-timer).
        document.body.dataset[why] = String(Number(document.body.dataset[why] || 0) + 1);
        var at = $("rendered");
        show("live, updated " + (at ? at.textContent.slice(11, 19) : ""), true);
        details();
        done();
      }, function () { show("offline: the page is as it was", false); done(); });
    }
    function soon(why) {
      if (timer === null) { timer = setTimeout(function () { timer = null; refresh(why); }, 300); }
    }
    setInterval(function () { refresh("timer"); }, LIVE_EVERY);
    if (!window.EventSource) { show("updated every 30 s", true); return; }
    var events = new EventSource("/api/v1/events");
    events.onopen = function () { show("live", true); };
    events.onerror = function () { show("reconnecting to the event stream", false); };
    events.onmessage = function (ev) {
      if (key) {
        var e = null;
        try { e = JSON.parse(ev.data); } catch (x) { return; }
        if (!e || e.key !== key) { return; }
      }
      soon("event");
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("token-form").addEventListener("submit", function (ev) {
      ev.preventDefault();
      var v = $("token-input").value.trim();
      $("token-input").value = "";
      if (v) { sessionStorage.setItem(KEY, v); }
      showToken();
      details();
    });
    $("token-forget").addEventListener("click", function () { sessionStorage.removeItem(KEY); showToken(); });
    document.addEventListener("click", function (ev) {
      var b = ev.target.closest("button.op");
      if (b && b.dataset.url) { act(b); }
    });
    showToken();
    details();
    if ($("task-table")) { loadTasks(); }
    live();
  });
})();
