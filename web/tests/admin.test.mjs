// The admin UI (/admin) in a real browser, against the real partyline-control (and a real
// Janus, for the Crew tab): login, the tabs by task (deep links, Back), groups through the
// forms (checked in the YAML on disk; delete confirmed in place), the API's errors next to the
// form, forms that survive the refresh, logs, users joined through the join page, the
// unreachable banner, every tab at 1280 and 360 px in light and dark (screenshots in
// docs/screenshots/). The Show tab has a suite of its own (admin-show.test.mjs). Run by
// scripts/test-browser (see README.md here).

import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe } from 'node:test';
import {
  PHONE_VIEWPORT,
  Person,
  logIn,
  openAdmin,
  report,
  startWithBrowser,
  trackedTests,
  waitFor,
} from './harness.mjs';

/** Where the screenshots of the docs are kept. */
const DOC_SHOTS = fileURLToPath(new URL('../../docs/screenshots/', import.meta.url));
/** The tabs, in their order. */
const TABS = ['show', 'lines', 'crew', 'soundcard', 'streams', 'system'];

/** The UI refreshes every 3 s (start to start); one fetch on top of that is the grace. */
const REFRESH_BOUND_MS = 3_000 + 500;
/** A change pushed by the live event stream: the event, then one round of fetches. */
const LIVE_BOUND_MS = 500;

