// Kelp's web UI: the cluster at a glance and the namespace, through the filer's own HTTP APIs
// (docs/filer-http.md, docs/web-ui.md). No framework, no external resource: this file, the
// page and the style sheet are compiled into the kelp binary and served at /ui.
"use strict";

const $ = (sel) => document.querySelector(sel);
const POLL_MS = 2000;
const PAGE = 500;

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function bytes(n) {
  if (n === undefined || n === null || isNaN(n)) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(n < 10 ? 2 : 1)) + " " + u[i];
}

function rate(n) {
  if (n === null || isNaN(n)) return "–";
  return n >= 100 ? n.toFixed(0) : n.toFixed(1);
}

function when(s) {
  const d = new Date(s);
  if (isNaN(d)) return "";
  const pad = (x) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

let errorTimer = null;
function showError(msg) {
  const e = $("#error");
  e.textContent = msg;
  e.hidden = false;
  clearTimeout(errorTimer);
  errorTimer = setTimeout(() => { e.hidden = true; }, 8000);
}

async function check(resp) {
  if (resp.ok) return resp;
  let msg = `${resp.status} ${resp.statusText}`;
  try {
    const j = await resp.json();
    if (j.error) msg += `: ${j.error}`;
  } catch (_) { /* not JSON */ }
  throw new Error(msg);
}

// ---------------------------------------------------------------- cluster

// Prometheus text format: "name{labels} value" -> [{name, labels, value}].
function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    if (m[2]) {
      for (const p of m[2].slice(1, -1).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    }
    out.push({ name: m[1], labels, value: parseFloat(m[3]) });
  }
  return out;
}

// Per-second rates between two scrapes of the sum of a counter, grouped by one label.
function sumBy(samples, name, label) {
  const total = { all: 0 };
  for (const s of samples) {
    if (s.name !== name) continue;
    total.all += s.value;
    const k = label ? (s.labels[label] || "") : "";
    if (label) total[k] = (total[k] || 0) + s.value;
  }
  return total;
}

let lastScrape = null;

function rates(now, t) {
  const cur = {
    http: sumBy(now, "kelp_http_requests_total", "server"),
    rpc: sumBy(now, "kelp_filer_rpc_seconds_count", "method"),
  };
  let out = null;
  if (lastScrape) {
    const dt = (t - lastScrape.t) / 1000;
    out = {};
    for (const k of Object.keys(cur)) {
      out[k] = {};
      for (const g of Object.keys(cur[k])) {
        const prev = lastScrape.cur[k][g] || 0;
        out[k][g] = Math.max(0, (cur[k][g] - prev) / dt);
      }
    }
  }
  lastScrape = { t, cur };
  return out;
}

function topGroups(r) {
  return Object.entries(r).filter(([k, v]) => k !== "all" && v > 0)
    .sort((a, b) => b[1] - a[1]).slice(0, 3)
    .map(([k, v]) => `${k || "?"} ${rate(v)}`).join(", ");
}

// The style property, not a style attribute: the page's Content-Security-Policy allows no
// inline styles.
function usageBar(fraction) {
  const fill = el("span");
  fill.style.width = `${(100 * fraction).toFixed(1)}%`;
  return el("span", { class: "bar" }, fill);
}

function copiesOf(replication) {
  const r = String(replication || "000").padStart(3, "0");
  return 1 + [...r].reduce((a, c) => a + (parseInt(c, 10) || 0), 0);
}

