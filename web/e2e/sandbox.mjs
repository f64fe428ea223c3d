// Opens a download in headless Chromium as a user would (the bearer token
// as a header of the navigation) and reports what the browser made of it:
// the document's origin (an opaque "null" inside the sandbox), its title
// and text, and whether a script of the file ran. Prints one JSON object.
import { launch } from "./harness.mjs";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const url = env("UF_DOWNLOAD"), token = env("UF_TOKEN"), shots = env("UF_SHOTS");

const browser = await launch();
try {
  const context = await browser.newContext({ extraHTTPHeaders: { Authorization: `Bearer ${token}` } });
  const page = await context.newPage();
  const response = await page.goto(url);
  const seen = await page.evaluate(() => ({
    origin: window.origin,
    title: document.title,
    text: document.body ? document.body.innerText : "",
    ran: window.uploadedScriptRan === true,
    cookieAccess: (() => {
      try {
        return typeof document.cookie === "string";
      } catch {
        return false;
      }
    })(),
  }));
  await page.screenshot({ path: `${shots}/sandboxed-download.png` });
  console.log(JSON.stringify({ status: response.status(), csp: response.headers()["content-security-policy"] ?? "", ...seen }));
} finally {
  await browser.close();
}
