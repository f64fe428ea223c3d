// The whole direct lifecycle through the client, against a running server:
// UPLOADEDFILE_URL and UPLOADEDFILE_TOKEN (set by the Go test that starts
// the server).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient, resumableUpload, sha256Checksum, upload, UploadError } from "../src/index.js";

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
  const { id, upload: target } = init.data!;

  // Exactly the target's method, URL and headers: no token, no length.
  assert.ok(!("Content-Length" in target.headers));
  const put = await fetch(target.url, { method: target.method, headers: target.headers, body });
  assert.equal(put.status, 200);
  assert.ok(put.headers.get("ETag"), "the target answers with an ETag");

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

test("upload() runs the lifecycle with progress, and refusals carry code and rule", async () => {
  assert.ok(baseUrl && token);
  const client = createClient({ baseUrl, token: () => token });
  const seen: number[] = [];
  const file = new File([new TextEncoder().encode("a,b\n1,2\n")], "rows.csv", { type: "text/csv" });
  const ready = await upload(client, file, { onProgress: (sent) => seen.push(sent) });
  assert.equal(ready.status, "ready");
  assert.equal(ready.originalName, "rows.csv");
  assert.equal(seen.at(-1), file.size, "progress reaches the whole size");

  const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, ...new Array(64).fill(0)]);
  await assert.rejects(upload(client, new File([png], "photo.jpg", { type: "image/jpeg" })), (err: unknown) => {
    assert.ok(err instanceof UploadError);
    assert.equal(err.code, "core.file.upload-verification-failed");
    assert.ok(err.rule, "the rule a UI can show");
    assert.equal(err.retryable, false, "the upload failed: final");
    return true;
  });
  await assert.rejects(upload(client, new File([new Uint8Array(8)], "tool.exe", { type: "application/octet-stream" })), (err: unknown) => {
    assert.ok(err instanceof UploadError);
    assert.equal(err.status, 422);
    assert.equal(err.code, "core.file.invalid-upload");
    assert.ok(err.rule?.startsWith("type."), err.rule);
    return true;
  });
});

test("upload() retries a proxy's 502 under the same key: the answer lost on the way back makes no second file", async () => {
  assert.ok(baseUrl && token);
  const client = createClient({ baseUrl, token: () => token });
  let lost = 0;
  client.use({
    // The server completed the upload; a proxy in between lost its answer.
    async onResponse({ request, response }) {
      if (request.method === "POST" && request.url.endsWith("/complete") && lost++ === 0) {
        return new Response("<html>502 Bad Gateway</html>", { status: 502, headers: { "Content-Type": "text/html" } });
      }
      return response;
    },
  });
  const name = `retried-${Date.now()}.csv`;
  const ready = await upload(client, new File([new TextEncoder().encode("x,y\n3,4\n")], name, { type: "text/csv" }), { retries: 3 });
  assert.equal(ready.status, "ready");
  assert.equal(lost, 2, "the first answer was lost, the retry answered");
  const list = await client.GET("/uploaded-file", { params: { query: { namePrefix: name } } });
  assert.equal(list.response.status, 200, JSON.stringify(list.error));
  assert.equal(list.data!.items.filter((f) => f.originalName === name).length, 1, "one file");
});

test("an S3 error document at the upload target becomes its code and message", async () => {
  assert.ok(baseUrl && token);
  const { createServer } = await import("node:http");
  // A store that refuses every PUT the way S3 does: an XML error document.
  const store = createServer((req, res) => {
    req.resume();
    res.writeHead(403, { "Content-Type": "application/xml" });
    res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied by the bucket policy</Message></Error>');
  });
  await new Promise<void>((resolve) => store.listen(0, "127.0.0.1", resolve));
  const port = (store.address() as { port: number }).port;
  const client = createClient({ baseUrl, token: () => token });
  client.use({
    // The initiate's target points at that store.
    async onResponse({ request, response }) {
      if (!request.url.endsWith("/initiate") || response.status !== 201) return response;
      const body = await response.json();
      body.upload.url = `http://127.0.0.1:${port}/bucket/key`;
      return new Response(JSON.stringify(body), { status: 201, headers: { "Content-Type": "application/json" } });
    },
  });
  try {
    await assert.rejects(upload(client, new File([new TextEncoder().encode("a,b\n")], "s3.csv", { type: "text/csv" }), { retries: 0 }), (err: unknown) => {
      assert.ok(err instanceof UploadError);
      assert.equal(err.status, 403);
      assert.equal(err.code, "s3.AccessDenied");
      assert.equal(err.retryable, false);
      assert.match(err.message, /The file store refused the upload: Access Denied by the bucket policy/);
      return true;
    });
  } finally {
    store.close();
  }
});

