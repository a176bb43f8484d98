// The admin UI's Show tab (/admin#show, the admin's home) in a real browser, against the real
// partyline-control and Janus: crew members joined through the join page become rows of the
// lines × crew grid, each cell their state on that line; a talk lights their cell (the admin
// event stream's `talking`, written into the one cell), and a page opened while it goes on
// (the users list's `lines[].talking`); a line's Call flashes the panels on it; a click on a cell mutes them on that
// line and a second unmutes (checked in `GET /api/admin/users`); the keyboard drives it (arrow
// keys, Enter and Space, `/` to the name filter); the filters by name and by line; a leave
// removes the row. At 360 px the grid is a list. Screenshots at 1280 and 360 px, light and
// dark, in docs/screenshots/. Then a crew of 50 (the headless crew, `partyline-crew`, taking
// turns to talk): 50 rows, and a talk event lights its member's cell. Run by
// scripts/test-browser (see README.md here).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe } from 'node:test';
import {
  PHONE_VIEWPORT,
  Person,
  iceAddress,
  openAdmin,
  report,
  startWithBrowser,
  startWithTones,
  trackedTests,
  waitFor,
} from './harness.mjs';

/** Where the screenshots of the docs are kept. */
const DOC_SHOTS = fileURLToPath(new URL('../../docs/screenshots/', import.meta.url));
/** The UI refreshes every 3 s (start to start); one fetch on top of that is the grace. */
const REFRESH_BOUND_MS = 3_000 + 500;
/** A talk shown from its event: Janus's voice detection, the event, one frame. */
const TALK_LIGHT_MS = 3_000;
/** The headless crew (`cargo build -p partyline-crew`). */
const CREW_BIN =
  process.env.PARTYLINE_CREW_BIN ?? fileURLToPath(new URL('../../target/debug/partyline-crew', import.meta.url));
const CREW_SIZE = 50;

