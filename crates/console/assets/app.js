// Horde console: a client of the run driver's channel. Events come as server-sent events (one
// EventLine each, numbered; the browser resumes with Last-Event-ID after a drop), commands go
// as the same JSON objects as `horde run --commands` lines. The token comes in the printed URL
// (`/?token=…`): the page keeps it in this tab's session storage, takes it out of the address
// bar, and sends it as `Authorization: Bearer` — no cookie, which every other web server on
// this host would receive. What cannot carry a header (the event stream, a report in a new tab)
// shows a one-time ticket instead (`POST /api/v1/tickets`).
"use strict";
const $ = (s) => document.querySelector(s);
const TOKEN = (() => {
  const q = new URLSearchParams(location.search).get("token") || new URLSearchParams(location.hash.slice(1)).get("token");
  if (q) {
    sessionStorage.setItem("horde_token", q);
    history.replaceState(null, "", "/");
  }
  return sessionStorage.getItem("horde_token") || "";
})();
const authed = (init) => ({ ...init, headers: { ...(init.headers || {}), Authorization: `Bearer ${TOKEN}` } });
window.hordeFetch = (path, init) => fetch(path, authed(init || {}));
const api = async (path, body) => {
  const r = await fetch(path, authed(body === undefined ? {} : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) }));
  const text = await r.text();
  let v = null;
  try { v = text ? JSON.parse(text) : null; } catch (_) { v = { error: text }; }
  // A refusal's reason: the console's `error`, or a command's `Reply` text (409).
  if (!r.ok) { const e = new Error((v && (v.error || v.text)) || r.statusText); e.reply = v; throw e; }
  return v;
};
const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; };

let current = null; // { id, source, charts, data }
const MAX_POINTS = 3600;

function chart(node, series, dashes, log) {
  const width = Math.max(360, node.clientWidth || 480);
  const colour = (i) => (dashes && dashes[i] ? palette(i - 2) : palette(i));
  const y = log ? { distr: 3 } : {};
  const opts = { width, height: 220, series: [{ label: "t (s)" }, ...series.map((s, i) => ({ label: s, stroke: colour(i), width: 1.5, dash: dashes && dashes[i] ? dashes[i] : undefined }))], axes: [{}, { size: 64 }], scales: { x: { time: false }, y }, hooks: { draw: [drawMarks] } };
  node.textContent = "";
  return new uPlot(opts, [[], ...series.map(() => [])], node);
}

// What a chart shows, as CSV: one row per second, one column per series (empty where none).
function chartCsv(u) {
  const cols = u.series.map((s) => `"${String(s.label).replace(/"/g, '""')}"`);
  const rows = [cols.join(",")];
  for (let i = 0; i < u.data[0].length; i++) rows.push(u.data.map((d) => (d[i] === null || d[i] === undefined ? "" : d[i])).join(","));
  return rows.join("\n") + "\n";
}

function downloadCsv(name) {
  const u = current && current.charts[name];
  if (!u) return;
  const a = el("a");
  a.href = URL.createObjectURL(new Blob([chartCsv(u)], { type: "text/csv" }));
  a.download = `run-${current.id}-${name}.csv`;
  document.body.append(a); a.click(); a.remove();
}

