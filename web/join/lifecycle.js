// The page's state machine: idle → joining → connected ⇄ reconnecting; kicked and error end it.
// Joining asks control for a token and opens a Connection (connection.js) for the lines it
// names; a lost connection rejoins with backoff; Leave, a kick or a refusal ends the session.

import { HttpError, api } from '/join/api.js';
import { Connection, KickedError, initJanus } from '/join/connection.js';
import { followEvents } from '/join/events.js';
import { releaseHeld, showAnnounce, showMicMuted } from '/join/keys.js';
import { linesOf, setLines } from '/join/lines.js';
import { followLinks, stopLinks } from '/join/link.js';
import { closeMicrophone, openMicrophone } from '/join/microphone.js';
import { clearPeople, directJoined } from '/join/people.js';
import { showRemote } from '/join/remote.js';
import { RoomsConnection } from '/join/rooms.js';
import { lineById, session } from '/join/session.js';
import { root, showJoinError, showMessage, ui } from '/join/ui.js';
import { dropWakeLock, holdWakeLock } from '/join/wake-lock.js';

const BACKOFF_MS = [1_000, 2_000, 4_000, 8_000, 15_000];
const KICKED_DETAIL = 'An admin ended your connection. Join again only if you should be on these lines.';

export function setState(state, text) {
  const was = root.dataset.state;
  root.dataset.state = state;
  ui.status.textContent = text;
  const inCall = state !== 'idle';
  ui.joinView.hidden = inCall;
  ui.callView.hidden = !inCall;
  ui.who.hidden = !inCall;
  for (const line of session.lines) line.q('[data-action="talk"]').disabled = state !== 'connected' || line.ended;
  if (state !== 'connected' && was === 'connected') releaseHeld();
  if (state === 'connected') holdWakeLock();
  else if (state !== 'reconnecting') dropWakeLock();
  const over = state === 'kicked' || state === 'error';
  if (over) for (const line of session.lines) if (line.talk !== 'off') line.setTalk('off');
  ui.leave.textContent = over ? 'Back' : 'Leave';
  ui.rejoin.hidden = !over;
}

function connectedText() {
  const live = session.lines.filter((line) => !line.ended);
  return live.length === 1 ? `Connected to ${live[0].info.name}` : `Connected to ${live.length} lines`;
}

/**
 * What POST /api/token is asked for: the user's choice, less the lines the admin took away (as
 * listen and talk lists of the lines the last token had).
 */
function tokenRequest() {
  if (session.ended.size === 0 || !session.token) return session.request;
  const kept = linesOf(session.token).filter((line) => !session.ended.has(line.groupId));
  return {
    listen: kept.filter((line) => line.listen).map((line) => line.groupId),
    talk: kept.filter((line) => line.talk).map((line) => line.groupId),
  };
}

/** A rejoin keeps the panel key (its remote control's link) when control still allows it. */
function resumeRequest() {
  const previous = session.token;
  return previous?.panelKey ? { resume: { token: previous.token, panelKey: previous.panelKey } } : {};
}

export async function join() {
  clearTimeout(session.retryTimer);
  const reconnecting = session.attempt > 0;
  setState(
    reconnecting ? 'reconnecting' : 'joining',
    reconnecting ? 'Rejoining every line…' : `Joining ${session.label}…`,
  );
  try {
    await initJanus();
    const answer = await api('/token', {
      method: 'POST',
      body: JSON.stringify({
        username: session.username,
        ...tokenRequest(),
        ...(session.pin ? { pin: session.pin } : {}),
        ...resumeRequest(),
      }),
    });
    session.token = answer;
    setLines(linesOf(answer));
    showRemote();
    showAnnounce();
    if (session.lines.some((line) => line.canTalk)) await openMicrophone();
    const talking = new Set(session.lines.filter((line) => line.talk === 'latched').map((line) => line.groupId));
    // The media server the token names: Janus's rooms, or partyline's own (rooms.js).
    const Media = answer.engine === 'bridged' ? RoomsConnection : Connection;
    const connection = new Media(
      { ...answer, lines: session.lines.filter((line) => !line.ended).map((line) => line.info) },
      session.username,
      session.microphone,
      talking,
      connectionEvents,
    );
    session.connection = connection;
    session.netDown.clear();
    await connection.start();
  } catch (error) {
    onJoinFailed(error);
  }
}

