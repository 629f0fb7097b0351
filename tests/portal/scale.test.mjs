// 10,000 GPRs in one slice: the GPU Requests table loads its first page from the server, renders
// only the rows in view and loads the next pages as it scrolls to its last row; the events list
// pages from the server too; a Viewer sees no write action; the token is renewed before it expires.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { H100, check, openBrowser, shot, signIn, startEgs, waitFor } from './harness.mjs';

// 600 in make test (creating GPRs queued behind one node costs ~10 ms each here); 10,000 by hand with
// EGS_PORTAL_ROWS=10000 (docs/portal.md has the figures).
const N = Number(process.env.EGS_PORTAL_ROWS || 600);
const PAGE = 200; // the GPU Requests screen's page (web/src/screens/GpuRequests.jsx)

test('many GPRs: virtualized table, server-paged events, Viewer, token renewal', async () => {
  const egs = await startEgs({ 'worker-1': [['gpu-a', H100]] }, { tokenTtl: 6 });
  const { browser, page } = await openBrowser();
  try {
    await egs.admin('POST', '/slice-workspace', { workspaceName: 'big', clusters: ['worker-1'], namespaces: ['big'] });
    let next = 0;
    const t0 = Date.now();
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < N) {
        const i = next++;
        await egs.admin('POST', '/gpr', { gprName: `job-${i}`, sliceName: 'big', numberOfGPUs: 1, numberOfGPUNodes: 1, exitDuration: '1h' });
      }
    }));
    console.log(`# created ${N} GPRs in ${Date.now() - t0} ms`);
    const key = await egs.key({ role: 'Viewer', workspaceName: 'big' });
    await signIn(page, egs.url, key);
    const token0 = await page.evaluate(() => JSON.parse(sessionStorage.getItem('egs.session')).token);
    await egs.advance('4s'); // the dev clock stands still: move it so that a renewed token differs

    // The dashboard (signing in lands there) still reads every GPR of its slices for its counts; let
    // it finish so that the figure below is the GPU Requests screen's own.
    await page.locator('#dash-gprs').waitFor({ timeout: 30000 });
    const t1 = Date.now();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'GPU Requests' }).click(); // no reload: the key stays in memory for renewal
    const table = page.getByRole('region', { name: 'GPU requests of big' });
    await table.locator('tbody tr[aria-rowindex="2"]').waitFor({ timeout: 20000 });
    const shown = Date.now() - t1;
    console.log(`# GPU Requests with ${N} rows: first rows in ${shown} ms`);
    const rowcount = async () => Number(await table.locator('table').getAttribute('aria-rowcount')) - 1;
    assert.equal(await rowcount(), Math.min(N, PAGE), 'the first page of GPRs only');
    const rendered = await table.locator('tbody tr:not(.spacer)').count();
    assert.ok(rendered < 100, `only the rows in view are in the DOM (${rendered})`);
    assert.equal(await page.getByRole('link', { name: 'Create GPU Request' }).count(), 0, 'a Viewer cannot create');
    assert.equal(await table.getByRole('button').count(), 0, 'a Viewer sees no action');
    // Each scroll to the end loads the next page, until row N is in view and no more is announced.
    const t2 = Date.now();
    let pages = 1;
    for (let have = await rowcount(); have < N; pages++) {
      await table.evaluate((el) => (el.scrollTop = el.scrollHeight));
      have = await waitFor(async () => {
        const n = await rowcount();
        return n > have && n;
      }, `the page after row ${have}`, 20000);
    }
    await table.evaluate((el) => (el.scrollTop = el.scrollHeight));
    await table.locator(`tbody tr[aria-rowindex="${N + 1}"]`).waitFor();
    assert.equal(await rowcount(), N, 'every GPR once');
    assert.equal(pages, Math.ceil(N / PAGE));
    await page.getByRole('status').filter({ hasText: `${N} GPU requests shown` }).waitFor();
    assert.equal(await page.getByText('more load as you scroll').count(), 0);
    console.log(`# scrolled to row ${N} (${pages} pages) in ${Date.now() - t2} ms`);
    assert.ok(shown < 15000, `the table of ${N} shows within 15 s even on a loaded shared machine (${shown} ms)`);
    await shot(page, 'scale-gprs');

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Events', exact: true }).click();
    const events = page.getByRole('region', { name: 'Events' });
    await events.locator('tbody tr[aria-rowindex="2"]').waitFor();
    const first = Number(await events.locator('table').getAttribute('aria-rowcount')) - 1;
    assert.equal(first, 200, 'the first page of events (of more than 600)');
    await events.evaluate((el) => (el.scrollTop = el.scrollHeight));
    await waitFor(async () => Number(await events.locator('table').getAttribute('aria-rowcount')) - 1 > 200, 'the next page of events');

    // The token (6 s here) was renewed before it expired, and calls after that still work without a
    // 401 (which would be a console error).
    const token1 = await waitFor(async () => {
      const t = await page.evaluate(() => JSON.parse(sessionStorage.getItem('egs.session')).token);
      return t !== token0 && t;
    }, 'a renewed token', 20000);
    assert.notEqual(token1, token0);
    await egs.advance('4s'); // the first token has expired now; the renewed one has not
    await page.getByRole('link', { name: 'GPR Queue' }).click();
    await page.getByRole('heading', { name: 'GPR Queue' }).waitFor();
    check(page);
  } finally {
    await browser.close();
    await egs.stop();
  }
});
