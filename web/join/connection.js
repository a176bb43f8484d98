// One connection of the panel to Janus: one session (one token, one participant identity) with
// one AudioBridge handle per line, each joined to its line's room, all sharing one microphone.
// Single use: a token is good for one session, so a reconnect makes a new Connection with a new
// token. The lines join in parallel. A line the admin takes away (kicked from its room) ends
// alone: the other lines go on; once every line is kicked, the session was. The admin's
// disconnect reaches the page twice, by Janus's kick event and by the proxy closing the
// WebSocket with its own code; whichever comes first ends the panel as kicked, never rejoining.

import Janus from '/vendor/janus.js';

const PLUGIN = 'janus.plugin.audiobridge';
/** A join that is not connected by then is given up (and retried when reconnecting). */
const JOIN_TIMEOUT_MS = 20_000;

/** The ICE candidate types control takes in a link report (`candidateType`). */
const CANDIDATE_TYPES = ['host', 'srflx', 'prflx', 'relay'];
/** ICE "disconnected" often heals by itself; only this long a gap counts as lost. */
export const ICE_GRACE_MS = 5_000;
/** Janus's answer once the admin removed our token. */
const UNAUTHORIZED = /unauthorized request/i;
/** The proxy's close code for a crew member the admin disconnected (control's janus_proxy). */
const CLOSE_DISCONNECTED = 4001;
/**
 * The proxy's close codes for a media server gone under the session: its Janus went away
 * (1011), or control moved the session off a lost or removed node (1012).
 */
const CLOSE_MEDIA_SERVER_LOST = new Set([1011, 1012]);

let janusReady = null;

/**
 * janus.js's WebSocket, which shows its close code to the Connection that opened it (janus.js
 * reports every close as "Lost connection"). janus.js opens it inside `new Janus()`, so the
 * Connection being made sets `onSocket` around that call.
 */
class SignallingSocket extends WebSocket {
  static onSocket = null;

  constructor(url, protocols) {
    super(url, protocols);
    SignallingSocket.onSocket?.(this);
  }
}

const noop = () => {};
const NO_EVENTS = { onNetwork: noop, onRemoteStream: noop, onPeople: noop, onLineEnded: noop, onDirectJoined: noop };

export function initJanus() {
  janusReady ??= new Promise((resolve, reject) => {
    const dependencies = Janus.useDefaultDependencies({ WebSocket: SignallingSocket });
    Janus.init({ debug: ['warn', 'error'], callback: resolve, dependencies });
    if (!Janus.isWebrtcSupported()) reject(new Error('This browser cannot do WebRTC.'));
  });
  return janusReady;
}

export class KickedError extends Error {
  constructor() {
    super('Disconnected by the admin');
  }
}

/**
 * @param credentials the answer of POST /api/token, with `lines` (see lines.js)
 * @param events {
 *   onConnected(),                 every line joined with media flowing
 *   onLost(reason),                after connecting: something broke, reconnect
 *   onKicked(),                    the admin disconnected us
 *   onNetwork(groupId, ok),        a line's ICE path went away (false) or came back (true)
 *   onRemoteStream(groupId, stream|null),
 *   onPeople(groupId, Map id → {display, muted}),
 *   onLineEnded(groupId),          the admin took this line away (the others go on)
 *   onDirectJoined(groupId),       a direct line added with addLine() is joined with media
 * }
 */
export class Connection {
  /**
   * `talking`: the lines whose talk key is on (latched) as this connection starts; kept up to
   * date by setTalking(), so that a line added later joins with its key as it stands.
   */
  constructor(credentials, username, microphone, talking, events) {
    this.credentials = credentials;
    this.username = username;
    this.microphone = microphone;
    this.talking = talking;
    this.events = events;
    this.janus = null;
    this.links = new Map(); // groupId → LineLink
    this.closed = false;
    this.settle = null;
    this.closeCode = null; // the WebSocket's, once the server closed it
  }

