// Browser tests of the crew panel (`/`): talk keys (hold, tap-latch, keyboard), activity lights
// and talkers, listen and volume, "muted in the room" as Janus sees it, network loss, and the
// phone layout; then several lines per session (positions, routing by line with three fake
// microphones at three frequencies, calls, listen-only and talk-only lines, the admin taking one
// line away, network loss with two lines). Real Janus, real control, headless Chromium; run by
// scripts/test-browser.

import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import {
  HZ_TOLERANCE,
  Person,
  QUIET_DB,
  SHOTS,
  SOUND_DB,
  report,
  setLink,
  since,
  startWithBrowser,
  startWithTones,
  trackedTests,
  waitFor,
} from './harness.mjs';

/** The talk light must show a talker this fast after the key goes down. */
const TALKER_LIGHT_MS = 500;
/** A press held this long is a hold, not a tap (the page's threshold is 300 ms). */
const HOLD_MS = 450;

describe('crew panel', { timeout: 240_000 }, () => {
  let control;
  let browser;
  let stop;
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

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

  before(async () => {
    ({ control, browser, stop } = await startWithBrowser(['Stage Left', 'Stage Right', 'Backstage', 'Foyer']));
  });

  after(async () => {
    // The link is up again whatever a failed test left.
    await setLink(true).catch(() => {});
    await reportLogsIfFailed(control);
    await Promise.all(people.map((p) => p.close()));
    await stop?.();
  });

  check(
    'holding the talk key: the others hear it and show the talker within 500 ms; released: silence, light off',
    async () => {
      const [alice, bob, cleo] = await onLine('stage-left', ['Alice', 'Bob', 'Cleo']);
      const line = 'stage-left';
      for (const p of [bob, cleo]) {
        assert.deepEqual(await p.lineState(line).then((s) => [s.active, s.talkers, s.talk, s.listen]), [
          'false',
          '',
          'off',
          'on',
        ]);
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
        await waitFor(`Bob hearing Alice above ${SOUND_DB} dBFS`, async () => (await bob.lineLevel(line)) > SOUND_DB, {
          timeout: 5000,
          interval: 20,
        });
        const riseMs = since(t0);
        const [b, c] = await Promise.all([bob.heard(line), cleo.heard(line)]);
        report(
          `talker light: Alice in Bob's and Cleo's data-talkers ${lightMs} ms after her key went down (limit ${TALKER_LIGHT_MS}); Bob hears her after ${riseMs} ms, median ${b.median} dBFS, Cleo median ${c.median} dBFS`,
        );
        assert.ok(lightMs <= TALKER_LIGHT_MS, `talker light after ${lightMs} ms`);
        assert.ok(
          b.median > SOUND_DB && c.median > SOUND_DB,
          `Bob ${b.median}, Cleo ${c.median} dBFS while Alice talks`,
        );

        // Bob talks too: Cleo sees both.
        await bob.control(line, 'talk').hover();
        const tBob = performance.now();
        await bob.page.mouse.down();
        await cleo.page.waitForFunction(
          () => ['Alice,Bob', 'Bob,Alice'].includes(document.querySelector('[data-line="stage-left"]').dataset.talkers),
          null,
          { timeout: 5000, polling: 10 },
        );
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
      await waitFor(`Bob's line back below ${QUIET_DB} dBFS`, async () => (await bob.lineLevel(line)) < QUIET_DB, {
        timeout: 6000,
      });
      const quiet = await bob.heard(line, 1000);
      report(
        `released: talker light off after ${offMs} ms, Bob below ${QUIET_DB} dBFS after ${since(t1)} ms, then max ${quiet.max} dBFS`,
      );
      assert.ok(quiet.max < QUIET_DB, `Bob hears ${quiet.max} dBFS after Alice released`);
      assert.equal((await bob.lineState(line)).talkers, '');
      // Each panel measures its line's link and shows control's judgement; the admin sees the figures.
      await bob.page.waitForFunction(
        (id) => document.querySelector(`[data-line="${id}"]`).dataset.link === 'good',
        line,
        { timeout: 8000 },
      );
      const { body: users } = await control.admin('GET', '/users?state=all');
      const link = users.users.find((u) => u.username === 'Bob').lines[0].link;
      report(`Bob's link as his panel measured it: ${JSON.stringify(link)}`);
      assert.equal(link.quality, 'good');
      assert.ok(link.lossPercent < 3 && link.jitterMs < 20 && link.rttMs < 300, JSON.stringify(link));
      assert.ok(await bob.line(line).locator('.line-link-warning').isHidden(), 'no warning on a good link');
      assert.deepEqual([...alice.errors, ...bob.errors, ...cleo.errors], []);
      await Promise.all([alice, bob, cleo].map((p) => p.close()));
    },
  );

  check(
    'tap latches and a second tap releases, with the pointer, key 1 and space; muted in the room while no key is on',
    async () => {
      const [dana, eli] = await onLine('stage-right', ['Dana', 'Eli']);
      const line = 'stage-right';
      const probe = await control.janus.probe();
      try {
        const muted = () => mutedInRoom(probe, line, dana);
        assert.equal(await muted(), true, 'joined muted: no key is on');
        const hears = () =>
          waitFor(`Eli hearing Dana above ${SOUND_DB} dBFS`, async () => (await eli.lineLevel(line)) > SOUND_DB, {
            timeout: 5000,
            interval: 20,
          });
        const silent = () =>
          waitFor(`Eli's line below ${QUIET_DB} dBFS`, async () => (await eli.lineLevel(line)) < QUIET_DB, {
            timeout: 6000,
          });
        const latchedBy = async (how, tap) => {
          await tap();
          await dana.waitLine(line, 'talk', 'latched');
          assert.equal(await dana.control(line, 'talk').getAttribute('aria-pressed'), 'true');
          await waitFor('Dana unmuted in the room', async () => (await muted()) === false);
          await hears();
          await eli.waitLine(line, 'talkers', 'Dana');
          // Latched: it stays on with nothing held.
          const held = await eli.heard(line, 1000);
          assert.ok(held.median > SOUND_DB, `latched by ${how}: Eli hears median ${held.median} dBFS`);
          await tap();
          await dana.waitLine(line, 'talk', 'off');
          await waitFor('Dana muted in the room again', async () => (await muted()) === true);
          await eli.waitLine(line, 'active', 'false');
          await silent();
          report(
            `latch by ${how}: on, heard (median ${held.median} dBFS), released by a second ${how}; Janus: muted ${await muted()}`,
          );
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
        for (const [name, code] of [
          ['key 1', 'Digit1'],
          ['space', 'Space'],
        ]) {
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
    },
  );

  check('volume 0 and listen off silence the line for that listener only', async () => {
    const [fay, gus, hal] = await onLine('backstage', ['Fay', 'Gus', 'Hal']);
    const line = 'backstage';
    await fay.tapTalk(line); // latched
    await fay.waitLine(line, 'talk', 'latched');
    try {
      await waitFor('Gus hears Fay', async () => (await gus.lineLevel(line)) > SOUND_DB, {
        timeout: 5000,
        interval: 20,
      });
      const full = await gus.heard(line, 1000);

      // Volume 0: Gus's line is silent; Hal still hears.
      await gus.control(line, 'volume').fill('0');
      await waitFor(
        `Gus's line below ${QUIET_DB} dBFS at volume 0`,
        async () => (await gus.lineLevel(line)) < QUIET_DB,
        { timeout: 6000 },
      );
      const [zero, halMeanwhile] = await Promise.all([gus.heard(line, 1000), hal.heard(line, 1000)]);
      assert.ok(zero.max < QUIET_DB, `Gus at volume 0 hears ${zero.max} dBFS`);
      assert.ok(halMeanwhile.median > SOUND_DB, `Hal hears median ${halMeanwhile.median} dBFS meanwhile`);
      assert.equal((await gus.lineState(line)).active, 'true', 'the light still shows Fay talking');

      // Volume 50: quieter than at 80, by the fader's law (square: 20·log10((50/80)²) ≈ -8 dB).
      await gus.control(line, 'volume').fill('50');
      await waitFor('Gus hears Fay again', async () => (await gus.lineLevel(line)) > SOUND_DB, {
        timeout: 5000,
        interval: 20,
      });
      const half = await gus.heard(line, 1500);
      report(
        `volume: 80 → median ${full.median} / max ${full.max} dBFS, 0 → max ${zero.max} dBFS (Hal meanwhile median ${halMeanwhile.median}), 50 → median ${half.median} / max ${half.max} dBFS`,
      );
      // Compared at the beeps' peaks: the fake microphone's beeps and gaps move a median by
      // several dB from one window to the next, the peak level of a beep does not.
      assert.ok(half.max < full.max - 3, `volume 50 (max ${half.max}) below volume 80 (max ${full.max})`);

      // Listen off: silent, data-listen off, the button says so; on again: back.
      const listen = gus.control(line, 'listen');
      await listen.click();
      await gus.waitLine(line, 'listen', 'off');
      assert.equal(await listen.getAttribute('aria-pressed'), 'false');
      await waitFor(
        `Gus's line below ${QUIET_DB} dBFS with listen off`,
        async () => (await gus.lineLevel(line)) < QUIET_DB,
        { timeout: 6000 },
      );
      const off = await gus.heard(line, 1000);
      assert.ok(off.max < QUIET_DB, `Gus with listen off hears ${off.max} dBFS`);
      assert.ok((await hal.heard(line, 500)).median > SOUND_DB, 'Hal still hears');
      await listen.click();
      await gus.waitLine(line, 'listen', 'on');
      await waitFor('Gus hears Fay with listen on', async () => (await gus.lineLevel(line)) > SOUND_DB, {
        timeout: 5000,
        interval: 20,
      });
      assert.equal(await gus.control(line, 'volume').inputValue(), '50', 'the volume stayed');
      report(`listen off: max ${off.max} dBFS; on again: heard`);
    } finally {
      await fay
        .control(line, 'talk')
        .click()
        .catch(() => {});
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
    await ivy.tapTalk(line);
    await ivy.waitLine(line, 'talk', 'latched');
    await jon.control(line, 'volume').fill('60');
    await waitFor('Jon hears Ivy', async () => (await jon.lineLevel(line)) > SOUND_DB, { timeout: 5000, interval: 20 });
    await jon.pressTalk(line);
    await jon.waitLine(line, 'talk', 'momentary');
    const identities = [ivy.token.participantIdentity, jon.token.participantIdentity];
    const keys = [ivy.token.panelKey, jon.token.panelKey];

    const tDown = performance.now();
    await setLink(false);
    let downFor;
    try {
      await Promise.all([ivy.waitState('reconnecting', 20_000), jon.waitState('reconnecting', 20_000)]);
      const noticedMs = since(tDown);
      report(
        `network down: both panels say "${await jon.page.locator('#status-text').textContent()}" after ${noticedMs} ms`,
      );
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
    await waitFor('Jon hears Ivy again', async () => (await jon.lineLevel(line)) > SOUND_DB, {
      timeout: 30_000,
      interval: 20,
    });
    const audioMs = since(tUp);
    const rejoined = ivy.token.participantIdentity !== identities[0] || jon.token.participantIdentity !== identities[1];
    report(
      `network back after ${downFor} ms down (${ivy.name}, ${jon.name}): panels connected ${connectedMs} ms after link up, Jon hears Ivy ${audioMs} ms after link up (${rejoined ? 'rejoined with new tokens' : 'ICE recovered, same session'})`,
    );

    // A rejoined panel keeps its remote control's key (its link and QR code stay good).
    assert.deepEqual([ivy.token.panelKey, jon.token.panelKey], keys, 'panel keys kept over the loss');
    assert.equal(await ivy.page.locator('#remote-link').getAttribute('href'), ivy.token.panelUrl);
    assert.equal(await ivy.page.locator('#remote-link').getAttribute('href'), `${control.origin}/api/panel/${keys[0]}`);
    assert.equal((await ivy.lineState(line)).talk, 'latched', 'latch kept over the loss');
    assert.equal((await jon.lineState(line)).talk, 'off', 'the released key stayed off at mouse up');
    assert.equal(await jon.control(line, 'volume').inputValue(), '60', 'volume kept');
    const again = await jon.heard(line, 1500);
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

  check(
    'network loss of 5 s: reconnecting, then the line back with its latch and volume, a held key released',
    async () => {
      await networkLoss('foyer', ['Ivy', 'Jon'], 5_000);
    },
    { timeout: 90_000 },
  );

  check(
    'network loss of 15 s (ICE given up): every line rejoined with a new token, latch and volume kept',
    async () => {
      const { rejoined } = await networkLoss('stage-right', ['Kai', 'Lea'], 15_000);
      assert.ok(rejoined, 'a loss longer than the ICE grace rejoins');
    },
    { timeout: 120_000 },
  );

  check('phone: 360 px, light and dark, talk keys ≥ 44 px, no horizontal overflow; installable manifest', async () => {
    await mkdir(SHOTS, { recursive: true });
    for (const scheme of ['light', 'dark']) {
      const [kim, lou] = await onLine('stage-left', [`Kim-${scheme}`, `Lou-${scheme}`], { colorScheme: scheme });
      for (const p of [kim, lou]) await p.page.setViewportSize({ width: 360, height: 740 });
      await lou.pressTalk('stage-left');
      await kim.waitLine('stage-left', 'active', 'true');
      await waitFor('Kim hearing Lou', async () => (await kim.lineLevel('stage-left')) > SOUND_DB, {
        timeout: 5000,
        interval: 20,
      });
      await kim.page.screenshot({ path: join(SHOTS, `panel-360-${scheme}-listening.png`), fullPage: true });
      await lou.page.screenshot({ path: join(SHOTS, `panel-360-${scheme}-talking.png`), fullPage: true });
      await lou.page.mouse.up();
      const layout = await kim.page.evaluate(() => {
        const boxes = [...document.querySelectorAll('[data-line] button:not([hidden]), [data-line] input')].map(
          (el) => ({ action: el.dataset.action, ...el.getBoundingClientRect().toJSON() }),
        );
        return { scrollWidth: document.documentElement.scrollWidth, boxes };
      });
      assert.ok(layout.scrollWidth <= 360, `page ${layout.scrollWidth} px wide at 360`);
      for (const box of layout.boxes) assert.ok(box.height >= 44, `${box.action} is ${box.height} px high`);
      const key = layout.boxes.find((b) => b.action === 'talk');
      assert.ok(key.width >= 300 && key.height >= 88, `the talk key is ${key.width}×${key.height}`);
      await Promise.all([kim.close(), lou.close()]);
    }
    const manifest = await (await fetch(new URL('/join/manifest.webmanifest', control.origin))).json();
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

describe('crew panel, several lines per session', { timeout: 420_000 }, () => {
  const X = 'line-x';
  const Y = 'line-y';
  /** Each browser's fake microphone: a steady sine at its own frequency. */
  const TONES = { a: 440, b: 660, c: 880 };
  let control;
  let browsers;
  let stop;
  let twoLines;
  let talkY;
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  /** Opens `name` in browser `mic` (a, b or c) and joins `groupId`, or a preset `path`. */
  const open = async (mic, name, { groupId, path } = {}) => {
    const p = await Person.open(browsers[mic], control.origin, name, { path: path ?? '/' });
    people.push(p);
    if (path) await p.joinPreset();
    else await p.join(groupId);
    return p;
  };

  const position = async (name, listen, talk) => {
    const { status, body } = await control.admin('POST', '/positions', { name, listen, talk });
    assert.equal(status, 201, JSON.stringify(body));
    return body.position.id;
  };

  /** Waits until each of `crew` is connected, receives each of its lines, and sees `expected` on them. */
  const ready = async (crew, expected) => {
    await Promise.all(crew.map((p) => p.waitState('connected')));
    for (const [p, lines] of expected) {
      for (const [groupId, others] of Object.entries(lines)) {
        await waitFor(`${p.name} receiving ${groupId}`, async () => (await p.lineLevel(groupId)) !== null);
        for (const other of others) {
          await p.line(groupId).locator('.line-people', { hasText: other }).waitFor({ timeout: 5000 });
        }
      }
    }
  };

  /** Median above SOUND_DB on `groupId` with the dominant frequency `hz`. */
  const hearsTone = async (p, groupId, hz, what) => {
    await p.waitHearing(groupId);
    const [level, tone] = await Promise.all([p.heard(groupId), p.dominantHz(groupId)]);
    report(
      `${what}: ${p.name}'s ${groupId} median ${level.median} dBFS, dominant ${tone?.hz} Hz (${tone?.db} dB, AudioContext ${tone?.state}; sent ${hz} Hz)`,
    );
    assert.ok(level.median > SOUND_DB, `${p.name} hears ${groupId} at median ${level.median} dBFS`);
    assert.ok(Math.abs(tone.hz - hz) <= HZ_TOLERANCE, `${p.name}'s ${groupId} carries ${tone.hz} Hz, not ${hz} Hz`);
  };
  /** Presses `p`'s talk key on `groupId` and keeps it held; returns the release. */
  const hold = async (p, groupId) => {
    await p.pressTalk(groupId);
    await p.waitLine(groupId, 'talk', 'momentary');
    return async () => {
      await p.page.waitForTimeout(HOLD_MS);
      await p.page.mouse.up();
      await p.waitLine(groupId, 'talk', 'off');
    };
  };
  const latch = async (p, groupId) => {
    await p.tapTalk(groupId);
    await p.waitLine(groupId, 'talk', 'latched');
  };

  const inRoom = async (room) => {
    const probe = await control.janus.probe();
    try {
      const { participants } = await probe.call({ request: 'listparticipants', room });
      return new Map(participants.map((p) => [p.id, p]));
    } finally {
      await probe.close();
    }
  };

  before(async () => {
    ({ control, browsers, stop } = await startWithTones(['Line X', 'Line Y'], TONES));
    // Bea's panel: listens to X and Y, talks on X (Y listen-only). Dee's: listens to X only,
    // talks on Y only (X listen-only, Y talk-only). Made as an admin makes them.
    twoLines = await position('Two Lines', [X, Y], [X]);
    talkY = await position('Talk Y', [X], [Y]);
  });

  after(async () => {
    await setLink(true).catch(() => {});
    await reportLogsIfFailed(control, 80);
    await Promise.all(people.map((p) => p.close()));
    await stop?.();
  });

  check(
    'three people on two lines: each line carries its own talkers (level and frequency), B listens to X and Y, talks on X only',
    async () => {
      const panel = twoLines;
      const a = await open('a', 'Ann', { groupId: X });
      const b = await open('b', 'Bea', { path: `/?position=${panel}` });
      const c = await open('c', 'Cal', { groupId: Y });
      await ready(
        [a, b, c],
        [
          [a, { [X]: ['Bea'] }],
          [b, { [X]: ['Ann'], [Y]: ['Cal'] }],
          [c, { [Y]: ['Bea'] }],
        ],
      );
      assert.equal(await b.page.locator('[data-line]').count(), 2, 'Bea has two lines');
      const bx = await b.lineState(X);
      const by = await b.lineState(Y);
      assert.equal(bx.talk, 'off', 'line X has a talk key');
      assert.equal(by.talk, undefined, 'line Y is listen-only: no data-talk');
      assert.equal(await b.control(Y, 'talk').isVisible(), false, 'no talk key on Y');
      assert.equal(by.listen, 'on');
      assert.match(await b.page.locator('#status-text').textContent(), /Connected to 2 lines/);
      // One identity for both lines; both rooms list it.
      const identity = b.token.participantIdentity;
      assert.deepEqual(
        b.token.lines.map((l) => [l.groupId, l.listen, l.talk]),
        [
          [X, true, true],
          [Y, true, false],
        ],
      );
      assert.ok(
        (await inRoom(X)).has(identity) && (await inRoom(Y)).has(identity),
        'Bea is in both rooms under one identity',
      );
      const bea = await control.user('Bea');
      report(`Bea in /api/admin/users: ${JSON.stringify(bea.lines)}`);
      assert.deepEqual(
        bea.lines.map((l) => [l.groupId, l.joined]),
        [
          [X, true],
          [Y, true],
        ],
      );

      // Nobody talks: silence everywhere.
      for (const [p, line] of [
        [a, X],
        [b, X],
        [b, Y],
        [c, Y],
      ])
        await p.assertSilent(line, 'nobody talks', 500);

      // Ann holds talk on X: Bea sees and hears her on X (440 Hz), not on Y; Cal hears nothing.
      await a.control(X, 'talk').hover();
      const t0 = performance.now();
      await a.page.mouse.down();
      try {
        await b.waitLine(X, 'talkers', 'Ann');
        const lightMs = since(t0);
        report(
          `Ann talks on X: in Bea's X data-talkers ${lightMs} ms after her key went down (limit ${TALKER_LIGHT_MS})`,
        );
        assert.ok(lightMs <= TALKER_LIGHT_MS, `talker light after ${lightMs} ms`);
        await hearsTone(b, X, TONES.a, 'Ann talks on X');
        assert.equal((await b.lineState(Y)).active, 'false');
        const by = await b.assertSilent(Y, 'Ann talks on X');
        const cy = await c.assertSilent(Y, 'Ann talks on X');
        report(`Ann talks on X: Bea's Y max ${by} dBFS, Cal's Y max ${cy} dBFS`);
      } finally {
        await a.page.mouse.up();
      }
      await waitFor("Bea's X quiet again", async () => (await b.lineLevel(X)) < QUIET_DB, { timeout: 6000 });

      // Bea holds talk on X: Ann hears her (660 Hz), Cal does not.
      let release = await hold(b, X);
      try {
        await a.waitLine(X, 'talkers', 'Bea');
        await hearsTone(a, X, TONES.b, 'Bea talks on X');
        report(`Bea talks on X: Cal's Y max ${await c.assertSilent(Y, 'Bea talks on X')} dBFS`);
      } finally {
        await release();
      }
      await waitFor("Ann's X quiet again", async () => (await a.lineLevel(X)) < QUIET_DB, { timeout: 6000 });

      // Cal holds talk on Y: Bea hears him on Y only (880 Hz); her X and Ann stay silent.
      release = await hold(c, Y);
      try {
        await b.waitLine(Y, 'talkers', 'Cal');
        assert.equal((await b.lineState(X)).active, 'false');
        await hearsTone(b, Y, TONES.c, 'Cal talks on Y');
        const [bx2, ax] = await Promise.all([b.assertSilent(X, 'Cal talks on Y'), a.assertSilent(X, 'Cal talks on Y')]);
        report(`Cal talks on Y: Bea's X max ${bx2} dBFS, Ann's X max ${ax} dBFS`);
      } finally {
        await release();
      }
      assert.deepEqual([...a.errors, ...b.errors, ...c.errors], []);
      await Promise.all([a, b, c].map((p) => p.close()));
    },
    { timeout: 90_000 },
  );

  check("call on X: Bea's line X flashes within 1 s, Cal's panel does not, and it clears after about 5 s", async () => {
    const panel = twoLines;
    const a = await open('a', 'Abe', { groupId: X });
    const b = await open('b', 'Bo', { path: `/?position=${panel}` });
    const c = await open('c', 'Cy', { groupId: Y });
    await ready(
      [a, b, c],
      [
        [a, { [X]: ['Bo'] }],
        [b, { [X]: ['Abe'], [Y]: ['Cy'] }],
        [c, { [Y]: ['Bo'] }],
      ],
    );
    const call = a.control(X, 'call');
    await call.waitFor({ state: 'visible', timeout: 5000 });
    assert.equal(await b.control(Y, 'call').isVisible(), true, 'a listen-only line can be called too');
    const t0 = performance.now();
    await call.click();
    await b.waitLine(X, 'call', 'true', 2000);
    const flashMs = since(t0);
    assert.match(await b.line(X).locator('.line-talkers').textContent(), /Call from Abe/);
    assert.equal((await b.lineState(Y)).call, 'false', "Bo's Y does not flash");
    const users = await control.users();
    report(
      `call: Bo's X data-call="true" ${flashMs} ms after Abe's click (limit 1000); admin's view: ${JSON.stringify(users.find((u) => u.username === 'Bo')?.lines)}`,
    );
    assert.ok(flashMs <= 1000, `call shown after ${flashMs} ms`);
    // Cal's panel: no call on any line for the next 1.5 s.
    const cCalls = await c.page.evaluate(async () => {
      const seen = new Set();
      const end = performance.now() + 1500;
      while (performance.now() < end) {
        for (const el of document.querySelectorAll('[data-line]')) seen.add(el.dataset.call);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return [...seen];
    });
    assert.deepEqual(cCalls, ['false'], 'Cy sees no call');
    await b.waitLine(X, 'call', 'false', 8000);
    const clearMs = since(t0);
    report(`call: cleared on Bo's X ${clearMs} ms after the click; Cy's panel showed data-call ${cCalls}`);
    assert.ok(clearMs >= 4500 && clearMs <= 6500, `cleared after ${clearMs} ms`);
    assert.deepEqual([...a.errors, ...b.errors, ...c.errors], []);
    await Promise.all([a, b, c].map((p) => p.close()));
  });

  check("a listen-only line joins and hears without sending; a talk-only line's talk reaches its room", async () => {
    // Dee: listen to X (listen-only), talk to Y (talk-only).
    const panel = talkY;
    const a = await open('b', 'Eva', { groupId: X }); // 660 Hz
    const d = await open('a', 'Dee', { path: `/?position=${panel}` }); // 440 Hz
    const c = await open('c', 'Fox', { groupId: Y });
    await ready(
      [a, d, c],
      [
        [a, { [X]: ['Dee'] }],
        [d, { [X]: ['Eva'] }],
        [c, { [Y]: ['Dee'] }],
      ],
    );
    const dx = await d.lineState(X);
    const dy = await d.lineState(Y);
    assert.deepEqual([dx.listen, dx.talk, dy.listen, dy.talk], ['on', undefined, 'off', 'off']);
    assert.equal(await d.control(Y, 'listen').isDisabled(), true, 'a talk-only line cannot be listened to');
    const identity = d.token.participantIdentity;
    const [roomX, roomY] = [await inRoom(X), await inRoom(Y)];
    report(`Janus: Dee in X ${JSON.stringify(roomX.get(identity))}, in Y ${JSON.stringify(roomY.get(identity))}`);
    assert.equal(roomX.get(identity)?.muted, true, 'the listen-only line is in X, muted');
    assert.equal(roomY.get(identity)?.muted, true, 'the talk-only line is in Y, muted until its key');

    // The listen-only line hears X.
    const release = await hold(a, X);
    try {
      await hearsTone(d, X, TONES.b, 'Eva talks on X, Dee listens only');
    } finally {
      await release();
    }
    // The talk-only line talks to Y: Fox hears Dee (440 Hz); Dee's Y receives nothing at all.
    await latch(d, Y);
    try {
      await waitFor('Dee unmuted in Y', async () => (await inRoom(Y)).get(identity)?.muted === false);
      await c.waitLine(Y, 'talkers', 'Dee');
      await hearsTone(c, Y, TONES.a, 'Dee talks on her talk-only Y');
      assert.equal(await d.lineLevel(Y), null, 'the talk-only line has no stream from its room (offered sendonly)');
      report(`Dee's own Y (talk-only): no stream; Eva's X max ${await a.assertSilent(X, 'Dee talks on Y')} dBFS`);
    } finally {
      await d.control(Y, 'talk').click();
    }
    assert.deepEqual([...a.errors, ...d.errors, ...c.errors], []);
    await Promise.all([a, d, c].map((p) => p.close()));
  });

  check(
    'the admin takes line Y from Hana: that card says so, line X goes on, also after a rejoin',
    async () => {
      const a = await open('a', 'Gil', { groupId: X });
      const b = await open('b', 'Hana', { path: `/?position=${twoLines}` });
      const c = await open('c', 'Ike', { groupId: Y });
      await ready(
        [a, b, c],
        [
          [a, { [X]: ['Hana'] }],
          [b, { [X]: ['Gil'], [Y]: ['Ike'] }],
          [c, { [Y]: ['Hana'] }],
        ],
      );
      await latch(a, X);
      await latch(c, Y);
      await Promise.all([b.waitHearing(X), b.waitHearing(Y)]);
      const identity = b.token.participantIdentity;

      const t0 = performance.now();
      const { status, body } = await control.admin('DELETE', `/users/${encodeURIComponent(identity)}/lines/${Y}`);
      assert.ok(status >= 200 && status < 300, `DELETE line: ${status} ${JSON.stringify(body)}`);
      await b.waitLine(Y, 'ended', 'removed', 5000);
      const endedMs = since(t0);
      const message = await b.line(Y).locator('.line-ended').textContent();
      report(`line Y taken from Hana: her card shows it ${endedMs} ms after the DELETE ("${message}")`);
      assert.match(message, /took you off Line Y/);
      assert.equal(await b.state(), 'connected', 'the panel stays connected');
      assert.match(await b.page.locator('#status-text').textContent(), /Connected to Line X/);
      assert.equal((await b.lineState(Y)).levelIn, undefined, 'no audio on the removed line');
      // Line X keeps flowing, for some seconds after the removal.
      await b.page.waitForTimeout(2000);
      await hearsTone(b, X, TONES.a, 'after line Y was taken');
      assert.equal(await b.state(), 'connected');
      // Janus and the admin's view: out of Y, still in X.
      assert.equal((await inRoom(Y)).has(identity), false, 'out of room Y');
      assert.equal((await inRoom(X)).has(identity), true, 'still in room X');
      const hana = await control.user('Hana');
      report(`Hana in /api/admin/users after: ${JSON.stringify(hana?.lines)}`);
      assert.deepEqual(
        hana.lines.map((l) => l.groupId),
        [X],
      );
      // Ike no longer sees Hana on Y.
      await c.line(Y).locator('.line-people', { hasText: 'Nobody else on the line' }).waitFor({ timeout: 5000 });

      // A network loss longer than the ICE grace makes the panel rejoin with a new token: it asks
      // for line X only, and Y's card still says it was taken.
      const tDown = performance.now();
      await setLink(false);
      try {
        await b.waitState('reconnecting', 20_000);
        const rest = 15_000 - since(tDown);
        if (rest > 0) await new Promise((resolve) => setTimeout(resolve, rest));
      } finally {
        await setLink(true);
      }
      const tUp = performance.now();
      await waitFor(
        'Hana rejoined with a new token',
        async () => b.token.participantIdentity !== identity && (await b.state()) === 'connected',
        { timeout: 30_000 },
      );
      await b.waitHearing(X, 30_000);
      report(
        `after a 15 s loss Hana rejoined (${since(tUp)} ms after link up to audio on X) with lines ${JSON.stringify(b.token.lines.map((l) => l.groupId))}; Y's card: data-ended=${(await b.lineState(Y)).ended}`,
      );
      assert.deepEqual(
        b.token.lines.map((l) => l.groupId),
        [X],
        'the rejoin does not ask for the line taken away',
      );
      assert.equal((await b.lineState(Y)).ended, 'removed');
      assert.equal((await inRoom(Y)).has(b.token.participantIdentity), false);
      assert.deepEqual([...a.errors, ...b.errors, ...c.errors], []);
      await a.control(X, 'talk').click();
      await c.control(Y, 'talk').click();
      await Promise.all([a, b, c].map((p) => p.close()));
    },
    { timeout: 120_000 },
  );

  check(
    'network loss of 5 s with two lines: both lines back, the latch on X and the volume on Y kept',
    async () => {
      const a = await open('a', 'Jo', { groupId: X });
      const b = await open('b', 'Kit', { path: `/?position=${twoLines}` });
      const c = await open('c', 'Lu', { groupId: Y });
      await ready(
        [a, b, c],
        [
          [a, { [X]: ['Kit'] }],
          [b, { [X]: ['Jo'], [Y]: ['Lu'] }],
          [c, { [Y]: ['Kit'] }],
        ],
      );
      await latch(a, X);
      await latch(c, Y);
      await latch(b, X);
      await b.control(Y, 'volume').fill('60');
      await Promise.all([b.waitHearing(X), b.waitHearing(Y), a.waitHearing(X)]);

      const tDown = performance.now();
      await setLink(false);
      let downFor;
      try {
        await Promise.all([a, b, c].map((p) => p.waitState('reconnecting', 20_000)));
        report(`two lines, network down: the panels say reconnecting after ${since(tDown)} ms`);
        const rest = 5_000 - since(tDown);
        if (rest > 0) await new Promise((resolve) => setTimeout(resolve, rest));
      } finally {
        downFor = since(tDown);
        await setLink(true);
      }
      const tUp = performance.now();
      await Promise.all([a, b, c].map((p) => p.waitState('connected', 30_000)));
      const connectedMs = since(tUp);
      const times = {};
      await Promise.all(
        [
          [b, X],
          [b, Y],
          [a, X],
        ].map(async ([p, line]) => {
          await p.waitHearing(line, 30_000);
          times[`${p.name} ${line}`] = since(tUp);
        }),
      );
      report(
        `two lines, network back after ${downFor} ms down: panels connected ${connectedMs} ms after link up; audio after link up: ${Object.entries(
          times,
        )
          .map(([k, v]) => `${k} ${v} ms`)
          .join(', ')}`,
      );
      assert.equal((await b.lineState(X)).talk, 'latched', 'the latch on X kept');
      assert.equal(await b.control(Y, 'volume').inputValue(), '60', 'the volume of Y kept');
      assert.equal((await b.lineState(Y)).talk, undefined);
      await hearsTone(b, X, TONES.a, 'after the loss');
      await hearsTone(b, Y, TONES.c, 'after the loss');
      await hearsTone(a, X, TONES.b, 'after the loss');
      assert.deepEqual([...a.errors, ...b.errors, ...c.errors], []);
      await Promise.all([a, b, c].map((p) => p.close()));
    },
    { timeout: 90_000 },
  );
});
