// One connection of the panel to partyline's own rooms (`media.engine: bridged`, the token's
// `engine`): one peer connection for every line, one audio transceiver per line in the token's
// order. The offer goes to control (`POST /api/session/media`), which joins the token's lines
// with the token's rights and returns the rooms' answer; a talk key is `POST /api/session/talk`,
// and the rooms mix a voice only while its key is on (the track is also gated, so nothing is
// sent in between). Who is on each line and who talks comes from control's session stream
// (`members`). The same face as connection.js's Connection, which lifecycle.js drives. A direct
// line opened or closed is a transceiver added or stopped and a new offer on the same peer
// connection (a renegotiation): the other lines go on untouched. Each offer names the line of
// every m-line (control checks them against the session's lines and grants the rights).

import { api } from '/join/api.js';
import { ICE_GRACE_MS, KickedError, linkFigures } from '/join/connection.js';

/** A connection that is not up by then is given up (and retried when reconnecting). */
const CONNECT_TIMEOUT_MS = 20_000;

const directions = (line) => (line.talk && line.listen ? 'sendrecv' : line.talk ? 'sendonly' : 'recvonly');

export class RoomsConnection {
  /** As connection.js's Connection. */
  constructor(credentials, username, microphone, talking, events) {
    this.credentials = credentials;
    this.username = username;
    this.microphone = microphone;
    this.talking = talking;
    this.events = events;
    this.pc = null;
    this.links = new Map(); // groupId → RoomsLine
    this.closed = false;
    this.settle = null;
    this.iceTimer = null;
    this.negotiation = null; // the offer in flight, if any
  }

  /** Resolves once the media flows on every line; rejects on any failure before that. */
  start() {
    return new Promise((resolve, reject) => {
      this.settle = { resolve, reject };
      this.timer = setTimeout(() => this.fail(new Error('Joining took too long.')), CONNECT_TIMEOUT_MS);
      this.open().catch((error) => this.fail(error));
    });
  }

  async open() {
    const pc = new RTCPeerConnection({
      iceServers: this.credentials.iceServers ?? [],
      bundlePolicy: 'max-bundle',
      rtcpMuxPolicy: 'require',
    });
    this.pc = pc;
    for (const line of this.credentials.lines) {
      const link = new RoomsLine(this, line);
      this.links.set(line.groupId, link);
      link.transceiver = pc.addTransceiver(link.track ?? 'audio', { direction: directions(line) });
    }
    pc.ontrack = ({ transceiver, track }) => {
      const link = [...this.links.values()].find((l) => l.transceiver === transceiver);
      if (link) this.events.onRemoteStream(link.line.groupId, new MediaStream([track]));
    };
    pc.oniceconnectionstatechange = () => this.onIce(pc.iceConnectionState);
    pc.onconnectionstatechange = () => this.onState(pc.connectionState);
    await this.negotiate(false);
    for (const link of this.links.values()) if (link.talking) link.sendTalking(true);
  }

  /**
   * An offer of the peer connection as it stands, to control, and its answer applied. No waiting
   * for candidates: the rooms are ICE-lite and learn the panel's address from its checks.
   */
  async negotiate(renegotiation) {
    const pc = this.pc;
    await pc.setLocalDescription(await pc.createOffer());
    const offer = pc.localDescription.sdp;
    const body = { token: this.credentials.token, offer, lines: this.linesOf(offer), renegotiation };
    const { answer } = await api('/session/media', { method: 'POST', body: JSON.stringify(body) });
    if (this.closed) return;
    await pc.setRemoteDescription({ type: 'answer', sdp: answer });
  }

  /** The line of each m-line of `sdp`, in order, by its mid (null: a stopped transceiver's). */
  linesOf(sdp) {
    const byMid = new Map([...this.links.values()].map((link) => [link.transceiver.mid, link.line.groupId]));
    return sdp
      .split('\r\nm=')
      .slice(1)
      .map((section) => byMid.get(/\r\na=mid:(\S+)/.exec(`\r\n${section}`)?.[1]) ?? null);
  }

  /** New offers one after the other; one that fails loses the connection (it joins again). */
  renegotiate() {
    this.negotiation = (this.negotiation ?? Promise.resolve())
      .then(() => (this.closed ? undefined : this.negotiate(true)))
      .catch((error) => this.fail(error));
    return this.negotiation;
  }

