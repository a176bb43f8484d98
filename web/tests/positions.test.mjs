// Positions, join links and the users' lines in the admin UI (/admin), in a real browser against
// the real partyline-control and a real Janus (harness.mjs):
//
// - the Positions tab: create, edit the lines and the announce key, delete, each checked in the
//   YAML on disk; the API's 400 (no line) and 409 (name taken) next to the form, word for word;
//   a group renamed shows in the position; deleting a group a position holds shows the 409
//   naming it;
// - join links: each QR code, screenshotted, decodes (jsQR, a devDependency) to the link shown
//   next to it; the position's link opens the panel preset to that position, and joins;
// - PINs (positions and groups): shown as "PIN set", never in clear in the page or the YAML;
//   "Remove the PIN" removes it;
// - the Users tab: a panel joined as a position shows its lines (listen/talk, joined), a called
//   line flashes (`data-call`) while the API reports it, and "remove from this line" takes one
//   line away (checked in /api/admin/users) while the other stays;
// - the Positions and Users tabs at 360 px, light and dark: no horizontal overflow;
//   screenshots admin-positions*.png and admin-mobile-positions*.png in target/ui-screenshots/.
//
// Run: cargo build -p partyline-control, then scripts/netns-run node --test web/tests/positions.test.mjs
// (PARTYLINE_CONTROL_BIN for another target directory), or scripts/test-browser.

import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import jsQR from 'jsqr';
import {
  PHONE_VIEWPORT,
  Person,
  SHOTS,
  openAdmin,
  report,
  startWithBrowser,
  trackedTests,
  waitFor,
} from './harness.mjs';

/** The UI refreshes every 3 s (start to start); one fetch on top of that is the grace. */
const REFRESH_BOUND_MS = 3_000 + 500;
const POSITION_PIN = '482913';
const GROUP_PIN = '135791';