// The delay chart on a logarithmic axis (a p99 of seconds beside a p50 of milliseconds).
function delayChart(log) {
  current.charts.delay = chart($("#chart-delay"), ["up p50", "up p99", "down p50", "down p99"], undefined, log);
  const d = current.data;
  current.charts.delay.setData([d.t, d.up50, d.up99, d.down50, d.down99]);
}
// The run's events on its clock (each applied command's instant, from the run's replies):
// dashed lines with their text on every live chart, as the report draws them.
function drawMarks(u) {
  if (!current || !current.marks || !current.marks.length) return;
  const ctx = u.ctx, { left, top, width, height } = u.bbox;
  ctx.save();
  ctx.strokeStyle = "#666"; ctx.fillStyle = "#666"; ctx.setLineDash([4, 4]); ctx.lineWidth = 1; ctx.textAlign = "left"; ctx.textBaseline = "top";
  ctx.font = `${Math.round(11 * devicePixelRatio)}px sans-serif`;
  current.marks.forEach((m, k) => {
    const x = u.valToPos(m.t, "x", true);
    if (!(x >= left && x <= left + width)) return;
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
    ctx.fillText(" " + m.text, x, top + (12 + 12 * (k % 3)) * devicePixelRatio);
  });
  ctx.restore();
}
function palette(i) { return ["#2553a3", "#c2571a", "#2a7a3b", "#8a2be2", "#a33", "#0a8f8f", "#b59a00", "#555"][i % 8]; }

function openRun(info) {
  if (current && current.source) current.source.close();
  $("#run").hidden = false;
  $("#run-title").textContent = `Run ${info.id}: ${info.scenario}`;
  $("#notes").textContent = "";
  $("#cmd-error").textContent = "";
  $("#cmd-ok").textContent = "";
  current = { id: info.id, info, categories: null, charts: {}, marks: [], data: { t: [], players: [], up: [], down: [], upb: [], downb: [], up50: [], up99: [], down50: [], down99: [], upm: [], downm: [], cmin: [], cmed: [], cmax: [], crecv: [], b50: [], b99: [], bans: [], loss: { t: [], up: [], down: [] } } };
  $("#circuits-figure").hidden = true;
  $("#bots-figure").hidden = true;
  $("#loss-figure").hidden = true;
  current.charts.rates = chart($("#chart-rates"), ["up pkt/s", "down pkt/s", "up, model", "down, model"], [null, null, [6, 4], [6, 4]]);
  current.charts.bits = chart($("#chart-bits"), ["up kbit/s", "down kbit/s"]);
  current.charts.delay = chart($("#chart-delay"), ["up p50", "up p99", "down p50", "down p99"], undefined, $("#delay-log").checked);
  $("#chart-players").textContent = "";
  showState(info);
  follow(current, -1);
}

// The run's event stream, from after event `last`: each (re)connection shows a fresh one-time
// ticket, so a dropped stream reopens with a new one where it left off.
async function follow(run, last) {
  const path = `/api/v1/runs/${run.id}/events`;
  let t;
  try { t = await api("/api/v1/tickets", { path }); } catch (e) { setConn(false); setTimeout(() => { if (current === run) follow(run, last); }, 2000); return; }
  if (current !== run) return;
  const src = new EventSource(`${path}?ticket=${t.ticket}${last >= 0 ? `&after=${last}` : ""}`);
  run.source = src;
  src.onopen = () => setConn(true);
  src.onerror = () => {
    setConn(false);
    src.close();
    if (current === run && run.info.state !== "finished") setTimeout(() => { if (current === run) follow(run, last); }, 1000);
  };
  src.onmessage = (m) => {
    last = Number(m.lastEventId);
    try { onEvent(JSON.parse(m.data)); } catch (e) { console.error(e); }
  };
}

// A run that ended because a stop command was applied did as it was told: not a failure.
function ended(info) { return info.stopped ? "stopped by a command" : `finished (exit ${info.exit})`; }

function showState(info) {
  const s = $("#run-state");
  s.textContent = "";
  if (info.state === "running") { s.append(el("span", "running", "ok")); return; }
  s.append(el("span", `${ended(info)} `, info.exit === 0 || info.stopped ? "ok" : "fail"));
  // a bots run leaves its summary; the other kinds a report page
  const bots = info.scenario === "bots";
  const a = el("a", bots ? "open the summary" : "open the report");
  const path = `/api/v1/runs/${info.id}/report/${bots ? "summary.json" : "index.html"}`;
  a.href = path;
  // a new tab cannot send the token's header: it shows a one-time ticket
  a.onclick = (ev) => {
    ev.preventDefault();
    const w = window.open("about:blank", "_blank");
    api("/api/v1/tickets", { path }).then((t) => { if (w) { w.opener = null; w.location = `${path}?ticket=${t.ticket}`; } }).catch((e) => { if (w) w.close(); note(`the report: ${e.message}`); });
  };
  s.append(a);
}