  /** Resolves once every line is joined with media flowing; rejects on any failure before that. */
  start() {
    return new Promise((resolve, reject) => {
      this.settle = { resolve, reject };
      this.timer = setTimeout(() => this.fail(new Error('Joining took too long.')), JOIN_TIMEOUT_MS);
      // Listening before janus.js does: the code is known when janus.js reports the close.
      SignallingSocket.onSocket = (socket) =>
        socket.addEventListener('close', (event) => (this.closeCode = event.code));
      this.janus = new Janus({
        server: this.credentials.url,
        token: this.credentials.token,
        // The venue's STUN and TURN relay with this session's credential (none on a LAN).
        iceServers: this.credentials.iceServers ?? [],
        success: () => {
          for (const line of this.credentials.lines) {
            const link = new LineLink(this, line);
            this.links.set(line.groupId, link);
            link.attach();
          }
        },
        error: (error) => this.fail(new Error(String(error))),
      });
      SignallingSocket.onSocket = null;
    });
  }

  /** The lines still on (not taken away by the admin). */
  get liveLinks() {
    return [...this.links.values()].filter((link) => !link.ended);
  }

  checkConnected() {
    if (!this.settle || this.closed) return;
    const live = this.liveLinks;
    if (live.length > 0 && live.every((link) => link.joined && link.mediaUp)) {
      clearTimeout(this.timer);
      this.settle.resolve();
      this.settle = null;
      this.events.onConnected();
    }
  }

  /**
   * A direct line opened during the session: joined alone. Its failure (or its room closing)
   * drops it without touching the other lines.
   */
  addLine(info) {
    if (this.closed || this.links.has(info.groupId)) return;
    const link = new LineLink(this, info);
    this.links.set(info.groupId, link);
    link.attach();
  }

  /** A direct line closed: hung up, the others go on. */
  dropLine(groupId) {
    const link = this.links.get(groupId);
    if (!link) return;
    this.links.delete(groupId);
    link.drop();
  }

  /** Mutes or unmutes us in `groupId`'s room (AudioBridge `configure`) and gates the track. */
  setTalking(groupId, on) {
    // A direct line's card can be keyed (a remote command in the same event burst) before its
    // link exists: the link, once added, reads this set.
    if (on) this.talking.add(groupId);
    else this.talking.delete(groupId);
    const link = this.links.get(groupId);
    if (link && !link.ended) link.setTalking(on);
  }

  /** A line was kicked from its room: it ends alone, unless it was the last one. */
  lineEnded(link) {
    if (this.closed) return;
    if (this.liveLinks.length === 0) {
      this.kicked();
      return;
    }
    this.events.onLineEnded(link.line.groupId);
    this.checkConnected();
  }

  /** Ends the connection because of `error`: before connecting, start() rejects; after, it is lost. */
  fail(error) {
    if (this.closed) return;
    // Once the admin removed our token, every request answers "Unauthorized": that is a kick
    // whose event we did not see; so is the proxy's close for a disconnect.
    const joined = [...this.links.values()].some((link) => link.joined);
    if (this.closeCode === CLOSE_DISCONNECTED || (joined && UNAUTHORIZED.test(error.message))) {
      this.kicked();
      return;
    }
    this.close();
    if (this.settle) this.settle.reject(error);
    else if (CLOSE_MEDIA_SERVER_LOST.has(this.closeCode))
      this.events.onLost('The media server was lost: joining again.');
    else this.events.onLost(error.message);
  }

  kicked() {
    if (this.closed) return;
    this.close();
    if (this.settle) this.settle.reject(new KickedError());
    else this.events.onKicked();
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    for (const link of this.links.values()) link.close();
    // Destroying the session hangs up every handle, stops their tracks (clones of the
    // microphone, which stays open) and closes the WebSocket; Janus then reports us as left.
    this.janus?.destroy({ cleanupHandles: true, notifyDestroyed: false });
  }
}

/** One line: an AudioBridge handle joined to the line's room. */
class LineLink {
  constructor(connection, line) {
    this.connection = connection;
    this.line = line;
    this.handle = null;
    this.ended = false; // kicked from the room: this line is over, the others go on
    this.joined = false;
    this.mediaUp = false;
    this.iceTimer = null;
    this.iceDown = false;
    this.people = new Map();
    // Each line sends its own clone of the microphone, enabled only while talking on it: the
    // talk keys of the lines are independent. A key latched before a reconnect joins unmuted.
    this.talking = Boolean(line.talk && connection.talking.has(line.groupId));
    this.track = line.talk ? connection.microphone.clone() : null;
    if (this.track) this.track.enabled = this.talking;
  }

  /** A closed connection's late callbacks (tracks ending, hangups) reach nobody. */
  get events() {
    return this.connection.closed ? NO_EVENTS : this.connection.events;
  }