describe('admin Show tab', { timeout: 180_000 }, () => {
  let control;
  let browser;
  let stop;
  let page; // the admin's desktop page
  let dana;
  let sam;
  const ids = {};
  const { check, reportLogsIfFailed } = trackedTests();

  /** The row of the member called `name`, and one of its cells. */
  const row = (p, name) => p.locator(`#show-rows tr[data-key="${ids[name]}"]`);
  const cell = (p, name, line) => row(p, name).locator(`td[data-key="${line}"]`);
  /** `lines[].mutedByAdmin` of `name` on `line`, as the API says. */
  const mutedInApi = async (name, line) =>
    (await control.user(name)).lines.find((l) => l.groupId === line).mutedByAdmin;
  /** Waits until `name` is (or is not) muted on `line`, in the API and in the cell (its answer back). */
  const waitMuted = (name, line, muted) =>
    waitFor(`${name} ${muted ? 'muted' : 'unmuted'} on ${line}`, async () => {
      const td = cell(page, name, line);
      const [shown, busy] = await td.evaluate((e) => [e.hasAttribute('data-muted'), e.hasAttribute('aria-busy')]);
      return !busy && shown === muted && (await mutedInApi(name, line)) === muted;
    });

  before(async () => {
    // A steady tone as the microphone: Janus's voice detection hears a talk (the fake device's
    // short beeps are below its average).
    let browsers;
    ({ control, browsers, stop } = await startWithTones(['Stage Left', 'Backstage'], { crew: 440 }));
    browser = browsers.crew;
    await mkdir(DOC_SHOTS, { recursive: true });
    page = await openAdmin(browser, control.origin, { token: control.adminToken });
  });

  after(async () => {
    await reportLogsIfFailed(control);
    await Promise.all([dana, sam].map((p) => p?.close()));
    await stop?.();
  });

  check('the Show tab is the home: a column per line, a row per member joined, their state per cell', async () => {
    assert.equal(await page.locator('#tab-show').getAttribute('aria-selected'), 'true');
    assert.equal(new URL(page.url()).hash, '#show');
    await page.locator('#show-lines th[data-key="stage-left"]').waitFor();
    await page.locator('#show-lines th[data-key="backstage"]').waitFor();
    assert.equal(await page.locator('#show-empty').isVisible(), true, 'nobody yet');

    [dana, sam] = await Promise.all([
      Person.joined(browser, control.origin, 'Dana', '/?groups=stage-left,backstage&talk=stage-left'),
      Person.joined(browser, control.origin, 'Sam', '/?groups=backstage&talk=backstage'),
    ]);
    const t0 = Date.now(); // both pages show "connected"
    for (const name of ['Dana', 'Sam']) ids[name] = (await control.user(name)).identity;
    await row(page, 'Dana').waitFor({ timeout: REFRESH_BOUND_MS });
    await row(page, 'Sam').waitFor({ timeout: REFRESH_BOUND_MS });
    report(`show: two members joined showed as rows within ${Date.now() - t0} ms`);
    assert.deepEqual(await page.locator('#show-rows .sm-name').allTextContents(), ['Dana', 'Sam'], 'by name');

    // Dana: both lines, talk on Stage Left only; Sam: Backstage only.
    const state = (name, line) =>
      cell(page, name, line).evaluate((td) => ({
        on: td.hasAttribute('data-on'),
        listen: td.dataset.listen,
        talk: td.dataset.talk,
        joined: td.dataset.joined,
        rights: td.querySelector('.sc-rights').textContent,
      }));
    await waitFor('Dana joined on both lines', async () => (await state('Dana', 'backstage')).joined === 'true');
    assert.deepEqual(await state('Dana', 'stage-left'), {
      on: true,
      listen: 'true',
      talk: 'true',
      joined: 'true',
      rights: 'L T',
    });
    assert.deepEqual(await state('Dana', 'backstage'), {
      on: true,
      listen: 'true',
      talk: 'false',
      joined: 'true',
      rights: 'L',
    });
    assert.equal((await state('Sam', 'stage-left')).on, false, 'Sam is not on Stage Left');
    assert.match(await cell(page, 'Dana', 'stage-left').getAttribute('aria-label'), /^Dana on Stage Left: listens/);
    assert.match(await page.locator('#show-summary').textContent(), /^2 connected · 0 talking/);
    // A group's header: Call the line, and Mute it whole.
    const header = page.locator('#show-lines th[data-key="stage-left"]');
    assert.deepEqual(await header.getByRole('button').allTextContents(), ['Call', 'Mute']);
    assert.equal(await header.locator('.sl-call').getAttribute('aria-label'), 'Call everyone on Stage Left');
    assert.equal(await header.locator('.sl-count').textContent(), '1 joined');
    assert.deepEqual(page.errors, []);
  });

  check(
    'a talk lights the member’s cell and the line’s header as the event comes, and a page opened meanwhile; a call flashes the header; the admin’s Call reaches the panels',
    async () => {
      const light = cell(page, 'Dana', 'stage-left');
      const t0 = Date.now();
      await dana.pressTalk('stage-left');
      await page.locator(`#show-rows tr[data-key="${ids.Dana}"] td[data-key="stage-left"][data-talking]`).waitFor({
        timeout: TALK_LIGHT_MS,
      });
      report(`show: Dana's talk lit her cell ${Date.now() - t0} ms after her key went down`);
      assert.equal(await page.locator('#show-lines th[data-key="stage-left"]').getAttribute('data-talking'), '');
      assert.equal(await cell(page, 'Dana', 'backstage').getAttribute('data-talking'), null, 'only where she talks');
      assert.match(await light.getAttribute('aria-label'), /talking now/);
      assert.match(await page.locator('#show-summary').textContent(), /1 talking/);
      // A page opened while she talks lights her cell from the users list (no new event).
      const late = await openAdmin(browser, control.origin, { token: control.adminToken });
      // Lit at load: the talk is under way (the page may draw its rows before their state).
      await late
        .locator(`#show-rows tr[data-key="${ids.Dana}"] td[data-key="stage-left"][data-talking]`)
        .waitFor({ timeout: TALK_LIGHT_MS });
      assert.equal(
        await late
          .locator(`#show-rows tr[data-key="${ids.Dana}"] td[data-key="backstage"]`)
          .getAttribute('data-talking'),
        null,
      );
      assert.deepEqual(late.errors, []);
      await late.context().close();
      // The light goes out at control's `stoppedTalking`, which comes from Janus's voice
      // detection: Janus sends none for a participant that mutes itself (a talk key released) with
      // the voice still on (this steady tone), so its going out is not awaited here.
      await dana.page.mouse.up();

      // A call on a line flashes its header.
      await dana.control('stage-left', 'call').click();
      await page.locator('#show-lines th[data-key="stage-left"][data-call]').waitFor({ timeout: TALK_LIGHT_MS });
      assert.equal(await page.locator('#show-lines th[data-key="backstage"]').getAttribute('data-call'), null);

      // The admin's Call on Backstage (by the keyboard: the header's button): Dana's and Sam's
      // panels flash that line, from "Admin"; the header flashes at its event.
      const call = page.locator('#show-lines th[data-key="backstage"] .sl-call');
      await call.focus();
      const t1 = Date.now();
      await page.keyboard.press('Enter');
      for (const person of [dana, sam]) {
        await waitFor(
          `${person === dana ? 'Dana' : 'Sam'}'s Backstage calling`,
          async () => (await person.lineState('backstage')).call === 'true',
        );
        assert.match(await person.line('backstage').locator('.line-talkers').textContent(), /^Call from Admin$/);
      }
      report(`show: the admin's Call flashed both panels' Backstage within ${Date.now() - t1} ms`);
      await page.locator('#show-lines th[data-key="backstage"][data-call]').waitFor({ timeout: TALK_LIGHT_MS });
      assert.deepEqual(page.errors, []);
    },
  );

  check('a click on a cell mutes the member on that line (the API says so), a second unmutes', async () => {
    const target = cell(page, 'Dana', 'stage-left');
    await target.click();
    await waitFor('the cell muted', async () => (await target.getAttribute('data-muted')) === '');
    assert.equal(await mutedInApi('Dana', 'stage-left'), true);
    assert.equal(await mutedInApi('Dana', 'backstage'), false, 'on that line only');
    assert.equal(await target.locator('.sc-muted').isVisible(), true);
    await target.click();
    await waitFor('the cell unmuted', async () => (await target.getAttribute('data-muted')) === null);
    assert.equal(await mutedInApi('Dana', 'stage-left'), false);
  });

  check('the keyboard: arrow keys move between cells, Enter and Space mute, / goes to the name filter', async () => {
    await cell(page, 'Dana', 'stage-left').focus();
    const focused = () =>
      page.evaluate(() => {
        const td = document.activeElement;
        return td?.matches('td.show-cell')
          ? `${td.parentElement.querySelector('.sm-name').textContent}/${td.dataset.key}`
          : td?.id;
      });
    await page.keyboard.press('ArrowRight');
    assert.equal(await focused(), 'Dana/backstage');
    await page.keyboard.press('Enter');
    await waitMuted('Dana', 'backstage', true);
    await page.keyboard.press('ArrowDown');
    assert.equal(await focused(), 'Sam/backstage');
    await page.keyboard.press(' ');
    await waitMuted('Sam', 'backstage', true);
    await page.keyboard.press(' ');
    await waitMuted('Sam', 'backstage', false);
    await page.keyboard.press('ArrowUp');
    await page.keyboard.press('Enter');
    await waitMuted('Dana', 'backstage', false);
    // One cell in the tab order: the last one moved to.
    assert.equal(await page.locator('#show-rows td[tabindex="0"]').count(), 1);
    assert.equal(await focused(), 'Dana/backstage');

    // `/`: the name filter.
    await page.keyboard.press('/');
    assert.equal(await focused(), 'show-filter-name');
    await page.keyboard.type('sa');
    await row(page, 'Dana').waitFor({ state: 'hidden' });
    assert.equal(await row(page, 'Sam').isVisible(), true);
    await page.locator('#show-filter-name').fill('');
    await row(page, 'Dana').waitFor();

    // By line: Stage Left's column alone, and only its members.
    await page.locator('#show-filter-line').selectOption('stage-left');
    await row(page, 'Sam').waitFor({ state: 'hidden' });
    assert.equal(await cell(page, 'Dana', 'backstage').isVisible(), false);
    assert.equal(await page.locator('#show-lines th[data-key="backstage"]').isVisible(), false);
    await page.locator('#show-filter-line').selectOption('');
    await row(page, 'Sam').waitFor();
    assert.equal(await cell(page, 'Dana', 'backstage').isVisible(), true);
    assert.deepEqual(page.errors, []);
  });

  check('1280 and 360 px, light and dark: the grid, and on a phone a list of each member’s lines', async () => {
    // Something to see: Sam muted on Backstage, Dana's talk (still lit, above).
    await cell(page, 'Sam', 'backstage').click();
    await waitMuted('Sam', 'backstage', true);
    const phone = await openAdmin(browser, control.origin, { token: control.adminToken, viewport: PHONE_VIEWPORT });
    await row(phone, 'Sam').waitFor();
    for (const [p, width] of [
      [page, 1280],
      [phone, 360],
    ]) {
      for (const colorScheme of ['light', 'dark']) {
        await p.emulateMedia({ colorScheme }); // CDP's Emulation.setEmulatedMedia
        const { scrollWidth, innerWidth } = await p.evaluate(() => ({
          scrollWidth: document.scrollingElement.scrollWidth,
          innerWidth,
        }));
        assert.ok(scrollWidth <= innerWidth, `${width} px ${colorScheme}: scrollWidth ${scrollWidth} > ${innerWidth}`);
        await p.screenshot({ path: join(DOC_SHOTS, `admin-show-live-${width}-${colorScheme}.png`) });
      }
    }

    // The phone's list: a member's lines only, each named; the others not there at all.
    const shown = (name) =>
      row(phone, name)
        .locator('td.show-cell')
        .evaluateAll((tds) => tds.filter((td) => td.getClientRects().length > 0).map((td) => td.dataset.lineName));
    assert.deepEqual(await shown('Dana'), ['Stage Left', 'Backstage']);
    assert.deepEqual(await shown('Sam'), ['Backstage']);
    // Stacked: Sam's row below Dana's, not beside it.
    const [danaBox, samBox] = [await row(phone, 'Dana').boundingBox(), await row(phone, 'Sam').boundingBox()];
    assert.ok(samBox.y >= danaBox.y + danaBox.height, 'one member under the other');
    // Its cells still mute.
    await cell(phone, 'Sam', 'backstage').click();
    await waitFor('Sam unmuted from the phone', async () => (await mutedInApi('Sam', 'backstage')) === false);
    assert.deepEqual(phone.errors, []);
    await phone.context().close();
  });

  check('a member who leaves is removed from the grid', async () => {
    const t0 = Date.now();
    await sam.page.locator('#leave').click();
    await row(page, 'Sam').waitFor({ state: 'detached', timeout: REFRESH_BOUND_MS });
    report(`show: Sam's row went ${Date.now() - t0} ms after he left`);
    await waitFor(
      'Sam no longer connected in the API',
      async () => (await control.user('Sam'))?.state !== 'connected',
      {
        timeout: 5_000,
      },
    );
    assert.equal(await row(page, 'Dana').isVisible(), true);
    assert.match(await page.locator('#show-summary').textContent(), /^1 connected/);
    assert.deepEqual(page.errors, []);
  });
});

