// The portal's first load over the wire: starts the built egsd (the embedded portal) on a free
// port, fetches / and every asset index.html names with Accept-Encoding: gzip, as a browser's
// first visit does, and sums the bytes received.  Fails above the 200 KB budget (issue 13).
// Usage: node bench/portal/size.mjs   (after `make all`; `make bench-portal` does both)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'node:http';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BUDGET = 200 * 1024;

const port = await new Promise((ok) => {
  const s = createServer();
  s.listen(0, '127.0.0.1', () => {
    const p = s.address().port;
    s.close(() => ok(p));
  });
});
const dir = mkdtempSync(join(tmpdir(), 'egs-portal-bench-'));
const egsd = spawn(join(ROOT, 'build', 'bin', 'egsd'), ['--listen', `127.0.0.1:${port}`, '--data', dir, '--quiet'], { stdio: 'ignore' });

// Raw bytes as they cross the wire (node's fetch would decompress and hide the transfer size).
function get(path) {
  return new Promise((ok, fail) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { 'Accept-Encoding': 'gzip, deflate, br' } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => ok({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', fail);
    req.end();
  });
}

try {
  let index;
  for (let i = 0; i < 100 && !index; i++) {
    try {
      index = await get('/');
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  if (!index || index.status !== 200) throw new Error('egsd did not serve /');
  const html = (index.headers['content-encoding'] === 'gzip' ? (await import('node:zlib')).gunzipSync(index.body) : index.body).toString();
  const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
  const rows = [['/', index.body.length, index.headers['content-encoding'] || 'identity']];
  for (const a of assets) {
    const r = await get(a);
    if (r.status !== 200) throw new Error(`${a}: ${r.status}`);
    rows.push([a, r.body.length, r.headers['content-encoding'] || 'identity']);
  }
  const total = rows.reduce((s, r) => s + r[1], 0);
  for (const [p, n, enc] of rows) console.log(`${String(n).padStart(8)} B  ${enc.padEnd(8)}  ${p}`);
  console.log(`${String(total).padStart(8)} B  first load (${(total / 1024).toFixed(1)} KiB of a ${BUDGET / 1024} KiB budget)`);
  if (total > BUDGET) {
    console.error('over budget');
    process.exitCode = 1;
  }
} finally {
  egsd.kill('SIGTERM');
  await new Promise((r) => egsd.on('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
