// An admin's flow in a real browser against real egsd and agents: create a slice (and see an API
// error next to the field it names), create an API key, approve a pending GPR, move a GPR to the
// top of the queue, read the schedule view; accessibility (axe-core), 360 px and the dark theme.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { A100, H100, axe, check, openBrowser, shot, signIn, startEgs } from './harness.mjs';

test('admin: slice, key, approve, move to top, schedule view', async () => {
  const egs = await startEgs({ 'worker-1': [['h100-a', H100], ['h100-b', H100]], 'worker-2': [['a100-a', A100]] });
  const { browser, page } = await openBrowser();
  try {
    const a = egs.admin;
    await a('POST', '/slice-workspace', { workspaceName: 'research', clusters: ['worker-1', 'worker-2'], namespaces: ['research'] });
    await a('POST', '/slice-workspace', { workspaceName: 'prod', clusters: ['worker-1'], namespaces: ['prod'] });
    await a('PUT', '/slice-workspace/policy', { workspaceName: 'research', softLimits: { maxGPUPerGpr: 8 } });
    const gpr = (body) => a('POST', '/gpr', { numberOfGPUs: 8, numberOfGPUNodes: 1, exitDuration: '4h', priority: 101, gpuShape: H100.gpuModel, ...body });
    const run = await gpr({ gprName: 'pretrain', sliceName: 'prod', numberOfGPUNodes: 2, exitDuration: '3h' });
    const first = await gpr({ gprName: 'eval-1', sliceName: 'prod', exitDuration: '2h' });
    const second = await gpr({ gprName: 'finetune', sliceName: 'research' });
    const pending = await gpr({ gprName: 'big-sweep', sliceName: 'research', numberOfGPUNodes: 2 });
    assert.equal((await a('GET', '/gpr?gprId=' + pending.gprId)).status.provisioningStatus, 'Pending');

    await signIn(page, egs.url, egs.adminKey);
    await shot(page, 'admin-dashboard');

    // Slices: a bad name is refused by the API, and its message shows under that input.
    await page.getByRole('link', { name: 'Slices' }).click();
    await page.getByRole('button', { name: 'Create slice' }).click();
    await page.getByLabel('Slice name').fill('Bad_Name');
    await page.getByLabel('Clusters').fill('worker-2');
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    const err = page.locator('[data-field="workspaceName"]');
    await err.waitFor();
    assert.match(await err.innerText(), /workspaceName/);
    assert.equal(await page.getByLabel('Slice name').getAttribute('aria-invalid'), 'true');
    await page.getByLabel('Slice name').fill('vision');
    await page.getByLabel('Namespaces').fill('vision-train, vision-serve');
    await page.getByLabel('User name').fill('bob');
    await page.getByRole('button', { name: 'Create', exact: true }).click();
    await page.getByRole('heading', { name: 'vision' }).waitFor();
    const ws = await a('GET', '/slice-workspace?workspaceName=vision');
    assert.deepEqual(ws.namespaces.map((n) => n.namespace).sort(), ['vision-serve', 'vision-train']);
    assert.deepEqual(ws.clusters, ['worker-2']);

    // API keys: the new key is shown once and works.
    await page.getByRole('link', { name: 'API Keys' }).click();
    await page.getByLabel('Key name').fill('bob-key');
    await page.getByLabel('Slice (optional)').fill('vision');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = await page.locator('[data-secret]').innerText();
    const who = await fetch(egs.url + '/api/v1/auth', { method: 'POST', body: JSON.stringify({ apiKey: secret }) });
    assert.equal(who.status, 200, 'the key shown signs in');
    await page.getByRole('cell', { name: 'bob-key', exact: true }).waitFor();

    // Queue: approve the pending GPR, move finetune to the top.
    await page.getByRole('link', { name: 'GPR Queue' }).click();
    await page.getByRole('button', { name: 'Approve big-sweep' }).click();
    await page.getByRole('button', { name: 'Move big-sweep to the top' }).waitFor();
    assert.equal((await a('GET', '/gpr?gprId=' + pending.gprId)).status.provisioningStatus, 'Queued');
    await page.getByRole('button', { name: 'Move finetune to the top' }).click();
    await page.getByRole('button', { name: 'Move finetune to the top' }).and(page.locator(':disabled')).waitFor();
    const q = await a('GET', '/queue');
    assert.equal(q.items[0].gprId, second.gprId, 'finetune is first in the queue');
    await shot(page, 'admin-queue');

    // Schedule view: pretrain holds both H100 nodes now; the queue is planned on them after it.
    await page.getByRole('link', { name: 'Schedule' }).click();
    await page.getByLabel('Cluster', { exact: true }).selectOption('worker-1');
    await page.locator('[data-node="h100-a"] [data-gpr="' + second.gprId + '"]').waitFor();
    for (const node of ['h100-a', 'h100-b']) {
      const bars = page.locator(`[data-node="${node}"] .tl-bar`);
      assert.match(await bars.first().innerText(), /pretrain/, `${node} is held by pretrain now`);
    }
    const planned = await page.locator('.tl-bar.k-planned').allInnerTexts();
    for (const name of ['finetune', 'eval-1', 'big-sweep']) assert.ok(planned.some((t) => t.includes(name)), `${name} is planned`);
    assert.ok(run.gprId && first.gprId);
    await shot(page, 'admin-schedule');
    assert.deepEqual(await axe(page), [], 'schedule view: no serious or critical accessibility violation');

    // Evict the running GPR from its slice's GPU Requests, with a reason.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'GPU Requests' }).click();
    await page.waitForURL(/\/gprs\/[a-z]+$/); // the first slice (map order) is picked for us
    await page.getByLabel('Slice', { exact: true }).selectOption('prod');
    await page.locator('tr', { hasText: 'pretrain' }).getByRole('button', { name: 'Evict' }).click();
    await page.getByLabel('Reason').fill('maintenance');
    await page.locator('form[aria-label="Evict pretrain"] [type=submit]').click();
    await page.locator('tr', { hasText: 'pretrain' }).locator('.badge', { hasNotText: 'Provisioned' }).waitFor();
    assert.notEqual((await a('GET', '/gpr?gprId=' + run.gprId)).status.provisioningStatus, 'Provisioned');

    // Every admin screen renders without a console error, and passes axe.
    for (const [link, heading] of [['Inventory', 'Inventory'], ['Clusters', 'Clusters'], ['Policies', 'Policies'], ['Usage and cost', 'Usage and cost'],
      ['Queue insights', 'Queue insights'], ['Alerts', 'Alerts'], ['Events', 'Events'], ['GPUs', 'GPUs'], ['AI Workloads', 'AI Workloads']]) {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: link, exact: true }).click();
      await page.getByRole('heading', { name: heading, exact: true }).waitFor();
      assert.deepEqual(await axe(page), [], `${link}: no serious or critical accessibility violation`);
    }

    // Narrow and dark: the dashboard fits 360 px without sideways scrolling.
    await page.setViewportSize({ width: 360, height: 740 });
    await page.getByRole('button', { name: 'Switch to dark theme' }).click();
    assert.equal(await page.getByRole('link', { name: 'Dashboard' }).isVisible(), false, 'at 360 px the menu starts folded');
    await page.locator('nav summary').click();
    await page.getByRole('link', { name: 'Dashboard' }).click();
    await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `no sideways scroll at 360 px (${overflow} px over)`);
    assert.deepEqual(await axe(page), [], 'dark theme at 360 px: no serious or critical accessibility violation');
    await shot(page, 'admin-dashboard-360-dark');
    check(page, [/status of 422/]);
  } finally {
    await browser.close();
    await egs.stop();
  }
});
