// Each line's listen switch and volume, remembered in localStorage by group id, so that a line
// comes back as the user left it (also on another position that has it).

import { session } from '/join/session.js';

const LINES_KEY = 'partyline.lines';

export function loadLineSettings() {
  try {
    return JSON.parse(localStorage.getItem(LINES_KEY) ?? '{}');
  } catch {
    return {};
  }
}

export function saveLineSettings() {
  const all = loadLineSettings();
  for (const line of session.lines) all[line.groupId] = { volume: line.volume, listen: line.listenOn };
  try {
    localStorage.setItem(LINES_KEY, JSON.stringify(all));
  } catch {
    // not remembered
  }
}
