// The admin UI's show report (System tab, /admin#system) in a real browser, against the real
// partyline-control and Janus: a group created, a crew member joined through the join page
// and left; the report of the last hour shows the member's row with the join and the leave (with
// why) and the group's; Download CSV saves `partyline-report-<from>-<to>.csv` whose first line
// is the CSV header and which has the join and the leave; a custom window whose start is after
// its end shows the API's error in the section (the section with the report:
// `admin-report.png` in target/ui-screenshots/). Run by scripts/test-browser (see README.md here).

import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { Person, SHOTS, openAdmin, startWithBrowser, trackedTests, waitFor } from './harness.mjs';

const CSV_HEADER = 'time,kind,member,group,detail,duration_s';

describe('admin show report', { timeout: 120_000 }, () => {
  let control;
  let browser;
  let stop;
  let page; // the admin's desktop page, on the System tab
  let rita;
  const { check, reportLogsIfFailed } = trackedTests();

  const memberRow = (name) => page.locator(`#report-members tr[data-key="${name}"]`);

  /** Picks the window `value` (`hour`, `day`, `custom`) and clicks Show; resolves at the answer. */
  async function showReport(value) {
    await page.locator('#report-window').selectOption(value);
    const answer = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/admin/report', { timeout: 10_000 });
    await page.locator('#report-show').click();
    const response = await answer;
    // Written into the page once the button is back.
    await page.locator('#report-show:not([disabled])').waitFor();
    return response;
  }

  before(async () => {
    ({ control, browser, stop } = await startWithBrowser(['Stage Left']));
    page = await openAdmin(browser, control.origin, { token: control.adminToken });
  });

  after(async () => {
    await reportLogsIfFailed(control);
    await rita?.close();
    await stop?.();
  });

  check('the last hour: a member who joined and left shows with the join and the leave', async () => {
    assert.equal((await control.admin('POST', '/groups', { name: 'Report Line' })).status, 201);
    rita = await Person.open(browser, control.origin, 'Rita');
    await rita.join('report-line');
    await rita.waitState('connected');
    await rita.page.locator('#leave').click();
    await waitFor(
      'Rita no longer connected in the API',
      async () => (await control.user('Rita'))?.state !== 'connected',
      {
        timeout: 10_000,
      },
    );

    await page.locator('#tab-system').click();
    await page.locator('#report-title').waitFor();
    // The journal is written a moment after the event: ask again until the leave is in.
    await waitFor(
      "Rita's leave in the report",
      async () => {
        const answer = await showReport('hour');
        assert.equal(answer.status(), 200);
        const query = new URL(answer.url()).searchParams;
        assert.equal(query.get('format'), 'json');
        // The last hour, in RFC 3339 UTC.
        const [from, to] = [Date.parse(query.get('from')), Date.parse(query.get('to'))];
        assert.match(query.get('from'), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
        assert.ok(
          Math.abs(to - from - 3_600_000) <= 1_000,
          `a window of an hour: ${query.get('from')} to ${query.get('to')}`,
        );
        assert.ok(Math.abs(Date.now() - to) < 5_000, 'ending now');
        return (
          (await memberRow('Rita').count()) > 0 && (await memberRow('Rita').locator('.report-leaves li').count()) > 0
        );
      },
      { timeout: 10_000, interval: 500 },
    );
    const row = memberRow('Rita');
    assert.equal(await row.locator('.report-joins li').count(), 1, 'one join');
    assert.match(await row.locator('.report-joins').textContent(), /on report-line/);
    assert.equal(await row.locator('.report-leaves li').count(), 1, 'one leave');
    assert.match(await row.locator('.report-leaves').textContent(), /from report-line: \S/, 'the leave says why');
    const group = page.locator('#report-groups tr[data-key="report-line"]');
    assert.match(await group.textContent(), /Rita/);
    assert.match(await page.locator('#report-status').textContent(), /1 crew member\b/);
    assert.equal(await page.locator('#report-error').isHidden(), true);
    await mkdir(SHOTS, { recursive: true });
    await page.locator('section[aria-labelledby="report-title"]').screenshot({ path: join(SHOTS, 'admin-report.png') });
    assert.deepEqual(page.errors, []);
  });

  check('Download CSV saves the same window as CSV, fetched with the admin token', async () => {
    await page.locator('#report-window').selectOption('hour');
    const requested = page.waitForRequest((r) => new URL(r.url()).pathname === '/api/admin/report');
    const downloaded = page.waitForEvent('download');
    await page.locator('#report-csv').click();
    const request = await requested;
    assert.equal(new URL(request.url()).searchParams.get('format'), 'csv');
    assert.equal(request.headers().authorization, `Bearer ${control.adminToken}`);
    const download = await downloaded;
    assert.match(download.suggestedFilename(), /^partyline-report-\d{8}T\d{6}Z-\d{8}T\d{6}Z\.csv$/);
    const csv = await readFile(await download.path(), 'utf8');
    const lines = csv.split(/\r?\n/);
    assert.equal(lines[0], CSV_HEADER);
    assert.ok(
      lines.some((l) => /,join,Rita,report-line,/.test(l)),
      `a join of Rita:\n${csv}`,
    );
    assert.ok(
      lines.some((l) => /,leave,Rita,report-line,/.test(l)),
      `a leave of Rita:\n${csv}`,
    );
    assert.equal(await page.locator('#report-error').isHidden(), true);
    assert.deepEqual(page.errors, []);
  });

  check("a custom window whose start is after its end: the API's error shows in the section", async () => {
    await page.locator('#report-window').selectOption('custom');
    await page.locator('#report-from').fill('2026-05-01T20:00:00');
    await page.locator('#report-to').fill('2026-05-01T18:00:00');
    const answer = await showReport('custom');
    assert.equal(answer.status(), 400);
    // The local times the inputs hold, sent in UTC.
    const query = new URL(answer.url()).searchParams;
    assert.equal(query.get('from'), new Date('2026-05-01T20:00:00').toISOString().replace('.000Z', 'Z'));
    assert.equal(query.get('to'), new Date('2026-05-01T18:00:00').toISOString().replace('.000Z', 'Z'));
    const error = page.locator('#report-error');
    await error.waitFor({ state: 'visible' });
    assert.match(await error.textContent(), /Could not load the report: from .* is after to/);
    // Put right, the error goes.
    await page.locator('#report-to').fill('2026-05-01T22:00:00');
    assert.equal((await showReport('custom')).status(), 200);
    await error.waitFor({ state: 'hidden' });
    assert.deepEqual(page.errors, []);
  });
});
