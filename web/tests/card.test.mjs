// The crew panel and the venue's sound card: a server audio user on line X (the card, bridged by
// the real partyline-bridged) hears a browser that talks on X on its output channel, and a
// browser on X hears the card's input channel. Real Janus, control, bridged, a private
// PulseAudio whose null sinks are the card, headless Chromium; run by scripts/test-browser.

import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import {
  CARD_CHANNELS,
  HZ_TOLERANCE,
  Person,
  QUIET_DB,
  SOUND_DB,
  report,
  rmsDb,
  since,
  startWithTones,
  toneHz,
  trackedTests,
  waitFor,
} from './harness.mjs';

describe('crew panel and the sound card', { timeout: 180_000 }, () => {
  const X = 'line-x';
  /** The browsers' fake microphone: a steady sine (writeTone, -12 dBFS). */
  const MIC_HZ = 440;
  /** What the card's input plays into the room. */
  const CARD_HZ = 1000;
  /** The server audio user: the card's input channel into X, X's mix on the card's output channel. */
  const DESK = { name: 'Desk', group: X, inputChannel: 2, outputChannel: 5 };
  let control;
  let browser;
  let stop;
  let output;
  let cardTone;
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  /** What Janus and bridged say of line X: for a failure's report. */
  const seen = async () => {
    const probe = await control.janus.probe();
    try {
      const { participants } = await probe.call({ request: 'listparticipants', room: X });
      const branch = (await control.bridge()).branches?.find((b) => b.name === DESK.name);
      return `Janus's ${X}: ${JSON.stringify(participants.map((p) => [p.display, p.muted]))}; bridged's ${DESK.name}: ${JSON.stringify(branch)}`;
    } finally {
      await probe.close();
    }
  };

  const open = async (name) => {
    const p = await Person.open(browser, control.origin, name);
    people.push(p);
    await p.join(X);
    return p;
  };

  before(async () => {
    let browsers;
    ({ control, browsers, stop } = await startWithTones(['Line X', 'Line Y'], { mic: MIC_HZ }, { card: true }));
    browser = browsers.mic;
    // One recording of the card's output for the whole suite: a null sink read at low latency
    // from the start renders in small blocks (bridged/README.md, "The card side's first seconds").
    output = await control.card.record();
    // The card's input plays from the start, as a desk's microphone would (and a null sink with
    // a player renders in small blocks from the start too).
    cardTone = await control.card.tone(DESK.inputChannel, CARD_HZ);
    const t0 = performance.now();
    await control.addServerUser(DESK);
    report(
      `server audio user ${DESK.name} (input ${DESK.inputChannel}, output ${DESK.outputChannel}) joined to ${X} ${since(t0)} ms after the POST`,
    );
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    await Promise.all(people.map((p) => p.close()));
    // The card's recording and player before control, which stops the card.
    await output?.stop();
    await cardTone?.stop();
    await stop?.();
  });

  check(
    'the server audio user hears a browser that talks on its line, on its output channel only, and stops hearing it when the key is released',
    async () => {
      const [ann, bob] = [await open('Ann'), await open('Bob')];
      await Promise.all([ann.waitState('connected'), bob.waitState('connected')]);
      // The card is on the line, always talking (a server audio user is never muted in its room).
      await ann.waitLine(X, 'talkers', DESK.name);
      const o = DESK.outputChannel;

      // Nobody in the browsers talks: the room's mix without the desk itself is silence.
      const quietFrom = output.seconds;
      await output.waitQuiet("the card's output silent before anyone talks", o, { from: quietFrom, timeout: 15_000 });

      await ann.control(X, 'talk').hover();
      const t0 = performance.now();
      const from = output.seconds;
      await ann.page.mouse.down();
      let onAt;
      try {
        await ann.waitLine(X, 'talk', 'momentary');
        onAt = await output
          .waitTone(`Ann's ${MIC_HZ} Hz on the card's output ${o}`, o, MIC_HZ, { from, timeout: 10_000, db: SOUND_DB })
          .catch(async (error) => {
            report(`${await seen()}; Ann's microphone at ${await ann.level('levelOut')} dBFS`);
            throw error;
          });
        const heardMs = since(t0);
        // One second of it, then every channel of that second.
        await waitFor("1 s of the card's output", async () => output.seconds >= onAt + 1.2, { timeout: 5000 });
        const tone = output.channel(o, onAt + 0.2, onAt + 1.2);
        const [level, hz] = [rmsDb(tone), toneHz(tone)];
        const others = Array.from({ length: CARD_CHANNELS }, (_, k) => k)
          .filter((k) => k !== o)
          .map((k) => [k, rmsDb(output.channel(k, onAt + 0.2, onAt + 1.2))]);
        report(
          `Ann talks on ${X}: the card's output ${o} carries ${level.toFixed(1)} dBFS at ${hz.toFixed(0)} Hz, ${heardMs} ms after her key went down; other outputs max ${Math.max(...others.map(([, db]) => db)).toFixed(1)} dBFS`,
        );
        assert.ok(level > SOUND_DB, `the card's output ${o} at ${level.toFixed(1)} dBFS while Ann talks`);
        assert.ok(Math.abs(hz - MIC_HZ) < 30, `the card's output ${o} at ${hz.toFixed(0)} Hz, not ${MIC_HZ} Hz`);
        for (const [k, db] of others)
          assert.ok(db < QUIET_DB, `the card's output ${k} at ${db.toFixed(1)} dBFS: only ${o} is the desk's`);
      } finally {
        await ann.page.waitForTimeout(450); // a hold, not a tap (which would latch)
        await ann.page.mouse.up();
      }
      await ann.waitLine(X, 'talk', 'off');
      const released = output.seconds;
      const t1 = performance.now();
      const quietAt = await output.waitQuiet("the card's output silent after Ann released", o, {
        from: released,
        timeout: 5000,
      });
      report(
        `Ann released: the card's output ${o} quiet (< ${QUIET_DB} dBFS for 500 ms) from ${((quietAt - released) * 1000).toFixed(0)} ms after the release (found ${since(t1)} ms after it)`,
      );
      assert.ok(
        quietAt - released < 1,
        `the card still heard Ann ${(quietAt - released).toFixed(2)} s after she released`,
      );
      assert.deepEqual([...ann.errors, ...bob.errors], []);
      await Promise.all([ann.close(), bob.close()]);
    },
    { timeout: 60_000 },
  );

  check(
    "the admin's Stats tab shows the card in line X as its user, joined, and the user's input level",
    async () => {
      const page = await browser.newPage();
      try {
        await page.goto(`${control.origin}/admin`);
        await page.locator('#token').fill(control.adminToken);
        await page.locator('#login').click();
        await page.locator('#app').waitFor({ state: 'visible' });
        await page.locator('#tab-system').click();
        const room = page.locator('#participants-rows tr').filter({ has: page.locator('.p-room', { hasText: X }) });
        await room.locator('.p-state', { hasText: 'joined' }).waitFor({ timeout: 10_000 });
        assert.equal(
          await room.locator('.p-display').textContent(),
          DESK.name,
          "the card is shown under its user's name",
        );
        const desk = page.locator('#branches-rows tr').filter({ has: page.locator('.b-name', { hasText: DESK.name }) });
        await desk.locator('.b-state', { hasText: 'joined' }).waitFor({ timeout: 10_000 });
        // The card's input plays a sine at 0.4 of full scale on the desk's channel: about -11 dBFS RMS.
        const level = async () => Number.parseFloat(await desk.locator('.b-level').textContent());
        await waitFor(`${DESK.name}'s input level shown above -20 dBFS`, async () => (await level()) > -20, {
          timeout: 10_000,
          interval: 100,
        });
        report(
          `admin Stats: ${X} joined as ${DESK.name}; ${DESK.name}'s input ${await desk.locator('.b-level').textContent()}, output ${await desk.locator('.b-output').textContent()}`,
        );
        // The pool of one Janus node, up, holding the card's line among its participants.
        const node = page.locator('#nodes-rows tr');
        await node.locator('.n-state', { hasText: 'up' }).waitFor({ timeout: 10_000 });
        assert.equal(await node.count(), 1);
        assert.equal(await node.locator('.n-name').textContent(), 'local');
        assert.match(await node.locator('.n-load').textContent(), /^\d+ \/ 64$/);
      } finally {
        await page.close();
      }
    },
    { timeout: 60_000 },
  );

  check(
    "a browser on the line hears the card's input channel (level and frequency), and silence once it stops",
    async () => {
      const bea = await open('Bea');
      await bea.waitState('connected');
      await bea.waitLine(X, 'talkers', DESK.name);
      const t0 = performance.now();
      await bea.waitHearing(X, 10_000);
      const riseMs = since(t0);
      const [level, heard] = [await bea.levelRange({ line: X }, 1500), await bea.dominantHz(X)];
      report(
        `the card's input ${DESK.inputChannel} plays ${CARD_HZ} Hz: Bea hears it ${riseMs} ms after she connected, median ${level.median} dBFS, dominant ${heard?.hz} Hz (${heard?.db} dB)`,
      );
      assert.ok(level.median > SOUND_DB, `Bea hears the card at median ${level.median} dBFS`);
      assert.ok(
        Math.abs(heard.hz - CARD_HZ) <= HZ_TOLERANCE,
        `Bea's ${X} carries ${heard.hz} Hz, not the card's ${CARD_HZ} Hz`,
      );

      // What she hears is the card: it stops when the card's input does.
      await cardTone.stop();
      const t1 = performance.now();
      await waitFor(
        `Bea's ${X} quiet after the card's input stopped`,
        async () => (await bea.lineLevel(X)) < QUIET_DB,
        { timeout: 5000, interval: 20 },
      );
      report(`the card's input stopped: Bea's ${X} below ${QUIET_DB} dBFS ${since(t1)} ms later`);
      assert.deepEqual(bea.errors, []);
      await bea.close();
    },
    { timeout: 60_000 },
  );
});
