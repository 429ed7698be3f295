// Horde console: the topology editor and the experiment view. The editor holds a topology in
// the same form as the file (`name`, `node[]`, `link[]`: horde_topo::RawTopology); every change
// is checked by the server with the emulator's own planner (its error lands on the element it
// names) and turned into the canonical TOML that Save writes and `horde emu up` reads. A node's
// place is kept in the file (`ui = { x, y, page }`), so a file the editor wrote opens exactly as
// it was left. Once a topology is up, links show the link emulator's counters every second and
// can be changed live; commands run inside nodes.
"use strict";
(() => {
  const $ = (s) => document.querySelector(s);
  const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; };
  const call = async (method, path, body) => {
    const r = await window.hordeFetch(path, body === undefined ? { method } : { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const text = await r.text();
    let v = null;
    try { v = text ? JSON.parse(text) : null; } catch (_) { v = { error: text }; }
    if (!r.ok) throw new Error((v && v.error) || r.statusText);
    return v;
  };
  const MAIN = "main";
  const KINDS = ["host", "router", "switch", "hub"];
  const FIELDS = ["rate", "delay", "jitter", "loss", "duplicate", "corrupt", "ber", "reorder_prob", "queue", "trace"];
  const PREFIX = { host: "h", router: "r", switch: "sw", hub: "hub", group: "g" };
  const GRID = 10; // positions snap to a 10-px grid
  const snap = (v) => Math.round(v / GRID) * GRID;

  const T = { model: { name: "lab", node: [], link: [] }, page: MAIN, pages: [MAIN], tool: "select", sel: null, checked: null, exp: null, detail: null, prev: null, rates: {}, from: null };
  window.hordeEditor = T; // for tests and the curious: the editor's state

  // ---------- tabs ----------
  const tab = (which) => {
    $("#runs-view").hidden = which !== "runs";
    $("#topo-view").hidden = which !== "topo";
    $("#tab-runs").classList.toggle("on", which === "runs");
    $("#tab-topo").classList.toggle("on", which === "topo");
    if (which === "topo") { cy.resize(); refreshFiles(); refreshExps(); }
  };
  $("#tab-runs").onclick = () => tab("runs");
  $("#tab-topo").onclick = () => tab("topo");

  // ---------- the graph ----------
  const cy = cytoscape({
    container: $("#cy"),
    elements: [],
    minZoom: 0.2,
    maxZoom: 3,
    boxSelectionEnabled: false,
    style: [
      { selector: "node", style: { label: "data(label)", "text-valign": "bottom", "text-margin-y": 4, "font-size": 11, width: 30, height: 30, "background-color": "#2553a3", "border-width": 2, "border-color": "#fff" } },
      { selector: "node.router", style: { shape: "ellipse", "background-color": "#c2571a" } },
      { selector: "node.host", style: { shape: "round-rectangle" } },
      { selector: "node.switch", style: { shape: "rectangle", "background-color": "#2a7a3b", width: 38, height: 22 } },
      { selector: "node.hub", style: { shape: "diamond", "background-color": "#6b6f7a" } },
      { selector: "node.group", style: { width: 40, height: 40, "border-style": "double", "border-width": 6, "border-color": "#9bb0d8" } },
      { selector: "node.ghost", style: { "background-opacity": 0.15, "border-style": "dashed", "border-color": "#889", color: "#667" } },
      { selector: "node.up", style: { "border-color": "#39b54a", "border-width": 4 } },
      { selector: "node:selected", style: { "overlay-opacity": 0.15, "overlay-color": "#2553a3" } },
      { selector: "edge", style: { width: 2, "line-color": "#99a", label: "data(label)", "font-size": 10, "text-background-color": "#fff", "text-background-opacity": 0.8, "text-rotation": "autorotate", "curve-style": "bezier" } },
      { selector: "edge.impaired", style: { "line-style": "dashed", "line-color": "#c2571a" } },
      { selector: "edge.flowing", style: { "line-color": "#39b54a", width: 4 } },
      { selector: "edge.dropping", style: { "line-color": "#d62728", width: 4 } },
      { selector: "edge:selected", style: { "line-color": "#2553a3", width: 4 } },
      { selector: ".error", style: { "border-color": "#d62728", "border-width": 4, "line-color": "#d62728" } },
    ],
  });
  T.cy = cy;

  const pageOf = (n) => (n.ui && n.ui.page) || MAIN;
  const nodeIndex = (name) => T.model.node.findIndex((n) => n.name === name);
  const nodeLabel = (n) => n.count ? `${n.name} ×${n.count}` : n.name;
  const impairText = (i) => !i ? "" : ["rate", "delay", "jitter", "loss"].filter((k) => i[k] !== undefined && i[k] !== null).map((k) => typeof i[k] === "string" ? i[k] : lossText(i[k])).join(" ");
  const lossText = (l) => l === undefined || l === null ? "" : typeof l === "string" ? l : ["p", "r", "loss_bad", "loss_good"].filter((k) => l[k]).map((k) => `${k}=${l[k]}`).join(",");
  const lossValue = (s) => {
    s = s.trim();
    if (!s) return undefined;
    if (!s.includes("=")) return s;
    const o = {};
    for (const part of s.split(",")) { const [k, v] = part.split("=").map((x) => x.trim()); if (k) o[k] = v; }
    return o;
  };
  const linkImpaired = (l) => FIELDS.some((k) => l[k] !== undefined) || l.reorder_gap !== undefined || l.ab || l.ba;
  const linkLabel = (l) => {
    const both = impairText(l), ab = impairText(l.ab), ba = impairText(l.ba);
    return [both, ab && `→ ${ab}`, ba && `← ${ba}`].filter(Boolean).join(" | ");
  };

  function render() {
    const onPage = new Set(T.model.node.filter((n) => pageOf(n) === T.page).map((n) => n.name));
    const els = [];
    T.model.node.forEach((n, i) => {
      if (!onPage.has(n.name)) return;
      const pos = n.ui ? { x: n.ui.x, y: n.ui.y } : { x: 0, y: 0 };
      els.push({ group: "nodes", data: { id: "n:" + n.name, label: nodeLabel(n), i }, position: pos, classes: n.kind + (n.count ? " group" : "") + (T.exp ? " up" : "") });
    });
    T.model.link.forEach((l, i) => {
      const ina = onPage.has(l.a), inb = onPage.has(l.b);
      if (!ina && !inb) return;
      const end = (name, other) => {
        if (onPage.has(name)) return "n:" + name;
        // a node on another page: a ghost beside the end that is here
        const o = T.model.node[nodeIndex(other)];
        const id = `g:${i}:${name}`;
        const n = T.model.node[nodeIndex(name)];
        els.push({ group: "nodes", data: { id, label: `${name} (page ${n ? pageOf(n) : "?"})` }, position: { x: ((o && o.ui && o.ui.x) || 0) + 90, y: ((o && o.ui && o.ui.y) || 0) - 40 }, classes: "ghost", grabbable: false });
        return id;
      };
      const s = end(l.a, l.b), t = end(l.b, l.a);
      els.push({ group: "edges", data: { id: "l:" + i, source: s, target: t, label: liveLabel(i) || linkLabel(l), i }, classes: linkImpaired(l) ? "impaired" : "" });
    });
    cy.elements().remove();
    cy.add(els);
    markError();
    markLive();
    if (T.sel) { const e = cy.getElementById(T.sel.type === "node" ? "n:" + T.model.node[T.sel.i]?.name : "l:" + T.sel.i); if (e) e.select(); }
    renderPages();
  }

  function renderPages() {
    const d = $("#topo-pages");
    d.textContent = "";
    for (const p of T.pages) {
      const b = el("button", `${p} (${T.model.node.filter((n) => pageOf(n) === p).length})`, p === T.page ? "on" : "");
      b.onclick = () => { T.page = p; T.sel = null; render(); panel(); };
      d.append(b);
    }
    const add = el("button", "+ page");
    add.title = "A new page (canvas) for a large topology";
    add.onclick = () => { const name = prompt("Page name", `page${T.pages.length + 1}`); if (name && !T.pages.includes(name)) { T.pages.push(name); T.page = name; render(); } };
    d.append(add);
  }

  // ---------- editing ----------
  function changed() { $("#topo-status").textContent = ""; render(); panel(); scheduleCheck(); }

  function freshName(prefix) { for (let k = 1; ; k++) if (nodeIndex(prefix + k) < 0) return prefix + k; }

  function addNode(tool, pos) {
    const kind = tool === "group" ? "host" : tool;
    const n = { name: freshName(PREFIX[tool]), kind };
    if (tool === "group") n.count = 10;
    n.ui = { x: snap(pos.x), y: snap(pos.y) };
    if (T.page !== MAIN) n.ui.page = T.page;
    T.model.node.push(n);
    T.sel = { type: "node", i: T.model.node.length - 1 };
    changed();
  }

  function addLink(a, b) {
    if (a === b || T.model.link.some((l) => (l.a === a && l.b === b) || (l.a === b && l.b === a))) return;
    T.model.link.push({ a, b });
    T.sel = { type: "link", i: T.model.link.length - 1 };
    changed();
  }

  function removeNode(i) {
    const name = T.model.node[i].name;
    T.model.node.splice(i, 1);
    T.model.link = T.model.link.filter((l) => l.a !== name && l.b !== name);
    T.sel = null;
    changed();
  }

  function setTool(t) {
    T.tool = t;
    for (const b of document.querySelectorAll("#palette button")) b.classList.toggle("on", b.dataset.tool === t);
    cy.autoungrabify(t === "link" || t === "delete");
    cy.userPanningEnabled(t === "select");
  }
  for (const b of document.querySelectorAll("#palette button")) b.onclick = () => setTool(b.dataset.tool);

  cy.on("tap", (e) => {
    if (e.target === cy) {
      if (PREFIX[T.tool]) return addNode(T.tool, e.position);
      T.sel = null; panel(); return;
    }
    const d = e.target.data();
    if (e.target.hasClass("ghost")) return;
    if (T.tool === "delete") {
      if (e.target.isNode()) return removeNode(d.i);
      T.model.link.splice(d.i, 1); T.sel = null; return changed();
    }
    T.sel = { type: e.target.isNode() ? "node" : "link", i: d.i };
    panel();
  });
  cy.on("tapstart", "node", (e) => { if (T.tool === "link" && !e.target.hasClass("ghost")) T.from = T.model.node[e.target.data("i")].name; });
  cy.on("tapend", (e) => {
    const from = T.from;
    T.from = null;
    if (!from || T.tool !== "link" || e.target === cy || !e.target.isNode() || e.target.hasClass("ghost")) return;
    addLink(from, T.model.node[e.target.data("i")].name);
  });
  cy.on("dragfree", "node", (e) => {
    const n = T.model.node[e.target.data("i")];
    if (!n || e.target.hasClass("ghost")) return;
    const p = e.target.position();
    n.ui = Object.assign(n.ui || {}, { x: snap(p.x), y: snap(p.y) });
    e.target.position({ x: n.ui.x, y: n.ui.y });
    scheduleCheck();
  });

  // ---------- the side panel ----------
  const field = (label, value, attrs = {}) => {
    const l = el("label", label);
    const i = el("input");
    i.value = value === undefined || value === null ? "" : String(value);
    Object.assign(i, attrs);
    l.append(i);
    return [l, i];
  };
  const opt = (v) => (v.trim() === "" ? undefined : v.trim());

  function panel() {
    const p = $("#topo-panel");
    p.textContent = "";
    if (!T.sel) { p.append(el("p", "Select a node or a link to edit it.", "hint")); if (T.exp) p.append(expPanel()); return; }
    if (T.sel.type === "node") return nodePanel(p, T.model.node[T.sel.i]);
    return linkPanel(p, T.sel.i);
  }

  function nodePanel(p, n) {
    if (!n) return;
    p.append(el("h3", `Node ${n.name}`));
    const [ln, name] = field("name", n.name);
    const lk = el("label", "kind"); const kind = el("select");
    for (const k of KINDS) { const o = el("option", k); o.value = k; o.selected = n.kind === k; kind.append(o); }
    lk.append(kind);
    const [lc, count] = field("count", n.count, { type: "number", min: 1, title: "A group: NAME1 … NAMEcount" });
    const lp = el("label", "page"); const page = el("select");
    for (const pg of T.pages) { const o = el("option", pg); o.selected = pageOf(n) === pg; page.append(o); }
    lp.append(page);
    // a router's routing: static routes, or FRR's daemons (OSPF, RIP, BGP)
    const routing = el("fieldset"); routing.append(el("legend", "routing (routers)"));
    const lr = el("label", "protocol"); const proto = el("select"); proto.name = "routing";
    for (const v of ["static", "ospf", "rip", "bgp"]) { const o = el("option", v); o.selected = (n.routing || "static") === v; proto.append(o); }
    lr.append(proto);
    const [la, area] = field("area", n.area, { placeholder: "0.0.0.0 (OSPF)" });
    const [lasn, asn] = field("asn", n.asn, { type: "number", min: 1, placeholder: "65001+ (BGP)" });
    const lt = el("label", "timers"); const timers = el("select"); timers.name = "timers";
    for (const v of ["default", "fast"]) { const o = el("option", v); o.selected = (n.timers || "default") === v; timers.append(o); }
    lt.append(timers);
    const lb = el("label", "BFD"); const bfd = el("input"); bfd.type = "checkbox"; bfd.checked = !!n.bfd; lb.append(bfd);
    routing.append(lr, la, lasn, lt, lb);
    routing.hidden = n.kind !== "router";
    kind.onchange = () => { routing.hidden = kind.value !== "router"; };
    const apply = el("button", "Apply");
    apply.id = "node-apply";
    apply.onclick = () => {
      const old = n.name, nn = name.value.trim();
      if (nn !== old && nodeIndex(nn) >= 0) { $("#topo-error").textContent = `a node named ${nn} exists already`; return; }
      n.name = nn; n.kind = kind.value;
      if (count.value) n.count = Number(count.value); else delete n.count;
      for (const k of ["routing", "area", "asn", "timers", "bfd"]) delete n[k];
      if (n.kind === "router" && proto.value !== "static") {
        n.routing = proto.value;
        if (opt(area.value)) n.area = opt(area.value);
        if (opt(asn.value)) n.asn = Number(asn.value);
        if (timers.value !== "default") n.timers = timers.value;
        if (bfd.checked) n.bfd = true;
      }
      n.ui = n.ui || { x: 0, y: 0 };
      if (page.value === MAIN) delete n.ui.page; else n.ui.page = page.value;
      for (const l of T.model.link) { if (l.a === old) l.a = nn; if (l.b === old) l.b = nn; }
      changed();
    };
    const del = el("button", "Delete"); del.className = "danger"; del.onclick = () => removeNode(T.sel.i);
    p.append(ln, lk, lc, lp, routing, apply, del);
    if (T.exp && (n.kind === "host" || n.kind === "router")) p.append(execBox(n));
  }

  function impairSet(title, src, id) {
    const fs = el("fieldset"); fs.append(el("legend", title));
    const inputs = {};
    for (const k of FIELDS) {
      const [l, i] = field(k, k === "loss" ? lossText(src && src.loss) : src && src[k]);
      i.name = `${id}-${k}`;
      i.placeholder = { rate: "10mbit", delay: "10ms", jitter: "2ms", loss: "1% or p=1%,r=25%", duplicate: "0.1%", corrupt: "0.1% (one bit)", ber: "1e-6 (bit-error rate)", reorder_prob: "25% (sent at once)", queue: "64kB", trace: "file" }[k];
      inputs[k] = i; fs.append(l);
    }
    const [lg, gap] = field("reorder_gap", src && src.reorder_gap, { type: "number", min: 1, placeholder: "1 (every packet eligible)" });
    gap.name = `${id}-reorder_gap`; inputs.reorder_gap = gap; fs.append(lg);
    const lr = el("label", "reorder"); const r = el("input"); r.type = "checkbox"; r.checked = !!(src && src.reorder); lr.append(r); fs.append(lr);
    inputs.reorder = r;
    return [fs, inputs];
  }
  const readSet = (inputs) => {
    const o = {};
    for (const k of FIELDS) { const v = k === "loss" ? lossValue(inputs[k].value) : opt(inputs[k].value); if (v !== undefined) o[k] = v; }
    if (inputs.reorder.checked) o.reorder = true;
    if (opt(inputs.reorder_gap.value)) o.reorder_gap = Number(inputs.reorder_gap.value);
    return o;
  };

  function linkPanel(p, i) {
    const l = T.model.link[i];
    if (!l) return;
    p.append(el("h3", `Link ${l.a} – ${l.b}`));
    if (T.exp) p.append(livePanel(l));
    const [ls, subnet] = field("subnet", l.subnet, { placeholder: "10.1.0.0/24 (else assigned)" });
    const [lcost, cost] = field("cost", l.cost, { type: "number", min: 1, max: 65535, placeholder: "routing cost (OSPF)" });
    const llive = el("label", "live"); const live = el("input"); live.type = "checkbox"; live.checked = !!l.live; live.title = "Through the link emulator even unimpaired, so it can be changed while up"; llive.append(live);
    const [fb, both] = impairSet("both directions", l, "both");
    const [fab, ab] = impairSet(`${l.a} → ${l.b} (ab)`, l.ab, "ab");
    const [fba, ba] = impairSet(`${l.b} → ${l.a} (ba)`, l.ba, "ba");
    const apply = el("button", "Apply"); apply.id = "link-apply";
    apply.onclick = () => {
      const n = { a: l.a, b: l.b };
      if (live.checked) n.live = true;
      if (opt(subnet.value)) n.subnet = opt(subnet.value);
      if (opt(cost.value)) n.cost = Number(cost.value);
      Object.assign(n, readSet(both));
      const sab = readSet(ab), sba = readSet(ba);
      if (Object.keys(sab).length) n.ab = sab;
      if (Object.keys(sba).length) n.ba = sba;
      T.model.link[i] = n;
      changed();
    };
    const del = el("button", "Delete"); del.className = "danger"; del.onclick = () => { T.model.link.splice(i, 1); T.sel = null; changed(); };
    p.append(ls, lcost, llive, fb, fab, fba, apply, del);
  }

  // ---------- checking ----------
  // Every check and every load takes a new generation: an answer that comes back after the
  // model was replaced (a file opened while a check was in flight) is dropped, never shown.
  let timer = null, generation = 0;
  function scheduleCheck() { clearTimeout(timer); generation += 1; timer = setTimeout(check, 250); }
  async function check() {
    T.model.name = $("#topo-name").value.trim() || "lab";
    const mine = ++generation;
    try {
      const c = await call("POST", "/api/v1/topologies/check", T.model);
      if (mine !== generation) return;
      T.checked = c;
      showCheck();
    } catch (e) { if (mine === generation) $("#topo-error").textContent = e.message; }
  }
  function showCheck() {
    const c = T.checked;
    $("#topo-toml").textContent = c.toml || "";
    const err = c.error;
    let where = "";
    if (err && err.node !== null && err.node !== undefined && T.model.node[err.node]) { const pg = pageOf(T.model.node[err.node]); if (pg !== T.page) where = ` (on page ${pg})`; }
    $("#topo-error").textContent = err ? `${err.field}: ${err.message}${where}` : "";
    $("#topo-summary").textContent = err ? "" : `${c.nodes} nodes (${c.hosts} with a namespace), ${c.links} links after groups are expanded`;
    markError();
  }
  function markError() {
    cy.elements().removeClass("error");
    const err = T.checked && T.checked.error;
    if (!err) return;
    if (err.node !== null && err.node !== undefined && T.model.node[err.node]) cy.getElementById("n:" + T.model.node[err.node].name).addClass("error");
    if (err.link !== null && err.link !== undefined) cy.getElementById("l:" + err.link).addClass("error");
  }
  $("#topo-name").oninput = scheduleCheck;

  // ---------- files ----------
  function load(c) {
    if (!c.topology) { $("#topo-error").textContent = c.error ? `${c.error.field}: ${c.error.message}` : "not a topology"; return; }
    T.model = c.topology;
    T.model.node = T.model.node || [];
    T.model.link = T.model.link || [];
    $("#topo-name").value = T.model.name;
    T.pages = [MAIN, ...new Set(T.model.node.map(pageOf).filter((p) => p !== MAIN))];
    T.page = MAIN; T.sel = null;
    clearTimeout(timer); generation += 1;
    T.checked = c;
    const unplaced = T.model.node.some((n) => !n.ui);
    render(); panel(); showCheck();
    if (unplaced) layout(true);
  }
  async function open(body) {
    try { load(await call("POST", "/api/v1/topologies/open", body)); } catch (e) { $("#topo-error").textContent = e.message; }
  }
  async function refreshFiles() {
    try {
      const r = await call("GET", "/api/v1/topologies");
      const s = $("#topo-files"), keep = s.value;
      s.textContent = "";
      for (const f of r.files) { const o = el("option", f); o.value = f; s.append(o); }
      if (keep) s.value = keep;
    } catch (_) { /* the pill says */ }
  }
  $("#topo-open").onclick = () => { const p = $("#topo-files").value; if (p) open({ path: p }); };
  $("#topo-upload").onchange = async (e) => { const f = e.target.files[0]; if (f) open({ text: await f.text() }); e.target.value = ""; };
  $("#topo-new").onclick = () => { load({ topology: { name: "lab", node: [], link: [] }, error: null, toml: "", nodes: 0, hosts: 0, links: 0 }); };
  async function save() {
    const name = $("#topo-save-name").value.trim() || $("#topo-name").value.trim();
    T.model.name = $("#topo-name").value.trim() || "lab";
    clearTimeout(timer); const mine = ++generation;
    const r = await call("PUT", "/api/v1/topologies", { name, topology: T.model });
    if (mine === generation) { T.checked = r.checked; showCheck(); }
    T.savedPath = r.path;
    $("#topo-status").textContent = `saved ${r.path}` + (r.checked.error ? " (it does not plan yet)" : "");
    refreshFiles();
    return r;
  }
  $("#topo-save").onclick = () => save().catch((e) => { $("#topo-error").textContent = e.message; });
  $("#topo-download").onclick = () => {
    if (!T.checked || !T.checked.toml) return;
    const a = el("a"); a.href = URL.createObjectURL(new Blob([T.checked.toml], { type: "application/toml" }));
    a.download = `${$("#topo-save-name").value.trim() || T.model.name || "topology"}.toml`; a.click();
  };

  // fCoSE over this page's nodes (or, for an imported file, every node), positions written back
  function layout(all) {
    if (all) { T.model.node.forEach((n) => { if (!n.ui) n.ui = { x: 0, y: 0 }; }); render(); }
    const run = cy.elements().not(".ghost").layout({ name: "fcose", animate: false, randomize: true, nodeRepulsion: 8000, idealEdgeLength: 90, fit: true, padding: 30 });
    run.one("layoutstop", () => {
      cy.nodes().not(".ghost").forEach((c) => { const n = T.model.node[c.data("i")]; const p = c.position(); n.ui = Object.assign(n.ui || {}, { x: snap(p.x), y: snap(p.y) }); });
      scheduleCheck();
    });
    run.run();
  }
  $("#topo-layout").onclick = () => layout(false);

  // ---------- the experiment ----------
  async function refreshExps() {
    try {
      const s = await call("GET", "/api/v1/emu");
      T.cannot = s.cannot;
      $("#topo-up").disabled = !!s.cannot || !!T.exp;
      $("#topo-up").title = s.cannot || "Save, then bring this topology up (horde emu up)";
      const sel = $("#topo-exps"); sel.textContent = "";
      for (const x of s.experiments) { const o = el("option", `${x.id} ${x.name}`); o.value = x.id; sel.append(o); }
      $("#topo-attach").disabled = !s.experiments.length;
      if (s.cannot && !T.exp) expState(s.cannot, "bad");
      cy.resize();
    } catch (_) { /* the pill says */ }
  }
  // the toolbar may change height: the graph must learn where its container went
  function expState(text, cls) { const s = $("#topo-exp"); s.textContent = text; s.className = "pill " + (cls || ""); cy.resize(); }
  async function attach(id) {
    T.exp = id; T.prev = null; T.rates = {};
    try { T.detail = await call("GET", `/api/v1/emu/${id}`); } catch (e) { expState(e.message, "bad"); T.exp = null; return; }
    expState(`${id} up`, "ok");
    $("#topo-down").disabled = false; $("#topo-up").disabled = true;
    render(); panel();
  }
  $("#topo-attach").onclick = async () => {
    const id = $("#topo-exps").value;
    if (!id) return;
    try { const d = await call("GET", `/api/v1/emu/${id}`); await open({ path: d.file }); await attach(id); } catch (e) { expState(e.message, "bad"); }
  };
  $("#topo-up").onclick = async () => {
    $("#topo-error").textContent = "";
    try {
      const saved = await save();
      if (saved.checked.error) throw new Error("fix the topology first: " + saved.checked.error.message);
      expState("coming up…");
      $("#topo-up").disabled = true;
      const r = await call("POST", "/api/v1/emu", { topology: saved.path, live: $("#topo-live").checked });
      await attach(r.id);
      refreshExps();
    } catch (e) { expState("not up", "bad"); $("#topo-error").textContent = e.message; $("#topo-up").disabled = !!T.cannot; }
  };
  $("#topo-down").onclick = async () => {
    if (!T.exp) return;
    expState("going down…");
    // no counters are asked for while it goes down (they would fail: its link daemon is gone)
    T.goingDown = true;
    try { await call("DELETE", `/api/v1/emu/${T.exp}`); T.exp = null; T.detail = null; expState("down"); $("#topo-down").disabled = true; $("#topo-up").disabled = !!T.cannot; render(); panel(); refreshExps(); }
    catch (e) { expState("down failed", "bad"); $("#topo-error").textContent = e.message; }
    finally { T.goingDown = false; }
  };

  // the raw link a plan link (two member names) belongs to
  function rawLinkOf(a, b) {
    const entry = (name) => { const n = T.detail && T.detail.nodes.find((m) => m.name === name); return n ? [n.name, n.entry] : [name]; };
    const ea = entry(a), eb = entry(b);
    for (let i = 0; i < T.model.link.length; i++) {
      const l = T.model.link[i];
      if (ea.includes(l.a) && eb.includes(l.b)) return [i, false];
      if (ea.includes(l.b) && eb.includes(l.a)) return [i, true];
    }
    return [-1, false];
  }
  async function poll() {
    if (!T.exp || T.goingDown) return;
    const exp = T.exp;
    let c;
    try { c = await call("GET", `/api/v1/emu/${exp}/counters`); } catch (e) { if (T.exp === exp && !T.goingDown) expState(`${exp}: ${e.message}`, "bad"); return; }
    if (T.exp !== exp) return;
    const rates = {};
    if (T.prev) {
      const dt = Math.max(1, c.at_ms - T.prev.at_ms) / 1000;
      const before = Object.fromEntries(T.prev.links.map((l) => [`${l.a}|${l.b}`, l]));
      for (const l of c.links) {
        const p = before[`${l.a}|${l.b}`];
        if (!p) continue;
        const [i, swapped] = rawLinkOf(l.a, l.b);
        if (i < 0) continue;
        const r = rates[i] || (rates[i] = { ab: { pkts: 0, bits: 0, drops: 0, queue: 0 }, ba: { pkts: 0, bits: 0, drops: 0, queue: 0 }, spec: {} });
        for (const [d, raw] of [["ab", swapped ? "ba" : "ab"], ["ba", swapped ? "ab" : "ba"]]) {
          const now = l[raw], then = p[raw];
          r[d].pkts += (now.packets - then.packets) / dt;
          r[d].bits += 8 * ((now.delivered_bytes || 0) - (then.delivered_bytes || 0)) / dt;
          r[d].drops += (now.lost + now.queue_drops + now.overflow_drops) - (then.lost + then.queue_drops + then.overflow_drops);
          r[d].queue += now.queue_bytes;
          r[d].spec = now.spec;
        }
      }
    }
    T.prev = c; T.rates = rates;
    markLive();
    if (T.sel && T.sel.type === "link") { const t = $("#live-counters"); if (t) t.replaceWith(countersTable(T.sel.i)); }
  }
  setInterval(poll, 1000);
  const fmt = (v) => v >= 1e6 ? (v / 1e6).toFixed(1) + "M" : v >= 1e3 ? (v / 1e3).toFixed(1) + "k" : v.toFixed(0);
  function liveLabel(i) { const r = T.exp && T.rates[i]; return r ? `→ ${fmt(r.ab.pkts)} ← ${fmt(r.ba.pkts)} pkt/s` : ""; }
  function markLive() {
    cy.edges().forEach((e) => {
      const i = e.data("i"), r = T.exp && T.rates[i];
      e.toggleClass("flowing", !!r && r.ab.pkts + r.ba.pkts > 0);
      e.toggleClass("dropping", !!r && r.ab.drops + r.ba.drops > 0);
      const l = T.model.link[i];
      if (l) e.data("label", liveLabel(i) || linkLabel(l));
    });
    cy.nodes().not(".ghost").toggleClass("up", !!T.exp);
  }
  function countersTable(i) {
    const t = el("table"); t.id = "live-counters";
    const r = T.rates[i];
    const l = T.model.link[i];
    t.append(Object.assign(el("tr"), { innerHTML: "<th>direction</th><th>pkt/s</th><th>kbit/s</th><th>queue B</th><th>drops</th>" }));
    for (const [d, from, to] of [["ab", l.a, l.b], ["ba", l.b, l.a]]) {
      const tr = el("tr");
      const x = r ? r[d] : null;
      for (const v of [`${from} → ${to}`, x ? fmt(x.pkts) : "–", x ? (x.bits / 1e3).toFixed(1) : "–", x ? String(x.queue) : "–", x ? String(x.drops) : "–"]) tr.append(el("td", v));
      t.append(tr);
      if (x && x.spec) { const s = el("tr"); const td = el("td", `now: ${x.spec}`); td.colSpan = 5; td.style.textAlign = "left"; s.append(td); t.append(s); }
    }
    if (!r) { const tr = el("tr"); const td = el("td", "no counters: a plain veth link (bring the topology up with live links to count and change it)"); td.colSpan = 5; tr.append(td); t.append(tr); }
    return t;
  }
  function livePanel(l) {
    const fs = el("fieldset"); fs.append(el("legend", `Live (${T.exp})`));
    fs.append(countersTable(T.sel.i));
    const ld = el("label", "direction"); const dir = el("select");
    for (const [v, t] of [["both", "both"], ["ab", `${l.a} → ${l.b}`], ["ba", `${l.b} → ${l.a}`]]) { const o = el("option", t); o.value = v; dir.append(o); }
    ld.append(dir); fs.append(ld);
    const inputs = {};
    for (const k of ["rate", "delay", "jitter", "loss", "ber", "reorder_prob", "queue"]) { const [lab, i] = field(k, ""); i.name = `live-${k}`; inputs[k] = i; fs.append(lab); }
    const go = el("button", "Change live"); go.id = "live-apply";
    const out = el("p", "", "error"); out.id = "live-out";
    go.onclick = async () => {
      const body = { a: l.a, b: l.b, dir: dir.value };
      for (const k in inputs) if (opt(inputs[k].value)) body[k] = opt(inputs[k].value);
      out.textContent = "";
      try { const r = await call("POST", `/api/v1/emu/${T.exp}/link`, body); out.className = "ok"; out.textContent = `changed (${r.length} link${r.length > 1 ? "s" : ""})`; }
      catch (e) { out.className = "error"; out.textContent = e.message; }
    };
    // fail the link (both ends down, as a pulled cable) and bring it back
    const state = (st) => async () => {
      out.textContent = "";
      try { const r = await call("POST", `/api/v1/emu/${T.exp}/link`, { a: l.a, b: l.b, state: st }); out.className = "ok"; out.textContent = `${st === "down" ? "taken down" : "back up"} (${r.length} link${r.length > 1 ? "s" : ""})`; }
      catch (e) { out.className = "error"; out.textContent = e.message; }
    };
    const down = el("button", "Take down"); down.id = "live-down"; down.className = "danger"; down.onclick = state("down");
    const up = el("button", "Bring up"); up.id = "live-up"; up.onclick = state("up");
    fs.append(go, down, up, out);
    return fs;
  }
  function execBox(n) {
    const fs = el("fieldset"); fs.append(el("legend", `Run in ${n.name} (${T.exp})`));
    let member = n.name;
    if (n.count) {
      const lm = el("label", "member"); const s = el("select");
      for (let k = 1; k <= Math.min(n.count, 500); k++) { const o = el("option", n.name + k); s.append(o); }
      s.onchange = () => { member = s.value; }; member = n.name + 1; lm.append(s); fs.append(lm);
    }
    const addrs = T.detail ? T.detail.nodes.filter((m) => m.name === n.name || m.entry === n.name).slice(0, 5).map((m) => `${m.name}: ${m.addrs.join(" ")}`) : [];
    if (addrs.length) fs.append(el("p", addrs.join("; "), "hint"));
    const [lc, cmd] = field("command", "ip -br addr");
    cmd.id = "exec-cmd";
    const go = el("button", "Run"); go.id = "exec-run";
    const out = el("pre"); out.id = "exec-out";
    go.onclick = async () => {
      out.textContent = "running…";
      try {
        const r = await call("POST", `/api/v1/emu/${T.exp}/exec`, { node: member, command: cmd.value });
        out.textContent = `${r.stdout}${r.stderr}${r.timed_out ? "\n(stopped after 20 s)" : `\n(exit ${r.exit})`}`;
      } catch (e) { out.textContent = e.message; }
    };
    fs.append(lc, go, out);
    return fs;
  }
  function expPanel() {
    const d = el("div");
    if (T.detail) d.append(el("p", `${T.exp}: ${T.detail.nodes.length} nodes, ${T.detail.links.length} links (${T.detail.links.filter((l) => l.emulated).length} through the link emulator). Select a link to see its counters and change it; a host or router to run a command in it.`, "hint"));
    return d;
  }

  render();
  panel();
  scheduleCheck();
  setTool("select");
})();
