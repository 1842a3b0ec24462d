/* panel.js - the training panel's page: forms built from /api/setup (the CLI's own option table and
 * the plugin's defaults), actions as POSTs, live progress from /api/events (server-sent events). */
"use strict";

const token = new URLSearchParams(location.search).get("token");
/* Path fields are the options /api/setup gives a "folder" (the CLI's option table), with that folder's
 * list as suggestions; the panel takes them inside its folders. Those it gives "picked" (the label of
 * the empty choice) are picked from the list, as A1111's Train tab does; every other path field is
 * typed (dataset, log folder, resume, ...), as there. */
const GROUP_ORDER = ["What to train", "Learning rate and batch", "Images and captions", "Steps and saving",
                     "Validation and average", "Previews", "Advanced"];
const COLLAPSED = new Set(["Validation and average", "Previews", "Advanced"]);

let setup = null;
const runs = new Map();   /* id -> { state, name, method, losses: [[step, loss]], start, statePath, panel } */
let current = 0;          /* the run the progress panel shows */

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, props = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "dataset") Object.assign(e.dataset, v);
    else if (k in e) e[k] = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
};

function withToken(url) {
  return token ? url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : url;
}

async function api(path, body, type = "application/json") {
  const init = { headers: {} };
  if (token) init.headers["X-SDT-Token"] = token;
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = type;
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const response = await fetch(path, init);
  let data = null;
  try { data = await response.json(); } catch (e) { data = { error: "The panel answered " + response.status + "." }; }
  if (!response.ok) throw new Error(data && data.error ? data.error : "Request failed: " + response.status);
  return data;
}

function fileUrl(root, path) {
  return withToken("/api/file?root=" + encodeURIComponent(root) + "&path=" + encodeURIComponent(path));
}

function banner(text) {
  const b = $("#banner");
  b.textContent = text || "";
  b.hidden = !text;
}

/* ---- tabs ---- */
function showTab(name) {
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const s of document.querySelectorAll("section.tab")) s.hidden = s.id !== name;
  if (name === "runs") loadRuns();
}

