// Browser tests of the Bitfocus Companion module (integrations/companion/): its network side,
// PartylineClient, and the feedbacks' conditions and variables of its model.js, against the
// real control (over TLS with its self-signed certificate, as it runs by default, which every
// client pins), a real Janus and real panels in Chromium. Each action changes the panel (as
// the panel's DOM shows it); each feedback follows a change made on the panel's own buttons;
// a held talk is kept on past crew.maxRemoteTalkSeconds; the event stream comes back after a
// cut; the certificate the panel and the admin UI show is accepted, and any other refused
// before the panel key is sent. Draws the module's presets as they would show the panel
// (`companion-keys.png` in target/ui-screenshots/).
// Run by scripts/test-browser (which installs the module's node_modules).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, readFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { promisify } from 'node:util';
import { after, before, describe } from 'node:test';
import { Person, SHOTS, SOUND_DB, report, since, startWithTones, trackedTests, waitFor } from './harness.mjs';
import {
  CALL_MS,
  PanelError,
  PartylineClient,
  certificateFingerprint,
  panelBase,
} from '../../integrations/companion/src/client.js';
import {
  buttonNow,
  callFlashing,
  connected,
  feedbackValue,
  lineActive,
  listening,
  presetDefinitions,
  talkIs,
  variableDefinitions,
  variableValues,
} from '../../integrations/companion/src/model.js';

const X = 'line-x';
const Y = 'line-y';
/** `crew.maxRemoteTalkSeconds` of this suite: short, so that a held talk must be kept on. */
const MAX_REMOTE_TALK_S = 2;
const PRESSES = 20;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * Waits until `probe()` is true, checked on each of the client's `change` events (no polling):
 * resolves with the ms it took.
 */
function until(client, what, probe, timeout = 5000) {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!probe()) return false;
      clearTimeout(timer);
      client.off('change', check);
      resolve(since(t0));
      return true;
    };
    const timer = setTimeout(() => {
      client.off('change', check);
      reject(
        new Error(
          `${what}: not within ${timeout} ms (status ${client.status} ${client.message}; panel ${JSON.stringify(client.panel)})`,
        ),
      );
    }, timeout);
    client.on('change', check);
    check();
  });
}

