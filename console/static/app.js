// strom console: a dependency-free single page. Each route renders from the JSON API under /api.
"use strict";

const page = document.getElementById("page");
const errorBox = document.getElementById("error");
let info = { read_only: false, connect: false };
let timer = null;

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function showError(msg) { errorBox.textContent = msg; errorBox.hidden = !msg; }

async function api(path, method = "GET", body) {
  const opts = { method, headers: {} };
  if (body !== undefined) { opts.body = JSON.stringify(body); opts.headers["Content-Type"] = "application/json"; }
  const r = await fetch("/api" + path, opts);
  const data = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

function table(cols, rows, id) {
  const head = cols.map((c) => `<th>${esc(c[0])}</th>`).join("");
  const body = rows.map((r) => "<tr>" + cols.map((c) => {
    const v = c[1](r);
    return `<td${typeof v === "number" ? ' class="num"' : ""}>${c[2] ? v : esc(v)}</td>`;
  }).join("") + "</tr>").join("");
  return `<table${id ? ` id="${id}"` : ""}><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

function bytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

function chart(points, key, label) {
  if (!points || points.length < 2) return `<p class="muted">${esc(label)}: collecting samples…</p>`;
  const w = 600, h = 120, t0 = points[0].t, t1 = points[points.length - 1].t;
  const max = Math.max(1, ...points.map((p) => p[key]));
  const xy = points.map((p) => `${((p.t - t0) / Math.max(1, t1 - t0)) * (w - 10) + 5},${h - 5 - (p[key] / max) * (h - 20)}`);
  return `<div>${esc(label)} (max ${max.toFixed(0)})</div><svg class="chart" width="${w}" height="${h}">` +
    `<polyline fill="none" stroke="#1f3a5f" stroke-width="2" points="${xy.join(" ")}"/></svg>`;
}

function formHandler(id, fn) {
  const f = document.getElementById(id);
  if (!f) return;
  f.addEventListener("submit", async (e) => {
    e.preventDefault();
    try { showError(""); await fn(new FormData(f)); } catch (err) { showError(err.message); }
  });
}
function writable(html) { return info.read_only ? "" : html; }

const routes = {
  async overview() {
    const d = await api("/overview");
    const last = d.throughput.length ? d.throughput[d.throughput.length - 1].records_per_s : null;
    page.innerHTML = `<h2>Cluster ${esc(d.cluster_id)}</h2>
      <p>Controller: <b id="controller">${esc(d.controller)}</b> · Topics: ${d.topics} · Partitions: ${d.partitions}</p>
      <p>Throughput now: <b id="throughput">${last === null ? "measuring…" : last.toFixed(1) + " records/s"}</b></p>
      ${chart(d.throughput, "records_per_s", "Records/s produced")}
      <h3>Brokers</h3>${table([["Id", (b) => b.id], ["Host", (b) => b.host], ["Port", (b) => b.port], ["Rack", (b) => b.rack || ""]], d.brokers, "brokers")}
      <h3>Features</h3>${d.features.length ? table([["Name", (f) => f.name], ["Level", (f) => f.level]], d.features) : '<p class="muted">not reported by this client</p>'}`;
  },

  async topics() {
    const t = await api("/topics");
    page.innerHTML = `<h2>Topics (${t.length})</h2>` + writable(`<form id="create-topic">
      <input name="name" placeholder="topic name" required> <input name="partitions" type="number" value="1" min="1" title="partitions">
      <input name="rf" type="number" value="1" min="1" title="replication factor"> <button>Create</button></form>`) +
      table([["Name", (r) => `<a href="#/topic/${encodeURIComponent(r.name)}">${esc(r.name)}</a>`, true],
        ["Partitions", (r) => r.partitions], ["RF", (r) => r.replication_factor], ["Size", (r) => bytes(r.size)]], t, "topics");
    formHandler("create-topic", async (f) => {
      await api("/topics", "POST", { name: f.get("name"), partitions: +f.get("partitions"), replication_factor: +f.get("rf") });
      location.hash = "#/topic/" + encodeURIComponent(f.get("name"));
    });
  },

  async topic(name) {
    const t = await api("/topics/" + encodeURIComponent(name));
    page.innerHTML = `<h2>Topic <span id="topic-name">${esc(t.name)}</span></h2>
      <p><a href="#/messages/${encodeURIComponent(t.name)}">Browse messages</a></p>
      ${writable(`<form id="add-partitions"><input name="n" type="number" min="${t.partitions.length + 1}" value="${t.partitions.length + 1}"> <button>Set partition count</button></form>
      <form id="delete-topic"><button>Delete topic</button></form>`)}
      <h3>Partitions</h3>${table([["Partition", (p) => p.partition], ["Leader", (p) => p.leader], ["Replicas", (p) => p.replicas.join(",")],
        ["ISR", (p) => p.isr.join(",")], ["Start", (p) => p.start_offset], ["End", (p) => p.end_offset], ["Size", (p) => bytes(p.size)]], t.partitions, "partitions")}
      <h3>Configs</h3>${writable(`<form id="alter-config"><input name="key" placeholder="config name" required> <input name="value" placeholder="value"> <button>Set</button></form>`)}
      ${table([["Name", (c) => c.name], ["Value", (c) => c.sensitive ? "(sensitive)" : c.value], ["Source", (c) => c.source]], t.configs, "configs")}`;
    formHandler("add-partitions", async (f) => { await api(`/topics/${encodeURIComponent(name)}/partitions`, "POST", { partitions: +f.get("n") }); render(); });
    formHandler("delete-topic", async () => {
      if (!confirm(`Delete topic ${name}?`)) return;
      await api("/topics/" + encodeURIComponent(name), "DELETE"); location.hash = "#/topics";
    });
    formHandler("alter-config", async (f) => {
      await api(`/topics/${encodeURIComponent(name)}/configs`, "POST", f.get("value") ? { set: { [f.get("key")]: f.get("value") } } : { delete: [f.get("key")] });
      render();
    });
  },

  async messages(name, query) {
    const q = new URLSearchParams(query || "");
    const fmt = q.get("format") || "text";
    page.innerHTML = `<h2>Messages in ${esc(name)}</h2>
      <form id="browse"><label>Partition <input name="partition" type="number" min="0" value="${esc(q.get("partition") || 0)}"></label>
      <label>Offset <input name="offset" type="number" min="0" value="${esc(q.get("offset") || "")}"></label>
      <label>or time <input name="time" type="datetime-local" value="${esc(q.get("time") || "")}"></label>
      <label>Search <input name="search" value="${esc(q.get("search") || "")}"></label>
      <label>Show <select name="format">${["text", "json", "hex"].map((f) => `<option${f === fmt ? " selected" : ""}>${f}</option>`).join("")}</select></label>
      <button>Read</button></form><div id="records">Reading…</div>`;
    formHandler("browse", async (f) => {
      const p = new URLSearchParams();
      for (const k of ["partition", "offset", "time", "search", "format"]) if (f.get(k)) p.set(k, f.get(k));
      location.hash = `#/messages/${encodeURIComponent(name)}?${p}`;
    });
    const p = new URLSearchParams({ partition: q.get("partition") || 0 });
    if (q.get("offset")) p.set("offset", q.get("offset"));
    if (q.get("time")) p.set("timestamp", new Date(q.get("time")).getTime());
    if (q.get("search")) p.set("search", q.get("search"));
    const d = await api(`/topics/${encodeURIComponent(name)}/messages?${p}`);
    // A key that is not JSON shows as text in JSON mode, and bytes that are not UTF-8 as hex.
    const show = (x) => `<pre>${esc(x[fmt] ?? x.text ?? x.hex ?? "null")}</pre>`;
    document.getElementById("records").innerHTML =
      `<p class="muted">Offsets ${d.low}–${d.high}; read ${d.scanned} from ${d.start}${q.get("search") ? " (search window bounded)" : ""}.</p>` +
      table([["Offset", (m) => m.offset], ["Timestamp", (m) => new Date(m.timestamp).toISOString()], ["Key", (m) => show(m.key), true],
        ["Value", (m) => show(m.value), true], ["Headers", (m) => m.headers.map((h) => `${esc(h.key)}: ${show(h)}`).join(""), true]], d.records, "records-table");
  },

  async groups() {
    const g = await api("/groups");
    page.innerHTML = `<h2>Consumer groups (${g.length})</h2>` + table([["Group", (r) => `<a href="#/group/${encodeURIComponent(r.group)}">${esc(r.group)}</a>`, true],
      ["State", (r) => r.state], ["Type", (r) => r.type]], g, "groups");
  },

  async group(name) {
    const g = await api("/groups/" + encodeURIComponent(name));
    const total = g.lag.reduce((a, r) => a + r.lag, 0);
    page.innerHTML = `<h2>Group <span id="group-name">${esc(g.group)}</span></h2>
      <p>State ${esc(g.state)} · Coordinator ${esc(g.coordinator)} · Assignor ${esc(g.assignor)} · Total lag <b id="total-lag">${total}</b></p>
      ${chart(g.lag_history, "lag", "Total lag over time")}
      <h3>Lag</h3>${table([["Topic", (r) => r.topic], ["Partition", (r) => r.partition], ["Committed", (r) => r.committed], ["End", (r) => r.end_offset], ["Lag", (r) => r.lag]], g.lag, "lag")}
      <h3>Members</h3>${table([["Member", (m) => m.member_id], ["Client", (m) => m.client_id], ["Host", (m) => m.host],
        ["Assignment", (m) => m.assignment.map((a) => `${a.topic}-${a.partition}`).join(", ")]], g.members, "members")}
      ${writable(g.members.length ? '<p class="muted">Offsets can be reset once the group is empty.</p>' : `<form id="reset"><select name="to"><option>earliest</option><option>latest</option><option>offset</option></select>
        <input name="offset" type="number" min="0" placeholder="offset"> <button>Reset offsets</button></form>`)}`;
    formHandler("reset", async (f) => {
      await api(`/groups/${encodeURIComponent(name)}/reset-offsets`, "POST", { to: f.get("to"), offset: f.get("offset") ? +f.get("offset") : null });
      render();
    });
  },

  async connect() {
    if (!info.connect) { page.innerHTML = '<h2>Connect</h2><p class="muted">No Connect worker: start the console with --connect-url URL.</p>'; return; }
    const d = await api("/connectors");
    const rows = Object.entries(d).map(([name, v]) => ({ name, ...v }));
    const act = (n) => writable(["pause", "resume", "restart", "delete"].map((a) => `<button data-c="${esc(n)}" data-a="${a}">${a}</button>`).join(" "));
    page.innerHTML = `<h2>Connectors (${rows.length})</h2>` +
      table([["Name", (r) => r.name], ["Type", (r) => r.status.type], ["State", (r) => r.status.connector.state],
        ["Tasks", (r) => r.status.tasks.map((t) => `${t.id}: ${esc(t.state)}${t.trace ? `<pre>${esc(t.trace)}</pre>` : ""}`).join("<br>"), true],
        ["", (r) => act(r.name), true]], rows, "connectors") +
      writable(`<h3>Create</h3><form id="create-connector"><textarea name="config" rows="8" cols="70">{"name": "my-connector", "config": {"connector.class": ""}}</textarea><button>Create</button></form>`);
    page.querySelectorAll("button[data-a]").forEach((b) => b.addEventListener("click", async () => {
      try { showError(""); await api(`/connectors/${encodeURIComponent(b.dataset.c)}/${b.dataset.a}`, "POST"); render(); } catch (err) { showError(err.message); }
    }));
    formHandler("create-connector", async (f) => { await api("/connectors", "POST", JSON.parse(f.get("config"))); render(); });
  },

  async streams() {
    const apps = await api("/streams");
    page.innerHTML = `<h2>Kafka Streams applications (${apps.length})</h2>` + apps.map((a) => `<h3>${esc(a.application_id)}</h3>
      <p>State ${esc(a.state)} · Total lag ${a.total_lag}</p>
      ${table([["Thread", (m) => m.client_id], ["Tasks (partitions)", (m) => m.assignment.map((x) => `${x.topic}-${x.partition}`).join(", ")]], a.members)}
      ${table([["Topic", (r) => r.topic], ["Partition", (r) => r.partition], ["Lag", (r) => r.lag]], a.lag)}`).join("");
  },
};

async function render() {
  clearTimeout(timer);
  const [path, query] = (location.hash.slice(2) || "overview").split("?");
  const [name, ...rest] = path.split("/");
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : undefined;
  const fn = routes[name] || routes.overview;
  document.querySelectorAll("header a").forEach((a) => a.classList.toggle("active", a.getAttribute("href") === "#/" + name));
  const t0 = performance.now();
  try {
    showError("");
    await fn(arg, query);
    // Counted up to the frame after the DOM change, so layout and paint are in the figure.
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
    window.lastRender = { route: name, ms: performance.now() - t0 };
  } catch (err) {
    page.innerHTML = "";
    showError(err.message);
    window.lastRender = { route: name, ms: performance.now() - t0, error: err.message };
  }
  document.body.dataset.rendered = name;
  if (name === "overview" || name === "group") timer = setTimeout(render, 5000);
}

window.addEventListener("hashchange", render);
api("/info").then((i) => { info = i; document.getElementById("mode").textContent = i.read_only ? "read-only" : ""; })
  .catch(() => {}).finally(render);
