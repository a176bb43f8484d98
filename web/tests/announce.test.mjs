// The announce key in real browsers: Ann joins the position Desk (`announce: true`, talk on A
// and B, listen only on C); Ben listens to A, B and C. Ann's fake microphone is a 440 Hz tone.
//
// - one tap of Ann's announce key latches talk on A and B: Ben hears her on both and nothing on
//   C (the position's listen-only line); a second tap lets both go;
// - a hold talks on both while held; the keyboard's `A` works it too;
// - the admin mutes Ann on B: the announce talks on A only (B stays silent for Ben), and the
//   remote control's announce (`POST /api/panel/{key}/announce`) does the same;
// - a panel without the key (an ad-hoc join) shows none, and its surface's announce is refused
//   with 409 `cannot_announce`.
//
// Run: scripts/test-browser web/tests/announce.test.mjs.

import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { Person, report, startWithTones, trackedTests } from './harness.mjs';

const [A, B, C] = ['a', 'b', 'c'];
const DESK = { name: 'Desk', listen: [A, B, C], talk: [A, B], announce: true };

describe('the announce key: every talk line at once, and nowhere else', { timeout: 240_000 }, () => {
  let control;
  let browsers;
  let stop;
  let ann;
  let ben;
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  /** A control surface's announce through Ann's panel key: `{ status, body }`. */
  const surfaceAnnounce = async (key, state) => {
    const response = await fetch(`${control.origin}/api/panel/${key}/announce`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ state }),
    });
    return { status: response.status, body: await response.json() };
  };

  const announceKey = () => ann.page.locator('#announce');
  const announceState = () => announceKey().getAttribute('data-talk');

  /** What Ben hears of Ann: which of A, B, C carry her tone now. */
  const benHears = async () => {
    const levels = await Promise.all([A, B, C].map((g) => ben.heard(g, 800)));
    return Object.fromEntries([A, B, C].map((g, i) => [g, levels[i].median > -50]));
  };

  before(async () => {
    ({ control, browsers, stop } = await startWithTones(['A', 'B', 'C'], { ann: 440, ben: 660 }));
    const { status, body } = await control.admin('POST', '/positions', DESK);
    assert.equal(status, 201, JSON.stringify(body));
    assert.equal(body.position.announce, true, JSON.stringify(body));
    ann = await Person.joined(browsers.ann, control.origin, 'Ann', '/?position=desk');
    people.push(ann);
    ben = await Person.joined(browsers.ben, control.origin, 'Ben', `/?groups=${A},${B},${C}`);
    people.push(ben);
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    await Promise.all(people.map((p) => p.close()));
    await stop?.();
  });

  check('a tap latches talk on every talk line, heard on each and nowhere else; a second tap stops it', async () => {
    assert.equal(await announceKey().isVisible(), true, 'the position gives an announce key');
    assert.deepEqual(await benHears(), { a: false, b: false, c: false }, 'silent before');
    await announceKey().click();
    await ann.waitLine(A, 'talk', 'latched');
    await ann.waitLine(B, 'talk', 'latched');
    assert.equal(await announceState(), 'latched');
    await ben.waitHearing(A);
    await ben.waitHearing(B);
    const heard = await benHears();
    report(`announce latched: Ben hears Ann on ${JSON.stringify(heard)}`);
    assert.deepEqual(heard, { a: true, b: true, c: false }, 'on both talk lines, not on C');
    await announceKey().click();
    await ann.waitLine(A, 'talk', 'off');
    await ann.waitLine(B, 'talk', 'off');
    assert.equal(await announceState(), 'off');
    await ben.waitQuiet(A);
    await ben.waitQuiet(B);
  });

  check('a hold talks on both while held, by the pointer and by the key A', async () => {
    await announceKey().hover();
    await ann.page.mouse.down();
    await ann.waitLine(A, 'talk', 'momentary');
    await ann.waitLine(B, 'talk', 'momentary');
    await ben.waitHearing(B);
    await ann.page.waitForTimeout(400); // past a tap: the release ends it
    await ann.page.mouse.up();
    await ann.waitLine(A, 'talk', 'off');
    await ann.waitLine(B, 'talk', 'off');

    await ann.page.keyboard.down('a');
    await ann.waitLine(A, 'talk', 'momentary');
    await ann.waitLine(B, 'talk', 'momentary');
    await ann.page.waitForTimeout(400);
    await ann.page.keyboard.up('a');
    await ann.waitLine(B, 'talk', 'off');
    await ben.waitQuiet(A);
  });

  check('a line the admin mutes Ann on is left out, on the panel and by the remote control', async () => {
    const id = ann.token.participantIdentity;
    assert.equal((await control.admin('POST', `/users/${id}/lines/${B}/mute`)).status, 200);
    await ann.waitLine(B, 'admin', 'muted');
    await announceKey().click();
    await ann.waitLine(A, 'talk', 'latched');
    await ben.waitHearing(A);
    assert.deepEqual(await benHears(), { a: true, b: false, c: false }, 'A only: the admin holds B');
    assert.equal(await announceState(), 'latched', 'on: every line it may talk on talks');
    await announceKey().click();
    await ann.waitLine(A, 'talk', 'off');
    await ben.waitQuiet(A);

    const key = ann.token.panelKey;
    const on = await surfaceAnnounce(key, 'toggle');
    assert.equal(on.status, 200, JSON.stringify(on.body));
    assert.deepEqual([on.body.announce, on.body.announcing], [true, true], JSON.stringify(on.body));
    await ben.waitHearing(A);
    assert.deepEqual(await benHears(), { a: true, b: false, c: false }, 'the surface: A only');
    const off = await surfaceAnnounce(key, 'toggle');
    assert.equal(off.status, 200, JSON.stringify(off.body));
    assert.equal(off.body.announcing, false, JSON.stringify(off.body));
    await ann.waitLine(A, 'talk', 'off');
    assert.equal((await control.admin('POST', `/users/${id}/lines/${B}/unmute`)).status, 200);
  });

  check('a panel without the key shows none, and its surface is refused', async () => {
    assert.equal(await ben.page.locator('#announce').isVisible(), false);
    const refused = await surfaceAnnounce(ben.token.panelKey, 'on');
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'cannot_announce', JSON.stringify(refused.body));
    assert.deepEqual([...ann.errors, ...ben.errors], []);
  });
});
