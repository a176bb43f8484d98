// The microphone: opened once a line can talk, kept over reconnects (a new connection gets the
// same track), closed when the session ends; and the page's meter clock, which publishes the
// microphone's level (`data-level-out`) and has every line read its own.

import { METER_INTERVAL_MS, Meter, audioContext, drawMeter } from '/join/audio.js';
import { microphoneProblem } from '/join/connection.js';
import { showMicMuted } from '/join/keys.js';
import { dimProgramLines } from '/join/program.js';
import { session } from '/join/session.js';
import { root, ui } from '/join/ui.js';

const micMeter = new Meter();
let micSource = null;

export async function openMicrophone() {
  if (session.microphone?.readyState === 'live') return;
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
  } catch (error) {
    throw new Error(microphoneProblem(error), { cause: error });
  }
  session.microphone = stream.getAudioTracks()[0];
  micSource?.disconnect();
  const ctx = audioContext();
  micSource = ctx.createMediaStreamSource(stream);
  micMeter.tap(micSource);
  showMicMuted();
}

export function closeMicrophone() {
  micMeter.untap();
  micSource?.disconnect();
  micSource = null;
  session.microphone?.stop();
  session.microphone = null;
  delete root.dataset.levelOut;
  drawMeter(ui.meterOut, null, null);
}

/** Every METER_INTERVAL_MS: the microphone's meter, then each line's, then the program dim. */
export function startMeters() {
  setInterval(() => {
    const mic = micMeter.read();
    if (mic === null) delete root.dataset.levelOut;
    else root.dataset.levelOut = mic.toFixed(1);
    if (mic !== null) drawMeter(ui.meterOut, null, mic);
    for (const line of session.lines) line.meter();
    dimProgramLines();
  }, METER_INTERVAL_MS);
}
