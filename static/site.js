// The passenger site's enhancements; every page works without them.
// Countdowns follow the server's clock: the offset comes from
// POST /v1/session/prepare (server_time_offset_ms), asked ahead and kept
// for the tab (sync).
(function () {
  "use strict";
  var offsetMs = 0;
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function fmt(ms) {
    if (ms < 0) ms = 0;
    var s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s = s % 60;
    return (h > 0 ? h + ":" + pad(m) : m) + ":" + pad(s);
  }
  // How long this tab has waited in the waiting room (kept per queue for
  // the tab, so the page's own updates do not restart it).
  function elapsed() {
    var el = document.querySelector("[data-elapsed]");
    if (!el) return;
    var key = "tk_q_since_" + location.pathname + location.search, since;
    try {
      since = parseInt(sessionStorage.getItem(key) || "", 10);
      if (!(since > 0)) { since = Date.now(); sessionStorage.setItem(key, String(since)); }
    } catch (e) { since = since || Date.now(); }
    el.hidden = false;
    var c = el.querySelector(".clock");
    if (c) c.textContent = fmt(Date.now() - since);
  }
  function tick() {
    elapsed();
    var now = Date.now() + offsetMs;
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var left = Date.parse(el.getAttribute("data-countdown")) - now;
      var clock = el.querySelector(".clock");
      if (clock) clock.textContent = fmt(left);
      el.classList.toggle("low", left < 30000);
      var unlock = el.getAttribute("data-unlock");
      var b = unlock && document.getElementById(unlock);
      if (b && b.hasAttribute("data-off")) b = null; // off for a reason the server gave (no tickets left)
      // The page renders Hold enabled (it must work without this script,
      // the server refusing an early hold); here it waits for the opening.
      if (b && left > 0 && !b.dataset.locked) {
        b.dataset.locked = "1";
        b.disabled = true;
      }
      if (b && left <= 0 && b.dataset.locked === "1") {
        // A small random jitter, so clocks aligned to the millisecond do not
        // all fire at once (seeds/000 section 4.2); fair in expectation.
        b.dataset.locked = "2";
        setTimeout(function () { b.dataset.open = "1"; enable(b); }, Math.random() * 200);
      }
      if (left <= 0 && el.hasAttribute("data-opening")) opened(el);
    });
    solve(); // the booking check starts shortly before the opening
  }
  // The hold button opens once the window is open (its countdown, if any,
  // has run out) and the booking check is solved (if the form has one).
  // A page loaded after the opening was never locked by its countdown; a
  // button off for a reason the server gave (data-off) stays off.
  function enable(b) {
    var box = document.querySelector("[data-challenge][data-unlock='" + b.id + "']");
    if (b.hasAttribute("data-off") || b.dataset.locked === "1") return;
    if (!box || box.getAttribute("data-solved")) b.disabled = false;
  }
  // The window opens: the page says so where it said "not open yet", the
  // countdown goes, and the passengers come into view (Hold is in the bar
  // fixed at the bottom of a phone's screen).
  function opened(box) {
    box.removeAttribute("data-opening");
    box.hidden = true;
    document.querySelectorAll("[data-before-open]").forEach(function (p) { p.hidden = true; });
    var dd = document.querySelector("[data-open-text]"), dt = document.querySelector("[data-open-dt]");
    if (dd) { dd.textContent = dd.getAttribute("data-open-text"); dd.className = "band band-AVAILABLE"; }
    if (dt) dt.textContent = dt.getAttribute("data-open-dt");
    var now = document.querySelector("[data-open-now]");
    if (now) now.hidden = false;
    var who = document.querySelector("[data-pax-max]");
    if (who) who.scrollIntoView({ block: "start" });
  }
  // Every button that posts shows at once that the work has started: its
  // words change (data-busy, else the page's data-busy-text) and it is
  // disabled, so nobody taps twice or reloads. Disabled on the next tick:
  // a disabled submitter would drop its own name from the form. A page
  // shown again from the back-forward cache gets its buttons back.
  document.addEventListener("submit", function (e) {
    if (e.defaultPrevented) return;
    var form = e.target, b = e.submitter || form.querySelector("button[type=submit], button:not([type])");
    if (form.dataset.sent) { e.preventDefault(); return; }
    form.dataset.sent = "1";
    if (!b) return;
    b.dataset.idle = b.textContent;
    b.textContent = b.getAttribute("data-busy") || document.body.getAttribute("data-busy-text") || "…";
    b.setAttribute("aria-busy", "true");
    b.classList.add("busy");
    setTimeout(function () { b.disabled = true; }, 0);
  });
  window.addEventListener("pageshow", function (e) {
    if (!e.persisted) return;
    document.querySelectorAll("form[data-sent]").forEach(function (f) { delete f.dataset.sent; });
    document.querySelectorAll("button.busy").forEach(function (b) {
      b.textContent = b.dataset.idle; b.classList.remove("busy"); b.removeAttribute("aria-busy"); b.disabled = false;
    });
  });
  // The server's clock is learnt ahead of the window (seeds/000 section
  // 4.2): any page asks POST /v1/session/prepare when this tab has no
  // offset younger than ten minutes, and keeps it for the tab's later
  // pages, so the pages of the critical minute (the window opening, the
  // hold and its countdown) make no clock call of their own.
  var OFFSET_KEY = "tk_offset", OFFSET_TTL = 10 * 60 * 1000;
  function storedOffset() {
    try {
      var v = JSON.parse(sessionStorage.getItem(OFFSET_KEY) || "null");
      if (v && typeof v.ms === "number" && Date.now() - v.at < OFFSET_TTL) return v.ms;
    } catch (e) {}
    return null;
  }
  function showOffset() {
    var note = document.querySelector("[data-offset]");
    if (note) note.textContent = (Math.round(offsetMs / 100) / 10) + " s";
  }
  var syncing = false;
  function sync() {
    var known = storedOffset();
    if (known !== null) { offsetMs = known; showOffset(); return; }
    if (syncing) return;
    syncing = true;
    var sent = Date.now();
    fetch("/v1/session/prepare", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ client_time: new Date(sent).toISOString() }) })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (j) {
        syncing = false;
        if (!j || j.server_time_offset_ms == null) return;
        // Half the round trip is the request's own travel time.
        offsetMs = j.server_time_offset_ms - (Date.now() - sent) / 2;
        try { sessionStorage.setItem(OFFSET_KEY, JSON.stringify({ ms: offsetMs, at: Date.now() })); } catch (e) {}
        showOffset();
      })
      .catch(function () { syncing = false; });
  }
  // A proof of work solved off the page's thread (pow-worker.js) with a
  // progress bar; done(nonce) when found, false when no Worker can run.
  function work(box, challenge, bits, done) {
    var bar = box.querySelector("progress");
    if (!window.Worker) return false;
    var w;
    try { w = new Worker(box.getAttribute("data-worker")); } catch (e) { return false; }
    // A worker script that fails to load throws nothing here: its error
    // sends the passenger to the SMS code rather than a Hold that waits.
    w.onerror = function () { w.terminate(); noWorker(box); };
    w.onmessage = function (e) {
      if (e.data.progress != null) { if (bar) bar.value = e.data.progress; return; }
      if (bar) bar.value = 100;
      w.terminate();
      done(e.data.nonce);
    };
    w.postMessage({ challenge: challenge, bits: bits });
    return true;
  }
  function unlock(box) {
    box.setAttribute("data-solved", "1");
    var b = document.getElementById(box.getAttribute("data-unlock"));
    if (b) { b.removeAttribute("data-pow-wait"); enable(b); }
  }
  // The booking check every hold carries (direct and waiting-room
  // shards): fetched for this attempt, then solved; the hold button
  // unlocks once the window is open too. A challenge lives 60 s, so it is
  // fetched no sooner than 50 s before the opening and fetched again
  // every 50 s while the form waits. A browser without Workers is pointed
  // at the code-by-SMS alternative.
  var CHECK_LEAD = 50000;
  function solve() {
    var box = document.querySelector("[data-challenge]");
    if (!box || box.getAttribute("data-started")) return;
    var opens = Date.parse(box.getAttribute("data-opens") || "");
    if (opens && opens - (Date.now() + offsetMs) > CHECK_LEAD) return;
    box.setAttribute("data-started", "1");
    setTimeout(function () { if (document.contains(box)) { box.removeAttribute("data-started"); solve(); } }, CHECK_LEAD);
    var form = box.closest("form"), status = box.querySelector("[data-pow-status]");
    // Rendered enabled for a browser without this script (which is then
    // refused and pointed at the SMS code); here it waits for the check.
    var hold = document.getElementById(box.getAttribute("data-unlock"));
    // A renewal keeps Hold as it is: the solved check stays valid while
    // the next one is solved.
    if (hold && !box.getAttribute("data-solved")) { hold.disabled = true; hold.setAttribute("data-pow-wait", "1"); }
    if (!window.Worker) { noWorker(box); return; }
    // A slow check (an old phone): the code by SMS is offered after a few
    // seconds, not only when the check fails.
    setTimeout(function () {
      if (box.getAttribute("data-solved")) return;
      status.textContent = box.getAttribute("data-slow") || status.textContent;
      var alt = document.querySelector("[data-otp-alt]");
      if (alt) alt.className = "primary big";
    }, 4000);
    var body = new URLSearchParams({ attempt: box.getAttribute("data-challenge"), csrf: form.querySelector("[name=csrf]").value });
    status.textContent = box.getAttribute("data-checking") || "…";
    fetch("/book/challenge", { method: "POST", body: body })
      .then(function (r) { return r.json(); })
      .then(function (c) {
        if (!c.challenge) { status.textContent = c.error || box.getAttribute("data-failed"); return; }
        var ok = work(box, c.challenge, c.difficulty_bits, function (nonce) {
          form.querySelector("[data-challenge-token]").value = c.challenge;
          form.querySelector("[data-challenge-nonce]").value = nonce;
          status.textContent = box.getAttribute("data-done");
          unlock(box);
        });
        if (!ok) noWorker(box);
      })
      .catch(function () { status.textContent = box.getAttribute("data-failed"); });
  }
  function noWorker(box) {
    box.querySelector("[data-pow-status]").textContent = box.getAttribute("data-noworker");
    var alt = document.querySelector("[data-otp-alt]");
    if (alt) alt.className = "primary big";
  }
  // The sign-in challenge, past an account's lock: the server put the
  // puzzle in the page; the sign-in button unlocks once it is solved.
  function solveLogin() {
    var box = document.querySelector("[data-login-challenge]");
    if (!box || box.getAttribute("data-started")) return;
    box.setAttribute("data-started", "1");
    var status = box.querySelector("[data-pow-status]"), b = document.getElementById(box.getAttribute("data-unlock"));
    if (b) b.disabled = true;
    var ok = work(box, box.getAttribute("data-login-challenge"), parseInt(box.getAttribute("data-bits"), 10), function (nonce) {
      box.querySelector("[data-challenge-nonce]").value = nonce;
      status.textContent = box.getAttribute("data-done");
      unlock(box);
    });
    if (!ok) {
      status.textContent = box.getAttribute("data-noworker");
      if (b) b.disabled = false; // past the wait, a plain sign-in works again
    }
  }
  // Pages waiting on someone else (the waiting room, the bank, the core)
  // carry data-refresh: the seconds the server asks us to wait. The page is
  // fetched again at that pace and its main part swapped in place, so a
  // screen reader is not thrown back to the top as a reload would; what
  // changed is read out through a polite live region. Without JavaScript
  // the "Refresh now" link does the same by hand.
  var live, refreshTimer;
  function announce(text) {
    if (!live) {
      live = document.createElement("p");
      live.className = "sr";
      live.setAttribute("role", "status");
      live.setAttribute("data-testid", "live");
      document.body.appendChild(live);
    }
    live.textContent = text;
  }
  function headline(root) {
    var h = root.querySelector("h1");
    return h ? h.textContent.trim() : "";
  }
  function refresh() {
    clearTimeout(refreshTimer);
    var el = document.querySelector("[data-refresh]");
    var secs = el ? parseInt(el.getAttribute("data-refresh"), 10) : 0;
    if (!(secs > 0)) return;
    refreshTimer = setTimeout(function () {
      fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (r) {
          var after = parseInt(r.headers.get("Retry-After") || "", 10);
          return r.text().then(function (t) { return { ok: r.ok, html: t, after: after }; });
        })
        .then(function (x) {
          var doc = new DOMParser().parseFromString(x.html, "text/html");
          var next = doc.querySelector("main"), cur = document.querySelector("main");
          if (!x.ok || !next || !cur) {
            // Busy or gone: try again later at the pace asked, never faster.
            if (el) el.setAttribute("data-refresh", String(x.after > 0 ? x.after : secs * 2));
            refresh();
            return;
          }
          var before = headline(cur), focused = document.activeElement && document.activeElement.id;
          cur.innerHTML = next.innerHTML;
          document.title = doc.title;
          if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
          var now = headline(cur);
          if (now && now !== before) announce(now);
          init();
        })
        .catch(function () { if (el) el.setAttribute("data-refresh", String(secs * 2)); refresh(); });
    }, secs * 1000);
  }
  // At most data-pax-max passengers per ticket: once that many are ticked
  // the others are disabled and the count says so. Holding with nobody
  // ticked shows the form's own message and moves focus to the first
  // passenger instead of posting. Without this script the server refuses
  // both with the same clear words.
  function passengerLimit() {
    document.querySelectorAll("[data-pax-max]").forEach(function (set) {
      if (set.dataset.bound) return;
      set.dataset.bound = "1";
      var max = parseInt(set.getAttribute("data-pax-max"), 10) || 4;
      var count = set.querySelector("[data-pax-count]"), none = set.querySelector("[data-pax-none]");
      function ticked() {
        var n = 0;
        set.querySelectorAll("input[name=pax]").forEach(function (b) { if (b.checked) n++; });
        return n;
      }
      function update() {
        var n = ticked();
        set.querySelectorAll("input[name=pax]").forEach(function (b) { b.disabled = !b.checked && n >= max; });
        if (count) count.textContent = count.getAttribute("data-of") + " " + n + "/" + max;
        if (n > 0 && none) none.hidden = true;
      }
      var form = set.closest("form");
      if (form && none) form.addEventListener("submit", function (e) {
        // The SMS-code button asks for a code, not a hold: no choice needed yet.
        if ((e.submitter && e.submitter.hasAttribute("formnovalidate")) || ticked() > 0) return;
        e.preventDefault();
        none.hidden = false;
        none.setAttribute("role", "alert");
        var first = set.querySelector("input[name=pax]");
        if (first) first.focus();
        none.scrollIntoView({ block: "center" });
      });
      set.addEventListener("change", update);
      update();
    });
  }
  // Forms marked data-validate are checked here first, by the same rules
  // the server applies (the fields' own required/pattern/min/max): each
  // message goes under its field (the slot [data-error-for]), the field is
  // marked aria-invalid, and focus goes to the first bad one. What was
  // typed stays. The server checks again and answers the same way.
  function showError(field, slot, msg) {
    if (slot) { slot.textContent = msg; slot.hidden = !msg; }
    if (msg) field.setAttribute("aria-invalid", "true"); else field.removeAttribute("aria-invalid");
  }
  function check(field) {
    var slot = document.querySelector('[data-error-for="' + field.id + '"]');
    if (field.hasAttribute("data-group")) {
      var any = field.querySelector("input:checked");
      showError(field, slot, any ? "" : field.getAttribute("data-msg"));
      return !!any;
    }
    var method = field.getAttribute("data-when-method");
    if (method) {
      var m = field.form && field.form.querySelector("input[name=method]:checked");
      if (!m || m.value !== method) { showError(field, slot, ""); return true; }
      if (!field.value.trim()) { showError(field, slot, field.getAttribute("data-msg")); return false; }
    }
    var ok = field.checkValidity();
    showError(field, slot, ok ? "" : (field.getAttribute("data-msg") || field.validationMessage));
    return ok;
  }
  function validation() {
    document.querySelectorAll("form[data-validate]").forEach(function (form) {
      if (form.dataset.bound) return;
      form.dataset.bound = "1";
      var fields = function () { return form.querySelectorAll("[data-msg]"); };
      form.addEventListener("submit", function (e) {
        var first = null;
        fields().forEach(function (f) { if (!check(f) && !first) first = f; });
        if (!first) return;
        e.preventDefault();
        (first.hasAttribute("data-group") ? first.querySelector("input") : first).focus();
      });
      // A corrected field loses its message as soon as it is right: while
      // typing (input), or on choosing (a radio, a select). Not on a text
      // field's change, which fires on blur: the message vanishing as the
      // finger lands on Save would move Save from under it.
      function recheck(e) {
        var f = e.target.closest("[data-msg]");
        if (f && f.getAttribute("aria-invalid") === "true") check(f);
      }
      form.addEventListener("input", recheck);
      form.addEventListener("change", function (e) {
        if (e.target.type === "radio" || e.target.type === "checkbox" || e.target.tagName === "SELECT") recheck(e);
      });
    });
    // The photo ID's number takes the shape of the chosen type: its
    // pattern and the hint above the field.
    document.querySelectorAll("[data-id-type]").forEach(function (sel) {
      if (sel.dataset.bound) return;
      sel.dataset.bound = "1";
      var ref = sel.form.querySelector("[name=id_ref]"), hint = sel.form.querySelector("[data-id-hint]");
      var none = hint ? hint.textContent : "";
      function apply() {
        var o = sel.options[sel.selectedIndex];
        if (ref) { if (o.getAttribute("data-pattern")) ref.setAttribute("pattern", o.getAttribute("data-pattern")); else ref.removeAttribute("pattern"); }
        if (hint) hint.textContent = o.getAttribute("data-hint") || none;
      }
      sel.addEventListener("change", apply);
      if (ref) ref.addEventListener("input", function () { ref.value = ref.value.toUpperCase(); });
      apply();
    });
  }
  // Until the first sync answers, the clock is the page's own: the server's
  // time as it rendered the countdown, so a phone's clock running fast
  // does not show the window open early.
  function seedOffset() {
    var el = document.querySelector("[data-server-time]");
    var t = el && Date.parse(el.getAttribute("data-server-time"));
    if (t && offsetMs === 0) offsetMs = t - Date.now();
  }
  function init() {
    seedOffset();
    validation();
    passengerLimit();
    solve();
    solveLogin();
    sync();
    tick();
    refresh();
  }
  init();
  setInterval(tick, 250);
})();
