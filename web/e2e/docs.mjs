// Drives the API reference in headless Chromium: waits for Swagger UI to
// render the operations, screenshots it into UF_SHOTS, then calls
// getFile for UF_FILE_ID with "Try it out" (signed in with the page's
// token) and prints the operations rendered and the status of the call.
import { launch } from "./harness.mjs";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const docs = env("UF_DOCS"), shots = env("UF_SHOTS"), id = env("UF_FILE_ID");

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1600 } });
  await page.goto(docs);
  await page.waitForSelector(".opblock", { timeout: 30_000 });
  const operations = await page.locator(".opblock").count();
  await page.screenshot({ path: `${shots}/api-reference.png` });

  const op = page
    .locator(".opblock.opblock-get")
    .filter({ has: page.locator('.opblock-summary-path[data-path="/uploaded-file/{id}"]') })
    .first();
  await op.locator(".opblock-summary").click();
  await op.locator(".try-out__btn").click();
  await op.locator('input[placeholder="id"]').fill(id);
  await op.locator(".execute").click();
  const status = op.locator(".live-responses-table tr.response .response-col_status").first();
  await status.waitFor({ timeout: 30_000 });
  const code = (await status.textContent()).trim();
  await op.screenshot({ path: `${shots}/api-reference-try-it.png` });
  console.log(JSON.stringify({ operations, status: code }));
} finally {
  await browser.close();
}