function onEvent(e) {
  if (!current) return;
  if (e.event === "progress") return progress(e.progress);
  if (e.event === "note") return note(e.text);
  if (e.event === "planned") return note(`behaviour planned in ${e.seconds.toFixed(2)} s`);
  if (e.event === "reply") {
    if (e.applied && typeof e.at_s === "number") current.marks.push({ t: e.at_s, text: e.text.split(":")[0].slice(0, 40) });
    return;
  }
  if (e.event === "finished") {
    const id = current.id;
    current.info.state = "finished"; current.info.exit = e.exit;
    showState(current.info);
    // whether it was stopped by a command: the run's own record says
    api(`/api/v1/runs/${id}`).then((info) => { if (current && current.id === id) { current.info = info; showState(info); } }).catch(() => {});
    note(`${e.exit === 130 ? "ended" : "finished"}: exit ${e.exit}; report in ${e.report}`);
    current.source.close();
    refreshRuns();
  }
}

function note(text) {
  const li = el("li", text);
  $("#notes").append(li);
  while ($("#notes").children.length > 2000) $("#notes").firstChild.remove();
  li.scrollIntoView({ block: "nearest" });
}

function progress(p) {
  const d = current.data;
  if (!current.categories && p.categories.length) {
    current.categories = p.categories.map((c) => c[0]);
    current.charts.players = chart($("#chart-players"), ["online", ...current.categories]);
    d.players = [[], ...current.categories.map(() => [])];
  }
  d.t.push(p.t_s);
  d.up.push(p.up_pkt_s); d.down.push(p.down_pkt_s);
  d.upb.push(p.up_bit_s / 1e3); d.downb.push(p.down_bit_s / 1e3);
  // live one-way delay (within 3.1 %; absent in a second with no arrivals)
  const [u50, u99] = p.up_delay_ms || [null, null], [d50, d99] = p.down_delay_ms || [null, null];
  d.up50.push(u50); d.up99.push(u99); d.down50.push(d50); d.down99.push(d99);
  const cr = p.category_rates || [];
  d.upm.push(cr.length ? cr.reduce((a, c) => a + c.up_model, 0) : null);
  d.downm.push(cr.length ? cr.reduce((a, c) => a + c.down_model, 0) : null);
  // through agents the rates, delays and loss are of the second ending at loss.t_s (closed 3 s
  // before: every agent's part of it is in), and per-category figures so far come beside them
  categoryTable(cr, p.agents && p.agents.length && p.loss ? p.loss.t_s : null);
  liveTable(p.category_live || []);
  // a regulated run: its circuits' throttles and what each received, per circuit
  const c = p.circuits;
  if (c && !current.charts.circuits) {
    $("#circuits-figure").hidden = false;
    current.charts.circuits = chart($("#chart-circuits"), ["throttle min", "throttle median", "throttle max", "received per circuit"]);
  }
  d.cmin.push(c ? c.throttle_kbps[0] : null); d.cmed.push(c ? c.throttle_kbps[1] : null); d.cmax.push(c ? c.throttle_kbps[2] : null);
  d.crecv.push(c && c.circuits ? c.received_kbps / c.circuits : null);
  // a bots run: the server's response time and how much it answers
  const b = p.bots;
  if (b && !current.charts.bots) {
    $("#bots-figure").hidden = false;
    current.charts.bots = chart($("#chart-bots"), ["response p50 ms", "response p99 ms", "answers/s"]);
  }
  d.b50.push(b && b.response_ms ? b.response_ms[0] : null); d.b99.push(b && b.response_ms ? b.response_ms[1] : null); d.bans.push(b ? b.answered_s : null);
  if (b) $("#bots-state").textContent = `${b.started} bots started`;
  // bots have no categories or one-way delays: their figures would stay empty
  for (const id of ["#chart-players", "#chart-delay", "#chart-bits"]) $(id).parentElement.hidden = !!b;
  // loss each way of one second of departures, counted 3 s after it (its own time axis)
  const l = p.loss;
  if (l) {
    if (!current.charts.loss) { $("#loss-figure").hidden = false; current.charts.loss = chart($("#chart-loss"), ["up not arrived %", "down not arrived %"]); }
    const pct = (lost, sent) => (sent ? (100 * lost) / sent : null);
    const L = current.data.loss;
    L.t.push(l.t_s); L.up.push(pct(l.up_lost, l.up_sent)); L.down.push(pct(l.down_lost, l.down_sent));
    if (L.t.length > MAX_POINTS) for (const k of ["t", "up", "down"]) L[k].shift();
    current.charts.loss.setData([L.t, L.up, L.down]);
    $("#loss-state").textContent = `second ending at ${l.t_s.toFixed(0)} s: up ${l.up_lost} of ${l.up_sent} not arrived 3 s later, down ${l.down_lost} of ${l.down_sent}`;
  }
  if (c) $("#circuits-state").textContent = `${c.circuits} circuits up in second ${c.t_s}; round trip ${c.rtt_ms === null || c.rtt_ms === undefined ? "–" : c.rtt_ms.toFixed(1) + " ms"} (median), loss ${c.loss_pct.toFixed(2)} % (mean)`;
  if (current.categories) {
    const byName = Object.fromEntries(p.categories);
    d.players[0].push(p.categories.reduce((s, c) => s + c[1], 0));
    current.categories.forEach((c, i) => d.players[i + 1].push(byName[c] || 0));
  }
  if (d.t.length > MAX_POINTS) for (const k of ["t", "up", "down", "upb", "downb", "up50", "up99", "down50", "down99", "upm", "downm", "cmin", "cmed", "cmax", "crecv", "b50", "b99", "bans"]) d[k].shift();
  if (d.players.length && d.players[0].length > MAX_POINTS) d.players.forEach((s) => s.shift());
  current.charts.rates.setData([d.t, d.up, d.down, d.upm, d.downm]);
  current.charts.bits.setData([d.t, d.upb, d.downb]);
  current.charts.delay.setData([d.t, d.up50, d.up99, d.down50, d.down99]);
  if (current.charts.circuits) current.charts.circuits.setData([d.t, d.cmin, d.cmed, d.cmax, d.crecv]);
  if (current.charts.bots) current.charts.bots.setData([d.t, d.b50, d.b99, d.bans]);
  if (current.charts.players) current.charts.players.setData([d.t, ...d.players]);
  const table = $("#agents");
  table.hidden = !p.agents.length;
  const body = table.querySelector("tbody");
  body.textContent = "";
  for (const a of p.agents) {
    const tr = el("tr");
    for (const v of [a.agent, a.sent_pkt_s, (a.sent_bit_s / 1e3).toFixed(1), a.received_pkt_s, (a.received_bit_s / 1e3).toFixed(1)]) tr.append(el("td", String(v)));
    body.append(tr);
  }
}

