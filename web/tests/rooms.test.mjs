// Browser tests of the crew panel on partyline's own rooms (`media.engine: bridged`): one peer
// connection per panel, its offer through control, no Janus signalling; who is on the line and
// who talks, from control; a held key is heard by the others and not by the talker, a released
// one is silence; a listen-only line hears and its panel has no key; a person key's direct line
// is one more line on the same peer connection; the admin's disconnect ends the panel as kicked.
// Real control, bridged hosting the rooms (Janus runs beside them for the card), headless
// Chromium with a tone per person; run by scripts/test-browser.

import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { HZ_TOLERANCE, Person, report, since, startWithTones, trackedTests, waitFor } from './harness.mjs';

const ANN_HZ = 440;

describe('crew panel on partyline’s own rooms', { timeout: 180_000 }, () => {
  let control;
  let browsers;
  let stop;
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  /** `name` joined on `path`'s lines, connected; its WebSocket URLs are kept in `sockets`. */
  const joined = async (name, browser, path) => {
    const person = await Person.open(browser, control.origin, name, { path });
    people.push(person);
    person.sockets = [];
    person.page.on('websocket', (ws) => person.sockets.push(ws.url()));
    await person.joinPreset();
    await person.waitState('connected');
    return person;
  };

  const userState = async (identity) => {
    const { body } = await control.admin('GET', '/users?state=all');
    return body.users.find((u) => u.identity === identity)?.state;
  };

  before(async () => {
    ({ control, browsers, stop } = await startWithTones(['Stage'], { ann: ANN_HZ, ben: 660 }, { rooms: true }));
  });

  after(async () => {
    await reportLogsIfFailed(control);
    await Promise.all(people.map((p) => p.close()));
    await stop?.();
  });

  check(
    'a held key is heard by the others and shown as their talker, not heard by the talker; released, silence',
    async () => {
      const ann = await joined('Ann', browsers.ann, '/?groups=stage');
      const ben = await joined('Ben', browsers.ben, '/?groups=stage');
      for (const p of [ann, ben]) {
        assert.equal(p.token.engine, 'bridged', JSON.stringify(p.token));
        assert.deepEqual(p.sockets, [], `${p.name} opened no Janus signalling`);
        // The panel sees its media up a moment before bridged's signal reaches control.
        const said = async () => (await userState(p.token.participantIdentity)) === 'connected';
        await waitFor(`the rooms telling control ${p.name} is connected`, said);
      }
      await ben.assertSilent('stage', 'before any key');
      // Who is on the line, from control's session stream.
      await ann.line('stage').locator('.line-people', { hasText: 'Ben' }).waitFor({ timeout: 5000 });
      await ben.line('stage').locator('.line-people', { hasText: 'Ann' }).waitFor({ timeout: 5000 });

      const pressed = performance.now();
      await ann.pressTalk('stage');
      await ben.waitHearing('stage');
      report(`rooms: Ann's key down → Ben hears her: ${since(pressed)} ms`);
      const heard = await ben.dominantHz('stage');
      assert.ok(Math.abs(heard.hz - ANN_HZ) <= HZ_TOLERANCE, `Ben hears ${JSON.stringify(heard)}`);
      await ann.assertSilent('stage', 'Ann talking (no self-hearing)', 1000);
      await ben.waitLine('stage', 'talkers', 'Ann');
      assert.equal(await ben.line('stage').getAttribute('data-active'), 'true', "Ben's line shows a talker");

      await ann.page.mouse.up();
      await ann.waitLine('stage', 'talk', 'off');
      await ben.waitQuiet('stage');
      await ben.waitLine('stage', 'active', 'false');
      await ben.assertSilent('stage', 'after Ann let go', 1000);
    },
  );

  check('a listen-only line hears the room (a latched key) and has no talk key', async () => {
    const cat = await joined('Cat', browsers.ben, '/?groups=stage&talk=');
    assert.equal(await cat.line('stage').getAttribute('data-talk'), null, 'no talk key');
    const ann = people.find((p) => p.name === 'Ann');
    // A tap latches Ann's key, a second lets it go.
    await ann.tapTalk('stage');
    await ann.waitLine('stage', 'talk', 'latched');
    await cat.waitHearing('stage');
    await ann.tapTalk('stage');
    await ann.waitLine('stage', 'talk', 'off');
    await cat.waitQuiet('stage');
  });

  check('a person key opens a direct line on the rooms: one more line on the same peer connection, heard', async () => {
    for (const position of [
      { name: 'Camera 1', listen: ['stage'], talk: ['stage'] },
      { name: 'Director', listen: ['stage'], talk: ['stage'], talkTo: ['camera-1'] },
    ]) {
      const { status, body } = await control.admin('POST', '/positions', position);
      assert.equal(status, 201, JSON.stringify(body));
    }
    const dan = await joined('Dan', browsers.ann, '/?position=director');
    const eve = await joined('Eve', browsers.ben, '/?position=camera-1');
    const personKey = dan.page.locator('button.person[data-person="camera-1"]');
    await waitFor("Dan's key to Camera 1 online", async () => (await personKey.getAttribute('data-online')) === 'true');
    await personKey.hover();
    await dan.page.mouse.down();
    try {
      const direct = dan.page.locator('[data-line][data-direct="Eve"]');
      await direct.waitFor();
      const room = await direct.getAttribute('data-line');
      await eve.page.locator('[data-line][data-direct="Dan"]').waitFor();
      // Eve never hears herself on a line (mix-minus): what she hears there is Dan.
      await eve.waitHearing(room, 10_000);
      // Joined through the rooms: each panel offered its peer connection again with the line.
      for (const p of [dan, eve]) {
        const joined = async () => {
          const { body } = await control.admin('GET', '/users');
          const user = body.users.find((u) => u.identity === p.token.participantIdentity);
          return user?.lines.some((l) => l.groupId === room && l.joined);
        };
        await waitFor(`${p.name} joined on the direct line in the rooms`, joined);
      }
      for (const p of [dan, eve]) assert.deepEqual(p.sockets, [], `${p.name} opened no Janus signalling`);
    } finally {
      await dan.page.waitForTimeout(400); // a hold, not a tap
      await dan.page.mouse.up();
    }
    // The stage line went on through the renegotiation: Eve hears Dan there too.
    await dan.pressTalk('stage');
    await eve.waitHearing('stage');
    await dan.page.mouse.up();
    assert.deepEqual(dan.errors, []);
  });

  check("the admin's disconnect ends the panel as kicked", async () => {
    const ben = people.find((p) => p.name === 'Ben');
    const { status } = await control.admin('DELETE', `/users/${ben.token.participantIdentity}`);
    assert.equal(status, 200);
    await ben.waitState('kicked');
    assert.equal(await userState(ben.token.participantIdentity), undefined, 'gone from the list');
  });
});
