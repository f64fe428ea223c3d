// A consumer's app, bundled by the pack test from the installed tarballs
// of @uploadedfile/client and @uploadedfile/uppy: Uppy with the plugin,
// the API and the token from the page's query string. Strict TypeScript,
// checked with the app's tsconfig.json before it is bundled.
import Uppy from "@uppy/core";
import type { Meta } from "@uppy/core";
import UploadedFilePlugin from "@uploadedfile/uppy";
import type { UploadedFileBody } from "@uploadedfile/uppy";
import { createClient } from "@uploadedfile/client";

declare global {
  interface Window {
    uppy: Uppy<Meta, UploadedFileBody>;
    appReady: boolean;
  }
}

const q = new URLSearchParams(location.search);
const client = createClient({ baseUrl: q.get("api") ?? "", token: () => q.get("token") ?? "" });
window.uppy = new Uppy<Meta, UploadedFileBody>().use(UploadedFilePlugin, { client });
window.appReady = true;
