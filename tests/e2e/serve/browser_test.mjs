// browser_test.mjs URL SHOTS [fallback]: drives sdt-host serve's page in headless Chromium as a person would:
// create an embedding on the demo model, train it, watch the progress move, interrupt, resume,
// interrupt again, find the run in the Runs tab; then the same for a hypernetwork, written into a typed log
// folder (logs/project/first), found there in the Runs tab and resumed from it. The path fields are the
// options /api/setup gives a folder, even one the page has never heard of. With "fallback"
// (a panel whose plugin injects an infinite gradient at step 2): a bf16 run shows the NaN/Inf
// fallback's messages as they happen and finishes in fp32. Screenshots of
// each stage go to SHOTS/. Prints "FAIL: ..." and exits 1 on the first thing that does not happen.
import puppeteer from "puppeteer-core";

const [url, shots, mode = "train"] = process.argv.slice(2);
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
const WAIT = { timeout: 90000 };

function fail(message) {
  console.error("FAIL: " + message);
  process.exit(1);
}

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const page = await browser.newPage();
await page.setViewport({ width: 1400, height: 1000 });
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(e.message));
page.on("console", (m) => { if (m.type() === "error") pageErrors.push(m.text()); });

let shot = 0;
async function screenshot(name) {
  shot++;
  await page.screenshot({ path: `${shots}/${String(shot).padStart(2, "0")}-${name}.png`, fullPage: false });
}

async function tab(name) {
  await page.click(`#tabs button[data-tab="${name}"]`);
}

async function setField(name, value) {
  const found = await page.evaluate((name, value) => {
    const input = document.querySelector(`#form-train [name="${name}"]`);
    if (!input) return false;
    if (input.type === "checkbox") input.checked = value === "true";
    else input.value = value;
    return true;
  }, name, value);
  if (!found) fail(`the Train tab has no field ${name}`);
}

const text = (selector) => page.$eval(selector, (e) => e.textContent.trim());
const stepNow = async () => parseInt((await text("#stat-step")).split("/")[0], 10) || 0;

async function waitState(state) {
  try {
    await page.waitForFunction((s) => document.querySelector("#run-state").textContent === s, WAIT, state);
  } catch (e) {
    fail(`the run never became ${state}; it is '${await text("#run-state")}', error '${await text("#run-error")}', ` +
         `messages: ${await text("#log")}`);
  }
}

async function waitStep(atLeast) {
  try {
    await page.waitForFunction((n) => parseInt(document.querySelector("#stat-step").textContent, 10) >= n, WAIT, atLeast);
  } catch (e) {
    fail(`the step never reached ${atLeast} (shown: '${await text("#stat-step")}', state '${await text("#run-state")}', ` +
         `error '${await text("#run-error")}')`);
  }
}

