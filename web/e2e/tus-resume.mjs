// Uploads UF_FILE to UF_API's resumable route with tus-js-client in Node,
// in chunks of UF_CHUNK bytes, keeping the upload's URL in tus-js-client's
// own FileUrlStorage at UF_STORE, and counting every body byte it sends.
// After each chunk it prints {"offset","sent"}. With UF_STOP_AT_THIRD set
// it prints "third" once a third of the file is on the server and then
// waits (the test kills it and the server there). Without it, a previous
// upload of the same file found in the storage is resumed; the last line
// is {"done":true,"sent","resumed","url"}.
import { readFileSync } from "node:fs";
import { DefaultHttpStack, FileUrlStorage, Upload } from "tus-js-client";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const api = env("UF_API"), token = env("UF_TOKEN"), path = env("UF_FILE"), store = env("UF_STORE");
const chunkSize = Number(env("UF_CHUNK"));
const stopAtThird = !!process.env.UF_STOP_AT_THIRD;
const data = readFileSync(path);

// countingStack sends through tus-js-client's own Node stack and adds up
// the body bytes of every request it sends.
let sent = 0;
const inner = new DefaultHttpStack();
const countingStack = {
  getName: () => "counting",
  createRequest(method, url) {
    const req = inner.createRequest(method, url);
    const send = req.send.bind(req);
    req.send = (body) => {
      if (body) sent += body.size ?? body.length ?? 0;
      return send(body);
    };
    return req;
  },
};

const upload = new Upload(data, {
  endpoint: `${api}/uploaded-file/tus/`,
  chunkSize,
  headers: { Authorization: `Bearer ${token}` },
  metadata: { filename: "big.csv", filetype: "text/csv" },
  urlStorage: new FileUrlStorage(store),
  fingerprint: async () => `uploadedfile-${path}-${data.length}`,
  storeFingerprintForResuming: true,
  removeFingerprintOnSuccess: true,
  retryDelays: [0, 250, 500, 1000, 2000, 3000, 5000],
  httpStack: countingStack,
  onChunkComplete(_chunk, offset, total) {
    console.log(JSON.stringify({ offset, sent }));
    if (stopAtThird && offset >= total / 3) {
      console.log("third");
      setInterval(() => {}, 1 << 30); // wait to be killed
      upload.abort(false);
    }
  },
});

const previous = await upload.findPreviousUploads();
if (previous.length > 0) upload.resumeFromPreviousUpload(previous[0]);
await new Promise((resolve, reject) => {
  upload.options.onSuccess = resolve;
  upload.options.onError = reject;
  upload.start();
});
console.log(JSON.stringify({ done: true, sent, resumed: previous.length > 0, url: upload.url }));
