// Person keys, direct lines and reply, in real browsers. The admin gives the position Director
// a person key to Camera 1 in the Positions form. Ann joins as Director (a 440 Hz fake
// microphone), Ben as Camera 1 (660 Hz), Cat on Stage (880 Hz), the line all three share.
//
// - Ann holds her person key "Camera 1": a direct line opens, marked with the other's name on
//   both panels; Ben hears Ann on it, and Cat hears nothing on Stage. A second press, on the
//   line now open, is heard as fast as a line's (both reported).
// - Ben's reply key names Ann; his `R` talks to her on the direct line, and Cat hears nothing.
// - Ben declines with his card's Close: the line goes from both panels.
// - Bob joins Camera 1 too (a position for many): Ann's key names both, and her press is heard
//   by each of them on a direct line of their own.
// - Ben and Bob leave: Ann's direct lines go, and her key says Camera 1 is not online.
// - `crew.directCalls: off` (the config file edited) hides Ann's person keys.
//
// Run: scripts/test-browser web/tests/direct.test.mjs.

import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { Person, openAdmin, report, since, startWithTones, trackedTests, waitFor } from './harness.mjs';

const STAGE = 'stage';

describe('person keys: a direct line to one person, and reply', { timeout: 240_000 }, () => {
  let control;
  let browsers;
  let stop;
  let ann;
  let ben;
  let cat;
  let bob;
  let room; // the direct line's room
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  const yaml = () => readFile(join(control.dir, 'partyline.yaml'), 'utf8');
  const personKey = (person) => person.page.locator('button.person[data-person="camera-1"]');
  const directLine = (person, name) => person.page.locator(`[data-line][data-direct="${name}"]`);

  before(async () => {
    ({ control, browsers, stop } = await startWithTones(['Stage'], { ann: 440, ben: 660, cat: 880 }));
    const camera = { name: 'Camera 1', listen: [STAGE], talk: [STAGE] };
    const { status, body } = await control.admin('POST', '/positions', camera);
    assert.equal(status, 201, JSON.stringify(body));
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    await Promise.all(people.map((p) => p.close()));
    await stop?.();
  });

  check(
    'the admin gives Director a person key to Camera 1 in the Positions form',
    async () => {
      const page = await openAdmin(browsers.ann, control.origin, { token: control.adminToken });
      try {
        await page.locator('#tab-lines').click();
        await page.locator('#position-talk-to-camera-1').waitFor();
        await page.locator('#position-name').fill('Director');
        await page.locator(`#position-listen-${STAGE}`).check();
        await page.locator(`#position-talk-${STAGE}`).check();
        await page.locator('#position-talk-to-camera-1').check();
        await page.locator('#position-submit').click();
        const row = page.locator('#positions-rows tr[data-key="director"]');
        await row.locator('.position-talk-to', { hasText: 'Person keys: Camera 1' }).waitFor();
        assert.match(await yaml(), /talkTo:\n\s+- camera-1/);
        assert.deepEqual(page.errors, []);
      } finally {
        await page.context().close();
      }
      ann = await Person.joined(browsers.ann, control.origin, 'Ann', '/?position=director');
      people.push(ann);
      ben = await Person.joined(browsers.ben, control.origin, 'Ben', '/?position=camera-1');
      people.push(ben);
      cat = await Person.joined(browsers.cat, control.origin, 'Cat', `/?groups=${STAGE}`);
      people.push(cat);
      await waitFor(
        "Ann's key to Camera 1 online",
        async () => (await personKey(ann).getAttribute('data-online')) === 'true',
      );
      assert.equal(await ben.page.locator('#people').isHidden(), true, 'Camera 1 has no person key');
    },
    { timeout: 90_000 },
  );

  check(
    'a held person key opens a direct line: Ben hears Ann on it, Cat nothing; a second press is as fast as a line',
    async () => {
      assert.ok(ann, 'needs the first check');
      await cat.waitQuiet(STAGE);
      const t0 = performance.now();
      await personKey(ann).hover();
      await ann.page.mouse.down();
      try {
        await directLine(ann, 'Ben').waitFor();
        room = await directLine(ann, 'Ben').getAttribute('data-line');
        await ann.waitLine(room, 'talk', 'momentary', 10_000);
        await directLine(ben, 'Ann').waitFor();
        await ben.waitHearing(room, 10_000);
        report(
          `first press of a person key → Ben hears Ann: ${since(t0)} ms (the direct line opened and joined by both)`,
        );
        assert.ok(Math.abs((await ben.dominantHz(room)).hz - 440) < 20, "Ann's tone");
        await cat.assertSilent(STAGE, 'while Ann talks to Ben');
        assert.equal(await personKey(ann).getAttribute('data-talk'), 'momentary');
      } finally {
        await ann.page.waitForTimeout(400); // a hold, not a tap
        await ann.page.mouse.up();
      }
      await ann.waitLine(room, 'talk', 'off');
      await ben.waitQuiet(room);

      const t1 = performance.now();
      await personKey(ann).hover();
      await ann.page.mouse.down();
      try {
        await ben.waitHearing(room);
        const heardMs = since(t1);
        report(`second press, the line open → Ben hears Ann: ${heardMs} ms`);
        assert.ok(heardMs < 1500, `${heardMs} ms`);
      } finally {
        await ann.page.waitForTimeout(400);
        await ann.page.mouse.up();
      }
      await ann.waitLine(room, 'talk', 'off');
      assert.deepEqual(ann.errors, []);
    },
    { timeout: 60_000 },
  );

  check(
    "Ben's reply (R) reaches Ann on the direct line, and nobody else",
    async () => {
      assert.ok(room, 'needs the direct line');
      const reply = ben.page.locator('#reply');
      await waitFor("Ben's reply key naming Ann", async () => (await reply.getAttribute('data-reply-to')) === 'Ann');
      await ann.waitQuiet(room);
      await ben.page.keyboard.down('r');
      try {
        await ben.waitLine(room, 'talk', 'momentary');
        await ann.waitHearing(room);
        assert.ok(Math.abs((await ann.dominantHz(room)).hz - 660) < 20, "Ben's tone");
        await cat.assertSilent(STAGE, 'while Ben replies to Ann');
      } finally {
        await ben.page.keyboard.up('r');
      }
      await ben.waitLine(room, 'talk', 'off');
      assert.deepEqual(ben.errors, []);
    },
    { timeout: 60_000 },
  );

  check(
    "Ben declines with his card's Close: the line goes from both panels",
    async () => {
      assert.ok(room, 'needs the direct line');
      await directLine(ben, 'Ann').locator('[data-action="close"]').click();
      await directLine(ben, 'Ann').waitFor({ state: 'detached' });
      await directLine(ann, 'Ben').waitFor({ state: 'detached' });
      await waitFor("Ann's key ready to open a new line", async () =>
        /hold or tap/.test(await personKey(ann).textContent()),
      );
      assert.equal(await personKey(ann).getAttribute('data-online'), 'true', 'Ben is still at Camera 1');
      assert.deepEqual([...ann.errors, ...ben.errors], []);
    },
    { timeout: 30_000 },
  );

  check(
    "Bob joins Camera 1 too: Ann's press reaches Ben and Bob, each on a line of their own",
    async () => {
      assert.ok(ann, 'needs the first check');
      bob = await Person.joined(browsers.cat, control.origin, 'Bob', '/?position=camera-1');
      people.push(bob);
      await waitFor("Ann's key naming Ben and Bob", async () => /Ben, Bob/.test(await personKey(ann).textContent()));
      await personKey(ann).hover();
      await ann.page.mouse.down();
      try {
        for (const [callee, name] of [
          [ben, 'Ben'],
          [bob, 'Bob'],
        ]) {
          await directLine(ann, name).waitFor();
          const line = await directLine(ann, name).getAttribute('data-line');
          await ann.waitLine(line, 'talk', 'momentary', 10_000);
          await directLine(callee, 'Ann').waitFor();
          await callee.waitHearing(line, 10_000);
          assert.ok(Math.abs((await callee.dominantHz(line)).hz - 440) < 20, `${name} hears Ann's tone`);
        }
        const rooms = await ann.page
          .locator('[data-line][data-direct]')
          .evaluateAll((cards) => cards.map((c) => c.dataset.line));
        assert.equal(new Set(rooms).size, 2, 'two direct lines');
      } finally {
        await ann.page.waitForTimeout(400);
        await ann.page.mouse.up();
      }
      assert.deepEqual(ann.errors, []);
    },
    { timeout: 60_000 },
  );

  check(
    "Ben and Bob leave: Ann's direct lines go and her key says Camera 1 is not online",
    async () => {
      assert.ok(room && bob, 'needs the direct lines');
      await ben.page.locator('#leave').click();
      await directLine(ann, 'Ben').waitFor({ state: 'detached' });
      await bob.page.locator('#leave').click();
      await directLine(ann, 'Bob').waitFor({ state: 'detached' });
      await waitFor("Ann's key offline", async () => (await personKey(ann).getAttribute('data-online')) === 'false');
      assert.match(await personKey(ann).textContent(), /not online/);
      assert.equal(await ann.state(), 'connected', "Ann's other lines go on");
    },
    { timeout: 30_000 },
  );

  check(
    'crew.directCalls: off hides the person keys',
    async () => {
      const text = await yaml();
      assert.match(text, /directCalls: positions/);
      await writeFile(join(control.dir, 'partyline.yaml'), text.replace('directCalls: positions', 'directCalls: off'));
      await ann.page.locator('#people').waitFor({ state: 'hidden' });
    },
    { timeout: 30_000 },
  );
});
