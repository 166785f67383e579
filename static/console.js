// The live funnel: a websocket brings a JSON snapshot every second and this
// script writes it into the server-rendered page. If the socket drops it
// reconnects with backoff and, meanwhile, polls /console/funnel.json.
(function () {
  "use strict";
  var root = document.getElementById("funnel");
  if (!root) return;
  var state = document.getElementById("live-state");
  var at = document.getElementById("funnel-at");
  var pollTimer = null, backoff = 1000;

  function pts(series, w, h) {
    var top = 1, i, out = [];
    for (i = 0; i < series.length; i++) top = Math.max(top, series[i]);
    var step = w / Math.max(series.length - 1, 1);
    for (i = 0; i < series.length; i++) out.push((i * step).toFixed(1) + "," + (h - series[i] * (h - 2) / top - 1).toFixed(1));
    return out.join(" ");
  }
  function pct(p) { return p < 0 ? "\u2013" : p.toFixed(1) + "%"; }
  function ms(v) { return v < 0 ? "\u2013" : v + " ms"; }
  function set(el, k, v) { var x = el.querySelector('[data-k="' + k + '"]'); if (x && x.textContent !== String(v)) x.textContent = v; }

  function apply(snap) {
    if (at) at.textContent = snap.at;
    (snap.shards || []).forEach(function (s) {
      var el = root.querySelector('[data-shard="' + s.id + '"]');
      if (!el) { location.reload(); return; } // a new shard: take the server's layout
      if (s.id !== 0) {
        set(el, "seats", s.seats_left); set(el, "held", s.held); set(el, "confirmed", s.confirmed); set(el, "epoch", s.epoch); set(el, "rate", s.admission_rate); set(el, "waiting", s.queue_waiting); set(el, "admitted", s.queue_admitted);
        var inv = el.querySelector('[data-k="inv"]');
        if (inv && s.checked) {
          inv.className = "pill " + (!s.ready ? "amber" : s.invariant_ok ? "green" : "red");
          inv.textContent = !s.ready ? "not loaded: refusing holds" : s.invariant_ok ? "invariants hold" : "VIOLATION: " + (s.violations || []).join("; ");
        }
      }
      var top = 1;
      s.stages.forEach(function (st) { top = Math.max(top, st.total); });
      s.stages.forEach(function (st) {
        var row = el.querySelector('tr[data-stage="' + st.stage + '"]');
        if (!row) return;
        set(row, "last", st.last_sec); set(row, "total", st.total); set(row, "p95", ms(st.p95_ms));
        if (st.conv_of) { var c = row.querySelector('[data-k="conv"] span'); if (c) c.textContent = pct(st.conv_pct); }
        var bar = row.querySelector('[data-k="bar"]'); if (bar) bar.setAttribute("width", (st.total * 100 / top).toFixed(1));
        var sp = row.querySelector('[data-k="spark"]'); if (sp) sp.setAttribute("points", pts(st.series, 120, 24));
      });
    });
    var routes = document.getElementById("routes");
    if (routes) (snap.routes || []).forEach(function (r) {
      var tr = routes.querySelector('tr[data-route="' + r.route + '"]');
      if (!tr) return;
      var td = tr.children;
      td[1].innerHTML = r.enabled ? String(r.weight) : '<span class="bad">off</span>';
      td[2].textContent = r.calls; td[3].textContent = pct(r.error_pct); td[4].textContent = ms(r.p95_ms);
      td[5].innerHTML = r.breaker_open ? '<span class="pill red">open</span>' : '<span class="pill green">closed</span>';
    });
  }

  function mode(m) { if (state) { state.textContent = m; state.className = m; } }

  function poll() {
    if (pollTimer) return;
    mode("polling");
    pollTimer = setInterval(function () {
      fetch(root.dataset.json, { credentials: "same-origin" }).then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) { if (s) apply(s); }).catch(function () {});
    }, 2000);
  }
  function stopPoll() { if (pollTimer) { clearInterval(pollTimer); pollTimer = null; } }

  function connect() {
    var ws;
    try { ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + root.dataset.ws); }
    catch (e) { poll(); setTimeout(connect, backoff); return; }
    ws.onopen = function () { backoff = 1000; stopPoll(); mode("live"); };
    ws.onmessage = function (ev) { try { apply(JSON.parse(ev.data)); } catch (e) {} };
    ws.onclose = function () { poll(); setTimeout(connect, backoff); backoff = Math.min(backoff * 2, 15000); };
  }
  connect();
})();
