// Crew off-site in network namespaces (offsite.test.mjs, bench/panel offsite): the namespace
// of the run is the venue; a router namespace stands for the internet and a home router that
// masquerades, and a crew namespace sits behind it; coturn is the venue's TURN relay.
//
//   crew 192.168.77.2 ── lan0 [router: MASQUERADE] wan0 203.0.113.2 ── plwan 203.0.113.1 venue
//                                                                           203.0.113.3 relay
//
// Janus gathers on the venue's outside-facing link (`plwan`), as a media server reachable from
// outside does (its own public address, or the venue NAT's 1:1 mapping of it); the venue's LAN
// (`pl0`, 10.77.0.1) is an address the relay must not reach. Needs root, nft, coturn, openssl.

import { execFile, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { chmod, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CONTROL_BIN, Daemon, randomHex, waitFor } from './harness.mjs';

const run = promisify(execFile);
/** The venue's side of the "internet" (TEST-NET-3), where control and the relay listen. */
export const VENUE = '203.0.113.1';
/** The relay's own public address, beside the venue's (coturn refuses to relay to its own). */
export const RELAY = '203.0.113.3';
export const TURN_SECRET = randomHex(16);

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

/**
 * coturn as partyline's relay, with the settings control prints for its config
 * (`--print-relay-config`: the secret, the relay's address and ports, control's certificate, the
 * media server at `mediaAddress` as its only peer), and a log of the test's own.
 */
export async function startRelay(dir, control, mediaAddress) {
  const { stdout: settings } = await run(CONTROL_BIN, [
    ...['--config', join(control.dir, 'partyline.yaml'), '--state-dir', control.dir],
    ...['--print-relay-config', '--relay-peer', mediaAddress],
  ]);
  const cert = settings.match(/^cert=(.*)$/m)[1];
  const conf = join(dir, 'turnserver.conf');
  await writeFile(
    conf,
    [
      settings,
      `userdb=${join(dir, 'turndb')}`,
      `pidfile=${join(dir, 'turn.pid')}`,
      `log-file=${join(dir, 'turn.log')}`,
      'simple-log',
      'verbose', // each session's opening, refusals and end: the log printed on a failure
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  const relay = await Daemon.start('turnserver', 'turnserver', ['-c', conf]);
  await waitFor('the relay taking TLS on 443', () => accepts(RELAY, 443), { timeout: 10_000, interval: 100 });
  // The certificate's key, as Chromium's --ignore-certificate-errors-spki-list takes it.
  const { stdout: spki } = await run('sh', [
    '-c',
    `openssl x509 -in ${cert} -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`,
  ]);
  relay.spki = spki.trim();
  // Its SHA-256, as partyline-crew's --relay-certificate-sha256 pins it.
  const { stdout: fingerprint } = await run('openssl', ['x509', '-in', cert, '-noout', '-fingerprint', '-sha256']);
  relay.certificateSha256 = fingerprint.trim().split('=')[1];
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
export function credentialFor(username) {
  return createHmac('sha1', TURN_SECRET).update(username).digest('base64');
}

/** A UDP peer that echoes what it gets; `echoed` counts the datagrams. */
export async function echoPeer(address) {
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

/** control's `network:` section for the relay of these namespaces. */
export const relayConfig = () => [
  'network:',
  '  turn:',
  `    urls: ['turns:${RELAY}:443?transport=tcp']`,
  `    secret: ${TURN_SECRET}`,
];
