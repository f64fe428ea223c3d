// resumableUpload: a file sent in chunks over the service's resumable
// route (the tus protocol, with tus-js-client), which goes on from the
// server's offset after a dropped connection, or, given the upload's URL,
// after the page or process itself stopped.
import { Upload } from "tus-js-client";
import type { Client, Problem, UploadedFile, UploadOptions } from "./index.js";
import { UploadError } from "./index.js";

/** Options of resumableUpload: those of upload, and the chunks'. */
export interface ResumableOptions extends Omit<UploadOptions, "idempotencyKey"> {
  /** The most one request carries; default 5 MiB (what a dropped connection costs at most). */
  chunkSize?: number;
  /** The upload's URL from an earlier try (onUploadUrl gave it): the upload goes on from the server's offset. */
  uploadUrl?: string;
  /** Called with the upload's URL once it exists: keep it to resume after the page or process stopped. */
  onUploadUrl?: (url: string) => void;
  /** Called after each chunk the server kept: its size, and the bytes the server has in all. */
  onChunk?: (size: number, offset: number) => void;
}

/** The default chunk size of resumableUpload. */
export const defaultChunkSize = 5 << 20;

/**
 * resumableUpload sends file in chunks (each with its SHA-256 checked by
 * the server) and resolves with the ready file. After a failure that can
 * pass -- a dropped connection, a 5xx, a restart of the server -- it asks
 * the server for its offset and sends from there, so a lost connection
 * costs at most one chunk; a refusal (type, size, quota, content) rejects
 * with an UploadError. With uploadUrl it continues an earlier upload.
 */
export async function resumableUpload(client: Client, file: Blob, options: ResumableOptions = {}): Promise<UploadedFile> {
  const name = options.name ?? (file as File).name ?? "file";
  const contentType = options.contentType || file.type || "application/octet-stream";
  const metadata: Record<string, string> = { filename: name, filetype: contentType };
  if (options.temporary) metadata.temporary = "true";
  if (options.disposition) metadata.disposition = options.disposition;
  // In Node, tus-js-client reads Buffers and streams, not Blobs.
  const nodeBuffer = (globalThis as { Buffer?: { from(b: ArrayBuffer): Uint8Array } }).Buffer;
  const source = typeof window === "undefined" && nodeBuffer ? (nodeBuffer.from(await file.arrayBuffer()) as unknown as Blob) : file;
  const retries = options.retries ?? 4;
  const url = await new Promise<string>((resolve, reject) => {
    const upload = new Upload(source, {
      endpoint: `${client.baseUrl}/uploaded-file/tus/`,
      uploadUrl: options.uploadUrl,
      chunkSize: options.chunkSize ?? defaultChunkSize,
      metadata,
      storeFingerprintForResuming: false,
      retryDelays: [0, 1000, 3000, 5000, 10000, 20000].slice(0, retries + 2),
      async onBeforeRequest(req) {
        req.setHeader("Authorization", `Bearer ${await client.token()}`);
      },
      onUploadUrlAvailable() {
        if (upload.url) options.onUploadUrl?.(upload.url);
      },
      onProgress: (sent, total) => options.onProgress?.(sent, total),
      onChunkComplete: (size, offset) => options.onChunk?.(size, offset),
      onSuccess: () => resolve(upload.url!),
      onError: (err) => reject(uploadErrorOf(err)),
    });
    options.signal?.addEventListener("abort", () => {
      void upload.abort(false);
      reject(new DOMException("The upload was aborted.", "AbortError"));
    });
    upload.start();
  });
  const id = url.slice(url.lastIndexOf("/") + 1);
  const got = await client.GET("/uploaded-file/{id}", { params: { path: { id } } });
  if (!got.data) throw new UploadError(got.response.status, got.error as Partial<Problem>);
  return got.data;
}

/** uploadErrorOf is tus-js-client's failure as an UploadError, with the problem the server answered. */
function uploadErrorOf(err: Error): Error {
  const res = (err as { originalResponse?: { getStatus(): number; getBody(): string } | null }).originalResponse;
  if (!res) return err;
  let problem: Partial<Problem> | undefined;
  try {
    problem = JSON.parse(res.getBody()) as Partial<Problem>;
  } catch {
    problem = undefined;
  }
  return new UploadError(res.getStatus(), problem);
}
