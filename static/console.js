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

  // The charts come drawn: the server sends each line's points, this only
  // moves them, and shows a shard's own line once it is busy.
  function charts(c) {
    var box = document.getElementById("charts");
    if (!box || !c || !c.charts) return true;
    set(box, "from", c.from); set(box, "to", c.to); set(box, "quiet", c.quiet);
    var ok = true;
    (c.shards || []).forEach(function (s) {
      box.querySelectorAll('[data-line="' + s.id + '"]').forEach(function (el) {
        el.setAttribute("data-quiet", s.quiet ? "1" : "0");
        el.setAttribute("class", s["class"]);
      });
      var li = box.querySelector('li[data-line="' + s.id + '"]');
      if (li) { set(li, "events", s.events); li.parentNode.appendChild(li); } else ok = false; // busy first, as the server orders them
    });
    var sum = box.querySelector('li[data-line="-1"]'); if (sum) sum.parentNode.appendChild(sum);
    // The rush per shard, then p95 per stage and the payment routes.
    c.charts.concat(c.latency || [], c.routes || []).forEach(function (ch) {
      var fig = box.querySelector('[data-chart="' + ch.key + '"]');
      if (!fig) { ok = false; return; }
      set(fig, "peak", ch.peak); set(fig, "note", ch.note || "");
      ch.lines.forEach(function (l) {
        var pl = fig.querySelector('polyline[data-line="' + l.id + '"]');
        if (pl) pl.setAttribute("points", l.points); else ok = false;
      });
    });
    return ok;
  }

  function apply(snap) {
    if (at) at.textContent = snap.at;
    if (!charts(snap.charts)) { location.reload(); return; } // a new shard: take the server's layout
    (snap.shards || []).forEach(function (s) {
      var el = root.querySelector('[data-shard="' + s.id + '"]');
      if (!el) { location.reload(); return; } // a new shard: take the server's layout
      // A shard that turns busy opens; one that turns quiet stays as the operator left it.
      if (el.classList.contains("quiet") && !s.quiet) { el.classList.remove("quiet"); el.open = true; }
      if (s.id !== 0) {
        set(el, "seats", s.seats_left); set(el, "held", s.held); set(el, "confirmed", s.confirmed); set(el, "epoch", s.epoch); set(el, "rate", s.admission_rate); set(el, "throttle", s.shard_throttle); set(el, "waiting", s.queue_waiting); set(el, "admitted", s.queue_admitted);
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

// The sign-in challenge: after many failed sign-ins to an account, the
// server asks for a proof of work before it checks that account's password
// again. Find a nonce such that SHA-256(challenge + "|" + nonce) starts
// with `bits` zero bits (the server's token.LeadingZeroBits), then let the
// form be sent. Plain SHA-256 here: crypto.subtle is async per call (too
// slow for a million small hashes) and missing outside secure contexts.
(function () {
  "use strict";
  var box = document.querySelector("[data-challenge]");
  if (!box) return;
  var K = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2];
  var W = new Int32Array(64), M = new Int32Array(32), H = new Int32Array(8);

  // SHA-256 of an ASCII string of at most 119 characters (two blocks; a
  // challenge and its nonce take one), into H. No allocation: it runs
  // about a quarter of a million times.
  function sha256(s) {
    var l = s.length, n = ((l + 9 + 63) >> 6) << 4, w = M, i, j, t;
    for (i = 0; i < n; i++) w[i] = 0;
    for (i = 0; i < l; i++) w[i >> 2] |= s.charCodeAt(i) << (24 - (i & 3) * 8);
    w[l >> 2] |= 0x80 << (24 - (l & 3) * 8);
    w[n - 1] = l * 8;
    H[0] = 0x6a09e667; H[1] = 0xbb67ae85; H[2] = 0x3c6ef372; H[3] = 0xa54ff53a;
    H[4] = 0x510e527f; H[5] = 0x9b05688c; H[6] = 0x1f83d9ab; H[7] = 0x5be0cd19;
    for (j = 0; j < n; j += 16) {
      var a = H[0], b = H[1], c = H[2], d = H[3], e = H[4], f = H[5], g = H[6], h = H[7];
      for (t = 0; t < 64; t++) {
        if (t < 16) {
          W[t] = w[j + t];
        } else {
          var x = W[t - 15], y = W[t - 2];
          W[t] = (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) +
            (((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10)) + W[t - 7] + W[t - 16] | 0;
        }
        var t1 = h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) +
          ((e & f) ^ (~e & g)) + K[t] + W[t] | 0;
        var t2 = (((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
          ((a & b) ^ (a & c) ^ (b & c)) | 0;
        h = g; g = f; f = e; e = d + t1 | 0; d = c; c = b; b = a; a = t1 + t2 | 0;
      }
      H[0] = H[0] + a | 0; H[1] = H[1] + b | 0; H[2] = H[2] + c | 0; H[3] = H[3] + d | 0;
      H[4] = H[4] + e | 0; H[5] = H[5] + f | 0; H[6] = H[6] + g | 0; H[7] = H[7] + h | 0;
    }
    return H;
  }
  function zeroBits(H) {
    var n = 0, i;
    for (i = 0; i < H.length; i++) {
      if (H[i] !== 0) return n + Math.clz32(H[i]);
      n += 32;
    }
    return n;
  }

  var challenge = box.getAttribute("data-challenge");
  var bits = parseInt(box.getAttribute("data-bits"), 10);
  var nonce = box.querySelector("input[name=nonce]");
  var status = box.querySelector("[data-testid=challenge-status]");
  var submit = box.form && box.form.querySelector("button[type=submit]");
  if (submit) submit.disabled = true;
  status.textContent = "Your browser is solving a short puzzle that lets you sign in now; this takes a few seconds\u2026";
  var prefix = challenge + "|", i = 0;
  function work() {
    for (var end = i + 20000; i < end; i++) {
      if (zeroBits(sha256(prefix + i)) >= bits) {
        nonce.value = String(i);
        status.textContent = "Puzzle solved. Enter your password and sign in.";
        box.setAttribute("data-solved", "1");
        if (submit) submit.disabled = false;
        return;
      }
    }
    setTimeout(work, 0);
  }
  setTimeout(work, 0);
})();

// The exception list's select-all: one checkbox (hidden without this
// script) that ticks or clears every row shown, for the bulk form it names.
(function () {
  "use strict";
  document.querySelectorAll("input[data-select-all]").forEach(function (all) {
    var form = all.getAttribute("data-select-all");
    var rows = function () { return document.querySelectorAll('input[type=checkbox][name=id][form="' + form + '"]'); };
    if (rows().length === 0) return;
    all.hidden = false;
    all.addEventListener("change", function () {
      rows().forEach(function (box) { box.checked = all.checked; });
      all.indeterminate = false;
    });
    document.addEventListener("change", function (ev) {
      var t = ev.target;
      if (t === all || t.name !== "id" || t.getAttribute("form") !== form) return;
      var n = 0, list = rows();
      list.forEach(function (box) { if (box.checked) n++; });
      all.checked = n === list.length;
      all.indeterminate = n > 0 && n < list.length;
    });
  });
})();
