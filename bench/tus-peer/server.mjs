// The tus peer of the benchmarks: @tus/server with @tus/file-store, on
// loopback. Usage: node server.mjs <port> <directory>
import http from "node:http";
import { Server } from "@tus/server";
import { FileStore } from "@tus/file-store";

const [, , port, directory] = process.argv;
const tus = new Server({ path: "/files", datastore: new FileStore({ directory }) });
http
  .createServer((req, res) => tus.handle(req, res))
  .listen(Number(port), "127.0.0.1", () => console.log("listening"));
