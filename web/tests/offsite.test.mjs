// Crew off-site, through a NAT, in network namespaces of the test's own: the test's namespace is
// the venue (control, Janus, the TURN relay), a router namespace stands for the internet and a
// home router (MASQUERADE), and a crew namespace behind it holds a second Chromium.
//
//   crew 192.168.77.2 ── lan0 [router: MASQUERADE] wan0 203.0.113.2 ── plwan 203.0.113.1 venue
//                                                                           203.0.113.3 relay
//
// The venue's media server (Janus) gathers on the venue's side of that link, as a media server
// reachable from outside does (its own public address, or the venue NAT's 1:1 mapping of it);
// the venue's LAN (`pl0`, 10.77.0.1) is an address the relay must not reach.
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
import { createHmac } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { execFile, spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe } from 'node:test';
import {
  Daemon,
  Person,
  iceAddress,
  launchBrowser,
  openAdmin,
  randomHex,
  report,
  startWithTones,
  trackedTests,
  waitFor,
  writeTone,
} from './harness.mjs';

const run = promisify(execFile);
const LINE = 'crew';
/** The venue's side of the "internet" (TEST-NET-3), where control and the relay listen. */
const VENUE = '203.0.113.1';
/** The relay's own public address, beside the venue's (coturn refuses to relay to its own). */
const RELAY = '203.0.113.3';
const TURN_SECRET = randomHex(16);