  fail(error) {
    // After a kick, the hangup and the detach that follow it are expected.
    if (this.ended) return;
    // A direct line is the session's extra: it goes alone.
    if (this.line.direct) this.connection.dropLine(this.line.groupId);
    else this.connection.fail(error);
  }

  /** A direct line hung up (closed, or failed): no events from it any more. */
  drop() {
    if (this.ended) return;
    this.ended = true;
    this.close();
    this.events.onRemoteStream(this.line.groupId, null);
    this.handle?.detach({ error: noop });
  }

  /** The admin took this line away: hang it up, keep the session's other lines. */
  end() {
    if (this.ended) return;
    this.ended = true;
    this.close();
    this.events.onRemoteStream(this.line.groupId, null);
    this.events.onNetwork(this.line.groupId, true);
    this.handle?.detach({ error: noop });
    this.connection.lineEnded(this);
  }

  attach() {
    const { participantIdentity } = this.connection.credentials;
    this.connection.janus.attach({
      plugin: PLUGIN,
      opaqueId: participantIdentity,
      success: (handle) => {
        this.handle = handle;
        this.offer();
      },
      error: (error) => this.fail(new Error(String(error))),
      onmessage: (message, jsep) => this.onMessage(message, jsep),
      webrtcState: (up) => this.onMedia(up),
      iceState: (state) => this.onIce(state),
      onremotetrack: (track, _mid, on, metadata) => {
        // A "mute" (no packets for a moment) is not an end: keep the stream and its meter.
        if (track.kind !== 'audio' || (!on && metadata?.reason === 'mute')) return;
        this.events.onRemoteStream(this.line.groupId, on ? new MediaStream([track]) : null);
      },
      ondetached: () => this.fail(new Error('The media server dropped the connection.')),
    });
  }

  offer() {
    const { participantIdentity, token } = this.connection.credentials;
    const { roomName, talk, listen } = this.line;
    // A listen-only line sends nothing and a talk-only line receives nothing (sendonly): the
    // server's proxy refuses an offer that asks for more than the line holds.
    const tracks = [{ type: 'audio', capture: talk ? this.track : false, recv: listen }];
    this.handle.createOffer({
      tracks,
      success: (jsep) => {
        // The room admits only the tokens issued for it: the join carries ours.
        this.roomMuted = !this.talking;
        const join = {
          request: 'join',
          room: roomName,
          id: participantIdentity,
          display: this.connection.username,
          muted: !this.talking,
          token,
        };
        this.handle.send({ message: join, jsep, error: (error) => this.fail(new Error(String(error))) });
      },
      error: (error) => this.fail(new Error(`${this.line.name}: ${String(error?.message ?? error)}`)),
    });
  }

  onMessage(message, jsep) {
    if (this.ended) return;
    if (jsep) this.handle.handleRemoteJsep({ jsep });
    const own = this.connection.credentials.participantIdentity;
    // AudioBridge tells every participant who was kicked, the kicked one included. The admin
    // takes one line away by kicking us from its room (a disconnect kicks us from all of them).
    if (message.kicked === own || message.kicked_all !== undefined) {
      this.end();
      return;
    }
    if (message.error) {
      this.fail(new Error(`${this.line.name}: ${message.error}`));
      return;
    }
    const event = message.audiobridge;
    if (event === 'destroyed') {
      this.fail(new Error(`The line ${this.line.name} was closed.`));
      return;
    }
    if (event === 'joined' && message.id === own) {
      this.joined = true;
      // A key pressed or released between the join request and now.
      if (this.roomMuted !== !this.talking) this.sendMuted(!this.talking);
    }
    let changed = false;
    for (const p of message.participants ?? []) {
      if (p.id === own) continue;
      const person = this.people.get(p.id) ?? {};
      person.display = p.display ?? person.display ?? String(p.id);
      person.muted = p.muted === true;
      this.people.set(p.id, person);
      changed = true;
    }
    for (const gone of [message.leaving, message.kicked]) {
      if (gone !== undefined && this.people.delete(gone)) changed = true;
    }
    if (changed || event === 'joined') this.events.onPeople(this.line.groupId, this.people);
    this.connection.checkConnected();
  }

