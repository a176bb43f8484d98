// The colour theme of every page: follows the system until the user picks one with the theme
// button (system → light → dark → system); the pick is remembered in this browser
// (localStorage), shared by the join page and the admin UI. The style sheet reads
// `<html data-theme="light|dark">`; no attribute means "follow prefers-color-scheme".

const THEMES = ['system', 'light', 'dark'];
const THEME_KEY = 'partyline.theme';

function stored() {
  try {
    const theme = localStorage.getItem(THEME_KEY);
    return THEMES.includes(theme) ? theme : 'system';
  } catch {
    return 'system'; // storage disabled: follow the system
  }
}

function apply(theme, button) {
  const root = document.documentElement;
  if (theme === 'light' || theme === 'dark') root.dataset.theme = theme;
  else delete root.dataset.theme;
  if (!button) return;
  const label = theme === 'system' ? 'follows the system' : theme;
  button.setAttribute('aria-label', `Colour theme: ${label}. Change`);
  button.title = `Theme: ${label}`;
}

/** Applies the remembered theme and makes `button` cycle through the themes. */
export function initTheme(button) {
  let theme = stored();
  apply(theme, button);
  button?.addEventListener('click', () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    try {
      localStorage.setItem(THEME_KEY, theme);
    } catch {
      // not remembered, but applied
    }
    apply(theme, button);
  });
}
