// A user's flow through the portal in a real browser against real egsd and agents: sign in with an
// Owner key, ask the wait time, create a GPR, watch it go from Queued to Provisioned live (no
// reload) as the dev clock moves, release it early, sign out.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { H100, axe, check, openBrowser, shot, startEgs, waitFor } from './harness.mjs';

test('user: wait time, create, Queued to Provisioned live, release', async () => {
  const egs = await startEgs({ 'worker-1': [['gpu-a', H100]] });
  const { browser, page } = await openBrowser();
  try {
    await egs.admin('POST', '/slice-workspace', { workspaceName: 'team-a', clusters: ['worker-1'], namespaces: ['ns-a'] });
    await egs.admin('POST', '/slice-workspace', { workspaceName: 'team-b', clusters: ['worker-1'], namespaces: ['ns-b'] });
    // team-b holds the only node for 2 hours, so team-a's request waits.
    await egs.admin('POST', '/gpr', { gprName: 'blocker', sliceName: 'team-b', numberOfGPUs: 8, numberOfGPUNodes: 1, exitDuration: '2h', priority: 150 });
    const key = await egs.key({ role: 'Owner', workspaceName: 'team-a', userName: 'alice' });

    // Keyboard only: Tab to the key, type it, Enter.
    await page.goto(egs.url + '/');
    await page.locator('input[name="apiKey"]').waitFor(); // rendered (a loaded machine can be slower than goto)
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement.name), 'apiKey', 'the first Tab stop is the key');
    await page.keyboard.type(key);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    assert.equal(await page.evaluate(() => Object.keys(localStorage).filter((k) => k !== 'egs.theme').length), 0, 'nothing but the theme in localStorage');
    const stored = await page.evaluate(() => sessionStorage.getItem('egs.session'));
    assert.ok(stored && !stored.includes(key), 'the token is in sessionStorage, the key is not');
    assert.equal(await page.getByRole('link', { name: 'Inventory' }).count(), 0, 'an Owner sees no admin screens');
    await shot(page, 'user-dashboard');

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'GPU Requests' }).click();
    await page.getByRole('link', { name: 'Create GPU Request' }).click();
    await page.getByLabel('GPR name').fill('train-a');
    await page.getByLabel('Reserve for').fill('1h');
    await page.getByRole('button', { name: 'Get Wait Time' }).click();
    const row = page.getByRole('row', { name: /worker-1/ });
    await row.waitFor();
    assert.match(await row.innerText(), /2h0m0s/, 'the wait is the blocker\'s remaining 2 hours');
    await shot(page, 'user-waittime');
    assert.deepEqual(await axe(page), [], 'Create GPU Request: no serious or critical accessibility violation');
    await page.getByRole('button', { name: 'Request GPUs' }).click();

    const mine = page.locator('tr.gpr-queued', { hasText: 'train-a' });
    await mine.waitFor();
    const [gpr] = (await egs.admin('GET', '/gpr/list?sliceName=team-a')).items;
    assert.equal(gpr.gprName, 'train-a');
    assert.equal(gpr.clusterName, 'worker-1', 'the picked cluster was requested');

    // Edit the waiting GPR's priority; delete another waiting one.
    await mine.getByRole('button', { name: 'Edit' }).click();
    await page.getByLabel('Priority (1-1000)').fill('150');
    await page.getByRole('button', { name: 'Edit', exact: true }).and(page.locator('[type=submit]')).click();
    await waitFor(async () => (await egs.admin('GET', '/gpr?gprId=' + gpr.gprId)).priority === 150, 'the new priority');
    const spare = await egs.admin('POST', '/gpr', { gprName: 'spare', sliceName: 'team-a', numberOfGPUs: 1, numberOfGPUNodes: 1, exitDuration: '1h' });
    await page.locator('tr', { hasText: 'spare' }).getByRole('button', { name: 'Delete' }).click();
    await waitFor(async () => (await egs.admin('GET', '/gpr?gprId=' + spare.gprId)).status.provisioningStatus === 'Cancelled', 'the cancel');

    await egs.advance('2h'); // the blocker exits; the agent detaches and attaches: no reload from here on
    await page.locator('tr.gpr-provisioned', { hasText: 'train-a' }).waitFor({ timeout: 30000 });
    await shot(page, 'user-provisioned');

    // The GPU table of the slice (hottest first) and one GPU's time series; the events, searched;
    // the kubeconfig of the slice's cluster, downloaded.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'GPUs' }).click();
    const gpus = page.getByRole('region', { name: 'GPU table' });
    await gpus.locator('tbody tr[aria-rowindex="9"]').waitFor();
    const powers = await gpus.locator('tbody tr:not(.spacer) td:nth-child(3)').allInnerTexts();
    assert.equal(powers.length, 8, 'the 8 GPUs of the provisioned node');
    assert.deepEqual(powers.map(Number), powers.map(Number).sort((x, y) => y - x), 'hottest (most power) first');
    await gpus.getByRole('button', { name: /View dashboard of gpu-a GPU/ }).first().click();
    const chart = page.getByRole('img', { name: /Power \(W\), temperature/ });
    await chart.waitFor();
    assert.match(await chart.getAttribute('aria-label'), /power W: last \d/, 'the chart has the GPU\'s samples');
    await shot(page, 'user-gpus');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Events' }).click();
    const evs = page.getByRole('region', { name: 'Events' });
    await evs.locator('tbody tr[aria-rowindex="2"]').waitFor();
    await page.getByLabel('Search loaded events').fill('train-a');
    const reasons = await evs.locator('tbody tr:not(.spacer) td:nth-child(3)').allInnerTexts();
    assert.ok(reasons.includes('Queued') && reasons.includes('Provisioned'), `train-a's events: ${reasons}`);
    assert.ok((await evs.locator('tbody tr:not(.spacer)').allInnerTexts()).every((t) => t.includes('train-a')), 'only matching events');
    await egs.sliceToken('team-a', 'worker-1'); // what worker-1's agent reports once it minted the slice's token
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Slices' }).click();
    const [dl] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download the kubeconfig of team-a on worker-1' }).click()]);
    const yaml = await (await import('node:fs/promises')).readFile(await dl.path(), 'utf8');
    assert.match(yaml, /kind: Config/);
    assert.equal(dl.suggestedFilename(), 'team-a-worker-1.kubeconfig.yaml');
    await page.getByRole('link', { name: 'GPU Requests', exact: true }).click();

    // Extend by 30 minutes (nobody waits behind it), then release early.
    const exit0 = (await egs.admin('GET', '/gpr?gprId=' + gpr.gprId)).status.exitTimestamp;
    await page.locator('tr', { hasText: 'train-a' }).getByRole('button', { name: 'Extend' }).click();
    await page.getByLabel('Extend by').fill('30m');
    await page.locator('form[aria-label="Extend train-a"] [type=submit]').click();
    await waitFor(async () => (await egs.admin('GET', '/gpr?gprId=' + gpr.gprId)).status.exitTimestamp !== exit0, 'the extension');
    const exit1 = (await egs.admin('GET', '/gpr?gprId=' + gpr.gprId)).status.exitTimestamp;
    assert.equal(Date.parse(exit1) - Date.parse(exit0), 30 * 60e3);
    await page.getByRole('button', { name: 'Release train-a early' }).click();
    await waitFor(async () => {
      const s = (await egs.admin('GET', '/gpr?gprId=' + gpr.gprId)).status.provisioningStatus;
      return s !== 'Provisioned' && s;
    }, 'the release');
    await page.locator('tr', { hasText: 'train-a' }).locator('.badge', { hasNotText: 'Provisioned' }).waitFor();

    assert.deepEqual(await axe(page), [], 'no serious or critical accessibility violation');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('egs.session')), null, 'sign-out forgets the token');
    check(page);
  } finally {
    await browser.close();
    await egs.stop();
  }
});
