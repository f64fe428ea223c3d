// Drives a consumer's app bundled from the packed @uploadedfile packages
// (UF_PAGE, with the API and the token in its query string) in headless
// Chromium: adds two files to its Uppy, uploads them through the plugin,
// and prints one JSON object -- each file's outcome and the Uppy version
// the app runs.
import { launch, loggedPage } from "./harness.mjs";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const page_url = `${env("UF_PAGE")}?api=${encodeURIComponent(env("UF_API"))}&token=${encodeURIComponent(env("UF_TOKEN"))}`;

const browser = await launch();
try {
  const { page, logs } = await loggedPage(browser);
  await page.goto(page_url);
  await page.waitForFunction(() => window.appReady === true, null, { timeout: 30_000 });
  const out = await page.evaluate(async () => {
    const uppy = window.uppy;
    uppy.addFile({ name: "rows.csv", type: "text/csv", data: new Blob(["id,amount\n1,42\n"], { type: "text/csv" }) });
    uppy.addFile({ name: "notes.txt", type: "text/plain", data: new Blob(["packed, installed, bundled\n"], { type: "text/plain" }) });
    await uppy.upload();
    return {
      version: uppy.constructor.VERSION ?? null,
      results: Object.values(uppy.getState().files).map((f) => ({
        name: f.name,
        error: f.error ?? null,
        id: f.response?.body?.file?.id ?? null,
        status: f.response?.body?.file?.status ?? null,
      })),
    };
  });
  console.log(JSON.stringify({ ...out, logs }));
} finally {
  await browser.close();
}
