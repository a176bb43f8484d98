// WHIP and WHEP with clients written by others, in Chromium: Eyevinn's WHIP web client
// (@eyevinn/whip-web-client) publishes its fake microphone's 1 kHz tone into the line Show with
// a WHIP token the admin created in the Groups tab, and Ann's panel on Show hears it; Eyevinn's WebRTC player
// (@eyevinn/webrtc-player, its WHEP adapter, offering video and audio) listens to Show with a WHEP token and hears Ann's
// 440 Hz when she talks. Both libraries come from the npm registry, bundled for the page by
// esbuild as they are. A revoked token is 401, another group's 403; the WHIP client's own end
// (its DELETE) takes its participant out of the line.
//
// Run: scripts/test-browser web/tests/streams.test.mjs.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { Person, bundleForPage, openAdmin, report, since, startWithTones, trackedTests, waitFor } from './harness.mjs';

const SHOW = 'show';
/**
 * The clients' page: another site than control's (a player's or a publisher's own page), served
 * by the test, so that the requests are cross-origin as in the field (CORS), and with no
 * Content-Security-Policy of partyline's (which keeps inline scripts off its own pages).
 */
const CLIENT_PAGE = 'http://127.0.0.1:9/client.html';
const clientPage = (browser, name) =>
  Person.open(browser, CLIENT_PAGE, name, {
    path: CLIENT_PAGE,
    // Chromium asks before a page reaches a loopback address (Local Network Access): granted.
    contextOptions: { permissions: ['local-network-access'] },
    prepare: (context) =>
      context.route(CLIENT_PAGE, (route) =>
        route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>client</title>' }),
      ),
  });

/** The levels (dB, an AnalyserNode's bins) at `hzs` of `selector`'s stream in `page`, over 300 ms. */
function levelsAt(page, selector, hzs) {
  return page.evaluate(
    async ([sel, frequencies]) => {
      const stream = document.querySelector(sel)?.srcObject;
      if (!stream || stream.getAudioTracks().length === 0) return null;
      const ctx = new AudioContext();
      await ctx.resume().catch(() => {});
      const analyser = ctx.createAnalyser();
      analyser.fftSize = 8192;
      ctx.createMediaStreamSource(stream).connect(analyser);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const bins = new Float32Array(analyser.frequencyBinCount);
      analyser.getFloatFrequencyData(bins);
      const at = (hz) => Math.round(bins[Math.round(hz / (ctx.sampleRate / analyser.fftSize))]);
      const levels = Object.fromEntries(frequencies.map((hz) => [hz, at(hz)]));
      await ctx.close();
      return levels;
    },
    [selector, hzs],
  );
}

