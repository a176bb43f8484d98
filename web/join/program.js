// Program lines (the show's sound, `program` in the token's lines): a panel dims them by the
// token's `programDimDb` while someone is heard on any of its other lines or its user talks, as
// a ducker does, and brings them back after a short hold, so that the crew never miss a word
// spoken to them under the show. Run at every meter tick (microphone.js), from the meters the
// lines have just read.

import { session } from '/join/session.js';

/** A line counts as heard from this level (dBFS, after listen and volume): a voice, not hiss. */
const HEARD_DB = -45;
/** The dim stays this long after the last word, so that it does not pump between words. */
const HOLD_MS = 600;

let lastHeard = -Infinity;

export function dimProgramLines(now = performance.now()) {
  const programs = session.lines.filter((line) => line.info.program && !line.ended);
  if (programs.length === 0) return;
  const talking = session.lines.some((line) => line.canTalk && line.talk !== 'off');
  const heard = session.lines.some((line) => !line.info.program && !line.ended && line.heardDb > HEARD_DB);
  if (talking || heard) lastHeard = now;
  const dimDb = Math.min(0, session.token?.programDimDb ?? 0);
  const dimmed = dimDb < 0 && now - lastHeard < HOLD_MS;
  for (const line of programs) line.setDimmed(dimmed ? dimDb : 0);
}
