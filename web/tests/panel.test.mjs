// Browser tests of the crew panel (`/`): talk keys (hold, tap-latch, keyboard), activity lights
// and talkers, listen and volume, "muted in the room" as Janus sees it, network loss, and the
// phone layout. Real Janus, real control, headless Chromium; run by scripts/test-browser.

import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe } from 'node:test';
import { Control, Person, launchBrowser, report, setLink, since, trackedTests, waitFor } from './harness.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SHOTS = join(ROOT, 'target', 'ui-screenshots');
/** A level this far above digital silence (-100) is sound; the fake microphone beeps near -20. */
const SOUND_DB = -50;
/** Below this, nothing is heard (the meter's floor is -60). */
const QUIET_DB = -60;
/** The talk light must show a talker this fast after the key goes down. */
const TALKER_LIGHT_MS = 500;
/** A press held this long is a hold, not a tap (the page's threshold is 300 ms). */
const HOLD_MS = 450;

describe('crew panel', { timeout: 240_000 }, () => {
  let control;
  let browser;
  const people = [];
  const { check, failed } = trackedTests();

  const person = async (name, options) => {
    const p = await Person.open(browser, control.origin, name, options);
    people.push(p);
    return p;
  };

  /** Opens `names` on `groupId` and waits until all are connected and see each other. */
  const onLine = async (groupId, names, options) => {
    const crew = await Promise.all(names.map((name) => person(name, options)));
    await Promise.all(crew.map((p) => p.join(groupId)));
    await Promise.all(crew.map((p) => p.waitState('connected')));
    for (const p of crew) {
      await waitFor(`${p.name} hearing ${groupId}`, async () => (await p.lineLevel(groupId)) !== null);
      for (const other of crew.filter((o) => o !== p)) {
        await p.line(groupId).locator('.line-people', { hasText: other.name }).waitFor({ timeout: 5000 });
      }
    }
    return crew;
  };

  /** The room's participants as Janus lists them: identity → { muted, display }. */
  const inRoom = async (probe, room) => {
    const { participants } = await probe.call({ request: 'listparticipants', room });
    return new Map(participants.map((p) => [p.id, p]));
  };
  const mutedInRoom = async (probe, room, p) => (await inRoom(probe, room)).get(p.token.participantIdentity)?.muted;

  const heard = async (p, groupId, ms = 1500) => p.levelRange({ line: groupId }, ms);

  before(async () => {
    const [c, b] = await Promise.allSettled([
      Control.start(['Stage Left', 'Stage Right', 'Backstage', 'Foyer']),
      launchBrowser(),
    ]);
    control = c.value;
    browser = b.value;
    for (const failure of [c, b]) if (failure.status === 'rejected') throw failure.reason;
  });

  after(async () => {
    // The link is up again whatever a failed test left.
    await setLink(true).catch(() => {});
    if (control && failed()) report(`a test failed; the servers' last log lines:\n${await control.logTail(60)}`);
    await Promise.all(people.map((p) => p.close()));
    await browser?.close();
    await control?.stop();
  });

  check('holding the talk key: the others hear it and show the talker within 500 ms; released: silence, light off', async () => {
    const [alice, bob, cleo] = await onLine('stage-left', ['Alice', 'Bob', 'Cleo']);
    const line = 'stage-left';
    for (const p of [bob, cleo]) {
      assert.deepEqual(await p.lineState(line).then((s) => [s.active, s.talkers, s.talk, s.listen]), ['false', '', 'off', 'on']);
    }
    const key = alice.control(line, 'talk');
    await key.hover();
    const t0 = performance.now();
    await alice.page.mouse.down();
    try {
      await Promise.all([bob.waitLine(line, 'talkers', 'Alice'), cleo.waitLine(line, 'talkers', 'Alice')]);
      const lightMs = since(t0);
      assert.equal((await bob.lineState(line)).active, 'true');
      assert.equal((await alice.lineState(line)).talk, 'momentary');
      assert.equal(await key.getAttribute('aria-pressed'), 'true');
      // Alice's own line does not light for her own voice.
      assert.equal((await alice.lineState(line)).active, 'false');
      await waitFor(`Bob hearing Alice above ${SOUND_DB} dBFS`, async () => (await bob.lineLevel(line)) > SOUND_DB, { timeout: 5000, interval: 20 });
      const riseMs = since(t0);
      const [b, c] = await Promise.all([heard(bob, line), heard(cleo, line)]);
      report(`talker light: Alice in Bob's and Cleo's data-talkers ${lightMs} ms after her key went down (limit ${TALKER_LIGHT_MS}); Bob hears her after ${riseMs} ms, median ${b.median} dBFS, Cleo median ${c.median} dBFS`);
      assert.ok(lightMs <= TALKER_LIGHT_MS, `talker light after ${lightMs} ms`);
      assert.ok(b.median > SOUND_DB && c.median > SOUND_DB, `Bob ${b.median}, Cleo ${c.median} dBFS while Alice talks`);

      // Bob talks too: Cleo sees both.
      await bob.control(line, 'talk').hover();
      const tBob = performance.now();
      await bob.page.mouse.down();
      await cleo.page.waitForFunction(() => ['Alice,Bob', 'Bob,Alice'].includes(document.querySelector('[data-line="stage-left"]').dataset.talkers), null, { timeout: 5000, polling: 10 });
      const wait = HOLD_MS - since(tBob);
      if (wait > 0) await bob.page.waitForTimeout(wait); // a hold, not a tap (which would latch)
      await bob.page.mouse.up();
      assert.equal((await bob.lineState(line)).talk, 'off');
      await cleo.waitLine(line, 'talkers', 'Alice');
    } finally {
      await alice.page.mouse.up();
    }
    const t1 = performance.now();
    await Promise.all([bob.waitLine(line, 'active', 'false'), cleo.waitLine(line, 'active', 'false')]);
    const offMs = since(t1);
    assert.equal((await alice.lineState(line)).talk, 'off', 'a hold is not a latch');
    assert.equal(await key.getAttribute('aria-pressed'), 'false');
    await waitFor(`Bob's line back below ${QUIET_DB} dBFS`, async () => (await bob.lineLevel(line)) < QUIET_DB, { timeout: 6000 });
    const quiet = await heard(bob, line, 1000);
    report(`released: talker light off after ${offMs} ms, Bob below ${QUIET_DB} dBFS after ${since(t1)} ms, then max ${quiet.max} dBFS`);
    assert.ok(quiet.max < QUIET_DB, `Bob hears ${quiet.max} dBFS after Alice released`);
    assert.equal((await bob.lineState(line)).talkers, '');
    assert.deepEqual([...alice.errors, ...bob.errors, ...cleo.errors], []);
    await Promise.all([alice, bob, cleo].map((p) => p.close()));
  });

  check('tap latches and a second tap releases, with the pointer, key 1 and space; muted in the room while no key is on', async () => {
    const [dana, eli] = await onLine('stage-right', ['Dana', 'Eli']);
    const line = 'stage-right';
    const probe = await control.janus.probe();
    try {
      const muted = () => mutedInRoom(probe, line, dana);
      assert.equal(await muted(), true, 'joined muted: no key is on');
      const hears = () => waitFor(`Eli hearing Dana above ${SOUND_DB} dBFS`, async () => (await eli.lineLevel(line)) > SOUND_DB, { timeout: 5000, interval: 20 });
      const silent = () => waitFor(`Eli's line below ${QUIET_DB} dBFS`, async () => (await eli.lineLevel(line)) < QUIET_DB, { timeout: 6000 });
      const latchedBy = async (how, tap) => {
        await tap();
        await dana.waitLine(line, 'talk', 'latched');
        assert.equal(await dana.control(line, 'talk').getAttribute('aria-pressed'), 'true');
        await waitFor('Dana unmuted in the room', async () => (await muted()) === false);
        await hears();
        await eli.waitLine(line, 'talkers', 'Dana');
        // Latched: it stays on with nothing held.
        const held = await heard(eli, line, 1000);
        assert.ok(held.median > SOUND_DB, `latched by ${how}: Eli hears median ${held.median} dBFS`);
        await tap();
        await dana.waitLine(line, 'talk', 'off');
        await waitFor('Dana muted in the room again', async () => (await muted()) === true);
        await eli.waitLine(line, 'active', 'false');
        await silent();
        report(`latch by ${how}: on, heard (median ${held.median} dBFS), released by a second ${how}; Janus: muted ${await muted()}`);
      };
      const key = dana.control(line, 'talk');
      await latchedBy('pointer tap', async () => {
        await key.hover();
        await dana.page.mouse.down();
        await dana.page.mouse.up();
      });
      await dana.page.locator('body').click({ position: { x: 5, y: 5 } }); // focus off the key
      await latchedBy('key 1', () => dana.page.keyboard.press('1'));
      await latchedBy('space', () => dana.page.keyboard.press('Space'));

      // Held keys: momentary, muted again on release (Janus's view), by key 1 and space.
      for (const [name, code] of [['key 1', 'Digit1'], ['space', 'Space']]) {
        const t0 = performance.now();
        await dana.page.keyboard.down(code);
        await dana.waitLine(line, 'talk', 'momentary');
        await waitFor('Dana unmuted', async () => (await muted()) === false);
        await hears();
        const wait = HOLD_MS - since(t0);
        if (wait > 0) await dana.page.waitForTimeout(wait); // a hold lasts longer than a tap
        await dana.page.keyboard.up(code);
        await dana.waitLine(line, 'talk', 'off');
        await waitFor('Dana muted', async () => (await muted()) === true);
        await silent();
        report(`hold by ${name}: momentary while held, off and muted in the room at release`);
      }
      // Never a key on: the room's view of Eli, who never talked, is muted all along.
      assert.equal(await mutedInRoom(probe, line, eli), true);
    } finally {
      await probe.close();
    }
    assert.deepEqual([...dana.errors, ...eli.errors], []);
    await Promise.all([dana.close(), eli.close()]);
  });

  check('volume 0 and listen off silence the line for that listener only', async () => {
    const [fay, gus, hal] = await onLine('backstage', ['Fay', 'Gus', 'Hal']);
    const line = 'backstage';
    await fay.control(line, 'talk').hover();
    await fay.page.mouse.down();
    await fay.page.mouse.up(); // latched
    await fay.waitLine(line, 'talk', 'latched');
    try {
      await waitFor('Gus hears Fay', async () => (await gus.lineLevel(line)) > SOUND_DB, { timeout: 5000, interval: 20 });
      const full = await heard(gus, line, 1000);

      // Volume 0: Gus's line is silent; Hal still hears.
      await gus.control(line, 'volume').fill('0');
      await waitFor(`Gus's line below ${QUIET_DB} dBFS at volume 0`, async () => (await gus.lineLevel(line)) < QUIET_DB, { timeout: 6000 });
      const [zero, halMeanwhile] = await Promise.all([heard(gus, line, 1000), heard(hal, line, 1000)]);
      assert.ok(zero.max < QUIET_DB, `Gus at volume 0 hears ${zero.max} dBFS`);
      assert.ok(halMeanwhile.median > SOUND_DB, `Hal hears median ${halMeanwhile.median} dBFS meanwhile`);
      assert.equal((await gus.lineState(line)).active, 'true', 'the light still shows Fay talking');

      // Volume 50: quieter than at 80, by the fader's law (square: 20·log10((50/80)²) ≈ -8 dB).
      await gus.control(line, 'volume').fill('50');
      await waitFor('Gus hears Fay again', async () => (await gus.lineLevel(line)) > SOUND_DB, { timeout: 5000, interval: 20 });
      const half = await heard(gus, line, 1500);
      report(`volume: 80 → median ${full.median} dBFS, 0 → max ${zero.max} dBFS (Hal meanwhile median ${halMeanwhile.median}), 50 → median ${half.median} dBFS`);
      assert.ok(half.median < full.median - 3, `volume 50 (${half.median}) below volume 80 (${full.median})`);

      // Listen off: silent, data-listen off, the button says so; on again: back.
      const listen = gus.control(line, 'listen');
      await listen.click();
      await gus.waitLine(line, 'listen', 'off');
      assert.equal(await listen.getAttribute('aria-pressed'), 'false');
      await waitFor(`Gus's line below ${QUIET_DB} dBFS with listen off`, async () => (await gus.lineLevel(line)) < QUIET_DB, { timeout: 6000 });
      const off = await heard(gus, line, 1000);
      assert.ok(off.max < QUIET_DB, `Gus with listen off hears ${off.max} dBFS`);
      assert.ok((await heard(hal, line, 500)).median > SOUND_DB, 'Hal still hears');
      await listen.click();
      await gus.waitLine(line, 'listen', 'on');
      await waitFor('Gus hears Fay with listen on', async () => (await gus.lineLevel(line)) > SOUND_DB, { timeout: 5000, interval: 20 });
      assert.equal(await gus.control(line, 'volume').inputValue(), '50', 'the volume stayed');
      report(`listen off: max ${off.max} dBFS; on again: heard`);
    } finally {
      await fay.control(line, 'talk').click().catch(() => {});
    }
    assert.deepEqual([...fay.errors, ...gus.errors, ...hal.errors], []);
    await Promise.all([fay, gus, hal].map((p) => p.close()));
  });

  /**
   * Ivy latches her key, Jon sets his volume and holds his key; pl0 goes down for `downMs`
   * (at least until both panels say they reconnect), then up. Reports the time from link up
   * to Jon hearing Ivy again.
   */
  const networkLoss = async (line, [a, b], downMs) => {
    const [ivy, jon] = await onLine(line, [a, b]);
    // Ivy latches her key; Jon sets his volume and holds his key.
    await ivy.control(line, 'talk').hover();
    await ivy.page.mouse.down();
    await ivy.page.mouse.up();
    await ivy.waitLine(line, 'talk', 'latched');
    await jon.control(line, 'volume').fill('60');
    await waitFor('Jon hears Ivy', async () => (await jon.lineLevel(line)) > SOUND_DB, { timeout: 5000, interval: 20 });
    await jon.control(line, 'talk').hover();
    await jon.page.mouse.down();
    await jon.waitLine(line, 'talk', 'momentary');
    const identities = [ivy.token.participantIdentity, jon.token.participantIdentity];

    const tDown = performance.now();
    await setLink(false);
    let downFor;
    try {
      await Promise.all([ivy.waitState('reconnecting', 20_000), jon.waitState('reconnecting', 20_000)]);
      const noticedMs = since(tDown);
      report(`network down: both panels say "${await jon.page.locator('#status-text').textContent()}" after ${noticedMs} ms`);
      // The held key lets go; the latch stays.
      assert.equal((await jon.lineState(line)).talk, 'off', 'a momentary talk is released');
      assert.equal((await ivy.lineState(line)).talk, 'latched', 'a latch is kept');
      const rest = downMs - since(tDown);
      if (rest > 0) await new Promise((resolve) => setTimeout(resolve, rest));
    } finally {
      downFor = since(tDown);
      await setLink(true);
    }
    const tUp = performance.now();
    await jon.page.mouse.up();
    await Promise.all([ivy.waitState('connected', 30_000), jon.waitState('connected', 30_000)]);
    const connectedMs = since(tUp);
    await waitFor('Jon hears Ivy again', async () => (await jon.lineLevel(line)) > SOUND_DB, { timeout: 30_000, interval: 20 });
    const audioMs = since(tUp);
    const rejoined = ivy.token.participantIdentity !== identities[0] || jon.token.participantIdentity !== identities[1];
    report(`network back after ${downFor} ms down (${ivy.name}, ${jon.name}): panels connected ${connectedMs} ms after link up, Jon hears Ivy ${audioMs} ms after link up (${rejoined ? 'rejoined with new tokens' : 'ICE recovered, same session'})`);

    assert.equal((await ivy.lineState(line)).talk, 'latched', 'latch kept over the loss');
    assert.equal((await jon.lineState(line)).talk, 'off', 'the released key stayed off at mouse up');
    assert.equal(await jon.control(line, 'volume').inputValue(), '60', 'volume kept');
    const again = await heard(jon, line, 1500);
    assert.ok(again.median > SOUND_DB, `Jon hears Ivy at median ${again.median} dBFS after the loss`);
    const probe = await control.janus.probe();
    try {
      assert.equal(await mutedInRoom(probe, line, ivy), false, 'Ivy (latched) unmuted in the room');
      assert.equal(await mutedInRoom(probe, line, jon), true, 'Jon (released) muted in the room');
    } finally {
      await probe.close();
    }
    await ivy.control(line, 'talk').click();
    assert.deepEqual([...ivy.errors, ...jon.errors], []);
    await Promise.all([ivy.close(), jon.close()]);
    return { rejoined, audioMs };
  };

  check('network loss of 5 s: reconnecting, then the line back with its latch and volume, a held key released', async () => {
    await networkLoss('foyer', ['Ivy', 'Jon'], 5_000);
  }, { timeout: 90_000 });

  check('network loss of 15 s (ICE given up): every line rejoined with a new token, latch and volume kept', async () => {
    const { rejoined } = await networkLoss('stage-right', ['Kai', 'Lea'], 15_000);
    assert.ok(rejoined, 'a loss longer than the ICE grace rejoins');
  }, { timeout: 120_000 });

  check('phone: 360 px, light and dark, talk keys ≥ 44 px, no horizontal overflow; installable manifest', async () => {
    await mkdir(SHOTS, { recursive: true });
    for (const scheme of ['light', 'dark']) {
      const [kim, lou] = await onLine('stage-left', [`Kim-${scheme}`, `Lou-${scheme}`], { colorScheme: scheme });
      for (const p of [kim, lou]) await p.page.setViewportSize({ width: 360, height: 740 });
      await lou.control('stage-left', 'talk').hover();
      await lou.page.mouse.down();
      await kim.waitLine('stage-left', 'active', 'true');
      await waitFor('Kim hearing Lou', async () => (await kim.lineLevel('stage-left')) > SOUND_DB, { timeout: 5000, interval: 20 });
      await kim.page.screenshot({ path: join(SHOTS, `panel-360-${scheme}-listening.png`), fullPage: true });
      await lou.page.screenshot({ path: join(SHOTS, `panel-360-${scheme}-talking.png`), fullPage: true });
      await lou.page.mouse.up();
      const layout = await kim.page.evaluate(() => {
        const boxes = [...document.querySelectorAll('[data-line] button:not([hidden]), [data-line] input')]
          .map((el) => ({ action: el.dataset.action, ...el.getBoundingClientRect().toJSON() }));
        return { scrollWidth: document.documentElement.scrollWidth, boxes };
      });
      assert.ok(layout.scrollWidth <= 360, `page ${layout.scrollWidth} px wide at 360`);
      for (const box of layout.boxes) assert.ok(box.height >= 44, `${box.action} is ${box.height} px high`);
      const key = layout.boxes.find((b) => b.action === 'talk');
      assert.ok(key.width >= 300 && key.height >= 88, `the talk key is ${key.width}×${key.height}`);
      await Promise.all([kim.close(), lou.close()]);
    }
    const manifest = await (await fetch(new URL('/manifest.webmanifest', control.origin))).json();
    assert.equal(manifest.display, 'standalone');
    for (const icon of manifest.icons) {
      const response = await fetch(new URL(icon.src, control.origin));
      assert.equal(response.status, 200, icon.src);
      assert.equal(response.headers.get('content-type'), icon.type);
    }
    assert.ok(manifest.icons.some((i) => i.sizes === '512x512') && manifest.icons.some((i) => i.sizes === '192x192'));
    report(`screenshots in ${SHOTS}`);
  });
});