describe(`admin Show tab, a crew of ${CREW_SIZE} (the headless crew)`, { timeout: 240_000 }, () => {
  let control;
  let browser;
  let stop;
  let crew;
  const crewLog = [];
  const { check, reportLogsIfFailed, failed } = trackedTests();

  before(async () => {
    if (!existsSync(CREW_BIN)) return;
    ({ control, browser, stop } = await startWithBrowser(['Stage Left', 'Backstage']));
  });

  after(async () => {
    await reportLogsIfFailed(control);
    if (failed())
      report(
        `partyline-crew's first and last lines:\n${[...crewLog.slice(0, 10), '…', ...crewLog.slice(-10)].join('\n')}`,
      );
    crew?.kill('SIGTERM');
    await stop?.();
  });

  check(
    `${CREW_SIZE} members in the grid, each a row; a talk event lights its member's cell`,
    async () => {
      // Built with the daemons by scripts/test (`cargo build --workspace --bins`): a missing
      // binary fails the test rather than skipping what it holds.
      assert.ok(existsSync(CREW_BIN), `no ${CREW_BIN}: cargo build -p partyline-crew, or set PARTYLINE_CREW_BIN`);
      const page = await openAdmin(browser, control.origin, { token: control.adminToken });
      // Every cell that lights, as it lights (a talk may be over before a poll would see it), and
      // every talk event, from a stream of the test's own.
      await page.evaluate((token) => {
        window.lit = [];
        new MutationObserver((changes) => {
          for (const { target } of changes) {
            if (target.hasAttribute('data-talking')) {
              window.lit.push({ at: Date.now(), identity: target.parentElement.dataset.key, line: target.dataset.key });
            }
          }
        }).observe(document.getElementById('show-rows'), {
          subtree: true,
          attributes: true,
          attributeFilter: ['data-talking'],
        });
        window.talks = [];
        fetch('/api/admin/events', { headers: { Authorization: `Bearer ${token}` } }).then(async (response) => {
          const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
          let buffer = '';
          for (;;) {
            const { value, done } = await reader.read();
            if (done) return;
            buffer += value;
            let end;
            while ((end = buffer.indexOf('\n\n')) >= 0) {
              const block = buffer.slice(0, end).split('\n');
              buffer = buffer.slice(end + 2);
              if (!block.includes('event: talking')) continue;
              const data = JSON.parse(block.find((line) => line.startsWith('data:')).slice(5));
              window.talks.push({ at: Date.now(), identity: data.identity, line: data.groupId });
            }
          }
        });
      }, control.adminToken);

      const t0 = Date.now();
      crew = spawn(
        CREW_BIN,
        [
          ['--server', control.origin.replace(/\/$/, '')],
          ['--users', String(CREW_SIZE)],
          // One line each: a Janus node carries 64 participants (one per line of a panel) by default.
          ['--listen', 'stage-left'],
          ['--talk', 'stage-left'],
          ['--ramp', '10'],
          ['--duration', '180'],
          ['--turn', '2'],
          ['--media-address', iceAddress()],
        ].flat(),
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      crew.stderr.setEncoding('utf8');
      crew.stderr.on('data', (text) => crewLog.push(...text.trimEnd().split('\n')));

      const rows = page.locator('#show-rows tr');
      await waitFor(`${CREW_SIZE} rows`, async () => (await rows.count()) === CREW_SIZE, {
        timeout: 90_000,
        interval: 500,
      });
      report(`show: ${CREW_SIZE} members of the headless crew in the grid ${Date.now() - t0} ms after its start`);
      const names = await page.locator('#show-rows .sm-name').allTextContents();
      const expected = Array.from({ length: CREW_SIZE }, (_, i) => `crew-${i + 1}`);
      assert.deepEqual([...names].sort(), [...expected].sort());
      assert.equal(await page.locator('#show-rows td[data-on]').count(), CREW_SIZE, 'one line each');

      // The first talk event, and its member's cell lit by it.
      await waitFor('a talk event', () => page.evaluate(() => window.talks.length > 0), { timeout: 30_000 });
      const talk = await page.evaluate(() => window.talks[0]);
      const lit = await waitFor(
        `${talk.identity}'s cell on ${talk.line} lit`,
        () =>
          page.evaluate(
            ({ identity, line }) => window.lit.find((l) => l.identity === identity && l.line === line),
            talk,
          ),
        { timeout: 2_000 },
      );
      report(`show: ${talk.identity}'s talk lit the cell ${lit.at - talk.at} ms from the test's own copy of the event`);
      const stray = await page.evaluate(() =>
        window.lit.filter((l) => !window.talks.some((t) => t.identity === l.identity && t.line === l.line)),
      );
      assert.deepEqual(stray, [], 'no cell lit without its talk event');
      await page.screenshot({ path: join(DOC_SHOTS, `admin-show-${CREW_SIZE}-1280-light.png`) });

      // The filter finds one in 50.
      await page.locator('#show-filter-name').fill('crew-17');
      await waitFor('one row', async () => (await page.locator('#show-rows tr:visible').count()) === 1);
      assert.deepEqual(page.errors, []);
    },
    { timeout: 180_000 },
  );
});
