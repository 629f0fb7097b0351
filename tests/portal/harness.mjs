// The browser tests' harness: a real egsd (--dev-clock) on a free port with its own data directory,
// real egs-agents over mock GPU devices (the only test double: CI has no GPU), and Debian's chromium
// driven by playwright-core.  Every page fails its test on a console error or an uncaught
// exception; screenshots go to build/portal-artifacts/.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = process.env.EGS_BIN || join(ROOT, 'build', 'bin');
export const ARTIFACTS = join(ROOT, 'build', 'portal-artifacts');
const CHROMIUM = process.env.EGS_CHROMIUM || '/usr/bin/chromium';

export const H100 = { instanceType: 'p5.48xlarge', gpuModel: 'NVIDIA-H100-80GB-HBM3', gpuCount: 8, memoryMiB: 81920 };
export const A100 = { instanceType: 'p4d.24xlarge', gpuModel: 'NVIDIA-A100-SXM4-40GB', gpuCount: 8, memoryMiB: 40960 };

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
    s.on('error', fail);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(pred, what, timeout = 30000) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try {
      last = await pred();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

/** A JSON client of the API for one key or token; throws on a non-2xx with the envelope's error. */
export function client(url, token) {
  return async function call(method, path, body) {
    const res = await fetch(url + '/api/v1' + path, {
      method,
      headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const doc = await res.json();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(doc.error)}`);
    return doc.data;
  };
}

function devicesYaml(nodes) {
  const lines = ['nodes:'];
  for (const [name, shape] of nodes) {
    lines.push(`  - name: ${name}`);
    for (const k of ['instanceType', 'gpuModel', 'gpuCount', 'memoryMiB']) lines.push(`    ${k}: ${shape[k]}`);
  }
  return lines.join('\n') + '\n';
}

/**
 * Starts egsd and one agent per cluster: clusters = {name: [[node, shape], ...]}.  Resolves when
 * every node has registered.  Returns {url, admin (API client), adminKey, stop()}.
 */
export async function startEgs(clusters, { tokenTtl = 86400 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'egs-portal-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const procs = [];
  const log = (name) => join(dir, name + '.log');
  const run = (bin, args, name) => {
    const p = spawn(join(BIN, bin), args, { stdio: ['ignore', 'ignore', 'pipe'] });
    const chunks = [];
    p.stderr.on('data', (d) => chunks.push(d));
    p.on('exit', () => writeFileSync(log(name), Buffer.concat(chunks)));
    procs.push(p);
    return p;
  };
  const egsd = run('egsd', ['--listen', `127.0.0.1:${port}`, '--data', join(dir, 'data'), '--dev-clock', '--quiet', '--token-ttl', String(tokenTtl)], 'egsd');
  await waitFor(async () => egsd.exitCode === null && (await fetch(url + '/healthz')).ok, 'egsd to answer /healthz', 10000);
  const adminKey = readFileSync(join(dir, 'data', 'admin.key'), 'utf8').trim();
  const admin = client(url, adminKey);
  let total = 0;
  const agentTokens = {};
  for (const [name, nodes] of Object.entries(clusters)) {
    const reg = await admin('POST', '/clusters', { clusterName: name, apiServer: `https://${name}.example:6443` });
    agentTokens[name] = reg.agentToken;
    const wd = join(dir, name);
    mkdirSync(wd);
    writeFileSync(join(wd, 'token'), reg.agentToken + '\n', { mode: 0o600 });
    writeFileSync(join(wd, 'devices.yaml'), devicesYaml(nodes));
    run('egs-agent', ['--server', url, '--cluster', name, '--token-file', join(wd, 'token'), '--devices', join(wd, 'devices.yaml'), '--backend', 'local', '--state-dir', join(wd, 'state')], 'agent-' + name);
    total += nodes.length;
  }
  await waitFor(async () => (await admin('GET', '/inventory/list')).items.length === total, `${total} nodes to register`);
  return {
    url,
    admin,
    adminKey,
    dir,
    /** A new API key: {role, workspaceName?} -> the key text. */
    async key(spec) {
      const d = await admin('POST', '/api-key', { name: 'k' + Math.random().toString(36).slice(2, 8), ...spec });
      return d.apiKey;
    },
    /** Reports a ServiceAccount token of workspace on cluster, as that cluster's agent does once it minted
     *  one (docs/internals/agent-protocol.md, sliceAccess): the kubeconfig answers 409 until then. */
    async sliceToken(workspace, cluster) {
      const token = 'eyJhbGciOiJSUzI1NiJ9.' + Math.random().toString(36).slice(2).repeat(4) + '.c2ln';
      return client(url, agentTokens[cluster])('POST', '/agent/slice-access',
        { workspace, generation: 1, ok: true, token, expiresAt: '2099-01-01T00:00:00Z' });
    },
    async advance(duration) {
      return admin('POST', '/debug/clock', { advance: duration });
    },
    async stop() {
      for (const p of procs.reverse()) if (p.exitCode === null) p.kill('SIGTERM');
      await Promise.all(procs.map((p) => (p.exitCode === null ? new Promise((r) => p.on('exit', r)) : null)));
      if (!process.env.EGS_KEEP) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Starts chromium (Debian's, headless, a fresh profile) and one page at width x height.  page.problems
 * collects console errors and uncaught exceptions; call check(page) at the end of a test.
 */
export async function openBrowser({ width = 1280, height = 860, theme = 'light' } = {}) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const context = await browser.newContext({ viewport: { width, height }, colorScheme: theme });
  const page = await context.newPage();
  page.problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error') page.problems.push(`console error: ${m.text()} at ${JSON.stringify(m.location())}`);
  });
  page.on('pageerror', (e) => page.problems.push(`uncaught: ${e.message}`));
  page.setDefaultTimeout(30000); // generous: CI and shared machines run other work beside the browser
  return { browser, page };
}

/**
 * Throws when the page logged a console error or threw.  allow: patterns of errors the test caused
 * on purpose (chromium logs every 4xx answer as "Failed to load resource"), each expected at least once.
 */
export function check(page, allow = []) {
  const left = page.problems.filter((p) => !allow.some((re) => re.test(p)));
  if (left.length) throw new Error(left.join('\n'));
  for (const re of allow) if (!page.problems.some((p) => re.test(p))) throw new Error(`expected a console error matching ${re}`);
}

export async function shot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, name + '.png'), fullPage: false });
}

/** Signs in through the sign-in screen and waits for the dashboard. */
export async function signIn(page, url, key) {
  await page.goto(url + '/');
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
}

const AXE = readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

/** Runs axe-core on the page; returns the serious and critical violations. */
export async function axe(page) {
  await page.evaluate(AXE);
  const res = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return res.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
}
