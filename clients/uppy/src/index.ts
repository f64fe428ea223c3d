// An Uppy uploader for uploadedfile: each file goes through the direct
// lifecycle of @uploadedfile/client's upload() -- initiate, the upload
// target (with progress), complete. A failed file shows the client's
// readable message (what went wrong, the rule, the host it could not
// reach). Retry is offered only for failures retrying can mend, and it
// continues the same upload: the same Idempotency-Key, so the same pending
// file and, while valid, the same upload target -- never a second file.
import { BasePlugin } from "@uppy/core";
import type { Body, Meta, PluginOpts, Uppy, UppyFile } from "@uppy/core";
import { upload, UploadError } from "@uploadedfile/client";
import type { Client, UploadedFile } from "@uploadedfile/client";

/** Options of the plugin. */
export interface UploadedFileOptions extends PluginOpts {
  /** The API client (createClient from @uploadedfile/client). */
  client: Client;
  /** Store temporary files (private, expiring 24 hours after completion). */
  temporary?: boolean;
  /** How many files upload at once; default 3. */
  limit?: number;
  /**
   * Files of this many bytes or more are left to a resumable uploader
   * installed after this plugin (@uppy/tus on the service's tus route),
   * which uploads every file this one did not complete. Default: none
   * (every file goes through the direct upload).
   */
  resumableFrom?: number;
}

/** What a successful upload leaves in file.response.body. */
export interface UploadedFileBody extends Body {
  file: UploadedFile;
}

/**
 * UploadedFilePlugin is the uploader: uppy.use(UploadedFilePlugin, { client }).
 * Removing a file or cancelling all aborts its upload (and the pending file).
 */
export default class UploadedFilePlugin<M extends Meta, B extends UploadedFileBody> extends BasePlugin<UploadedFileOptions, M, B> {
  constructor(uppy: Uppy<M, B>, opts: UploadedFileOptions) {
    super(uppy, opts);
    this.id = opts.id ?? "UploadedFile";
    this.type = "uploader";
  }

  install(): void {
    this.uppy.addUploader(this.handleUpload);
  }

  uninstall(): void {
    this.uppy.removeUploader(this.handleUpload);
  }

  /** The Idempotency-Key of each file's upload, kept for a Retry. */
  private keys = new Map<string, string>();
  /** Files that failed for good: a Retry answers the same failure. */
  private final = new Map<string, ReturnType<typeof errorOf>>();

  private handleUpload = async (fileIDs: string[]): Promise<void> => {
    const from = this.opts.resumableFrom;
    const files = fileIDs
      .map((id) => this.uppy.getFile(id))
      .filter((f): f is UppyFile<M, B> => f != null)
      .filter((f) => from == null || (f.size ?? 0) < from);
    if (files.length === 0) return;
    this.uppy.emit("upload-start", files);
    const queue = [...files];
    const worker = async () => {
      for (let file = queue.shift(); file; file = queue.shift()) await this.uploadOne(file);
    };
    await Promise.all(Array.from({ length: Math.min(this.opts.limit ?? 3, files.length) }, worker));
  };

  private async uploadOne(file: UppyFile<M, B>): Promise<void> {
    const failed = this.final.get(file.id);
    if (failed) {
      // Uppy's Retry all includes it: the same answer, no request.
      this.fail(file, failed, false);
      return;
    }
    const controller = new AbortController();
    const onRemoved = (removed: UppyFile<M, B> | undefined) => {
      if (removed?.id === file.id) controller.abort();
    };
    const onCancel = () => controller.abort();
    this.uppy.on("file-removed", onRemoved);
    this.uppy.on("cancel-all", onCancel);
    const started = Date.now();
    // Started at 0 %: the Dashboard shows progress (and, should it fail
    // before the first byte, its Retry) from here.
    this.uppy.emit("upload-progress", this.uppy.getFile(file.id), { uploadStarted: started, bytesUploaded: 0, bytesTotal: file.size ?? null });
    let key = this.keys.get(file.id);
    if (!key) {
      key = crypto.randomUUID();
      this.keys.set(file.id, key);
    }
    try {
      const done = await upload(this.opts.client, file.data as Blob, {
        name: file.name,
        contentType: file.type || undefined,
        temporary: this.opts.temporary,
        signal: controller.signal,
        idempotencyKey: key,
        onProgress: (sent, total) =>
          this.uppy.emit("upload-progress", this.uppy.getFile(file.id), { uploadStarted: started, bytesUploaded: sent, bytesTotal: total }),
      });
      this.keys.delete(file.id);
      this.uppy.emit("upload-success", this.uppy.getFile(file.id), { status: 200, body: { file: done } as B, uploadURL: done.url ?? undefined });
    } catch (err) {
      if (controller.signal.aborted) {
        this.keys.delete(file.id);
        return;
      }
      const retryable = err instanceof UploadError && err.retryable;
      if (!retryable || (err instanceof UploadError && err.code === "core.file.upload-expired")) {
        this.keys.delete(file.id); // a new upload next time: this one is over
      }
      const e = errorOf(err);
      if (!retryable) this.final.set(file.id, e);
      this.fail(file, e, retryable);
    } finally {
      this.uppy.off("file-removed", onRemoved);
      this.uppy.off("cancel-all", onCancel);
    }
  }

  /** fail marks file failed with e; a failure retrying cannot mend shows no Retry button. */
  private fail(file: UppyFile<M, B>, e: ReturnType<typeof errorOf>, retryable: boolean): void {
    this.uppy.emit("upload-error", this.uppy.getFile(file.id), e);
    if (!retryable) {
      const current = this.uppy.getFile(file.id);
      // The Dashboard offers Retry on a failed file whose upload started.
      if (current) this.uppy.setFileState(file.id, { progress: { ...current.progress, uploadStarted: null, bytesUploaded: false } });
    }
  }
}

/**
 * errorOf is the failure Uppy shows: the client's readable message (what
 * went wrong, the rule, the code), the status beside it.
 */
export function errorOf(err: unknown): { name: string; message: string; details?: string } {
  if (err instanceof UploadError) {
    return { name: "UploadError", message: err.message, details: err.status ? `(HTTP ${err.status})` : undefined };
  }
  return { name: "Error", message: err instanceof Error ? err.message : String(err) };
}
