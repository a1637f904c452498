// BeeWeave UI: a hash-routed single page over the JSON API (/api/...).
// Everything from the store is untrusted text: it is only ever set as textContent.
"use strict";

const main = document.getElementById("main");
const EDGE_COLORS = {
  NEXT: "#c5cad3", CAUSED_BY: "#2563eb", REFERS_TO: "#059669", SUMMARIZES: "#9333ea",
  DERIVED_FROM: "#d97706", SUPERSEDES: "#dc2626",
};
const LANES = ["system_prompt", "user_message", "model_call", "assistant_message",
  "tool_invocation", "tool_result", "internal_thought", "retrieval", "summary", "memory",
  "error", "warning", "checkpoint"];
const TYPE_COLORS = {
  system_prompt: "#64748b", user_message: "#2563eb", model_call: "#94a3b8",
  assistant_message: "#16a34a", tool_invocation: "#d97706", tool_result: "#b45309",
  internal_thought: "#a3a3a3", retrieval: "#0891b2", summary: "#9333ea", memory: "#db2777",
  error: "#dc2626", warning: "#f59e0b", checkpoint: "#475569",
};
const DONE = { purge: "purged", invalidate: "invalidated", confirm: "confirmed" };
window.beeweave = { cy: null, ready: false };

function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}

async function api(path, options) {
  const res = await fetch(path, options);
  const body = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

const when = (ts) => (ts ? new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19) : "-");
const sessionLink = (sid, eventId) =>
  `#/session/${encodeURIComponent(sid)}` + (eventId ? `?event=${encodeURIComponent(eventId)}` : "");
const fmt = (x, d = 3) => (x === null || x === undefined ? "-" : Number(x).toFixed(d));

