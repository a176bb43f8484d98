// Browser tests of a panel's remote control and the admin's actions on lines: a control surface
// (here the test, with fetch) works a real panel in Chromium through its panel key
// (`/api/panel/{key}`), and another browser hears the result; the release of a talk whose surface
// went silent; unknown and revoked keys, which leave no trace in the logs; the admin muting one
// user on one line, a whole line, and forcing a talk off. Real Janus, real control, headless
// Chromium with steady-tone fake microphones; run by scripts/test-browser.

import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { Person, SOUND_DB, report, since, startWithTones, trackedTests, waitFor } from './harness.mjs';

const X = 'line-x';
const Y = 'line-y';
/** `crew.maxRemoteTalkSeconds` of this suite: short, so that the release is seen in a test. */
const MAX_REMOTE_TALK_S = 2;

describe('remote control of a panel, and the admin on lines', { timeout: 300_000 }, () => {
  let control;
  let browsers;
  let stop;
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  const open = async (mic, name, path) => {
    const p = await Person.joined(browsers[mic], control.origin, name, path);
    people.push(p);
    return p;
  };

  /** A control surface's request: `{ status, body }`. */
  const surface = async (method, path, body) => {
    const response = await fetch(`${control.origin}/api/panel/${path}`, {
      method,
      headers: body ? { 'Content-Type': 'application/json' } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  };
  const press = (key, group, action, body) => surface('POST', `${key}/lines/${group}/${action}`, body);

  /** Every log line control wrote: its stderr and its log ring. */
  const allLogs = async () => {
    const { body } = await control.admin('GET', '/logs?limit=1000&level=trace');
    return `${control.process.log()}\n${JSON.stringify(body)}`;
  };

  before(async () => {
    ({ control, browsers, stop } = await startWithTones(
      ['Line X', 'Line Y'],
      { a: 440, b: 660 },
      { config: ['crew:', `  maxRemoteTalkSeconds: ${MAX_REMOTE_TALK_S}`] },
    ));
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    await Promise.all(people.map((p) => p.close()));
    await stop?.();
  });

  check(
    'a surface talks through the panel key: another browser hears it, off stops it; listen, volume, toggle, events',
    async () => {
      const ann = await open('a', 'Ann', `/?groups=${X}`);
      const ben = await open('b', 'Ben', `/?groups=${X}`);
      await waitFor('Ben receiving X', async () => (await ben.lineLevel(X)) !== null);
      const key = ann.token.panelKey;
      assert.match(key, /^[0-9a-f]{32}$/);
      assert.equal(ann.token.panelUrl, `${control.origin}/api/panel/${key}`);
      // The panel shows its link, and its QR code carries it.
      assert.equal(await ann.page.locator('#remote-link').getAttribute('href'), ann.token.panelUrl);
      assert.equal(await ann.page.locator('#remote-qr').getAttribute('data-text'), ann.token.panelUrl);
      assert.equal(await ann.page.locator('#remote-qr svg').count(), 1);
      // This suite's control speaks plain HTTP: no certificate to pin (companion.test.mjs shows one).
      await ann.page.locator('#remote summary').click();
      assert.deepEqual(
        [await ann.page.locator('#remote-link').isVisible(), await ann.page.locator('#remote-certificate').isVisible()],
        [true, false],
      );

      const panel = await surface('GET', key);
      assert.equal(panel.status, 200, JSON.stringify(panel.body));
      assert.equal(panel.body.username, 'Ann');
      await waitFor('Ann online for her surface', async () => (await surface('GET', key)).body.online);
      assert.deepEqual(
        panel.body.lines.map((l) => [l.groupId, l.name, l.canTalk, l.talk, l.volume]),
        [[X, 'Line X', true, 'off', 80]],
      );
      await ben.assertSilent(X, 'nobody talks');

      // A surface following the panel.
      const events = await follow(`${control.origin}/api/panel/${key}/events`);
      try {
        const first = await events.next((e) => e.event === 'state');
        assert.equal(first.data.lines[0].talk, 'off');

        const t0 = performance.now();
        const on = await press(key, X, 'talk', { state: 'on' });
        const answerMs = since(t0);
        assert.equal(on.status, 200, JSON.stringify(on.body));
        assert.equal(on.body.talk, 'remote');
        assert.equal((await ann.lineState(X)).talk, 'remote', 'applied on the panel as if pressed');
        await ben.waitHearing(X);
        const heardMs = since(t0);
        await ben.waitLine(X, 'talkers', 'Ann');
        const level = await ben.heard(X);
        report(
          `remote talk on: answered (panel applied) after ${answerMs} ms, Ben hears Ann after ${heardMs} ms, median ${level.median} dBFS`,
        );
        assert.ok(level.median > SOUND_DB, `Ben hears ${level.median} dBFS`);
        const seen = await events.next((e) => e.event === 'state' && e.data.lines[0].talk === 'remote');
        assert.equal(seen.data.lines[0].groupId, X);

        const off = await press(key, X, 'talk', { state: 'off' });
        assert.equal(off.status, 200);
        assert.equal(off.body.talk, 'off');
        assert.equal((await ann.lineState(X)).talk, 'off');
        await ben.waitQuiet(X);
        await ben.assertSilent(X, 'after the remote off');
        await events.next((e) => e.event === 'state' && e.data.lines[0].talk === 'off');
      } finally {
        events.close();
      }

      // toggle latches (and outlives a silent surface), a second toggle lets go.
      assert.equal((await press(key, X, 'talk', { state: 'toggle' })).body.talk, 'latched');
      await ann.waitLine(X, 'talk', 'latched');
      await ann.page.waitForTimeout(MAX_REMOTE_TALK_S * 1000 + 1000);
      assert.equal((await ann.lineState(X)).talk, 'latched', 'a latch is not released by the silence');
      await ben.waitHearing(X);
      assert.equal((await press(key, X, 'talk', { state: 'on' })).body.talk, 'latched', 'on leaves a latch as it is');
      assert.equal((await press(key, X, 'talk', { state: 'toggle' })).body.talk, 'off');

      // Listen and volume, as if switched on the panel.
      const listenOff = await press(key, X, 'listen', { state: 'off' });
      assert.deepEqual([listenOff.status, listenOff.body.listen], [200, false]);
      assert.equal((await ann.lineState(X)).listen, 'off');
      assert.equal((await press(key, X, 'listen', { state: 'toggle' })).body.listen, true);
      assert.equal((await ann.lineState(X)).listen, 'on');
      const volume = await press(key, X, 'volume', { value: 35 });
      assert.deepEqual([volume.status, volume.body.volume], [200, 35]);
      assert.equal(await ann.control(X, 'volume').inputValue(), '35');
      assert.equal((await press(key, X, 'volume', { value: 101 })).status, 400);
      assert.equal((await press(key, X, 'talk', { state: 'loud' })).status, 400);
      assert.equal((await press(key, 'nowhere', 'talk', { state: 'on' })).status, 404);

      // Call: Ben's panel flashes the line.
      assert.equal((await press(key, X, 'call')).status, 200);
      await ben.waitLine(X, 'call', 'true');
      assert.deepEqual([...ann.errors, ...ben.errors], []);
      await Promise.all([ann.close(), ben.close()]);
    },
  );

  check(
    'a talk held on by a surface that goes silent is released after crew.maxRemoteTalkSeconds, and the panel shows it',
    async () => {
      const ann = await open('a', 'Ann', `/?groups=${X}`);
      const ben = await open('b', 'Ben', `/?groups=${X}`);
      await waitFor('Ben receiving X', async () => (await ben.lineLevel(X)) !== null);
      const key = ann.token.panelKey;
      await waitFor('Ann online for her surface', async () => (await surface('GET', key)).body.online);

      // A surface that keeps talking (any request with the key) keeps the talk on.
      assert.equal((await press(key, X, 'talk', { state: 'on' })).body.talk, 'remote');
      await ben.waitHearing(X);
      const end = performance.now() + MAX_REMOTE_TALK_S * 1000 * 2;
      let last;
      while (performance.now() < end) {
        assert.equal((await surface('GET', key)).body.lines[0].talk, 'remote');
        last = performance.now();
        await ann.page.waitForTimeout(400);
      }
      // Then it goes silent.
      const t0 = performance.now();
      await ann.waitLine(X, 'released', 'surface-silent', MAX_REMOTE_TALK_S * 1000 + 3000);
      const releasedMs = since(last);
      assert.equal((await ann.lineState(X)).talk, 'off');
      assert.match(await ann.line(X).locator('.line-released').textContent(), /remote control went silent/);
      await ben.waitQuiet(X);
      await ben.assertSilent(X, 'after the release');
      report(
        `silent surface: talk released ${releasedMs} ms after its last request (crew.maxRemoteTalkSeconds ${MAX_REMOTE_TALK_S}), Ben quiet ${since(t0)} ms after`,
      );
      assert.ok(releasedMs >= MAX_REMOTE_TALK_S * 1000 - 500, `released after ${releasedMs} ms`);
      assert.match(await allLogs(), /remote talk released: the control surface went silent/);
      // Pressing the key again clears the note.
      await ann.tapTalk(X);
      await ann.waitLine(X, 'talk', 'latched');
      assert.equal((await ann.lineState(X)).released, undefined);
      await Promise.all([ann.close(), ben.close()]);
    },
  );

  check('an unknown or revoked panel key is 404 and its secret is in no log line', async () => {
    const unknown = 'f00dfeedf00dfeedf00dfeedf00dfeed';
    for (const [method, path, body] of [
      ['GET', unknown],
      ['GET', `${unknown}/events`],
      ['POST', `${unknown}/lines/${X}/talk`, { state: 'on' }],
      ['POST', `${unknown}/lines/${X}/call`],
      ['POST', `${unknown}/bogus`, {}],
    ]) {
      const { status, body: answer } = await surface(method, path, body);
      assert.equal(status, 404, `${method} ${path}`);
      assert.ok(['not_found', 'route_not_found'].includes(answer.code), JSON.stringify(answer));
      assert.ok(!JSON.stringify(answer).includes(unknown), `the answer echoes the key: ${JSON.stringify(answer)}`);
    }
    const ann = await open('a', 'Ann', `/?groups=${X}`);
    const key = ann.token.panelKey;
    assert.equal((await surface('GET', key)).status, 200);
    await ann.page.locator('#leave').click();
    await waitFor('Ann gone', async () => !(await control.user('Ann')));
    for (const [method, path, body] of [
      ['GET', key],
      ['POST', `${key}/lines/${X}/talk`, { state: 'on' }],
    ]) {
      const { status, body: answer } = await surface(method, path, body);
      assert.deepEqual([status, answer.code], [404, 'not_found'], `revoked: ${method} ${JSON.stringify(answer)}`);
    }
    const logs = await allLogs();
    assert.match(logs, /refused request/, 'the refused writes were logged');
    assert.ok(!logs.includes(unknown), 'the unknown key is in a log line');
    assert.ok(!logs.includes(key), 'the revoked key is in a log line');
    await ann.close();
  });

  check(
    'the admin mutes one user on one line: the others stop hearing them there only; their talk is refused until released',
    async () => {
      const both = `/?groups=${X},${Y}`;
      const cat = await open('a', 'Cat', both); // 440 Hz
      const dan = await open('b', 'Dan', both); // 660 Hz, listening
      for (const line of [X, Y])
        await waitFor(`Dan receiving ${line}`, async () => (await dan.lineLevel(line)) !== null);
      await cat.tapTalk(X);
      await cat.tapTalk(Y);
      await Promise.all([dan.waitHearing(X), dan.waitHearing(Y)]);
      const identity = cat.token.participantIdentity;

      const t0 = performance.now();
      const muted = await control.admin('POST', `/users/${identity}/lines/${X}/mute`);
      assert.equal(muted.status, 200, JSON.stringify(muted.body));
      assert.deepEqual(
        muted.body.user.lines.map((l) => [l.groupId, l.mutedByAdmin]),
        [
          [X, true],
          [Y, false],
        ],
      );
      await dan.waitQuiet(X);
      const quietMs = since(t0);
      await dan.assertSilent(X, 'Cat muted by the admin on X');
      const onY = await dan.heard(Y);
      report(`admin mute: Dan's X quiet ${quietMs} ms after the request; Y still at median ${onY.median} dBFS`);
      assert.ok(onY.median > SOUND_DB, `Dan's Y at ${onY.median} dBFS: only X is muted`);
      const catX = await cat.lineState(X);
      assert.deepEqual([catX.admin, catX.talk], ['muted', 'off']);
      assert.match(await cat.line(X).locator('.line-admin').textContent(), /Muted by the admin/);
      assert.equal((await cat.lineState(Y)).talk, 'latched', 'Y goes on');

      // Her own attempts are refused: on the panel, and through her remote control.
      await cat.tapTalk(X);
      await cat.waitLine(X, 'talkRefused', 'muted');
      assert.equal((await cat.lineState(X)).talk, 'off');
      const remote = await press(cat.token.panelKey, X, 'talk', { state: 'on' });
      assert.deepEqual([remote.status, remote.body.code], [409, 'muted_by_admin']);
      await dan.assertSilent(X, 'Cat trying to talk while muted');
      assert.match(await allLogs(), /user muted on a line/);

      // Released: her key works again.
      const released = await control.admin('POST', `/users/${identity}/lines/${X}/unmute`);
      assert.equal(released.status, 200, JSON.stringify(released.body));
      await waitFor('Cat released', async () => (await cat.lineState(X)).admin === undefined);
      await cat.tapTalk(X);
      await cat.waitLine(X, 'talk', 'latched');
      await dan.waitHearing(X);
      assert.equal((await control.admin('POST', `/users/${identity}/lines/nowhere/mute`)).status, 404);
      assert.equal((await control.admin('POST', `/users/nobody-1/lines/${X}/mute`)).status, 404);

      // A whole line: nobody on Y is heard; every panel on it shows it.
      const lineMuted = await control.admin('POST', `/groups/${Y}/mute`);
      assert.equal(lineMuted.status, 200, JSON.stringify(lineMuted.body));
      await dan.waitQuiet(Y);
      await dan.assertSilent(Y, 'line Y muted');
      assert.ok((await dan.heard(X)).median > SOUND_DB, 'X goes on');
      await cat.waitLine(Y, 'admin', 'line-muted');
      await dan.waitLine(Y, 'admin', 'line-muted');
      assert.equal((await control.admin('GET', '/groups')).body.groups.find((g) => g.id === Y).muted, true);
      assert.deepEqual((await press(cat.token.panelKey, Y, 'talk', { state: 'on' })).body.code, 'line_muted');
      assert.equal((await control.admin('POST', `/groups/${Y}/unmute`)).status, 200);
      await waitFor(
        'Y released on both panels',
        async () => (await cat.lineState(Y)).admin === undefined && (await dan.lineState(Y)).admin === undefined,
      );
      await cat.tapTalk(Y);
      await cat.waitLine(Y, 'talk', 'latched');
      await dan.waitHearing(Y);

      // A talk forced off: muted in the room at once, the panel lets the key go and says why.
      const forced = await control.admin('POST', `/users/${identity}/lines/${Y}/talk-off`);
      assert.equal(forced.status, 200, JSON.stringify(forced.body));
      assert.equal(forced.body.panelApplied, true);
      assert.deepEqual(await cat.lineState(Y).then((s) => [s.talk, s.released]), ['off', 'admin']);
      await dan.waitQuiet(Y);
      assert.equal((await cat.lineState(X)).talk, 'latched', 'X goes on');
      assert.match(await allLogs(), /talk forced off/);
      assert.deepEqual([...cat.errors, ...dan.errors], []);
      await Promise.all([cat.close(), dan.close()]);
    },
  );
});

/** Follows a Server-Sent Events stream: `next(predicate)` resolves with the first event it matches. */
async function follow(url) {
  const abort = new AbortController();
  const response = await fetch(url, { headers: { Accept: 'text/event-stream' }, signal: abort.signal });
  assert.equal(response.status, 200);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  const next = async (predicate, timeout = 5000) => {
    const deadline = performance.now() + timeout;
    for (;;) {
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = { event: 'message', data: null };
        for (const field of block.split('\n')) {
          if (field.startsWith('event:')) event.event = field.slice(6).trim();
          else if (field.startsWith('data:')) event.data = JSON.parse(field.slice(5));
        }
        if (event.data !== null && predicate(event)) return event;
      }
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`no matching event from ${url} within ${timeout} ms`);
      const read = await Promise.race([reader.read(), new Promise((resolve) => setTimeout(() => resolve(null), left))]);
      if (read === null) continue;
      if (read.done) throw new Error(`${url} ended`);
      buffer += read.value;
    }
  };
  return { next, close: () => abort.abort() };
}