/* Create, train, watch, interrupt, resume, interrupt, find the run: one method. */
async function trainCase({ method, createTab, form, fields, name, fileName }) {
  await tab(createTab);
  for (const [k, v] of Object.entries(form)) {
    const selector = `#${createTab} [name="${k}"]`;
    await page.$eval(selector, (e, v) => { if (e.type === "checkbox") e.checked = v; else e.value = v; }, v);
  }
  if (method === "hypernetwork") {
    // Picking the model fills Modules with the sizes the plugin reads from it (the demo model: 128,64).
    await page.select("#sizes-model", "model");
    await page.waitForFunction(() => document.querySelector('#create-hypernetwork [name="sizes"]').value === "128,64", WAIT)
      .catch(() => fail("picking the demo model did not fill Modules with 128,64"));
  }
  await screenshot(`${method}-create-form`);
  await page.click(`#${createTab} button[type=submit]`);
  const result = `#result-${method}`;
  await page.waitForFunction((r) => /Created|\S/.test(document.querySelector(r).textContent) &&
                                    !/Creating/.test(document.querySelector(r).textContent), WAIT, result);
  const created = await text(result);
  if (!created.startsWith("Created " + fileName)) fail(`creating the ${method} said '${created}'`);
  await screenshot(`${method}-created`);

  await tab("train");
  await page.click(`input[name=method][value=${method}]`);
  await page.waitForFunction((select, f) => [...document.querySelectorAll(`#form-train [name="${select}"] option`)].some((o) => o.value === f),
                             WAIT, method, fileName).catch(() => fail(`the Train tab does not offer ${fileName}`));
  for (const [k, v] of Object.entries(fields)) await setField(k, v);
  await screenshot(`${method}-train-form`);
  await page.click("#start");
  await waitStep(2);
  // While it trains, Train is off: a second click would only start a duplicate the plugin refuses.
  if (!(await page.$eval("#start", (b) => b.disabled))) fail("Train is still enabled while the run trains");
  const first = await stepNow();
  await waitStep(first + 2);
  const second = await stepNow();
  if (!(second > first)) fail(`the step shown did not move (${first} then ${second})`);
  for (const id of ["#stat-loss", "#stat-lr", "#stat-ips", "#stat-eta", "#stat-epoch"])
    if ((await text(id)) === "–") fail(`${id} shows nothing while training`);
  await page.waitForFunction(() => !document.querySelector("#preview img").hidden, WAIT).catch(() => fail("no preview appeared"));
  await screenshot(`${method}-training`);

  await page.click("#interrupt");
  await waitState("interrupted");
  const stopped = await stepNow();
  if (await page.$eval("#start", (b) => b.disabled)) fail("Train stays disabled after the run was interrupted");
  const messages = await text("#log");
  if (!/Saved .*state\.safetensors/.test(messages)) fail(`interrupting did not report the saved state: ${messages}`);
  await screenshot(`${method}-interrupted`);

  // Resume continues from the saved state: the first step shown is after the interrupted one.
  if (await page.$eval("#resume", (b) => b.disabled)) fail("Resume is not offered after an interrupt");
  await page.click("#resume");
  await page.waitForFunction(() => /training|preparing/.test(document.querySelector("#run-state").textContent), WAIT);
  await waitStep(stopped + 1);
  const resumedStart = await page.evaluate(() => {
    const e = [...document.querySelectorAll("#log li")].map((l) => l.textContent);
    return e.join("\n");
  });
  await page.click("#interrupt");
  await waitState("interrupted");
  const final = await stepNow();
  if (!(final > stopped)) fail(`resume did not continue past step ${stopped} (now ${final})`);
  // The live plot spans the first run and the resumed one.
  const live = await page.$eval("#loss-plot", (c) => ({ ...c.dataset }));
  if (Number(live.firstStep) !== 1 || Number(live.lastStep) !== final || Number(live.steps) !== final)
    fail(`after Resume the live plot shows steps ${live.firstStep}..${live.lastStep} (${live.steps} points), expected 1..${final}`);
  await screenshot(`${method}-resumed-interrupted`);

  await tab("runs");
  const stem = fileName.replace(/\.[^.]+$/, "");
  await page.waitForFunction((n) => [...document.querySelectorAll("#runs-table tbody tr")].some((r) => r.children[1] && r.children[1].textContent === n), WAIT, stem)
    .catch(() => fail(`the Runs tab does not list ${stem}`));
  await page.evaluate((n) => [...document.querySelectorAll("#runs-table tbody tr")].find((r) => r.children[1].textContent === n).click(), stem);
  await page.waitForSelector("#run-detail .gallery img", WAIT).catch(() => fail(`the run ${stem} shows no previews`));
  await page.waitForFunction(() => [...document.querySelectorAll("#run-detail img")].every((i) => i.complete && i.naturalWidth > 0), WAIT)
    .catch(() => fail("a preview in the Runs tab did not load"));
  // The Runs plot reads metrics.jsonl: every step, though the CSV has a row only every csv-every steps.
  await page.waitForSelector("#run-detail canvas[data-steps]", WAIT).catch(() => fail(`the run ${stem} shows no loss plot`));
  const plotted = await page.$eval("#run-detail canvas", (c) => ({ ...c.dataset }));
  if (plotted.source !== "metrics" || Number(plotted.steps) !== final || Number(plotted.lastStep) !== final)
    fail(`the Runs plot shows ${plotted.steps} steps to ${plotted.lastStep} from ${plotted.source}, expected all ${final} from metrics.jsonl`);
  await screenshot(`${method}-runs`);
  let resumedFromRuns = 0;
  if (fields["log-dir"]) {
    // A run in a typed log folder shows it, and Resume there continues it in that folder.
    const shown = await page.evaluate((n) => [...document.querySelectorAll("#runs-table tbody tr")].find((r) => r.children[1].textContent === n).children[2].textContent, stem);
    if (shown !== fields["log-dir"]) fail(`the Runs tab shows ${stem}'s log folder as '${shown}', expected ${fields["log-dir"]}`);
    await page.evaluate(() => [...document.querySelectorAll("#run-detail button")].find((b) => /Resume/.test(b.textContent)).click());
    const filled = await page.evaluate(() => ({ resume: document.querySelector('#form-train [name="resume"]').value,
                                                logDir: document.querySelector('#form-train [name="log-dir"]').value }));
    if (filled.logDir !== fields["log-dir"] || !filled.resume.startsWith(fields["log-dir"] + "/") || !filled.resume.endsWith(stem + ".state.safetensors"))
      fail(`Resume in the Runs tab filled resume '${filled.resume}' and log folder '${filled.logDir}'`);
    await screenshot(`${method}-resume-from-runs`);
    await page.click("#start");
    await waitStep(final + 1);
    await page.click("#interrupt");
    await waitState("interrupted");
    resumedFromRuns = await stepNow();
    if (!(resumedFromRuns > final)) fail(`resuming from the Runs tab did not continue past step ${final}`);
  }
  console.log(`${method}: steps ${first} -> ${second}, interrupted at ${stopped}, resumed to ${final}` + (resumedStart ? "" : ""));
  return { stopped, final: resumedFromRuns || final };
}