function table(headers, rows, testid) {
  return el("table", { "data-testid": testid },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

// An assembly's question; one made without a query recalled for the latest user message.
const queryText = (a) => (a.asked ? a.query : `${a.query || "?"} (the latest user message)`);

function page(title, ...kids) {
  main.replaceChildren(el("h1", {}, title), ...kids.filter(Boolean));
}

// ----------------------------------------------------------------- sessions
async function showSessions(params) {
  const q = params.get("q") || "";
  const input = el("input", { type: "search", value: q, placeholder: "filter by session, user or agent",
    "data-testid": "session-filter",
    onchange: (e) => { location.hash = `#/sessions?q=${encodeURIComponent(e.target.value)}`; } });
  const rows = (await api(`/api/sessions?q=${encodeURIComponent(q)}`)).map((s) =>
    el("tr", {},
      el("td", {}, el("a", { href: sessionLink(s.session_id), "data-testid": "session-link" }, s.session_id)),
      el("td", {}, s.events),
      el("td", {}, Object.entries(s.counts).map(([t, n]) => el("span", { class: "badge" }, `${t} ${n}`))),
      el("td", {}, s.tokens), el("td", {}, s.users.join(", ")), el("td", {}, s.agents.join(", ")),
      el("td", {}, when(s.first_ts)), el("td", {}, when(s.last_ts))));
  page("Sessions", el("p", {}, input),
    table(["session", "events", "by type", "tokens", "users", "agents", "first", "last"], rows, "sessions"));
}

// ------------------------------------------------------------------ session
async function showSession(sid, params) {
  let seqFrom = params.has("from") ? Number(params.get("from")) : null;
  const focus = params.get("event");
  if (focus && seqFrom === null) {
    const ev = await api(`/api/events/${encodeURIComponent(focus)}`);
    seqFrom = Math.max(0, ev.seq - 200);
  }
  const qs = seqFrom === null ? "" : `?seq_from=${seqFrom}`;
  const [g, asm] = await Promise.all([
    api(`/api/sessions/${encodeURIComponent(sid)}/graph${qs}`),
    api(`/api/sessions/${encodeURIComponent(sid)}/assemblies`),
  ]);
  const go = (from) => { location.hash = `#/session/${encodeURIComponent(sid)}?from=${Math.max(0, from)}`; };
  const nav = el("p", { "data-testid": "window" },
    el("button", { onclick: () => go(g.seq_from - g.limit), disabled: g.seq_from <= 0 }, "◀ earlier"),
    ` events #${g.seq_from}–#${Math.min(g.seq_to, g.last_seq)} of ${g.total} active (${g.shown} shown`
      + (g.hidden ? `, and ${g.hidden} hidden, dashed) ` : ") "),
    el("button", { onclick: () => go(g.seq_from + g.limit), disabled: g.seq_to >= g.last_seq }, "later ▶"),
    " ", el("a", { href: `#/memories/${encodeURIComponent(sid)}`, "data-testid": "memories-link" }, "Memories"),
    " · ", el("a", { href: `#/search?session=${encodeURIComponent(sid)}` }, "Search this session"),
    " · ", el("a", { href: `#/health?session=${encodeURIComponent(sid)}` }, "Health"));
  const seen = new Set(g.nodes.map((n) => n.type));
  const legend = el("p", { class: "legend" }, Object.entries(EDGE_COLORS).map(([t, c]) =>
    el("span", { style: `color:${c}` }, `— ${t}`)), " · ",
  LANES.filter((t) => seen.has(t)).map((t) => el("span", { style: `color:${TYPE_COLORS[t]}` }, `● ${t}`)));
  const detail = el("div", { id: "detail", "data-testid": "detail" },
    el("p", { class: "muted" }, "Click an event in the graph or the timeline."));
  const asmRows = asm.map((a) => el("tr", {},
    el("td", {}, el("a", { href: `#/assembly/${encodeURIComponent(a.id)}`, "data-testid": "assembly-link" }, `#${a.seq}`)),
    el("td", {}, queryText(a)), el("td", {}, a.phase),
    el("td", {}, `${a.total_tokens} / ${a.budget_tokens}`), el("td", {}, a.included), el("td", {}, a.left_out)));
  const timeline = g.nodes.map((n) => el("tr", { class: "clickable", "data-id": n.id, onclick: () => select(sid, n.id) },
    el("td", {}, n.seq), el("td", {}, n.type), el("td", {}, n.role || ""),
    el("td", { class: `status-${n.status}` }, n.preview), el("td", {}, n.tokens)));
  page(`Session ${sid}`, nav, legend, el("div", { class: "row" }, el("div", { id: "graph", "data-testid": "graph" }), detail),
    el("h2", {}, "What the model saw (recorded assemblies)"),
    asm.length ? table(["at", "query", "phase", "tokens / budget", "pieces in", "left out"], asmRows, "assemblies")
      : el("p", { class: "muted" }, "No assembly recorded in this session."),
    el("h2", {}, "Timeline"), table(["seq", "type", "role", "content", "tokens"], timeline, "timeline"));
  drawGraph(sid, g);
  if (focus) await select(sid, focus);
}

// Lanes by type (only the types present), one column per turn: a user message opens a
// column and the turn's events stack in their lanes beside it (a second tool call of the
// turn takes the next column), so a 400-event run is ~100 columns wide, not 400, and
// reads at full size.  Events written about earlier ones (memories, summaries, assembly
// records) sit above what they came from, so their edges stay short.
const DERIVED = new Set(["memory", "summary", "retrieval", "warning"]);
const DX = 46, DY = 48;
function columns(g) {
  const x = new Map();
  let base = 0, width = 0, used = new Map();
  g.nodes.forEach((n) => {
    if (DERIVED.has(n.type)) return;
    if (n.type === "user_message" && used.size) { base += (width + 1) * DX; width = 0; used = new Map(); }
    const k = used.get(n.type) || 0;
    used.set(n.type, k + 1);
    width = Math.max(width, k);
    x.set(n.id, base + k * DX);
  });
  return x;
}

function positions(g) {
  const kind = new Map(g.nodes.map((m) => [m.id, m.type]));
  const out = new Map();
  g.edges.forEach((e) => { if (e.type !== "NEXT" && e.type !== "SUPERSEDES") (out.get(e.src) || out.set(e.src, []).get(e.src)).push(e.dst); });
  const x = columns(g);
  let last = 0;
  g.nodes.forEach((n) => {  // derived events take their sources' mean column (else the latest)
    if (x.has(n.id)) { last = x.get(n.id); return; }
    const src = (out.get(n.id) || []).filter((t) => x.has(t) && !DERIVED.has(kind.get(t)));
    x.set(n.id, src.length ? Math.round(src.reduce((a, t) => a + x.get(t), 0) / src.length / DX) * DX : last);
  });
  const lanes = LANES.filter((t) => g.nodes.some((n) => n.type === t));
  const taken = new Set();
  return new Map(g.nodes.map((n) => {
    const px = x.get(n.id);
    let py = Math.max(0, lanes.indexOf(n.type)) * DY;
    while (taken.has(`${px}:${py}`)) py += DY / 2;
    taken.add(`${px}:${py}`);
    return [n.id, { x: px, y: py }];
  }));
}

// The first view: the latest columns at a size whose labels read (zoom >= 1), not the
// whole window shrunk to dots; pan and zoom out for the rest.
function firstView(cy, pos) {
  const right = Math.max(...[...pos.values()].map((p) => p.x));
  const span = cy.width() - 60;
  cy.fit(cy.nodes().filter((n) => n.position("x") >= right - span), 30);
  if (cy.zoom() < 1) cy.zoom({ level: 1, renderedPosition: { x: cy.width() - 30, y: cy.height() / 2 } });
  if (cy.zoom() > 1.6) cy.zoom({ level: 1.6, renderedPosition: { x: cy.width() / 2, y: cy.height() / 2 } });
}

function drawGraph(sid, g) {
  const t0 = performance.now();
  const pos = positions(g);
  const elements = g.nodes.map((n) => ({
    data: { id: n.id, label: `#${n.seq}`, long: `#${n.seq} ${n.type}: ${n.preview.slice(0, 60)}`,
      type: n.type, status: n.status }, position: pos.get(n.id),
  })).concat(g.edges.map((e, i) => ({ data: { id: `e${i}`, source: e.src, target: e.dst, type: e.type } })));
  const cy = cytoscape({
    container: document.getElementById("graph"), elements, layout: { name: "preset" },
    textureOnViewport: g.nodes.length > 1000, hideEdgesOnViewport: g.nodes.length > 1000,
    style: [
      { selector: "node", style: { label: "data(label)", "font-size": 11, width: 24, height: 24,
        "background-color": (n) => TYPE_COLORS[n.data("type")] || "#888" } },
      { selector: 'node[status != "active"]', style: { "border-width": 2, "border-color": "#dc2626", "border-style": "dashed" } },
      { selector: "edge", style: { width: 1.5, "curve-style": "bezier", "target-arrow-shape": "triangle",
        "arrow-scale": 0.7, "line-color": (e) => EDGE_COLORS[e.data("type")], "target-arrow-color": (e) => EDGE_COLORS[e.data("type")] } },
      { selector: 'edge[type = "NEXT"]', style: { opacity: 0.45, width: 1 } },
      { selector: ".faded", style: { opacity: 0.12 } },
      { selector: ".ancestor", style: { "border-width": 4, "border-color": "#facc15" } },
      { selector: ".chosen", style: { "border-width": 5, "border-color": "#111827", width: 26, height: 26 } },
      { selector: "node.hover", style: { label: "data(long)", "z-index": 10, "font-size": 12,
        "text-background-color": "#fff", "text-background-opacity": 0.92, "text-background-padding": 3 } },
    ],
  });
  firstView(cy, pos);
  cy.on("mouseover", "node", (evt) => evt.target.addClass("hover"));
  cy.on("mouseout", "node", (evt) => evt.target.removeClass("hover"));
  cy.on("tap", "node", (evt) => select(sid, evt.target.id()));
  cy.on("tap", (evt) => { if (evt.target === cy) cy.elements().removeClass("faded ancestor chosen"); });
  window.beeweave = { cy, ready: true, renderMs: performance.now() - t0, nodes: g.nodes.length };
}

async function select(sid, id) {
  const ev = await api(`/api/events/${encodeURIComponent(id)}`);
  const cy = window.beeweave.cy;
  if (cy) {
    const ids = new Set([ev.id, ...ev.ancestors.map((a) => a.id)]);
    cy.elements().removeClass("faded ancestor chosen");
    cy.nodes().forEach((n) => { if (!ids.has(n.id())) n.addClass("faded"); });
    cy.edges().forEach((e) => { if (!(ids.has(e.source().id()) && ids.has(e.target().id())) || e.data("type") === "NEXT") e.addClass("faded"); });
    ev.ancestors.forEach((a) => cy.getElementById(a.id).addClass("ancestor"));
    cy.getElementById(ev.id).addClass("chosen");
  }
  document.querySelectorAll("tr[data-id]").forEach((tr) => tr.classList.toggle("hl", tr.dataset.id === ev.id));
  document.getElementById("detail").replaceChildren(...[
    el("h2", { "data-testid": "detail-title" }, `#${ev.seq} ${ev.type}`),
    el("p", {}, `role ${ev.role || "-"} · ${when(ev.ts)} · `, el("span", { class: `status-${ev.status}` }, ev.status),
      ev.status_reason ? ` (${ev.status_reason})` : ""),
    el("pre", { "data-testid": "detail-content" }, ev.content || "(no content)"),
    Object.keys(ev.payload).length ? el("details", {}, el("summary", {}, "payload"), el("pre", {}, JSON.stringify(ev.payload, null, 1))) : null,
    el("h2", {}, `Causal ancestry (${ev.ancestors.length})`),
    el("ul", { "data-testid": "ancestry" }, ev.ancestors.map((a) => el("li", {},
      el("a", { href: sessionLink(a.session_id, a.id) }, `#${a.seq} ${a.type}`), ` (depth ${a.depth}) ${a.preview}`))),
    el("h2", {}, `Assemblies that used it (${ev.assemblies.length})`),
    el("ul", { "data-testid": "used-by" }, ev.assemblies.map((a) => el("li", {},
      el("a", { href: `#/assembly/${encodeURIComponent(a.id)}?piece=${encodeURIComponent(ev.id)}`, "data-testid": "used-by-link" },
        `assembly #${a.seq}`), ` — ${a.how === "included" ? "included in" : "left out of"} layer ${a.layer}`)))].filter(Boolean));
}

// ----------------------------------------------------------------- assembly
async function showAssembly(id, params) {
  const a = await api(`/api/assemblies/${encodeURIComponent(id)}`);
  const p = a.payload;
  const piece = params.get("piece");
  const layers = a.layers.map((l) => {
    const share = l.budget ? Math.min(100, (100 * l.tokens) / l.budget) : 0;
    return el("tr", {}, el("td", {}, l.layer), el("td", {}, l.tokens), el("td", {}, l.budget ?? "-"),
      el("td", {}, el("div", { class: "bar" }, el("span", { class: l.budget && l.tokens > l.budget ? "over" : "", style: `width:${share}%` }))));
  });
  const badge = (eid) => {
    const s = a.sources[eid];
    return s ? el("a", { href: sessionLink(s.session_id, eid), class: "badge", "data-testid": "source-link" }, `${s.session_id === a.session_id ? "" : s.session_id + " "}#${s.seq} ${s.type}`)
      : el("span", { class: "badge muted" }, "gone");
  };
  // a long run of ids (the turns before the window) shows its ends, not every badge
  const sources = (ids) => (ids.length > 6
    ? [...ids.slice(0, 3).map(badge), el("span", { class: "muted" }, " … "), ...ids.slice(-2).map(badge)]
    : ids.map(badge));
  const pieceRows = (list, why) => list.map((x) => el("tr", { class: piece && x.event_ids.includes(piece) ? "hl" : null },
    el("td", {}, x.layer), el("td", {}, x.kind), el("td", {}, x.tokens), el("td", {}, fmt(x.score, 2)),
    why ? el("td", {}, x.note || "-") : null, el("td", {}, x.text), el("td", {}, sources(x.event_ids))));
  page(`What the model saw — assembly #${a.seq}`,
    el("p", {}, "Session ", el("a", { href: sessionLink(a.session_id, a.id) }, a.session_id), ` · ${when(a.ts)}`),
    el("p", {}, "Query: ", el("q", { "data-testid": "assembly-query" }, queryText(a))),
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("b", { "data-testid": "total-tokens" }, `${p.total_tokens} / ${p.budget_tokens}`), "tokens / budget"),
      el("div", { class: "card" }, el("b", {}, p.full_history_tokens ?? "-"), "tokens in the full history"),
      el("div", { class: "card" }, el("b", {}, p.phase || "-"), `phase · ${p.model || "?"} (${p.encoding || "?"})`)),
    el("h2", {}, "Tokens per layer"),
    table(["layer", "tokens", "budget", ""], layers, "layers"),
    el("h2", {}, `Included (${(p.included || []).length}), layer by layer`),
    table(["layer", "kind", "tokens", "score", "text", "from events"], pieceRows(p.included || [], false), "included"),
    el("h2", {}, `Left out (${(p.left_out || []).length}) and why`),
    table(["layer", "kind", "tokens", "score", "why", "text", "from events"], pieceRows(p.left_out || [], true), "left-out"));
}

