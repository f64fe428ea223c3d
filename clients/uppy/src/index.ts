// An Uppy uploader for uploadedfile: each file goes through the direct
// lifecycle of @uploadedfile/client's upload() -- initiate, the upload
// target (with progress), complete -- and a file refused at initiate or at
// complete is marked failed with the problem's rule as its message.
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

  private handleUpload = async (fileIDs: string[]): Promise<void> => {
    const files = fileIDs.map((id) => this.uppy.getFile(id)).filter((f): f is UppyFile<M, B> => f != null);
    this.uppy.emit("upload-start", files);
    const queue = [...files];
    const worker = async () => {
      for (let file = queue.shift(); file; file = queue.shift()) await this.uploadOne(file);
    };
    await Promise.all(Array.from({ length: Math.min(this.opts.limit ?? 3, files.length) }, worker));
  };

  private async uploadOne(file: UppyFile<M, B>): Promise<void> {
    const controller = new AbortController();
    const onRemoved = (removed: UppyFile<M, B> | undefined) => {
      if (removed?.id === file.id) controller.abort();
    };
    const onCancel = () => controller.abort();
    this.uppy.on("file-removed", onRemoved);
    this.uppy.on("cancel-all", onCancel);
    const started = Date.now();
    try {
      const done = await upload(this.opts.client, file.data as Blob, {
        name: file.name,
        contentType: file.type || undefined,
        temporary: this.opts.temporary,
        signal: controller.signal,
        onProgress: (sent, total) =>
          this.uppy.emit("upload-progress", this.uppy.getFile(file.id), { uploadStarted: started, bytesUploaded: sent, bytesTotal: total }),
      });
      this.uppy.emit("upload-success", this.uppy.getFile(file.id), { status: 200, body: { file: done } as B, uploadURL: done.url ?? undefined });
    } catch (err) {
      if (controller.signal.aborted) return;
      this.uppy.emit("upload-error", this.uppy.getFile(file.id), errorOf(err));
    } finally {
      this.uppy.off("file-removed", onRemoved);
      this.uppy.off("cancel-all", onCancel);
    }
  }
}

/** errorOf is the failure Uppy shows: the rule a UI can explain, the code beside it. */
export function errorOf(err: unknown): { name: string; message: string; details?: string } {
  if (err instanceof UploadError) {
    return { name: "UploadError", message: err.rule ?? err.code, details: err.rule ? `(${err.code})` : undefined };
  }
  return { name: "Error", message: err instanceof Error ? err.message : String(err) };
}
