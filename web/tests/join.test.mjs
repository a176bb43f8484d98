// The join page in a real browser, against the real partyline-control and Janus: joining,
// hearing each other, being kicked, leaving. Run by scripts/test-browser (see README.md here).

import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { Person, QUIET_DB, SOUND_DB, report, since, startWithBrowser, trackedTests, waitFor } from './harness.mjs';

describe('join page', { timeout: 120_000 }, () => {
  let control;
  let browser;
  let stop;
  const people = [];

  // On a failure (or a timeout), the after hook prints the servers' logs.
  const { check, reportLogsIfFailed } = trackedTests();

  const person = async (name) => {
    const p = await Person.open(browser, control.origin, name);
    people.push(p);
    return p;
  };

  before(async () => {
    ({ control, browser, stop } = await startWithBrowser(['Stage Left', 'Stage Right', 'Backstage', 'Foyer']));
  });

  after(async () => {
    await reportLogsIfFailed(control);
    await Promise.all(people.map((p) => p.close()));
    await stop?.();
  });

  check('a crew member joins and the admin sees them connected within 3 s', async () => {
    const alice = await person('Alice');
    const t0 = performance.now();
    await alice.join('stage-left');
    await alice.waitState('connected');
    const pageMs = since(t0);
    const user = await waitFor(
      'Alice connected in /api/admin/users',
      async () => {
        const u = await control.user('Alice');
        return u?.state === 'connected' && u;
      },
      { timeout: 5000, interval: 25 },
    );
    const apiMs = since(t0);
    report(`join → page connected ${pageMs} ms, → /api/admin/users connected ${apiMs} ms`);
    assert.equal(user.groupId, 'stage-left');
    assert.ok(user.connectedAt, 'connectedAt is set');
    assert.equal(await alice.line('stage-left').locator('.line-name').textContent(), 'Stage Left');
    assert.equal(await alice.page.locator('[data-line]').count(), 1, 'one line: the group picked');
    assert.match(await alice.page.locator('#status-text').textContent(), /^Connected to Stage Left/);
    assert.ok(apiMs <= 3000, `admin saw Alice connected ${apiMs} ms after she clicked Join (limit 3000)`);
    assert.deepEqual(alice.errors, []);
    await alice.close();
  });

  check('two crew members in one group hear each other while talking, silence otherwise', async () => {
    const [anna, ben] = await Promise.all([person('Anna'), person('Ben')]);
    await Promise.all([anna.join('stage-right'), ben.join('stage-right')]);
    await Promise.all([anna.waitState('connected'), ben.waitState('connected')]);
    // Each sees the other on the line.
    await ben.line('stage-right').locator('.line-people', { hasText: 'With Anna' }).waitFor({ timeout: 5000 });
    await anna.line('stage-right').locator('.line-people', { hasText: 'With Ben' }).waitFor({ timeout: 5000 });
    // Ben's meter gets Janus's stream (the page shows it once the remote track arrives).
    await waitFor('Ben hearing the room (data-level-in)', async () => (await ben.lineLevel('stage-right')) !== null);

    // Nobody talks: Ben hears silence.
    await waitFor(
      `Ben's level-in below ${QUIET_DB} dBFS before anyone talks`,
      async () => (await ben.lineLevel('stage-right')) < QUIET_DB,
      { timeout: 5000 },
    );
    const before = await ben.levelRange({ line: 'stage-right' }, 1000);
    report(`nobody talking: Ben hears max ${before.max} dBFS`);
    assert.ok(before.max < QUIET_DB, `Ben hears ${before.max} dBFS while nobody talks`);

    // Anna holds the talk button: Ben hears her beep.
    const talk = anna.control('stage-right', 'talk');
    await talk.hover();
    await anna.page.mouse.down();
    const t0 = performance.now();
    try {
      assert.equal(await talk.getAttribute('aria-pressed'), 'true');
      assert.match(await talk.textContent(), /Talking/);
      await waitFor(
        `Ben's level-in above ${SOUND_DB} dBFS while Anna talks`,
        async () => (await ben.lineLevel('stage-right')) > SOUND_DB,
        { timeout: 5000, interval: 20 },
      );
      const riseMs = since(t0);
      const heard = await ben.levelRange({ line: 'stage-right' }, 1500);
      const sent = await anna.levelRange('levelOut', 300);
      const self = await anna.levelRange({ line: 'stage-right' }, 300);
      const loud = heard.samples.filter((db) => db > SOUND_DB).length / heard.samples.length;
      report(
        `Anna talking: Ben hears median ${heard.median} dBFS (${heard.min}..${heard.max}, ${Math.round(loud * 100)} % of 50 ms samples above ${SOUND_DB}; first above after ${riseMs} ms); Anna sends max ${sent.max} dBFS, hears herself max ${self.max} dBFS`,
      );
      // The fake microphone beeps (short periodic tones) and the meter falls 30 dB/s in
      // between; on a busy machine a late or lost beep dips it further for a moment. What
      // counts is that Ben hears Anna most of the time: the median.
      assert.ok(
        heard.median > SOUND_DB,
        `Ben's level while Anna talked: median ${heard.median} dBFS, samples ${heard.samples}`,
      );
      assert.ok(sent.max > SOUND_DB, `Anna's own meter shows ${sent.max} dBFS`);
      assert.ok(self.max < QUIET_DB, `Anna hears herself at ${self.max} dBFS (the room's mix leaves her out)`);
    } finally {
      await anna.page.mouse.up();
    }
    assert.equal(await talk.getAttribute('aria-pressed'), 'false');

    // Released: back to silence (the meter falls 30 dB/s).
    const t1 = performance.now();
    await waitFor(
      `Ben's level-in back below ${QUIET_DB} dBFS after Anna released`,
      async () => (await ben.lineLevel('stage-right')) < QUIET_DB,
      { timeout: 6000 },
    );
    const fallMs = since(t1);
    const afterRelease = await ben.levelRange({ line: 'stage-right' }, 1000);
    report(`Anna released: Ben below ${QUIET_DB} dBFS after ${fallMs} ms, then max ${afterRelease.max} dBFS`);
    assert.ok(afterRelease.max < QUIET_DB, `Ben hears ${afterRelease.max} dBFS after Anna released`);
    assert.deepEqual([...anna.errors, ...ben.errors], []);
    await Promise.all([anna.close(), ben.close()]);
  });

  check('the admin kicks a crew member: message shown, gone from Janus, token refused, logged', async () => {
    const [cleo, dan] = await Promise.all([person('Cleo'), person('Dan')]);
    await Promise.all([cleo.join('backstage'), dan.join('backstage')]);
    await Promise.all([cleo.waitState('connected'), dan.waitState('connected')]);
    const danUser = await waitFor('Dan connected', async () => {
      const u = await control.user('Dan');
      return u?.state === 'connected' && u;
    });
    const danToken = dan.token?.token;
    assert.ok(danToken, 'the page got a token from POST /api/token');
    assert.equal(dan.token.participantIdentity, danUser.identity);

    const probe = await control.janus.probe();
    try {
      const inRoom = async () =>
        (await probe.call({ request: 'listparticipants', room: 'backstage' })).participants.map((p) => p.id);
      assert.deepEqual((await inRoom()).sort(), [cleo.token.participantIdentity, danUser.identity].sort());

      const t0 = performance.now();
      const { status, body } = await control.admin('DELETE', `/users/${encodeURIComponent(danUser.identity)}`);
      assert.equal(status, 200, JSON.stringify(body));
      assert.equal(body.identity, danUser.identity);

      // What Dan sees.
      await dan.waitState('kicked', 10_000);
      const kickedMs = since(t0);
      assert.equal(await dan.page.locator('#status-text').textContent(), 'Disconnected by the admin');
      assert.match(await dan.page.locator('#call-message').textContent(), /An admin ended your connection/);
      assert.ok(await dan.page.locator('#rejoin').isVisible(), '"Join again" is offered');
      assert.equal(await dan.control('backstage', 'talk').isVisible(), false, 'no talk key after a kick');
      report(`kick → Dan's page shows "Disconnected by the admin" after ${kickedMs} ms`);

      // Janus: Dan is out of the room, Cleo stays.
      await waitFor(
        'Dan gone from listparticipants',
        async () => {
          const ids = await inRoom();
          return !ids.includes(danUser.identity) && ids;
        },
        { timeout: 3000 },
      );
      assert.deepEqual(await inRoom(), [cleo.token.participantIdentity]);
      await cleo
        .line('backstage')
        .locator('.line-people', { hasText: 'Nobody else on the line' })
        .waitFor({ timeout: 5000 });
      assert.equal(await cleo.state(), 'connected');

      // The admin's view.
      await waitFor('Dan gone from /api/admin/users', async () => !(await control.user('Dan')));
      assert.equal((await control.user('Cleo'))?.state, 'connected');

      // The same token cannot come back: Janus refuses even a new session.
      const rejoin = await control.janus.request('', { janus: 'create' }, danToken);
      report(`rejoin with Dan's token: ${JSON.stringify(rejoin.error ?? rejoin)}`);
      assert.equal(rejoin.janus, 'error');
      assert.equal(rejoin.error.code, 403);

      // The log says who and why.
      const logs = await control.admin('GET', '/logs?level=warn&limit=1000');
      assert.equal(logs.status, 200);
      const line = logs.body.logs.find(
        (e) => e.message === 'user disconnected' && e.meta.identity === danUser.identity,
      );
      assert.ok(line, `a "user disconnected" warn line naming Dan in ${JSON.stringify(logs.body.logs)}`);
      assert.equal(line.level, 'warn');
      assert.equal(line.meta.username, 'Dan');
      report(`log: ${JSON.stringify(line)}`);

      // Dan's page stayed kicked all along: it did not reconnect by itself.
      assert.equal(await dan.state(), 'kicked');
    } finally {
      await probe.close();
    }
    assert.deepEqual([...cleo.errors, ...dan.errors], []);
    await Promise.all([cleo.close(), dan.close()]);
  });

  check("a disconnect whose close overtakes Janus's kick event still ends the page as kicked, for good", async () => {
    // The admin's request reaches Janus and the proxy by different connections, so the proxy's
    // close may reach the page before Janus's kick event. Here it always does: once the request
    // is sent, nothing from the server reaches the page but the close.
    let holdBack = false;
    const prepare = (context) =>
      context.routeWebSocket(/\/janus$/, (ws) => {
        const server = ws.connectToServer();
        server.onMessage((message) => holdBack || ws.send(message));
      });
    const fay = await Person.open(browser, control.origin, 'Fay', { prepare });
    people.push(fay);
    await fay.join('foyer');
    await fay.waitState('connected');
    const fayUser = await waitFor('Fay connected', async () => {
      const u = await control.user('Fay');
      return u?.state === 'connected' && u;
    });

    holdBack = true;
    const t0 = performance.now();
    const { status, body } = await control.admin('DELETE', `/users/${encodeURIComponent(fayUser.identity)}`);
    assert.equal(status, 200, JSON.stringify(body));
    await fay.waitState('kicked', 5000);
    report(`disconnect known by the close alone → Fay's page kicked after ${since(t0)} ms`);
    assert.equal(await fay.page.locator('#status-text').textContent(), 'Disconnected by the admin');
    assert.ok(await fay.page.locator('#rejoin').isVisible(), '"Join again" is offered');
    // Kicked is where the page stops: it asked for no new token, so control knows no Fay.
    assert.equal(fay.token.participantIdentity, fayUser.identity, 'no token asked for after the kick');
    assert.equal(await control.user('Fay'), undefined);
    assert.deepEqual(fay.errors, []);
    await fay.close();
  });

  check('leaving with the Leave button removes the user within 3 s', async () => {
    const eve = await person('Eve');
    await eve.join('foyer');
    await eve.waitState('connected');
    await waitFor('Eve connected', async () => (await control.user('Eve'))?.state === 'connected');
    const t0 = performance.now();
    await eve.page.locator('#leave').click();
    await eve.waitState('idle', 3000);
    assert.ok(await eve.page.locator('#join-view').isVisible(), 'the join form is back');
    await waitFor('Eve gone from /api/admin/users', async () => !(await control.user('Eve')), {
      timeout: 3000,
      interval: 25,
    });
    report(`Leave → gone from /api/admin/users after ${since(t0)} ms`);
    assert.deepEqual(eve.errors, []);
    await eve.close();
  });

  check('closing the page removes the user within 3 s', async () => {
    const finn = await person('Finn');
    await finn.join('foyer');
    await finn.waitState('connected');
    await waitFor('Finn connected', async () => (await control.user('Finn'))?.state === 'connected');
    const t0 = performance.now();
    await finn.page.close();
    await waitFor('Finn gone from /api/admin/users', async () => !(await control.user('Finn')), {
      timeout: 3000,
      interval: 25,
    });
    report(`page closed → gone from /api/admin/users after ${since(t0)} ms`);
    await finn.close();
  });
});