// APDUs per second by category and direction over the last second, beside the model's
// expectation for the players online in it (a one-second count: expect Poisson noise).
function categoryTable(rows, ending) {
  const t = $("#categories");
  t.hidden = !rows.length;
  t.querySelector("caption").textContent = `APDUs per second by category, ${ending === null ? "last second" : `second ending at ${ending.toFixed(0)} s`}: measured and what the model expects of the players online in it`;
  const body = t.querySelector("tbody");
  body.textContent = "";
  const err = (m, x) => (x > 0 ? `${(((m - x) / x) * 100).toFixed(1)} %` : "–");
  for (const c of rows) {
    const tr = el("tr");
    for (const v of [c.category, c.up_apdu_s, c.up_model.toFixed(1), err(c.up_apdu_s, c.up_model), c.down_apdu_s, c.down_model.toFixed(1), err(c.down_apdu_s, c.down_model)]) tr.append(el("td", String(v)));
    body.append(tr);
  }
}

// per category so far, each way (through agents, from their live summaries)
function liveTable(rows) {
  const t = $("#categories-live");
  t.hidden = !rows.length;
  const body = t.querySelector("tbody");
  body.textContent = "";
  const ms = (v) => (v === null || v === undefined ? "–" : v.toFixed(2));
  for (const c of rows) {
    const tr = el("tr");
    for (const v of [c.category, c.up.sent, c.up.received, ms(c.up.delay_p50_ms), ms(c.up.delay_p99_ms), c.down.sent, c.down.received, ms(c.down.delay_p50_ms), ms(c.down.delay_p99_ms)]) tr.append(el("td", String(v)));
    body.append(tr);
  }
}

