// IFB on the card, in real browsers: the admin gives the server audio user Presenter an IFB in
// the sound-card form (the program from the card's input 0, interrupted by Director), then
// changes its dip in the row's edit form; each checked in the row and the YAML on disk. The
// card's output 3 (the presenter's earpiece) plays the program; Ann talks on Director from her
// panel, and then a card input of Director talks: each is heard on the IFB output with the
// program 20 dB down under it, and the program comes back after the hold. Reports the talk →
// earpiece latency (Ann's key down, the card input's start) and when the program is back.
//
// Run: scripts/test-browser web/tests/ifb.test.mjs.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { Person, openAdmin, report, since, startWithTones, toneDb, trackedTests, waitFor } from './harness.mjs';

const [X, D] = ['line-x', 'director'];
const PROGRAM_HZ = 700;
const MIC_HZ = 440;
const DESK_HZ = 1000;
const IFB_OUTPUT = 3;
const DIP_DB = -20;
/** How far a dipped program may be from its level less the dip (Opus and the mix round). */
const DIP_TOLERANCE_DB = 1.5;

describe("IFB on the card: the program dips under the interrupt group's talk", { timeout: 240_000 }, () => {
  let control;
  let browsers;
  let stop;
  let output;
  let programTone;
  let ann;
  let fullDb; // the program's level on the IFB output, nobody talking
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  const yaml = () => readFile(join(control.dir, 'partyline.yaml'), 'utf8');

  /** The program's, Ann's and the desk's levels on the IFB output over the last `span` s. */
  const levels = (span = 0.3) => {
    const x = output.channel(IFB_OUTPUT, output.seconds - span);
    return { program: toneDb(x, PROGRAM_HZ), mic: toneDb(x, MIC_HZ), desk: toneDb(x, DESK_HZ) };
  };
  const shown = (l) => `program ${l.program.toFixed(1)}, Ann ${l.mic.toFixed(1)}, desk ${l.desk.toFixed(1)} dBFS`;

  /** Waits until the last 300 ms of the IFB output pass `ok`; the levels then. */
  const waitLevels = (what, ok, timeout = 10_000) =>
    waitFor(
      what,
      async () => {
        const l = levels();
        return output.seconds > 0.5 && ok(l) ? l : null;
      },
      { timeout, interval: 25 },
    ).catch((error) => {
      throw new Error(`${error.message}; the IFB output now: ${shown(levels())}`);
    });

  /** The talk is there: a browser's fake microphone reaches the card at about -35 dBFS. */
  const TALK_DB = -45;
  const dipped = (talk) => (l) => Math.abs(l.program - (fullDb + DIP_DB)) < DIP_TOLERANCE_DB && l[talk] > TALK_DB;
  const alone = (l) => Math.abs(l.program - fullDb) < 1 && l.mic < -50 && l.desk < -50;

  before(async () => {
    ({ control, browsers, stop } = await startWithTones(['Line X', 'Director'], { ann: MIC_HZ }, { card: true }));
    output = await control.card.record();
    programTone = await control.card.tone(0, PROGRAM_HZ);
    ann = await Person.joined(browsers.ann, control.origin, 'Ann', `/?groups=${D}&talk=${D}`);
    people.push(ann);
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    await Promise.all(people.map((p) => p.close()));
    await output?.stop();
    await programTone?.stop();
    await stop?.();
  });

  check(
    'the admin adds the IFB in the sound-card form and changes its dip in the row; the output plays the program',
    async () => {
      const page = await openAdmin(browsers.ann, control.origin, { token: control.adminToken });
      try {
        await page.locator('#tab-soundcard').click();
        await page.locator('#su-create-name').fill('Presenter');
        await page.locator('#su-create-group').selectOption(X);
        await page.locator('#su-create-input').selectOption('1');
        await page.locator('#su-create-output').selectOption(String(IFB_OUTPUT));
        await page.locator('#su-create-ifb').check();
        await page.locator('#su-create-ifb-program').selectOption('in:0');
        await page.locator('#su-create-ifb-interrupt').selectOption(D);
        await page.locator('#su-create-ifb-dip').selectOption('-30');
        await page.locator('#su-create-submit').click();
        const summary = page.locator('#server-users-rows .su-ifb');
        await summary.filter({ hasText: 'IFB: input 0, under Director (−30 dB)' }).waitFor();
        assert.match(await yaml(), /ifb:\n\s+program: 0\n\s+interrupt: director\n\s+dimDb: -30/);

        await page.getByRole('button', { name: 'Edit Presenter' }).click();
        const form = page.getByRole('form', { name: 'Edit server audio user Presenter' });
        await form.locator('#su-edit-presenter-ifb-dip').selectOption(String(DIP_DB));
        await form.getByRole('button', { name: 'Save' }).click();
        await summary.filter({ hasText: `IFB: input 0, under Director (−${-DIP_DB} dB)` }).waitFor();
        assert.match(await yaml(), new RegExp(`dimDb: ${DIP_DB}\\n`));
        assert.deepEqual(page.errors, []);
      } finally {
        await page.context().close();
      }

      const l = await waitLevels('the program on the IFB output', (x) => x.program > -20 && x.mic < -50, 15_000);
      const at = output.seconds;
      await waitFor('1 s more of the IFB output', async () => output.seconds >= at + 1, { timeout: 5000 });
      fullDb = levels(1).program;
      report(
        `IFB output ${IFB_OUTPUT}, nobody talking: ${shown(l)}; the program at ${fullDb.toFixed(1)} dBFS over 1 s`,
      );
    },
    { timeout: 60_000 },
  );

  check(
    'Ann talks on Director: heard on the IFB with the program 20 dB under her, back after the hold',
    async () => {
      assert.ok(fullDb !== undefined, 'needs the first check');
      await waitLevels('the program alone before Ann talks', alone);
      const t0 = performance.now();
      await ann.pressTalk(D);
      try {
        await ann.waitLine(D, 'talk', 'momentary');
        const l = await waitLevels('Ann over the dipped program', dipped('mic'));
        const heardMs = since(t0);
        report(
          `Ann's key down → the IFB output has her over the program ${DIP_DB} dB: ${heardMs} ms (300 ms windows); ${shown(l)}`,
        );
      } finally {
        await ann.page.waitForTimeout(450); // a hold, not a tap (which would latch)
        await ann.page.mouse.up();
      }
      await ann.waitLine(D, 'talk', 'off');
      const t1 = performance.now();
      await waitLevels('the program back after Ann', alone);
      const backMs = since(t1);
      report(
        `Ann released → the program back at its level: ${backMs} ms (a 600 ms hold, a 150 ms ramp, 300 ms windows)`,
      );
      assert.ok(backMs > 500, `the program came back ${backMs} ms after the release: no hold`);
      assert.deepEqual(ann.errors, []);
    },
    { timeout: 60_000 },
  );

  check(
    'a card input of Director interrupts the IFB too, and the program returns when it stops',
    async () => {
      assert.ok(fullDb !== undefined, 'needs the first check');
      await control.addServerUser({ name: 'Director desk', group: D, inputChannel: 2 });
      await waitLevels('the program alone before the desk talks', alone);
      const t0 = performance.now();
      const desk = await control.card.tone(2, DESK_HZ);
      try {
        const l = await waitLevels('the desk over the dipped program', dipped('desk'));
        report(
          `the desk's input starts → the IFB output has it over the program ${DIP_DB} dB: ${since(t0)} ms (player start included); ${shown(l)}`,
        );
      } finally {
        await desk.stop();
      }
      await waitLevels('the program back after the desk', alone);
    },
    { timeout: 60_000 },
  );
});
