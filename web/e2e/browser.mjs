// Drives the upload page in headless Chromium (Debian's /usr/bin/chromium
// through playwright-core): adds the files named in UF_FILES (a JSON list of
// paths) to the Uppy Dashboard, uploads them, waits until each is done or
// failed, screenshots the page into UF_SHOTS, then opens UF_OTHER_PAGE (a
// page on an origin the service does not allow) and tries to call the API
// from it. Prints one JSON object: each file's outcome and whether the
// cross-origin call was blocked.
import { launch, loggedPage } from "./harness.mjs";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const page_url = env("UF_PAGE"), api = env("UF_API"), token = env("UF_TOKEN"), shots = env("UF_SHOTS"), other = env("UF_OTHER_PAGE");
const files = JSON.parse(env("UF_FILES"));
const label = process.env.UF_LABEL ?? "page";

const browser = await launch();
try {
  const { page, logs } = await loggedPage(browser);
  await page.goto(page_url);
  await page.waitForSelector(".uppy-Dashboard-input", { state: "attached" });
  await page.evaluate(() => window.uploadedfile.loaded);
  const listedAtLoad = await page.locator("#files tbody tr td:first-child").allTextContents();
  await page.locator(".uppy-Dashboard-input").first().setInputFiles(files);
  await page.evaluate(() => {
    window.progressEvents = 0;
    window.uppy.on("upload-progress", () => window.progressEvents++);
  });
  await page.click(".uppy-StatusBar-actionBtn--upload");
  await page.waitForFunction(
    (n) => {
      const all = Object.values(window.uppy.getState().files);
      return all.length === n && all.every((f) => f.progress.uploadComplete || f.error);
    },
    files.length,
    { timeout: 60_000 },
  );
  await page.evaluate(() => window.uploadedfile.refresh()); // the list as it is now
  const results = await page.evaluate(() =>
    Object.values(window.uppy.getState().files).map((f) => ({
      name: f.name,
      error: f.error ?? null,
      id: f.response?.body?.file?.id ?? null,
      status: f.response?.body?.file?.status ?? null,
    })),
  );
  const rows = await page.locator("#files tbody tr").count();
  const progressEvents = await page.evaluate(() => window.progressEvents);
  await page.screenshot({ path: `${shots}/${label}-upload.png`, fullPage: true });

  // Cancel: hold the next upload's PUT at the target, cancel in Uppy, then
  // drop the held request; the plugin must abort the pending file.
  let held = null;
  await page.route(/\/content\?expires=|\/_staging\//, (route) => {
    held = route;
  });
  await page.evaluate(() => {
    window.uppy.cancelAll(); // the finished files leave the Dashboard
    window.uppy.addFile({ name: "cancelled.csv", type: "text/csv", data: new Blob(["a,b\n1,2\n"], { type: "text/csv" }) });
    window.cancelled = window.uppy.upload().catch(() => undefined);
  });
  for (let waited = 0; !held && waited < 30_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
  if (!held) throw new Error("the cancelled upload's PUT never started");
  await page.evaluate(() => window.uppy.cancelAll());
  await held.abort().catch(() => undefined);
  await page.evaluate(() => window.cancelled);
  await page.waitForTimeout(500); // the plugin's DELETE of the pending file
  await page.unroute(/\/content\?expires=|\/_staging\//);

  await page.goto(other);
  const blocked = await page.evaluate(
    async ({ api, token }) => {
      try {
        await fetch(`${api}/uploaded-file/initiate`, {
          method: "POST",
          headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
          body: JSON.stringify({ originalName: "a.csv", contentType: "text/csv", sizeBytes: 1, checksum: "sha256:x" }),
        });
        return false;
      } catch {
        return true; // the browser refused the cross-origin call
      }
    },
    { api, token },
  );
  await page.screenshot({ path: `${shots}/${label}-other-origin.png` });
  console.log(JSON.stringify({ results, rows, listedAtLoad, progressEvents, blocked, logs }));
} finally {
  await browser.close();
}