function setConn(ok) { const c = $("#conn"); c.textContent = ok ? "live" : "reconnecting…"; c.className = "pill " + (ok ? "ok" : "bad"); }

async function command(c) {
  $("#cmd-error").textContent = "";
  $("#cmd-ok").textContent = "";
  if (!current) return;
  // Every answer shows where the user looks (beside the form) and stays in Notes.
  const what = c.command === "players" ? `players → ${c.online}` : c.command === "link" ? `link ${c.a}–${c.b}` : c.command;
  try {
    const r = await api(`/api/v1/runs/${current.id}/commands`, c);
    const at = r && typeof r.at_s === "number" ? ` at t = ${r.at_s.toFixed(2)} s` : "";
    $("#cmd-ok").textContent = `applied${at}: ${r ? r.text : what}`;
    note(`command ${what} applied${at}: ${r ? r.text : ""}`);
  } catch (e) {
    $("#cmd-ok").textContent = "";
    $("#cmd-error").textContent = `refused: ${e.message}`;
    note(`command ${what} refused: ${e.message}`);
  }
}

async function refreshRuns() {
  try {
    const runs = await api("/api/v1/runs");
    const ul = $("#runs"); ul.textContent = "";
    for (const r of runs.slice().reverse()) {
      const a = el("a", `#${r.id} ${r.scenario} — ${r.state === "running" ? "running" : r.stopped ? "stopped by a command" : "exit " + r.exit}`);
      a.onclick = () => openRun(r);
      const li = el("li"); li.append(a); ul.append(li);
    }
    setConn(true);
    return runs;
  } catch (e) { setConn(false); return []; }
}

async function refreshPast() {
  try {
    const past = await api("/api/v1/past");
    const ul = $("#past"); ul.textContent = "";
    for (const p of past.slice(0, 50)) {
      // path figures describe the network, never a failure of the run
      const gen = p.verdicts.filter((v) => (v.kind || "generator") === "generator");
      const bad = gen.filter((v) => !v.ok).length;
      const li = el("li", `${p.dir.split("/").pop()} — ${p.kind}${p.interrupted ? ", stopped early" : ""}${gen.length ? (bad ? `, ${bad} generator verdict(s) failed` : ", generator verdicts pass") : ""}`, bad ? "fail" : "");
      li.title = p.verdicts.map((v) => v.kind === "path" || v.kind === "model" ? `${v.kind}: ${v.label}: ${v.value} (${v.limit})` : `${v.ok ? "✓" : "✗"} ${v.label}: ${v.value} (limit ${v.limit})`).join("\n");
      if (p.kind === "scenario") {
        // tick runs to compare them (players' runs only): the order of ticking is kept
        const box = el("input"); box.type = "checkbox"; box.value = p.dir.split("/").pop(); box.className = "compare-pick";
        box.onchange = () => { ticked = ticked.filter((n) => n !== box.value); if (box.checked) ticked.push(box.value); $("#compare-go").disabled = ticked.length < 2; };
        box.checked = ticked.includes(box.value);
        li.prepend(box);
      }
      ul.append(li);
    }
  } catch (_) { /* shown by the connection pill */ }
}