// ----------------------------------------------------------------- memories
async function showMemories(sid) {
  const mems = await api(`/api/sessions/${encodeURIComponent(sid)}/memories`);
  const bySeq = Object.fromEntries(mems.map((m) => [m.id, m.seq]));
  const ref = (ids) => ids.map((i) => el("span", { class: "badge clickable", onclick: () => document.getElementById(`mem-${bySeq[i]}`)?.scrollIntoView() }, bySeq[i] !== undefined ? `#${bySeq[i]}` : "gone"));
  const act = async (m, action) => {
    let reason = "";
    if (action === "invalidate") {
      reason = window.prompt(`Why is memory #${m.seq} no longer true?`);
      if (!reason) return;
    } else if (!window.confirm(`${action === "purge" ? "Delete for good" : "Confirm"} memory #${m.seq}?\n\n${m.content}`)) return;
    try {
      await api(`/api/memories/${encodeURIComponent(m.id)}/${action}`, { method: "POST",
        headers: { "content-type": "application/json", "x-beeweave-action": "1" }, body: JSON.stringify({ reason }) });
      await showMemories(sid);
    } catch (err) { window.alert(err.message); }
  };
  const rows = mems.map((m) => el("tr", { id: `mem-${m.seq}`, "data-testid": "memory", "data-id": m.id },
    el("td", {}, el("a", { href: sessionLink(sid, m.id) }, `#${m.seq}`)), el("td", {}, m.kind),
    el("td", {}, m.content),
    el("td", { class: `status-${m.status}` }, m.status, m.status_reason ? `: ${m.status_reason}` : "", m.dormant ? el("span", { class: "badge" }, "dormant") : null,
      m.actions.map((x) => el("span", { class: "badge" }, `${DONE[x.action] || x.action}${x.reason ? ": " + x.reason : ""}`))),
    el("td", {}, `v${m.version ?? 1}`, m.revision_of ? [" revises ", ref([m.revision_of])] : null,
      m.supersedes.length ? [" supersedes ", ref(m.supersedes)] : null,
      m.superseded_by.length ? [" superseded by ", ref(m.superseded_by)] : null),
    el("td", {}, m.status === "active" ? [
      el("button", { onclick: () => act(m, "confirm"), "data-testid": "confirm" }, "Confirm"),
      el("button", { onclick: () => act(m, "invalidate"), "data-testid": "invalidate" }, "Invalidate")] : null,
    el("button", { onclick: () => act(m, "purge"), "data-testid": "purge" }, "Delete"))));
  page(`Memories of ${sid}`, el("p", {}, el("a", { href: sessionLink(sid) }, "← session"),
    " · delete removes a memory for good (graph and vectors); invalidate hides it but keeps it for audit. Each action is recorded as an event."),
  table(["seq", "kind", "memory", "status", "versions", "actions"], rows, "memories"));
}