/** A TCP front to `port`: `cut()` drops every connection, `refuse(true)` drops new ones at once. */
async function tcpFront(port) {
  const sockets = new Set();
  let refusing = false;
  const serve = (socket) => {
    if (refusing) return socket.destroy();
    const to = connect(port, '127.0.0.1');
    sockets.add(socket).add(to);
    socket.pipe(to).pipe(socket);
    const drop = () => {
      socket.destroy();
      to.destroy();
      sockets.delete(socket);
      sockets.delete(to);
    };
    socket.on('error', drop).on('close', drop);
    to.on('error', drop).on('close', drop);
  };
  const server = createServer(serve);
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    port: server.address().port,
    cut: () => {
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    refuse: (on) => {
      refusing = on;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A TLS server with a certificate of its own (`tls`: key and cert) where a client expects
 * partyline, as an interceptor on the LAN would be: it answers nothing, and `received()` is
 * what clients sent it once their handshake was done (the requests, in clear).
 */
async function impostor(tls) {
  const sockets = new Set();
  const chunks = [];
  const server = createTlsServer(tls, (socket) => {
    sockets.add(socket);
    socket
      .on('data', (chunk) => chunks.push(chunk))
      .on('error', () => {})
      .on('close', () => sockets.delete(socket));
  });
  server.on('tlsClientError', () => {}); // a client refusing the certificate ends its handshake
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: server.address().port,
    received: () => Buffer.concat(chunks).toString('latin1'),
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('the Companion module against the real server', { timeout: 300_000 }, () => {
  let control;
  let dir;
  let browsers;
  let stop;
  const people = [];
  const clients = [];
  const { check, reportLogsIfFailed } = trackedTests();

  const open = async (mic, name, path) => {
    const p = await Person.joined(browsers[mic], control.origin, name, path);
    people.push(p);
    return p;
  };
  const client = (options) => {
    const c = new PartylineClient({ retry: { firstMs: 100, maxMs: 1000 }, ...options });
    clients.push(c);
    c.start();
    return c;
  };

  before(async () => {
    ({ control, browsers, dir, stop } = await startWithTones(
      ['Line X', 'Line Y'],
      { a: 440, b: 660 },
      { config: ['crew:', `  maxRemoteTalkSeconds: ${MAX_REMOTE_TALK_S}`], tls: true },
    ));
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    await Promise.all(clients.map((c) => c.stop()));
    await Promise.all(people.map((p) => p.close()));
    await stop?.();
  });

  check('the panel link is enough: the key is taken from it, or given apart', () => {
    const key = 'a'.repeat(32);
    assert.equal(panelBase(`https://host:8443/api/panel/${key}`), `https://host:8443/api/panel/${key}`);
    assert.equal(panelBase(`https://host:8443/api/panel/${key}/`), `https://host:8443/api/panel/${key}`);
    assert.equal(panelBase('https://host:8443/', key), `https://host:8443/api/panel/${key}`);
    assert.equal(panelBase('https://host/intercom', key), `https://host/intercom/api/panel/${key}`);
    assert.throws(
      () => panelBase('https://host:8443'),
      (e) => e instanceof PanelError && e.code === 'bad_config',
    );
    assert.throws(() => panelBase('ftp://host', key), /not an http/);
    assert.throws(() => panelBase('host:8443', key), /not an http|not a URL/);
  });

  check('a certificate SHA-256 is taken with or without colons, in any case, for an https server', () => {
    const sha256 = `${'AB:'.repeat(31)}CD`;
    assert.equal(certificateFingerprint(sha256.toLowerCase()), sha256);
    assert.equal(certificateFingerprint(` ${sha256.replaceAll(':', '')} `), sha256);
    const badConfig = (e) => e instanceof PanelError && e.code === 'bad_config';
    assert.throws(() => certificateFingerprint(sha256.slice(3)), badConfig, '31 bytes');
    assert.throws(() => certificateFingerprint(sha256.replace('CD', 'CG')), badConfig, 'not hex');
    assert.throws(
      () => new PartylineClient({ url: `http://host/api/panel/${'a'.repeat(32)}`, certificateSha256: sha256 }),
      badConfig,
    );
  });

  check("each action changes the panel's state; a held talk outlives crew.maxRemoteTalkSeconds", async () => {
    const ann = await open('a', 'Ann', `/?groups=${X},${Y}`);
    const ben = await open('b', 'Ben', `/?groups=${X}`);
    const c = client({ url: ann.token.panelUrl, certificateSha256: ann.token.certificateSha256 });
    await until(c, 'connected', () => connected(c));
    assert.equal(c.status, 'connected');
    assert.deepEqual(
      c.panel.lines.map((l) => [l.groupId, l.name, l.talk]),
      [
        [X, 'Line X', 'off'],
        [Y, 'Line Y', 'off'],
      ],
    );
    assert.deepEqual(
      Object.keys(variableDefinitions(c.panel))
        .filter((k) => k.endsWith('line_x'))
        .sort(),
      ['name_line_x', 'talk_line_x', 'talkers_line_x', 'volume_line_x'],
    );
    assert.equal(variableValues(c).username, 'Ann');
    await waitFor('Ben receiving X', async () => (await ben.lineLevel(X)) !== null);

    // Talk, pressed: the panel shows the surface's key, Ben hears Ann; kept on while held,
    // for twice the server's limit (without the client's requests it lets go after 2 s).
    const line = await c.talkPress(X);
    assert.equal(line.talk, 'remote');
    assert.equal((await ann.lineState(X)).talk, 'remote', 'applied on the panel as if pressed');
    assert.ok(talkIs(c, X, 'remote') && talkIs(c, X) && !talkIs(c, X, 'latched'), 'the talk feedback');
    await waitFor('Ben hearing Ann', async () => (await ben.lineLevel(X)) > SOUND_DB, { timeout: 5000, interval: 20 });
    const held = performance.now();
    while (performance.now() - held < MAX_REMOTE_TALK_S * 2000 + 500) {
      assert.equal((await ann.lineState(X)).talk, 'remote', `still held after ${since(held)} ms`);
      await ann.page.waitForTimeout(250);
    }
    assert.equal((await ann.lineState(X)).released, undefined);
    assert.equal((await c.talkRelease(X)).talk, 'off');
    assert.equal((await ann.lineState(X)).talk, 'off');
    assert.ok(!talkIs(c, X));
    // After the release, nothing keeps a talk on: a new press without release is let go by the server.
    assert.equal(c.holdTimer, null);

    // Toggle latches, and a second toggle lets go; a press on a latched key leaves it latched.
    assert.equal((await c.talk(X, 'toggle')).talk, 'latched');
    await ann.waitLine(X, 'talk', 'latched');
    assert.equal((await c.talkPress(X)).talk, 'latched');
    assert.equal((await c.talkRelease(X)).talk, 'latched', 'the release leaves a key the press found on');
    assert.equal((await ann.lineState(X)).talk, 'latched');
    assert.equal((await c.talk(X, 'toggle')).talk, 'off');
    assert.equal((await ann.lineState(X)).talk, 'off');

    // Listen: toggle, off, on.
    assert.equal((await c.listen(Y, 'toggle')).listen, false);
    assert.equal((await ann.lineState(Y)).listen, 'off');
    assert.ok(!listening(c, Y));
    assert.equal((await c.listen(Y, 'on')).listen, true);
    assert.equal((await ann.lineState(Y)).listen, 'on');

    // Volume: set, step, clamped.
    assert.equal((await c.volume(X, 35)).volume, 35);
    assert.equal(await ann.control(X, 'volume').inputValue(), '35');
    assert.equal((await c.volumeStep(X, -10)).volume, 25);
    assert.equal(await ann.control(X, 'volume').inputValue(), '25');
    assert.equal((await c.volumeStep(X, 200)).volume, 100);
    assert.equal(await ann.control(X, 'volume').inputValue(), '100');
    assert.equal(variableValues(c).volume_line_x, 100);

    // Call: Ben's panel flashes the line; Ann's client sees its own call too.
    const calls = [];
    c.on('call', (call) => calls.push(call));
    await c.call(X);
    await ben.waitLine(X, 'call', 'true');
    await until(c, 'the call seen', () => c.calling(X));
    assert.deepEqual(
      calls.map((call) => [call.groupId, call.from]),
      [[X, 'Ann']],
    );

    // Refusals come back as errors with partyline's code.
    await assert.rejects(c.talk('nowhere', 'on'), (e) => e instanceof PanelError && e.status === 404);
    await assert.rejects(c.volumeStep('nowhere', 10), (e) => e.status === 404);
    const muted = await control.admin('POST', `/users/${ann.token.participantIdentity}/lines/${X}/mute`);
    assert.equal(muted.status, 200);
    await assert.rejects(c.talkPress(X), (e) => e.status === 409 && e.code === 'muted_by_admin');
    assert.equal(c.holdTimer, null, 'a refused press holds nothing');
    assert.equal(
      (await control.admin('POST', `/users/${ann.token.participantIdentity}/lines/${X}/unmute`)).status,
      200,
    );

    // action → panel state applied (the API answers once the panel applied it).
    const answered = [];
    for (let i = 0; i < PRESSES; i += 1) {
      const t0 = performance.now();
      const { talk } = await c.talk(Y, 'toggle');
      answered.push(since(t0));
      assert.equal(talk, i % 2 === 0 ? 'latched' : 'off');
      assert.equal((await ann.lineState(Y)).talk, talk);
    }
    report(
      `action → panel applied (talk toggle answered): median ${median(answered)} ms, max ${Math.max(...answered)} ms over ${PRESSES}`,
    );
    assert.deepEqual([...ann.errors, ...ben.errors], []);
    await c.stop();
    await Promise.all([ann.close(), ben.close()]);
  });

  check("each feedback and variable follows a change made on the panels' own buttons", async () => {
    const ann = await open('a', 'Ann', `/?groups=${X},${Y}`);
    const ben = await open('b', 'Ben', `/?groups=${X}`);
    const c = client({ url: control.origin, key: ann.token.panelKey, certificateSha256: ann.token.certificateSha256 });
    await until(c, 'connected', () => connected(c));
    assert.ok(feedbackValue(c, 'connected', {}, true));

    // Ann's own talk key: held → momentary, tapped → latched, tapped again → off.
    await ann.pressTalk(X);
    await until(c, 'Ann holding X', () => talkIs(c, X, 'momentary'));
    await ann.page.mouse.up();
    await until(c, 'Ann latched X', () => talkIs(c, X, 'latched'));
    assert.equal(variableValues(c).talk_line_x, 'latched');
    await ann.pressTalk(X);
    await until(c, 'Ann let go of X', () => !talkIs(c, X));
    await ann.page.mouse.up();

    // Ben talks on X: Ann's line is active and names him; he lets go: inactive, nobody.
    await ben.pressTalk(X);
    await until(c, 'X active with Ben', () => lineActive(c, X) && variableValues(c).talkers_line_x === 'Ben', 8000);
    assert.ok(!lineActive(c, Y), 'Y stays quiet');
    await ben.page.waitForTimeout(350); // a hold, not a tap
    await ben.page.mouse.up();
    await until(c, 'X quiet', () => !lineActive(c, X) && variableValues(c).talkers_line_x === '', 8000);

    // Ben calls X: the call feedback flashes (on in the blink's on phase only), for CALL_MS.
    const t0 = performance.now();
    await ben.control(X, 'call').click();
    await until(c, 'X called', () => c.calling(X));
    assert.ok(callFlashing(c, X, true) && !callFlashing(c, X, false) && !c.calling(Y));
    await until(c, 'the call over', () => !c.calling(X), CALL_MS + 2000);
    const callMs = since(t0);
    assert.ok(callMs > CALL_MS - 500, `the call flashed ${callMs} ms`);

    // Listen switch and volume slider on the panel.
    await ann.control(Y, 'listen').click();
    await until(c, 'Y listen off', () => !listening(c, Y));
    await ann.control(Y, 'listen').click();
    await until(c, 'Y listen on', () => listening(c, Y));
    await ann.control(X, 'volume').fill('42');
    await until(c, 'X volume 42', () => variableValues(c).volume_line_x === 42);

    // panel button → client state, over PRESSES presses (latch and release in turn).
    const seen = [];
    for (let i = 0; i < PRESSES; i += 1) {
      const latching = i % 2 === 0;
      await ann.control(Y, 'talk').hover();
      const t1 = performance.now();
      await ann.page.mouse.down();
      await until(c, `press ${i}`, () => (latching ? talkIs(c, Y, 'momentary') : !talkIs(c, Y)));
      seen.push(since(t1));
      await ann.page.mouse.up();
      if (latching) await until(c, `latch ${i}`, () => talkIs(c, Y, 'latched'));
    }
    report(
      `feedback: panel talk key pressed (pointer down sent) → client state: median ${median(seen)} ms, max ${Math.max(...seen)} ms over ${PRESSES}`,
    );

    // Ann leaves: her key is revoked, the client is no longer connected (and keeps trying).
    await ann.page.locator('#leave').click();
    await until(c, 'not connected after Leave', () => !connected(c), 8000);
    await until(c, 'the key unknown', () => c.status === 'unknown_key', 8000);
    assert.ok(!feedbackValue(c, 'connected', {}, true));
    assert.deepEqual([...ann.errors, ...ben.errors], []);
    await c.stop();
    assert.equal(c.status, 'stopped');
    await Promise.all([ann.close(), ben.close()]);
  });

  check('the event stream comes back after a cut, with what changed meanwhile', async () => {
    const ann = await open('a', 'Ann', `/?groups=${X}`);
    const front = await tcpFront(Number(new URL(control.origin).port));
    try {
      const c = client({
        url: `https://127.0.0.1:${front.port}`,
        key: ann.token.panelKey,
        certificateSha256: ann.token.certificateSha256,
      });
      await until(c, 'connected', () => connected(c));
      front.refuse(true);
      front.cut();
      await until(c, 'the cut seen', () => c.status === 'retrying');
      assert.ok(!connected(c));
      // Changed while the client cannot reach the server.
      await ann.control(X, 'listen').click();
      await ann.waitLine(X, 'listen', 'off');
      await ann.page.waitForTimeout(1500); // a few retries refused
      assert.ok(listening(c, X), 'not heard yet');
      const t0 = performance.now();
      front.refuse(false);
      await until(c, 'back, with listen off', () => connected(c) && !listening(c, X), 5000);
      report(`event stream: back ${since(t0)} ms after the server could be reached again (retries up to 1 s apart)`);
    } finally {
      await front.close();
    }
    await ann.close();
  });

  check(
    'the certificate the panel and the admin UI show is accepted; any other is refused before the key is sent',
    async () => {
      const ann = await open('a', 'Ann', `/?groups=${X}`);
      const key = ann.token.panelKey;
      // What a user pastes into Companion: the SHA-256 the panel shows under "Remote control",
      // the same in the admin UI's Stats tab.
      await ann.page.locator('#remote summary').click();
      const shown = await ann.page.locator('#remote-sha256').innerText();
      assert.equal(shown, ann.token.certificateSha256);
      const adminContext = await browsers.b.newContext({ ignoreHTTPSErrors: true });
      try {
        const admin = await adminContext.newPage();
        await admin.goto(`${control.origin}/admin`);
        await admin.locator('#token').fill(control.adminToken);
        await admin.locator('#login').click();
        await admin.locator('#tab-system').click();
        await admin.locator('#tls-copy').waitFor(); // shown once the stats brought a certificate
        assert.equal(await admin.locator('#tls-sha256').innerText(), shown);
      } finally {
        await adminContext.close();
      }

      // Pasted without colons, in lower case: the certificate control presents is that one.
      const pinned = client({ url: ann.token.panelUrl, certificateSha256: shown.replaceAll(':', '').toLowerCase() });
      await until(pinned, 'connected, the certificate pinned', () => connected(pinned));
      assert.equal((await pinned.volume(X, 60)).volume, 60);
      assert.equal(await ann.control(X, 'volume').inputValue(), '60');

      // An interceptor with a self-signed certificate of its own.
      const certs = join(dir, 'tls');
      await mkdir(certs);
      await promisify(execFile)('openssl', [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-subj',
        '/CN=localhost',
        '-days',
        '1',
        '-keyout',
        join(certs, 'key.pem'),
        '-out',
        join(certs, 'cert.pem'),
      ]);
      const tls = { key: await readFile(join(certs, 'key.pem')), cert: await readFile(join(certs, 'cert.pem')) };
      const front = await impostor(tls);
      try {
        const url = `https://127.0.0.1:${front.port}/api/panel/${key}`;
        const unpinned = client({ url });
        const mispinned = client({ url, certificateSha256: shown });
        await until(unpinned, 'refused without a pin', () => unpinned.status === 'untrusted_certificate');
        assert.match(unpinned.message, /self-signed certificate.*paste its SHA-256.*admin UI.*Remote control/);
        await until(
          mispinned,
          'refused, not the pinned certificate',
          () => mispinned.status === 'untrusted_certificate',
        );
        assert.match(mispinned.message, /is not the one pinned/);
        await assert.rejects(mispinned.volume(X, 10), (e) => e.code === 'untrusted_certificate');
        assert.ok(!front.received().includes(key), `the interceptor got the panel key:\n${front.received()}`);
        // A client pinned to the interceptor's certificate does send it the key: the check above would see it.
        const fooled = client({ url, certificateSha256: new X509Certificate(tls.cert).fingerprint256 });
        await waitFor('the interceptor receiving the key', () => front.received().includes(key));
        await Promise.all([unpinned.stop(), mispinned.stop(), fooled.stop()]);
      } finally {
        await front.close();
      }
      await pinned.stop();
      await ann.close();
    },
  );

  check(
    "Announce on a panel with the key: press holds every talk line past the server's limit, release lets them go, toggle latches; its feedback and presets",
    async () => {
      const { status, body } = await control.admin('POST', '/positions', {
        name: 'Desk',
        listen: [X, Y],
        talk: [X, Y],
        announce: true,
      });
      assert.equal(status, 201, JSON.stringify(body));
      const dana = await open('a', 'Dana', '/?position=desk');
      const c = client({ url: dana.token.panelUrl, certificateSha256: dana.token.certificateSha256 });
      await until(c, 'connected', () => connected(c));
      assert.equal(c.panel.announce, true);
      const { presets } = presetDefinitions(c.panel, 'partyline');
      assert.deepEqual([presets.announce?.name, presets.announce_latch?.name], ['Announce (hold)', 'Announce (latch)']);
      assert.equal(presetDefinitions({ ...c.panel, announce: false }, 'partyline').presets.announce, undefined);

      const pressed = await c.announcePress();
      assert.deepEqual(
        pressed.lines.map((l) => l.talk),
        ['remote', 'remote'],
        JSON.stringify(pressed),
      );
      assert.ok(feedbackValue(c, 'announcing', {}, true), 'the Announcing feedback');
      const held = performance.now();
      while (performance.now() - held < MAX_REMOTE_TALK_S * 1000 + 500) {
        assert.deepEqual(
          [(await dana.lineState(X)).talk, (await dana.lineState(Y)).talk],
          ['remote', 'remote'],
          `held after ${since(held)} ms`,
        );
        await dana.page.waitForTimeout(250);
      }
      await c.announceRelease();
      await dana.waitLine(X, 'talk', 'off');
      await dana.waitLine(Y, 'talk', 'off');
      await until(c, 'the Announcing feedback off', () => !feedbackValue(c, 'announcing', {}, true));
      assert.equal(c.holdTimer, null, 'nothing keeps a talk on after the release');

      assert.equal((await c.announce('toggle')).announcing, true);
      await dana.waitLine(X, 'talk', 'latched');
      await dana.waitLine(Y, 'talk', 'latched');
      assert.equal((await c.announce('toggle')).announcing, false);
      await dana.waitLine(Y, 'talk', 'off');
      await c.stop();
      await dana.close();
    },
  );

  check(
    "A person key opens a direct line and holds its talk past the server's limit; the callee's reply reaches the caller; their feedbacks, variables and presets",
    async () => {
      for (const position of [
        { name: 'Cam', listen: [X], talk: [X] },
        { name: 'Boss', listen: [X], talk: [X], talkTo: ['cam'] },
      ]) {
        const { status, body } = await control.admin('POST', '/positions', position);
        assert.equal(status, 201, JSON.stringify(body));
      }
      const eve = await open('a', 'Eve', '/?position=boss');
      const finn = await open('b', 'Finn', '/?position=cam');
      const c = client({ url: eve.token.panelUrl, certificateSha256: eve.token.certificateSha256 });
      await until(
        c,
        'Finn online at Cam',
        () => connected(c) && feedbackValue(c, 'person_online', { position: 'cam' }, true),
      );
      assert.equal(variableValues(c).person_cam, 'Finn');
      const { presets } = presetDefinitions(c.panel, 'partyline');
      assert.deepEqual(
        [presets.person_cam?.name, presets.reply?.name, presets.reply_latch?.name],
        ['Talk to Cam (hold)', 'Reply (hold)', 'Reply (latch)'],
      );

      const line = await c.personPress({ position: 'cam' });
      assert.equal(line.talk, 'remote', JSON.stringify(line));
      const room = line.groupId;
      assert.equal(await eve.line(room).getAttribute('data-direct'), 'Finn');
      await finn.waitHearing(room, 10_000);
      await until(c, 'the person key talking', () => feedbackValue(c, 'person_talk', { position: 'cam' }, true));
      const held = performance.now();
      while (performance.now() - held < MAX_REMOTE_TALK_S * 1000 + 500) {
        assert.equal((await eve.lineState(room)).talk, 'remote', `held after ${since(held)} ms`);
        await eve.page.waitForTimeout(250);
      }
      await c.personRelease({ position: 'cam' });
      await eve.waitLine(room, 'talk', 'off');

      const f = client({ url: finn.token.panelUrl, certificateSha256: finn.token.certificateSha256 });
      await until(f, "Finn's reply reaching Eve", () => connected(f) && f.replyTo?.name === 'Eve');
      assert.equal(variableValues(f).reply_to, 'Eve');
      assert.ok(
        feedbackValue(f, 'reply', { talking: false }, true) && !feedbackValue(f, 'reply', { talking: true }, true),
      );
      assert.equal((await f.reply('toggle')).talk, 'latched');
      await eve.waitHearing(room);
      await until(f, 'the reply feedback talking', () => feedbackValue(f, 'reply', { talking: true }, true));
      assert.equal((await f.reply('toggle')).talk, 'off');
      await finn.waitLine(room, 'talk', 'off');
      await Promise.all([c.stop(), f.stop()]);
      await Promise.all([eve.close(), finn.close()]);
    },
  );

  check('the presets, drawn as they show a panel (companion-keys.png)', async () => {
    const ann = await open('a', 'Ann', `/?groups=${X},${Y}`);
    const ben = await open('b', 'Ben', `/?groups=${X}`);
    const c = client({ url: ann.token.panelUrl, certificateSha256: ann.token.certificateSha256 });
    await until(c, 'connected', () => connected(c));
    // Ann latched on X, Ben talking on X, Y called, Y's listen off, X at 70.
    await c.talk(X, 'toggle');
    await c.volume(X, 70);
    await c.listen(Y, 'off');
    await ben.pressTalk(X);
    await until(c, 'Ben on X', () => variableValues(c).talkers_line_x.includes('Ben'), 8000);
    await c.call(Y);
    await until(c, 'Y called', () => c.calling(Y));
    const { presets } = presetDefinitions(c.panel, 'partyline');
    const keys = Object.values(presets).map((p) => ({ grid: p.grid, ...buttonNow(c, p, 'partyline', true) }));
    const hex = (n) => `#${n.toString(16).padStart(6, '0')}`;
    const cells = keys.map(
      (k) =>
        `<div class="key" style="grid-row:${k.grid[0] + 1};grid-column:${k.grid[1] + 1};` +
        `background:${hex(k.bgcolor)};color:${hex(k.color)};font-size:${k.size === '14' ? 13 : 16}px">${escape(k.text).replaceAll('\n', '<br>')}</div>`,
    );
    const page = await browsers.a.newPage({ viewport: { width: 8 * 80 + 24, height: 3 * 80 + 24 } });
    await page.setContent(`<!doctype html><style>
      body { margin: 0; background: #111; font-family: sans-serif; }
      .grid { display: grid; grid-template-columns: repeat(8, 72px); grid-template-rows: repeat(3, 72px); gap: 8px; padding: 12px; }
      .key { border-radius: 6px; display: flex; align-items: center; justify-content: center; text-align: center; font-weight: bold; line-height: 1.15; overflow: hidden; }
    </style><div class="grid">${cells.join('')}</div>`);
    await mkdir(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, 'companion-keys.png') });
    await page.close();
    const talkKey = keys.find((k) => k.grid[0] === 1 && k.grid[1] === 1);
    assert.equal(talkKey.text, 'TALK\nLine X');
    assert.equal(talkKey.bgcolor, 0xe66e00, 'X latched: the talk keys orange');
    assert.equal(
      keys.find((k) => k.grid[0] === 1 && k.grid[1] === 0).bgcolor,
      0xf0c800,
      'X active: its name key yellow',
    );
    assert.equal(
      keys.find((k) => k.grid[0] === 2 && k.grid[1] === 3).bgcolor,
      0x282828,
      'Y not listened to: its listen key dark',
    );
    assert.equal(keys.find((k) => k.grid[0] === 2 && k.grid[1] === 6).bgcolor, 0x005adc, 'Y called: its call key blue');
    assert.match(keys.find((k) => k.grid[0] === 1 && k.grid[1] === 0).text, /^Line X\n.*Ben/);
    await ben.page.mouse.up();
    await c.stop();
    await Promise.all([ann.close(), ben.close()]);
  });
});

function escape(text) {
  return text.replace(/[&<>"]/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[ch]);
}
