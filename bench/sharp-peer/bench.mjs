// The sharp peer of `go run ./bench -only variants`: makes n variants of one
// image with `concurrency` in flight and prints {"n", "elapsedMs", "p50Ms"}.
// Usage: node bench.mjs <image> <jpeg|webp|webp-lossless|avif> <width> <height> <n> <concurrency> <quality>
import { readFileSync } from 'node:fs';
import sharp from 'sharp';

const [file, format, width, height, n, concurrency, quality] = process.argv.slice(2);
const input = readFileSync(file);
sharp.cache(false); // every variant is made from the bytes, as the service does

// The same work as the service's engine: the same box and fit, metadata
// dropped (sharp's default), the same format at the same quality and effort.
const q = Number(quality);
const encoders = {
  jpeg: (img) => img.jpeg({ quality: q, optimizeCoding: true }),
  webp: (img) => img.webp({ quality: q, effort: 4 }),
  'webp-lossless': (img) => img.webp({ lossless: true }),
  avif: (img) => img.avif({ quality: q, effort: 4, bitdepth: 8 }),
};
if (!encoders[format]) throw new Error(`unknown format ${format}`);

function one() {
  return encoders[format](sharp(input).rotate().resize(Number(width), Number(height), { fit: 'cover' })).toBuffer();
}

await one(); // warm: libvips loads its operations once
const total = Number(n);
const lat = [];
let next = 0;
const start = performance.now();
await Promise.all(Array.from({ length: Number(concurrency) }, async () => {
  while (next < total) {
    next++;
    const t = performance.now();
    await one();
    lat.push(performance.now() - t);
  }
}));
const elapsedMs = performance.now() - start;
lat.sort((a, b) => a - b);
process.stdout.write(JSON.stringify({ n: total, elapsedMs, p50Ms: lat[Math.floor(lat.length / 2)] }) + '\n');
