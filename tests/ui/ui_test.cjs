// The filer's web UI in a real browser (headless Chromium from Debian, driven by
// playwright-core): load /ui, see the cluster, browse into a directory made through a kelp
// mount, upload a file and find it in the mount byte for byte, rename and delete it there too,
// download it. Screenshots go to ARTIFACT_DIR. Run by ui_test.sh, which starts the cluster.
//   env: FILER=127.0.0.1:port  MOUNT=/path/of/a/kelp/mount  UI_DEPS=dir with node_modules
"use strict";
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const { chromium } = require(path.join(process.env.UI_DEPS, "node_modules", "playwright-core"));

const FILER = process.env.FILER;
const MOUNT = process.env.MOUNT;
const OUT = process.env.ARTIFACT_DIR || "/tmp";
const BASE = `http://${FILER}`;
let failures = 0, passes = 0;

function check(cond, what) {
  if (cond) { passes++; console.log(`ok - ${what}`); }
  else { failures++; console.log(`not ok - ${what}`); }
}

// Polls fn (sync or async) until it returns truthy, up to ms; returns its last value.
async function until(fn, ms = 10000) {
  const end = Date.now() + ms;
  let v;
  while (!(v = await fn()) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  return v;
}
const readMount = (p) => { try { return fs.readFileSync(path.join(MOUNT, p)); } catch (_) { return null; } };
const existsMount = (p) => fs.existsSync(path.join(MOUNT, p));

(async () => {
  fs.mkdirSync(OUT, { recursive: true });
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  const foreign = [];
  page.on("request", (r) => { if (!r.url().startsWith(BASE) && !r.url().startsWith("data:")) foreign.push(r.url()); });

  // ---- the cluster at a glance
  const resp = await page.goto(`${BASE}/ui`);
  check(resp.status() === 200, "GET /ui is 200");
  check((resp.headers()["content-security-policy"] || "").includes("default-src 'self'"), "/ui has a self-only CSP");
  await page.waitForFunction(() => document.querySelector("#c-servers").textContent === "1");
  check(true, "the cluster view shows 1 volume server");
  const serverRow = await page.locator("#servers tbody tr").first().innerText();
  check(/alive/.test(serverRow), `the volume server is listed alive (${serverRow.replace(/\s+/g, " ")})`);
  await page.waitForFunction(() => /healthy|under/.test(document.querySelector("#c-health").textContent));
  // Rates appear from the second scrape on (2 s apart).
  await page.waitForFunction(() => /^[0-9.]+$/.test(document.querySelector("#c-http").textContent), null, { timeout: 10000 });
  check(true, `live request rate shown: ${await page.locator("#c-http").innerText()} HTTP requests/s`);

  // ---- browse into a directory made through the mount
  await page.click("#nav-files");
  await page.waitForSelector('#files tr[data-name="frommount"]');
  check(true, "the root listing shows the directory made through the mount");
  await page.click('#files tr[data-name="frommount"] a');
  await page.waitForSelector('#files tr[data-name="hello.txt"]');
  const helloRow = await page.locator('#files tr[data-name="hello.txt"]').innerText();
  check(/6 B/.test(helloRow), `hello.txt shows its size (${helloRow.replace(/\s+/g, " ")})`);
  check(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/.test(helloRow), "and its modification time");
  check((await page.locator("#crumbs").innerText()).includes("frommount"), "the breadcrumbs name the directory");

  // ---- upload, then find it in the mount
  const data = crypto.randomBytes(3 * 1024 * 1024 + 123);
  await page.setInputFiles("#upload", { name: "uploaded.bin", mimeType: "application/octet-stream", buffer: data });
  await page.waitForSelector('#files tr[data-name="uploaded.bin"]');
  check(true, "the uploaded file is listed");
  const got = await until(() => { const b = readMount("frommount/uploaded.bin"); return b && b.length === data.length ? b : null; });
  check(got && Buffer.compare(got, data) === 0, "the upload reads back byte for byte through the kelp mount");
  await page.screenshot({ path: path.join(OUT, "ui-files.png"), fullPage: true });

  // ---- download
  const href = await page.locator('#files tr[data-name="uploaded.bin"] a').getAttribute("href");
  const dl = await page.request.get(BASE + href);
  check(Buffer.compare(await dl.body(), data) === 0, "the download link returns the same bytes");

  // ---- rename, seen in the mount
  page.once("dialog", (d) => d.accept("renamed.bin"));
  await page.click('#files tr[data-name="uploaded.bin"] button:has-text("Rename")');
  await page.waitForSelector('#files tr[data-name="renamed.bin"]');
  check(await until(() => existsMount("frommount/renamed.bin") && !existsMount("frommount/uploaded.bin")),
        "the rename shows in the mount");

  // ---- new folder and delete, seen in the mount
  page.once("dialog", (d) => d.accept("made-in-ui"));
  await page.click("#mkdir");
  await page.waitForSelector('#files tr[data-name="made-in-ui"]');
  check(await until(() => existsMount("frommount/made-in-ui")), "a folder made in the UI shows in the mount");
  page.once("dialog", (d) => d.accept());
  await page.click('#files tr[data-name="renamed.bin"] button:has-text("Delete")');
  await page.waitForSelector('#files tr[data-name="renamed.bin"]', { state: "detached" });
  check(await until(() => !existsMount("frommount/renamed.bin")), "the delete shows in the mount");

  // ---- a file made through the mount appears after a refresh
  fs.writeFileSync(path.join(MOUNT, "frommount", "late.txt"), "late\n");
  await page.click("#refresh");
  await page.waitForSelector('#files tr[data-name="late.txt"]');
  check(true, "a file written through the mount appears on refresh");

  // ---- back to the cluster: the upload made a volume, fully replicated
  await page.click("#nav-cluster");
  await page.waitForFunction(() => document.querySelectorAll("#volumes tbody tr td.num").length > 0);
  const vrow = await page.locator("#volumes tbody tr").first().innerText();
  check(/ok, writable/.test(vrow), `the volume the upload made is listed healthy (${vrow.replace(/\s+/g, " ")})`);
  check((await page.locator("#c-health").innerText()) === "healthy", "replication health: healthy");
  await page.waitForFunction(() => !/^0 writable, 0 B/.test(document.querySelector("#c-volumes-sub").textContent));
  check(true, `bytes stored shown: ${await page.locator("#c-volumes-sub").innerText()}`);
  await page.screenshot({ path: path.join(OUT, "ui-cluster.png"), fullPage: true });

  check(problems.length === 0, `no page errors or console errors ${problems.join("; ")}`);
  check(foreign.length === 0, `no request leaves the filer ${foreign.join(", ")}`);
  await browser.close();
  console.log(`# passed ${passes}, failed ${failures}; screenshots in ${OUT}`);
  process.exit(failures ? 1 : 0);
})().catch((e) => { console.log(`not ok - ${e.stack || e}`); process.exit(1); });