describe("admin UI: positions, join links, users' lines", { timeout: 180_000 }, () => {
  let control;
  let browser;
  let stop;
  let page; // the admin's desktop page, logged in
  let sam; // a panel joined through the position's link
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  /** A logged-in admin page in a new browser context. */
  const adminPage = (options) => openAdmin(browser, control.origin, { token: control.adminToken, ...options });

  const yaml = () => readFile(join(control.dir, 'partyline.yaml'), 'utf8');

  /** The text of one top-level section of the YAML on disk (`key:` up to the next top-level key). */
  async function yamlSection(key) {
    const lines = (await yaml()).split('\n');
    const start = lines.indexOf(`${key}:`);
    if (start < 0) return '';
    const end = lines.findIndex((line, i) => i > start && /^[A-Za-z_]/.test(line));
    return lines.slice(start + 1, end < 0 ? undefined : end).join('\n');
  }

  /**
   * The positions in the YAML on disk, from the block lists control writes
   * (`- name: X` / `listen:` / `- id` …): `{ name: { listen: [...], talk: [...], pin } }`.
   */
  async function yamlPositions() {
    const positions = {};
    let current;
    let list;
    for (const line of (await yamlSection('positions')).split('\n')) {
      const name = line.match(/^\s*- name: '?(.*?)'?$/);
      const key = line.match(/^\s+(listen|talk|pin):\s*(.*)$/);
      const item = line.match(/^\s*- '?([^:']+?)'?$/);
      if (name) {
        current = { listen: [], talk: [], pin: null };
        positions[name[1]] = current;
        list = null;
      } else if (key && current) {
        if (key[1] === 'pin') {
          current.pin = key[2];
          list = null;
        } else {
          list = current[key[1]];
          // The flow style (`listen: [a, b]`) too.
          const flow = key[2].match(/^\[(.*)\]$/);
          if (flow)
            list.push(
              ...flow[1]
                .split(',')
                .map((s) => s.trim().replace(/^'|'$/g, ''))
                .filter(Boolean),
            );
        }
      } else if (item && list) {
        list.push(item[1]);
      }
    }
    return positions;
  }

  /**
   * Decodes the QR code shown by `locator` from a screenshot of it: the PNG's pixels are read in
   * a blank page (no CSP), then jsQR decodes them here.
   */
  async function decodeQr(locator) {
    const png = await locator.screenshot();
    const context = await browser.newContext();
    const blank = await context.newPage();
    const image = await blank.evaluate(async (base64) => {
      const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
      const bitmap = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
      const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
      const g = canvas.getContext('2d');
      g.drawImage(bitmap, 0, 0);
      const data = g.getImageData(0, 0, bitmap.width, bitmap.height);
      return { width: data.width, height: data.height, pixels: Array.from(data.data) };
    }, png.toString('base64'));
    await context.close();
    const code = jsQR(Uint8ClampedArray.from(image.pixels), image.width, image.height);
    return { text: code?.data ?? null, width: image.width, version: code?.version };
  }

  /**
   * A crew member joined through the API: `POST /api/token` with lines, then one AudioBridge
   * handle per line joining its room with the token (Janus's HTTP API, no media), as the panel
   * does over WebSocket. `close()` destroys the Janus session.
   */
  async function joinThroughApi(username, lines) {
    const response = await fetch(`${control.origin}/api/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username, ...lines }),
    });
    const issued = await response.json();
    assert.equal(response.status, 200, JSON.stringify(issued));
    const { janus } = control;
    const session = await janus.request('', { janus: 'create' }, issued.token);
    assert.equal(session.janus, 'success', JSON.stringify(session));
    const path = `/${session.data.id}`;
    for (const line of issued.lines) {
      const handle = await janus.request(path, { janus: 'attach', plugin: 'janus.plugin.audiobridge' }, issued.token);
      assert.equal(handle.janus, 'success', JSON.stringify(handle));
      const join = {
        request: 'join',
        room: line.roomName,
        id: issued.participantIdentity,
        display: username,
        muted: true,
        token: issued.token,
        group: 'local',
      };
      const sent = await janus.request(`${path}/${handle.data.id}`, { janus: 'message', body: join }, issued.token);
      assert.ok(['ack', 'success'].includes(sent.janus), JSON.stringify(sent));
    }
    // Janus drops a session without a request for a minute: keep it alive meanwhile.
    const keepalive = setInterval(
      () => janus.request(path, { janus: 'keepalive' }, issued.token).catch(() => {}),
      15_000,
    );
    return {
      issued,
      close: async () => {
        clearInterval(keepalive);
        await janus.request(path, { janus: 'destroy' }, issued.token).catch(() => {});
      },
    };
  }

  const noOverflow = (p) => p.evaluate(() => ({ scrollWidth: document.scrollingElement.scrollWidth, innerWidth }));
  const positionRow = (id) => page.locator(`#positions-rows tr[data-key="${id}"]`);
  const form = () => page.locator('#position-form');

  /** Ticks the form's checkboxes: `{ listen: [ids], talk: [ids] }`, every other box unticked. */
  async function pick({ listen = [], talk = [] }) {
    for (const box of await page.locator('#position-line-rows input[type="checkbox"]').all()) {
      const [kind, value] = await box.evaluate((b) => [b.name, b.value]);
      await box.setChecked((kind === 'listen' ? listen : talk).includes(value));
    }
  }

  before(async () => {
    ({ control, browser, stop } = await startWithBrowser(['Stage Left', 'Backstage', 'FOH']));
    await mkdir(SHOTS, { recursive: true });
    page = await adminPage();
  });

  after(async () => {
    await reportLogsIfFailed(control);
    await Promise.all(people.map((p) => p.close()));
    // Closing the browser closes the admin pages' contexts too.
    await stop?.();
  });

  check(
    'positions: create, edit the lines, 400 and 409 next to the form, delete; each in the YAML on disk',
    async () => {
      await page.locator('#tab-lines').click();
      await page.locator('#positions-empty').waitFor({ state: 'visible' });
      await waitFor(
        'a Listen/Talk row per group',
        async () => (await page.locator('#position-line-rows .line-pick').count()) === 3,
      );

      // Create: Stage Left both ways, Backstage listen only.
      await page.locator('#position-name').fill('Stage Manager');
      await pick({ listen: ['stage-left', 'backstage'], talk: ['stage-left'] });
      assert.match(await page.locator('#position-lines-count').textContent(), /^2 of at most 12 lines/);
      await page.locator('#position-submit').click();
      const row = positionRow('stage-manager');
      await row.waitFor();
      assert.match(
        await row.textContent(),
        /Stage Manager.*stage-manager.*Stage Left listen · talk.*Backstage listen only/,
      );
      assert.deepEqual((await yamlPositions())['Stage Manager'], {
        listen: ['stage-left', 'backstage'],
        talk: ['stage-left'],
        pin: null,
      });
      assert.doesNotMatch(await yamlSection('positions'), /announce/, 'no announce key unless asked');
      assert.equal(await page.locator('#position-name').inputValue(), '', 'the form is emptied after a create');
      assert.equal(await page.locator('#position-line-rows input:checked').count(), 0);

      // Edit the lines: Backstage off, FOH talk only; and an announce key.
      await row.getByRole('button', { name: 'Edit Stage Manager' }).click();
      assert.equal(await page.locator('#position-form-title').textContent(), 'Edit “Stage Manager”');
      assert.equal(await page.locator('#position-name').inputValue(), 'Stage Manager');
      assert.equal(await page.locator('#position-listen-backstage').isChecked(), true, 'the form shows the lines');
      await page.locator('#position-listen-backstage').uncheck();
      await page.locator('#position-talk-foh').check();
      await page.locator('#position-announce').check();
      await page.locator('#position-submit').click();
      await waitFor('the row to show the new lines', async () => /FOH talk only/.test(await row.textContent()));
      assert.equal(await row.locator('.position-announce').isVisible(), true, "the row's Announce badge");
      assert.match(await yamlSection('positions'), /announce: true/);
      assert.doesNotMatch(await row.textContent(), /Backstage/);
      assert.deepEqual((await yamlPositions())['Stage Manager'], {
        listen: ['stage-left'],
        talk: ['stage-left', 'foh'],
        pin: null,
      });
      assert.equal(await page.locator('#position-form-title').textContent(), 'New position', 'back to a create form');

      // 400: no line. The API's own message, next to the form.
      const error = form().locator('#position-error');
      await page.locator('#position-name').fill('Nobody');
      await page.locator('#position-submit').click();
      await error.waitFor({ state: 'visible' });
      const none = await control.admin('POST', '/positions', { name: 'Nobody', listen: [], talk: [] });
      assert.equal(none.status, 400);
      assert.equal(await error.textContent(), none.body.error);
      report(`positions: the 400 shown: ${none.body.error}`);

      // 409: the name of an existing position (same id).
      await page.locator('#position-name').fill('stage MANAGER');
      await pick({ listen: ['backstage'] });
      await page.locator('#position-submit').click();
      await waitFor('the 409 shown', async () => /already exists/.test(await error.textContent()));
      const taken = await control.admin('POST', '/positions', {
        name: 'stage MANAGER',
        listen: ['backstage'],
        talk: [],
      });
      assert.equal(taken.status, 409);
      assert.equal(await error.textContent(), taken.body.error);
      assert.equal(await page.locator('#position-name').inputValue(), 'stage MANAGER', 'what was typed stays');
      assert.deepEqual(Object.keys(await yamlPositions()), ['Stage Manager']);

      // Create another and delete it, confirmed in place (Escape first changes nothing).
      await page.locator('#position-name').fill('Spare');
      await page.locator('#position-submit').click();
      const spare = positionRow('spare');
      await spare.waitFor();
      assert.equal(await error.isHidden(), true, 'a success clears the error');
      assert.deepEqual(Object.keys(await yamlPositions()), ['Stage Manager', 'Spare']);
      await spare.getByRole('button', { name: 'Delete Spare' }).click();
      await spare.getByRole('button', { name: 'Delete Spare' }).press('Escape');
      assert.deepEqual(Object.keys(await yamlPositions()), ['Stage Manager', 'Spare']);
      await spare.getByRole('button', { name: 'Delete Spare' }).click();
      assert.equal(await spare.getByRole('button', { name: 'Confirm: Delete Spare' }).textContent(), 'Confirm?');
      await spare.getByRole('button', { name: 'Confirm: Delete Spare' }).click();
      await spare.waitFor({ state: 'detached' });
      assert.deepEqual(Object.keys(await yamlPositions()), ['Stage Manager']);
      assert.deepEqual(page.errors, []);
    },
  );

  check(
    'a group renamed shows in the position; deleting a group a position holds shows the 409 naming it',
    async () => {
      // Renamed through the groups' form.
      await page.locator('#tab-lines').click();
      const foh = page.locator('#groups-rows tr[data-key="foh"]');
      await foh.getByRole('button', { name: 'Edit FOH' }).click();
      await page.locator('#edit-foh-name').fill('Front of House');
      await foh.getByRole('button', { name: 'Save' }).click();
      await page.locator('#groups-rows tr[data-key="front-of-house"]').waitFor();

      await page.locator('#tab-lines').click();
      const row = positionRow('stage-manager');
      await waitFor('the position to show the new name', async () =>
        /Front of House talk only/.test(await row.textContent()),
      );
      assert.deepEqual((await yamlPositions())['Stage Manager'].talk, ['stage-left', 'front-of-house']);
      // The picker follows too.
      await page.locator('#position-talk-front-of-house').waitFor({ state: 'attached' });

      // Deleting it: refused, the message names the position.
      await page.locator('#tab-lines').click();
      const renamed = page.locator('#groups-rows tr[data-key="front-of-house"]');
      await renamed.getByRole('button', { name: 'Delete Front of House' }).click();
      await renamed.getByRole('button', { name: 'Confirm: Delete Front of House' }).click();
      const listError = page.locator('#groups-error');
      await listError.waitFor({ state: 'visible' });
      const api = await control.admin('DELETE', '/groups/front-of-house');
      assert.equal(api.status, 409);
      assert.match(api.body.error, /Stage Manager/);
      assert.equal(await listError.textContent(), `Could not delete “Front of House”: ${api.body.error}`);
      assert.equal(await renamed.count(), 1, 'the group stays');
    },
  );

  check(
    'join links: each QR code decodes to its link; the position link opens the panel preset and joins',
    async () => {
      await page.locator('#tab-lines').click();
      const origin = control.origin.replace(/\/$/, '');
      const cases = [
        ['position:stage-manager', `${origin}/?position=stage-manager`],
        ['group:stage-left', `${origin}/?groups=stage-left&talk=stage-left`],
        ['group:front-of-house', `${origin}/?groups=front-of-house&talk=front-of-house`],
      ];
      for (const [key, expected] of cases) {
        const card = page.locator(`#join-links [data-key="${key}"]`);
        await card.waitFor();
        const shown = await card.locator('.join-link').textContent();
        assert.equal(shown, expected);
        assert.equal(await card.locator('.join-link').getAttribute('href'), expected);
        const decoded = await decodeQr(card.locator('.qr'));
        report(
          `join link QR (${key}): ${decoded.width} px wide, version ${decoded.version}, decodes to ${decoded.text}`,
        );
        assert.equal(decoded.text, shown, `the QR code of ${key} decodes to the link shown`);
      }

      // Copy: the clipboard gets the link.
      await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
      const card = page.locator('#join-links [data-key="position:stage-manager"]');
      await card.getByRole('button', { name: 'Copy the join link of Stage Manager' }).click();
      await waitFor('"Copied"', async () => (await card.locator('.link-copied').textContent()) === 'Copied');
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), cases[0][1]);

      // The position's link, decoded, opened on a phone: the panel is preset to the position.
      const { text } = await decodeQr(card.locator('.qr'));
      sam = await Person.open(browser, control.origin, 'Sam', { path: text });
      people.push(sam);
      const preset = sam.page.locator('#preset');
      await waitFor('the panel preset', async () => (await preset.isVisible()) && (await preset.textContent()));
      assert.equal(await preset.textContent(), 'Position: Stage Manager');
      assert.equal(await sam.page.locator('#group-field').isHidden(), true, 'no group to pick');
      await sam.page.locator('#username').fill('Sam');
      await sam.page.locator('#join').click();
      await sam.waitState('connected');
      assert.deepEqual(
        sam.token.lines.map((l) => [l.groupId, l.listen, l.talk]),
        [
          ['stage-left', true, true],
          ['front-of-house', false, true],
        ],
      );
      await sam.line('stage-left').waitFor();
      await sam.line('front-of-house').waitFor();
    },
  );

  check(
    'Users: a panel joined as a position shows its lines (listen/talk, joined); a called line flashes',
    async () => {
      await waitFor(
        'Sam in both rooms',
        async () => {
          const user = await control.user('Sam');
          return user?.state === 'connected' && user.lines.every((l) => l.joined);
        },
        { timeout: 10_000 },
      );
      await page.locator('#tab-crew').click();
      const row = page.locator('#users-rows tr', { hasText: 'Sam' });
      await row.waitFor({ timeout: REFRESH_BOUND_MS });
      const both = row.locator('li.u-line[data-key="stage-left"]');
      const talkOnly = row.locator('li.u-line[data-key="front-of-house"]');
      await waitFor(
        'both lines joined',
        async () =>
          (await both.getAttribute('data-joined')) === 'true' &&
          (await talkOnly.getAttribute('data-joined')) === 'true',
        { timeout: REFRESH_BOUND_MS },
      );
      assert.match(await both.textContent(), /^Stage Left listen · talk joined/);
      assert.match(await talkOnly.textContent(), /^Front of House talk only joined/);
      assert.equal(await both.getAttribute('data-call'), null);

      // A call on Stage Left (from Sam's own session): the line flashes while the API says so.
      const called = await fetch(`${control.origin}/api/call`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token: sam.token.token, groupId: 'stage-left' }),
      });
      assert.ok(called.ok, `POST /api/call: ${called.status}`);
      const t0 = performance.now();
      await waitFor('the called line flashing', async () => (await both.getAttribute('data-call')) === '', {
        timeout: REFRESH_BOUND_MS,
        interval: 20,
      });
      const flashMs = Math.round(performance.now() - t0);
      assert.equal(await both.locator('.line-call').isVisible(), true, '"calling" shows');
      assert.notEqual(await both.evaluate((e) => getComputedStyle(e).animationName), 'none');
      assert.equal(await talkOnly.getAttribute('data-call'), null, 'only the called line');
      await page.screenshot({ path: join(SHOTS, 'admin-users-call.png') });
      await waitFor('the flash to end', async () => (await both.getAttribute('data-call')) === null, {
        timeout: 5_000 + REFRESH_BOUND_MS,
      });
      report(`users: a called line flashed ${flashMs} ms after the call, and stopped after the API's 5 s`);

      assert.deepEqual(page.errors, []);
    },
  );

  check(
    'Users: "remove from this line" takes one line of a crew member (after a confirmation); the others go on',
    async () => {
      // Quinn joins two rooms through the API and Janus's HTTP API (no media): the panel page
      // ends its whole session when one of its rooms kicks it, so a page would not show the rest.
      const quinn = await joinThroughApi('Quinn', { listen: ['stage-left', 'backstage'], talk: ['backstage'] });
      await page.locator('#tab-crew').click();
      const row = page.locator('#users-rows tr', { hasText: 'Quinn' });
      const backstage = row.locator('li.u-line[data-key="backstage"]');
      const stageLeft = row.locator('li.u-line[data-key="stage-left"]');
      await waitFor(
        "Quinn's two lines joined",
        async () =>
          (await backstage.getAttribute('data-joined').catch(() => null)) === 'true' &&
          (await stageLeft.getAttribute('data-joined')) === 'true',
        { timeout: 10_000 },
      );
      assert.match(await stageLeft.textContent(), /^Stage Left listen only joined/);
      assert.match(await backstage.textContent(), /^Backstage listen · talk joined/);

      // Cancel changes nothing.
      await backstage.getByRole('button', { name: 'Remove Quinn from Backstage' }).click();
      assert.equal(await page.locator('#confirm-title').textContent(), 'Remove Quinn from Backstage?');
      assert.match(await page.locator('#confirm-text').textContent(), /other lines go on/);
      await page.locator('#confirm-cancel').click();
      assert.equal((await control.user('Quinn')).lines.length, 2);

      await backstage.getByRole('button', { name: 'Remove Quinn from Backstage' }).click();
      await page.locator('#confirm-ok').click();
      await backstage.waitFor({ state: 'detached', timeout: REFRESH_BOUND_MS });
      const user = await control.user('Quinn');
      assert.deepEqual(
        user.lines.map((l) => [l.groupId, l.joined]),
        [['stage-left', true]],
      );
      assert.equal(user.state, 'connected');
      assert.equal(await stageLeft.count(), 1, 'the other line stays');
      // Its last line: the confirmation says it is a disconnect.
      await stageLeft.getByRole('button', { name: 'Remove Quinn from Stage Left' }).click();
      assert.match(await page.locator('#confirm-text').textContent(), /only line: they are disconnected/);
      await page.locator('#confirm-ok').click();
      await row.waitFor({ state: 'detached', timeout: REFRESH_BOUND_MS });
      assert.equal(await control.user('Quinn'), undefined);
      await quinn.close();
      assert.deepEqual(page.errors, []);
    },
  );

  check('PINs: shown as "PIN set", never in clear in the page or the YAML; "Remove the PIN" removes it', async () => {
    await page.locator('#tab-lines').click();
    const row = positionRow('stage-manager');
    await row.getByRole('button', { name: 'Edit Stage Manager' }).click();
    assert.equal(await page.locator('#position-pin-remove-label').isHidden(), true, 'nothing to remove yet');
    assert.equal(await page.locator('#position-pin').getAttribute('type'), 'password');
    await page.locator('#position-pin').fill(POSITION_PIN);
    await page.locator('#position-submit').click();
    await waitFor('"PIN set"', async () => (await row.locator('.position-pin').textContent()) === 'PIN set');
    const card = page.locator('#join-links [data-key="position:stage-manager"]');
    await waitFor('the PIN badge on the join link', async () => card.locator('.join-link-pin').isVisible());

    // A group's PIN, through the group's edit form.
    await page.locator('#tab-lines').click();
    const backstage = page.locator('#groups-rows tr[data-key="backstage"]');
    await backstage.getByRole('button', { name: 'Edit Backstage' }).click();
    await page.locator('#edit-backstage-pin').fill(GROUP_PIN);
    await backstage.getByRole('button', { name: 'Save' }).click();
    await waitFor(
      'the group\'s "PIN set"',
      async () => (await backstage.locator('.group-pin').textContent()) === 'PIN set',
    );
    assert.equal((await control.admin('GET', '/groups')).body.groups.find((g) => g.id === 'backstage').pin, true);

    // Nowhere in clear: not in the page (text, attributes, field values), not in the file.
    const inPage = await page.evaluate(
      (pins) => {
        const values = [...document.querySelectorAll('input')].map((i) => i.value).join(' ');
        return pins.filter((pin) => document.documentElement.outerHTML.includes(pin) || values.includes(pin));
      },
      [POSITION_PIN, GROUP_PIN],
    );
    assert.deepEqual(inPage, []);
    const file = await yaml();
    assert.ok(!file.includes(POSITION_PIN) && !file.includes(GROUP_PIN), 'no PIN in clear in the YAML');
    assert.match((await yamlPositions())['Stage Manager'].pin, /^'?pbkdf2-sha256\$/);
    assert.match(await yamlSection('groups'), /- name: Backstage\n\s+pin: '?pbkdf2-sha256\$/);
    const api = (await control.admin('GET', '/positions')).body.positions[0];
    assert.equal(api.pin, true);
    assert.ok(!JSON.stringify(api).includes(POSITION_PIN));

    // Remove it.
    await page.locator('#tab-lines').click();
    await row.getByRole('button', { name: 'Edit Stage Manager' }).click();
    await page.locator('#position-pin-remove').check();
    assert.equal(await page.locator('#position-pin').isDisabled(), true);
    await page.locator('#position-submit').click();
    await waitFor('no PIN', async () => (await row.locator('.position-pin').textContent()) === '—');
    assert.equal((await yamlPositions())['Stage Manager'].pin, null);
    assert.equal((await control.admin('GET', '/positions')).body.positions[0].pin, false);
    assert.deepEqual(page.errors, []);
  });

  check('the Positions and Users tabs at 360 px, light and dark: no horizontal overflow; screenshots', async () => {
    // A second position, with a PIN, for a fuller list.
    assert.equal(
      (
        await control.admin('POST', '/positions', {
          name: 'Lighting Desk',
          listen: ['stage-left', 'backstage', 'front-of-house'],
          talk: ['backstage'],
          pin: '2468',
        })
      ).status,
      201,
    );
    await page.locator('#tab-lines').click();
    await positionRow('lighting-desk').waitFor({ timeout: REFRESH_BOUND_MS });
    await page.screenshot({ path: join(SHOTS, 'admin-positions.png'), fullPage: true });

    for (const colorScheme of ['light', 'dark']) {
      const phone = await adminPage({ viewport: PHONE_VIEWPORT, colorScheme });
      for (const tab of ['positions', 'users']) {
        await phone.locator(`#tab-${tab === 'positions' ? 'lines' : 'crew'}`).click();
        await phone
          .locator(tab === 'positions' ? '#join-links article' : '#users-rows li.u-line')
          .first()
          .waitFor();
        // Let the QR codes and rows settle.
        await phone.waitForTimeout(200);
        const { scrollWidth, innerWidth } = await noOverflow(phone);
        assert.ok(
          scrollWidth <= innerWidth,
          `${tab} at 360 px (${colorScheme}): scrollWidth ${scrollWidth} > ${innerWidth}`,
        );
        const suffix = colorScheme === 'dark' ? '-dark' : '';
        await phone.screenshot({
          path: join(SHOTS, `admin-mobile-${tab === 'positions' ? 'positions' : 'users-lines'}${suffix}.png`),
          fullPage: true,
        });
      }
      // The edit form with its line picker.
      await phone.locator('#tab-lines').click();
      await phone
        .locator('#positions-rows tr[data-key="lighting-desk"]')
        .getByRole('button', { name: 'Edit Lighting Desk' })
        .click();
      const { scrollWidth, innerWidth } = await noOverflow(phone);
      assert.ok(scrollWidth <= innerWidth, `the position form at 360 px: scrollWidth ${scrollWidth}`);
      assert.equal(await phone.locator('#position-pin-remove-label').isVisible(), true, '"Remove the PIN" offered');
      await phone
        .locator('#position-form')
        .screenshot({ path: join(SHOTS, `admin-mobile-position-form${colorScheme === 'dark' ? '-dark' : ''}.png`) });
      // Every checkbox target is at least 44 px high.
      const heights = await phone
        .locator('.line-pick-box')
        .evaluateAll((boxes) => boxes.map((b) => b.getBoundingClientRect().height));
      assert.ok(
        heights.every((height) => height >= 44),
        `checkbox targets: ${heights}`,
      );
      assert.deepEqual(phone.errors, []);
    }
    report(`positions: screenshots in ${SHOTS}`);
  });
});
