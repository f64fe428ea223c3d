// Builds the pages into the directory given (the embedded assets
// internal/adapter/webui/dist): the upload page (app.js, app.css, index.html,
// bundled with esbuild) and the API reference (docs/: swagger-ui-dist's
// bundle, our page and initializer). Deterministic, so `make verify` can
// rebuild into a temporary directory and compare.
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

// oneCopy resolves every @uppy/core import from this package, so the page
// and the plugin (whose own node_modules has a copy for its type checks)
// share one Uppy core, and @uploadedfile/client to the client's source, so
// the page and the plugin share one client built from what is in the tree.
const oneCopy = {
  name: "one-copy",
  setup(b) {
    b.onResolve({ filter: /^@uppy\/core(\/|$)/ }, (args) => {
      if (args.pluginData === "one-copy") return undefined;
      return b.resolve(args.path, { resolveDir: here, kind: args.kind, pluginData: "one-copy" });
    });
    b.onResolve({ filter: /^@uploadedfile\/client$/ }, () => ({ path: join(here, "../clients/typescript/src/index.ts") }));
  },
};
const out = resolve(process.argv[2] ?? join(here, "../internal/adapter/webui/dist"));
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: join(here, "src/main.ts") },
  bundle: true,
  minify: true,
  format: "iife",
  target: "es2022",
  outdir: out,
  legalComments: "none",
  logLevel: "warning",
  plugins: [oneCopy],
  nodePaths: [join(here, "node_modules")],
});
copyFileSync(join(here, "src/index.html"), join(out, "index.html"));

// The API reference: swagger-ui-dist's prebuilt bundle, our page and its
// initializer.
const docs = join(out, "docs");
mkdirSync(docs, { recursive: true });
for (const f of ["swagger-ui-bundle.js", "swagger-ui.css"]) {
  copyFileSync(join(here, "node_modules/swagger-ui-dist", f), join(docs, f));
}
copyFileSync(join(here, "src/docs.html"), join(docs, "index.html"));
copyFileSync(join(here, "src/docs.js"), join(docs, "docs.js"));
