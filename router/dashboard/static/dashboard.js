// The operator dashboard: polls /dashboard/status every second.
"use strict";
(function () {
  const colours = ["#e5484d", "#f2c46d", "#3e9bff", "#3fb950", "#b76cf2", "#ff8b3d", "#30c7c7", "#d6d6d6"];
  const $ = (s) => document.querySelector(s);
  const esc = (s) => String(s == null ? "" : s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  const num = (v, d) => Number(v || 0).toFixed(d == null ? 0 : d);
  const pill = (v, yes, no) => v == null ? '<span class="pill unk">unknown</span>' :
    (v ? '<span class="pill ok">' + yes + "</span>" : '<span class="pill bad">' + no + "</span>");
  const ago = (t) => { const s = (Date.now() - new Date(t)) / 1000; return s < 90 ? num(s) + " s ago" : s < 5400 ? num(s / 60) + " min ago" : s < 172800 ? num(s / 3600) + " h ago" : num(s / 86400) + " d ago"; };
  // days lists a SET's dates after the archiver's last run, each with its
  // state and how many of its day tables (a bucket's table of that day)
  // are in it.
  const days = (ds) => (ds || []).map((d) => '<span class="day ' + esc(d.state) + '">' + esc(d.date) + ": " + esc(d.state) +
    " · " + num(d.tables) + "</span>").join(" ") || "none recorded";
  const int = (v) => Number(v || 0).toLocaleString("en-US");
  const dur = (s) => s < 90 ? num(s) + " s" : s < 5400 ? num(s / 60) + " min" : num(s / 3600, 1) + " h";
  const step = (s) => String(s).replace(/_/g, " ");
  let cells = [];

  // drawRebalance fills the rebalance panel and its KPI from the newest
  // rebalance of the journal, or says there is none or why it is unknown.
  function drawRebalance(st) {
    const r = st.rebalance, note = $("#rb-note");
    $("#rb-body").hidden = !r;
    note.className = st.rebalance_error ? "note err" : "note";
    note.textContent = st.rebalance_error ? "The rebalance journal could not be read: " + st.rebalance_error : st.rebalance_note || "";
    if (!r) {
      $("#rb-kpi").textContent = st.rebalance_error ? "unknown" : "none";
      $("#rb-kpi-s").textContent = st.rebalance_error ? "the journal is unreadable" : "no rebalance yet";
      $("#rb-head").textContent = "the newest in the journal (hbctl rebalance status)";
      return;
    }
    const pill = '<span id="rb-state" class="pill ' + (r.state === "done" ? "ok" : r.state === "failed" ? "bad" : "warn") + '">' + esc(r.state) + "</span>";
    $("#rb-kpi").textContent = r.buckets_done + " / " + r.buckets;
    $("#rb-kpi-s").textContent = "#" + r.id + " " + r.state + (r.eta_s != null ? ", ETA " + dur(r.eta_s) : "");
    $("#rb-head").innerHTML = "#" + r.id + " · " + esc(r.kind) + " " + pill + " · created " + ago(r.created_at) + " · updated " + ago(r.updated_at) +
      (r.note ? " · " + esc(r.note) : "");
    const pct = (n) => (r.buckets ? 100 * n / r.buckets : 0) + "%";
    $("#rb-bar-done").style.width = pct(r.buckets_done);
    $("#rb-bar-failed").style.width = pct(r.buckets_failed);
    $("#rb-buckets").textContent = r.buckets_done + " / " + r.buckets;
    $("#rb-failed-n").textContent = r.buckets_failed;
    $("#rb-rows").textContent = int(r.rows_copied) + " / " + int(r.rows_planned);
    $("#rb-rate").textContent = num(r.buckets_per_min, 1) + " buckets/min, " + int(Math.round(r.rows_per_s)) + " rows/s";
    $("#rb-eta").textContent = r.eta_s != null ? dur(r.eta_s) : r.state === "running" ? "not yet known" : "–";
    $("#rb-steps").innerHTML = r.steps.map((c) => '<span class="step ' + esc(c.step) + '" data-step="' + esc(c.step) + '">' + esc(step(c.step)) +
      " <b>" + c.buckets + "</b></span>").join("");
    $("#rb-freeze").innerHTML = r.freeze.buckets ? "(" + r.freeze.buckets + " buckets moved): p50 <b>" + r.freeze.p50_ms + " ms</b> · p99 <b>" +
      r.freeze.p99_ms + " ms</b> · max <b>" + r.freeze.max_ms + " ms</b>" : "no bucket moved yet";
    $("#rb-inflight").hidden = !r.in_flight.length;
    $("#rb-inflight tbody").innerHTML = r.in_flight.map((m) => '<tr data-bucket="' + m.bucket + '"><td>bucket ' + m.bucket + "</td><td>" +
      esc(m.from) + " → " + esc(m.to) + "</td><td>" + esc(step(m.step)) + "</td><td>" + int(m.rows_copied) + " / " + int(m.rows_planned) +
      "</td><td>" + m.passes + "</td><td>" + (m.started_at ? ago(m.started_at) : "") + "</td></tr>").join("");
    $("#rb-failed").hidden = !r.failed.length;
    $("#rb-failed tbody").innerHTML = r.failed.map((m) => '<tr data-bucket="' + m.bucket + '"><td>bucket ' + m.bucket + "</td><td>" +
      esc(m.from) + " → " + esc(m.to) + '</td><td class="err">' + esc(m.error || "(no error recorded)") + "</td></tr>").join("");
  }

  function drawMap(st) {
    const map = $("#map");
    if (cells.length !== st.buckets.length) {
      map.replaceChildren();
      cells = st.buckets.map((_, b) => { const i = document.createElement("i"); i.title = "bucket " + b; map.append(i); return i; });
    }
    const moving = new Set(st.moving);
    const inflight = new Map(((st.rebalance || {}).in_flight || []).map((m) => [m.bucket, m]));
    st.buckets.forEach((s, b) => {
      const m = inflight.get(b);
      cells[b].style.background = colours[s % colours.length];
      cells[b].className = m ? "inflight" : moving.has(b) ? "moving" : "";
      cells[b].title = "bucket " + b + " → SET " + st.sets[s].name + (m ? " (moving to " + m.to + ": " + step(m.step) + ")" : moving.has(b) ? " (moved)" : "");
    });
    $("#legend").innerHTML = st.sets.map((s, i) => '<span><i class="sw" style="background:' + colours[i % colours.length] + '"></i>SET ' +
      esc(s.name) + " · " + s.buckets + " buckets</span>").join("") + (st.moving.length ? "<span>⬚ moving: " + st.moving.length + "</span>" : "");
    $("#rebalance").textContent = (st.moving.length ? st.moving.length + " bucket(s) changed SET in the last minute. " : "No bucket changed SET in the last minute. ") +
      "Buckets moved since this router started: " + st.moves + ".";
  }

  function procRows(list, kind) {
    return list.map((p) => "<tr><td>" + esc(p.name) + '<span class="why">' + esc(p.admin || p.addr || "") + "</span></td>" +
      (kind === "server" ? "<td>" + pill(p.healthy, "healthy", "down") + "</td>" : "<td>" + (p.last_round_age_s ? "round " + num(p.last_round_age_s, 1) + " s ago" : "") + "</td>") +
      "<td>" + pill(p.ready, "ready", "not ready") + (p.why && p.ready !== true ? '<span class="why" title="' + esc(p.why) + '">' + esc(p.why) + "</span>" : "") + "</td>" +
      (kind === "server" ? "<td>" + num(p.opens_per_s, 1) + "</td><td>" + num(p.busy_per_s, 1) + "</td><td>" + num(p.queue_depth) + "</td><td>" + num(p.live_queues) + "</td>" : "<td colspan=4></td>") +
      "</tr>").join("");
  }

  function drawSets(st) {
    $("#sets").innerHTML = st.sets.map((s, i) => '<div class="set" data-set="' + esc(s.name) + '"><h2><i class="sw" style="background:' +
      colours[i % colours.length] + '"></i>SET ' + esc(s.name) + ' <span class="set-state pill ' + (s.state === "active" ? "ok" : "warn") + '">' +
      esc(s.state) + "</span></h2>" +
      '<p class="facts"><span>buckets <b class="set-buckets">' + s.buckets + "</b></span><span>weight <b>" + s.weight + '</b></span><span>opens/s <b class="set-opens">' + num(s.opens_per_s, 1) +
      "</b></span><span>busy/s <b>" + num(s.busy_per_s, 1) + "</b></span><span>queue depth <b>" + num(s.queue_depth) +
      "</b></span><span>outbox <b>" + num(s.outbox_rows) + "</b> rows, lag <b>" + num(s.outbox_lag_s, 1) + " s</b></span></p>" +
      "<table><thead><tr><th>process</th><th>router / settler</th><th>readiness</th><th>opens/s</th><th>busy/s</th><th>queue</th><th>live</th></tr></thead><tbody>" +
      procRows(s.servers || [], "server") + procRows(s.settlers || [], "settler") + "</tbody></table></div>").join("");
  }

  function draw(st) {
    $("#opens").textContent = num(st.opens_per_s, 1);
    $("#opens-src").textContent = "from the " + st.opens_source;
    $("#busy").textContent = num(st.busy_rate * 100, 1) + " %";
    $("#version").textContent = "v" + st.topology_version;
    $("#moves").textContent = st.moves + " bucket moves seen";
    if (st.verify) {
      $("#verify").innerHTML = pill(st.verify.ok, "OK", "FAILING");
      $("#verify-s").textContent = "ran " + ago(st.verify.last_run) + (st.verify.last_success ? ", passed " + ago(st.verify.last_success) : "");
    } else { $("#verify").textContent = "none"; $("#verify-s").textContent = st.verify_note || ""; }
    drawAudit(st.audit);
    drawSets(st);
    drawMap(st);
    drawRebalance(st);
    $("#archive tbody").innerHTML = (st.archive || []).map((a) => "<tr><td>" + esc(a.set) + "</td><td>" + ago(a.last_run) + "</td><td>" +
      pill(a.ok, "ok", "failed") + "</td><td>" + num(a.archived_days) + "</td><td>" + num(a.pending_days) + "</td><td>" + num(a.skipped_days) + '</td><td class="days">' + days(a.days) + "</td></tr>").join("");
    $("#archive-note").textContent = st.archive_note || "";
    const stamp = $("#stamp");
    stamp.className = "stamp";
    stamp.textContent = "updated " + new Date(st.at).toLocaleTimeString() + " · polling every second";
  }

  // drawAudit shows the last money audit the router ran in process
  // (store/audit, what hbctl verify prints) and its first violations.
  function drawAudit(a) {
    const bad = (a && a.violations) || [];
    $("#audit-panel").hidden = bad.length === 0;
    $("#audit-bad").innerHTML = bad.map((v) => "<li>" + esc(v) + "</li>").join("");
    $("#audit-run").disabled = !!(a && a.running);
    if (!a || !a.at) {
      $("#audit").textContent = a && a.running ? "running" : "none";
      $("#audit-s").textContent = a && a.running ? "the first audit runs now" : "not run yet: run now, or set dashboard.audit_every";
      return;
    }
    $("#audit").innerHTML = a.error ? pill(false, "", "ERROR") : pill(a.ok, "OK", int(a.violation_count) + " violations");
    $("#audit-s").textContent = (a.running ? "running again now; " : "") + "ran " + ago(a.at) + " in " + num(a.took_s, 1) + " s" +
      (a.last_ok ? ", passed " + ago(a.last_ok) : "") + (a.error ? ": " + a.error : "");
  }

  async function runAudit() {
    const button = $("#audit-run");
    button.disabled = true;
    try {
      const r = await fetch("/dashboard/audit", { method: "POST", cache: "no-store" });
      const body = await r.json();
      if (!r.ok && r.status !== 409) throw new Error(body.message || "HTTP " + r.status);
    } catch (e) {
      $("#audit-s").textContent = "could not run the audit: " + e.message;
    }
  }

  async function poll() {
    try {
      const r = await fetch("/dashboard/status", { cache: "no-store" });
      if (!r.ok) throw new Error("HTTP " + r.status);
      draw(await r.json());
    } catch (e) {
      const stamp = $("#stamp");
      stamp.className = "stamp stale";
      stamp.textContent = "cannot reach the router's admin listener: " + e.message;
    }
    setTimeout(poll, 1000);
  }
  document.addEventListener("DOMContentLoaded", () => {
    $("#audit-run").addEventListener("click", runAudit);
    poll();
  });
})();
