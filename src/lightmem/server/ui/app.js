// lightmem viewer. Every piece of stored text is inserted with textContent or as an SVG
// text node, never as HTML: memories are data and must not run as markup or script.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

function key() { return $("key").value.trim(); }

async function api(path, options = {}) {
  const headers = Object.assign({ "Authorization": "Bearer " + key() }, options.headers || {});
  if (options.body) headers["Content-Type"] = "application/json";
  const response = await fetch(path, Object.assign({}, options, { headers }));
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) $("key-hint").hidden = false;
  if (!response.ok) {
    const message = data.error ? data.error.message : response.statusText;
    throw new Error(response.status + " " + message);
  }
  return data;
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

// The user box names one user; "all users" reads every user's memories (all_scopes), which
// a tenant holding several users needs when no user_id is given. An id names one memory
// whatever its user, so with "all users" an entry is fetched with no scope.
function allUsers() { return $("all-users").checked; }

function scope() {
  const user = $("user").value.trim();
  return user && !allUsers() ? { user_id: user } : {};
}

function allUsersChanged() {
  $("user").disabled = allUsers();
}

function scopeQuery() {
  const params = new URLSearchParams(scope()).toString();
  return params ? "?" + params : "";
}

function keyChanged() {
  sessionStorage.setItem("lightmem-key", key());
  $("key-hint").hidden = key() !== "";
}

async function search(event) {
  event.preventDefault();
  $("status").textContent = "Searching...";
  $("results").replaceChildren();
  try {
    const body = Object.assign({ query: $("query").value, mode: $("mode").value, limit: 25 }, scope(),
      allUsers() ? { all_scopes: true } : {});
    const data = await api("/v1/memories/search", { method: "POST", body: JSON.stringify(body) });
    $("status").textContent = data.results.length
      ? data.results.length + " result(s), best first"
      : "No memory matches this query" + (scope().user_id ? " for this user_id." : ".");
    for (const r of data.results) {
      const li = el("li");
      li.dataset.id = r.id;
      li.append(el("span", r.original_text || r.text, "text"));
      const when = r.timestamp ? r.timestamp.slice(0, 10) : "undated";
      const until = r.superseded_by ? "until " + (r.valid_to || "").slice(0, 10) : "";
      li.append(el("div", [r.kind, when, r.speaker_name || r.speaker_id, until, r.id.slice(0, 8)]
        .filter(Boolean).join(" · "), "meta"));
      li.addEventListener("click", () => show(r.id, li));
      $("results").append(li);
    }
  } catch (err) {
    const hint = err.message.includes("all_scopes") ? " (here: give a user_id or tick all users)" : "";
    $("status").textContent = "Error: " + err.message + hint;
  }
}

async function show(id, li) {
  for (const other of $("results").children) other.classList.remove("selected");
  if (li) li.classList.add("selected");
  try {
    const entry = await api("/v1/memories/" + encodeURIComponent(id) + scopeQuery());
    const hist = await api("/v1/memories/" + encodeURIComponent(id) + "/history" + scopeQuery());
    $("detail").hidden = false;
    $("detail-text").textContent = entry.text;
    const meta = $("detail-meta");
    meta.replaceChildren();
    for (const [k, v] of [["id", entry.id], ["kind", entry.kind], ["speaker", entry.speaker_name || entry.speaker_id],
                          ["time", entry.timestamp], ["version", entry.version], ["sources", entry.source_ids.join(", ")],
                          ["original", entry.original_text],
                          ["superseded by", entry.superseded_by ? entry.superseded_by + " (until " + entry.valid_to + ")" : "current"]]) {
      meta.append(el("dt", k), el("dd", v, "text"));
    }
    const sources = $("detail-sources");
    sources.replaceChildren();
    for (const m of entry.sources) {
      const li2 = el("li");
      li2.append(el("strong", m.id + " " + m.speaker + ": "), el("span", m.content, "text"));
      sources.append(li2);
    }
    const history = $("detail-history");
    history.replaceChildren();
    for (const h of hist.events) {
      history.append(el("li", h.at.slice(0, 19) + " " + h.op + " v" + h.version + " (" + h.reason + ")"));
    }
  } catch (err) {
    $("status").textContent = "Error: " + err.message;
  }
}

let graphData = { nodes: [], edges: [] };

