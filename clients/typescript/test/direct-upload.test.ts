// A whole direct upload and download through the generated client, against
// a running server: UPLOADEDFILE_URL and UPLOADEDFILE_TOKEN (set by the Go
// test that starts the server).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient, sha256Checksum } from "../src/index.js";

const baseUrl = process.env.UPLOADEDFILE_URL;
const token = process.env.UPLOADEDFILE_TOKEN;

test("direct upload, detail, download, delete", async () => {
  assert.ok(baseUrl && token, "UPLOADEDFILE_URL and UPLOADEDFILE_TOKEN are required");
  const client = createClient({ baseUrl, token: () => token });
  const body = new TextEncoder().encode("id,amount\n1,42\n");

  const init = await client.POST("/uploaded-file/initiate", {
    body: { originalName: "rows.csv", contentType: "text/csv", sizeBytes: body.length, checksum: await sha256Checksum(body) },
  });
  assert.equal(init.response.status, 201, JSON.stringify(init.error));
  const { id, upload } = init.data!;

  // Send exactly the target's headers; the local target also takes the token.
  const headers = new Headers(upload.headers);
  headers.delete("Content-Length");
  if (upload.url.startsWith(baseUrl)) headers.set("Authorization", `Bearer ${token}`);
  const put = await fetch(upload.url, { method: upload.method, headers, body });
  assert.equal(put.status, 200);

  const done = await client.POST("/uploaded-file/{id}/complete", { params: { path: { id } } });
  assert.equal(done.response.status, 200, JSON.stringify(done.error));
  assert.equal(done.data!.status, "ready");
  assert.ok(!("key" in done.data!), "no storage key in an end-user response");

  const detail = await client.GET("/uploaded-file/{id}", { params: { path: { id } } });
  assert.equal(detail.data!.originalName, "rows.csv");

  const download = await client.GET("/uploaded-file/{id}/download", { params: { path: { id } }, parseAs: "text" });
  assert.equal(download.data, "id,amount\n1,42\n");

  const missing = await client.GET("/uploaded-file/{id}", { params: { path: { id: "6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e" } } });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error!.code, "core.file.not-found");

  const del = await client.DELETE("/uploaded-file/{id}", { params: { path: { id } } });
  assert.equal(del.response.status, 204);
});
