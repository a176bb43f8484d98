// Screen Wake Lock while connected: a phone in a pocket keeps the panel alive. The browser
// drops the lock whenever the page is hidden, so it is taken again when the page shows.

import { root } from '/join/ui.js';

let wakeLock = null;

export async function holdWakeLock() {
  if (!('wakeLock' in navigator) || wakeLock || document.visibilityState !== 'visible') return;
  try {
    wakeLock = await navigator.wakeLock.request('screen');
    wakeLock.addEventListener('release', () => {
      wakeLock = null;
    });
  } catch {
    // refused (battery saver, no permission): the panel works, the screen may sleep
  }
}

export function dropWakeLock() {
  wakeLock?.release().catch(() => {});
  wakeLock = null;
}

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && root.dataset.state === 'connected') holdWakeLock();
});
