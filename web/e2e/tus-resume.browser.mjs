// Uploads UF_FILE from the development page (UF_PAGE) in headless
// Chromium with the upload throttled to UF_UPLOAD_BPS bytes a second: a
// file of 5 MiB or more goes through @uppy/tus on the resumable route.
// Prints the file's progress every 200 ms ({"progress":{sent,done}}) -- the
// test kills and restarts the server meanwhile -- and at the end
// {"done":true,error,url,sent,offsets,logs}: sent adds up every rise of
// the file's progress (the bytes the page handed to the network, counted
// again after a failure sends part of the file anew); offsets are the
// Upload-Offset of every PATCH the page started.
import { launch, loggedPage } from "./harness.mjs";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const pageURL = env("UF_PAGE"), file = env("UF_FILE"), bps = Number(env("UF_UPLOAD_BPS"));

const browser = await launch();
try {
  const { page, logs } = await loggedPage(browser);
  await page.goto(pageURL);
  await page.waitForSelector(".uppy-Dashboard-input", { state: "attached" });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: bps });
  const offsets = [];
  page.on("request", (r) => {
    if (r.method() === "PATCH" && r.url().includes("/uploaded-file/tus/")) offsets.push(Number(r.headers()["upload-offset"]));
  });
  await page.locator(".uppy-Dashboard-input").first().setInputFiles([file]);
  await page.evaluate(() => {
    window.sentTotal = 0;
    let last = 0;
    window.uppy.on("upload-progress", (_f, p) => {
      const at = p.bytesUploaded || 0;
      if (at > last) window.sentTotal += at - last;
      last = at;
    });
  });
  await page.click(".uppy-StatusBar-actionBtn--upload");
  const state = () =>
    page.evaluate(() => {
      const f = Object.values(window.uppy.getState().files)[0];
      return f ? { sent: f.progress.bytesUploaded || 0, done: !!f.progress.uploadComplete, error: f.error ?? null } : null;
    });
  const timer = setInterval(() => {
    state()
      .then((p) => p && console.log(JSON.stringify({ progress: p })))
      .catch(() => undefined);
  }, 200);
  await page.waitForFunction(
    () => Object.values(window.uppy.getState().files).every((f) => f.progress.uploadComplete || f.error),
    null,
    { timeout: 180_000, polling: 200 },
  );
  clearInterval(timer);
  const result = await page.evaluate(() => {
    const f = Object.values(window.uppy.getState().files)[0];
    return { error: f.error ?? null, url: f.response?.uploadURL ?? null, sent: window.sentTotal };
  });
  console.log(JSON.stringify({ done: true, ...result, offsets, logs }));
} finally {
  await browser.close();
}