describe('admin UI', { timeout: 120_000 }, () => {
  let control;
  let browser;
  let stop;
  let page; // the admin's desktop page, logged in by the first test
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  /** A new browser context on /admin (not logged in), page errors reported and collected. */
  const open = (options) => openAdmin(browser, control.origin, options);
  const login = (p, token = control.adminToken) => logIn(p, token);
  const loggedIn = (options) => openAdmin(browser, control.origin, { token: control.adminToken, ...options });

  const yaml = () => readFile(join(control.dir, 'partyline.yaml'), 'utf8');
  /** The group names in the YAML on disk (`- name: X` lines of `groups:`). */
  async function yamlGroups() {
    const lines = (await yaml()).split('\n');
    const names = [];
    for (const line of lines.slice(lines.indexOf('groups:') + 1)) {
      if (!/^[- ]/.test(line)) break; // the next top-level key
      const name = line.match(/^- name: '?(.*?)'?$/);
      if (name) names.push(name[1]);
    }
    return names;
  }

  /** Resolves at the next GET of `path` (below /api/admin) the page makes. */
  const nextFetch = (p, path) =>
    p.waitForResponse((r) => r.request().method() === 'GET' && new URL(r.url()).pathname === `/api/admin${path}`, {
      timeout: 5_000,
    });

  /**
   * Waits until an element matching `selector` whose text contains `text` is in the page;
   * resolves with the page's clock (ms since the epoch) at the DOM change that added it, so the
   * latency measured does not include the test's own polling.
   */
  async function shownAt(p, selector, text, timeout = REFRESH_BOUND_MS + 1_000) {
    return p.evaluate(
      ([sel, txt, ms]) =>
        new Promise((resolve, reject) => {
          const found = () => [...document.querySelectorAll(sel)].some((e) => e.textContent.includes(txt));
          if (found()) return resolve(Date.now());
          const observer = new MutationObserver(() => {
            if (!found()) return;
            observer.disconnect();
            clearTimeout(timer);
            resolve(Date.now());
          });
          observer.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
          const timer = setTimeout(() => {
            observer.disconnect();
            reject(new Error(`not shown within ${ms} ms: ${sel} with "${txt}"`));
          }, ms);
        }),
      [selector, text, timeout],
    );
  }

  const noOverflow = (p) => p.evaluate(() => ({ scrollWidth: document.scrollingElement.scrollWidth, innerWidth }));

  before(async () => {
    ({ control, browser, stop } = await startWithBrowser(['Stage Left', 'Backstage']));
    await mkdir(DOC_SHOTS, { recursive: true });
  });

  after(async () => {
    await reportLogsIfFailed(control);
    await Promise.all(people.map((p) => p.close()));
    // Closing the browser closes the admin pages' contexts too.
    await stop?.();
  });

  check('login: a wrong token is refused, the right one opens the tabs; logout forgets it', async () => {
    page = await open();
    await login(page, 'not-the-token');
    await page.locator('#login-error').waitFor({ state: 'visible' });
    assert.match(await page.locator('#login-error').textContent(), /not valid/);
    assert.equal(await page.locator('#app').isHidden(), true);

    await login(page);
    await page.locator('#app').waitFor({ state: 'visible' });
    assert.equal(await page.locator('#tab-show').getAttribute('aria-selected'), 'true', 'the Show tab is the home');
    await page.locator('#tab-lines').click();
    await page.locator('#groups-rows tr[data-key="stage-left"]').waitFor();
    // Kept for the browser session only.
    assert.equal(await page.evaluate(() => sessionStorage.getItem('partyline.adminToken')), control.adminToken);
    assert.equal(await page.evaluate(() => localStorage.getItem('partyline.adminToken')), null);

    // Logout, then log in again (the page the other tests use).
    await page.locator('#logout').click();
    await page.locator('#login-view').waitFor({ state: 'visible' });
    assert.equal(await page.evaluate(() => sessionStorage.getItem('partyline.adminToken')), null);
    await login(page);
    await page.locator('#app').waitFor({ state: 'visible' });
  });

  check(
    'tabs by task: a deep link opens its tab, Back and Forward move between tabs, old names still land',
    async () => {
      const p = await loggedIn();
      const selected = (tab) => p.locator(`#tab-${tab}[aria-selected="true"]`).waitFor();
      await selected('show');
      assert.equal(new URL(p.url()).hash, '#show');
      // A deep link, followed in the page and on a fresh load.
      await p.goto(`${control.origin}/admin#crew`);
      await selected('crew');
      await p.reload();
      await selected('crew');
      assert.equal(await p.locator('#panel-crew').isVisible(), true);
      assert.equal(await p.locator('#panel-show').isVisible(), false);
      // Each tab chosen is a step of the history.
      await p.locator('#tab-system').click();
      await p.locator('#tab-lines').click();
      assert.equal(new URL(p.url()).hash, '#lines');
      await p.goBack();
      await selected('system');
      await p.goBack();
      await selected('crew');
      await p.goForward();
      await selected('system');
      // The keyboard (WAI-ARIA tabs): arrow keys, Home, End.
      await p.locator('#tab-system').focus();
      await p.keyboard.press('Home');
      await selected('show');
      await p.keyboard.press('ArrowRight');
      await selected('lines');
      // The tabs of earlier versions, in old bookmarks.
      for (const [old, now] of [
        ['groups', 'lines'],
        ['positions', 'lines'],
        ['users', 'crew'],
        ['stats', 'system'],
        ['logs', 'system'],
      ]) {
        await p.goto(`${control.origin}/admin#${old}`);
        await selected(now);
        await waitFor(`#${old} rewritten to #${now}`, async () => new URL(p.url()).hash === `#${now}`);
      }
      assert.deepEqual(p.errors, []);
      await p.context().close();
    },
  );

  check(
    'live: the badge says the event stream is up; a change elsewhere shows at once, not at the next tick',
    async () => {
      await page.locator('#tab-lines').click();
      await page.locator('#live[data-live="on"]').waitFor();
      assert.equal(await page.locator('#live').textContent(), 'Live');
      const delays = [];
      for (const name of ['Live One', 'Live Two', 'Live Three']) {
        // Just after a tick, so the next one is ~3 s away: only the event can show it sooner.
        await nextFetch(page, '/groups');
        const t0 = Date.now();
        assert.equal((await control.admin('POST', '/groups', { name })).status, 201);
        delays.push((await shownAt(page, '#groups-rows tr', name, REFRESH_BOUND_MS)) - t0);
      }
      report(`admin: groups created through the API showed in ${delays.join(', ')} ms (live events)`);
      for (const ms of delays) assert.ok(ms <= LIVE_BOUND_MS, `showed after ${ms} ms: ${delays}`);
      for (const id of ['live-one', 'live-two', 'live-three']) {
        assert.equal((await control.admin('DELETE', `/groups/${id}`)).status, 200);
      }
    },
  );

  check('create, rename and delete a group through the forms, each in the YAML on disk', async () => {
    await page.locator('#tab-lines').click();
    await page.locator('#group-create-name').fill('Front of House');
    await page.locator('#group-create-bitrate').fill('96');
    await page.locator('#group-create-submit').click();
    const row = page.locator('#groups-rows tr[data-key="front-of-house"]');
    await row.waitFor();
    assert.match(await row.textContent(), /Front of House.*front-of-house.*96 kbit\/s/);
    assert.deepEqual(await yamlGroups(), ['Stage Left', 'Backstage', 'Front of House']);
    assert.match(await yaml(), /- name: Front of House\n {2}audioBitrate: 96\n/);
    assert.equal(await page.locator('#group-create-name').inputValue(), '', 'the form is emptied after a create');

    // Rename in place.
    await row.getByRole('button', { name: 'Edit Front of House' }).click();
    const name = page.locator('#edit-front-of-house-name');
    await name.fill('FOH Desk');
    await page.locator('tr[data-key="front-of-house"]').getByRole('button', { name: 'Save' }).click();
    await page.locator('#groups-rows tr[data-key="foh-desk"]').waitFor();
    await page.locator('#groups-rows tr[data-key="front-of-house"]').waitFor({ state: 'detached' });
    assert.deepEqual(await yamlGroups(), ['Stage Left', 'Backstage', 'FOH Desk']);

    // Delete, confirmed in place: the button asks "Confirm?" for a few seconds (no dialog), and
    // gives up by itself; a second click deletes.
    const renamed = page.locator('#groups-rows tr[data-key="foh-desk"]');
    const remove = renamed.getByRole('button', { name: 'Delete FOH Desk' });
    await remove.click();
    assert.equal(await remove.textContent(), 'Confirm?');
    assert.equal(await remove.getAttribute('aria-label'), 'Confirm: Delete FOH Desk');
    assert.equal(await page.locator('dialog[open]').count(), 0, 'no dialog');
    await waitFor('the button to give up', async () => (await remove.textContent()) === 'Delete', { timeout: 6_000 });
    assert.equal(await remove.getAttribute('aria-label'), 'Delete FOH Desk');
    assert.deepEqual(await yamlGroups(), ['Stage Left', 'Backstage', 'FOH Desk']);
    await remove.click();
    await remove.click();
    await renamed.waitFor({ state: 'detached' });
    assert.deepEqual(await yamlGroups(), ['Stage Left', 'Backstage']);
  });

  check("the API's errors show next to their form: duplicate name, empty id, bridged not running", async () => {
    await page.locator('#group-create-name').fill('stage LEFT');
    await page.locator('#group-create-submit').click();
    const error = page.locator('#group-create #group-create-error');
    await error.waitFor({ state: 'visible' });
    const text = await error.textContent();
    // The API's own message, word for word.
    const api = await control.admin('POST', '/groups', { name: 'stage LEFT' });
    assert.equal(api.status, 409);
    assert.equal(text, api.body.error);
    assert.match(text, /already exists/);
    assert.equal(await page.locator('#group-create-name').inputValue(), 'stage LEFT', 'what was typed stays');
    assert.deepEqual(await yamlGroups(), ['Stage Left', 'Backstage']);
    // The edit form shows its errors too: an empty slug.
    const row = page.locator('#groups-rows tr[data-key="backstage"]');
    await row.getByRole('button', { name: 'Edit Backstage' }).click();
    await page.locator('#edit-backstage-name').fill('!!!');
    await row.getByRole('button', { name: 'Save' }).click();
    const rowError = row.locator('.message.error');
    await rowError.waitFor({ state: 'visible' });
    assert.match(await rowError.textContent(), /empty id/);
    await row.getByRole('button', { name: 'Cancel' }).click();
    await page.locator('#group-create-name').fill('');

    // Server audio users need partyline-bridged, which does not run here: its 503, shown.
    await page.locator('#tab-soundcard').click();
    await page.locator('#su-create-name').fill('FOH');
    await page.locator('#su-create-group').selectOption('backstage');
    await page.locator('#su-create-input').selectOption('1');
    await page.locator('#su-create-submit').click();
    const suError = page.locator('#server-user-create #su-create-error');
    await suError.waitFor({ state: 'visible' });
    assert.match(await suError.textContent(), /partyline-bridged is not available/);
    assert.equal(await page.locator('#su-create-name').inputValue(), 'FOH');
    assert.doesNotMatch(await yaml(), /name: FOH/);
    await page.locator('#su-create-name').fill('');
  });

  check('a half-typed form survives the 3 s refresh', async () => {
    await page.locator('#tab-lines').click();
    // 1. Typing in the create form, focus still in it.
    await page.locator('#group-create-name').fill('Half typ');
    // 2. An unsaved change in the audio settings, focus elsewhere.
    await page.locator('#audio-jitter').fill('123');
    // 3. A row being edited.
    const row = page.locator('#groups-rows tr[data-key="backstage"]');
    await row.getByRole('button', { name: 'Edit Backstage' }).click();
    await page.locator('#edit-backstage-name').fill('Backst');
    // 4. Focus back in the create form, caret at the end.
    await page.locator('#group-create-name').focus();
    await page.locator('#group-create-name').press('End');

    // Meanwhile the server changes: the refresh must show the new group, and leave the forms.
    assert.equal((await control.admin('PUT', '/config/audio', { jitterBufferMs: 60 })).status, 200);
    assert.equal((await control.admin('POST', '/groups', { name: 'Foyer' })).status, 201);
    const t0 = Date.now();
    const foyerMs = (await shownAt(page, '#groups-rows tr[data-key="foyer"]', 'Foyer')) - t0;
    report(`admin: a group created through the API showed in ${foyerMs} ms`);
    assert.ok(foyerMs <= REFRESH_BOUND_MS, `the new group showed after ${foyerMs} ms`);
    await nextFetch(page, '/groups'); // and one more refresh on top
    await page.keyboard.type('ed');

    assert.equal(await page.locator('#group-create-name').inputValue(), 'Half typed');
    assert.equal(await page.locator('#audio-jitter').inputValue(), '123');
    assert.equal(await page.locator('#edit-backstage-name').inputValue(), 'Backst');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'group-create-name');

    // Revert takes the server's value; Cancel ends the edit.
    await page.locator('#audio-reset').click();
    await waitFor(
      'the jitter field to show the server value',
      async () => (await page.locator('#audio-jitter').inputValue()) === '60',
    );
    await row.getByRole('button', { name: 'Cancel' }).click();
    await row.getByRole('button', { name: 'Edit Backstage' }).waitFor();
    await page.locator('#group-create-name').fill('');
  });

  check('logs: a new line shows within 3 s, coloured by level; the level filter works', async () => {
    await page.locator('#tab-system').click();
    await page.locator('#log-level').selectOption('trace');
    await page.locator('#log-list li').first().waitFor();

    // An info line (the config write) and a warning (a refused request).
    assert.equal((await control.admin('POST', '/groups', { name: 'Log Probe' })).status, 201);
    const t0 = Date.now();
    const infoMs = (await shownAt(page, '#log-list li[data-level="info"]', 'create group "Log Probe"')) - t0;
    const info = page.locator('#log-list li[data-level="info"]', { hasText: 'create group "Log Probe"' });
    assert.equal((await control.admin('POST', '/groups', { name: 'Log Probe' })).status, 409);
    const t1 = Date.now();
    const refused = 'id "log-probe" already exists';
    const warnMs = (await shownAt(page, '#log-list li[data-level="warn"]', refused)) - t1;
    const warn = page.locator('#log-list li[data-level="warn"]', { hasText: refused });
    report(`admin: a new log line showed in ${infoMs} ms (info) and ${warnMs} ms (warn)`);
    assert.ok(infoMs <= REFRESH_BOUND_MS, `the info line showed after ${infoMs} ms`);
    assert.ok(warnMs <= REFRESH_BOUND_MS, `the warn line showed after ${warnMs} ms`);

    // Colours: the warn label in the theme's warning colour, info in another.
    const colour = (locator) => locator.locator('.log-level').evaluate((e) => getComputedStyle(e).color);
    const warnVar = await page.evaluate(() => {
      const probe = document.createElement('span');
      probe.style.color = 'var(--warn)';
      document.body.append(probe);
      const c = getComputedStyle(probe).color;
      probe.remove();
      return c;
    });
    assert.equal(await colour(warn), warnVar);
    assert.notEqual(await colour(info.last()), warnVar);

    // The filter: warnings and errors only, then all again.
    await page.locator('#log-level').selectOption('warn');
    await waitFor('only warn and error lines', async () => {
      const levels = await page.locator('#log-list li').evaluateAll((lines) => lines.map((l) => l.dataset.level));
      return levels.length > 0 && levels.every((l) => l === 'warn' || l === 'error') && levels;
    });
    assert.equal(await info.count(), 0);
    assert.ok((await page.locator('#log-list li', { hasText: 'refused request' }).count()) >= 1);
    await page.locator('#log-level').selectOption('trace');
    await info.last().waitFor();

    // Pause: nothing new while paused; it catches up on resume.
    await page.locator('#log-pause').click();
    assert.equal(await page.locator('#log-pause').getAttribute('aria-pressed'), 'true');
    assert.equal((await control.admin('DELETE', '/groups/log-probe')).status, 200);
    const deleted = page.locator('#log-list li', { hasText: 'delete group "log-probe"' });
    await page.waitForTimeout(3_300);
    assert.equal(await deleted.count(), 0, 'a paused view does not grow');
    await page.locator('#log-pause').click();
    await deleted.waitFor({ timeout: 2_000 });
  });

  check('a user joined through the join page appears in Users within 3 s; Disconnect removes them', async () => {
    await page.locator('#tab-crew').click();
    const dana = await Person.open(browser, control.origin, 'Dana');
    people.push(dana);
    await dana.join('stage-left');
    await dana.waitState('connected');
    const t0 = Date.now(); // Dana's page shows "connected"
    await waitFor('Dana connected in the API', async () => (await control.user('Dana'))?.state === 'connected', {
      timeout: 5_000,
    });
    const row = page.locator('#users-rows tr', { hasText: 'Dana' });
    const danaMs = (await shownAt(page, '#users-rows tr[data-state="connected"]', 'Dana')) - t0;
    report(`admin: a joined user showed in Users ${danaMs} ms after their page showed them connected`);
    assert.ok(danaMs <= REFRESH_BOUND_MS, `Dana showed after ${danaMs} ms`);
    const text = await row.textContent();
    assert.match(text, /Stage Left/);
    assert.match(text, /crew/);
    assert.match(text, /just now|\d+ s ago/);
    assert.equal(await page.locator('#users-count').textContent(), '1');

    // Confirmed in place: a second click.
    await row.getByRole('button', { name: 'Disconnect Dana' }).click();
    await row.getByRole('button', { name: 'Confirm: Disconnect Dana' }).click();
    await row.waitFor({ state: 'detached', timeout: REFRESH_BOUND_MS });
    await waitFor('Dana gone from the API', async () => (await control.user('Dana')) === undefined, { timeout: 5_000 });
    await dana.waitState('kicked', 10_000);
  });

  check('Disconnect with a ban: the name is refused new tokens until the ban is lifted', async () => {
    await page.locator('#tab-crew').click();
    const eve = await Person.open(browser, control.origin, 'Eve');
    people.push(eve);
    await eve.join('stage-left');
    await eve.waitState('connected');
    const row = page.locator('#users-rows tr', { hasText: 'Eve' });
    await row.waitFor({ timeout: REFRESH_BOUND_MS });
    assert.match(await row.textContent(), /from \d+\.\d+\.\d+\.\d+/, 'the client address is shown');
    await row.getByRole('button', { name: 'Disconnect and ban Eve' }).click();
    await page.getByLabel(/Refuse the name “Eve”/).check();
    assert.equal(
      await page.getByLabel(/Refuse the address/).isChecked(),
      false,
      'an address ban is a choice of its own',
    );
    await page.locator('#confirm-ok').click();
    await row.waitFor({ state: 'detached', timeout: REFRESH_BOUND_MS });
    await eve.waitState('kicked', 10_000);
    const ban = page.locator('#bans-rows tr', { hasText: 'Eve' });
    await ban.waitFor({ timeout: REFRESH_BOUND_MS });
    const ask = () =>
      control.request('POST', '/api/token', {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'Eve', groupId: 'stage-left' }),
      });
    const refused = await ask();
    assert.equal(refused.status, 403, refused.text);
    assert.equal(JSON.parse(refused.text).code, 'banned');
    await ban.getByRole('button', { name: 'Lift the ban of Eve' }).click();
    await ban.waitFor({ state: 'detached', timeout: REFRESH_BOUND_MS });
    assert.equal(await page.locator('#bans-empty').isVisible(), true);
    assert.equal((await ask()).status, 200, 'lifted: Eve may join again');
    assert.deepEqual(page.errors, []);
  });

  check('an unreachable server shows a banner, and the page recovers by itself; 401 goes back to login', async () => {
    await page.locator('#tab-system').click();
    await page.route('**/api/admin/**', (route) => route.abort('connectionrefused'));
    await page.locator('#offline').waitFor({ state: 'visible', timeout: REFRESH_BOUND_MS });
    assert.equal(await page.locator('#app').isVisible(), true, 'the last data stays on screen');
    await page.unroute('**/api/admin/**');
    await page.locator('#offline').waitFor({ state: 'hidden', timeout: REFRESH_BOUND_MS });
    // A token that stops working (changed on the server): back to the login form.
    await page.evaluate(() => sessionStorage.setItem('partyline.adminToken', 'revoked'));
    await page.locator('#login-view').waitFor({ state: 'visible', timeout: REFRESH_BOUND_MS });
    assert.match(await page.locator('#login-error').textContent(), /refused the token/);
    await login(page);
    await page.locator('#app').waitFor({ state: 'visible' });
    assert.deepEqual(page.errors, []);
  });

  check(
    'every tab at 1280 and 360 px, light and dark: screenshots, no horizontal overflow; theme toggle remembered',
    async () => {
      const background = (p) => p.evaluate(() => getComputedStyle(document.body).backgroundColor);
      const LIGHT_BG = 'rgb(243, 244, 246)';
      const DARK_BG = 'rgb(14, 17, 21)';

      // Something in every table.
      await control.admin('PUT', '/audio/channels/names', {
        inputs: { 0: 'Stage mic', 1: 'FOH talkback' },
        outputs: { 0: 'FOH return' },
      });
      const erin = await Person.open(browser, control.origin, 'Erin');
      people.push(erin);
      await erin.join('backstage');
      await erin.waitState('connected');

      const [light, dark, phone] = await Promise.all([
        loggedIn({ colorScheme: 'light' }),
        loggedIn({ colorScheme: 'dark' }),
        loggedIn({ viewport: PHONE_VIEWPORT, colorScheme: 'light' }),
      ]);

      await light.locator('#tab-lines').click();
      await light.locator('#groups-rows tr[data-key="foyer"]').waitFor();
      assert.equal(await background(light), LIGHT_BG);

      await dark.locator('#tab-system').click();
      // Two samples in the chart (one per 3 s tick).
      await dark.waitForFunction(
        () => /H/.test(document.querySelector('#chart-connections .chart-line')?.getAttribute('d') ?? ''),
        null,
        { timeout: 8_000 },
      );
      // This suite's control speaks plain HTTP: no certificate to pin (companion.test.mjs shows one).
      assert.deepEqual(
        [await dark.locator('#tls-state').textContent(), await dark.locator('#tls-copy').isVisible()],
        ['off', false],
      );
      assert.equal(await background(dark), DARK_BG);

      // The toggle: system → light → dark, remembered across a reload.
      await light.locator('#theme').click();
      assert.equal(await light.evaluate(() => document.documentElement.dataset.theme), 'light');
      await light.locator('#theme').click();
      assert.equal(await light.evaluate(() => document.documentElement.dataset.theme), 'dark');
      await light.reload();
      await light.locator('#app').waitFor({ state: 'visible' }); // still logged in: same session
      assert.equal(await light.evaluate(() => document.documentElement.dataset.theme), 'dark');
      assert.equal(await background(light), DARK_BG);
      await light.locator('#theme').click(); // back to the system's
      assert.equal(await light.evaluate(() => document.documentElement.dataset.theme), undefined);

      // Every tab at both widths in both schemes (switched by CDP's Emulation.setEmulatedMedia):
      // nothing wider than the window, a screenshot of each.
      const filled = {
        show: '#show-rows tr',
        lines: '#join-links article',
        crew: '#users-rows tr',
        soundcard: '#channels-inputs input',
        streams: '#stream-token-group option',
        system: '#log-list li',
      };
      for (const [p, width] of [
        [light, 1280],
        [phone, 360],
      ]) {
        for (const colorScheme of ['light', 'dark']) {
          await p.emulateMedia({ colorScheme });
          assert.equal(await background(p), colorScheme === 'light' ? LIGHT_BG : DARK_BG);
          for (const tab of TABS) {
            await p.locator(`#tab-${tab}`).click();
            await p.locator(filled[tab]).first().waitFor({ state: 'attached' });
            await p.waitForTimeout(150); // the rest of the tab's first fetch
            const { scrollWidth, innerWidth } = await noOverflow(p);
            assert.ok(scrollWidth <= innerWidth, `${tab} at ${width} px: scrollWidth ${scrollWidth} > ${innerWidth}`);
            await p.screenshot({ path: join(DOC_SHOTS, `admin-${tab}-${width}-${colorScheme}.png`) });
          }
        }
      }
      // The login form too.
      const out = await open({ viewport: PHONE_VIEWPORT, colorScheme: 'dark' });
      const { scrollWidth, innerWidth } = await noOverflow(out);
      assert.ok(scrollWidth <= innerWidth);
      await out.screenshot({ path: join(DOC_SHOTS, 'admin-login-360-dark.png') });
      for (const p of [light, dark, phone, out]) assert.deepEqual(p.errors, []);
      report(`admin: screenshots in ${DOC_SHOTS}`);
    },
  );
});