function layout(nodes) {
  const columns = { semantic: 140, episodic: 480, procedural: 820 };
  const counts = { semantic: 0, episodic: 0, procedural: 0 };
  const totals = { semantic: 0, episodic: 0, procedural: 0 };
  for (const n of nodes) totals[n.kind] += 1;
  const pos = {};
  for (const n of nodes) {
    const i = counts[n.kind]++;
    const step = 520 / Math.max(1, totals[n.kind]);
    pos[n.id] = { x: columns[n.kind] + ((i % 3) - 1) * 40, y: 20 + step * (i + 0.5) };
  }
  return pos;
}

function drawGraph(highlight) {
  const svg = $("graph-svg");
  svg.replaceChildren();
  const pos = layout(graphData.nodes);
  for (const e of graphData.edges) {
    const a = pos[e.src], b = pos[e.dst];
    if (!a || !b) continue;
    const line = document.createElementNS(SVG, "line");
    line.setAttribute("x1", a.x); line.setAttribute("y1", a.y);
    line.setAttribute("x2", b.x); line.setAttribute("y2", b.y);
    line.setAttribute("class", "edge " + e.kind + (e.weight < 0 ? " pruned" : ""));
    svg.append(line);
  }
  for (const n of graphData.nodes) {
    const p = pos[n.id];
    const circle = document.createElementNS(SVG, "circle");
    circle.setAttribute("cx", p.x); circle.setAttribute("cy", p.y);
    circle.setAttribute("r", n.kind === "semantic" ? 6 : 9);
    circle.setAttribute("class", "node " + n.kind + (highlight && highlight.has(n.id) ? " highlight" : ""));
    circle.dataset.id = n.id;
    const title = document.createElementNS(SVG, "title");
    title.textContent = n.kind + ": " + n.text;
    circle.append(title);
    circle.addEventListener("click", () => { $("node-info").textContent = n.kind + " v" + n.version + ": " + n.text; });
    svg.append(circle);
    const label = document.createElementNS(SVG, "text");
    label.setAttribute("x", p.x + 12); label.setAttribute("y", p.y + 4);
    label.setAttribute("class", "label");
    label.textContent = n.text.length > 28 ? n.text.slice(0, 27) + "…" : n.text;
    svg.append(label);
  }
}

async function loadGraph() {
  $("graph-status").textContent = "Loading graph...";
  try {
    graphData = await api("/v1/fluxmem/graph?limit=300");
    const kinds = { semantic: 0, episodic: 0, procedural: 0 };
    for (const n of graphData.nodes) kinds[n.kind] += 1;
    $("graph-status").textContent = graphData.nodes.length + " nodes (" + kinds.semantic + " semantic, " +
      kinds.episodic + " episodic, " + kinds.procedural + " procedural), " + graphData.edges.length + " edges";
    drawGraph(null);
  } catch (err) {
    $("graph-status").textContent = "Error: " + err.message;
  }
}

async function highlight(event) {
  event.preventDefault();
  const task = $("task").value.trim();
  if (!task) return;
  try {
    const sub = await api("/v1/fluxmem/subgraph?task=" + encodeURIComponent(task));
    const ids = new Set([...sub.semantic, ...sub.episodic, ...sub.procedural].map((n) => n.id));
    drawGraph(ids);
    $("graph-status").textContent = "Stage I subgraph: " + ids.size + " node(s) highlighted";
  } catch (err) {
    $("graph-status").textContent = "Error: " + err.message;
  }
}

function tab(name) {
  $("memories").hidden = name !== "memories";
  $("graph").hidden = name !== "graph";
  $("tab-memories").classList.toggle("active", name === "memories");
  $("tab-graph").classList.toggle("active", name === "graph");
  if (name === "graph") loadGraph();
}

$("key").value = sessionStorage.getItem("lightmem-key") || "";
$("key-hint").hidden = key() !== "";
$("key").addEventListener("input", keyChanged);
$("all-users").addEventListener("change", allUsersChanged);
allUsersChanged();
$("search-form").addEventListener("submit", search);
$("subgraph-form").addEventListener("submit", highlight);
$("reload-graph").addEventListener("click", loadGraph);
$("tab-memories").addEventListener("click", () => tab("memories"));
$("tab-graph").addEventListener("click", () => tab("graph"));