// ------------------------------------------------------------------- search
async function showSearch(params) {
  const q = params.get("q") || "";
  const sid = params.get("session") || "";
  const form = el("form", { "data-testid": "search-form", onsubmit: (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    location.hash = `#/search?q=${encodeURIComponent(f.get("q"))}&session=${encodeURIComponent(f.get("session"))}`;
  } }, el("input", { type: "search", name: "q", value: q, placeholder: "what are you looking for?", "data-testid": "search-input" }),
  " session ", el("input", { type: "text", name: "session", value: sid, placeholder: "(all sessions)" }),
  " ", el("button", { type: "submit", "data-testid": "search-go" }, "Search"));
  if (!q) return page("Search", form);
  const hits = await api(`/api/search?q=${encodeURIComponent(q)}&session=${encodeURIComponent(sid)}`);
  const paths = [...new Set(hits.flatMap((h) => Object.keys(h.paths)))];
  const rows = hits.map((h, i) => el("tr", { "data-testid": "hit" },
    el("td", {}, i + 1), el("td", {}, fmt(h.score, 4)),
    el("td", {}, el("a", { href: sessionLink(h.session_id, h.id) }, `${h.session_id} #${h.seq}`)),
    el("td", {}, h.type), el("td", {}, h.preview),
    paths.map((p) => el("td", {}, p in h.ranks ? `#${h.ranks[p]} (${fmt(h.paths[p])})` : "-"))));
  page("Search", form, el("p", { class: "muted" }, `${hits.length} hit(s); per path: rank (score)`),
    table(["", "fused", "event", "type", "content", ...paths], rows, "hits"));
}