  onMedia(up) {
    if (this.ended) return;
    this.mediaUp = up;
    if (up && this.line.direct) this.events.onDirectJoined(this.line.groupId);
    if (up) this.connection.checkConnected();
    else this.fail(new Error(`The audio connection of ${this.line.name} was closed.`));
  }

  onIce(state) {
    clearTimeout(this.iceTimer);
    if (this.ended) return;
    if (state === 'failed') {
      this.fail(new Error('The network path to the media server failed.'));
      return;
    }
    const down = state === 'disconnected';
    if (down) {
      this.iceTimer = setTimeout(
        () => this.fail(new Error('The network path to the media server was lost.')),
        ICE_GRACE_MS,
      );
    }
    if (down !== this.iceDown && (down || state === 'connected' || state === 'completed')) {
      this.iceDown = down;
      this.events.onNetwork(this.line.groupId, !down);
    }
  }

  /**
   * The line's link since the last call, from its peer connection's statistics: the loss of
   * what it hears (of what it sends, on a talk-only line, as the server reports it), the
   * jitter and the round trip. Null before media flows.
   */
  async measure() {
    const pc = this.handle?.webrtcStuff?.pc;
    if (!pc || !this.mediaUp || this.ended) return null;
    this.previous ??= {};
    return linkFigures(this.line.groupId, await pc.getStats(), this.previous);
  }

  setTalking(on) {
    if (!this.track) return;
    this.talking = on;
    this.track.enabled = on;
    if (this.joined) this.sendMuted(!on);
  }

  sendMuted(muted) {
    if (this.connection.closed || !this.handle) return;
    this.roomMuted = muted;
    this.handle.send({
      message: { request: 'configure', muted },
      error: (error) => this.fail(new Error(String(error))),
    });
  }

  close() {
    clearTimeout(this.iceTimer);
    this.track?.stop();
  }
}

/**
 * A line's link figures from WebRTC statistics that hold one line (its peer connection's on
 * Janus; its receiver's, or its sender's on a talk-only line, on the rooms): the loss of what it
 * hears since the last call (`previous.inbound`, updated), or of what it sends as the server
 * reports it; the jitter; the round trip; the candidate type.
 */
export function linkFigures(groupId, stats, previous) {
  let inbound = null;
  let remote = null;
  let pair = null;
  stats.forEach((s) => {
    if (s.type === 'inbound-rtp' && s.kind === 'audio') inbound = s;
    else if (s.type === 'remote-inbound-rtp' && s.kind === 'audio') remote = s;
    else if (s.type === 'candidate-pair' && s.state === 'succeeded' && s.nominated) pair = s;
  });
  let lossPercent = 0;
  let jitterMs = 0;
  if (inbound) {
    const before = previous.inbound ?? { packetsLost: 0, packetsReceived: 0 };
    previous.inbound = inbound;
    const lost = Math.max(0, (inbound.packetsLost ?? 0) - before.packetsLost);
    const received = Math.max(0, (inbound.packetsReceived ?? 0) - before.packetsReceived);
    lossPercent = lost + received > 0 ? (100 * lost) / (lost + received) : 0;
    jitterMs = (inbound.jitter ?? 0) * 1000;
  } else if (remote) {
    lossPercent = (remote.fractionLost ?? 0) * 100;
    jitterMs = (remote.jitter ?? 0) * 1000;
  }
  const rtt = pair?.currentRoundTripTime ?? remote?.roundTripTime;
  const bounded = (ms) => Math.min(Math.max(ms, 0), 10_000);
  // host, srflx, prflx, or relay: through the TURN relay.
  const candidateType = pair ? stats.get(pair.localCandidateId)?.candidateType : undefined;
  return {
    groupId,
    lossPercent: Math.min(lossPercent, 100),
    jitterMs: bounded(jitterMs),
    ...(Number.isFinite(rtt) ? { rttMs: bounded(rtt * 1000) } : {}),
    ...(CANDIDATE_TYPES.includes(candidateType) ? { candidateType } : {}),
  };
}

export function microphoneProblem(error) {
  const name = error?.name ?? '';
  if (name === 'NotAllowedError') return 'Microphone access was refused: allow it in the browser and join again.';
  if (name === 'NotFoundError') return 'No microphone found.';
  if (!window.isSecureContext) return 'The microphone needs a secure page: open this page over https://.';
  return `Cannot use the microphone: ${error?.message ?? error}`;
}
