// The sharp peer of `go run ./bench -only variants`: makes n variants of one
// image with `concurrency` in flight and prints {"n", "elapsedMs", "p50Ms"}.
// Usage: node bench.mjs <image> <jpeg|webp> <width> <height> <n> <concurrency>
import { readFileSync } from 'node:fs';
import sharp from 'sharp';

const [file, format, width, height, n, concurrency] = process.argv.slice(2);
const input = readFileSync(file);
sharp.cache(false); // every variant is made from the bytes, as the service does

function one() {
  const img = sharp(input).rotate().resize(Number(width), Number(height), { fit: 'cover' });
  // WebP lossless, as the service writes it; JPEG at the service's quality.
  return (format === 'webp' ? img.webp({ lossless: true }) : img.jpeg({ quality: 82 })).toBuffer();
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