const connectionEvents = {
  onConnected() {
    session.attempt = 0;
    showMessage(null);
    setState('connected', connectedText());
    if (session.token?.token) followEvents(session.token.token, onMoved);
    followLinks();
  },
  onLost(reason) {
    scheduleReconnect(reason);
  },
  onKicked() {
    endWith('kicked', 'Disconnected by the admin', KICKED_DETAIL);
  },
  onNetwork(groupId, ok) {
    if (ok) session.netDown.delete(groupId);
    else session.netDown.add(groupId);
    const state = root.dataset.state;
    if (!ok && state === 'connected') {
      setState('reconnecting', 'Network lost: waiting for it to come back…');
      showMessage(`No audio path to the server on ${lineById(groupId)?.info.name ?? groupId}.`, false);
    } else if (
      ok &&
      session.netDown.size === 0 &&
      state === 'reconnecting' &&
      session.connection &&
      !session.retryTimer
    ) {
      showMessage(null);
      setState('connected', connectedText());
    }
  },
  onRemoteStream(groupId, stream) {
    lineById(groupId)?.output.attach(stream);
  },
  onPeople(groupId, people) {
    lineById(groupId)?.setPeople(people);
  },
  onDirectJoined(groupId) {
    directJoined(groupId);
  },
  onLineEnded(groupId) {
    const line = lineById(groupId);
    session.ended.add(groupId);
    session.netDown.delete(groupId);
    line?.end();
    showMicMuted();
    if (root.dataset.state === 'connected') setState('connected', connectedText());
  },
};

/** The session's media server node went away: every line joins again at once, elsewhere. */
function onMoved(from) {
  if (session.connection?.closed !== false) return; // the connection's close came first
  scheduleReconnect(`The media server${from ? ` ${from}` : ''} was lost: joining again.`);
}

function onJoinFailed(error) {
  session.connection?.close();
  session.connection = null;
  if (error instanceof KickedError) {
    endWith('kicked', error.message, KICKED_DETAIL);
  } else if (error instanceof HttpError && error.status === 401 && /pin/.test(error.code ?? '')) {
    askPin(error);
  } else if (error instanceof HttpError && error.status === 429) {
    backToForm(`Too many tries: wait a minute, then join again. (${error.message})`);
  } else if (error instanceof HttpError && error.status >= 400 && error.status < 500) {
    // The server refuses this name or line (e.g. the group was deleted): retrying won't help.
    endWith('error', error.message);
  } else if (session.attempt > 0) {
    scheduleReconnect(error.message);
  } else {
    endWith('error', `Could not join: ${error.message}`);
  }
}

function scheduleReconnect(reason) {
  session.events?.abort();
  session.connection?.close();
  session.connection = null;
  for (const line of session.lines) line.disconnect();
  const delay = session.attempt === 0 ? 0 : BACKOFF_MS[Math.min(session.attempt - 1, BACKOFF_MS.length - 1)];
  session.attempt += 1;
  // ±20 % jitter, so that a room full of phones does not come back in lockstep.
  const wait = Math.round(delay * (0.8 + Math.random() * 0.4));
  setState(
    'reconnecting',
    wait > 0 ? `Connection lost. Rejoining in ${Math.ceil(wait / 1000)} s…` : 'Connection lost. Rejoining…',
  );
  showMessage(reason, false);
  session.retryTimer = setTimeout(() => {
    session.retryTimer = null;
    join();
  }, wait);
}

function stopSession() {
  stopLinks();
  clearTimeout(session.retryTimer);
  session.retryTimer = null;
  session.events?.abort();
  session.events = null;
  session.connection?.close();
  session.connection = null;
  session.attempt = 0;
  for (const line of session.lines) line.disconnect();
}

function endWith(state, text, detail = text) {
  stopSession();
  closeMicrophone();
  setState(state, text);
  showMessage(detail, true);
}

export function leave() {
  stopSession();
  closeMicrophone();
  for (const line of session.lines) line.destroy();
  session.lines = [];
  session.ended.clear();
  session.token = null;
  clearPeople();
  showRemote();
  showAnnounce();
  showMessage(null);
  setState('idle', 'Not connected');
  ui.username.focus();
}

function backToForm(text) {
  leave();
  showJoinError(text);
}

function askPin(error) {
  const wrong = error.code === 'wrong_pin';
  backToForm(wrong ? 'Wrong PIN: try again.' : `${session.label} needs a PIN.`);
  ui.pinField.hidden = false;
  ui.pin.value = '';
  ui.pin.focus();
}

/** Joins again after a kick or an error, asking for every line of the choice again. */
export function rejoin() {
  session.ended.clear();
  for (const line of session.lines.filter((l) => l.ended)) line.destroy();
  session.lines = session.lines.filter((l) => !l.ended);
  session.attempt = 0;
  showMessage(null);
  join();
}

// The device says its network is back: a rejoin waiting out its backoff goes now.
window.addEventListener('online', () => {
  if (root.dataset.state !== 'reconnecting' || !session.retryTimer) return;
  clearTimeout(session.retryTimer);
  session.retryTimer = null;
  join();
});