  onState(state) {
    if (this.closed) return;
    if (state === 'connected' && this.settle) {
      clearTimeout(this.timer);
      this.settle.resolve();
      this.settle = null;
      this.events.onConnected();
    } else if (state === 'failed' || state === 'closed') {
      this.fail(new Error('The audio connection was closed.'));
    }
  }

  onIce(state) {
    clearTimeout(this.iceTimer);
    if (this.closed || this.settle) return;
    const down = state === 'disconnected' || state === 'failed';
    if (down) {
      this.iceTimer = setTimeout(
        () => this.fail(new Error('The network path to the media server was lost.')),
        ICE_GRACE_MS,
      );
    }
    for (const groupId of this.links.keys()) this.events.onNetwork(groupId, !down);
  }

  /** The lines still on (every line: the rooms take none away alone). */
  get liveLinks() {
    return [...this.links.values()];
  }

  /**
   * Who else is on each line and who talks there (the session stream's `members`), as a Janus
   * panel has them from its rooms: `muted` is a key off.
   */
  setMembers(lines) {
    if (this.closed) return;
    for (const { groupId, members } of lines) {
      if (!this.links.has(groupId)) continue;
      const people = new Map(members.map((m) => [m.identity, { display: m.display, muted: !m.talking }]));
      this.events.onPeople(groupId, people);
    }
  }

  /** A direct line opened during the session: a transceiver more, offered again. */
  async addLine(info) {
    if (this.closed || this.links.has(info.groupId)) return;
    const link = new RoomsLine(this, info);
    this.links.set(info.groupId, link);
    link.transceiver = this.pc.addTransceiver(link.track ?? 'audio', { direction: directions(info) });
    await this.renegotiate();
    if (this.closed || this.links.get(info.groupId) !== link) return;
    if (link.talking) link.sendTalking(true);
    this.events.onDirectJoined(info.groupId);
  }

  /** A direct line closed: its transceiver stopped and offered again; the others go on. */
  dropLine(groupId) {
    const link = this.links.get(groupId);
    if (!link || this.closed) return;
    this.links.delete(groupId);
    link.transceiver.stop();
    link.close();
    this.renegotiate();
  }

  setTalking(groupId, on) {
    if (on) this.talking.add(groupId);
    else this.talking.delete(groupId);
    this.links.get(groupId)?.setTalking(on);
  }

  fail(error) {
    if (this.closed) return;
    this.close();
    if (this.settle) this.settle.reject(error);
    else this.events.onLost(error.message);
  }

  /** The admin disconnected the session (its event stream says so). */
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
    clearTimeout(this.iceTimer);
    for (const link of this.links.values()) link.close();
    this.pc?.close();
  }
}

/** One line of a RoomsConnection: its transceiver, its clone of the microphone, its key. */
class RoomsLine {
  constructor(connection, line) {
    this.connection = connection;
    this.line = line;
    this.ended = false;
    this.transceiver = null;
    this.talking = Boolean(line.talk && connection.talking.has(line.groupId));
    this.track = line.talk ? connection.microphone.clone() : null;
    if (this.track) this.track.enabled = this.talking;
    this.previous = {};
    // Key changes in order: a release never overtakes its press.
    this.sent = Promise.resolve();
  }

  setTalking(on) {
    if (!this.track) return;
    this.talking = on;
    this.track.enabled = on;
    this.sendTalking(on);
  }

  sendTalking(on) {
    const { token } = this.connection.credentials;
    const body = JSON.stringify({ token, groupId: this.line.groupId, talking: on });
    this.sent = this.sent
      .then(() => api('/session/talk', { method: 'POST', body }))
      .catch((error) => {
        // A key refused (the admin holds the line, the session ended) is shown by its event.
        console.warn(`talk on ${this.line.name}: ${error.message}`);
      });
  }

  /** The line's link figures, from its receiver (its sender on a talk-only line). */
  async measure() {
    const pc = this.connection.pc;
    if (!pc || this.connection.closed || pc.connectionState !== 'connected') return null;
    const { receiver, sender } = this.transceiver;
    return linkFigures(this.line.groupId, await (this.line.listen ? receiver : sender).getStats(), this.previous);
  }

  close() {
    this.track?.stop();
  }
}
