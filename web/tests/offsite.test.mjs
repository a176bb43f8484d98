// Crew off-site, through a NAT, in network namespaces of the test's own (offsite.mjs draws
// them): the venue (control, Janus, the TURN relay), a home router and a crew namespace behind it
// with a second Chromium.
//
// - The crew's network lets no UDP out, only TCP: the off-site panel joins through the relay
//   (coturn, TLS on 443, credentials from control's token answer), and the venue's panel and
//   the off-site one hear each other; the admin's users list says "relayed".
// - UDP allowed: the panel connects without the relay.
// - The relay refuses an expired credential, and a member's credential relays to the media
//   server only (turnutils_uclient, coturn's own client, from the crew's namespace).
// - The admin UI and API answer 403 to the crew's address, 200 on the venue's LAN; the join page
//   answers everyone. PINs take 6 digits once crew can join from off-site.
// - 50 panels behind the one NAT address get their tokens at once (crew.maxPendingPerAddress),
//   the 51st unused one is refused, and another address is not held up.
//
// Needs root, nft (nftables), coturn and openssl (scripts/deps). Run: scripts/test-browser
// web/tests/offsite.test.mjs.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe } from 'node:test';
import {
  Person,
  iceAddress,
  launchBrowser,
  openAdmin,
  report,
  startWithTones,
  trackedTests,
  waitFor,
  writeTone,
} from './harness.mjs';
import { OffSiteNet, RELAY, VENUE, credentialFor, echoPeer, relayConfig, startRelay } from './offsite.mjs';

const LINE = 'crew';
const CREW_BIN =
  process.env.PARTYLINE_CREW_BIN ?? fileURLToPath(new URL('../../target/debug/partyline-crew', import.meta.url));