function renderCluster(status) {
  const topo = status.topology || {};
  const servers = topo.servers || [];
  const volumes = topo.volumes || [];
  $("#version").textContent = status.version ? `kelp ${status.version}` : "";
  const alive = servers.filter((s) => s.alive);
  $("#c-servers").textContent = `${alive.length}`;
  $("#c-servers-sub").textContent = servers.length === alive.length ? "all alive" : `${servers.length - alive.length} down of ${servers.length}`;
  $("#c-servers-sub").className = "sub " + (servers.length === alive.length ? "" : "bad");
  const writable = volumes.filter((v) => v.writable).length;
  $("#c-volumes").textContent = volumes.length;
  $("#c-volumes-sub").textContent = `${writable} writable, ${bytes(volumes.reduce((a, v) => a + v.size, 0))} stored`;
  const free = alive.reduce((a, s) => a + (s.diskFree || 0), 0);
  const total = alive.reduce((a, s) => a + (s.diskTotal || 0), 0);
  $("#c-free").textContent = bytes(free);
  $("#c-free-sub").textContent = total ? `of ${bytes(total)} (${(100 * free / total).toFixed(0)}% free)` : "";

  const aliveUrls = new Set(alive.map((s) => s.url));
  let under = 0;
  const vbody = $("#volumes tbody");
  vbody.replaceChildren();
  for (const v of volumes.slice().sort((a, b) => a.id - b.id)) {
    const want = copiesOf(v.replication);
    const live = v.replicas.filter((u) => aliveUrls.has(u)).length;
    const healthy = live >= want;
    if (!healthy) under++;
    vbody.append(el("tr", {},
      el("td", { class: "num" }, v.id),
      el("td", {}, v.collection || "–"),
      el("td", {}, v.replication || "000"),
      el("td", {}, v.replicas.join(", ")),
      el("td", { class: "num" }, bytes(v.size)),
      el("td", { class: "num" }, v.fileCount),
      el("td", { class: healthy ? "ok" : "bad" },
        healthy ? (v.writable ? "ok, writable" : "ok, read-only") : `${live} of ${want} copies`)));
  }
  if (!volumes.length) vbody.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no volumes yet: they are created on the first write")));
  $("#c-health").textContent = under ? `${under} under` : "healthy";
  $("#c-health").className = "value " + (under ? "bad" : "ok");
  $("#c-health-sub").textContent = under ? `${under} of ${volumes.length} volumes lack copies` : `${volumes.length} volumes fully replicated`;

  const sbody = $("#servers tbody");
  sbody.replaceChildren();
  for (const s of servers) {
    const used = s.diskTotal ? 1 - s.diskFree / s.diskTotal : 0;
    sbody.append(el("tr", {},
      el("td", {}, s.publicUrl && s.publicUrl !== s.url ? `${s.url} (${s.publicUrl})` : s.url),
      el("td", {}, `${s.dataCenter || "–"} / ${s.rack || "–"}`),
      el("td", { class: s.alive ? "ok" : "bad" }, s.alive ? "alive" : "down"),
      el("td", { class: "num" }, `${s.volumes} / ${s.maxVolumes}`),
      el("td", {}, usageBar(used), `${bytes(s.diskFree)} free of ${bytes(s.diskTotal)}`)));
  }
  if (!servers.length) sbody.append(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no volume server has registered")));
  $("#cluster-note").textContent = `GC: ${status.gc ? status.gc.pending : 0} blobs pending deletion. Updated ${new Date().toLocaleTimeString()}.`;
}

async function pollCluster() {
  try {
    const [status, metrics] = await Promise.all([
      fetch("/status").then(check).then((r) => r.json()),
      fetch("/metrics").then(check).then((r) => r.text()),
    ]);
    renderCluster(status);
    const r = rates(parseMetrics(metrics), Date.now());
    if (r) {
      $("#c-http").textContent = rate(r.http.all);
      $("#c-http-sub").textContent = topGroups(r.http);
      $("#c-rpc").textContent = rate(r.rpc.all);
      $("#c-rpc-sub").textContent = topGroups(r.rpc);
    }
  } catch (e) {
    showError(`cluster status: ${e.message}`);
  }
}

// ---------------------------------------------------------------- files

let cwd = "/";
let lastName = "";

// "/a b/c" -> "/a%20b/c": each component encoded, for the SeaweedFS-style listing URL.
const encPath = (p) => p.split("/").map(encodeURIComponent).join("/");
const join = (dir, name) => (dir.endsWith("/") ? dir : dir + "/") + name;
const apiFiles = (p) => `/api/v1/files?path=${encodeURIComponent(p)}`;
const isDir = (e) => e.Mode >= 2147483648;            // Go's os.ModeDir, bit 31
const isLink = (e) => (e.Mode & (1 << 27)) !== 0;     // os.ModeSymlink

function renderCrumbs() {
  const c = $("#crumbs");
  c.replaceChildren(el("a", { href: "#/files/" }, "root"));
  let acc = "";
  for (const part of cwd.split("/").filter(Boolean)) {
    acc += "/" + part;
    c.append(el("span", { class: "sep" }, "/"), el("a", { href: "#/files" + encPath(acc) + "/" }, part));
  }
}

function fileRow(e) {
  const name = e.FullPath.slice(e.FullPath.lastIndexOf("/") + 1);
  const dir = isDir(e);
  const link = dir
    ? el("a", { href: "#/files" + encPath(e.FullPath) + "/" }, el("span", { class: "icon dir" }), name + "/")
    : el("a", { href: apiFiles(e.FullPath), download: name }, el("span", { class: isLink(e) ? "icon link" : "icon file" }), name);
  return el("tr", { "data-name": name },
    el("td", { class: "name" }, link, isLink(e) ? el("span", { class: "muted" }, ` → ${e.SymlinkTarget}`) : ""),
    el("td", { class: "num" }, dir ? "–" : bytes(e.FileSize)),
    el("td", {}, when(e.Mtime)),
    el("td", { class: "actions" },
      el("button", { title: "rename or move", onclick: () => renameEntry(e.FullPath, name) }, "Rename"),
      el("button", { title: "delete", onclick: () => deleteEntry(e.FullPath, dir) }, "Delete")));
}

// The AGFS listing in the SeaweedFS listing's shape: for the one directory whose SeaweedFS
// URL ("/ui/") is the UI's own page.
async function listAgfs(dir) {
  const j = await fetch(`/api/v1/directories?path=${encodeURIComponent(dir)}`).then(check).then((r) => r.json());
  const entries = (j.files || []).map((f) => ({
    FullPath: join(dir, f.name), Mode: f.isDir ? 2147483648 + (f.mode & 0o777) : f.mode,
    FileSize: f.size, Mtime: f.modTime, SymlinkTarget: "",
  }));
  return { Entries: entries, LastFileName: "", ShouldDisplayLoadMore: false };
}

async function listPage(reset) {
  if (reset) { lastName = ""; $("#files tbody").replaceChildren(); }
  const url = `${encPath(cwd.endsWith("/") ? cwd : cwd + "/")}?limit=${PAGE}` +
    (lastName ? `&lastFileName=${encodeURIComponent(lastName)}` : "");
  try {
    const j = cwd === "/ui" ? await listAgfs(cwd)
      : await fetch(url, { headers: { Accept: "application/json" } }).then(check).then((r) => r.json());
    const body = $("#files tbody");
    for (const e of j.Entries || []) body.append(fileRow(e));
    if (!body.children.length) body.append(el("tr", {}, el("td", { colspan: 4, class: "muted" }, "empty directory")));
    lastName = j.LastFileName || "";
    $("#more").hidden = !j.ShouldDisplayLoadMore;
  } catch (e) {
    showError(`listing ${cwd}: ${e.message}`);
  }
}

async function uploadFiles(files) {
  const list = [...files];
  for (let i = 0; i < list.length; i++) {
    const f = list[i];
    $("#progress").textContent = `uploading ${f.name} (${bytes(f.size)}), ${i + 1} of ${list.length}…`;
    try {
      await fetch(apiFiles(join(cwd, f.name)), { method: "PUT", body: f }).then(check);
    } catch (e) {
      showError(`upload of ${f.name}: ${e.message}`);
    }
  }
  $("#progress").textContent = list.length ? `uploaded ${list.length} file(s)` : "";
  $("#upload").value = "";
  listPage(true);
}

async function makeDir() {
  const name = prompt("New folder name");
  if (!name) return;
  try {
    await fetch(`/api/v1/directories?path=${encodeURIComponent(join(cwd, name))}`, { method: "POST" }).then(check);
  } catch (e) {
    showError(`mkdir ${name}: ${e.message}`);
  }
  listPage(true);
}

async function renameEntry(path, name) {
  const to = prompt(`Rename or move ${path} to (a name, or a path from /)`, name);
  if (!to || to === name) return;
  const newPath = to.startsWith("/") ? to : join(cwd, to);
  try {
    await fetch(`/api/v1/rename?path=${encodeURIComponent(path)}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ newPath }),
    }).then(check);
  } catch (e) {
    showError(`rename ${path}: ${e.message}`);
  }
  listPage(true);
}

async function deleteEntry(path, dir) {
  if (!confirm(`Delete ${path}${dir ? " and everything in it" : ""}?`)) return;
  const route = dir ? "directories" : "files";
  try {
    await fetch(`/api/v1/${route}?path=${encodeURIComponent(path)}&recursive=true`, { method: "DELETE" }).then(check);
  } catch (e) {
    showError(`delete ${path}: ${e.message}`);
  }
  listPage(true);
}

// ---------------------------------------------------------------- routing

let clusterTimer = null;

function route() {
  const h = location.hash || "#/cluster";
  const files = h.startsWith("#/files");
  $("#view-cluster").hidden = files;
  $("#view-files").hidden = !files;
  $("#nav-cluster").classList.toggle("active", !files);
  $("#nav-files").classList.toggle("active", files);
  clearInterval(clusterTimer);
  if (files) {
    let p = decodeURIComponent(h.slice("#/files".length)) || "/";
    if (!p.startsWith("/")) p = "/" + p;
    cwd = p.length > 1 && p.endsWith("/") ? p.slice(0, -1) : p;
    document.title = `Kelp: ${cwd}`;
    renderCrumbs();
    listPage(true);
  } else {
    document.title = "Kelp: cluster";
    lastScrape = null;
    pollCluster();
    clusterTimer = setInterval(pollCluster, POLL_MS);
  }
}

$("#upload").addEventListener("change", (ev) => uploadFiles(ev.target.files));
$("#mkdir").addEventListener("click", makeDir);
$("#refresh").addEventListener("click", () => listPage(true));
$("#more").addEventListener("click", () => listPage(false));
window.addEventListener("hashchange", route);
route();
