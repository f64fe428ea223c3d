// The development upload page of `uploadedfile serve --dev`: the Uppy
// Dashboard signed in with the development token, uploading files under
// 5 MiB through the direct lifecycle (the UploadedFile plugin over the
// TypeScript client) and larger ones through the resumable route with
// @uppy/tus in 5 MiB chunks (a dropped connection costs at most a chunk),
// and below it the caller's files -- the first page of GET /uploaded-file,
// loaded with the page and again after each upload -- each with a download
// button. The server puts {baseUrl, token} in the page's
// #uploadedfile-config element.
import Uppy from "@uppy/core";
import Dashboard from "@uppy/dashboard";
import Tus from "@uppy/tus";
import "@uppy/core/css/style.min.css";
import "@uppy/dashboard/css/style.min.css";
import UploadedFilePlugin from "../../clients/uppy/src/index.ts";
import type { UploadedFileBody } from "../../clients/uppy/src/index.ts";
import { createClient } from "../../clients/typescript/src/index.ts";
import type { UploadedFile } from "../../clients/typescript/src/index.ts";

interface PageConfig {
  baseUrl: string;
  token: string;
}

const config = JSON.parse(document.getElementById("uploadedfile-config")!.textContent!) as PageConfig;
const client = createClient({ baseUrl: config.baseUrl, token: () => config.token });

/** Files from this size on go through the resumable route, in chunks of it. */
const chunkSize = 5 << 20;
/** ?resumable-from=N moves the threshold (0: every file goes direct), for the page's tests. */
const asked = new URLSearchParams(location.search).get("resumable-from");
const resumableFrom = asked === "0" ? undefined : Number(asked ?? chunkSize);

const uppy = new Uppy<Record<string, never>, UploadedFileBody>({ id: "uploadedfile" })
  .use(Dashboard, { inline: true, target: "#uppy", height: 380, proudlyDisplayPoweredByUppy: false })
  .use(UploadedFilePlugin, { client, resumableFrom })
  .use(Tus, {
    endpoint: `${config.baseUrl}/uploaded-file/tus/`,
    headers: { Authorization: `Bearer ${config.token}` },
    chunkSize,
    // Long enough to outlast a server's restart and the write lease a
    // killed server leaves on the upload (at most 3 s).
    retryDelays: [0, 1000, 3000, 5000, 10000, 20000],
    removeFingerprintOnSuccess: true,
  });

uppy.on("upload-success", () => void refresh());

/** refresh shows the caller's newest files (the list's first page). */
async function refresh(): Promise<void> {
  const page = await client.GET("/uploaded-file", { params: { query: { limit: 50 } } });
  if (!page.data) return;
  document.querySelector("#files tbody")!.replaceChildren();
  for (const file of page.data.items) show(file);
}

/** show adds a row with the file's detail and a download button. */
function show(file: UploadedFile): void {
  const row = document.createElement("tr");
  row.dataset.fileId = file.id;
  for (const text of [file.originalName, file.contentType, String(file.sizeBytes), file.status, file.id]) {
    const cell = document.createElement("td");
    cell.textContent = text;
    row.append(cell);
  }
  const action = document.createElement("td");
  const button = document.createElement("button");
  button.textContent = "Download";
  button.onclick = () => download(file);
  action.append(button);
  row.append(action);
  document.querySelector("#files tbody")!.append(row);
}

/** download reads the bytes with the token and saves them. */
async function download(file: UploadedFile): Promise<void> {
  const resp = await fetch(`${config.baseUrl}/uploaded-file/${file.id}/download`, { headers: { Authorization: `Bearer ${config.token}` } });
  const url = URL.createObjectURL(await resp.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = file.originalName;
  a.click();
  URL.revokeObjectURL(url);
}

const loaded = refresh();

// For the browser tests: the Uppy instance, the client, and the list's
// refresh (loaded resolves once the page's first list is shown).
Object.assign(window, { uppy, uploadedfile: { client, refresh, loaded } });