// ------------------------------------------------------------------- health
async function showHealth(params) {
  const sid = params.get("session");
  const h = await api(sid ? `/api/sessions/${encodeURIComponent(sid)}/health` : "/api/health");
  const pct = (x) => (x === null || x === undefined ? "-" : `${(100 * x).toFixed(1)} %`);
  const P = h.pooled;
  const rows = h.sessions.map((s) => el("tr", {},
    el("td", {}, el("a", { href: sessionLink(s.scope) }, s.scope)), el("td", {}, pct(s.compression_ratio)),
    el("td", {}, `${s.summary_tokens} / ${s.source_tokens}`), el("td", {}, pct(s.retrieval_hit_rate)),
    el("td", {}, `${s.recalled_injected} / ${s.recalled_total}`), el("td", {}, s.assemblies),
    el("td", {}, s.warnings.join("; "))));
  page(sid ? `Context health of ${sid}` : "Context health",
    el("div", { class: "cards", "data-testid": "pooled" },
      el("div", { class: "card" }, el("b", {}, pct(P.compression_ratio)), "compression (summary / source tokens)"),
      el("div", { class: "card" }, el("b", {}, pct(P.retrieval_hit_rate)), "retrieval hit rate (recalled items injected)"),
      el("div", { class: "card" }, el("b", {}, P.assemblies), "assemblies recorded")),
    P.warnings.length ? el("ul", { class: "err" }, P.warnings.map((w) => el("li", {}, w))) : el("p", {}, "No warnings."),
    el("p", { class: "muted" }, "Amnesia checks need a dry-run assembly: run them from Python (beeweave_core.governance.health)."),
    table(["session", "compression", "summary / source tokens", "hit rate", "injected / recalled", "assemblies", "warnings"], rows, "health"));
}

// ------------------------------------------------------------------- router
async function route() {
  const [path, query] = (location.hash.slice(1) || "/sessions").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("on", a.dataset.nav === parts[0]));
  window.beeweave.ready = false;
  try {
    if (parts[0] === "session") await showSession(parts[1], params);
    else if (parts[0] === "assembly") await showAssembly(parts[1], params);
    else if (parts[0] === "memories") await showMemories(parts[1]);
    else if (parts[0] === "search") await showSearch(params);
    else if (parts[0] === "health") await showHealth(params);
    else await showSessions(params);
  } catch (err) {
    page("Error", el("p", { class: "err", "data-testid": "error" }, err.message));
  }
  document.body.dataset.loaded = location.hash;
}

window.addEventListener("hashchange", route);
api("/api/info").then((i) => { document.getElementById("where").textContent = `${i.store} · tenant ${i.tenant}`; }).catch(() => {});
route();