$("#delay-log").onchange = (ev) => { if (current) delayChart(ev.target.checked); };
for (const b of document.querySelectorAll("button.csv")) b.onclick = () => downloadCsv(b.dataset.chart);

let ticked = [];
$("#compare-go").onclick = async () => {
  $("#compare-error").textContent = "";
  try {
    const c = await api("/api/v1/compare", { reports: ticked });
    const num = (v) => (v === null || v === undefined ? "–" : typeof v === "number" ? v.toPrecision(4) : String(v));
    const yes = (v) => (v === null || v === undefined ? "–" : v ? "yes" : "no");
    const runs = $("#compare-runs tbody"); runs.textContent = "";
    for (const r of c.runs) {
      const tr = el("tr");
      for (const v of [r.run, r.report, num(r.seed), num(r.players), yes(r.same_schedules), num(r.beyond_noise)]) tr.append(el("td", String(v)));
      runs.append(tr);
    }
    const rows = $("#compare-beyond tbody"); rows.textContent = "";
    for (const f of c.figures.filter((f) => f.beyond_noise === true)) {
      const tr = el("tr", undefined, "fail");
      for (const v of [f.run, f.scope, f.direction, f.figure, num(f.a), num(f.b), num(f.difference), f.test]) tr.append(el("td", String(v)));
      rows.append(tr);
    }
    if (!rows.children.length) { const tr = el("tr"); const td = el("td", "none: every difference is within the runs' own noise"); td.colSpan = 8; tr.append(td); rows.append(tr); }
    $("#compare-page").href = URL.createObjectURL(new Blob([c.html], { type: "text/html" }));
    $("#compare").hidden = false;
    $("#compare").scrollIntoView({ block: "start" });
  } catch (e) { $("#compare-error").textContent = e.message; }
};

$("#start").onsubmit = async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const body = { scenario: f.get("scenario") };
  for (const k of ["players", "online"]) if (f.get(k)) body[k] = Number(f.get(k));
  if (f.get("duration")) body.duration = f.get("duration");
  $("#start-error").textContent = "";
  try { const info = await api("/api/v1/runs", body); await refreshRuns(); openRun(info); } catch (e) { $("#start-error").textContent = e.message; }
};
$("#start-bots").onsubmit = async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const bots = { players: Number(f.get("players")), duration: f.get("duration").trim() };
  if (f.get("ramp").trim()) bots.ramp = f.get("ramp").trim();
  if (f.get("server").trim()) bots.server = f.get("server").trim();
  $("#bots-error").textContent = "";
  try { const info = await api("/api/v1/runs", { bots }); await refreshRuns(); openRun(info); } catch (e) { $("#bots-error").textContent = e.message; }
};
// a pasted scenario: checked by the console as `horde run` checks a file, then run
$("#start-toml").onsubmit = async (ev) => {
  ev.preventDefault();
  $("#toml-error").textContent = "";
  try { const info = await api("/api/v1/runs", { toml: new FormData(ev.target).get("toml") }); await refreshRuns(); openRun(info); } catch (e) { $("#toml-error").textContent = e.message; }
};
$("#online").onsubmit = (ev) => { ev.preventDefault(); command({ command: "players", online: Number(new FormData(ev.target).get("online")) }); };
$("#link").onsubmit = (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const set = {};
  for (const k of ["delay", "loss"]) if (f.get(k)) set[k] = f.get(k);
  // the button pressed: change the settings, or take the link down / bring it up
  const st = ev.submitter && ev.submitter.dataset.state;
  command(st ? { command: "link", a: f.get("a"), b: f.get("b"), state: st } : { command: "link", a: f.get("a"), b: f.get("b"), set });
};
$("#stop").onclick = () => command({ command: "stop" });

