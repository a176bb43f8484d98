// Crew off-site, through a NAT, in network namespaces of the test's own: the test's namespace is
// the venue (control, Janus), a router namespace stands for the internet and a home router
// (MASQUERADE), and a crew namespace sits behind it.
//
//   crew 192.168.77.2 ── lan0 [router: MASQUERADE] wan0 203.0.113.2 ── plwan 203.0.113.1 venue
//
// - The admin UI and API answer 403 to the crew's address (even with the admin token), 200 on the
//   venue's LAN; the join page answers everyone.
// - Once crew can join from off-site (`network.turn`), a token's answer carries the relay with a
//   TURN REST credential for the session, and PINs take 6 digits.
//
// Needs root and nft (nftables, scripts/deps). Run: scripts/test-browser web/tests/offsite.test.mjs.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe } from 'node:test';
import { Control, randomHex, trackedTests } from './harness.mjs';

const run = promisify(execFile);
const LINE = 'crew';
/** The venue's side of the "internet" (TEST-NET-3), where control and the relay listen. */
const VENUE = '203.0.113.1';
const TURN_SECRET = randomHex(16);

/** The router and crew namespaces, and the links between them and the venue. */
class OffSiteNet {
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
    await ip('link', 'add', 'plwan', 'type', 'veth', 'peer', 'name', 'wan0', 'netns', net.router);
    await ip('addr', 'add', `${VENUE}/24`, 'dev', 'plwan');
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
    return net;
  }

  /** `command` run in the crew's namespace; its stdout and stderr. */
  async inCrew(...command) {
    return run('ip', ['netns', 'exec', this.crew, ...command], { timeout: 30_000 }).catch((error) => error);
  }

  async remove() {
    for (const name of [this.crew, this.router]) await run('ip', ['netns', 'del', name]).catch(() => {});
  }
}

describe('crew off-site: the admin from the LAN only, the crew from anywhere', { timeout: 120_000 }, () => {
  let dir;
  let net;
  let control;
  let crewOrigin;
  const { check, reportLogsIfFailed } = trackedTests();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'offsite-'));
    net = await OffSiteNet.create(dir);
    const network = [
      'network:',
      '  turn:',
      `    urls: ['turns:${VENUE}:443?transport=tcp']`,
      `    secret: ${TURN_SECRET}`,
    ];
    control = await Control.start([LINE], { tls: true, listen: '0.0.0.0:0', config: network });
    crewOrigin = `https://${VENUE}:${new URL(control.origin).port}`;
  });

  after(async () => {
    await reportLogsIfFailed(control, 80);
    await control?.stop();
    await net?.remove();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** `curl` from the crew's namespace: the status of `path` on control. */
  async function fromCrew(path, { token, method = 'GET', body } = {}) {
    const args = ['-sk', '-o', '-', '-w', '\n%{http_code}', '-X', method];
    if (token) args.push('-H', `Authorization: Bearer ${token}`);
    if (body) args.push('-H', 'Content-Type: application/json', '--data', JSON.stringify(body));
    const { stdout } = await net.inCrew('curl', ...args, `${crewOrigin}${path}`);
    const at = stdout.lastIndexOf('\n');
    return { status: Number(stdout.slice(at + 1)), text: stdout.slice(0, at) };
  }

  check('the admin answers the venue LAN only; the join page answers everyone', async () => {
    const refused = await fromCrew('/api/admin/groups', { token: control.adminToken });
    assert.equal(refused.status, 403, 'the right token, from the wrong address');
    assert.equal(JSON.parse(refused.text).code, 'admin_not_allowed_here');
    assert.equal((await fromCrew('/metrics', { token: control.adminToken })).status, 403);
    assert.equal((await fromCrew('/admin')).status, 403);
    assert.equal((await fromCrew('/')).status, 200, 'the join page');
    assert.equal((await control.admin('GET', '/groups')).status, 200, 'from the venue');
  });

  check('a token from off-site carries the relay with a credential for the session', async () => {
    const { status, text } = await fromCrew('/api/token', {
      method: 'POST',
      body: { username: 'Remote', groupId: LINE },
    });
    assert.equal(status, 200, text);
    const answer = JSON.parse(text);
    const [relay] = answer.iceServers;
    assert.deepEqual(relay.urls, [`turns:${VENUE}:443?transport=tcp`]);
    const [expiry, identity] = relay.username.split(':');
    assert.equal(identity, answer.participantIdentity);
    const life = Number(expiry) - Date.now() / 1000;
    assert.ok(life > 12 * 3600 - 60 && life <= 12 * 3600, `expires after credentialSeconds (12 h): ${life} s`);
    assert.equal(relay.credential, createHmac('sha1', TURN_SECRET).update(relay.username).digest('base64'));
  });

  check('PINs take 6 digits once crew can join from off-site', async () => {
    const short = await control.admin('POST', '/groups', { name: 'Vault', pin: '1234' });
    assert.equal(short.status, 400, JSON.stringify(short.body));
    assert.match(short.body.error, /6 to 12 digits/);
    const long = await control.admin('POST', '/groups', { name: 'Vault', pin: '123456' });
    assert.equal(long.status, 201, JSON.stringify(long.body));
  });
});
