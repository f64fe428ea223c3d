// What every browser scenario of web/e2e shares: Debian's Chromium driven
// by playwright-core (no downloaded browser, no network beyond loopback),
// and a page whose console and errors are collected for the Go test's
// report.
import { chromium } from "playwright-core";

/** launch starts the machine's Chromium headless, offline. */
export function launch() {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-gpu"],
  });
}

/** loggedPage opens a page whose console lines and errors land in logs. */
export async function loggedPage(browser, options) {
  const page = await browser.newPage(options);
  const logs = [];
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
  return { page, logs };
}