test("list pages through the caller's files with a cursor", async () => {
  assert.ok(baseUrl && token);
  const client = createClient({ baseUrl, token: () => token });
  for (const name of ["list-a.csv", "list-b.csv", "list-c.csv"]) {
    await upload(client, new File([new TextEncoder().encode("a,b\n1,2\n")], name, { type: "text/csv" }));
  }
  const seen: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.GET("/uploaded-file", { params: { query: { limit: 2, namePrefix: "LIST-", sort: "name", cursor } } });
    assert.equal(page.response.status, 200, JSON.stringify(page.error));
    for (const f of page.data!.items) {
      assert.ok(!("key" in f), "no storage key in a list");
      seen.push(f.originalName);
    }
    cursor = page.data!.nextCursor;
  } while (cursor);
  assert.deepEqual(seen, ["list-a.csv", "list-b.csv", "list-c.csv"]);

  const usage = await client.GET("/uploaded-file/usage");
  assert.equal(usage.response.status, 200);
  assert.ok(usage.data!.owner.files >= 3, "the caller's usage counts the files");
  assert.equal(usage.data!.owner.filesLimit, 0, "no limit configured");

  const bad = await client.GET("/uploaded-file", { params: { query: { cursor: "forged" } } });
  assert.equal(bad.response.status, 400);
  assert.equal(bad.error!.code, "core.file.invalid-meta");
});

test("an image variant for a configured preset; an unknown preset is invalid-meta", async () => {
  assert.ok(baseUrl && token);
  const client = createClient({ baseUrl, token: () => token });
  const png = Uint8Array.from(atob("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="), (c) => c.charCodeAt(0));
  const ready = await upload(client, new File([png], "dot.png", { type: "image/png" }));
  const variant = await client.GET("/uploaded-file/{id}/variants/{preset}", { params: { path: { id: ready.id, preset: "thumb" } } });
  assert.equal(variant.response.status, 200, JSON.stringify(variant.error));
  assert.equal(variant.data!.contentType, "image/jpeg");
  assert.deepEqual([variant.data!.width, variant.data!.height], [32, 24]);
  assert.ok(!("key" in variant.data!), "no storage key");
  const bytes = await client.GET("/uploaded-file/{id}/variants/{preset}/download", { params: { path: { id: ready.id, preset: "thumb" } }, parseAs: "arrayBuffer" });
  assert.equal(bytes.response.status, 200);
  assert.equal((bytes.data as ArrayBuffer).byteLength, variant.data!.sizeBytes);

  const unknown = await client.GET("/uploaded-file/{id}/variants/{preset}", { params: { path: { id: ready.id, preset: "huge" } } });
  assert.equal(unknown.response.status, 400);
  assert.equal(unknown.error!.code, "core.file.invalid-meta");
});

test("resumableUpload() goes on from the server's offset; a refusal carries its code and rule", async () => {
  assert.ok(baseUrl && token);
  const client = createClient({ baseUrl, token: () => token });
  const rows = "id,name,amount\n".repeat(20_000); // 300 KB
  const file = new File([rows], "rows.csv", { type: "text/csv" });
  const chunkSize = 64 << 10;

  // The first try stops after two chunks (the page closed, say).
  const stop = new AbortController();
  let url = "";
  let chunks = 0;
  await assert.rejects(
    resumableUpload(client, file, {
      chunkSize,
      signal: stop.signal,
      onUploadUrl: (u) => (url = u),
      onChunk: () => {
        if (++chunks === 2) stop.abort();
      },
    }),
    { name: "AbortError" },
  );
  assert.ok(url.includes("/uploaded-file/tus/"), url);

  // The second sends only what the server does not have.
  let sent = 0;
  const ready = await resumableUpload(client, file, { chunkSize, uploadUrl: url, onChunk: (size) => (sent += size) });
  assert.equal(ready.status, "ready");
  assert.equal(ready.sizeBytes, file.size);
  assert.equal(sent, file.size - 2 * chunkSize, "the two chunks the server kept are not sent again");
  const bytes = await client.GET("/uploaded-file/{id}/download", { params: { path: { id: ready.id } }, parseAs: "text" });
  assert.equal(bytes.data, rows);

  await assert.rejects(resumableUpload(client, new File(["not a png"], "x.png", { type: "image/png" })), (err: unknown) => {
    assert.ok(err instanceof UploadError);
    assert.equal(err.code, "core.file.upload-verification-failed");
    assert.equal(err.rule, "content.other-type");
    return true;
  });
});

test("upload() waits out a claim its key's earlier attempt holds, without spending retries", async () => {
  const held = process.env.UPLOADEDFILE_HELD_KEY;
  assert.ok(baseUrl && token && held, "UPLOADEDFILE_HELD_KEY names a key whose initiate is held for a few seconds");
  const client = createClient({ baseUrl, token: () => token });
  const file = new File([new TextEncoder().encode("a,b\n1,2\n")], "held.csv", { type: "text/csv" });
  const ready = await upload(client, file, { idempotencyKey: held, retries: 0 });
  assert.equal(ready.status, "ready");
  assert.equal(ready.originalName, "held.csv");
});
