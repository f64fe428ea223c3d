// Drives the upload page in headless Chromium through one failure
// (UF_SCENARIO) and, where the failure is one retrying mends, through its
// Retry: adds the files in UF_FILES (a JSON list of paths), uploads them,
// and prints one JSON object -- each file's error as the Dashboard shows
// it, whether it offers Retry, and what a Retry did.
//
//   refused   the files are refused by the service (no Retry offered)
//   quota     one of the files passes the owner's file quota (no Retry)
//   network   every PUT to the upload target fails until Retry is clicked
//   expired   the first PUT is held past the target's expiry (UF_HOLD_MS)
//   cors      the bucket's CORS does not allow the page (the PUT is blocked)
//   memory    one large file; the page's live JS heap and ArrayBuffer
//             memory sampled through the upload (garbage collected, then
//             Runtime.getHeapUsage)
import { launch, loggedPage } from "./harness.mjs";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const pageURL = env("UF_PAGE"), shots = env("UF_SHOTS"), scenario = env("UF_SCENARIO");
const files = JSON.parse(env("UF_FILES"));
const target = /\/content\?expires=|\/_staging\//;

const browser = await launch();
try {
  const { page, logs } = await loggedPage(browser);
  // The memory scenario measures the direct upload of a large file: the
  // page sends it direct (a resumable upload reads it a chunk at a time too).
  await page.goto(scenario === "memory" ? `${pageURL}?resumable-from=0` : pageURL);
  await page.waitForSelector(".uppy-Dashboard-input", { state: "attached" });
  await page.evaluate(() => window.uploadedfile.loaded);

  // The faults, at the upload target.
  let down = scenario === "network";
  let held = 0;
  if (scenario === "network" || scenario === "expired") {
    await page.route(target, async (route) => {
      if (route.request().method() !== "PUT") return route.continue();
      if (down) return route.abort("connectionrefused");
      if (scenario === "expired" && held++ === 0) {
        await new Promise((r) => setTimeout(r, Number(env("UF_HOLD_MS"))));
      }
      return route.continue();
    });
  }
  let sampler = null;
  const heap = { peakUsed: 0, peakBacking: 0, before: 0 };
  if (scenario === "memory") {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("HeapProfiler.collectGarbage");
    const first = await cdp.send("Runtime.getHeapUsage");
    heap.before = first.usedSize + (first.backingStorageSize ?? 0);
    // Each sample collects garbage twice first: what it reads is the memory
    // the page holds live (chunks already hashed and sent are garbage). V8
    // frees a dead ArrayBuffer's backing store on a concurrent sweeper,
    // which a second collection waits for; one collection alone read dead
    // chunks as live on a loaded machine.
    let busy = false;
    sampler = setInterval(async () => {
      if (busy) return;
      busy = true;
      await cdp.send("HeapProfiler.collectGarbage").catch(() => null);
      await cdp.send("HeapProfiler.collectGarbage").catch(() => null);
      const u = await cdp.send("Runtime.getHeapUsage").catch(() => null);
      busy = false;
      if (!u) return;
      heap.peakUsed = Math.max(heap.peakUsed, u.usedSize);
      heap.peakBacking = Math.max(heap.peakBacking, u.usedSize + (u.backingStorageSize ?? 0));
    }, 20);
  }

  const settled = (n) =>
    page.waitForFunction(
      (n) => {
        const all = Object.values(window.uppy.getState().files);
        return all.length === n && all.every((f) => f.progress.uploadComplete || f.error);
      },
      n,
      { timeout: 90_000 },
    );
  const state = () =>
    page.evaluate(() =>
      Object.values(window.uppy.getState().files).map((f) => ({
        name: f.name,
        error: f.error ?? null,
        id: f.response?.body?.file?.id ?? null,
        status: f.response?.body?.file?.status ?? null,
      })),
    );
  const retryButtons = () => page.locator(".uppy-Dashboard-Item-progressIcon--retry").count();

  await page.locator(".uppy-Dashboard-input").first().setInputFiles(files);
  if (sampler) {
    await new Promise((r) => setTimeout(r, 200));
    heap.afterAdd = heap.peakBacking;
  }
  await page.click(".uppy-StatusBar-actionBtn--upload");
  await settled(files.length);
  if (sampler) clearInterval(sampler);
  const first = await state();
  const offered = await retryButtons();
  await page.screenshot({ path: `${shots}/errors-${scenario}.png`, fullPage: true });

  let retried = null;
  if (offered > 0 && (scenario === "network" || scenario === "expired")) {
    down = false;
    await page.locator(".uppy-Dashboard-Item-progressIcon--retry").first().click();
    await page.waitForFunction(() => Object.values(window.uppy.getState().files).every((f) => f.progress.uploadComplete || f.error), null, {
      timeout: 90_000,
    });
    retried = await state();
  }
  console.log(JSON.stringify({ first, offered, retried, heap, logs }));
} finally {
  await browser.close();
}