describe('crew off-site: a panel behind a NAT, through the relay or not', { timeout: 300_000 }, () => {
  let dir;
  let net;
  let relay;
  let control;
  let browsers;
  let stop;
  let crewBrowser;
  let venueOrigin;
  let crewOrigin;
  const people = [];
  const { check, failed, reportLogsIfFailed } = trackedTests();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'offsite-'));
    net = await OffSiteNet.create(dir);
    ({ control, browsers, stop } = await startWithTones(
      [LINE],
      { venue: 660 },
      {
        tls: true,
        listen: '0.0.0.0:0',
        iceIface: net.iface,
        roomsAddress: VENUE,
        config: relayConfig(),
      },
    ));
    relay = await startRelay(dir, control, VENUE);
    const port = new URL(control.origin).port;
    venueOrigin = `https://${iceAddress()}:${port}`; // the venue's LAN
    crewOrigin = `https://${VENUE}:${port}`;
    crewBrowser = await launchBrowser({
      audioFile: await writeTone(join(dir, '440.wav'), 440),
      executablePath: await net.chromium(dir, relay.spki),
    });
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    if (relay && !relay.running) report(`the relay exited:\n${relay.log()}`);
    if (failed()) {
      const relayLog = await readFile(join(dir, 'turn.log'), 'utf8').catch(() => '');
      report(`the relay's log:\n${relayLog.split('\n').slice(-60).join('\n')}`);
    }
    await Promise.all(people.map((p) => p.close()));
    await crewBrowser?.close();
    await stop?.();
    await relay?.stop(5000);
    await net?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A panel on the line, connected; `who` is the crew (off-site) or the venue. */
  async function joined(who, name) {
    const [browser, origin] = who === 'crew' ? [crewBrowser, crewOrigin] : [browsers.venue, venueOrigin];
    const person = await Person.open(browser, origin, name);
    people.push(person);
    await person.join(LINE);
    await person.waitState('connected', 30_000);
    return person;
  }

  /** Each hears the other's tone on the line. */
  async function heardBothWays(offSite, atVenue) {
    await offSite.pressTalk(LINE);
    await atVenue.waitHearing(LINE, 10_000);
    await offSite.page.mouse.up();
    await atVenue.pressTalk(LINE);
    await offSite.waitHearing(LINE, 10_000);
    await atVenue.page.mouse.up();
  }

  /** The candidate type of `name`'s line as its panel reported it (`/api/admin/users`). */
  async function candidateTypeOf(name) {
    let seen;
    await waitFor(
      `${name}'s link reported`,
      async () => {
        const user = await control.user(name);
        seen = user?.lines?.find((l) => l.groupId === LINE)?.link?.candidateType;
        return seen !== undefined;
      },
      { timeout: 15_000, interval: 250 },
    );
    return seen;
  }

  check(
    'no UDP out of the crew network: the panel joins through the relay over TLS on 443, heard both ways',
    async () => {
      await net.letUdpOut(false);
      const remote = await joined('crew', 'Remote');
      const desk = await joined('venue', 'Desk');
      const relayed = remote.token.iceServers.find((s) => s.urls.some((u) => u.startsWith('turns:')));
      assert.match(relayed?.username ?? '', /^\d+:/, 'a TURN REST username: expiry:identity');
      await heardBothWays(remote, desk);
      assert.equal(await candidateTypeOf('Remote'), 'relay');
      assert.notEqual(await candidateTypeOf('Desk'), 'relay', 'the venue panel goes straight to Janus');
      const admin = await openAdmin(browsers.venue, venueOrigin, {
        token: control.adminToken,
        ignoreHTTPSErrors: true,
      });
      try {
        await admin.locator('#tab-crew').click();
        const line = admin.locator('[data-relayed]');
        await line.first().waitFor({ timeout: 10_000 });
        assert.match(await line.first().innerText(), /relayed/);
      } finally {
        await admin.context().close();
      }
      await remote.close();
      await desk.close();
    },
    { timeout: 120_000 },
  );

  /**
   * Two partyline-crew members in the crew's namespace, offering the relay beside their host
   * candidates (`--relay`), who talk in turns on the line and hear each other: the line's figures.
   */
  async function crewTool() {
    assert.ok(existsSync(CREW_BIN), `no ${CREW_BIN}: cargo build -p partyline-crew, or set PARTYLINE_CREW_BIN`);
    const pin = new X509Certificate(control.certificate).fingerprint256;
    const run = await net.inCrew(
      CREW_BIN,
      ...['--server', crewOrigin, '--certificate-sha256', pin],
      ...['--relay', '--relay-certificate-sha256', relay.certificateSha256],
      ...['--users', '2', '--listen', LINE, '--talk', LINE, '--ramp', '1', '--duration', '6', '--turn', '2'],
      '--json',
    );
    assert.equal(run.code, 0, `partyline-crew: ${run.stderr}`);
    const figures = JSON.parse(run.stdout);
    const line = figures.per_line.find((l) => l.room === LINE);
    assert.equal(figures.joins_failed, 0, run.stdout);
    assert.equal(line?.listeners, 2, run.stdout);
    assert.ok(line.bursts > 0 && line.tone_db > -40, `each heard the other: ${run.stdout}`);
    return line;
  }

  check(
    'no UDP out of the crew network: partyline-crew joins through the relay too, its members heard both ways',
    async () => {
      await net.letUdpOut(false);
      const line = await crewTool();
      report(
        `partyline-crew through the relay: tone ${line.tone_db.toFixed(1)} dBFS, ${line.bursts} bursts, ` +
          `mouth-to-ear median ${line.mouth_to_ear_ms?.median?.toFixed(1)} ms, ${line.gaps} gaps`,
      );
      assert.equal(line.relayed_listeners, 2, 'both heard through the relay');
    },
    { timeout: 60_000 },
  );

  check(
    'UDP let out: the panel and partyline-crew connect without the relay',
    async () => {
      await net.letUdpOut(true);
      const remote = await joined('crew', 'Remote again');
      const desk = await joined('venue', 'Desk again');
      await heardBothWays(remote, desk);
      assert.notEqual(await candidateTypeOf('Remote again'), 'relay');
      await remote.close();
      await desk.close();
      const line = await crewTool();
      assert.equal(line.relayed_listeners, 0, 'partyline-crew offered the relay and went straight');
    },
    { timeout: 120_000 },
  );

  check(
    'the relay refuses an expired credential, and relays a member only to the media server',
    async () => {
      const peer = await echoPeer(VENUE); // the media server
      const elsewhere = await echoPeer(iceAddress()); // the venue's LAN
      try {
        const { status, text } = await control.request('POST', '/api/token', {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username: 'Probe', groupId: LINE }),
        });
        assert.equal(status, 200, text);
        const { username, credential } = JSON.parse(text).iceServers.find((s) => s.username);
        const uclient = (user, password, to) =>
          net.inCrew(
            // Its report line by line, also when it is stopped.
            'stdbuf',
            '-oL',
            'turnutils_uclient',
            // TURN over TCP (the panel's test above goes over TLS): what is checked here is the
            // relay's policy, the same on every transport.
            '-t',
            '-p',
            '3478',
            '-c',
            '-n',
            '5',
            '-u',
            user,
            '-w',
            password,
            '-e',
            to.socket.address().address,
            '-r',
            String(to.port),
            RELAY,
          );
        const toMedia = await uclient(username, credential, peer);
        assert.ok(peer.echoed > 0, `the media server's address is relayed to:\n${toMedia.stdout}${toMedia.stderr}`);
        const toOther = await uclient(username, credential, elsewhere);
        assert.equal(elsewhere.echoed, 0, 'nothing relayed to another address');
        assert.match(`${toOther.stdout}${toOther.stderr}`, /403 \(Forbidden IP\)/);
        const expired = `${Math.floor(Date.now() / 1000) - 60}:${username.split(':')[1]}`;
        const before = peer.echoed;
        const stale = await uclient(expired, credentialFor(expired), peer);
        assert.match(`${stale.stdout}${stale.stderr}`, /Cannot complete Allocation/);
        assert.equal(peer.echoed, before, 'nothing relayed with an expired credential');
      } finally {
        peer.socket.close();
        elsewhere.socket.close();
      }
    },
    { timeout: 90_000 },
  );

  check('the admin answers the venue LAN only; the join page answers everyone', async () => {
    const fromCrew = async (path, token) => {
      const auth = token ? ['-H', `Authorization: Bearer ${token}`] : [];
      const { stdout } = await net.inCrew(
        'curl',
        '-sk',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        ...auth,
        `${crewOrigin}${path}`,
      );
      return Number(stdout);
    };
    assert.equal(await fromCrew('/api/admin/groups', control.adminToken), 403, 'the right token, the wrong address');
    assert.equal(await fromCrew('/metrics', control.adminToken), 403);
    assert.equal(await fromCrew('/admin'), 403);
    assert.equal(await fromCrew('/'), 200, 'the join page');
    assert.equal((await control.admin('GET', '/groups')).status, 200, 'from the venue');
    // Logged with the address, once a minute per address: a flood is not a flood of log lines.
    const refusals = () =>
      control.process
        .log()
        .split('\n')
        .filter((l) => l.includes('outside server.adminAllowFrom'));
    await waitFor('the refusal logged', () => refusals().length > 0, { timeout: 5000 });
    assert.equal(refusals().length, 1, `three refusals, one line:\n${refusals().join('\n')}`);
    assert.match(refusals()[0], /client=203\.0\.113\.2/);
  });

  check('PINs take 6 digits once crew can join from off-site', async () => {
    const short = await control.admin('POST', '/groups', { name: 'Vault', pin: '1234' });
    assert.equal(short.status, 400, JSON.stringify(short.body));
    assert.match(short.body.error, /6 to 12 digits/);
    const long = await control.admin('POST', '/groups', { name: 'Vault', pin: '123456' });
    assert.equal(long.status, 201, JSON.stringify(long.body));
  });

  check('a crew behind one NAT address joins at once, within the limits of that address', async () => {
    // 50 panels of one crew (a hotel's, a guest Wi-Fi's) asking for their tokens at once, before
    // any joins: crew.maxPendingPerAddress (50) holds them all, and no more.
    const asks = [
      'for i in $(seq 51); do',
      `curl -sk -o /dev/null -w '%{http_code}\\n' -H 'content-type: application/json'`,
      `--data "{\\"username\\":\\"Guest $i\\",\\"groupId\\":\\"${LINE}\\"}" ${crewOrigin}/api/token;`,
      'done',
    ].join(' ');
    const { stdout } = await net.inCrew('sh', '-c', asks);
    const statuses = stdout.trim().split('\n').map(Number);
    assert.deepEqual(statuses.slice(0, 50), Array(50).fill(200), stdout);
    assert.equal(statuses[50], 429, 'the 51st unused token of one address');
    const { status, text } = await control.request('POST', '/api/token', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'At the venue', groupId: LINE }),
    });
    assert.equal(status, 200, `another address is not held up: ${text}`);
  });
});