/* ---- lists of files in the folders ---- */
function fillSelect(select, items, { empty } = {}) {
  const keep = select.value;
  select.replaceChildren();
  if (empty !== undefined) select.append(el("option", { value: "", textContent: empty }));
  for (const item of items) select.append(el("option", { value: item, textContent: item }));
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

async function refreshLists() {
  setup = await api("/api/setup");
  for (const list of document.querySelectorAll("datalist[data-list]")) fillSelect(list, setup.lists[list.dataset.list] || []);
  for (const select of document.querySelectorAll("select[data-list]")) {
    const list = setup.lists[select.dataset.list] || [];
    fillSelect(select, list, select.dataset.empty !== undefined ? { empty: select.dataset.empty } : {});
  }
  for (const code of document.querySelectorAll("code.folder")) code.textContent = setup.folders[code.dataset.root];
}

/* ---- the Train form, from the option table ---- */
function method() {
  return $("input[name=method]:checked").value;
}

function defaultOf(option) {
  return option[method() === "hypernetwork" ? "default_hypernetwork" : "default_embedding"] ?? "";
}

function buildTrainForm() {
  const form = $("#form-train");
  form.replaceChildren();
  const groups = new Map(GROUP_ORDER.map((g) => [g, []]));
  for (const o of setup.options) (groups.get(o.group) || groups.get("Advanced")).push(o);
  for (const [title, options] of groups) {
    const box = COLLAPSED.has(title) ? el("details", {}, el("summary", { textContent: title }))
                                     : el("fieldset", {}, el("legend", { textContent: title }));
    const grid = el("div", { className: "grid" });
    for (const o of options) grid.append(field(o));
    box.append(grid);
    form.append(box);
  }
  applyMethod();
}

function field(o) {
  let input;
  if (o.folder && o.picked === undefined) {
    input = el("input", { name: o.name, placeholder: o.name === "log-dir" ? "(the log folder: " + setup.folders.logs + ")" : o.arg || "" });
    input.dataset.folder = o.folder;
    if (setup.lists[o.folder]) {
      const options = el("datalist", { id: "list-" + o.name, dataset: { list: o.folder } });
      fillSelect(options, setup.lists[o.folder]);
      input.setAttribute("list", options.id);
      input.suggestions = options;
    }
  } else if (o.folder) {
    input = el("select", { name: o.name, dataset: { list: o.folder, folder: o.folder } });
    if (o.picked) input.dataset.empty = o.picked;
    if (o.name === "template") input.dataset.empty = "(default: " + setup.default_template + ")";
    fillSelect(input, setup.lists[o.folder] || [], input.dataset.empty !== undefined ? { empty: input.dataset.empty } : {});
  } else if (o.kind === "choice") {
    input = el("select", { name: o.name });
    for (const c of o.choices) input.append(el("option", { value: c, textContent: c }));
  } else if (o.kind === "flag") {
    input = el("input", { type: "checkbox", name: o.name });
  } else {
    input = el("input", { name: o.name, placeholder: o.arg || "", inputMode: o.kind === "text" ? "text" : "decimal" });
  }
  const help = helpText(o.help);
  input.title = help;
  const label = el("label", { className: o.kind === "flag" ? "check" : "", dataset: { option: o.name } });
  if (o.kind === "flag") label.append(input, " " + help);
  else label.append(labelText(o), input, el("small", { textContent: help }));
  if (input.suggestions) label.append(input.suggestions);
  return label;
}

/* The CLI's help names options ("--embedding"); the page names its fields ("Embedding"). */
function helpText(help) {
  return help.replace(/--([a-z][a-z-]*)/g, (m, name) => "“" + labelText({ name }) + "”");
}

/* "batch-size" -> "Batch size" */
function labelText(o) {
  const words = o.name.replace(/-/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function applyMethod() {
  const m = method();
  for (const o of setup.options) {
    const label = $(`[data-option="${o.name}"]`);
    if (!label) continue;
    label.hidden = !o[m];
    const input = label.querySelector("[name]");
    if (o.folder) continue; /* a path: the defaults are not reset by the method */
    const d = defaultOf(o);
    if (o.kind === "flag") input.checked = d === "true";
    else input.value = d;
  }
  const embeddingSelect = $("select[name=embedding]");
  if (embeddingSelect) {
    const none = embeddingSelect.querySelector("option[value='']");
    if (none) none.textContent = m === "hypernetwork" ? "(none: the hypernetwork alone)" : "(pick one)";
  }
}

/* The form as a panel file: what differs from the plugin's defaults, plus the files. */
function panelText(extra = {}) {
  const lines = ["[train]"];
  const m = method();
  for (const o of setup.options) {
    if (!o[m] || o.name in extra) continue;
    const input = $(`#form-train [name="${o.name}"]`);
    if (!input) continue;
    let value = o.kind === "flag" ? (input.checked ? "true" : "false") : input.value.trim();
    if (o.name === "hypernetwork" && m !== "hypernetwork") continue;
    if (!o.folder && value === defaultOf(o)) continue;
    if (value === "") continue;
    lines.push(o.name + "=" + value.replace(/\n/g, " "));
  }
  for (const [k, v] of Object.entries(extra)) lines.push(k + "=" + v);
  return lines.join("\n") + "\n";
}

function loadPanelText(text) {
  const values = {};
  let inTrain = false;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith(";")) continue;
    if (line.startsWith("[")) { inTrain = line === "[train]"; continue; }
    const eq = line.indexOf("=");
    if (inTrain && eq > 0) values[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  $(`input[name=method][value=${values.hypernetwork ? "hypernetwork" : "embedding"}]`).checked = true;
  applyMethod();
  for (const [k, v] of Object.entries(values)) {
    const input = $(`#form-train [name="${k}"]`);
    if (!input) continue;
    if (input.type === "checkbox") input.checked = v === "true" || v === "1";
    else {
      if (input.tagName === "SELECT" && ![...input.options].some((o) => o.value === v)) input.append(el("option", { value: v, textContent: v }));
      input.value = v;
    }
  }
}

/* ---- actions ---- */
async function createFrom(form, path, result) {
  const data = {};
  for (const input of form.querySelectorAll("[name]"))
    data[input.name] = input.type === "checkbox" ? input.checked : input.type === "number" ? Number(input.value) : input.value;
  const out = $(result);
  out.className = "result";
  out.textContent = "Creating…";
  try {
    const r = await api(path, data);
    out.className = "result ok";
    out.textContent = "Created " + r.created + ".";
    await refreshLists();
  } catch (e) {
    out.className = "result bad";
    out.textContent = e.message;
  }
}

async function startTraining(extra = {}) {
  const text = panelText(extra);
  /* Taken before the request: the new run's first events may arrive before its answer and make it current. */
  const previous = extra.resume ? runs.get(current) : null;
  $("#start").disabled = true; /* until the run ends: a second click would only start a refused duplicate */
  try {
    const r = await api("/api/train", text, "text/plain");
    current = r.run;
    const run = ensureRun(r.run);
    if (previous) { /* one plot across the resume, and its newest preview until this run draws one */
      run.before = previous.before ? previous.before.concat(previous.losses) : previous.losses.slice();
      if (!run.preview) run.preview = previous.preview;
    }
    run.panel = text;
    run.extra = extra;
    showRun();
  } catch (e) {
    $("#start").disabled = false;
    showError(e.message);
  }
}

/* The run's losses, with those of the runs it resumed before its first step. */
function lossesOf(run) {
  const first = run.losses.length ? run.losses[0][0] : Infinity;
  return (run.before || []).filter((p) => p[0] < first).concat(run.losses);
}

function showError(text) {
  const p = $("#run-error");
  p.textContent = helpText(text || ""); /* the plugin's and the panel file's sentences name options as the CLI does */
  p.hidden = !text;
}

/* ---- live progress ---- */
function ensureRun(id) {
  if (!runs.has(id)) runs.set(id, { state: "preparing", name: "", method: "", losses: [], start: null, statePath: null, log: [] });
  return runs.get(id);
}

function fmt(x, digits = 4) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  if (x !== 0 && (Math.abs(x) < 1e-3 || Math.abs(x) >= 1e5)) return x.toExponential(2);
  return Number(x.toPrecision(digits)).toString();
}

function duration(s) {
  if (!isFinite(s) || s < 0) return "–";
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + sec + "s";
}

function showRun() {
  const run = runs.get(current);
  const state = $("#run-state");
  state.textContent = run ? run.state : "idle";
  state.className = "state " + (run ? run.state : "idle");
  const going = run && (run.state === "preparing" || run.state === "training");
  $("#interrupt").disabled = !going;
  $("#resume").disabled = !(run && run.state === "interrupted" && run.panel);
  $("#start").disabled = !!going;
  if (!run) return;
  $("#run-name").textContent = (run.method ? run.method + " " : "") + (run.name || "") + " — run " + current +
    (run.state === "preparing" ? ": preparing (loading the model, caching latents)…" : "");
  showError(run.error || "");
  const m = run.metrics;
  if (!m) {
    $("#progress").style.width = "0";
    for (const id of ["#stat-step", "#stat-epoch", "#stat-loss", "#stat-lr", "#stat-ips", "#stat-eta"]) $(id).textContent = "–";
  } else {
    const done = m.step - m.start_step, total = m.max_steps - m.start_step;
    $("#progress").style.width = (total > 0 ? Math.min(100, (100 * done) / total) : 0) + "%";
    $("#stat-step").textContent = m.step + " / " + m.max_steps;
    $("#stat-epoch").textContent = m.epoch + " (step " + m.epoch_step + ")";
    $("#stat-loss").textContent = fmt(m.loss);
    $("#stat-lr").textContent = fmt(m.lr, 3);
    $("#stat-ips").textContent = fmt(m.images_per_second, 3);
    $("#stat-eta").textContent = going && done > 0 ? duration((m.elapsed / done) * (m.max_steps - m.step)) : going ? "–" : "done";
  }
  drawLoss($("#loss-plot"), lossesOf(run));
  const log = $("#log");
  log.replaceChildren(...run.log.slice(-200).map((l) => el("li", { className: l.level, textContent: l.message })));
  log.scrollTop = log.scrollHeight;
  const img = $("#preview img");
  if (run.preview) {
    img.src = fileUrl(run.preview.root || "logs", run.preview.path);
    img.hidden = false;
    $("#preview figcaption").textContent = "Step " + run.preview.step + (run.preview.prompt ? ": " + run.preview.prompt : "");
  } else { /* this run has drawn none (yet): not another run's */
    img.removeAttribute("src");
    img.hidden = true;
    $("#preview figcaption").textContent = "No preview yet.";
  }
}

/* The training loss as a line; the validation loss, when given, as dots on the same axes. */
function drawLoss(canvas, points, validation = []) {
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 460, h = canvas.clientHeight || 180;
  canvas.width = w * ratio;
  canvas.height = h * ratio;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, w, h);
  const finite = points.filter((p) => Number.isFinite(p[1]));
  g.fillStyle = "#5d6673";
  g.font = "11px system-ui, sans-serif";
  if (finite.length < 2) {
    g.fillText(finite.length ? "one step so far" : "no steps yet", 10, 20);
    return;
  }
  const pad = { l: 46, r: 10, t: 10, b: 22 };
  const measured = validation.filter((p) => Number.isFinite(p[1]));
  const xs = finite.map((p) => p[0]), ys = finite.concat(measured).map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  let y0 = Math.min(...ys), y1 = Math.max(...ys);
  if (y1 - y0 < 1e-12) { y0 -= 0.5 * Math.abs(y0 || 1); y1 += 0.5 * Math.abs(y1 || 1); }
  const X = (x) => pad.l + ((x - x0) / Math.max(1, x1 - x0)) * (w - pad.l - pad.r);
  const Y = (y) => pad.t + (1 - (y - y0) / (y1 - y0)) * (h - pad.t - pad.b);
  g.strokeStyle = "#d8dde4";
  g.beginPath();
  for (let i = 0; i <= 4; i++) {
    const y = y0 + ((y1 - y0) * i) / 4;
    g.moveTo(pad.l, Y(y)); g.lineTo(w - pad.r, Y(y));
    g.fillText(fmt(y, 3), 4, Y(y) + 4);
  }
  g.stroke();
  Object.assign(canvas.dataset, { firstStep: x0, lastStep: x1, steps: finite.length }); /* what it shows, for tests */
  g.fillText("step " + x0, pad.l, h - 6);
  g.fillText("step " + x1, w - pad.r - 50, h - 6);
  g.strokeStyle = "#d9641c";
  g.lineWidth = 1.5;
  g.beginPath();
  finite.forEach((p, i) => (i ? g.lineTo(X(p[0]), Y(p[1])) : g.moveTo(X(p[0]), Y(p[1]))));
  g.stroke();
  g.fillStyle = "#1c6bd9";
  for (const p of measured) { g.beginPath(); g.arc(X(p[0]), Y(p[1]), 3, 0, 2 * Math.PI); g.fill(); }
  if (measured.length) g.fillText("● validation", w - pad.r - 70, pad.t + 10);
}

function onEvent(e) {
  const run = ensureRun(e.run);
  switch (e.type) {
    case "state":
      Object.assign(run, { state: e.state, name: e.name, method: e.method, error: e.error || "" });
      if (e.state === "failed" && e.error) run.log.push({ level: "error", message: e.error });
      if (e.state === "finished" || e.state === "interrupted") run.log.push({ level: "info", message: "Run " + e.state + "; everything is saved." });
      if (!current || e.run > current) current = e.run;
      break;
    case "metrics":
      run.metrics = e;
      run.losses.push([e.step, e.loss === null ? NaN : e.loss]);
      if (e.fallback && !run.fallbackShown) {
        run.fallbackShown = true;
        run.log.push({ level: "warning", message: "The NaN/Inf fallback fired: training continues in fp32 with a lower learning rate." });
      }
      break;
    case "log":
      run.log.push({ level: e.level, message: e.message });
      break;
    case "preview":
      run.preview = e;
      break;
    case "file":
      if (e.kind === 3) run.statePath = e.path;
      run.log.push({ level: "info", message: "Saved " + e.path });
      break;
  }
  if (e.run === current) scheduleShow();
}

let showPending = false;
function scheduleShow() {
  if (showPending) return;
  showPending = true;
  requestAnimationFrame(() => { showPending = false; showRun(); });
}

function listen() {
  const source = new EventSource(withToken("/api/events"));
  source.onmessage = (m) => onEvent(JSON.parse(m.data));
  source.onerror = () => banner(source.readyState === EventSource.CLOSED ? "Lost the connection to sdt-host serve; reload the page." : "");
  source.onopen = () => banner("");
}

/* ---- runs from the log folder ---- */
async function loadRuns() {
  let data;
  try { data = await api("/api/runs"); } catch (e) { banner(e.message); return; }
  const body = $("#runs-table tbody");
  body.replaceChildren();
  for (const r of data.logs) {
    const row = el("tr", {}, el("td", { textContent: r.date }), el("td", { textContent: r.name }),
                   el("td", { textContent: r.log_dir || "(the log folder)", className: "log-dir" }),
                   el("td", { textContent: String(r.images.length) }), el("td", { textContent: String(r.files.length) }));
    row.dataset.folder = r.folder;
    row.onclick = () => {
      for (const other of body.children) other.classList.toggle("selected", other === row);
      showLogRun(r);
    };
    body.append(row);
  }
  if (!data.logs.length) body.append(el("tr", {}, el("td", { colSpan: 5, textContent: "No runs yet." })));
}

/* The loss CSV's rows as { step, loss, validation_loss }, by its header's names (the columns differ with
 * validation); rows without a step and a loss are counted in .unreadable. */
function csvRows(lines) {
  const names = lines[0].split(",");
  const column = (name) => names.indexOf(name);
  const number = (text) => (text === undefined || text.trim() === "" ? NaN : Number(text)); /* an empty cell: not 0 */
  const rows = [];
  rows.unreadable = 0;
  for (const line of lines.slice(1)) {
    const c = line.split(",");
    const row = { step: number(c[column("step")]), loss: number(c[column("loss")]), validation_loss: number(c[column("validation_loss")]) };
    if (c.length === names.length && Number.isInteger(row.step) && Number.isFinite(row.loss)) rows.push(row);
    else rows.unreadable++;
  }
  return rows;
}

async function showLogRun(r) {
  const box = $("#run-detail");
  box.replaceChildren(el("h3", { textContent: r.name + " — " + r.date + (r.log_dir ? " in " + r.log_dir : "") }));
  const state = r.files.find((f) => f.endsWith(".state.safetensors"));
  if (state) {
    const resume = el("button", { textContent: "Resume this run", title: "Fill the Train tab to continue from " + state });
    resume.onclick = () => { /* the state, and its log folder: the resumed run writes beside the run it continues */
      showTab("train");
      for (const [name, value] of [["resume", state], ["log-dir", r.log_dir]]) {
        const input = $(`#form-train [name="${name}"]`);
        if (input) input.value = value;
        const details = input && input.closest("details");
        if (details) details.open = true;
      }
    };
    box.append(resume);
  }
  if (r.metrics || r.csv) {
    const canvas = el("canvas", { width: 460, height: 180 });
    canvas.dataset.source = r.metrics ? "metrics" : "csv";
    box.append(el("h3", { textContent: "Loss" }), canvas);
    try {
      const response = await fetch(fileUrl("logs", r.metrics || r.csv));
      const lines = (await response.text()).trim().split("\n");
      /* metrics.jsonl has every step (and the validation loss); the CSV only every csv-every steps */
      const rows = r.metrics ? lines.map((l) => JSON.parse(l)) : csvRows(lines);
      const points = rows.map((m) => [m.step, m.loss === null ? NaN : m.loss]);
      const validation = rows.filter((m) => Number.isFinite(m.validation_loss)).map((m) => [m.step, m.validation_loss]);
      drawLoss(canvas, points, validation);
      /* one sentence for the whole file, never one per row */
      if (rows.unreadable) box.append(el("p", { className: "note", textContent: rows.unreadable + " of the CSV's rows could not be read; the plot leaves them out." }));
    } catch (e) { /* the plot stays empty */ }
  }
  if (r.images.length) {
    const gallery = el("div", { className: "gallery" });
    for (const img of r.images.slice(-8))
      gallery.append(el("figure", {}, el("img", { src: fileUrl("logs", img), alt: img }), el("figcaption", { textContent: img.split("/").pop() })));
    box.append(el("h3", { textContent: "Previews" }), gallery);
  }
  const files = el("ul", { className: "files" });
  for (const f of r.files) files.append(el("li", {}, el("a", { href: fileUrl("logs", f), textContent: f.slice(r.folder.length + 1), target: "_blank" })));
  box.append(el("h3", { textContent: "Files" }), files);
}

/* ---- start ---- */
async function main() {
  for (const b of document.querySelectorAll("#tabs button")) b.onclick = () => showTab(b.dataset.tab);
  try { await refreshLists(); } catch (e) { banner(e.message); return; }
  buildTrainForm();
  for (const r of document.querySelectorAll("input[name=method]")) r.onchange = applyMethod;
  $("#form-embedding").onsubmit = (e) => { e.preventDefault(); createFrom(e.target, "/api/create-embedding", "#result-embedding"); };
  $("#form-hypernetwork").onsubmit = (e) => { e.preventDefault(); createFrom(e.target, "/api/create-hypernetwork", "#result-hypernetwork"); };
  $("#form-train").onsubmit = (e) => e.preventDefault();
  $("#sizes-model").onchange = async (e) => {
    if (!e.target.value) return;
    const out = $("#result-hypernetwork");
    try {
      const m = await api("/api/model?path=" + encodeURIComponent(e.target.value));
      if (m.hypernetwork_sizes) $('#form-hypernetwork [name="sizes"]').value = m.hypernetwork_sizes.join(",");
      out.className = "result";
      out.textContent = "";
    } catch (err) {
      out.className = "result bad";
      out.textContent = err.message;
    }
  };
  $("#start").onclick = () => startTraining();
  $("#interrupt").onclick = async () => {
    $("#interrupt").disabled = true;
    try { await api("/api/interrupt", { run: current }); } catch (e) { showError(e.message); }
  };
  $("#resume").onclick = () => {
    const run = runs.get(current);
    if (!run) return;
    startTraining(run.statePath ? { resume: run.statePath } : {});
  };
  $("#save-panel").onclick = () => {
    const a = el("a", { href: URL.createObjectURL(new Blob([panelText()], { type: "text/plain" })), download: "panel.ini" });
    a.click();
    URL.revokeObjectURL(a.href);
  };
  $("#load-panel").onchange = async (e) => { if (e.target.files[0]) loadPanelText(await e.target.files[0].text()); };
  $("#refresh-runs").onclick = loadRuns;
  listen();
  document.body.dataset.ready = "1";
}

main();