describe('WHIP into a line and WHEP out of it, with clients written by others', { timeout: 240_000 }, () => {
  let control;
  let browsers;
  let stop;
  let ann;
  let obs;
  let player;
  const tokens = {};
  const people = [];
  const { check, reportLogsIfFailed } = trackedTests();

  const createToken = async (group, kind, name) => {
    const { status, body } = await control.admin('POST', `/groups/${group}/stream-tokens`, { kind, name });
    assert.equal(status, 201, JSON.stringify(body));
    return body;
  };
  const post = (url, secret, sdp) =>
    fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${secret}` },
      body: sdp,
    });

  before(async () => {
    ({ control, browsers, stop } = await startWithTones(['Show', 'Crew', 'Program'], {
      obs: 1000,
      ann: 440,
      player: 660,
    }));
    tokens.whep = await createToken(SHOW, 'whep', 'Remote director');
    tokens.otherWhep = await createToken('crew', 'whep', 'Crew player');
    ann = await Person.joined(browsers.ann, control.origin, 'Ann', `/?groups=${SHOW}`);
    people.push(ann);
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    await Promise.all(people.map((p) => p.close()));
    await stop?.();
  });

  check(
    'the admin creates a WHIP token for Show in the Groups tab: its URL and secret shown once',
    async () => {
      const page = await openAdmin(browsers.ann, control.origin, { token: control.adminToken });
      try {
        await page.locator('#tab-streams').click();
        await page.locator('#stream-token-group option[value="show"]').waitFor({ state: 'attached' });
        await page.locator('#stream-token-group').selectOption(SHOW);
        await page.locator('#stream-token-kind').selectOption('whip');
        await page.locator('#stream-token-name').fill('Vision mixer');
        await page.locator('#stream-token-submit').click();
        await page.locator('#stream-token-created').waitFor();
        tokens.whip = {
          url: await page.locator('#stream-token-url').textContent(),
          secret: await page.locator('#stream-token-secret').textContent(),
        };
        assert.match(tokens.whip.url, /\/api\/whip\/show$/);
        assert.match(tokens.whip.secret, /^[0-9a-f]{48}$/);
        await page.locator('#stream-tokens-rows tr', { hasText: 'Vision mixer' }).waitFor();
        assert.ok(
          !(await readFile(join(control.dir, 'partyline.yaml'), 'utf8')).includes(tokens.whip.secret),
          'only its hash is stored',
        );
        assert.deepEqual(page.errors, []);
      } finally {
        await page.context().close();
      }
    },
    { timeout: 60_000 },
  );

  check(
    "a WHIP client publishes its tone into Show: Ann's panel hears it",
    async () => {
      assert.ok(tokens.whip, 'needs the token');
      obs = await clientPage(browsers.obs, 'OBS');
      people.push(obs);
      await obs.page.addScriptTag({ content: await bundleForPage('@eyevinn/whip-web-client', 'WHIP') });
      // A vision mixer's program feed, not a voice: without the echo canceller, noise suppressor
      // and gain control that `{ audio: true }` turns on for a voice.
      await obs.page.evaluate(() => {
        window.programAudio = { audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false } };
      });
      const t0 = performance.now();
      await obs.page.evaluate(
        async ([url, secret]) => {
          const stream = await navigator.mediaDevices.getUserMedia(window.programAudio);
          window.whip = new window.WHIP.WHIPClient({
            endpoint: url,
            opts: { noTrickleIce: true, authkey: secret, iceServers: [] },
          });
          await window.whip.ingest(stream);
        },
        [tokens.whip.url, tokens.whip.secret],
      );
      await ann.waitHearing(SHOW, 10_000);
      report(`WHIP ingest → Ann hears it: ${since(t0)} ms`);
      const heard = await ann.dominantHz(SHOW);
      assert.ok(Math.abs(heard.hz - 1000) < 20, `Ann hears ${JSON.stringify(heard)}`);
      const users = await control.users();
      const source = users.find((u) => u.stream === 'whip');
      assert.equal(source?.username, 'Vision mixer (WHIP)', JSON.stringify(users));
      assert.deepEqual(obs.errors, []);
    },
    { timeout: 60_000 },
  );

  check(
    'a WHEP player listens to Show and hears Ann when she talks',
    async () => {
      player = await clientPage(browsers.player, 'Player');
      people.push(player);
      await player.page.addScriptTag({ content: await bundleForPage('@eyevinn/webrtc-player', 'WHEP') });
      await player.page.evaluate(
        async ([url, secret]) => {
          const video = document.createElement('video');
          video.id = 'whep';
          video.muted = true;
          video.autoplay = true;
          document.body.append(video);
          // As the player comes: it offers video too, which the line answers inactive.
          window.player = new window.WHEP.WebRTCPlayer({ video, type: 'whep', iceServers: [] });
          await window.player.load(new URL(url), `Bearer ${secret}`);
        },
        [tokens.whep.url, tokens.whep.secret],
      );
      await waitFor("the player's stream", async () => (await levelsAt(player.page, '#whep', [440])) !== null, {
        timeout: 15_000,
      });
      // The WHIP source's 1 kHz plays on Show meanwhile; Ann's 440 Hz comes when she talks.
      const t0 = performance.now();
      await ann.pressTalk(SHOW);
      try {
        const heard = await waitFor(
          "Ann's 440 Hz at the player",
          async () => {
            const levels = await levelsAt(player.page, '#whep', [440, 660, 1000]);
            // An AnalyserNode's bins: a tone stands some 60 dB over the silence around it.
            return levels && levels[440] > levels[660] + 30 ? levels : null;
          },
          { timeout: 10_000, interval: 100 },
        );
        report(`Ann talks → the WHEP player hears her: ${since(t0)} ms; levels ${JSON.stringify(heard)} dB`);
        assert.ok(heard[660] < -100, `the player hears itself (660 Hz): ${JSON.stringify(heard)}`);
      } finally {
        await ann.page.waitForTimeout(400);
        await ann.page.mouse.up();
      }
      const users = await control.users();
      const listener = users.find((u) => u.stream === 'whep');
      assert.deepEqual(
        [listener?.lines?.[0]?.listen, listener?.lines?.[0]?.talk],
        [true, false],
        JSON.stringify(users),
      );
    },
    { timeout: 60_000 },
  );

  check(
    "another group's token is 403, a revoked one 401; the WHIP client's end takes its source out",
    async () => {
      const offer = 'v=0\r\n';
      assert.equal((await post(tokens.whep.url.replace(`/${SHOW}`, '/crew'), tokens.whep.secret, offer)).status, 403);
      assert.equal((await post(tokens.whep.url, tokens.otherWhep.secret, offer)).status, 403);
      const revoked = await control.admin('DELETE', `/groups/crew/stream-tokens/${tokens.otherWhep.token.id}`);
      assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
      assert.equal(
        (await post(tokens.whep.url.replace(`/${SHOW}`, '/crew'), tokens.otherWhep.secret, offer)).status,
        401,
      );

      await obs.page.evaluate(() => window.whip.destroy());
      await waitFor('the WHIP source gone', async () => !(await control.users()).some((u) => u.stream === 'whip'), {
        timeout: 10_000,
      });
      await ann.waitQuiet(SHOW, 10_000);
    },
    { timeout: 60_000 },
  );

  check(
    'a WHIP source on a program line is the program: dimmed on a panel while someone talks on its other line',
    async () => {
      const made = await control.admin('PUT', '/groups/program', { program: true });
      assert.equal(made.status, 200, JSON.stringify(made.body));
      const feed = await createToken('program', 'whip', 'Show feed');
      await obs.page.evaluate(
        async ([url, secret]) => {
          window.feedStream = await navigator.mediaDevices.getUserMedia(window.programAudio);
          window.feed = new window.WHIP.WHIPClient({
            endpoint: url,
            opts: { noTrickleIce: true, authkey: secret, iceServers: [] },
          });
          await window.feed.ingest(window.feedStream);
        },
        [feed.url, feed.secret],
      );
      const dee = await Person.joined(browsers.player, control.origin, 'Dee', '/?groups=program,crew&talk=crew');
      people.push(dee);
      // Measured once the feed is there: the first window above the floor may hold its start.
      await dee.heardSteadily('program', 1000, 10_000);
      const full = (await dee.heard('program', 1000)).median;
      const eve = await Person.joined(browsers.ann, control.origin, 'Eve', '/?groups=crew');
      people.push(eve);
      await eve.pressTalk('crew');
      try {
        await dee.waitLine('program', 'dimmed', 'true', 5000);
        // The meter falls 30 dB/s: measured once it has come down the dim's 14 dB.
        await dee.page.waitForTimeout(800);
        const dimmed = (await dee.heard('program', 800)).median;
        report(`program line fed by WHIP: ${full} dBFS, dimmed to ${dimmed} dBFS while Eve talks on Crew`);
        assert.ok(dimmed < full - 12, `dimmed from ${full} to ${dimmed}`);
      } finally {
        await eve.page.waitForTimeout(400);
        await eve.page.mouse.up();
      }
      await dee.waitLine('program', 'dimmed', 'false', 5000);

      // The feed's microphone stopped: nothing more reaches Janus, and the idle source is removed.
      await obs.page.evaluate(() => window.feedStream.getTracks().forEach((track) => track.stop()));
      const t0 = performance.now();
      await waitFor(
        'the idle WHIP source removed',
        async () => !(await control.users()).some((u) => u.username === 'Show feed (WHIP)'),
        { timeout: 25_000, interval: 200 },
      );
      report(`a WHIP source that stopped sending: removed ${since(t0)} ms later (10 s without media)`);
      assert.match(await control.logTail(200), /stream session ended.*no media from it for 10 s/);
    },
    { timeout: 90_000 },
  );
});