await page.goto(url, { waitUntil: "load" });
await page.waitForSelector("body[data-ready]", WAIT).catch(() => fail("the page did not finish loading: " + pageErrors.join("; ")));

if (mode === "fallback") {
  shot = 20;
  await tab("create-embedding");
  await page.$eval('#create-embedding [name="name"]', (e) => { e.value = "browser-nan"; });
  await page.click("#create-embedding button[type=submit]");
  await page.waitForFunction(() => /Created/.test(document.querySelector("#result-embedding").textContent), WAIT)
    .catch(() => fail("creating browser-nan failed"));
  await tab("train");
  for (const [k, v] of Object.entries({ embedding: "browser-nan.safetensors", model: "model", dataset: "dataset", width: "64",
                                        height: "64", device: "cpu", precision: "bf16", "max-steps": "4", "save-every": "0",
                                        "preview-every": "0", "csv-every": "1" }))
    await setField(k, v);
  await page.click("#start");
  await waitState("finished");
  const warnings = await page.$$eval("#log li.warning", (l) => l.map((e) => e.textContent));
  if (!warnings.some((w) => /switches to fp32/.test(w))) fail(`the plugin's fallback warning is not shown: ${JSON.stringify(warnings)}`);
  if (!warnings.some((w) => /fallback fired/.test(w))) fail(`the panel's fallback message is not shown: ${JSON.stringify(warnings)}`);
  await screenshot("fallback");
  if (pageErrors.length) fail("the page logged errors: " + pageErrors.join("; "));
  console.log("fallback: " + warnings.length + " warnings shown");
  await browser.close();
  process.exit(0);
}

await screenshot("train-tab");

// Every option /api/setup gives a folder is a path field offering that folder's entries; one the page
// does not know (here added to the setup on its way to a second page) is one too.
const pathFields = await page.evaluate(async () => {
  const headers = {};
  const token = new URLSearchParams(location.search).get("token");
  if (token) headers["X-SDT-Token"] = token;
  const setup = await (await fetch("/api/setup", { headers })).json();
  return setup.options.filter((o) => o.folder).map((o) => {
    const input = document.querySelector(`#form-train [name="${o.name}"]`);
    const list = input && (input.tagName === "SELECT" ? input : input.list);
    return { name: o.name, folder: o.folder, fieldFolder: input && input.dataset.folder,
             listed: !setup.lists[o.folder] || (list && list.dataset.list === o.folder && [...list.options].filter((x) => x.value).length === setup.lists[o.folder].length) };
  });
});
if (pathFields.length < 8) fail(`the setup names only ${pathFields.length} path options`);
for (const f of pathFields)
  if (f.fieldFolder !== f.folder || !f.listed) fail(`the path option ${f.name} is not a field of the ${f.folder} folder with its entries: ${JSON.stringify(f)}`);
