// A consumer's app, bundled by the pack test from the installed tarballs
// of @uploadedfile/client and @uploadedfile/uppy: Uppy with the plugin,
// the API and the token from the page's query string.
import Uppy from "@uppy/core";
import UploadedFilePlugin from "@uploadedfile/uppy";
import { createClient } from "@uploadedfile/client";

const q = new URLSearchParams(location.search);
const client = createClient({ baseUrl: q.get("api"), token: () => q.get("token") });
window.uppy = new Uppy().use(UploadedFilePlugin, { client });
window.appReady = true;