// A form made from the scenario file's own JSON schema (GET /api/v1/scenario-schema): one field
// per property, tables as fieldsets, required ones marked; what is left empty is left out.
function schemaForm(schema) {
  const form = $("#start-form");
  form.textContent = "";
  const defs = schema.definitions || {};
  const resolve = (p) => {
    if (p.$ref) return defs[p.$ref.split("/").pop()];
    if (p.anyOf) { const r = p.anyOf.find((x) => x.$ref); if (r) return Object.assign({ description: p.description }, defs[r.$ref.split("/").pop()]); }
    return p;
  };
  const kind = (p) => { const t = Array.isArray(p.type) ? p.type.find((x) => x !== "null") : p.type; return t || (p.properties ? "object" : "string"); };
  const build = (sch, path, parent) => {
    const req = (name) => (sch.required || []).includes(name);
    // required fields first; optional tables (agents, emu, regulation) folded away at the end
    const props = Object.entries(sch.properties || {}).sort((a, b) => (req(b[0]) - req(a[0])) || (a[0] < b[0] ? -1 : 1));
    for (const [name, raw] of props) {
      const p = resolve(raw);
      const key = path ? `${path}.${name}` : name;
      const t = kind(p);
      if (t === "object" && p.properties) {
        const fs = el("details"); fs.className = "table"; fs.append(el("summary", `[${name}]` + (p.description ? ` — ${p.description}` : "")));
        build(p, key, fs); parent.append(fs); continue;
      }
      const l = el("label", name + (req(name) ? " *" : ""));
      const i = el("input");
      i.name = key; i.dataset.kind = t === "array" ? "list" : t === "object" ? "map" : t;
      if (t === "integer" || t === "number") { i.type = "number"; i.step = t === "integer" ? "1" : "any"; if (p.minimum !== undefined) i.min = p.minimum; }
      if (t === "boolean") i.type = "checkbox";
      if (t === "array") i.placeholder = "a, b, c";
      if (t === "object") i.placeholder = "N=500, M=2";
      // a table's own required fields matter only when the table is used: the server says so
      if (req(name) && !path) i.required = true;
      if (p.description) { l.title = p.description; if (!i.placeholder) i.placeholder = (p.description.match(/e\.g\. ([^,;)]+)/) || [])[1] || ""; }
      l.append(i); parent.append(l);
    }
  };
  build(schema, "", form);
  const go = el("button", "Start"); go.id = "form-go"; form.append(go);
}
$("#start-form").onsubmit = async (ev) => {
  ev.preventDefault();
  const out = {};
  for (const i of ev.target.querySelectorAll("input")) {
    let v;
    if (i.dataset.kind === "boolean") { if (!i.checked) continue; v = true; }
    else if (i.value.trim() === "") continue;
    else if (i.dataset.kind === "integer" || i.dataset.kind === "number") v = Number(i.value);
    else if (i.dataset.kind === "list") v = i.value.split(",").map((x) => x.trim()).filter(Boolean);
    else if (i.dataset.kind === "map") v = Object.fromEntries(i.value.split(",").map((kv) => kv.split("=").map((x) => x.trim())).filter((kv) => kv[0]).map(([k, x]) => [k, Number(x)]));
    else v = i.value.trim();
    const path = i.name.split(".");
    let o = out;
    for (const k of path.slice(0, -1)) o = o[k] = o[k] || {};
    o[path[path.length - 1]] = v;
  }
  $("#form-error").textContent = "";
  try { const info = await api("/api/v1/runs", { form: out }); await refreshRuns(); openRun(info); } catch (e) { $("#form-error").textContent = e.message; }
};
api("/api/v1/scenario-schema").then(schemaForm).catch((e) => { $("#form-error").textContent = e.message; });

refreshRuns().then((runs) => { const live = runs.filter((r) => r.state === "running"); if (live.length) openRun(live[live.length - 1]); });
refreshPast();
setInterval(refreshRuns, 5000);