/** The router and crew namespaces, and the links between them and the venue. */
export class OffSiteNet {
  static async create(dir) {
    const net = new OffSiteNet();
    const parent = (await run('ip', ['netns', 'identify', String(process.pid)])).stdout.trim();
    // Named after the test's namespace, whose end (scripts/netns-run) removes them too.
    net.router = `${parent || `pl-${process.pid}`}-router`;
    net.crew = `${parent || `pl-${process.pid}`}-crew`;
    const ip = (...args) => run('ip', args);
    const inRouter = (...args) => run('ip', ['netns', 'exec', net.router, ...args]);
    const inCrew = (...args) => run('ip', ['netns', 'exec', net.crew, ...args]);
    await ip('netns', 'add', net.router);
    await ip('netns', 'add', net.crew);
    // No IPv6: a link-local address that appears after Chromium started is a "network change" to
    // it, which fails the requests under way (ERR_NETWORK_CHANGED).
    for (const name of [net.router, net.crew]) {
      await run('ip', ['netns', 'exec', name, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1']);
      await run('ip', ['netns', 'exec', name, 'sysctl', '-qw', 'net.ipv6.conf.default.disable_ipv6=1']);
    }
    await ip('link', 'add', 'plwan', 'type', 'veth', 'peer', 'name', 'wan0', 'netns', net.router);
    await ip('addr', 'add', `${VENUE}/24`, 'dev', 'plwan');
    await ip('addr', 'add', `${RELAY}/24`, 'dev', 'plwan');
    await ip('link', 'set', 'plwan', 'up');
    net.iface = 'plwan';
    await inRouter('ip', 'link', 'add', 'lan0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', net.crew);
    for (const [where, commands] of [
      [
        inRouter,
        [
          ['ip', 'link', 'set', 'lo', 'up'],
          ['ip', 'addr', 'add', '203.0.113.2/24', 'dev', 'wan0'],
          ['ip', 'link', 'set', 'wan0', 'up'],
          ['ip', 'addr', 'add', '192.168.77.1/24', 'dev', 'lan0'],
          ['ip', 'link', 'set', 'lan0', 'up'],
          ['sysctl', '-qw', 'net.ipv4.ip_forward=1'],
        ],
      ],
      [
        inCrew,
        [
          ['ip', 'link', 'set', 'lo', 'up'],
          ['ip', 'addr', 'add', '192.168.77.2/24', 'dev', 'eth0'],
          ['ip', 'link', 'set', 'eth0', 'up'],
          ['ip', 'route', 'add', 'default', 'via', '192.168.77.1'],
        ],
      ],
    ]) {
      for (const command of commands) await where(...command);
    }
    const rules = join(dir, 'router.nft');
    await writeFile(
      rules,
      [
        'table ip nat {',
        '  chain postrouting {',
        '    type nat hook postrouting priority srcnat; policy accept;',
        '    oifname "wan0" masquerade',
        '  }',
        '}',
        'table inet crew {',
        '  chain forward {',
        '    type filter hook forward priority filter; policy accept;',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
    await inRouter('nft', '-f', rules);
    net.inRouter = inRouter;
    // Chromium in the crew's namespace: Playwright talks to it over pipes, which cross namespaces.
    return net;
  }

  /** The crew's router lets UDP out (`true`) or only TCP (`false`), as strict firewalls do. */
  async letUdpOut(allowed) {
    await this.inRouter('nft', 'flush', 'chain', 'inet', 'crew', 'forward');
    if (!allowed)
      await this.inRouter('nft', 'add', 'rule', 'inet', 'crew', 'forward', 'meta', 'l4proto', 'udp', 'drop');
  }

  /**
   * A Chromium in the crew's namespace (Playwright talks to it over pipes, which cross
   * namespaces) that trusts the relay's certificate by its key (`spki`), as a browser trusts a
   * relay's certificate from a public authority.
   */
  async chromium(dir, spki) {
    const path = join(dir, 'chromium-off-site');
    const flag = `--ignore-certificate-errors-spki-list=${spki}`;
    await writeFile(path, `#!/bin/sh\nexec ip netns exec ${this.crew} /usr/bin/chromium ${flag} "$@"\n`);
    await chmod(path, 0o755);
    return path;
  }

  /** `command` run in the crew's namespace, stdin closed: `{ code, stdout, stderr }`. */
  inCrew(...command) {
    return new Promise((resolve) => {
      const child = spawn('ip', ['netns', 'exec', this.crew, ...command], {
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 30_000,
      });
      const out = { stdout: '', stderr: '' };
      child.stdout.setEncoding('utf8').on('data', (chunk) => (out.stdout += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk) => (out.stderr += chunk));
      child.on('close', (code) => resolve({ ...out, code }));
    });
  }

  async remove() {
    for (const name of [this.crew, this.router]) await run('ip', ['netns', 'del', name]).catch(() => {});
  }
}

/** coturn as the admin runs it beside partyline (packaging/coturn/partyline.conf's settings). */
export async function startRelay(dir, mediaAddress) {
  const [cert, key] = [join(dir, 'turn-cert.pem'), join(dir, 'turn-key.pem')];
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=turn.partyline.test',
    '-keyout',
    key,
    '-out',
    cert,
  ]);
  const conf = join(dir, 'turnserver.conf');
  await writeFile(
    conf,
    [
      `listening-ip=${RELAY}`,
      'listening-port=3478',
      'tls-listening-port=443',
      `relay-ip=${RELAY}`,
      'use-auth-secret',
      `static-auth-secret=${TURN_SECRET}`,
      'realm=partyline.test',
      `cert=${cert}`,
      `pkey=${key}`,
      'no-tlsv1',
      'no-tlsv1_1',
      'no-dtls',
      'no-cli',
      'fingerprint',
      'no-multicast-peers',
      // Not an open relay: to the media server only.
      'denied-peer-ip=0.0.0.0-255.255.255.255',
      'denied-peer-ip=::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
      `allowed-peer-ip=${mediaAddress}`,
      `userdb=${join(dir, 'turndb')}`,
      `pidfile=${join(dir, 'turn.pid')}`,
      `log-file=${join(dir, 'turn.log')}`,
      'simple-log',
      'verbose', // each session's opening, refusals and end: the log printed on a failure
      '',
    ].join('\n'),
  );
  const relay = await Daemon.start('turnserver', 'turnserver', ['-c', conf]);
  await waitFor('the relay taking TLS on 443', () => accepts(RELAY, 443), { timeout: 10_000, interval: 100 });
  // The certificate's key, as Chromium's --ignore-certificate-errors-spki-list takes it.
  const { stdout: spki } = await run('sh', [
    '-c',
    `openssl x509 -in ${cert} -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`,
  ]);
  relay.spki = spki.trim();
  return relay;
}

/** Whether a TCP connection to `host:port` is accepted. */
function accepts(host, port) {
  return new Promise((resolve) => {
    const socket = connect({ host, port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/** A TURN REST credential, as control makes them (control/src/turn.rs). */
function credentialFor(username) {
  return createHmac('sha1', TURN_SECRET).update(username).digest('base64');
}

/** A UDP peer that echoes what it gets; `echoed` counts the datagrams. */
async function echoPeer(address) {
  const socket = createSocket('udp4');
  const peer = { socket, echoed: 0 };
  socket.on('message', (message, from) => {
    peer.echoed += 1;
    socket.send(message, from.port, from.address);
  });
  await new Promise((resolve) => socket.bind(0, address, resolve));
  peer.port = socket.address().port;
  return peer;
}

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
    relay = await startRelay(dir, VENUE);
    const network = [
      'network:',
      '  turn:',
      `    urls: ['turns:${RELAY}:443?transport=tcp']`,
      `    secret: ${TURN_SECRET}`,
    ];
    ({ control, browsers, stop } = await startWithTones(
      [LINE],
      { venue: 660 },
      {
        tls: true,
        listen: '0.0.0.0:0',
        iceIface: net.iface,
        config: network,
      },
    ));
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

  check(
    'UDP let out: the panel connects without the relay',
    async () => {
      await net.letUdpOut(true);
      const remote = await joined('crew', 'Remote again');
      const desk = await joined('venue', 'Desk again');
      await heardBothWays(remote, desk);
      assert.notEqual(await candidateTypeOf('Remote again'), 'relay');
      await remote.close();
      await desk.close();
    },
    { timeout: 90_000 },
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