const other = await browser.newPage();
await other.setRequestInterception(true);
other.on("request", async (request) => {
  if (!new URL(request.url()).pathname.startsWith("/api/setup")) return request.continue();
  const token = request.headers()["x-sdt-token"];
  const setup = await (await fetch(request.url(), { headers: token ? { "X-SDT-Token": token } : {} })).json();
  setup.options.push({ name: "new-path", kind: "text", help: "A path option the page has never heard of", arg: "DIR",
                       group: "Advanced", embedding: true, hypernetwork: true, folder: "datasets" });
  request.respond({ status: 200, contentType: "application/json", body: JSON.stringify(setup) });
});
await other.goto(url, { waitUntil: "load" });
await other.waitForSelector("body[data-ready]", WAIT).catch(() => fail("the page with a new path option did not load"));
const added = await other.$eval('#form-train [name="new-path"]', (i) => ({ folder: i.dataset.folder, list: i.list && i.list.dataset.list,
                                                                          n: i.list ? i.list.options.length : 0 }))
  .catch(() => null);
if (!added || added.folder !== "datasets" || added.list !== "datasets" || !added.n)
  fail(`a new path option from the setup is not a datasets field with its suggestions: ${JSON.stringify(added)}`);
await other.close();

const common = { model: "model", width: "64", height: "64", device: "cpu", seed: "7", "max-steps": "400", "save-every": "3",
                 "preview-every": "3", "preview-steps": "3", "csv-every": "4", "learn-rate": "0.01" };
const embedding = await trainCase({
  method: "embedding", createTab: "create-embedding", name: "browser-cat", fileName: "browser-cat.safetensors",
  form: { name: "browser-cat", init_text: "a star", vectors: "2", model: "model" },
  fields: { ...common, embedding: "browser-cat.safetensors", dataset: "dataset", template: "subject.txt" },
});
// A run that fails in preparation shows its error and no preview: not the previous run's.
await tab("train");
await page.click("input[name=method][value=embedding]");
await setField("width", "63");
await page.click("#start");
await waitState("failed");
if (!(await page.$eval("#preview img", (i) => i.hidden))) fail("the failed run shows the previous run's preview");
if (!(await text("#run-error"))) fail("the failed run shows no error");
if (await page.$eval("#start", (b) => b.disabled)) fail("Train stays disabled after a failed run");
await screenshot("embedding-failed");

const hypernetwork = await trainCase({
  method: "hypernetwork", createTab: "create-hypernetwork", name: "browser-style", fileName: "browser-style.pt",
  form: { name: "browser-style" },
  fields: { ...common, hypernetwork: "browser-style.pt", embedding: "", dataset: "dataset-style", template: "style.txt",
            "learn-rate": "0.0001", "log-dir": "project/first" },
});
// A run with only a CSV (an older run, or metrics=false; test_serve_browser.sh wrote it: 20 rows with the
// validation column, then 2 torn ones) is plotted from the CSV with one note for the rows left out.
await tab("runs");
await page.waitForFunction(() => [...document.querySelectorAll("#runs-table tbody tr")].some((r) => r.children[1] && r.children[1].textContent === "csv-only"), WAIT)
  .catch(() => fail("the Runs tab does not list the CSV-only run"));
await page.evaluate(() => [...document.querySelectorAll("#runs-table tbody tr")].find((r) => r.children[1].textContent === "csv-only").click());
await page.waitForSelector("#run-detail canvas[data-steps]", WAIT).catch(() => fail("the CSV-only run shows no loss plot"));
const csvPlot = await page.$eval("#run-detail canvas", (c) => ({ ...c.dataset }));
const notes = await page.$$eval("#run-detail .note", (n) => n.map((e) => e.textContent));
if (csvPlot.source !== "csv" || Number(csvPlot.steps) !== 20 || Number(csvPlot.lastStep) !== 20)
  fail(`the CSV-only run's plot shows ${csvPlot.steps} steps to ${csvPlot.lastStep} from ${csvPlot.source}, expected 20 from the CSV`);
if (notes.length !== 1 || !/^2 of the CSV/.test(notes[0])) fail(`the CSV-only run shows ${notes.length} notes, expected one for 2 rows: ${JSON.stringify(notes)}`);
await screenshot("runs-csv-only");
if (pageErrors.length) fail("the page logged errors: " + pageErrors.join("; "));
console.log(JSON.stringify({ embedding, hypernetwork }));
await browser.close();
