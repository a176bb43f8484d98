// A pool of two Janus nodes behind one control, in real browsers (harness.mjs, `nodes`):
//
// - the admin UI: the Positions form offers the nodes' sites, and a position made there keeps
//   its site in the YAML on disk and shows it in its row;
// - two panels, each at a position of another site, so on another node: each hears the other on
//   the one line (the group's rooms on both nodes joined by trunk legs);
// - the node of one is killed (SIGKILL): its page, by itself, says the media server was lost,
//   joins again and is placed on the live node with the same panel key, and both hear each other
//   again; the Stats tab shows the lost node down.
//
// Run: cargo build -p partyline-control, then scripts/netns-run node --test web/tests/pool.test.mjs,
// or scripts/test-browser.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { HZ_TOLERANCE, Person, openAdmin, report, since, startWithTones, trackedTests, waitFor } from './harness.mjs';

const LINE = 'talk';
const ANN_HZ = 440;
const BEN_HZ = 660;

describe('a pool of two Janus nodes, in the browser', { timeout: 180_000 }, () => {
  let control;
  let browsers;
  let stop;
  let admin;
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  before(async () => {
    ({ control, browsers, stop } = await startWithTones(
      ['Talk'],
      { ann: ANN_HZ, ben: BEN_HZ },
      {
        nodes: [
          { name: 'a', site: 'stage' },
          { name: 'b', site: 'truck' },
        ],
      },
    ));
    admin = await openAdmin(browsers.ann, control.origin, { token: control.adminToken });
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    await Promise.all(people.map((p) => p.close()));
    await admin
      ?.context()
      .close()
      .catch(() => {});
    await stop?.();
  });

  /** The node `username` is placed on, as /api/admin/users says. */
  const nodeOf = async (username) => (await control.user(username))?.node;

  /** Waits until `listener` hears `hz` on the line. */
  const hears = (listener, hz, what) =>
    waitFor(
      what,
      async () => {
        const heard = await listener.dominantHz(LINE, 400);
        return heard && Math.abs(heard.hz - hz) <= HZ_TOLERANCE && heard;
      },
      { timeout: 10_000, interval: 0 },
    );

  check("the Positions form offers the nodes' sites; a position keeps the one chosen", async () => {
    await admin.locator('#tab-lines').click();
    const site = admin.locator('#position-site');
    await site.waitFor();
    const options = await site.locator('option').evaluateAll((list) => list.map((o) => [o.value, o.textContent]));
    assert.deepEqual(options, [
      ['', 'Any node'],
      ['stage', 'stage'],
      ['truck', 'truck'],
    ]);
    await admin.locator('#position-name').fill('Truck desk');
    await admin.locator(`#position-listen-${LINE}`).check();
    await admin.locator(`#position-talk-${LINE}`).check();
    await site.selectOption('truck');
    await admin.locator('#position-submit').click();
    const row = admin.locator('#positions-rows tr', { hasText: 'Truck desk' });
    await row.locator('.position-site', { hasText: 'site: truck' }).waitFor({ timeout: 5000 });
    const yaml = await readFile(join(control.dir, 'partyline.yaml'), 'utf8');
    assert.match(yaml, /- name: Truck desk\n(?: {2}.*\n)*? {2}site: truck\n/, yaml);
    const { status, body } = await control.admin('POST', '/positions', {
      name: 'Stage desk',
      listen: [LINE],
      talk: [LINE],
      site: 'stage',
    });
    assert.equal(status, 201, JSON.stringify(body));
  });

  check(
    'a panel on each node hears the other on the one line; its node lost, a panel moves by itself',
    async () => {
      const ann = await Person.joined(browsers.ann, control.origin, 'Ann', '/?position=stage-desk');
      people.push(ann);
      const ben = await Person.joined(browsers.ben, control.origin, 'Ben', '/?position=truck-desk');
      people.push(ben);
      assert.deepEqual([await nodeOf('Ann'), await nodeOf('Ben')], ['a', 'b'], "each at its position's site");
      for (const person of [ann, ben]) {
        await person.tapTalk(LINE);
        await person.waitLine(LINE, 'talk', 'latched');
      }
      await hears(ann, BEN_HZ, 'Ann (on a) hearing Ben (on b)');
      await hears(ben, ANN_HZ, 'Ben (on b) hearing Ann (on a)');
      const { token, panelKey: key } = ben.token;

      const killed = performance.now();
      await control.nodes[1].kill();
      await waitFor("Ben's page joining again by itself", async () => ben.token.token !== token, {
        timeout: 10_000,
        interval: 20,
      });
      const said = await ben.page.locator('#call-message').textContent();
      assert.match(said, /media server( b)? was lost/, 'the page says why it rejoins');
      await ben.waitState('connected', 15_000);
      const connectedMs = since(killed);
      assert.equal(await nodeOf('Ben'), 'a', 'moved to the live node');
      assert.equal(ben.token.panelKey, key, 'the same panel key');
      assert.equal((await ben.lineState(LINE)).talk, 'latched', 'its talk key as it was');
      await hears(ben, ANN_HZ, 'Ben hearing Ann again, both on a');
      const backMs = since(killed);
      await hears(ann, BEN_HZ, 'Ann hearing Ben again');
      report(
        `pool: node b killed: Ben's page connected again after ${connectedMs} ms, hearing Ann after ${backMs} ms (it said: ${said})`,
      );
      assert.equal(ann.errors.length + ben.errors.length, 0, `page errors: ${[...ann.errors, ...ben.errors]}`);

      await admin.locator('#tab-system').click();
      const lost = admin.locator('#nodes-rows tr', { hasText: 'b (truck)' }).locator('.n-state');
      await waitFor('node b down in the Stats tab', async () => (await lost.textContent()) === 'down', {
        timeout: 10_000,
      });
    },
    { timeout: 90_000 },
  );
});
